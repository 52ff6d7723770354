"""The static gates over cached per-spec features (cowork.synth.features) judge a batch exactly as
the gates over loaded specs do: the same pairs, clones, answer verdicts, difficulty and
diversity, whether the features were just computed or read back; an entry is keyed by what the
spec holds (never its path or mtime) and by the code; a torn or foreign entry is computed
again. The timings are in docs/performance.md ("The static gates"); none here.

No Docker needed.
"""

from __future__ import annotations

import json
import os
import shutil
import zlib
from pathlib import Path

import pytest
from test_gates_planted import KB_ANSWER, MAIL, _pair, _write

from cowork import settings
from cowork.cli import main
from cowork.errors import SpecError
from cowork.spec import loader as spec_loader
from cowork.spec.loader import load_spec
from cowork.synth import features, gates
from cowork.synth.family import generate, write_draft

FAMILIES = ["sales-account-review", "sched_series_exceptions", "mt_change_of_mind"]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COWORK_CACHE", str(tmp_path / "cache"))
    settings.reload()
    features.exact_seeds.cache_clear()
    yield tmp_path / "cache" / "gate-features"
    settings.get.cache_clear()
    features.exact_seeds.cache_clear()


@pytest.fixture
def batch(tmp_path) -> list[Path]:
    """A clone pair, a copy under another id (a near-duplicate), a hedged answer, three
    generated specs, each in its own folder."""
    folders = list(_pair(tmp_path / "b"))
    copy = MAIL.replace("id: planted-forward-invoices", "id: planted-forward-invoices-copy")
    folders.append(_write(tmp_path / "b" / "c-copy", copy))
    folders.append(_write(tmp_path / "b" / "d-kb", KB_ANSWER))
    for n, name in enumerate(FAMILIES):
        folders.append(write_draft(generate(name, 7200 + n), tmp_path / "b"))
    return sorted(folders)


def _as_loaded(folders: list[Path]) -> dict:
    loaded = [load_spec(f) for f in folders]
    return {"near": [p.as_dict() for p in gates.near_duplicates(loaded)],
            "clones": [p.as_dict() for p in gates.structural_duplicates(loaded)],
            "answers": {f"{ls.spec.id} ({ls.path})": gates.answer_gate(ls).as_dict() for ls in loaded},
            "difficulty": [gates.difficulty(ls, 0.25).as_dict() for ls in loaded],
            "diversity": gates.diversity(loaded).as_dict()}


def _as_features(feats: list) -> dict:
    assert all(isinstance(f, features.SpecFeatures) for f in feats), feats
    return {"near": [p.as_dict() for p in features.near_duplicates(feats)],
            "clones": [p.as_dict() for p in features.structural_duplicates(feats)],
            "answers": {f.key: f.answer.as_dict() for f in feats},
            "difficulty": [f.difficulty.scored(0.25).as_dict() for f in feats],
            "diversity": features.diversity(feats).as_dict()}


def test_the_gates_over_features_equal_the_gates_over_loaded_specs(batch, cache):
    expected = _as_loaded(batch)
    assert len(expected["near"]) == 1 and len(expected["clones"]) == 3  # the copy is a clone too
    assert any(a["hedged_passes"] for a in expected["answers"].values())
    cold = _as_features(features.each(batch))
    assert len(list(cache.glob("*.json.z"))) == len(batch)
    features.exact_seeds.cache_clear()
    warm = _as_features(features.each(batch))
    assert expected == cold == warm


def test_a_warm_batch_loads_no_spec_but_the_candidates_of_a_pair(batch, monkeypatch):
    features.each(batch)
    loads: list[str] = []
    real = features.load_spec
    monkeypatch.setattr(features, "load_spec", lambda p: loads.append(str(p)) or real(p))
    feats = features.each(batch)
    assert loads == []  # every feature read from its entry
    features.near_duplicates(feats)
    assert sorted(Path(p).parent.name for p in loads) == ["a-original", "c-copy"]  # confirmed exactly


def test_the_key_is_the_content_not_the_path_or_mtime(batch, tmp_path, cache):
    first = features.of_path(batch[0])
    moved = tmp_path / "elsewhere" / "x"
    shutil.copytree(batch[0], moved)
    again = features.of_path(moved)
    assert again.path == str(moved / "task.yaml") and again.key.endswith(f"({moved / 'task.yaml'})")
    assert again.as_json() == first.as_json() and len(list(cache.glob("*.json.z"))) == 1
    # Rewritten with the same size and mtime: read fresh.
    file = moved / "task.yaml"
    st = file.stat()
    text = file.read_text()
    file.write_text(text.replace("Priya, Tom and Lena", "Priya, Tim and Lena"))
    os.utime(file, ns=(st.st_atime_ns, st.st_mtime_ns))
    changed = features.of_path(moved)
    assert changed.as_json() != first.as_json() and len(list(cache.glob("*.json.z"))) == 2
    # A file beside task.yaml is part of what the spec is.
    (moved / "notes.txt").write_text("x")
    features.of_path(moved)
    assert len(list(cache.glob("*.json.z"))) == 3


def test_a_torn_or_foreign_entry_is_computed_again(batch, cache):
    expected = features.of_path(batch[-1]).as_json()
    (entry,) = cache.glob("*.json.z")
    for junk in [b"not zlib", zlib.compress(b'{"v": 1, "id": "x"}'), zlib.compress(json.dumps(expected | {"v": 0}).encode()),
                 zlib.compress(json.dumps(expected | {"seed_signature": "AAAA"}).encode())]:
        entry.write_bytes(junk)
        assert features.of_path(batch[-1]).as_json() == expected


def test_a_spec_that_does_not_load_is_its_error_and_is_not_cached(tmp_path, cache):
    broken = _write(tmp_path / "broken", MAIL + "titel: typo\n")
    got = features.of_path(broken)
    assert isinstance(got, SpecError) and "titel: unknown field" in str(got)
    assert isinstance(features.of_path(tmp_path / "missing"), SpecError)
    assert not cache.exists() or not list(cache.glob("*.json.z"))


def test_features_in_processes_equal_those_in_one(batch, monkeypatch):
    serial = features.each(batch)
    shutil.rmtree(features.cache_dir())
    monkeypatch.setattr(features, "PARALLEL_FROM", 1)
    monkeypatch.setattr(spec_loader.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    parallel = features.each(batch)
    assert [f.as_json() for f in parallel] == [f.as_json() for f in serial]


def test_the_check_command_answers_the_same_cold_warm_and_from_loaded_specs(batch, capsys, cache):
    folder = batch[0].parent

    def check(*extra: str) -> dict:
        main(["synth", "check", str(folder), "--static", "--json", *extra])
        return json.loads(capsys.readouterr().out)

    cold = check()
    warm = check()
    shutil.rmtree(cache)
    assert cold == warm and len(cold["refused"]) == 3  # the clone, the copy, the hedged answer
    assert cold["specs"] == len(batch)
    loaded = [load_spec(f) for f in batch]
    direct = {f"{p['second']}" for p in [x.as_dict() for x in gates.near_duplicates(loaded)]}
    assert direct <= set(cold["refused"])


def test_only_specs_that_share_a_skeleton_are_shaped_and_the_shape_is_kept(batch, cache, monkeypatch):
    """Replacing the entities of a seed is the dearest feature (about 0.1 s a spec): a cold
    check shapes only the specs that share a skeleton (the three clones here, not the four
    others) and writes the signature back, so the next check shapes none."""
    shaped: list[str] = []
    real = features._seed_sets
    monkeypatch.setattr(features, "_seed_sets", lambda ld, names, memo: shaped.append(ld.spec.id) or real(ld, names, memo))
    feats = features.each(batch)
    assert shaped == [] and all(f.shape_signature is None for f in feats)
    first = [p.as_dict() for p in features.structural_duplicates(feats)]
    assert len(shaped) == 3 and len(first) == 3
    kept = {f.id: json.loads(zlib.decompress(f.entry.read_bytes()))["shape_signature"] for f in feats}
    assert sorted(k for k, v in kept.items() if v is not None) == sorted(
        {p[k].split(" (")[0] for p in first for k in ("first", "second")})
    features.exact_seeds.cache_clear()
    monkeypatch.setattr(features, "_shape_signature", lambda *a: pytest.fail("shaped again"))
    again = features.each(batch)
    assert [p.as_dict() for p in features.structural_duplicates(again)] == first
