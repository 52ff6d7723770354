"""``cowork synth corpus --validate`` keeps each proof in ``OUT/validation.journal.jsonl`` as it
finishes, so an interrupted run (Ctrl-C, a crash, a machine that goes away) loses no finished
proof and ``--resume`` proves only the rest; the reports then cover every spec, timed over
every run. The proofs here are stand-ins (no sandbox); one docker test runs the real ones."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import cowork.synth.prove as prove_module
from cowork.cli import main
from cowork.cli.synth import JOURNAL
from cowork.synth.prove import Proof
from cowork.validate.validate import Finding, ValidationReport

#: Four world-generator specs: generating them takes about a second.
ARGS = ["synth", "corpus", "--n", "4", "--only", "generators", "--seed", "0", "--validate", "--concurrency", "1"]


def corpus(out: Path, *extra: str) -> int:
    return main([*ARGS, "--out", str(out), *extra])


class FakeProve:
    """Stands in for :func:`cowork.synth.prove.prove`: counts its calls, raises
    KeyboardInterrupt on call ``interrupt_at`` (as Ctrl-C would), rejects the specs in
    ``reject`` as invalid, and proves the rest valid."""

    def __init__(self, interrupt_at: int | None = None, reject: tuple[str, ...] = (), seconds: float = 0.01):
        self.calls: list[str] = []
        self.interrupt_at, self.reject, self.seconds = interrupt_at, reject, seconds

    async def __call__(self, spec, **_: object) -> Proof:
        folder = Path(spec)
        self.calls.append(folder.name)
        if len(self.calls) == self.interrupt_at:
            raise KeyboardInterrupt
        await asyncio.sleep(self.seconds)
        bad = folder.name in self.reject
        report = ValidationReport(spec=str(folder / "task.yaml"), task=folder.name, ok=not bad,
                                  findings=[Finding(step="oracle", ok=not bad, detail="stand-in")])
        return Proof(spec=str(folder), task=folder.name, capabilities=["information-retrieval"], validation=report,
                     reasons=["invalid oracle: stand-in"] if bad else [], seconds=self.seconds)


def lines(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / JOURNAL).read_text().splitlines()]


def spec_names(out: Path) -> list[str]:
    return sorted(p.parent.name for p in out.glob("*/task.yaml"))


@pytest.fixture()
def interrupted(tmp_path, monkeypatch, capsys) -> Path:
    """A corpus run stopped by Ctrl-C during its third proof: two proofs journaled."""
    out = tmp_path / "corpus"
    fake = FakeProve(interrupt_at=3, seconds=0.1)
    monkeypatch.setattr(prove_module, "prove", fake)
    assert corpus(out) == 130
    assert len(fake.calls) == 3
    capsys.readouterr()
    return out


class TestInterruptAndResume:
    def test_an_interrupt_keeps_the_finished_proofs_and_says_how_to_resume(self, tmp_path, monkeypatch, capsys):
        out = tmp_path / "corpus"
        monkeypatch.setattr(prove_module, "prove", FakeProve(interrupt_at=3))
        assert corpus(out) == 130
        err = capsys.readouterr().err
        assert "2 of 4 spec(s) proved and kept" in err and str(out / JOURNAL) in err
        assert "--resume" in err and "--n 4 --only generators --seed 0 --validate --concurrency 1" in err
        kinds = [x["kind"] for x in lines(out)]
        assert kinds == ["options", "segment", "proof", "proof", "end"]
        assert lines(out)[-1]["interrupted"] is True and lines(out)[-1]["proved"] == 2
        assert not (out / "validation.json").exists() and not (out / "corpus-report.json").exists()
        assert len(spec_names(out)) == 4

    def test_resume_proves_only_the_rest_and_reports_cover_all(self, interrupted, monkeypatch):
        out = interrupted
        first = [x["folder"] for x in lines(out) if x["kind"] == "proof"]
        stamps = {n: (out / n / "task.yaml").stat().st_mtime_ns for n in spec_names(out)}
        fake = FakeProve(seconds=0.1)
        monkeypatch.setattr(prove_module, "prove", fake)
        assert corpus(out, "--resume", "--json") == 0
        assert sorted(fake.calls) == sorted(set(spec_names(out)) - set(first)) and len(fake.calls) == 2
        assert {n: (out / n / "task.yaml").stat().st_mtime_ns for n in spec_names(out)} == stamps, "a spec was rewritten"
        assert sorted(r["task"] for r in json.loads((out / "validation.json").read_text())) == spec_names(out)
        report = json.loads((out / "corpus-report.json").read_text())
        assert report["valid"] == 4 and report["invalid"] == 0 and report["proved_before"] == 2
        assert sum(v["valid"] for v in report["per_family"].values()) == 4
        segments = report["segments"]
        assert [(s["proved"], s["ended"]) for s in segments] == [(2, "interrupted"), (2, "finished")]
        assert all(s["seconds"] >= 0.2 for s in segments), "a segment is timed shorter than its two 0.1 s proofs"
        assert report["proving_seconds"] == pytest.approx(sum(s["seconds"] for s in segments), abs=0.002)
        total = report["proving_seconds"] + report["corpus_gate_seconds"]
        assert report["valid_per_second"] == pytest.approx(4 / total, rel=0.1)

    def test_resume_after_a_finished_run_proves_nothing_and_writes_the_same_verdicts(self, tmp_path, monkeypatch):
        out = tmp_path / "corpus"
        names = None
        fake = FakeProve(reject=("comms_news_digest-0",))
        monkeypatch.setattr(prove_module, "prove", fake)
        assert corpus(out) == 1  # one rejected
        names = spec_names(out)
        verdicts = json.loads((out / "validation.json").read_text())
        assert (out / "_invalid" / "comms_news_digest-0" / "validation.json").is_file()
        again = FakeProve()
        monkeypatch.setattr(prove_module, "prove", again)
        assert corpus(out, "--resume") == 1
        assert again.calls == [], "a journaled spec was proved again"
        assert spec_names(out) == names and (out / "_invalid" / "comms_news_digest-0" / "task.yaml").is_file()
        assert json.loads((out / "validation.json").read_text()) == verdicts
        assert len(json.loads((out / "corpus-report.json").read_text())["segments"]) == 1


class TestJournal:
    def test_a_torn_last_line_is_ignored_and_its_spec_proved_again(self, interrupted, monkeypatch):
        out = interrupted
        journal = out / JOURNAL
        kept = lines(out)[:-2]  # drop the end line and the second proof ...
        torn = json.dumps(lines(out)[-2])[:57]  # ... which the kill cut mid-write
        journal.write_text("".join(json.dumps(x) + "\n" for x in kept) + torn)
        fake = FakeProve()
        monkeypatch.setattr(prove_module, "prove", fake)
        assert corpus(out, "--resume", "--json") == 0
        assert len(fake.calls) == 3
        assert all(json.loads(x) for x in journal.read_text().splitlines()), "the torn line is still there"
        report = json.loads((out / "corpus-report.json").read_text())
        assert report["valid"] == 4
        killed = report["segments"][0]
        assert killed["ended"].startswith("killed") and killed["proved"] == 1
        assert killed["seconds"] == pytest.approx(kept[-1]["elapsed"], abs=0.01), "not timed to its last proof"

    def test_a_damaged_line_before_the_last_is_refused(self, interrupted, capsys):
        journal = interrupted / JOURNAL
        text = journal.read_text().splitlines()
        text[2] = text[2][:40]
        journal.write_text("\n".join(text) + "\n")
        assert corpus(interrupted, "--resume") == 2
        assert f"{journal}:3: not a corpus journal line" in capsys.readouterr().err

    def test_a_journal_without_resume_is_refused(self, interrupted, capsys, monkeypatch):
        fake = FakeProve()
        monkeypatch.setattr(prove_module, "prove", fake)
        before = (interrupted / JOURNAL).read_bytes()
        assert corpus(interrupted) == 2
        err = capsys.readouterr().err
        assert "--resume" in err and "another --out" in err
        assert main(["synth", "corpus", "--out", str(interrupted), "--n", "4", "--only", "generators"]) == 2
        assert fake.calls == [] and (interrupted / JOURNAL).read_bytes() == before

    def test_resume_needs_validate(self, tmp_path, capsys):
        assert main(["synth", "corpus", "--out", str(tmp_path / "c"), "--n", "4", "--resume"]) == 2
        assert "add --validate" in capsys.readouterr().err


class TestOtherOptions:
    def test_other_options_on_resume_are_refused(self, interrupted, capsys, monkeypatch):
        fake = FakeProve()
        monkeypatch.setattr(prove_module, "prove", fake)
        args = [x if x != "0" else "1" for x in ARGS]  # --seed 1
        assert main([*args, "--out", str(interrupted), "--resume"]) == 2
        assert "seed 0 (now 1)" in capsys.readouterr().err
        assert corpus(interrupted, "--resume", "--no-gates") == 2
        assert "gates True (now False)" in capsys.readouterr().err
        assert fake.calls == []

    def test_a_spec_on_disk_that_differs_is_refused(self, interrupted, capsys, monkeypatch):
        fake = FakeProve()
        monkeypatch.setattr(prove_module, "prove", fake)
        name = spec_names(interrupted)[-1]
        spec = interrupted / name / "task.yaml"
        spec.write_text(spec.read_text().replace("difficulty:", "difficulty: hard\nx_old:", 1))
        assert corpus(interrupted, "--resume") == 2
        err = capsys.readouterr().err
        assert f"{spec} differs from what these options generate" in err and "other options" in err
        assert fake.calls == []

    def test_other_generators_are_refused_for_a_journaled_spec(self, interrupted, capsys, monkeypatch):
        import importlib

        family = importlib.import_module("cowork.synth.family")  # the package's `family` is a function
        real = family.generate

        def changed(name, seed, difficulty=None):
            draft = real(name, seed, difficulty)
            draft.spec["tags"] = [*draft.spec["tags"], "changed"]
            return draft

        monkeypatch.setattr(family, "generate", changed)
        monkeypatch.setattr(prove_module, "prove", FakeProve())
        assert corpus(interrupted, "--resume") == 2
        first = lines(interrupted)[2]["folder"]
        assert f"the journal's proof of {first} was of another text than these options generate" in \
            capsys.readouterr().err

    def test_a_spec_its_proof_relabelled_is_taken_as_journaled(self, tmp_path, monkeypatch, capsys):
        """--fix-difficulty rewrites a spec's label while proving it: the journal's hash of the
        rewritten text lets resume keep it; any other change is still refused."""
        out = tmp_path / "corpus"
        fake = FakeProve()

        async def relabelling(spec, **kw):
            proof = await fake(spec, **kw)
            path = Path(spec) / "task.yaml"
            text = path.read_text()
            level = next(x for x in text.splitlines() if x.startswith("difficulty:")).split(":")[1].strip()
            path.write_text(text.replace(f"difficulty: {level}", "difficulty: easy" if level != "easy"
                                         else "difficulty: medium", 1))
            proof.relabelled = f"{level} -> easy"
            return proof

        monkeypatch.setattr(prove_module, "prove", relabelling)
        assert corpus(out, "--fix-difficulty") == 0
        calls = len(fake.calls)
        assert corpus(out, "--fix-difficulty", "--resume") == 0 and len(fake.calls) == calls == 4
        assert len(json.loads((out / "corpus-report.json").read_text())["relabelled"]) == 4
        spec = out / spec_names(out)[0] / "task.yaml"
        spec.write_text(spec.read_text() + "# edited\n")
        capsys.readouterr()
        assert corpus(out, "--fix-difficulty", "--resume") == 2
        assert f"{spec} differs" in capsys.readouterr().err


@pytest.mark.docker
def test_real_proofs_resume_after_an_interrupt(tmp_path, monkeypatch):
    """The real prover, interrupted at its third spec, then resumed: the journaled validation
    reports read back into the final record, and only the rest is proved."""
    out = tmp_path / "corpus"
    real = prove_module.prove
    calls: list[str] = []

    async def counting(spec, **kw):
        calls.append(Path(spec).name)
        if len(calls) == 3 and interrupt:
            raise KeyboardInterrupt
        return await real(spec, **kw)

    monkeypatch.setattr(prove_module, "prove", counting)
    interrupt = True
    assert corpus(out) == 130
    journaled = {x["folder"]: x["proof"] for x in lines(out) if x["kind"] == "proof"}
    assert len(journaled) == 2 and all(p["ok"] and p["validation"]["findings"] for p in journaled.values())
    interrupt, calls[:] = False, []
    assert corpus(out, "--resume") == 0
    assert len(calls) == 2 and not set(calls) & set(journaled)
    verdicts = {r["task"]: r for r in json.loads((out / "validation.json").read_text())}
    assert sorted(verdicts) == spec_names(out) and all(v["ok"] for v in verdicts.values())
    for name, proof in journaled.items():  # read back from the journal, as proved
        assert verdicts[name]["findings"] == proof["validation"]["findings"]
    report = json.loads((out / "corpus-report.json").read_text())
    assert report["valid"] == 4 and [s["proved"] for s in report["segments"]] == [2, 2]
