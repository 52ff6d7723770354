"""The early health check (``Sandbox.begin_episode(early=True)``, ``SandboxPool.acquire(early=True)``),
against the real control server and the real tool transport in-process: nothing reaches the
server before the check answered, a failed check fails every later use as an infrastructure
error, and an episode that meets one is never the agent's fault."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cowork.agents import ScriptedPolicy
from cowork.episode.run import run_episode
from cowork.errors import SandboxError, SandboxNotReady
from cowork.formats import CONTROL_SOCKET, RPC_SOCKET
from cowork.sandbox.mcp import RpcMcpClient
from cowork.sandbox.pool import SandboxPool, early_acquire
from cowork.sandbox.sandbox import Sandbox
from cowork.server.app import ServerConfig, build_app
from cowork.server.state.audit import AuditLog
from cowork.server.tools.workspace import WorkspaceConfig
from cowork.spec.loader import load_spec
from cowork.toolhost.control import serve_control
from cowork.toolhost.rpc import RpcServer

SPEC = Path(__file__).resolve().parents[2] / "specs" / "fix-csv-report"


class _Server:
    """A real tool host (read_file over rpc.sock) and a real control server whose
    ``begin_episode`` answers when ``answer`` is set, or fails when ``fail`` is."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.answer = asyncio.Event()
        self.fail = False
        self.order: list[str] = []

    async def begin(self, req: dict) -> dict:
        await self.answer.wait()
        if self.fail:
            raise RuntimeError("the server is wedged")
        self.order.append(f"begin {req.get('seed')}")
        return {"episode": 1, "audit_count": 0}

    async def export(self, req: dict) -> dict:
        self.order.append("export")
        return {"audit_count": 0, "audit_last_hash": ""}


@contextlib.asynccontextmanager
async def _sandbox(tmp_path: Path) -> AsyncIterator[tuple[_Server, Sandbox]]:
    run_dir = tmp_path / "r"  # unix socket paths are short-limited: near the root of tmp
    run_dir.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hello\n")
    srv = _Server(run_dir)
    audit = AuditLog(str(tmp_path / "audit.jsonl"))
    host, fs = build_app(ServerConfig(task_id="t", tools=["read_file"],
                                      workspace=WorkspaceConfig(root=str(ws), tool_timeout_s=5)), audit)
    rpc = RpcServer(host, version="1")
    await rpc.start(str(run_dir / RPC_SOCKET))
    control = await serve_control(str(run_dir / CONTROL_SOCKET), {"begin_episode": srv.begin,
                                                                   "export_workspace": srv.export})
    real_call = host.call_tool

    async def noted(name: str, args: Any) -> Any:
        srv.order.append(f"call {name}")
        return await real_call(name, args)

    host.call_tool = noted  # type: ignore[method-assign]
    sb = Sandbox(load_spec(SPEC), "image", "no-such-container", "cowork-test", run_dir)
    sb._client = await sb._stack.enter_async_context(RpcMcpClient(str(run_dir / RPC_SOCKET)))

    async def no_diagnosis() -> tuple[str, str]:
        raise AssertionError("a failed early check needs no diagnosis: it is the sandbox's, never the agent's")

    sb.diagnose = no_diagnosis  # type: ignore[method-assign]
    try:
        yield srv, sb
    finally:
        await sb.detach()
        rpc.close()
        control.close()
        await control.wait_closed()
        fs.close()
        audit.close()


async def test_nothing_reaches_the_server_before_the_check_answered(tmp_path: Path) -> None:
    async with _sandbox(tmp_path) as (srv, sb):
        await sb.begin_episode(7, early=True)  # returns at once
        assert sb.uses == 1
        call = asyncio.ensure_future(sb.call_tool("read_file", {"path": "a.txt"}))
        await asyncio.sleep(0.1)
        assert not call.done() and srv.order == []
        srv.answer.set()
        r = await asyncio.wait_for(call, 5)
        assert not r.is_error and r.text == "hello\n"
        assert srv.order == ["begin 7", "call read_file"]
        await sb.call_tool("read_file", {"path": "a.txt"})  # answered once: no more waiting
        assert srv.order[-1] == "call read_file"


async def test_a_failed_check_fails_every_later_use_as_the_sandboxs_failure(tmp_path: Path) -> None:
    async with _sandbox(tmp_path) as (srv, sb):
        srv.fail = True
        srv.answer.set()
        await sb.begin_episode(early=True)
        sb.pristine = {"hash": "x"}
        for use in (lambda: sb.call_tool("read_file", {"path": "a.txt"}), sb.export_evidence,
                    lambda: sb.reset(discard_evidence=True), sb.state, sb.list_tools,
                    lambda: sb.act("world", [])):
            with pytest.raises(SandboxNotReady, match="failed its health check .*the server is wedged"):
                await use()
        assert issubclass(SandboxNotReady, SandboxError)
        assert srv.order == []  # no call, export or action reached the server


async def test_an_episode_that_meets_a_failed_check_is_an_infrastructure_error(tmp_path: Path) -> None:
    """The attack: a check that fails while the model takes its first turn must not be read
    as the agent breaking the sandbox (score 0, counted against the policy); diagnose() would
    say "agent" for a server that stopped answering, so it must not be asked."""
    async with _sandbox(tmp_path) as (srv, sb):
        srv.fail = True
        srv.answer.set()
        await sb.begin_episode(early=True)
        traj = await run_episode(sb, ScriptedPolicy([("read_file", {"path": "a.txt"})]))
        assert traj.status == "infra_error" and "failed its health check" in (traj.error or "")
        assert srv.order == []


async def test_a_check_still_waiting_is_cancelled_when_the_sandbox_goes(tmp_path: Path) -> None:
    async with _sandbox(tmp_path) as (srv, sb):
        await sb.begin_episode(early=True)
        check = sb._begun
        assert check is not None and not check.done()
        sb._drop_check()
        await asyncio.sleep(0)
        assert check.cancelled()
        with pytest.raises(SandboxNotReady, match="cancelled"):
            await sb.call_tool("read_file", {"path": "a.txt"})


async def test_a_caller_cancelled_while_waiting_leaves_the_check_running(tmp_path: Path) -> None:
    async with _sandbox(tmp_path) as (srv, sb):
        await sb.begin_episode(early=True)
        call = asyncio.ensure_future(sb.call_tool("read_file", {"path": "a.txt"}))
        await asyncio.sleep(0.05)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
        srv.answer.set()
        r = await asyncio.wait_for(sb.call_tool("read_file", {"path": "a.txt"}), 5)
        assert not r.is_error and srv.order == ["begin None", "call read_file"]


def test_only_pools_that_take_it_are_asked_for_an_early_check() -> None:
    class OldPool:  # a pool-like object of a user's, from before ``early``
        async def acquire(self, spec: Any, seed: int | None = None) -> Any: ...

    assert early_acquire(SandboxPool()) == {"early": True}
    assert early_acquire(OldPool()) == {}
