"""Proving a spec in one sandbox (validation, then the quality gates) and the corpus command
that does it for every generated spec: a valid spec passes, a planted trivial one is rejected
by a gate after it validates, a clone of an earlier spec is rejected by the corpus-wide gate,
and the corpus report says how many, how fast and why."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from test_synth_gates_docker import TRIVIAL  # this folder is on the path

from cowork.cli import synth as synth_cli
from cowork.sandbox.pool import SandboxPool
from cowork.synth.family import generate, write_draft
from cowork.synth.prove import prove

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]


async def test_a_valid_spec_is_proved_in_one_sandbox_and_a_trivial_one_is_rejected_by_a_gate(tmp_path, monkeypatch):
    started: list[int] = []
    close = SandboxPool.close

    async def counting_close(self):
        started.append(self.stats["started"])
        await close(self)

    monkeypatch.setattr(SandboxPool, "close", counting_close)
    good = await prove(ROOT / "specs" / "fix-csv-report")
    assert good.ok, good.reasons
    assert good.validation.ok and good.trivial is not None and not good.trivial.refused
    assert started == [1], "validation and the gates did not share one sandbox"
    assert any(f.step == "build" and "bundle" in f.detail for f in good.validation.findings)

    (tmp_path / "planted").mkdir()
    (tmp_path / "planted" / "task.yaml").write_text(TRIVIAL)
    bad = await prove(tmp_path / "planted")
    assert bad.validation.ok, "the planted spec should validate: only a gate can catch it"
    assert not bad.ok and set(bad.kinds()) == {"gate trivial"}
    assert any("trips none of the 1 safety rule" in r for r in bad.reasons)

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "task.yaml").write_text(TRIVIAL.replace("type: file_absent", "type: no_such_check"))
    nothing = await prove(broken)
    assert not nothing.ok and nothing.kinds() and all(k == "invalid schema" for k in nothing.kinds())


def test_the_corpus_rejects_a_clone_and_a_trivial_spec_and_reports_why(tmp_path):
    out = tmp_path / "corpus"
    first = write_draft(generate("comms_thread_internal_answer", 11), out)
    clone = out / "comms_thread_internal_answer-clone"
    shutil.copytree(first, clone)
    text = (clone / "task.yaml").read_text()
    (clone / "task.yaml").write_text(text.replace(f"id: {first.name}\n", "id: the-clone\n", 1))
    planted = out / "planted"
    planted.mkdir()
    (planted / "task.yaml").write_text(TRIVIAL)
    written = [("comms_thread_internal_answer", first), ("comms_thread_internal_answer", clone), ("planted", planted)]
    figures = asyncio.run(synth_cli._prove_corpus(out, written, concurrency=2, gates=True, fix_difficulty=False))
    assert figures["valid"] == 1 and figures["invalid"] == 2
    assert figures["rejects_by_reason"].keys() == {"gate trivial", "gate near-duplicate"} or \
        figures["rejects_by_reason"].keys() == {"gate trivial", "gate clone"}
    assert first.is_dir() and not clone.exists() and (out / "_invalid" / clone.name / "validation.json").is_file()
    assert not planted.exists() and (out / "_invalid" / "planted").is_dir()
    report = json.loads((out / "corpus-report.json").read_text())
    assert report["valid_per_second"] > 0 and report["gates"] is True
    verdicts = {r["task"]: r for r in json.loads((out / "validation.json").read_text())}
    assert verdicts[first.name]["ok"] and not verdicts["the-clone"]["ok"] and not verdicts["planted-delete-the-cache"]["ok"]
    assert any(f["step"].startswith("gate") for f in verdicts["the-clone"]["findings"])
