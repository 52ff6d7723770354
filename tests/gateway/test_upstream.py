"""The gateway's connections to a sandbox's MCP server, against a scripted HTTP server on a unix
socket (no Docker): kept alive and reused, answers passed on as they arrive, a connection the
server closed while idle replaced without a trace, failures as UpstreamGone."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cowork.gateway import proxy, upstream
from cowork.gateway.upstream import Upstream, UpstreamGone

HEAD = b"POST /mcp HTTP/1.1\r\nhost: localhost\r\ncontent-length: 2\r\n\r\n"


class Server:
    """A unix-socket HTTP server that answers each request with ``script(request_number)``:
    a list of byte strings written with a pause between them (None: close the connection)."""

    def __init__(self, path: Path, script):
        self.path, self.script = path, script
        self.requests: list[bytes] = []
        self.connections = 0

    async def __aenter__(self) -> "Server":
        self.server = await asyncio.start_unix_server(self._serve, str(self.path))
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                self.requests.append(head + await reader.readexactly(length))
                for part in self.script(len(self.requests)):
                    if part is None:
                        writer.close()
                        return
                    writer.write(part)
                    await writer.drain()
                    await asyncio.sleep(0.01)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


def json_answer(body: bytes = b'{"ok": true}') -> list[bytes]:
    return [b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body) + body]


async def read(answer) -> bytes:
    try:
        return b"".join([piece async for piece in answer])
    finally:
        answer.release()


class TestUpstream:
    async def test_a_json_answer_comes_whole_and_its_connection_is_reused(self, tmp_path):
        async with Server(tmp_path / "mcp.sock", lambda n: json_answer(b'{"n": %d}' % n)) as server:
            pool = Upstream(server.path)
            first = await pool.request(HEAD, b"{}")
            assert first.status == 200 and first.headers["content-type"] == "application/json"
            assert first.complete and await read(first) == b'{"n": 1}'
            assert await read(await pool.request(HEAD, b"{}")) == b'{"n": 2}'
            assert server.connections == 1 and server.requests[0] == HEAD + b"{}"
            pool.close()

    async def test_a_stream_is_passed_on_as_it_arrives(self, tmp_path):
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"

        def script(n):
            return [head, b"9\r\ndata: one\r\n", b"9\r\ndata: two\r\n", b"0\r\n\r\n"]

        async with Server(tmp_path / "mcp.sock", script) as server:
            pool = Upstream(server.path)
            answer = await pool.request(HEAD, b"{}")
            assert not answer.complete  # the head came first, the body follows
            pieces = []
            async for piece in answer:
                pieces.append(piece)
            answer.release()
            assert pieces == [b"data: one", b"data: two"]  # chunk framing removed, bytes as sent
            assert await read(await pool.request(HEAD, b"{}")) == b"data: onedata: two"
            assert server.connections == 1
            pool.close()

    async def test_a_connection_closed_while_idle_is_replaced(self, tmp_path):
        """uvicorn closes a kept-alive connection after a few idle seconds; the next request
        goes on a new one as if nothing happened."""
        async with Server(tmp_path / "mcp.sock", lambda n: json_answer() + ([None] if n == 1 else [])) as server:
            pool = Upstream(server.path)
            assert await read(await pool.request(HEAD, b"{}")) == b'{"ok": true}'
            await asyncio.sleep(0.05)
            assert await read(await pool.request(HEAD, b"{}")) == b'{"ok": true}'
            assert server.connections == 2
            pool.close()

    async def test_a_missing_socket_is_upstream_gone(self, tmp_path):
        with pytest.raises(UpstreamGone, match="FileNotFoundError"):
            await Upstream(tmp_path / "nothing.sock").request(HEAD, b"{}")

    async def test_an_answer_cut_off_midway_is_upstream_gone(self, tmp_path):
        def script(n):
            return [b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{", None]

        async with Server(tmp_path / "mcp.sock", script) as server:
            pool = Upstream(server.path)
            answer = await pool.request(HEAD, b"{}")
            with pytest.raises(UpstreamGone, match="connection closed"):
                await read(answer)
            assert not pool._idle  # a broken connection is never given back

    async def test_a_slow_reader_pauses_the_sandbox_connection(self, tmp_path, monkeypatch):
        monkeypatch.setattr(upstream, "HIGH_WATER", 3)
        monkeypatch.setattr(upstream, "LOW_WATER", 1)
        parts = [b"1\r\n%d\r\n" % (i % 10) for i in range(8)]

        def script(n):
            return [b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", *parts, b"0\r\n\r\n"]

        async with Server(tmp_path / "mcp.sock", script) as server:
            pool = Upstream(server.path)
            answer = await pool.request(HEAD, b"{}")
            pauses: list[bool] = []
            conn = answer._conn
            real = conn.pause
            monkeypatch.setattr(conn, "pause", lambda paused: (pauses.append(paused), real(paused)))
            await asyncio.sleep(0.3)  # the server has written everything; nobody reads
            assert pauses == [True] and len(answer._pieces) == 3
            assert await read(answer) == b"01234567"
            assert pauses[:2] == [True, False]
            pool.close()


class TestRequestHead:
    def test_only_the_transport_headers_reach_the_sandbox(self):
        scope = {"method": "POST", "headers": [
            (b"authorization", b"Bearer secret"), (b"host", b"evil"), (b"cookie", b"c=1"),
            (b"Content-Type", b"application/json"), (b"accept", b"application/json, text/event-stream"),
            (b"mcp-session-id", b"abc"), (b"mcp-protocol-version", b"2025-06-18\r\nx-injected: 1"),
            (b"content-length", b"999"), (b"transfer-encoding", b"chunked")]}
        head = proxy._request_head(scope, 7)
        assert head == (b"POST /mcp HTTP/1.1\r\nhost: localhost\r\ncontent-length: 7\r\n"
                        b"content-type: application/json\r\naccept: application/json, text/event-stream\r\n"
                        b"mcp-session-id: abc\r\n\r\n")
