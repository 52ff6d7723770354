"""The gateway's connections to one sandbox's MCP server (``mcp.sock``): HTTP/1.1, kept alive,
one request at a time on each, the answer's body passed on piece by piece as it arrives.

Built on :mod:`.uds_http` (the connection ``cowork connect`` uses) rather than httpx: the
gateway forwards bytes and needs nothing else of a client, and httpx's request machinery
cost ~0.7 ms of CPU per call against ~0.16 ms here, most of what the gateway added to a
call on top of the unix socket (docs/performance.md#the-http-gateway-cowork-serve).
"""

from __future__ import annotations

import asyncio
import collections
from pathlib import Path
from typing import Any, AsyncIterator

from .uds_http import ConnectionLost, Exchange, HttpConnection

#: Pieces of an answer held for a client that reads slower than the sandbox writes; past it the
#: connection to the sandbox stops being read until the client catches up (to LOW_WATER).
HIGH_WATER, LOW_WATER = 64, 8
#: Idle connections kept per sandbox (a burst of concurrent requests opens more; the rest close).
MAX_IDLE = 8


class UpstreamGone(ConnectionError):
    """The sandbox's MCP server cannot be reached, or its connection broke during an answer."""


class Answer:
    """One answer of the sandbox's server: status and headers, then the body through ``async for``.

    Always :meth:`release` it (in ``finally``): its connection goes back to the pool when the
    answer was read to its end, and is closed otherwise.
    """

    def __init__(self, pool: "Upstream", conn: HttpConnection):
        self._pool, self._conn = pool, conn
        self._pieces: collections.deque[bytes] = collections.deque()
        self._wake = asyncio.Event()
        self._paused = False
        self.status = 0
        self.headers: dict[str, str] = {}
        self._head: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.exchange: Exchange | None = None

    # ------------------------------------------------------------------ fed by the connection
    def _on_head(self, status: int, headers: dict[str, str]) -> None:
        self.status, self.headers = status, headers
        if not self._head.done():
            self._head.set_result(None)

    def _on_data(self, data: bytes) -> None:
        self._pieces.append(data)
        self._wake.set()
        if len(self._pieces) >= HIGH_WATER and not self._paused:
            self._paused = True
            self._conn.pause(True)

    def _on_end(self, done: asyncio.Future) -> None:
        if not done.cancelled():
            done.exception()  # retrieved here: a broken answer is reported by __aiter__
        self._wake.set()

    # ------------------------------------------------------------------ read by the gateway
    @property
    def complete(self) -> bool:
        """The whole answer has come (its body is what iterating gives without waiting)."""
        assert self.exchange is not None
        done = self.exchange.done
        return done.done() and not done.cancelled() and done.exception() is None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """The body's pieces as they arrive.

        Raises:
            UpstreamGone: the connection closed before the answer's end.
        """
        assert self.exchange is not None
        done = self.exchange.done
        while True:
            if self._pieces:
                piece = self._pieces.popleft()
                if self._paused and len(self._pieces) <= LOW_WATER:
                    self._paused = False
                    self._conn.pause(False)
                yield piece
            elif done.done():
                exc = None if done.cancelled() else done.exception()
                if exc is not None:
                    raise UpstreamGone(str(exc))
                return
            else:
                self._wake.clear()
                await self._wake.wait()

    def release(self) -> None:
        """Give the connection back (an answer read to its end) or close it (anything else)."""
        assert self.exchange is not None
        if self.complete and not self._pieces and self._conn.keep_alive and not self._conn.closed:
            self._pool.idle(self._conn)
        else:
            self._conn.close()


class Upstream:
    """The kept-alive connections to one sandbox's MCP socket.

    Args:
        socket_path: The sandbox's ``mcp.sock``.
    """

    def __init__(self, socket_path: Path):
        self.socket_path = socket_path
        self._idle: list[HttpConnection] = []
        self._open: set[HttpConnection] = set()

    async def request(self, head: bytes, body: bytes) -> Answer:
        """Send one request; the answer once its status and headers have come.

        A kept-alive connection the server closed while it was idle (uvicorn's keep-alive
        timeout) fails before any of the answer: the request is then sent once more on a new
        connection, which is safe since it was never read.

        Raises:
            UpstreamGone: the socket is gone or refuses connections, or the connection closed
                before the answer's head.
        """
        for attempt in (0, 1):
            conn = await self._connection(reuse=attempt == 0)
            reused = conn.requests > 0
            answer = Answer(self, conn)
            answer.exchange = Exchange(body, None, answer._on_head, answer._on_data)
            answer.exchange.done.add_done_callback(answer._on_end)
            conn.send(head, body, answer.exchange)
            try:
                waits: set[asyncio.Future[Any]] = {answer._head, answer.exchange.done}
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                conn.close()  # an answer nobody will read: the connection cannot serve another
                raise
            if answer._head.done():
                return answer
            exc = answer.exchange.done.exception()
            conn.close()
            if not (isinstance(exc, ConnectionLost) and reused and not exc.answered and attempt == 0):
                raise UpstreamGone(str(exc))
        raise AssertionError("unreachable: the second attempt returns or raises")

    async def _connection(self, reuse: bool) -> HttpConnection:
        while reuse and self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        try:
            _, conn = await asyncio.get_running_loop().create_unix_connection(lambda: HttpConnection(self._lost),
                                                                              str(self.socket_path))
        except OSError as exc:
            raise UpstreamGone(f"{type(exc).__name__}: {exc.strerror or exc}") from None
        self._open.add(conn)
        return conn

    def idle(self, conn: HttpConnection) -> None:
        """Keep ``conn`` for the next request (closed past :data:`MAX_IDLE`)."""
        if len(self._idle) < MAX_IDLE:
            self._idle.append(conn)
        else:
            conn.close()

    def _lost(self, conn: HttpConnection) -> None:
        self._open.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)

    def close(self) -> None:
        """Close every connection (answers still streaming end with UpstreamGone)."""
        for conn in list(self._open):
            conn.close()
        self._idle.clear()
