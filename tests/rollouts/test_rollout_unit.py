"""The rollout runner without a daemon: rewards, the summary, the output folder, resuming."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from cowork import cli
from cowork.episode import run as episode
from cowork.episode.run import EpisodeResult, Trajectory
from cowork.errors import CoworkError, SandboxError
from cowork.grading import Grade
from cowork.rollouts.folder import RunFolder
from cowork.rollouts.metrics import summarize_episodes
from cowork.rollouts.results import read_results
from cowork.rollouts.rewards import reward_for
from cowork.rollouts.runner import RolloutRunner, rollout
from cowork.rollouts.schedule import Schedule

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "specs" / "fix-csv-report"
CRM = ROOT / "specs" / "crm-update-from-mail"


def _grade(status="graded", score=1.0, passed=True, safe=True) -> Grade:
    return Grade(task="t", status=status, score=score, passed=passed, safe=safe)


class TestReward:
    @pytest.mark.parametrize("kind,grade,expected", [
        ("score", _grade(score=0.6, passed=False), 0.6),
        ("pass", _grade(score=0.6, passed=False), 0.0),
        ("pass", _grade(score=0.8, passed=True), 1.0),
        ("safety_gated", _grade(score=0.6, safe=True), 0.6),
        ("safety_gated", _grade(score=0.6, safe=False), 0.0),
        ("safety_gated", _grade(score=0.6, safe=None), 0.0),      # unknown safety counts as unsafe
        ("score", _grade("agent_broke_sandbox", score=0.9), 0.0),   # never rewarded, whatever the option
        ("score", _grade("infra_error", score=0.0), None),          # says nothing of the agent
        ("pass", _grade("infra_error"), None),
    ])
    def test_options(self, kind, grade, expected):
        assert reward_for(grade, kind) == expected

    def test_a_function_of_the_grade(self):
        assert reward_for(_grade(score=0.5), lambda g: g.score * 2) == 1.0

    def test_unknown_name(self):
        with pytest.raises(ValueError, match="'best'"):
            reward_for(_grade(), "best")
        with pytest.raises(ValueError, match="'best'"):
            RolloutRunner(reward="best")


def _row(task, score, passed, safe=True, status="graded", failures=(), reward=None):
    return {"task": task, "grade_status": status, "score": score, "passed": passed, "safe": safe,
            "reward": score if reward is None and status != "infra_error" else reward, "infra_failures": list(failures)}


class TestSummary:
    def test_pass_at_k_pass_hat_k_safety_and_what_is_not_scored(self):
        rows = [_row("a", 1.0, True), _row("a", 0.0, False, safe=False), _row("a", 1.0, True, failures=["hiccup"]),
                _row("b", 0.0, False, status="agent_broke_sandbox", safe=None), _row("b", 1.0, True),
                _row("b", 0.0, False, status="infra_error", safe=False, failures=["x", "y"]),
                _row("b", 0.0, False, status="policy_error", safe=False)]
        m = summarize_episodes(rows, k=3)
        a, b = m["tasks"]["a"], m["tasks"]["b"]
        assert a["trials"] == 3 and a["pass@1"] == pytest.approx(2 / 3) and a["pass@3"] == 1.0 and a["pass^3"] == 0.0
        assert a["violation_rate"] == pytest.approx(1 / 3) and a["unsafe"] == 1 and a["mean_reward"] == pytest.approx(2 / 3)
        # The infrastructure and model-endpoint errors are left out of b's trials: k falls to the 2 scored ones.
        assert b["trials"] == 2 and b["k"] == 2 and b["pass@2"] == 1.0 and b["pass^2"] == 0.0
        assert b["safety_unknown"] == 1 and b["infra_error"] == 1 and b["agent_broke_sandbox"] == 1
        assert b["policy_error"] == 1
        assert m["episodes"] == {"total": 7, "infra_error": 1, "policy_error": 1, "policy_error_unsafe": 1,
                                 "infra_retries": 3, "agent_broke_sandbox": 1}
        assert m["safety"] == {"scored": 5, "unsafe": 1, "unknown": 1, "violation_rate": pytest.approx(1 / 5)}
        assert m["overall"]["mean_reward"] == pytest.approx((2 / 3 + 1 / 2) / 2)

    def test_only_infrastructure_errors(self):
        m = summarize_episodes([_row("a", 0.0, False, status="infra_error", failures=["x", "y"])])
        assert m["tasks"] == {} and m["episodes"]["infra_error"] == 1 and m["safety"]["violation_rate"] is None


def _simulate(tasks: int, group: int, concurrency: int) -> dict[int, set[int]]:
    """Workers taking turns; returns the tasks each worker ran (a new task for a worker means
    a sandbox started, one of its own task means a warm one reused)."""
    schedule = Schedule([(i, s) for i in range(tasks) for s in range(group)], concurrency)
    current = {w: None for w in range(concurrency)}
    ran: dict[int, set[int]] = {w: set() for w in range(concurrency)}
    seen, busy = [], True
    while busy:
        busy = False
        for w in range(concurrency):
            job = schedule.next(current[w]) if current[w] != "done" else None
            if job is None:
                current[w] = "done"
                continue
            busy = True
            current[w] = job[0]
            ran[w].add(job[0])
            seen.append(job)
    assert sorted(seen) == [(i, s) for i in range(tasks) for s in range(group)]
    return ran


class TestSchedule:
    def test_a_worker_stays_on_its_task(self):
        ran = _simulate(tasks=15, group=4, concurrency=4)
        # About one start per task, not one per episode: at the tail, a worker with nothing
        # left joins an unfinished task (for a slow model, a start costs less than waiting).
        assert 15 <= sum(len(t) for t in ran.values()) <= 15 + 3

    def test_few_tasks_share_the_workers(self):
        ran = _simulate(tasks=1, group=8, concurrency=8)
        assert all(t == {0} for t in ran.values())
        ran = _simulate(tasks=2, group=8, concurrency=4)
        assert sorted(len(t) for t in ran.values()) == [1, 1, 1, 1]


class TestResultsFile:
    def test_a_torn_last_line_is_left_out_and_cut_off(self, tmp_path):
        folder = RunFolder(tmp_path)
        params = {"group_size": 2, "agent": "oracle", "reward": "score", "seed": None, "tasks": ["a"]}
        assert folder.open(params) == {}
        folder.append({"task": "a", "sample": 0, "reward": 1.0})
        folder.close()
        with open(folder.results, "a") as fh:
            fh.write('{"task": "a", "sample": 1, "rew')  # the writer was killed mid-line
        rows, end = read_results(folder.results)
        assert [r["sample"] for r in rows] == [0] and end < folder.results.stat().st_size
        done = RunFolder(tmp_path).open(params)
        assert list(done) == [("a", 0)]
        assert folder.results.read_text().endswith("}\n")  # the torn part is gone before anything is appended

    def test_a_bad_whole_line_is_named(self, tmp_path):
        (tmp_path / "r.jsonl").write_text('{"task": "a", "sample": 0}\nnot json\n')
        with pytest.raises(CoworkError, match=r"r.jsonl:2: not a JSON line"):
            read_results(tmp_path / "r.jsonl")

    def test_a_second_writer_is_refused(self, tmp_path):
        params = {"group_size": 1, "agent": "oracle", "reward": "score", "seed": None, "tasks": ["a"]}
        first = RunFolder(tmp_path)
        first.open(params)
        try:
            with pytest.raises(CoworkError, match="another rollout is writing"):
                RunFolder(tmp_path).open(params)
        finally:
            first.close()


class FakeEpisodes:
    """Stands in for episode.run_task: graded results, no sandbox."""

    def __init__(self):
        self.calls: list[tuple[str, int | None]] = []

    async def __call__(self, loaded, policy, **kwargs):
        self.calls.append((loaded.spec.id, kwargs.get("seed")))
        t = Trajectory(task=loaded.spec.id, agent=policy.name, status="completed", turns=1)
        return EpisodeResult(t, Grade(task=loaded.spec.id, status="graded", score=1.0, passed=True, safe=True), None, [])


@pytest.fixture
def fake(monkeypatch):
    f = FakeEpisodes()
    monkeypatch.setattr(episode, "run_task", f)
    return f


def oracle(spec):
    from cowork.agents import make_policy

    return make_policy("oracle", spec)


class TestRunner:
    async def test_groups_in_input_order_with_seeds(self, fake, tmp_path):
        res = await rollout([CRM, CSV], oracle, group_size=3, concurrency=2, seed=10, out_dir=tmp_path)
        assert [g.task for g in res.groups] == ["crm-update-from-mail", "fix-csv-report"]
        assert [[s.sample for s in g.samples] for g in res.groups] == [[0, 1, 2]] * 2
        assert [s.seed for s in res.groups[1].samples] == [10, 11, 12]
        assert res.rewards == [[1.0] * 3] * 2 and res.summary["episodes"]["total"] == 6
        rows, _ = read_results(tmp_path / "results.jsonl")
        assert sorted((r["task"], r["sample"], r["group"]) for r in rows) == \
            sorted((t, s, g) for g, t in enumerate(["crm-update-from-mail", "fix-csv-report"]) for s in range(3))
        bundle = tmp_path / rows[0]["evidence"]
        assert {"grade.json", "spec.json", "trajectory.json"} <= {p.name for p in bundle.iterdir()}
        assert json.loads((tmp_path / "run.json").read_text())["group_size"] == 3
        saved = json.loads((tmp_path / "summary.json").read_text())  # what `cowork view` charts
        assert saved["episodes"]["total"] == 6 and saved["episodes_per_s"] == res.summary["episodes_per_s"]

    async def test_resume_runs_only_what_is_missing(self, fake, tmp_path):
        await rollout([CSV], oracle, group_size=3, out_dir=tmp_path)
        lines = (tmp_path / "results.jsonl").read_text().splitlines(keepends=True)
        # Killed while writing the last line: its bundle is there, its line is torn.
        (tmp_path / "results.jsonl").write_text("".join(lines[:2]) + lines[2][:25])
        fake.calls.clear()
        res = await rollout([CSV], oracle, group_size=3, out_dir=tmp_path)
        assert fake.calls == [("fix-csv-report", None)]
        rows, end = read_results(tmp_path / "results.jsonl")
        assert sorted(r["sample"] for r in rows) == [0, 1, 2] and end == (tmp_path / "results.jsonl").stat().st_size
        assert [s.resumed for s in res.groups[0].samples].count(True) == 2
        assert res.summary["episodes_run"] == 1 and res.summary["episodes_resumed"] == 2
        assert res.groups[0].samples[0].trajectory.agent == "oracle"  # read back from its bundle

    async def test_a_mix_of_agents_is_recorded_per_episode_and_summed_up(self, fake, tmp_path):
        import itertools

        from cowork.agents import make_policy

        kinds = itertools.cycle(["oracle", "nop", "violation", "oracle"])
        res = await rollout([CSV], lambda spec: make_policy(next(kinds), spec), group_size=4, out_dir=tmp_path)
        rows, _ = read_results(tmp_path / "results.jsonl")
        assert sorted(r["agent"] for r in rows) == ["nop", "oracle", "oracle", "violation"]
        run = json.loads((tmp_path / "run.json").read_text())
        assert run["agents"] == {"oracle": 2, "nop": 1, "violation": 1}
        assert res.summary["agents"] == {"oracle": 2, "nop": 1, "violation": 1}
        assert json.loads((tmp_path / "summary.json").read_text())["agents"] == res.summary["agents"]
        # A resumed run keeps the counts of what it holds.
        (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["sample"] != 3))
        kinds = itertools.cycle(["oracle"])
        await rollout([CSV], lambda spec: make_policy(next(kinds), spec), group_size=4, out_dir=tmp_path)
        assert json.loads((tmp_path / "run.json").read_text())["agents"] == {"oracle": 2, "nop": 1, "violation": 1}

    async def test_another_group_size_or_agent_is_refused(self, fake, tmp_path):
        await rollout([CSV], oracle, group_size=2, out_dir=tmp_path)
        with pytest.raises(CoworkError, match="group size 2, not 3"):
            await rollout([CSV], oracle, group_size=3, out_dir=tmp_path)
        from cowork.agents import make_policy

        with pytest.raises(CoworkError, match="agent 'oracle', not 'nop'"):
            await rollout([CSV], lambda spec: make_policy("nop", spec), group_size=2, out_dir=tmp_path)

    def test_the_cli_refuses_another_run_with_exit_2(self, fake, tmp_path, capsys):
        assert cli.main(["rollout", str(CSV), "--group-size", "2", "--out", str(tmp_path)]) == 0
        assert cli.main(["rollout", str(CSV), "--agent", "nop", "--group-size", "2", "--out", str(tmp_path)]) == 2
        assert "holds a rollout with agent 'oracle', not 'nop'" in capsys.readouterr().err

    async def test_a_stateful_policy_instance_is_refused(self, fake):
        from cowork.agents import ScriptedPolicy

        with pytest.raises(ValueError, match="pass a factory"):
            await rollout([CSV], ScriptedPolicy([]), group_size=1)

    async def test_persistent_infrastructure_failure_has_no_reward_and_is_counted(self):
        class DeadPool:
            async def acquire(self, spec, seed=None):
                raise SandboxError("docker daemon went away")

        res = await rollout([CSV], oracle, group_size=2, pool=DeadPool(), infra_retries=1)
        assert res.rewards == [[None, None]]
        assert [s.grade.status for s in res.samples] == ["infra_error"] * 2
        assert res.summary["episodes"] == {"total": 2, "infra_error": 2, "policy_error": 0, "policy_error_unsafe": 0,
                                           "infra_retries": 4, "agent_broke_sandbox": 0}

    async def test_resume_runs_again_what_ended_on_an_infrastructure_failure(self, tmp_path, monkeypatch):
        class DeadPool:
            async def acquire(self, spec, seed=None):
                raise SandboxError("docker daemon went away")

        await rollout([CSV], oracle, group_size=2, pool=DeadPool(), infra_retries=0, out_dir=tmp_path)
        rows, _ = read_results(tmp_path / "results.jsonl")
        assert [r["grade_status"] for r in rows] == ["infra_error"] * 2
        fake = FakeEpisodes()  # the daemon is back
        monkeypatch.setattr(episode, "run_task", fake)
        res = await rollout([CSV], oracle, group_size=2, out_dir=tmp_path)
        assert sorted(fake.calls) == [("fix-csv-report", None)] * 2 and res.rewards == [[1.0, 1.0]]
        rows, _ = read_results(tmp_path / "results.jsonl")
        assert sorted((r["sample"], r["grade_status"]) for r in rows) == [(0, "graded"), (1, "graded")]

    async def test_progress_lines_off_a_terminal(self, fake):
        out = io.StringIO()
        await rollout([CSV], oracle, group_size=4, progress=out)
        lines = out.getvalue().splitlines()
        assert len(lines) == 4 and "\r" not in out.getvalue()
        assert lines[-1].startswith("rollout: 4/4 episodes, 1/1 tasks") and "mean reward 1.000" in lines[-1]

    async def test_progress_redraws_one_line_on_a_terminal(self, fake):
        class Tty(io.StringIO):
            def isatty(self):
                return True

        out = Tty()
        await rollout([CSV], oracle, group_size=3, progress=out)
        assert out.getvalue().count("\r") == 3 and out.getvalue().endswith("\n") and out.getvalue().count("\n") == 1


class TestCli:
    def test_rollout_writes_the_folder_and_prints_the_summary(self, fake, tmp_path, capsys):
        rc = cli.main(["rollout", str(CSV), "--group-size", "2", "--out", str(tmp_path), "--json", "--seed", "5"])
        out = json.loads(capsys.readouterr().out)
        assert rc == 0 and out["tasks"]["fix-csv-report"]["pass^2"] == 1.0 and out["group_size"] == 2
        assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 2
        assert sorted(s for _, s in fake.calls) == [5, 6]

    @pytest.mark.parametrize("flag", ["--group-size", "--concurrency", "--pool-size"])
    def test_bad_numbers_exit_2(self, tmp_path, flag, capsys):
        assert cli.main(["rollout", str(CSV), "--out", str(tmp_path), flag, "0"]) == 2
        assert f"{flag} must be at least 1" in capsys.readouterr().err
