"""The kept-open control connection (sandbox/control.py ControlChannel) against the real control
server (toolhost/control.py) on a unix socket: one connection for many requests, nothing
waits behind a long request, a late answer is never read as the next request's, and a
server that went away is reconnected to."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cowork.errors import SandboxError
from cowork.formats import CONTROL_SOCKET
from cowork.sandbox.control import ControlChannel
from cowork.toolhost.control import serve_control


class _Server:
    """The real control server with two ops: ``echo`` (answers at once) and ``slow`` (answers
    when released)."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.release = asyncio.Event()
        self.server: Any = None

    async def start(self) -> None:
        async def echo(req: dict) -> dict:
            return {"echo": req.get("n")}

        async def slow(req: dict) -> dict:
            await self.release.wait()
            return {"echo": "slow"}

        self.server = await serve_control(str(self.run_dir / CONTROL_SOCKET), {"echo": echo, "slow": slow})

    async def stop(self) -> None:
        self.server.close()
        await self.server.wait_closed()


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    d = tmp_path / "r"  # unix socket paths are short-limited: keep it near the root of tmp
    d.mkdir()
    return d


@contextlib.asynccontextmanager
async def _served(run_dir: Path) -> AsyncIterator[tuple[_Server, ControlChannel]]:
    """A running server and a channel to it; both closed at the end."""
    srv = _Server(run_dir)
    await srv.start()
    ch = ControlChannel(run_dir)
    try:
        yield srv, ch
    finally:
        ch.close()
        await srv.stop()


def test_one_connection_serves_every_request(run_dir: Path) -> None:
    async def main() -> tuple[list[Any], int]:
        async with _served(run_dir) as (_, ch):
            return [(await ch.request("echo", n=i))["echo"] for i in range(20)], ch.opened

    answers, opened = asyncio.run(main())
    assert answers == list(range(20))
    assert opened == 1


def test_a_request_during_a_long_one_does_not_wait(run_dir: Path) -> None:
    async def main() -> tuple[Any, Any, bool]:
        async with _served(run_dir) as (srv, ch):
            slow = asyncio.ensure_future(ch.request("slow"))
            await asyncio.sleep(0.05)
            quick = await asyncio.wait_for(ch.request("echo", n="quick"), 2)  # own connection
            was_pending = not slow.done()
            srv.release.set()
            return quick["echo"], (await slow)["echo"], was_pending

    quick, slow, was_pending = asyncio.run(main())
    assert (quick, slow, was_pending) == ("quick", "slow", True)


def test_a_late_answer_is_never_read_as_the_next_one(run_dir: Path) -> None:
    async def main() -> tuple[Any, int]:
        async with _served(run_dir) as (srv, ch):
            with pytest.raises(SandboxError, match="did not answer 'slow'"):
                await ch.request("slow", timeout=0.1)
            srv.release.set()  # the slow answer is now written to the dropped connection
            await asyncio.sleep(0.05)
            return (await ch.request("echo", n="next"))["echo"], ch.opened

    nxt, opened = asyncio.run(main())
    assert nxt == "next"
    assert opened == 2


def test_a_cancelled_request_drops_the_connection(run_dir: Path) -> None:
    async def main() -> tuple[Any, int]:
        async with _served(run_dir) as (srv, ch):
            task = asyncio.ensure_future(ch.request("slow"))
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            srv.release.set()
            await asyncio.sleep(0.05)
            return (await ch.request("echo", n=1))["echo"], ch.opened

    assert asyncio.run(main()) == (1, 2)


def test_a_server_that_went_away_is_reconnected_to(run_dir: Path) -> None:
    async def main() -> tuple[Any, int]:
        srv = _Server(run_dir)
        await srv.start()
        ch = ControlChannel(run_dir)
        try:
            await ch.request("echo", n=1)
            srv.server.close()
            await srv.server.wait_closed()
            for t in list(asyncio.all_tasks()):  # the server's handler of our connection ends with it
                if t is not asyncio.current_task():
                    t.cancel()
            await asyncio.sleep(0.05)
            with pytest.raises(SandboxError):
                await ch.request("echo", n=2)  # nobody listens: a clear error, not a hang
            srv2 = _Server(run_dir)
            await srv2.start()
            try:
                return (await ch.request("echo", n=3))["echo"], ch.opened
            finally:
                await srv2.stop()
        finally:
            ch.close()

    answer, opened = asyncio.run(main())
    assert answer == 3
    assert opened == 2


def test_a_failed_request_reports_the_server_error(run_dir: Path) -> None:
    async def main() -> int:
        async with _served(run_dir) as (_, ch):
            with pytest.raises(SandboxError, match="unknown or incomplete request"):
                await ch.request("nope")
            await ch.request("echo", n=1)  # the connection still serves: the server answered
            return ch.opened

    assert asyncio.run(main()) == 1
