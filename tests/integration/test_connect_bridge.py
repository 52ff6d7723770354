"""``cowork connect`` (cli/bridge.py) end to end: real stdio MCP clients (the ``mcp`` SDK and
fastmcp) through the bridge to a real sandbox; one backend connection for the whole session;
a sandbox removed under the client ends the session with one line, not a traceback."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from cowork import formats
from cowork.cli import exits

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "specs" / "fix-csv-report")
CONNECT = [sys.executable, "-m", "cowork.cli", "connect"]
#: The server's socket as the kernel names it: its path inside the container.
MCP_SOCKET = os.path.join(formats.RUN_DIR, formats.MCP_SOCKET)


@pytest.fixture
async def sandbox():
    """A running sandbox no process holds a session with (as after ``cowork up``), and what
    ``Sandbox`` itself sees of it; removed at the end whatever happened."""
    from cowork.engine.container import remove_container
    from cowork.sandbox.sandbox import Sandbox

    sb = await Sandbox.start(SPEC, keep=True)
    try:
        tools = await sb.list_tools()
        await sb.detach()
        yield SimpleNamespace(id=sb.id, short=sb.id[:12], tools=tools, run_dir=str(sb.run_dir))
    finally:
        await asyncio.to_thread(remove_container, sb.id, str(sb.run_dir))


def tool_view(tools) -> dict:
    """Each tool as its wire form: names, annotations, schemas."""
    return {t.name: t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools}


def bridge_pid(short: str) -> int:
    """The ``cowork connect`` process of this sandbox (the clients do not expose it)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0") if entry.isdigit() else []
        except OSError:
            continue
        if b"connect" in argv and short.encode() in argv and b"cowork.cli" in argv:
            pids.append(int(entry))
    assert len(pids) == 1, pids
    return pids[0]


def mcp_connections(pid: int) -> set[int]:
    """The bridge's sockets whose other end is a sandbox's MCP server. The server's end of a
    connection is a socket with the listener's path; ``ss`` names each end's peer."""
    mine = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            mine.update(int(i) for i in re.findall(r"socket:\[(\d+)\]", os.readlink(f"/proc/{pid}/fd/{fd}")))
        except OSError:
            continue
    listing = subprocess.run(["ss", "-x", "-H"], capture_output=True, text=True, check=True).stdout
    peers = {int(f[7]) for f in map(str.split, listing.splitlines()) if len(f) >= 8 and f[4] == MCP_SOCKET}
    return mine & peers


needs_ss = pytest.mark.skipif(shutil.which("ss") is None, reason="needs `ss` (iproute2) to see socket peers")


async def check_calls(call, short: str) -> None:
    """Many calls through the bridge, all over one backend connection; with the old proxy
    (a new backend session per call) no connection outlives its call."""
    pid = bridge_pid(short)
    seen = []
    for i in range(12):
        text = await call("read_file", {"path": "README.md"})
        assert "Q3 sales report" in text
        seen.append(mcp_connections(pid))
    assert len(seen[0]) == 1 and all(s == seen[0] for s in seen), seen


@needs_ss
async def test_mcp_sdk_client_through_the_bridge(sandbox, tmp_path):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=CONNECT[0], args=[*CONNECT[1:], sandbox.short], env=dict(os.environ),
                                   cwd=str(ROOT))
    with open(tmp_path / "stderr", "w") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
            await session.initialize()  # the handshake: one Mcp-Session-Id behind the bridge
            tools = (await session.list_tools()).tools
            assert tool_view(tools) == tool_view(sandbox.tools)
            assert "shell" in tool_view(tools) and tool_view(tools)["read_file"]["annotations"]["readOnlyHint"]

            async def call(name, args):
                r = await session.call_tool(name, args)
                assert not r.is_error
                return r.content[0].text

            await check_calls(call, sandbox.short)
            shell = await session.call_tool("shell", {"command": "cat reports/summary.json"})
            assert "2026-Q3" in shell.structured_content["output"]
            missing = await session.call_tool("read_file", {"path": "no/such/file.md"})
            assert missing.is_error and "no/such/file.md" in missing.content[0].text
            unknown = await session.call_tool("no_such_tool", {})
            assert unknown.is_error and "no_such_tool" in unknown.content[0].text
    assert "Traceback" not in (tmp_path / "stderr").read_text()


@needs_ss
async def test_fastmcp_client_through_the_bridge(sandbox, tmp_path):
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    transport = StdioTransport(command=CONNECT[0], args=[*CONNECT[1:], sandbox.short], env=dict(os.environ),
                               cwd=str(ROOT), log_file=tmp_path / "stderr")
    async with Client(transport) as client:  # stateless revision: server/discover, then per-request envelopes
        assert tool_view(await client.list_tools()) == tool_view(sandbox.tools)

        async def call(name, args):
            r = await client.call_tool(name, args)
            return r.content[0].text

        await check_calls(call, sandbox.short)
        missing = await client.call_tool("read_file", {"path": "no/such/file.md"}, raise_on_error=False)
        assert missing.is_error and "no/such/file.md" in missing.content[0].text
        unknown = await client.call_tool("no_such_tool", {}, raise_on_error=False)
        assert unknown.is_error and "no_such_tool" in unknown.content[0].text
    assert "Traceback" not in (tmp_path / "stderr").read_text()


# --------------------------------------------------------------------------- the sandbox goes away
class RawClient:
    """``cowork connect`` driven by hand, to see its exit code and its stderr."""

    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc

    @classmethod
    async def start(cls, short: str) -> "RawClient":
        proc = await asyncio.create_subprocess_exec(*CONNECT, short, cwd=str(ROOT), stdin=subprocess.PIPE,
                                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        client = cls(proc)
        init = await client.request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                                      "clientInfo": {"name": "test", "version": "1"}})
        assert init["result"]["serverInfo"]["name"] == "cowork:fix-csv-report"
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return client

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")

    async def request(self, rid: int, method: str, params: dict) -> dict:
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return json.loads(await asyncio.wait_for(self.proc.stdout.readline(), 60))

    async def ended(self) -> tuple[int, str]:
        rc = await asyncio.wait_for(self.proc.wait(), 60)
        return rc, (await self.proc.stderr.read()).decode()

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()


def gone_line(short: str) -> str:
    return f"cowork connect: sandbox {short} is gone (removed or stopped); ending the session"


async def test_sandbox_removed_while_idle_ends_the_session(sandbox):
    from cowork.engine.container import remove_container

    client = await RawClient.start(sandbox.short)
    try:
        ok = await client.request(2, "tools/call", {"name": "read_file", "arguments": {"path": "README.md"}})
        assert ok["result"].get("isError") is not True
        await asyncio.to_thread(remove_container, sandbox.id)  # the socket file stays: connections are refused
        rc, err = await client.ended()  # stdin still open: the bridge notices by itself
    finally:
        client.kill()
    assert rc == exits.INFRASTRUCTURE
    assert err.splitlines() == [gone_line(sandbox.short)] and "Traceback" not in err, err


async def test_sandbox_removed_during_a_call_answers_it_then_ends(sandbox):
    from cowork.engine.container import remove_container

    client = await RawClient.start(sandbox.short)
    try:
        client.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                     "params": {"name": "shell", "arguments": {"command": "sleep 50"}}})
        # Calls are not queued behind a running one: this one is answered first.
        quick = await client.request(8, "tools/call", {"name": "read_file", "arguments": {"path": "README.md"}})
        assert quick["id"] == 8 and "Q3 sales report" in quick["result"]["content"][0]["text"]
        await asyncio.to_thread(remove_container, sandbox.id, sandbox.run_dir)  # the socket file goes too
        answer = json.loads(await asyncio.wait_for(client.proc.stdout.readline(), 60))
        rc, err = await client.ended()
    finally:
        client.kill()
    assert answer["id"] == 7 and answer["error"]["code"] == -32000 and "gone" in answer["error"]["message"]
    assert rc == exits.INFRASTRUCTURE
    assert err.splitlines() == [gone_line(sandbox.short)] and "Traceback" not in err, err


async def test_unknown_sandbox_is_one_line_and_exit_2():
    proc = await asyncio.create_subprocess_exec(*CONNECT, "no-such-sandbox-0000", cwd=str(ROOT),
                                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == exits.BAD_INPUT and out == b""
    assert "no cowork sandbox matches 'no-such-sandbox-0000'" in err.decode() and "Traceback" not in err.decode()
