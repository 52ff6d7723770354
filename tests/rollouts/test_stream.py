"""Streaming rollouts without a daemon: groups handed over as they finish while later groups run,
the policy version each sample started with, and the ``max_staleness`` bound."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cowork.episode import run as episode
from cowork.episode.run import EpisodeResult, Trajectory
from cowork.errors import CoworkError
from cowork.grading import Grade
from cowork.rollouts.runner import RolloutRunner

ROOT = Path(__file__).resolve().parents[2]
TASKS = [ROOT / "specs" / name for name in ("fix-csv-report", "crm-update-from-mail", "organize-downloads")]


class Clocked:
    """Stands in for episode.run_task: each episode lasts ``ticks`` steps of a shared clock the
    test advances, and records what was running when it started."""

    def __init__(self, ticks: int = 2):
        self.ticks = ticks
        self.now = 0
        self.tick = asyncio.Event()
        self.started: list[tuple[str, int]] = []
        self.running = 0
        self.fail: str | None = None

    async def advance(self, n: int = 1) -> None:
        for _ in range(n):
            self.now += 1
            self.tick.set()
            self.tick = asyncio.Event()
            await asyncio.sleep(0)
            await asyncio.sleep(0)

    async def __call__(self, loaded, policy, **kwargs):
        self.started.append((loaded.spec.id, self.now))
        if self.fail == loaded.spec.id:
            raise CoworkError(f"no image for {loaded.spec.id}")
        self.running += 1
        try:
            end = self.now + self.ticks
            while self.now < end:
                await self.tick.wait()
        finally:
            self.running -= 1
        t = Trajectory(task=loaded.spec.id, agent=policy.name, status="completed", turns=1)
        return EpisodeResult(t, Grade(task=loaded.spec.id, status="graded", score=1.0, passed=True, safe=True), None, [])


@pytest.fixture
def clock(monkeypatch):
    c = Clocked()
    monkeypatch.setattr(episode, "run_task", c)
    return c


def oracle(spec):
    from cowork.agents import make_policy

    return make_policy("oracle", spec)


async def next_group(stream, clock, limit: int = 200):
    """The stream's next group, advancing the clock until it comes."""
    task = asyncio.ensure_future(stream.__anext__())
    for _ in range(limit):
        if task.done():
            return task.result()
        await clock.advance()
    task.cancel()
    raise AssertionError("no group came")


class TestStream:
    async def test_a_group_is_handed_over_while_later_groups_run(self, clock):
        async with RolloutRunner(concurrency=2, pool=object()) as runner:
            async with runner.stream(TASKS, oracle, group_size=2, version=lambda: 0) as groups:
                first = await next_group(groups, clock)
                # The first group is done, the second already running: the trainer steps now.
                assert first.task == "fix-csv-report" and [s.sample for s in first.samples] == [0, 1]
                assert clock.running == 2 and groups.stats.finished == 2
                assert {t for t, _ in clock.started} == {"fix-csv-report", "crm-update-from-mail"}
                rest = [await next_group(groups, clock) for _ in range(2)]
                with pytest.raises(StopAsyncIteration):
                    await groups.__anext__()
        assert [g.task for g in rest] == ["crm-update-from-mail", "organize-downloads"]
        assert all(s.policy_version == 0 and s.reward == 1.0 for g in [first, *rest] for s in g.samples)

    async def test_max_staleness_zero_hands_over_only_samples_of_the_current_version(self, clock):
        version = 0
        async with RolloutRunner(concurrency=4, pool=object()) as runner:
            async with runner.stream(TASKS, oracle, group_size=2, max_staleness=0,
                                     version=lambda: version) as groups:
                seen = []
                for _ in range(3):
                    group = await next_group(groups, clock)
                    seen.append([s.policy_version for s in group.samples])
                    assert all(s.policy_version == version for s in group.samples)
                    version += 1  # the trainer's step: the episodes in flight are now stale
                stats = groups.stats
        assert seen == [[0, 0], [1, 1], [2, 2]]
        # Group 2 was running when version 1 came: its samples were dropped and run again.
        assert stats.stale_dropped >= 2 and stats.started == 6 + stats.stale_dropped

    async def test_without_a_bound_stale_samples_are_handed_over(self, clock):
        version = 0
        async with RolloutRunner(concurrency=4, pool=object()) as runner:
            async with runner.stream(TASKS, oracle, group_size=2, version=lambda: version) as groups:
                await next_group(groups, clock)
                version += 1
                second = await next_group(groups, clock)
        assert [s.policy_version for s in second.samples] == [0, 0] and groups.stats.stale_dropped == 0

    async def test_max_staleness_one_allows_one_version_of_lag(self, clock):
        version = 0
        async with RolloutRunner(concurrency=4, pool=object()) as runner:
            async with runner.stream(TASKS, oracle, group_size=2, max_staleness=1,
                                     version=lambda: version) as groups:
                await next_group(groups, clock)
                version += 1
                second = await next_group(groups, clock)  # started at 0, now 1: within the bound
                version += 2
                third = await next_group(groups, clock)   # started at 0 or 1, now 3: run again
        assert [s.policy_version for s in second.samples] == [0, 0]
        assert all(3 - s.policy_version <= 1 for s in third.samples) and groups.stats.stale_dropped >= 2

    async def test_max_groups_ahead_holds_back_new_groups(self, clock):
        async with RolloutRunner(concurrency=4, pool=object()) as runner:
            async with runner.stream(TASKS, oracle, group_size=2, max_groups_ahead=1) as groups:
                await clock.advance(20)  # the trainer takes nothing yet: one group, done, waits for it
                assert {t for t, _ in clock.started} == {"fix-csv-report"} and len(clock.started) == 2
                first = await groups.__anext__()
                await clock.advance(1)
                assert {t for t, _ in clock.started} == {"fix-csv-report", "crm-update-from-mail"}
        assert first.task == "fix-csv-report"

    async def test_an_error_outside_the_episodes_reaches_the_trainer(self, clock):
        clock.fail = "crm-update-from-mail"
        async with RolloutRunner(concurrency=2, pool=object()) as runner:
            async with runner.stream(TASKS, oracle, group_size=2) as groups:
                with pytest.raises(CoworkError, match="no image for crm-update-from-mail"):
                    for _ in range(3):
                        await next_group(groups, clock)
                with pytest.raises(StopAsyncIteration):  # the stream ended with the error: nothing restarts
                    await groups.__anext__()
        assert clock.running == 0

    def test_arguments_are_checked(self):
        runner = RolloutRunner(concurrency=2, pool=object())
        with pytest.raises(ValueError, match="version"):
            runner.stream(TASKS, oracle, group_size=2, max_staleness=1)
        with pytest.raises(ValueError, match="max_staleness"):
            runner.stream(TASKS, oracle, group_size=2, max_staleness=-1, version=lambda: 0)
        with pytest.raises(ValueError, match="group_size"):
            runner.stream(TASKS, oracle, group_size=0)
