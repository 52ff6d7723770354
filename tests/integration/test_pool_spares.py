"""SandboxPool spares on real containers: resets run off the critical path, a spare is handed
out while the released sandbox still resets, a failed background reset never hands its
sandbox out, and close() cancels resets in flight and leaks nothing."""

from __future__ import annotations

import asyncio

import docker
import pytest

from cowork.bench import default_spec
from cowork.sandbox.pool import SandboxPool
from cowork.spec.loader import load_spec

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def loaded():
    return load_spec(default_spec())


def _hold_reset(sb):
    """Make ``sb``'s next reset wait for the returned gate (then run the real one); the
    returned ``entered`` event is set once the pool's background reset has begun."""
    gate, entered = asyncio.Event(), asyncio.Event()
    real = sb.reset

    async def held(*args, **kwargs):
        entered.set()
        await gate.wait()
        return await real(*args, **kwargs)

    sb.reset = held
    return gate, entered


def _exists(cid: str) -> bool:
    return bool(docker.from_env().containers.list(all=True, filters={"id": cid}))


async def _use(sb) -> None:
    """An episode's worth of change, exported so the sandbox may be reset."""
    r = await sb.call_tool("write_file", {"path": "scratch.txt", "content": "episode"})
    assert not r.is_error, r.text
    await sb.export_evidence()


class TestSpares:
    async def test_acquire_takes_a_verified_spare_while_the_released_sandbox_resets(self, loaded, no_leftovers):
        async with SandboxPool(max_per_task=2, max_total=2, spares=1) as pool:
            a = await pool.acquire(loaded)
            await pool.wait_idle()
            assert pool.counts() == {"warm": 1, "busy": 1, "starting": 0, "resetting": 0}  # the spare
            gate, entered = _hold_reset(a)
            await _use(a)
            await pool.release(a)
            await entered.wait()

            b = await pool.acquire(loaded)  # a's reset is still held: b cannot have waited for it
            assert b is not a and not gate.is_set()
            assert pool.counts() == {"warm": 0, "busy": 1, "starting": 0, "resetting": 1}
            assert (await b.state())["hash"] == b.pristine["hash"]  # ready and verified clean

            gate.set()
            await pool.wait_idle()
            assert pool.stats["resets"] == 1 and pool.stats["started"] == 2
            assert (await a.state())["hash"] == a.pristine["hash"]  # warm again only once verified
            await pool.release(b)

    async def test_a_sandbox_whose_background_reset_fails_is_never_handed_out(self, loaded, no_leftovers):
        async with SandboxPool(max_per_task=3, max_total=3, spares=1) as pool:
            a = await pool.acquire(loaded)
            await pool.wait_idle()
            # A process of another user (not the agent's, so the reset does not kill it): the
            # state after the reset cannot equal the pristine one.
            docker.from_env().containers.get(a.id).exec_run(
                ["setpriv", "--reuid=1001", "--regid=1001", "--clear-groups", "sleep", "300"], detach=True)
            gate, entered = _hold_reset(a)
            await _use(a)
            await pool.release(a)
            await entered.wait()
            b = await pool.acquire(loaded)  # the spare, while a's doomed reset is in flight
            assert b is not a

            gate.set()
            await pool.wait_idle()
            assert pool.stats["reset_failed"] == 1 and pool.stats["resets"] == 0
            assert not _exists(a.id)
            # Its replacement was started in the background: the next acquire takes it warm.
            assert pool.counts() == {"warm": 1, "busy": 1, "starting": 0, "resetting": 0}
            c = await pool.acquire(loaded)
            assert c.id not in (a.id, b.id) and pool.stats["started"] == 3
            await pool.discard(b)
            await pool.discard(c)

    async def test_close_cancels_resets_in_flight_and_leaks_nothing(self, loaded, no_leftovers):
        pool = SandboxPool(max_per_task=2, max_total=2, spares=1)
        try:
            a = await pool.acquire(loaded)
            await pool.wait_idle()
            _gate, entered = _hold_reset(a)  # a reset that never ends (a hung tool it drains, say)
            await _use(a)
            await pool.release(a)
            await entered.wait()
            b = await pool.acquire(loaded)  # in use when the pool closes
        finally:
            await asyncio.wait_for(pool.close(), 60)
        assert pool.total == 0 and pool.counts() == {"warm": 0, "busy": 0, "starting": 0, "resetting": 0}
        assert not _exists(a.id) and not _exists(b.id)


class TestRunnerPool:
    async def test_the_rollout_runner_keeps_a_spare_beyond_its_concurrency(self):
        from cowork.rollouts.runner import RolloutRunner

        runner = RolloutRunner(concurrency=4)
        pool = runner._get_pool()
        try:
            assert pool.spares >= 1 and pool.max_per_task == pool.max_total == 4 + pool.spares
        finally:
            await runner.close()
