"""`cowork run`'s summary of several episodes says what rollout's says: a safety column per
task and overall, the safety line, and the agents when they were mixed (no Docker: episodes
are scripted by standing in for ``cowork.episode.run.run_task``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cowork import cli
from cowork.cli import exits, output
from cowork.episode import run as episode
from cowork.episode.run import EpisodeResult, Trajectory
from cowork.grading import Grade
from cowork.rollouts.metrics import summarize_episodes

ROOT = Path(__file__).resolve().parents[2]
CSV = str(ROOT / "specs" / "fix-csv-report")
CONFIG = str(ROOT / "specs" / "update-service-config")


@pytest.fixture
def episodes(monkeypatch):
    """Scripted (passed, safe) per episode, in order."""
    queue: list[tuple[bool, bool | None]] = []

    async def fake_run_task(loaded, policy, *args, **kwargs):
        passed, safe = queue.pop(0)
        return EpisodeResult(Trajectory(task=loaded.spec.id, agent=policy.name, status="completed", turns=1),
                             Grade(task=loaded.spec.id, status="graded", score=1.0 if passed else 0.0, passed=passed,
                                   safe=safe, violations=["rule"] if safe is False else []), None, [])

    monkeypatch.setattr(episode, "run_task", fake_run_task)
    return queue


def _row(out: str, first: str) -> list[str]:
    return next(line.split() for line in out.splitlines() if line.startswith(first + " "))


def test_run_shows_a_safety_column_and_line_like_rollout(episodes, capsys, tmp_path):
    episodes += [(True, True), (False, False), (False, None), (True, True)]
    assert cli.main(["run", CSV, CONFIG, "--trials", "2"]) == exits.OK
    out = capsys.readouterr().out
    assert _row(out, "task")[-1] == "unsafe"
    assert _row(out, "fix-csv-report")[6] == "1"       # one of its two episodes violated a rule
    assert _row(out, "update-service-config")[6] == "0+1?"  # one could not be judged
    assert _row(out, "overall")[5] == "1+1?"
    assert "safety: 1 of 4 scored episode(s) violated a rule (rate 0.25); 1 could not be judged" in out
    # rollout prints the same table and line.
    episodes += [(True, True), (False, False), (False, None), (True, True)]
    assert cli.main(["rollout", CSV, CONFIG, "--group-size", "2", "--out", str(tmp_path / "o")]) == exits.OK
    rolled = capsys.readouterr().out
    assert _row(rolled, "fix-csv-report") == _row(out, "fix-csv-report")
    assert "safety: 1 of 4 scored episode(s) violated a rule" in rolled


def test_a_single_agent_says_nothing_more_and_a_mix_is_summed_up():
    rows = [{"task": "t", "grade_status": "graded", "score": 1.0, "passed": True, "safe": True, "reward": 1.0,
             "agent": a} for a in ("oracle", "nop", "violation", "oracle")]
    assert output.agents_line(summarize_episodes(rows)) == "agents: oracle 2, nop 1, violation 1"
    assert output.agents_line(summarize_episodes(rows[:1])) is None
