"""Rollouts on a Ray cluster: two logical nodes (ray.cluster_utils) sharing this machine's Docker
engine, each with a cowork actor and its own sandbox pool; placement, grades against a local
run, a node actor killed mid-run, the driver-side policy and the CLI flag."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed")

from cowork.agents import make_policy  # noqa: E402
from cowork.cli import main  # noqa: E402
from cowork.engine import labels as L  # noqa: E402
from cowork.engine.reaper import managed_containers  # noqa: E402
from cowork.errors import CoworkError  # noqa: E402
from cowork.integrations.ray import Agent, RayRolloutRunner  # noqa: E402
from cowork.rollouts.runner import RolloutRunner, read_results  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.timeout(400)]
ROOT = Path(__file__).resolve().parents[2]
SPECS = [ROOT / "specs" / "fix-csv-report", ROOT / "specs" / "organize-downloads"]
SLOTS = 2


oracle = Agent("oracle")  # a factory defined here would not unpickle on the nodes (this module is not importable)


@pytest.fixture(scope="module")
def cluster():
    """Two logical Ray nodes on this machine, each a Docker host of SLOTS sandboxes (shared by the tests:
    a cluster takes seconds to start)."""
    from ray.cluster_utils import Cluster

    small = {"num_cpus": 1, "resources": {"cowork": SLOTS}, "object_store_memory": 80 * 1024 ** 2}
    c = Cluster(initialize_head=True, head_node_args={**small, "include_dashboard": False})
    c.add_node(**small)
    ray.init(address=c.address, log_to_driver=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


def _containers(sessions: set[str]) -> list[str]:
    return [c.name for c in managed_containers() if (c.labels or {}).get(L.SESSION) in sessions]


def _rows(out: Path) -> list[dict]:
    rows, _ = read_results(out / "results.jsonl")
    return rows


async def test_rollout_lands_on_both_nodes_and_grades_as_a_local_run(cluster, tmp_path):
    out = tmp_path / "ray"
    async with RayRolloutRunner(None, out_dir=out) as runner:
        res = await runner.rollout(SPECS, oracle, group_size=8, seed=0)
        sessions = {a.session for a in runner.actors}
        nodes = {a.node_id for a in runner.actors}
        assert len(runner.actors) == 2 and len(nodes) == 2
    assert not _containers(sessions), "the node actors' sandboxes outlived the runner"
    rows = _rows(out)
    assert len(rows) == 16 and len({(r["task"], r["sample"]) for r in rows}) == 16
    assert {r["node"] for r in rows} == {s.node for s in res.samples} == nodes
    for spec in SPECS:  # each task's group was spread over both nodes
        assert len({r["node"] for r in rows if r["task"] == spec.name}) == 2
    assert all((out / r["evidence"] / "grade.json").is_file() for r in rows)
    assert not any(r["infra_failures"] for r in rows)

    async with RolloutRunner(concurrency=2) as local:
        here = await local.rollout(SPECS, oracle, group_size=8, seed=0)
    want = {(s.task, s.sample): (s.grade.status, s.grade.score, s.grade.passed, s.grade.safe) for s in here.samples}
    got = {(r["task"], r["sample"]): (r["grade_status"], r["score"], r["passed"], r["safe"]) for r in rows}
    assert got == want
    assert all(v[1] == 1.0 for v in got.values())

    # The results file on the driver is the run's single record: a rerun resumes, runs nothing.
    async with RayRolloutRunner(None, out_dir=out) as runner:
        again = await runner.rollout(SPECS, oracle, group_size=8, seed=0)
    assert again.summary["episodes_run"] == 0 and again.summary["episodes_resumed"] == 16
    assert len(_rows(out)) == 16 and {s.node for s in again.samples} == {r["node"] for r in rows}


async def test_a_killed_node_actor_has_its_episodes_run_again_on_the_other(cluster, tmp_path):
    out = tmp_path / "killed"
    killed: dict = {}
    runner = RayRolloutRunner(None, out_dir=out)

    def kill_one(sample) -> None:
        if killed:
            return
        busy = max(runner.actors, key=lambda a: a.in_flight)
        if busy.in_flight < 1:  # between a finish and the next placement every slot can be idle: wait for one
            return
        killed.update(node=busy.node_id, session=busy.session, in_flight=busy.in_flight)
        ray.kill(busy.handle, no_restart=True)  # the process goes at once, its sandboxes with no goodbye

    async with runner:
        await runner.rollout(SPECS, oracle, group_size=8, on_episode=kill_one)
        assert killed["in_flight"] >= 1
        assert not _containers({killed["session"]}), "the dead actor's sandboxes were not removed"
        sessions = {a.session for a in runner.actors}
        reruns = list(runner.reruns)
    assert not _containers(sessions)
    rows = _rows(out)
    assert len(rows) == 16 and len({(r["task"], r["sample"]) for r in rows}) == 16, "a duplicate or missing row"
    assert all(r["score"] == 1.0 for r in rows)
    assert reruns and {n for _, _, n in reruns} == {killed["node"]}
    by_key = {(r["task"], r["sample"]): r for r in rows}
    for task, sample, _ in reruns:
        row = by_key[(task, sample)]
        assert row["node"] != killed["node"]
        assert any("lost while running the episode" in f for f in row["infra_failures"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes_run"] == 16


def unimportable_oracle(spec):
    """Pickled by reference to this test module, which the nodes cannot import."""
    return make_policy("oracle", spec)


async def test_a_factory_the_nodes_cannot_import_is_refused_with_the_fix(cluster):
    async with RayRolloutRunner(None) as runner:
        with pytest.raises(CoworkError, match="cannot unpickle the policy factory.*Agent"):
            await runner.rollout(SPECS[:1], unimportable_oracle, group_size=1)


class HeldPolicy:
    """An oracle that lives on the driver only: it holds a lock (which cannot be pickled) and
    records each turn it served."""

    def __init__(self, spec, turns: list, lock: threading.Lock):
        self.inner, self.turns, self.lock, self.name = make_policy("oracle", spec), turns, lock, "held-oracle"

    async def act(self, messages, tools):
        with self.lock:
            self.turns.append(threading.get_ident())
        return await self.inner.act(messages, tools)

    def reset(self) -> None:
        self.inner.reset()


async def test_a_driver_side_policy_serves_every_turn_from_the_driver(cluster, tmp_path):
    turns: list = []
    lock = threading.Lock()

    def factory(spec):
        return HeldPolicy(spec, turns, lock)

    async with RayRolloutRunner(None, policy_at="node") as runner:
        with pytest.raises(CoworkError, match="cannot be sent to the Ray nodes.*policy_at='driver'"):
            await runner.rollout(SPECS[:1], factory, group_size=1)
    async with RayRolloutRunner(None, policy_at="driver", out_dir=tmp_path / "held") as runner:
        res = await runner.rollout(SPECS[:1], factory, group_size=4)
    assert [s.grade.score for s in res.samples] == [1.0] * 4
    assert {s.trajectory.agent for s in res.samples} == {"held-oracle"}
    assert len(turns) == sum(s.trajectory.turns for s in res.samples) > 0  # every turn was asked of the driver
    assert len({s.node for s in res.samples}) == 2


def test_cli_rollout_with_ray(cluster, tmp_path, capsys):
    out = tmp_path / "cli"
    address = cluster.address
    assert main(["rollout", str(SPECS[0]), "--group-size", "2", "--ray", address, "--out", str(out)]) == 0
    rows = _rows(out)
    assert len(rows) == 2 and all(r["score"] == 1.0 and r["node"] for r in rows)
