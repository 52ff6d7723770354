"""The fast load (cowork.spec.fastyaml: no line map, the collector paused, a cache keyed by the
text) gives the spec the strict, line-mapping load gives, and hands every spec it cannot vouch
for to the strict load, so a broken spec is reported exactly as before.

No Docker needed. Each test gets its own cache folder (``COWORK_CACHE``).
"""

from __future__ import annotations

import gc
import json
import os
import zlib
from pathlib import Path

import pytest
import yaml

from cowork import settings
from cowork.errors import SpecError
from cowork.spec import fastyaml
from cowork.spec import loader as spec_loader
from cowork.spec.loader import load_spec
from cowork.synth.family import generate, write_draft

ROOT = Path(__file__).resolve().parents[2]
CURATED = sorted((ROOT / "specs").glob("*/task.yaml"))
BROKEN = sorted((ROOT / "tests" / "fixtures" / "broken_specs").glob("*/task.yaml"))
#: World generators whose specs carry YAML aliases (the first two), an attachment file beside
#: task.yaml, a workspace, scripted turns; each spec is 160-260 KB.
GENERATED = ["sales-account-review", "sched_series_exceptions", "support_attachment_filing", "ops_access_review",
             "mt_change_of_mind"]

BASE = """\
id: probe
title: Probe
prompt: Write done.txt.
checks:
  - {id: done, type: file_exists, path: done.txt}
oracle:
  - tool: write_file
    args: {path: done.txt, content: "ok"}
"""


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COWORK_CACHE", str(tmp_path / "cache"))
    settings.reload()
    yield tmp_path / "cache" / "spec-yaml"
    settings.get.cache_clear()  # read again once monkeypatch has put the environment back


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("generated")
    return {name: write_draft(generate(name, 7000), out) / "task.yaml" for name in GENERATED}


def _outcome(load, file: Path):
    """The spec, or the problems of the SpecError."""
    try:
        return load(file).spec
    except SpecError as exc:
        return exc.problems


def _write(tmp_path: Path, text: str, name: str = "t") -> Path:
    (tmp_path / name).mkdir(exist_ok=True)
    file = tmp_path / name / "task.yaml"
    file.write_text(text)
    return file


class TestSameSpec:
    @pytest.mark.parametrize("file", CURATED, ids=[p.parent.name for p in CURATED])
    def test_curated(self, file):
        fast = spec_loader._load_fast(file)
        assert fast is not None, "the fast path gave up on a curated spec"
        assert fast.spec == spec_loader._load_strict(file).spec

    @pytest.mark.parametrize("name", GENERATED)
    def test_generated_cold_then_from_the_cache(self, name, generated, cache):
        file = generated[name]
        strict = spec_loader._load_strict(file).spec
        cold = spec_loader._load_fast(file)
        assert cold is not None and cold.spec == strict
        assert len(list(cache.glob("*.json.z"))) == 1
        warm = spec_loader._load_fast(file)
        assert warm is not None and warm.spec == strict

    def test_the_data_equals_the_strict_parse_aliases_included(self, generated):
        text = generated["sched_series_exceptions"].read_text()
        assert "&id001" in text  # the case this test is about
        data, plain = fastyaml.parse(text)
        assert plain and data == yaml.load(text, Loader=spec_loader._LineLoader)

    def test_load_spec_takes_the_fast_path_for_a_valid_spec(self, monkeypatch):
        def strict(file):
            raise AssertionError(f"strict load of {file}")

        monkeypatch.setattr(spec_loader, "_load_strict", strict)
        assert load_spec(CURATED[0].parent).spec.id == CURATED[0].parent.name

    def test_the_collector_runs_again_after_a_parse_that_fails(self):
        with pytest.raises(fastyaml.NotPlain):
            fastyaml.parse("a: [1, 2\n")
        assert gc.isenabled()


class TestBrokenSpecs:
    """Whatever the fast path sees, a broken spec is reported by the strict path, word for word."""

    @pytest.mark.parametrize("file", BROKEN, ids=[p.parent.name for p in BROKEN])
    def test_broken_fixtures_are_left_to_the_strict_path(self, file, monkeypatch):
        monkeypatch.chdir(file.parent.parent)
        rel = Path(file.parent.name)
        assert spec_loader._load_fast(rel / "task.yaml") is None
        with pytest.raises(SpecError) as info:
            load_spec(rel)
        assert info.value.problems == _outcome(spec_loader._load_strict, rel / "task.yaml")

    def test_a_big_generated_spec_with_an_unknown_field_names_file_line_and_field(self, generated, tmp_path,
                                                                                monkeypatch):
        text = generated["mt_change_of_mind"].read_text() + "titel: typo\n"
        _write(tmp_path, text)
        monkeypatch.chdir(tmp_path)
        with pytest.raises(SpecError) as info:
            load_spec("t")
        assert info.value.problems == [f"t/task.yaml:{text.count(chr(10))}: titel: unknown field; remove it or check "
                                       "its spelling (did you mean 'title'?)"]

    @pytest.mark.parametrize("extra", [
        "title: Again\n",                         # a duplicate key
        "base: &b {x: 1}\nmore:\n  <<: *b\n",     # a merge key
        "tags: !!set {a, b}\n",                   # a tag on a collection
        "? [a, b]\n: 1\n",                        # a key that is a list
        "difficulty: [hard\n",                    # a YAML error
        "clock: 2026-06-30\n",                    # a date, not a string
        "bad: \"\x07\"\n",                        # a raw control character
    ], ids=["duplicate", "merge", "set", "complex-key", "yaml-error", "date", "control-char"])
    def test_yaml_the_fast_parser_hands_over_gives_the_strict_outcome(self, extra, tmp_path, monkeypatch):
        monkeypatch.setattr(fastyaml, "CACHE_FROM", 0)  # and nothing of it is cached wrongly
        monkeypatch.chdir(tmp_path)
        file = _write(tmp_path, BASE + extra)
        first = _outcome(load_spec, Path("t"))
        assert first == _outcome(spec_loader._load_strict, Path("t/task.yaml"))
        assert _outcome(load_spec, Path("t")) == first  # again, with whatever the cache now holds
        assert file.exists()

    def test_a_duplicate_key_says_where_the_first_one_is(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)
        _write(tmp_path, BASE + "title: Again\n")
        with pytest.raises(SpecError, match=r"t/task.yaml:9: title: duplicate key 'title' \(first on line 2\)"):
            load_spec("t")

    def test_crlf_line_ends_load_the_same(self, tmp_path):
        file = tmp_path / "t" / "task.yaml"
        file.parent.mkdir()
        file.write_bytes(BASE.replace("\n", "\r\n").encode())
        assert load_spec(file).spec == spec_loader._load_strict(file).spec


class TestCache:
    def test_a_small_spec_is_not_cached(self, cache):
        load_spec(CURATED[0])
        assert not cache.exists() or not list(cache.iterdir())

    def test_a_changed_file_with_the_same_size_and_mtime_is_read_again(self, generated, tmp_path, cache):
        text = generated["mt_change_of_mind"].read_text()
        file = _write(tmp_path, text)
        stamp = file.stat().st_mtime_ns
        assert load_spec(file).spec.difficulty in ("easy", "medium", "hard")
        new_id = "x" * len(load_spec(file).spec.id)  # same length: same size
        file.write_text(text.replace(load_spec(file).spec.id, new_id, 1))
        os.utime(file, ns=(stamp, stamp))
        assert load_spec(file).spec.id == new_id
        assert len(list(cache.glob("*.json.z"))) == 2

    def test_a_file_made_invalid_with_the_same_mtime_is_refused_as_before(self, generated, tmp_path, monkeypatch):
        text = generated["mt_change_of_mind"].read_text()
        file = _write(tmp_path, text)
        stamp = file.stat().st_mtime_ns
        load_spec(file)
        file.write_text(text.replace("\nprompt:", "\nprompX:", 1))
        os.utime(file, ns=(stamp, stamp))
        monkeypatch.chdir(tmp_path)
        with pytest.raises(SpecError) as info:
            load_spec("t")
        assert info.value.problems == _outcome(spec_loader._load_strict, Path("t/task.yaml"))
        assert any(": prompX: unknown field" in p for p in info.value.problems)

    def test_a_poisoned_entry_cannot_make_a_spec_load(self, generated, tmp_path, monkeypatch):
        """The cache only stands in for the YAML parse: validation and the file checks run on
        every load, so an entry holding an invalid spec is refused, and the strict path reads
        the file itself."""
        file = _write(tmp_path, generated["mt_change_of_mind"].read_text())
        good = load_spec(file).spec
        (entry,) = fastyaml.cache_dir().glob("*.json.z")
        entry.write_bytes(zlib.compress(json.dumps({"id": "poison", "titel": "x"}).encode()))
        assert load_spec(file).spec == good
        entry.write_bytes(b"not zlib at all")
        assert load_spec(file).spec == good

    def test_an_entry_is_looked_up_by_content_not_by_path(self, generated, tmp_path, monkeypatch):
        parses = []
        parse = fastyaml.parse
        monkeypatch.setattr(fastyaml, "parse", lambda text: parses.append(1) or parse(text))
        text = generated["mt_change_of_mind"].read_text()
        first = load_spec(_write(tmp_path, text, "a")).spec
        assert load_spec(_write(tmp_path, text, "b")).spec == first and len(parses) == 1  # same text: a hit
        load_spec(_write(tmp_path, text + "\n", "c"))
        assert len(parses) == 2  # other text: a miss

    def test_a_date_is_parsed_but_not_cached(self, tmp_path, monkeypatch, cache):
        monkeypatch.setattr(fastyaml, "CACHE_FROM", 0)
        data, plain = fastyaml.parse("when: 2026-06-30\n")
        assert not plain and str(data["when"]) == "2026-06-30"
        fastyaml.load("when: 2026-06-30\n")
        assert not cache.exists() or not list(cache.glob("*.json.z"))

    def test_an_unwritable_cache_only_costs_time(self, generated, tmp_path, monkeypatch):
        blocker = tmp_path / "not-a-folder"
        blocker.write_text("")
        monkeypatch.setenv("COWORK_CACHE", str(blocker))
        settings.reload()
        file = generated["mt_change_of_mind"]
        assert load_spec(file).spec == spec_loader._load_strict(file).spec

    def test_prune_removes_the_oldest_entries(self, tmp_path):
        for n in range(8):
            entry = tmp_path / f"{n}.json.z"
            entry.write_bytes(b"x" * 100)
            os.utime(entry, (1_000_000 + n, 1_000_000 + n))
        (tmp_path / "keep.txt").write_bytes(b"x" * 1000)  # not an entry: never counted or removed
        assert fastyaml.prune(tmp_path, 1000) == 0
        assert fastyaml.prune(tmp_path, 600) == 4
        assert sorted(p.name for p in tmp_path.iterdir()) == ["4.json.z", "5.json.z", "6.json.z", "7.json.z",
                                                              "keep.txt"]
