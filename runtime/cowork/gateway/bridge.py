"""``cowork connect``: a running sandbox's MCP server bridged to stdio, for Claude Desktop,
MCP Inspector or any stdio MCP client.

The bridge forwards each newline-delimited JSON-RPC message of the client, verbatim, as one
streamable-HTTP POST to the sandbox's server on ``<run_dir>/mcp.sock``, and writes back what
the server answers. It adds only the HTTP headers the transport asks for (the session id of
an ``initialize`` handshake, the protocol version, and for the stateless revision
``Mcp-Method``/``Mcp-Name``), so tool lists, annotations and ``isError`` results are exactly
the server's, and the allow-list is enforced where it always is, in the server.

Why not fastmcp's proxy, as before (measured, docs/performance.md): the proxy opened a new
backend session for every call (~50 ms p50 per call instead of ~4 ms) and its imports made
``initialize`` take ~3 s. Here one keep-alive connection carries the whole session (a second
one opens only while a call is still running), and the process imports little beyond the
CLI itself.

When the sandbox goes away (container removed, socket gone, connection refused), a request
still waiting gets a JSON-RPC error, one line on stderr says so and the bridge exits with
code 3, the infrastructure code of :mod:`cowork.cli.exits`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable

from ..cli import exits
from .uds_http import ConnectionLost, Exchange, HttpConnection

#: JSON-RPC error code of an answer the sandbox can no longer give (the MCP SDK's CONNECTION_CLOSED).
GONE_CODE = -32000

#: Exit code when the sandbox went away.
GONE_EXIT = exits.INFRASTRUCTURE

_EOF = object()

#: Methods whose named parameter the stateless revision mirrors in the ``Mcp-Name`` header.
_NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"


@dataclass(frozen=True)
class Target:
    """The sandbox a bridge talks to."""

    id: str
    """Full container id."""
    socket_path: str
    """Its MCP server's unix socket on the host."""

    @property
    def short_id(self) -> str:
        """The first 12 characters of the id, as Docker shows it."""
        return self.id[:12]


class SandboxGone(ConnectionError):
    """The sandbox's MCP socket is gone or refuses connections (container removed or stopped)."""


def connect(ref: str) -> int:
    """Bridge sandbox ``ref`` (container id prefix or name) to stdio until the client leaves.

    Returns:
        0 when the client closed stdin (or stdout), 3 when the sandbox went away.

    Raises:
        CoworkError: no sandbox matches ``ref``, or its server does not answer at all.
    """
    return asyncio.run(Bridge(locate(ref)).run())


def locate(ref: str) -> Target:
    """The running sandbox ``ref`` names (container id prefix or name, by the one rule:
    :func:`cowork.engine.labels.refers_to`), asked of the Docker socket directly: the Docker
    SDK behind :func:`cowork.engine.reaper.find_container` costs ~1.5 s of imports, three times
    the bridge's whole start-up budget. Anything but exactly one match (and a daemon not on a
    local unix socket) goes to ``find_container``, which says what is wrong.

    Raises:
        CoworkError: no sandbox, or more than one, matches ``ref``; Docker does not answer.
    """
    from ..engine import labels

    # The Engine API lists a container's name with a leading slash ("/cowork-...").
    found = [c for c in _managed_containers(labels.MANAGED) or ()
             if any(labels.refers_to(ref, c.get("Id", ""), n.removeprefix("/")) for n in c.get("Names") or ("",))]
    if len(found) == 1:
        cid, run_dir = found[0]["Id"], (found[0].get("Labels") or {}).get(labels.RUN_DIR)
    else:
        from ..engine.reaper import find_container

        container = find_container(ref)
        cid, run_dir = container.id, (container.labels or {}).get(labels.RUN_DIR)
    if not run_dir:
        from ..errors import SandboxError

        raise SandboxError(f"sandbox {cid[:12]} has no {labels.RUN_DIR} label, so its MCP socket cannot be "
                           "found; it was not started by cowork: start one with `cowork up SPEC`")
    from ..formats import MCP_SOCKET

    return Target(cid, os.path.join(run_dir, MCP_SOCKET))


def _managed_containers(label: str) -> list[dict[str, Any]] | None:
    """Containers labelled ``label=true`` from the Engine API on the local Docker socket (one
    HTTP/1.0 GET); None when the daemon is elsewhere or the answer is not a list."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        return None
    import socket
    from urllib.parse import quote

    query = quote(json.dumps({"label": [f"{label}=true"]}))
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(host[len("unix://"):])
            sock.sendall(f"GET /containers/json?all=1&filters={query} HTTP/1.0\r\nHost: docker\r\n\r\n".encode())
            answer = b"".join(iter(lambda: sock.recv(65536), b""))
        head, _, body = answer.partition(b"\r\n\r\n")
        listed = json.loads(body) if head.split(b" ", 2)[1:2] == [b"200"] else None
    except (OSError, ValueError):
        return None
    return listed if isinstance(listed, list) else None


def _header_value(value: str) -> str:
    """``value`` as an HTTP field value, base64-wrapped (``=?base64?...?=``) unless it is plain
    printable ASCII without edge spaces, the encoding MCP's routing headers use."""
    if value.isascii() and value.isprintable() and value == value.strip() and not value.startswith("=?base64?"):
        return value
    import base64

    return f"=?base64?{base64.b64encode(value.encode()).decode('ascii')}?="


class Bridge:
    """One stdio client bridged to one sandbox: stdin read into a queue, one pump forwarding
    in order, responses written to stdout as they arrive."""

    def __init__(self, target: Target, stdin: Any = None, stdout: Any = None, stderr: Any = None):
        self.target = target
        self._stdin = stdin if stdin is not None else sys.stdin.buffer
        self._stdout = stdout if stdout is not None else sys.stdout.buffer
        self._stderr = stderr if stderr is not None else sys.stderr
        self._idle: list[HttpConnection] = []
        self._open: set[HttpConnection] = set()
        self._pending: dict[Exchange, Any] = {}  # exchange -> JSON-RPC id of a request waiting
        self._session_id: str | None = None
        self._version: str | None = None
        self._closing = False
        self._queue: asyncio.Queue = asyncio.Queue()
        self._done: asyncio.Future[int] | None = None

    # ------------------------------------------------------------------ lifecycle
    async def run(self) -> int:
        """Serve until stdin closes (0) or the sandbox goes away (3)."""
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        try:
            self._idle.append(await self._connection())
        except SandboxGone as exc:
            from ..errors import SandboxError

            raise SandboxError(f"sandbox {self.target.short_id} does not answer on {self.target.socket_path} "
                               f"({exc}); it was removed or stopped: start one with `cowork up SPEC`") from None
        stop_reading = await self._read_stdin(loop)
        pump = loop.create_task(self._pump())
        pump.add_done_callback(self._pump_ended)
        try:
            return await self._done
        finally:
            self._closing = True
            pump.cancel()
            stop_reading()
            await self._end_session()
            for conn in list(self._open):
                conn.close()

    def _pump_ended(self, pump: asyncio.Task) -> None:
        """A bug in the bridge ends the session with one line on stderr, not a hung client."""
        if not pump.cancelled() and pump.exception() is not None:
            exc = pump.exception()
            print(f"cowork connect: internal error ({type(exc).__name__}: {exc}); ending the session",
                  file=self._stderr, flush=True)
            self._finish(1)

    def _finish(self, code: int) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(code)

    def _gone(self) -> None:
        """Answer every request still waiting, say so once on stderr, and end with code 3."""
        if self._done is None or self._done.done() or self._closing:
            return
        for rid in list(self._pending.values()):
            if rid is not None:
                self._error(rid, GONE_CODE, f"sandbox {self.target.short_id} is gone (removed or stopped)")
        self._pending.clear()
        print(f"cowork connect: sandbox {self.target.short_id} is gone (removed or stopped); ending the session",
              file=self._stderr, flush=True)
        self._finish(GONE_EXIT)

    async def _end_session(self) -> None:
        """DELETE the handshake session so the server frees it (best effort: it may be gone)."""
        if self._session_id is None or self._done is None or not self._done.done() \
                or self._done.result() == GONE_EXIT:
            return
        try:
            conn = await asyncio.wait_for(self._connection(reuse=True), 2)
            exchange = Exchange(b"", None)
            conn.send(self._head("DELETE", 0, self._session_headers()), b"", exchange)
            await asyncio.wait_for(exchange.done, 2)
        except (SandboxGone, ConnectionLost, OSError, asyncio.TimeoutError):
            pass

    # ------------------------------------------------------------------ stdio
    async def _read_stdin(self, loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
        """Feed stdin's lines into the queue; returns what stops reading.

        A pipe or socket is read by the event loop; anything else (a file, a terminal,
        /dev/null) by a thread, since epoll refuses files and some devices.
        """
        queue = self._queue

        class Lines(asyncio.Protocol):
            def __init__(self) -> None:
                self.rest = b""

            def data_received(self, data: bytes) -> None:
                *lines, self.rest = (self.rest + data).split(b"\n")
                for line in lines:
                    queue.put_nowait(line)

            def eof_received(self) -> bool:
                if self.rest:
                    queue.put_nowait(self.rest)
                queue.put_nowait(_EOF)
                return False

        import stat

        mode = os.fstat(self._stdin.fileno()).st_mode
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            transport, _ = await loop.connect_read_pipe(Lines, self._stdin)
            return transport.close
        import threading

        def read() -> None:
            for line in self._stdin:
                loop.call_soon_threadsafe(queue.put_nowait, line)
            loop.call_soon_threadsafe(queue.put_nowait, _EOF)

        threading.Thread(target=read, name="cowork-connect-stdin", daemon=True).start()
        return lambda: None

    def _write(self, message: bytes) -> None:
        """One message, one line: the server's compact JSON is forwarded as is."""
        if b"\n" in message:  # newlines may only sit between JSON tokens: re-serialize compactly
            message = json.dumps(json.loads(message), separators=(",", ":")).encode()
        try:
            self._stdout.write(message + b"\n")
            self._stdout.flush()
        except (BrokenPipeError, ValueError, OSError):  # the client went away: nothing more to answer
            self._finish(0)

    def _error(self, rid: Any, code: int, message: str) -> None:
        self._write(json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}},
                               separators=(",", ":")).encode())

    # ------------------------------------------------------------------ forwarding
    async def _pump(self) -> None:
        """Forward stdin's messages in order. Requests run concurrently; an ``initialize`` is
        answered, and a notification (or the client's answer to the server) delivered, before
        the next message goes: the server must see the handshake's session id, and
        ``notifications/initialized``, before the requests that follow them."""
        running: set[asyncio.Future] = set()
        while True:
            line = await self._queue.get()
            if line is _EOF:
                break
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError as exc:
                self._error(None, -32700, f"parse error: {exc}")
                continue
            request = isinstance(message, dict) and "method" in message and "id" in message
            forwarding = asyncio.ensure_future(self._forward(line, message, request))
            if request and message["method"] != "initialize":  # nothing may overtake the handshake
                running.add(forwarding)
                forwarding.add_done_callback(running.discard)
            else:
                await forwarding
        # stdin closed: answer what is still running (a piped script waits for it), then end.
        if running:
            await asyncio.wait(running)
        self._finish(0)

    def _session_headers(self) -> dict[str, str]:
        headers = {}
        if self._session_id:
            headers["Mcp-Session-Id"] = self._session_id
        if self._version:
            headers["Mcp-Protocol-Version"] = self._version
        return headers

    def _headers(self, message: Any) -> dict[str, str]:
        """The transport headers for ``message``: the stateless revision's routing headers when
        it carries its own protocol version, else the handshake session's."""
        if not isinstance(message, dict):
            return self._session_headers()
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(_VERSION_KEY) if isinstance(meta, dict) else None
        if not isinstance(version, str) or not isinstance(params, dict):  # a version implies params is a dict
            return self._session_headers()
        method = message.get("method")
        headers = {"Mcp-Protocol-Version": version}
        if isinstance(method, str):
            headers["Mcp-Method"] = method
            named = params.get(_NAMED.get(method, ""))
            if isinstance(named, str):
                headers["Mcp-Name"] = _header_value(named)
        return headers

    def _head(self, method: str, length: int, headers: dict[str, str]) -> bytes:
        lines = [f"{method} /mcp HTTP/1.1", "Host: localhost", "Accept: application/json, text/event-stream",
                 "Content-Type: application/json", f"Content-Length: {length}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _forward(self, body: bytes, message: Any, request: bool) -> None:
        rid = message.get("id") if request else None
        initialize = request and message.get("method") == "initialize"
        head = self._head("POST", len(body), self._headers(message))
        exchange = Exchange(body, lambda m: self._deliver(m, initialize),
                            (lambda status, headers: self._handshake(status, headers)) if initialize else None)
        self._pending[exchange] = rid
        try:
            for attempt in (0, 1):
                conn = await self._connection(reuse=attempt == 0)
                reused = conn.requests > 0
                conn.send(head, body, exchange)
                try:
                    status, _, payload = await exchange.done
                    break
                except ConnectionLost as lost:
                    # A kept-alive connection the server closed while idle: the request was never
                    # read, so sending it again on a new connection is safe. Else the server died.
                    if not (reused and not lost.answered and attempt == 0):
                        raise SandboxGone(str(lost)) from None
                    if self._pending.pop(exchange, _EOF) is _EOF:  # the session ended meanwhile
                        return
                    exchange = exchange.again()
                    self._pending[exchange] = rid
            if conn.keep_alive and not conn.closed and not self._closing:
                self._idle.append(conn)
            self._answer(rid, status, payload, initialize)
        except SandboxGone:
            self._gone()
        except Exception as exc:  # a bug here must not leave the client waiting forever
            if rid is not None:
                self._error(rid, -32603, f"cowork connect failed to forward the request: {type(exc).__name__}: {exc}")
        finally:
            self._pending.pop(exchange, None)

    def _handshake(self, status: int, headers: dict[str, str]) -> None:
        """The session id of an ``initialize`` answer, kept before the answer reaches the client
        (which may send its next message at once)."""
        if status == 200 and headers.get("mcp-session-id"):
            self._session_id = headers["mcp-session-id"]

    def _deliver(self, message: bytes, initialize: bool) -> None:
        if initialize:
            try:
                self._version = json.loads(message)["result"]["protocolVersion"]
            except (ValueError, KeyError, TypeError):
                pass
        self._write(message)

    def _answer(self, rid: Any, status: int, payload: bytes, initialize: bool) -> None:
        """Write the server's answer (an event stream's messages were written as they came).

        An HTTP error with a JSON-RPC body is forwarded as is; without one, a request gets a
        JSON-RPC error naming the status, since a stdio client knows no HTTP.
        """
        if not payload:
            if status >= 400 and rid is not None:
                self._error(rid, -32603, f"the sandbox's MCP server answered HTTP {status}")
            return
        if status < 400:
            self._deliver(payload, initialize)
            return
        try:
            answer = json.loads(payload)
        except ValueError:
            answer = None
        if isinstance(answer, dict) and "error" in answer:
            if answer.get("id") is None and rid is not None:  # "Missing session ID" names no request
                answer["id"] = rid
                payload = json.dumps(answer, separators=(",", ":")).encode()
            self._write(payload)
        elif rid is not None:
            self._error(rid, -32603, f"the sandbox's MCP server answered HTTP {status}: "
                                     f"{payload[:300].decode(errors='replace')}")

    # ------------------------------------------------------------------ connections
    async def _connection(self, reuse: bool = True) -> HttpConnection:
        """An idle kept-alive connection, or a new one.

        Raises:
            SandboxGone: the socket is gone or refuses connections.
        """
        while reuse and self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        loop = asyncio.get_running_loop()
        try:
            _, conn = await loop.create_unix_connection(lambda: HttpConnection(self._lost), self.target.socket_path)
        except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError) as exc:
            raise SandboxGone(f"{type(exc).__name__}: {exc.strerror or exc}") from None
        self._open.add(conn)
        return conn

    def _lost(self, conn: HttpConnection) -> None:
        """A connection closed. When it was the idle one, find out why: the server closes idle
        connections after a few seconds (uvicorn's keep-alive), but also when it is killed. A
        new connection tells them apart and stays open, ready for the next call."""
        self._open.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)
            if not self._closing and not self._idle:
                asyncio.ensure_future(self._reconnect())

    async def _reconnect(self) -> None:
        try:
            conn = await self._connection(reuse=False)
        except SandboxGone:
            self._gone()
            return
        if self._closing:
            conn.close()
        else:
            self._idle.append(conn)
