"""The HTTP gateway's figures: what ``cowork serve`` adds to a tool call over a kept-alive
connection, against the sandbox's own unix socket in the same run.

Every remote MCP client (Claude Code, Cursor, mcp-remote, the SDKs) keeps its connection
alive, so that is the figure that matters; a fresh connection per call is measured too, as a
baseline: a gateway whose kept-alive calls cost tens of ms more than fresh ones is stalled by
Nagle and delayed ACKs (issue 29: 48 ms kept alive against 5.3 ms fresh before the fix).

Both sides are driven by the same lean HTTP/1.1 client (:class:`~cowork.gateway.uds_http.HttpConnection`,
the one ``cowork connect`` uses), each with its own MCP session: one over TCP to a
``cowork serve --port 0`` subprocess with the sandbox's bearer token, one straight to the
sandbox's ``mcp.sock``. The difference between the two p50s is the gateway's own: the TCP
hop, the token check and the proxying. Samples are taken in alternating blocks.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from typing import Any, Awaitable, Callable

from ..gateway import issue
from ..gateway.uds_http import Exchange, HttpConnection
from .phases import Bench, ms_since
from .report import summary

#: The call both paths make (as the stdio bridge's figure does).
TOOL, ARGS = "read_file", {"path": "README.md"}
ROUNDS = 4
"""Alternations of (unix socket, gateway) blocks the kept-alive samples are taken in."""
FRESH_CALLS = 20
"""Gateway calls made on a new connection each (the baseline of the kept-alive figure)."""
PROTOCOL = "2025-06-18"
HANDSHAKE = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "cowork-bench", "version": "1"}}

Connect = Callable[[], Awaitable[HttpConnection]]


class McpPeer:
    """An MCP session over HTTP/1.1 connections that ``connect`` opens (kept alive unless told).

    Args:
        connect: Opens a new connection (TCP to the gateway, or the sandbox's unix socket).
        path: The MCP endpoint's path.
        headers: Sent with every request (the gateway's ``Authorization``).
    """

    def __init__(self, connect: Connect, path: str, headers: dict[str, str] | None = None):
        self._connect, self.path, self.headers = connect, path, dict(headers or {})
        self._conn: HttpConnection | None = None
        self._ids = 0

    async def request(self, method: str, params: dict[str, Any] | None, *, fresh: bool = False) -> Any:
        """Send one JSON-RPC message (a notification when ``params`` is None) and read its answer.

        Args:
            method: The JSON-RPC method.
            params: Its params; None sends ``method`` as a notification.
            fresh: Use a new connection for this request (and close it after).

        Returns:
            The answer's ``result`` (None for a notification).

        Raises:
            RuntimeError: an HTTP status other than 200/202, or a JSON-RPC error.
        """
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            self._ids += 1
            message.update(id=self._ids, params=params)
        body = json.dumps(message, separators=(",", ":")).encode()
        lines = [f"POST {self.path} HTTP/1.1", "Host: localhost", "Accept: application/json, text/event-stream",
                 "Content-Type: application/json", f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        messages: list[bytes] = []
        exchange = Exchange(body, messages.append)
        conn = await self._connect() if fresh else await self._kept()
        conn.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"), body, exchange)
        try:
            status, headers, payload = await asyncio.wait_for(exchange.done, 60)
        finally:
            if fresh:
                conn.close()
        if status not in (200, 202):
            raise RuntimeError(f"POST {self.path} {method}: HTTP {status}: {payload[:300]!r}")
        if "mcp-session-id" in headers:
            self.headers["Mcp-Session-Id"] = headers["mcp-session-id"]
            self.headers["Mcp-Protocol-Version"] = PROTOCOL
        if params is None:
            return None
        answer = json.loads(messages[-1] if messages else payload)
        if "error" in answer:
            raise RuntimeError(f"{method} answered with an error: {answer['error']}")
        return answer["result"]

    async def _kept(self) -> HttpConnection:
        if self._conn is None or self._conn.closed:
            self._conn = await self._connect()
        return self._conn

    async def start(self) -> None:
        """The MCP handshake: ``initialize``, then ``notifications/initialized``."""
        await self.request("initialize", HANDSHAKE)
        await self.request("notifications/initialized", None)

    async def call(self, *, fresh: bool = False) -> tuple[float, bool]:
        """One ``tools/call`` of :data:`TOOL`: milliseconds taken and whether it was an error result."""
        t0 = time.perf_counter()
        result = await self.request("tools/call", {"name": TOOL, "arguments": ARGS}, fresh=fresh)
        return ms_since(t0), bool(result.get("isError"))

    def close(self) -> None:
        """Close the kept-alive connection."""
        if self._conn is not None:
            self._conn.close()


def _unix(path: str) -> Connect:
    async def connect() -> HttpConnection:
        _, conn = await asyncio.get_running_loop().create_unix_connection(lambda: HttpConnection(_ignore), path)
        return conn
    return connect


def _tcp(host: str, port: int) -> Connect:
    async def connect() -> HttpConnection:
        _, conn = await asyncio.get_running_loop().create_connection(lambda: HttpConnection(_ignore), host, port)
        return conn
    return connect


def _ignore(_conn: HttpConnection) -> None:
    pass


async def start_gateway() -> tuple[asyncio.subprocess.Process, int]:
    """``cowork serve --port 0`` in a subprocess; the process and the port it listens on.

    Raises:
        RuntimeError: the gateway ended or said nothing of its port within 30 s.
    """
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "cowork.cli", "serve", "--port", "0",
                                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None  # opened as a pipe above
    try:
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode(errors="replace")
    except asyncio.TimeoutError:
        line = ""
    m = re.search(r"listening on http://127\.0\.0\.1:(\d+) ", line)
    if m is None:
        await stop_gateway(proc)
        raise RuntimeError(f"cowork serve did not start: {line.strip() or 'no output in 30 s'}")
    return proc, int(m[1])


async def stop_gateway(proc: asyncio.subprocess.Process) -> None:
    """Stop the gateway (SIGTERM, then SIGKILL after 15 s)."""
    if proc.returncode is not None:
        return
    proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), 15)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()


async def gateway_figures(bench: Bench) -> dict[str, Any]:
    """Per-call p50 through ``cowork serve`` on one kept-alive connection against the sandbox's
    unix socket (same run, same tool and file, alternating blocks), and through the gateway on
    a fresh connection per call."""
    plan = bench.plan
    sb = await bench.start()
    proc = None
    peers: list[McpPeer] = []
    try:
        token = await asyncio.to_thread(issue, sb.run_dir)
        proc, port = await start_gateway()
        ref = sb.id[:12]
        direct = McpPeer(_unix(str(sb.socket_path)), "/mcp")
        gateway = McpPeer(_tcp("127.0.0.1", port), f"/sandboxes/{ref}/mcp", {"Authorization": f"Bearer {token}"})
        peers += [direct, gateway]
        for peer in peers:
            await peer.start()
            for _ in range(plan.warmup):
                await peer.call()
        unix: list[float] = []
        kept: list[float] = []
        fresh: list[float] = []
        errors = 0
        block = max(1, plan.gateway_calls // ROUNDS)
        for _ in range(ROUNDS):
            for peer, samples in ((direct, unix), (gateway, kept)):
                for _ in range(block):
                    ms, error = await peer.call()
                    samples.append(ms)
                    errors += error
        for _ in range(FRESH_CALLS):
            ms, error = await gateway.call(fresh=True)
            fresh.append(ms)
            errors += error
        out: dict[str, Any] = {"tool": TOOL, "unix_ms": summary(unix), "keepalive_ms": summary(kept),
                               "fresh_ms": summary(fresh), "errors": errors}
        p50 = out["keepalive_ms"]["p50"], out["unix_ms"]["p50"]
        out["overhead_ms"] = round(p50[0] - p50[1], 3)
        out["ratio"] = round(p50[0] / p50[1], 2) if p50[1] else None
        return out
    finally:
        for peer in peers:
            peer.close()
        if proc is not None:
            await stop_gateway(proc)
        await bench.stop(sb)
