"""The two transports of a real sandbox: the host's rpc.sock, and streamable HTTP loaded on demand.

The host's own calls must never load fastmcp in the container (that was the start time and
the memory the second performance rung removed); the first external client on mcp.sock
loads it, and from then on both transports serve the same tools with the same answers and
the same audit. The tool list the image's catalog gives must be the one fastmcp gives in
that container.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from cowork import formats
from cowork.sandbox.mcp import LeanMcpClient, RpcMcpClient
from cowork.sandbox.sandbox import Sandbox, control_request

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]
SERVICES_SPEC = str(ROOT / "specs" / "schedule-around-conflicts")


def _same(wire: dict) -> dict:
    return {k: wire.get(k) for k in ("content", "structuredContent", "isError")}


async def test_host_calls_never_load_fastmcp_and_both_transports_agree():
    async with await Sandbox.start(SERVICES_SPEC) as sb:
        names = [t.name for t in await sb.tools()]
        for name in names:  # every tool once, through the host's path (most refuse {} politely)
            await sb.call_tool(name, {})
        ping = await control_request(sb.run_dir, "ping")
        assert ping["http_loaded"] is False, "a host call made the server import its HTTP stack"

        async with LeanMcpClient(str(sb.socket_path)) as http, RpcMcpClient(str(sb.run_dir / formats.RPC_SOCKET)) as rpc:
            over_http = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in await http.list_tools()]
            over_rpc = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in await rpc.list_tools()]
            assert over_rpc == over_http and len(over_rpc) == len(names) > 6
            calls = [("read_file", {"path": "nope.txt"}), ("list_files", {}),
                     ("calendar_list_events", {}), ("contacts_search", {"query": "a"}),
                     ("mail_list_folders", {}), ("read_file", {"path": 5}), ("not_a_tool", {})]
            for name, args in calls:
                a, b = await rpc.call_tool(name, args), await http.call_tool(name, args)
                assert _same(a) == _same(b), name
        assert (await control_request(sb.run_dir, "ping"))["http_loaded"] is True
        records = [json.loads(x) for x in (sb.run_dir / formats.AUDIT_LOG).read_text().splitlines()]
        made = [(r["kind"], r.get("tool"), r.get("args")) for r in records if r["kind"] in ("tool_call", "tool_denied")]
        last = made[-2 * len(calls):]
        # each of the calls was audited twice in a row, the same way, once per transport
        assert last[::2] == last[1::2] == [(k, n, a) for (k, n, a) in last[::2]]
        assert [n for _, n, _ in last[::2]] == [n for n, _ in calls]


async def test_the_agent_cannot_reach_the_host_socket():
    async with await Sandbox.start(str(ROOT / "specs" / "fix-csv-report")) as sb:
        r = await sb.call_tool("shell", {"command": f"ls -la {formats.RUN_DIR}; "
                                         f"python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); "
                                         f"s.connect('{formats.RUN_DIR}/{formats.RPC_SOCKET}')\"; echo rc=$?"})
        assert "Permission denied" in r.text and "rc=1" in r.text
        ok = await sb.call_tool("read_file", {"path": f"{formats.RUN_DIR}/{formats.RPC_SOCKET}"})
        assert ok.is_error


async def test_many_calls_in_flight_on_the_one_connection():
    async with await Sandbox.start(str(ROOT / "specs" / "fix-csv-report")) as sb:
        got = await asyncio.gather(*[sb.call_tool("shell", {"command": f"sleep 0.3; echo {i}"}) for i in range(8)])
        assert [json.loads(g.text)["output"].strip() for g in got] == [str(i) for i in range(8)]


async def test_one_control_connection_serves_every_episode():
    # Health checks, exports and resets of a sandbox share one kept-open control connection;
    # the export's audit count (taken after running calls drained) matches the log read.
    async with await Sandbox.start(str(ROOT / "specs" / "fix-csv-report")) as sb:
        await sb.record_pristine()
        for _ in range(3):
            await sb.begin_episode()
            await asyncio.gather(*[sb.call_tool("read_file", {"path": "README.md"}) for _ in range(4)])
            ev = await sb.export_evidence()
            assert ev.chain.valid and ev.audit_count == len(ev.chain.records) >= 5
            await sb.reset()
        assert sb._control.opened == 1


async def test_the_server_runs_under_batch_scheduling():
    # SCHED_BATCH: a request the host sends waits for the host to yield instead of preempting
    # it on wake-up; what the server starts (the agent's commands) inherits it.
    async with await Sandbox.start(str(ROOT / "specs" / "fix-csv-report")) as sb:
        r = await sb.call_tool("shell", {"command": "python3 -c 'import os; print(os.sched_getscheduler(0))'"})
        assert r.structured["output"].strip() == "3", r.structured  # os.SCHED_BATCH


async def test_an_export_during_a_running_call_counts_what_the_log_holds():
    # A call still running when the export starts is drained (its process killed) and its
    # record written before the export answers: the count comes from after the drain, so the
    # chain read next verifies. A count taken before the drain was one short: chain "broken".
    async with await Sandbox.start(str(ROOT / "specs" / "fix-csv-report")) as sb:
        running = asyncio.ensure_future(sb.call_tool("shell", {"command": "sleep 20"}))
        await asyncio.sleep(0.5)
        ev = await sb.export_evidence()
        await running
        assert ev.chain.valid, ev.chain.error
        assert ev.audit_count == len(ev.chain.records)
        assert any(r.get("tool") == "shell" for r in ev.chain.records)
