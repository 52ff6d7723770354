"""``synth corpus`` writes its drafts from worker processes once there are enough of them:
the same bytes in the same order as one process writes, a generator's failure costs only its
spec, and a resume that refuses a spec on disk stops the workers and leaves no staging
folder behind."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from cowork.cli import synth as synth_cli
from cowork.errors import CoworkError

COUNTS = {"comms_thread_internal_answer": 3, "finance-expense-audit": 3, "comms_news_digest": 2}


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _generate(out: Path, monkeypatch, parallel: bool, **kw):
    monkeypatch.setattr(synth_cli, "DRAFTS_PARALLEL_FROM", 2 if parallel else 10**9)
    written: list = []
    failed, kept = synth_cli._generate_corpus(out, COUNTS, 5, written, resume=kw.get("resume", False),
                                              journaled=kw.get("journaled", {}))
    return written, failed, kept


def test_workers_write_the_same_corpus_in_the_same_order(tmp_path, monkeypatch):
    serial, _, _ = _generate(tmp_path / "serial", monkeypatch, parallel=False)
    parallel, failed, _ = _generate(tmp_path / "parallel", monkeypatch, parallel=True)
    assert not failed
    assert [(n, f.name) for n, f in parallel] == [(n, f.name) for n, f in serial]
    assert _files(tmp_path / "parallel") == _files(tmp_path / "serial")
    assert not (tmp_path / "parallel" / synth_cli._STAGING).exists()


def test_a_generator_that_raises_costs_its_spec_alone(tmp_path, monkeypatch):
    family = importlib.import_module("cowork.synth.family")
    real = family.generate

    def flaky(name, seed, difficulty=None):
        if (name, seed) == ("finance-expense-audit", 6):
            raise ValueError("no vendor left")
        return real(name, seed, difficulty)

    monkeypatch.setattr(family, "generate", flaky)  # forked workers inherit the patch
    written, failed, _ = _generate(tmp_path / "c", monkeypatch, parallel=True)
    assert failed == {"finance-expense-audit-6": "ValueError: no vendor left"}
    assert len(written) == sum(COUNTS.values()) - 1


def test_a_refused_resume_stops_the_workers_and_leaves_no_staging(tmp_path, monkeypatch):
    out = tmp_path / "c"
    written, _, _ = _generate(out, monkeypatch, parallel=True)
    first = written[0][1] / "task.yaml"
    first.write_text(first.read_text() + "# edited\n")
    with pytest.raises(CoworkError, match="differs from what these options generate"):
        _generate(out, monkeypatch, parallel=True, resume=True)
    assert not (out / synth_cli._STAGING).exists()
    first.write_text(first.read_text().removesuffix("# edited\n"))
    again, failed, kept = _generate(out, monkeypatch, parallel=True, resume=True)
    assert not failed and kept == len(written) and again == written
