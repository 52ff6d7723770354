"""The host's own MCP transport: newline-delimited JSON-RPC over a unix socket.

MCP's stdio framing (one JSON-RPC message per line) on ``rpc.sock`` in the run dir, served
by the tool host (server.host) with no HTTP stack in between: no uvicorn, h11, Starlette or
streamable-HTTP session layer, so a call costs a line each way. It answers ``initialize``,
``server/discover``, ``ping``, ``tools/list`` and ``tools/call``; notifications are read
and ignored. Requests on one connection run concurrently, each answered when it ends
(matched by ``id``). External clients keep streamable HTTP on ``mcp.sock``.

A tool's failure is an ``isError`` result with its text, as fastmcp answers it; a request
that is not a JSON-RPC object, or names another method, gets a JSON-RPC error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from typing import Any

from ..formats import agent_identity
from .agents import AGENT
from .host import ToolHost

log = logging.getLogger(__name__)

#: The protocol revisions it speaks (the stateless one the host client prefers, and the handshake's).
VERSIONS = ("2026-07-28", "2025-11-25", "2025-06-18")
#: Longest line either way (bytes): arguments are capped well below (formats.MAX_ARGUMENTS_BYTES);
#: a longer answer is replaced by a JSON-RPC error for its request.
MAX_LINE = 64 << 20

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603


class RpcServer:
    """Serves a :class:`ToolHost` on a unix socket (see the module's docstring)."""

    def __init__(self, host: ToolHost, version: str = ""):
        self.host = host
        self.info = {"name": host.name, "version": version}
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self, path: str) -> None:
        """Listen on the unix socket ``path`` (replacing a stale one; mode 0600 where allowed)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
        with contextlib.suppress(PermissionError):  # gVisor's host sockets refuse it; the run dir is 0700
            os.chmod(path, 0o600)
        self._server = await asyncio.start_unix_server(self._connection, sock=sock, limit=MAX_LINE)

    def close(self) -> None:
        """Stop listening and drop every open connection."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        tasks: set[asyncio.Task] = set()
        try:
            while True:
                try:
                    line = await reader.readuntil(b"\n")
                except asyncio.LimitOverrunError:
                    self._send(writer, _error(None, INVALID_REQUEST, f"request line over {MAX_LINE} bytes"))
                    return
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                task = asyncio.create_task(self._answer(line, writer))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        finally:
            self._writers.discard(writer)
            # Calls already running finish (their effects have records); their answers are dropped.
            writer.close()

    async def _answer(self, line: bytes, writer: asyncio.StreamWriter) -> None:
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError) as exc:
            self._send(writer, _error(None, PARSE_ERROR, f"not JSON: {exc}"))
            return
        if not isinstance(msg, dict) or not isinstance(msg.get("method"), str):
            if not (isinstance(msg, dict) and ("result" in msg or "error" in msg)):  # a response: ignore
                self._send(writer, _error(msg.get("id") if isinstance(msg, dict) else None, INVALID_REQUEST,
                                          "a request is a JSON object with a method"))
            return
        if "id" not in msg:
            return  # a notification (notifications/initialized, cancelled): nothing to answer
        rid, method, params = msg["id"], msg["method"], msg.get("params") or {}
        if not isinstance(params, dict):
            self._send(writer, _error(rid, INVALID_PARAMS, "params must be an object"))
            return
        try:
            result = await self._dispatch(method, params)
        except _RpcError as exc:
            self._send(writer, _error(rid, exc.code, str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 - every request gets an answer, never a silence
            log.exception("rpc %s failed", method[:100])
            self._send(writer, _error(rid, INTERNAL_ERROR, f"internal error: {exc}"[:1000]))
            return
        self._send(writer, {"jsonrpc": "2.0", "id": rid, "result": result})

    async def _dispatch(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "tools/call":
            name, args = params.get("name"), params.get("arguments")
            if not isinstance(name, str) or not (args is None or isinstance(args, dict)):
                raise _RpcError(INVALID_PARAMS, "tools/call needs a name (string) and arguments (object)")
            try:
                # The agent behind the call (a harness's): from the request's _meta, never its arguments.
                agent = agent_identity(params.get("_meta"))
            except ValueError as exc:
                raise _RpcError(INVALID_PARAMS, str(exc)) from None
            token = AGENT.set(agent)
            try:
                return (await self.host.call_tool(name, args)).wire()
            except Exception as exc:  # noqa: BLE001 - every failure of a call is the caller's isError result
                return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
            finally:
                AGENT.reset(token)
        if method == "tools/list":
            return {"tools": self.host.tools_wire()}
        if method == "ping":
            return {}
        caps = {"tools": {"listChanged": False}}
        if method == "server/discover":
            return {"supportedVersions": list(VERSIONS), "capabilities": caps,
                    "_meta": {"io.modelcontextprotocol/serverInfo": self.info}}
        if method == "initialize":
            asked = params.get("protocolVersion")
            return {"protocolVersion": asked if asked in VERSIONS else VERSIONS[1], "capabilities": caps,
                    "serverInfo": self.info, **({"instructions": self.host.instructions} if self.host.instructions else {})}
        raise _RpcError(METHOD_NOT_FOUND, f"Method not found: {method[:100]}")

    def _send(self, writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
        try:
            data = json.dumps(message, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
        except (ValueError, TypeError, RecursionError) as exc:  # a result JSON cannot carry: say so instead
            data = json.dumps(_error(message.get("id"), INTERNAL_ERROR, f"the result cannot be sent as JSON: {exc}"))
        if len(data) >= MAX_LINE:  # the client reads lines up to MAX_LINE: refuse the answer, not the connection
            data = json.dumps(_error(message.get("id"), INTERNAL_ERROR,
                                     f"the answer is {len(data)} bytes of JSON, over the transport's {MAX_LINE}"))
        if not writer.is_closing():
            writer.write(data.encode("ascii") + b"\n")


class _RpcError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def _error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
