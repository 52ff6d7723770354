"""The stdio bridge's figures: ``cowork connect``'s cost per tool call over ``Sandbox.call_tool``'s,
and how soon after its process starts an MCP client gets its first answer.

The bridge is driven the way Claude Desktop or MCP Inspector drive it: a subprocess spoken to
in newline-delimited JSON-RPC on its stdin and stdout. The driver here is as lean as
:class:`~cowork.sandbox.mcp.LeanMcpClient` (one ``json.dumps`` and one ``json.loads`` per
call), so the difference between the two p50s is the bridge's own: the pipe hop and the
forwarding. Both are sampled in alternating rounds against the same sandbox and file.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

from .phases import Bench, ms_since
from .report import summary

#: The call both paths make.
TOOL, ARGS = "read_file", {"path": "README.md"}
ROUNDS = 4
"""Alternations of (direct, bridge) blocks the per-call samples are taken in."""

HANDSHAKE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "cowork-bench", "version": "1"}}
DISCOVER_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                 "io.modelcontextprotocol/clientInfo": HANDSHAKE["clientInfo"],
                 "io.modelcontextprotocol/clientCapabilities": {}}


class StdioPeer:
    """A ``cowork connect`` process and the JSON-RPC spoken to it."""

    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc
        self._ids = 0

    def _pipes(self) -> tuple[asyncio.StreamWriter, asyncio.StreamReader, asyncio.StreamReader]:
        """The process's stdin, stdout and stderr (:meth:`spawn` opens all three as pipes)."""
        stdin, stdout, stderr = self.proc.stdin, self.proc.stdout, self.proc.stderr
        assert stdin is not None and stdout is not None and stderr is not None, "spawned without pipes"
        return stdin, stdout, stderr

    @classmethod
    async def spawn(cls, ref: str) -> "StdioPeer":
        """Start ``cowork connect ref`` in a subprocess with its stdin, stdout and stderr piped."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cowork.cli", "connect", ref,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return cls(proc)

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request and read its answer (the bridge answers each request on one line).

        Returns:
            The answer's ``result``.

        Raises:
            RuntimeError: the process ended without answering, or answered with an error.
        """
        self._ids += 1
        stdin, stdout, stderr = self._pipes()
        stdin.write(json.dumps({"jsonrpc": "2.0", "id": self._ids, "method": method,
                                "params": params}).encode() + b"\n")
        line = await asyncio.wait_for(stdout.readline(), 60)
        if not line:
            err = await stderr.read()
            raise RuntimeError(f"cowork connect ended without answering {method}: {err.decode()[-500:]}")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"cowork connect answered {method} with an error: {answer['error']}")
        return answer["result"]

    def notify(self, method: str) -> None:
        """Send the JSON-RPC notification ``method`` (nothing is answered)."""
        self._pipes()[0].write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")

    async def close(self) -> int:
        """Close stdin (the client leaves) and wait for the exit code."""
        if self.proc.stdin and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            return await asyncio.wait_for(self.proc.wait(), 30)
        except asyncio.TimeoutError:
            self.proc.kill()
            return await self.proc.wait()


async def bridge_figures(bench: Bench) -> dict[str, Any]:
    """Per-call p50 through ``cowork connect`` vs ``Sandbox.call_tool`` (same run, same tool and
    file), spawn-to-first-answer and the ``initialize`` round trip.

    Spawn to ready: the process is started and ``initialize`` written at once, as a client
    does; the time until its answer. Initialize round trip: on a bridge already up (it has
    answered a stateless ``server/discover``), the ``initialize`` handshake alone.
    """
    plan = bench.plan
    sb = await bench.start()
    ref = sb.id[:12]
    peers: list[StdioPeer] = []
    try:
        for _ in range(plan.warmup):
            await sb.call_tool(TOOL, ARGS)
        ready, handshakes, codes = [], [], []
        for i in range(plan.bridge_spawns):
            t0 = time.perf_counter()
            peer = await StdioPeer.spawn(ref)
            peers.append(peer)
            await peer.request("initialize", HANDSHAKE)
            ready.append(time.perf_counter() - t0)
            codes.append(await peer.close())
            peer = await StdioPeer.spawn(ref)
            peers.append(peer)
            await peer.request("server/discover", {"_meta": DISCOVER_META})
            t0 = time.perf_counter()
            await peer.request("initialize", HANDSHAKE)
            handshakes.append(ms_since(t0))
            peer.notify("notifications/initialized")
            if i < plan.bridge_spawns - 1:
                codes.append(await peer.close())
        # The last bridge carries on with its session for the per-call figure.
        for _ in range(plan.warmup):
            await peer.request("tools/call", {"name": TOOL, "arguments": ARGS})
        direct, bridged, errors = [], [], 0
        block = max(1, plan.bridge_calls // ROUNDS)
        for _ in range(ROUNDS):
            for _ in range(block):
                t0 = time.perf_counter()
                r = await sb.call_tool(TOOL, ARGS)
                direct.append(ms_since(t0))
                errors += r.is_error
            for _ in range(block):
                t0 = time.perf_counter()
                answer = await peer.request("tools/call", {"name": TOOL, "arguments": ARGS})
                bridged.append(ms_since(t0))
                errors += bool(answer.get("isError"))
        codes.append(await peer.close())
        out: dict[str, Any] = {"tool": TOOL, "direct_ms": summary(direct), "bridge_ms": summary(bridged),
                               "errors": errors, "spawn_to_ready_s": summary(ready),
                               "initialize_ms": summary(handshakes), "exit_codes": sorted(set(codes))}
        out["overhead_ms"] = round(out["bridge_ms"]["p50"] - out["direct_ms"]["p50"], 3)
        return out
    finally:
        for peer in peers:
            if peer.proc.returncode is None:
                peer.proc.kill()
                await peer.proc.wait()
        await bench.stop(sb)
