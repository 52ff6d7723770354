"""The rollout runner on real sandboxes: groups over a reused pool, rewards, resuming a killed
run, and what the agent broke (scored 0, never retried) against what broke outside (retried)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cowork.agents import ScriptedPolicy, make_policy
from cowork.cli import main
from cowork.evidence import Evidence
from cowork.grading import grade
from cowork.rollouts.runner import RolloutRunner, read_results, reward_for, rollout
from cowork.sandbox.pool import SandboxPool
from cowork.spec.loader import load_spec

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "specs" / "fix-csv-report"
CRM = ROOT / "specs" / "crm-update-from-mail"


def factory(kind: str):
    return lambda spec: make_policy(kind, spec)


def _copy_spec(src: Path, dest: Path, edit) -> Path:
    shutil.copytree(src, dest)
    (dest / "task.yaml").write_text(edit((dest / "task.yaml").read_text()))
    return dest


async def test_groups_of_oracle_episodes_over_a_reused_pool(tmp_path, no_leftovers):
    pool = SandboxPool(max_per_task=2, max_total=4)
    try:
        async with RolloutRunner(concurrency=2, pool=pool) as runner:
            res = await runner.rollout([CSV, CRM], factory("oracle"), group_size=3, out_dir=tmp_path)
            reused = pool.stats["reused"]
            again = await runner.rollout([CSV], factory("oracle"), group_size=2)  # the next training step
        assert [g.task for g in res.groups] == ["fix-csv-report", "crm-update-from-mail"]
        assert [[s.sample for s in g.samples] for g in res.groups] == [[0, 1, 2], [0, 1, 2]]
        assert res.rewards == [[1.0] * 3, [1.0] * 3] and again.rewards == [[1.0, 1.0]]
        assert reused > 0 and pool.stats["reused"] > reused  # warm sandboxes, within and across calls
        rows, _ = read_results(tmp_path / "results.jsonl")
        assert len(rows) == 6 and {(r["task"], r["sample"]) for r in rows} == \
            {(t, s) for t in ("fix-csv-report", "crm-update-from-mail") for s in range(3)}
        assert all(r["reward"] == 1.0 and r["status"] == "completed" and r["infra_failures"] == [] for r in rows)
        # Every line names a complete bundle that regrades offline to the same grade.
        for r in rows:
            bundle = tmp_path / r["evidence"]
            again_graded = grade(load_spec(ROOT / "specs" / r["task"]).spec, Evidence.load(bundle))
            assert again_graded.score == r["score"] == 1.0
            assert json.loads((tmp_path / r["trajectory"]).read_text())["status"] == "completed"
        m = res.summary
        assert m["overall"]["pass^3"] == 1.0 and m["safety"]["violation_rate"] == 0.0 and m["episodes_per_s"] > 0
    finally:
        await pool.close()


async def test_safety_gated_reward_is_0_for_a_violation(tmp_path, no_leftovers):
    # The safety gate off in the spec: the score still credits the work done, the reward does not.
    spec = _copy_spec(CSV, tmp_path / "ungated", lambda t: t + "scoring:\n  safety_gate: false\n")
    res = await rollout([spec], factory("violation"), group_size=2, concurrency=2, reward="safety_gated")
    for s in res.samples:
        assert s.grade.safe is False and "no-recursive-delete" in s.grade.violations
        assert s.grade.score > 0 and reward_for(s.grade, "score") > 0
        assert s.reward == 0.0
    assert res.summary["safety"] == {"scored": 2, "unsafe": 2, "unknown": 0, "violation_rate": 1.0}


def test_a_killed_rollout_resumes_and_gc_removes_its_sandboxes(tmp_path, capsys):
    import docker

    from cowork.engine.reaper import sweep

    # Each oracle episode takes a second, so the kill lands mid-run.
    slow = [_copy_spec(CSV, tmp_path / name, lambda t, name=name: t.replace("id: fix-csv-report", f"id: {name}", 1)
                       .replace("oracle:\n", "oracle:\n  - {tool: shell, args: {command: 'sleep 1'}}\n", 1))
            for name in ("slow-a", "slow-b")]
    out = tmp_path / "out"
    results = out / "results.jsonl"
    cmd = [sys.executable, "-m", "cowork.cli", "rollout", *map(str, slow), "--group-size", "6", "--concurrency", "2",
           "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 150
        while not (results.exists() and len(results.read_text().splitlines()) >= 2):
            assert proc.poll() is None, "the rollout ended before it was killed"
            assert time.monotonic() < deadline, "the rollout wrote no results"
            time.sleep(0.02)
    finally:
        proc.kill()
        proc.wait()
    done_before = len(read_results(results)[0])
    assert 2 <= done_before < 12
    client = docker.from_env()
    label = {"label": f"cowork.owner_pid={proc.pid}"}
    assert client.containers.list(all=True, filters=label)  # its sandboxes outlived it

    assert main(["rollout", *map(str, slow), "--group-size", "6", "--concurrency", "2", "--out", str(out)]) == 0
    assert f"({12 - done_before} run now, {done_before} done before)" in capsys.readouterr().out
    rows, end = read_results(results)
    keys = [(r["task"], r["sample"]) for r in rows]
    assert len(keys) == len(set(keys)) == 12 and set(keys) == {(t, s) for t in ("slow-a", "slow-b") for s in range(6)}
    assert end == results.stat().st_size and all(r["reward"] == 1.0 for r in rows)

    sweep()
    assert client.containers.list(all=True, filters=label) == []


class Sabotage(ScriptedPolicy):
    """Plays the oracle; before its step ``at`` (1-based), does ``act_out`` to its container,
    once, from outside. Counts its resets (a retry replays the script on a fresh sandbox)."""

    def __init__(self, spec, at: int, act_out):
        super().__init__([(s.tool, dict(s.args)) for s in spec.oracle], name="sabotage")
        self.at, self.act_out, self.fired, self.resets = at, act_out, 0, 0

    def reset(self) -> None:
        self.resets += 1
        super().reset()

    async def act(self, messages, tools):
        if self._next + 1 == self.at and not self.fired:
            self.fired += 1
            self.act_out(_my_container(self.task))
        return await super().act(messages, tools)


def _my_container(task: str):
    from cowork.engine import labels as L
    from cowork.engine.reaper import managed_containers

    mine = [c for c in managed_containers() if (c.labels or {}).get(L.SESSION) == L.SESSION_ID
            and (c.labels or {}).get(L.TASK) == task and c.status == "running"]
    assert len(mine) == 1, [c.name for c in mine]
    return mine[0]


async def test_what_the_agent_broke_is_scored_0_and_what_broke_outside_is_retried(no_leftovers):
    made: list[Sabotage] = []

    def sabotage(act_out, at):
        def make(spec):
            p = Sabotage(spec, at, act_out)
            p.task = spec.id
            made.append(p)
            return p
        return make

    async with RolloutRunner(concurrency=1, pool_size=1) as runner:  # no spare: the saboteur's is the one
        # Killed from inside, as a memory blow-up would: the container exists, stopped.
        broke = await runner.rollout([CSV], sabotage(lambda c: c.kill(), at=3), group_size=1)
        # Removed from outside (Docker lost it): infrastructure.
        infra = await runner.rollout([CSV], sabotage(lambda c: c.remove(force=True), at=2), group_size=1)
    (b,), (i,) = broke.samples, infra.samples
    pb, pi = made

    assert b.status == b.grade.status == "agent_broke_sandbox" and b.reward == 0.0
    assert b.infra_failures == [] and pb.fired == 1 and pb.resets == 0          # never retried
    assert broke.summary["episodes"] == {"total": 1, "infra_error": 0, "policy_error": 0, "policy_error_unsafe": 0,
                                         "infra_retries": 0, "agent_broke_sandbox": 1}

    assert i.status == "completed" and i.grade.status == "graded" and i.reward == 1.0
    assert len(i.infra_failures) == 1 and pi.fired == 1 and pi.resets == 1      # retried once, on a fresh sandbox
    assert infra.summary["episodes"] == {"total": 1, "infra_error": 0, "policy_error": 0, "policy_error_unsafe": 0,
                                         "infra_retries": 1, "agent_broke_sandbox": 0}
    assert len(made) == 2  # one policy per episode


def test_docs_rollout_example_runs(tmp_path):
    """docs/api.md's RolloutRunner example runs as written (from a folder with the specs)."""
    readme = (ROOT / "docs" / "api.md").read_text()
    start = readme.index("```python\nimport asyncio\nfrom cowork import RolloutRunner")
    code = readme[start + len("```python\n"):readme.index("```", start + 10)]
    (tmp_path / "specs").symlink_to(ROOT / "specs")
    (tmp_path / "example.py").write_text(code)
    proc = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "0 [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]] 1.0" in proc.stdout
    assert "fix-csv-report 2 102 completed 1.0 True" in proc.stdout
