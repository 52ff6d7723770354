"""The corpus-wide gates of ``cowork synth corpus --validate`` (near-duplicates and clones
among the specs proved ok) read each spec's cached features, not loaded specs: at 10,000
specs holding every loaded spec took about 15 GB. A spec proved ok that cannot be read when
the gates run is rejected, never kept unchecked. The proofs are stand-ins (no sandbox)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cowork import settings
from cowork.cli.synth import _corpus_gates
from cowork.spec import loader
from cowork.synth import features
from cowork.synth.family import generate, write_draft
from cowork.synth.prove import Proof


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COWORK_CACHE", str(tmp_path / "cache"))
    settings.reload()
    features.exact_seeds.cache_clear()
    yield
    settings.get.cache_clear()
    features.exact_seeds.cache_clear()


@pytest.fixture
def done(tmp_path) -> list[tuple[str, Path, Proof]]:
    """Two generated specs, a copy of the first under another id (written after it), and a
    spec a gate already refused while proving."""
    out = tmp_path / "corpus"
    first = write_draft(generate("comms_thread_internal_answer", 11), out)
    other = write_draft(generate("finance-expense-audit", 3), out)
    copy = out / "comms_thread_internal_answer-copy"
    shutil.copytree(first, copy)
    text = (copy / "task.yaml").read_text()
    (copy / "task.yaml").write_text(text.replace(f"id: {first.name}\n", "id: the-copy\n", 1))
    refused = write_draft(generate("comms_thread_internal_answer", 12), out)
    ok = [Proof(spec=str(f), task=f.name) for f in (first, other, copy)]
    return [("comms_thread_internal_answer", first, ok[0]), ("finance-expense-audit", other, ok[1]),
            ("comms_thread_internal_answer", copy, ok[2]),
            ("comms_thread_internal_answer", refused, Proof(spec=str(refused), reasons=["gate trivial: stand-in"]))]


def test_the_later_of_two_copies_goes_and_the_rest_keep_their_reasons(done):
    by_key = _corpus_gates(done)
    first, other, copy, refused = (folder.name for _, folder, _ in done)
    assert by_key[first] == [] and by_key[other] == []
    assert len(by_key[copy]) == 1 and by_key[copy][0].startswith(("gate near-duplicate: of", "gate clone: of"))
    assert first in by_key[copy][0]
    assert by_key[refused] == ["gate trivial: stand-in"]  # not compared: it was not proved ok


def test_a_second_pass_reads_the_cached_features_and_loads_no_spec(done, monkeypatch):
    expected = _corpus_gates(done)

    def no_load(*_a, **_k):
        raise AssertionError("a spec was loaded although its features were cached")

    monkeypatch.setattr(features, "load_spec", no_load)
    monkeypatch.setattr(loader, "load_spec", no_load)
    assert _corpus_gates(done) == expected


def test_a_spec_proved_ok_that_no_longer_reads_is_rejected(done):
    _, other, _ = done[1]
    (other / "task.yaml").write_text("id: [unclosed\n")
    by_key = _corpus_gates(done)
    assert len(by_key[other.name]) == 1 and by_key[other.name][0].startswith("gate unreadable:")
