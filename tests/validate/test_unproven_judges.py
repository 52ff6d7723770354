"""Issue 28 items 1 and 2: `cowork validate` without a judge on a spec whose completion is all
judge, or whose ``scoring.formula`` uses judge checks. What needs a judge is reported NOT
PROVEN (the report ``UNPROVEN``), never proven and never a failure of the spec; what is
deterministic is still proven or failed. The episodes are graded from synthetic evidence
(``run_task`` replaced): the steps' verdicts are what is tested, not the sandbox (no Docker)."""

from __future__ import annotations

import textwrap

import pytest

from cowork.episode.run import EpisodeResult
from cowork.episode.trajectory import Trajectory
from cowork.evidence import Evidence
from cowork.formats import GENESIS_HASH, canonical_json, seal
from cowork.grading import grade
from cowork.spec.loader import load_spec
from cowork.validate import validate as V
from fakes import tar_of

#: C19-like: a consultation graded by judges only.
ALL_JUDGE = """\
id: all-judge
title: Advise on the sample size
prompt: How many users do I need per arm?
tools: [read_file]
checks:
  - id: numbers
    type: judge
    rubric: "Grade the numbers."
    items:
      - {id: size, rubric: "States about 3,800 users per arm"}
      - {id: power, rubric: "Explains the power assumption"}
  - {id: tone, type: judge, rubric: "Is the advice clear?"}
oracle:
  - {reply: "About 3,800 users per arm at 80% power."}
"""

#: T030-like: judge credit gated on a deterministic condition by a formula.
FORMULA = """\
id: gated-reply
title: Book the meeting and tell me
prompt: Book the sync and tell me when it is.
tools: [read_file]
checks:
  - {id: booked, type: tool_called, tool: read_file}
  - {id: reply, type: judge, rubric: "Does the reply give the time in Shanghai time?"}
scoring: {formula: "FORMULA"}
oracle:
  - {tool: read_file, args: {path: a.txt}}
  - {reply: "Booked for 15:00 Shanghai time."}
"""


def _ev(calls: int, judgements=None) -> Evidence:
    recs = [{"kind": "session_start"}] + [{"kind": "tool_call", "tool": "read_file", "args": {"path": "a.txt"},
                                           "outcome": "ok"}] * calls
    prev, lines = GENESIS_HASH, []
    for i, r in enumerate(recs):
        s = seal({"seq": i, **r}, prev)
        prev = s["hash"]
        lines.append(canonical_json(s))
    return Evidence(audit_text="\n".join(lines) + "\n", audit_count=len(recs), workspace_tar=tar_of({"a.txt": "a"}),
                    initial={}, trace={"messages": [{"role": "assistant", "content": "reply"}]},
                    meta={"judgements": judgements} if judgements is not None else {})


#: What a judge would say of each run: full marks to the oracle, nothing to the no-op agent.
VERDICTS = {"oracle": {"numbers": {"credit": 1.0, "reason": "r"}, "tone": {"passed": True, "reason": "r"},
                       "reply": {"passed": True, "reason": "r"}},
            "nop": {"numbers": {"credit": 0.0, "reason": "r"}, "tone": {"passed": False, "reason": "r"},
                    "reply": {"passed": False, "reason": "r"}}}


@pytest.fixture
def runs(monkeypatch):
    """``run_task`` replaced: each run graded from synthetic evidence (the oracle's calls as
    ``calls[agent]``), with the judge's verdicts when a judge is given."""
    calls = {"oracle": 1, "nop": 0}

    async def fake_run_task(loaded, policy, *, judge=None, **_):
        ev = _ev(calls[policy.name], VERDICTS[policy.name] if judge is not None else None)
        traj = Trajectory(task=loaded.spec.id, agent=policy.name, status="completed")
        return EpisodeResult(trajectory=traj, grade=grade(loaded.spec, ev), evidence=ev)

    async def no_build(self):
        self._add(step="build", ok=True, detail="(not built: run_task is replaced)")

    monkeypatch.setattr(V, "run_task", fake_run_task)
    monkeypatch.setattr(V._Steps, "build", no_build)
    return calls


def _load(tmp_path, text):
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "a.txt").write_text("a")
    (tmp_path / "task.yaml").write_text(textwrap.dedent(text))
    return load_spec(tmp_path)


async def _validate(loaded, judge=None):
    return await V.validate_spec(loaded, judge=judge, reuse=False)


class TestAllJudge:
    async def test_without_a_judge_it_is_not_proven_not_failed(self, tmp_path, runs):
        rep = await _validate(_load(tmp_path, ALL_JUDGE))
        steps = {f.step: f for f in rep.findings}
        assert rep.ok, rep.summary()
        assert not rep.proven and rep.summary().startswith("UNPROVEN all-judge")
        assert "VALID" not in rep.summary().splitlines()[0]
        # Nothing a judge decides is claimed: the oracle's marks, the no-op agent's failure.
        for step in ("oracle", "nop", "judge"):
            assert steps[step].ok and not steps[step].proven, steps[step]
        assert "NOT PROVEN" in steps["nop"].detail and "up to 1.00" in steps["nop"].detail
        assert "numbers" in steps["judge"].detail and "tone" in steps["judge"].detail

    async def test_with_a_judge_the_same_spec_is_proven(self, tmp_path, runs):
        rep = await _validate(_load(tmp_path, ALL_JUDGE), judge=object())
        assert rep.ok and rep.proven and rep.summary().startswith("VALID"), rep.summary()

    def test_the_cli_says_so_and_exits_zero(self, tmp_path, runs, capsys):
        from cowork import cli
        from cowork.cli import exits

        _load(tmp_path, ALL_JUDGE)
        assert cli.main(["validate", str(tmp_path)]) == exits.OK
        out = capsys.readouterr().out
        assert "UNPROVEN all-judge" in out and "NOT PROVEN" in out


class TestFormulaWithJudges:
    @pytest.mark.parametrize("formula", ["booked * reply", "0.5 * booked + 0.5 * reply", "reply if booked else 0",
                                         "min(booked, 1 - reply) + reply"])
    async def test_the_deterministic_part_is_proven_and_the_judge_part_not(self, tmp_path, runs, formula):
        rep = await _validate(_load(tmp_path, FORMULA.replace("FORMULA", formula)))
        steps = {f.step: f for f in rep.findings}
        assert rep.ok and not rep.proven, rep.summary()
        assert steps["oracle"].ok and not steps["oracle"].proven and "1.00 at their best" in steps["oracle"].detail

    async def test_a_broken_deterministic_part_still_fails(self, tmp_path, runs):
        # The oracle never makes the call the gate needs: no judge verdict can save it.
        runs["oracle"] = 0
        rep = await _validate(_load(tmp_path, FORMULA.replace("FORMULA", "reply if booked else 0")))
        steps = {f.step: f for f in rep.findings}
        assert not rep.ok and not steps["oracle"].ok and "0.00 at their best" in steps["oracle"].detail

    async def test_a_nop_that_fails_whatever_the_judge_says_is_proven_to_fail(self, tmp_path, runs):
        rep = await _validate(_load(tmp_path, FORMULA.replace("FORMULA", "booked * reply")))
        nop = next(f for f in rep.findings if f.step == "nop")
        assert nop.ok and nop.proven and "at most 0.00 whatever the judges say" in nop.detail

    async def test_a_nop_a_generous_judge_could_pass_is_not_proven(self, tmp_path, runs):
        # Fail closed: with max() the judge alone could carry the no-op agent over the line.
        rep = await _validate(_load(tmp_path, FORMULA.replace("FORMULA", "max(booked, reply)")))
        nop = next(f for f in rep.findings if f.step == "nop")
        assert nop.ok and not nop.proven and "NOT PROVEN" in nop.detail and not rep.proven

    async def test_with_a_judge_the_formula_is_proven(self, tmp_path, runs):
        rep = await _validate(_load(tmp_path, FORMULA.replace("FORMULA", "reply if booked else 0")), judge=object())
        assert rep.ok and rep.proven, rep.summary()
