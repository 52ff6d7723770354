"""`cowork run` counts and shows what was not scored: infrastructure errors, retries, broken sandboxes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cowork import cli
from cowork.episode import run as episode
from cowork.episode.run import EpisodeResult, Trajectory
from cowork.grading import Grade

ROOT = Path(__file__).resolve().parents[2]


def _result(status: str, failures: list[str]) -> EpisodeResult:
    traj_status = "completed" if status == "graded" else status
    return EpisodeResult(Trajectory(task="fix-csv-report", agent="oracle", status=traj_status),
                         Grade(task="fix-csv-report", status=status, score=1.0 if status == "graded" else 0.0,
                               passed=status == "graded", safe=True), None, failures)


@pytest.fixture
def scripted_results(monkeypatch):
    queue = [_result("graded", ["docker hiccup"]), _result("agent_broke_sandbox", []), _result("infra_error", ["a", "b"])]

    async def fake_run_task(*args, **kwargs):
        return queue.pop(0)

    monkeypatch.setattr(episode, "run_task", fake_run_task)


def test_counts_are_shown_and_the_exit_status_says_infrastructure(scripted_results, capsys, tmp_path):
    results = tmp_path / "r.jsonl"
    rc = cli.main(["run", str(ROOT / "specs" / "fix-csv-report"), "--trials", "3", "--results", str(results)])
    out = capsys.readouterr().out
    assert rc == 3
    assert "infrastructure errors (not scored): 1" in out
    assert "retried after an infrastructure failure: 3" in out
    assert "agent broke its sandbox (scored 0): 1" in out
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    assert [x["infra_failures"] for x in lines] == [["docker hiccup"], [], ["a", "b"]]


def test_json_output_carries_the_counts(scripted_results, capsys):
    rc = cli.main(["run", str(ROOT / "specs" / "fix-csv-report"), "--trials", "3", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 3
    assert data["metrics"]["episodes"] == {"total": 3, "infra_error": 1, "policy_error": 0, "policy_error_unsafe": 0,
                                          "infra_retries": 3, "agent_broke_sandbox": 1}
    # The broken sandbox is the agent's outcome: scored (0), unlike the infrastructure error.
    assert data["metrics"]["tasks"]["fix-csv-report"]["trials"] == 2
