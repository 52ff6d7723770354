"""A minimal HTTP/1.1 client connection for ``cowork connect``: one request at a time, kept
alive, over the sandbox's unix socket.

Written on asyncio's protocol layer rather than taken from httpx: the bridge's process
should start in milliseconds (httpx and its dependencies cost ~0.1 s of imports) and a call
should cost microseconds of the host's CPU; the server is always the same uvicorn, so the
subset needed is small: a status line, headers, and a body sized by ``Content-Length``,
chunked, or ending with the connection. An event-stream body (``text/event-stream``) is
split into its messages as it arrives, so progress reaches the client before the answer.
``cowork serve`` uses it too, with ``on_data``: the body's bytes are passed on as they come,
whatever the content type (the gateway forwards them unchanged).
"""

from __future__ import annotations

import asyncio
from typing import Callable


class ConnectionLost(ConnectionError):
    """The connection closed before the whole answer came."""

    def __init__(self, message: str, answered: bool):
        super().__init__(message)
        #: Whether any byte of the answer had come: if not, the request may never have been read.
        self.answered = answered


class Exchange:
    """One request and its answer.

    Args:
        body: The request body (kept so the request can be sent again on a new connection).
        on_message: Called with each message of an event-stream answer as it arrives.
        on_head: Called with the status and the (lower-cased) headers before any of the body.
        on_data: Called with each piece of the body as it arrives (chunked framing removed),
            instead of collecting it or splitting it into messages.
    """

    def __init__(self, body: bytes, on_message: Callable[[bytes], None] | None,
                 on_head: Callable[[int, dict[str, str]], None] | None = None,
                 on_data: Callable[[bytes], None] | None = None):
        self.body = body
        self.on_message = on_message
        self.on_head = on_head
        self.on_data = on_data
        #: Resolves to (status, headers, body); the body is empty for an event stream.
        self.done: asyncio.Future[tuple[int, dict[str, str], bytes]] = asyncio.get_running_loop().create_future()

    def again(self) -> "Exchange":
        """A fresh exchange for the same request."""
        return Exchange(self.body, self.on_message, self.on_head, self.on_data)


class HttpConnection(asyncio.Protocol):
    """One kept-alive HTTP/1.1 connection.

    Args:
        on_lost: Called with the connection once it has closed, for whatever reason.
    """

    def __init__(self, on_lost: Callable[["HttpConnection"], None]):
        self._on_lost = on_lost
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._exchange: Exchange | None = None
        self._status = 0
        self._headers: dict[str, str] = {}
        self._remaining: int | None = None  # body bytes still due (Content-Length, or the current chunk)
        self._mode = ""  # "" head next, "length", "chunked", "close" (until the connection ends)
        self._body = bytearray()
        self._events = b""
        self._stream = False
        self.closed = False
        self.keep_alive = True
        self.requests = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport (asyncio calls this once the socket is connected)."""
        self._transport = transport  # type: ignore[assignment]

    def send(self, head: bytes, body: bytes, exchange: Exchange) -> None:
        """Send a request; its answer resolves ``exchange.done``."""
        if self.closed or self._transport is None:
            exchange.done.set_exception(ConnectionLost("connection already closed", answered=False))
            return
        self._exchange, self._mode, self._buf = exchange, "", bytearray()
        self.requests += 1
        self._transport.writelines((head, body))

    def close(self) -> None:
        """Close the connection; :meth:`connection_lost` follows and fails an exchange still in flight."""
        if self._transport is not None:
            self._transport.close()

    def pause(self, paused: bool) -> None:
        """Stop (True) or resume (False) reading from the server: flow control for ``on_data``."""
        if self._transport is not None and not self.closed:
            if paused:
                self._transport.pause_reading()
            else:
                self._transport.resume_reading()

    # ------------------------------------------------------------------ protocol
    def data_received(self, data: bytes) -> None:
        """Parse what the server sent; a malformed answer fails the exchange and closes the connection."""
        if self._exchange is None:  # nothing asked: a server never speaks first; drop the connection
            self.close()
            return
        self._buf += data
        try:
            self._parse()
        except ValueError as exc:  # malformed answer
            self._fail(f"malformed HTTP answer: {exc}", answered=True)
            self.close()

    def eof_received(self) -> bool:
        """Returns False: the transport then closes our side too."""
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        """Mark the connection closed; an answer read to the end of the stream completes, any
        other exchange in flight fails with ConnectionLost; then tell the owner (``on_lost``)."""
        self.closed = True
        if self._exchange is not None:
            if self._mode == "close":
                self._complete()
            else:
                self._fail(f"connection closed ({exc or 'end of stream'})", answered=bool(self._mode or self._buf))
        self._on_lost(self)

    # ------------------------------------------------------------------ parsing
    def _parse(self) -> None:
        while self._exchange is not None:
            if not self._mode:
                end = self._buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                self._start(bytes(self._buf[:end]).decode("latin-1"))
                del self._buf[:end + 4]
            elif self._mode == "length":
                assert self._remaining is not None  # set with the mode
                take = self._buf[:self._remaining]
                del self._buf[:len(take)]
                self._feed(bytes(take))
                self._remaining -= len(take)
                if self._remaining:
                    return
                self._complete()
            elif self._mode == "chunked":
                if not self._chunk():
                    return
            else:  # "close": everything until the connection ends
                self._feed(bytes(self._buf))
                self._buf.clear()
                return

    def _start(self, head: str) -> None:
        status_line, *lines = head.split("\r\n")
        self._status = int(status_line.split(" ", 2)[1])
        self._headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            self._headers[name.strip().lower()] = value.strip()
        self.keep_alive = self._headers.get("connection", "").lower() != "close"
        self._stream = self._headers.get("content-type", "").startswith("text/event-stream")
        self._body, self._events = bytearray(), b""
        exchange = self._exchange
        assert exchange is not None  # a head is parsed only while an exchange is in flight
        if exchange.on_head is not None:
            exchange.on_head(self._status, self._headers)
        if "chunked" in self._headers.get("transfer-encoding", "").lower():
            self._mode, self._remaining = "chunked", None
        elif "content-length" in self._headers:
            self._mode, self._remaining = "length", int(self._headers["content-length"])
        elif self._status in (204, 304) or self._status < 200:
            self._mode, self._remaining = "length", 0
        else:
            self._mode, self.keep_alive = "close", False

    def _chunk(self) -> bool:
        """Consume one chunk (or the last); False when more bytes are needed."""
        if self._remaining is None:
            end = self._buf.find(b"\r\n")
            if end < 0:
                return False
            self._remaining = int(bytes(self._buf[:end]).split(b";")[0], 16)
            del self._buf[:end + 2]
            if self._remaining == 0:
                self._remaining = -1  # the last chunk: trailers end with an empty line
        if self._remaining == -1:
            end = self._buf.find(b"\r\n")
            while end > 0:  # skip trailer fields
                del self._buf[:end + 2]
                end = self._buf.find(b"\r\n")
            if end < 0:
                return False
            del self._buf[:2]
            self._complete()
            return True
        if len(self._buf) < self._remaining + 2:
            return False
        self._feed(bytes(self._buf[:self._remaining]))
        del self._buf[:self._remaining + 2]
        self._remaining = None
        return True

    def _feed(self, data: bytes) -> None:
        exchange = self._exchange
        assert exchange is not None  # a body is fed only while an exchange is in flight
        if exchange.on_data is not None:
            if data:
                exchange.on_data(data)
            return
        if not self._stream:
            self._body += data
            return
        self._events += data.replace(b"\r\n", b"\n")
        *blocks, self._events = self._events.split(b"\n\n")
        for block in blocks:
            data_lines = [line[5:].lstrip() for line in block.split(b"\n") if line.startswith(b"data:")]
            if data_lines and exchange.on_message is not None:
                exchange.on_message(b"\n".join(data_lines))

    def _complete(self) -> None:
        if self._stream and self._events.strip():
            self._feed(b"\n\n")  # a last event without its blank line
        exchange, self._exchange = self._exchange, None
        assert exchange is not None  # an answer completes only while an exchange is in flight
        self._mode = ""
        if not exchange.done.done():
            exchange.done.set_result((self._status, self._headers, bytes(self._body)))
        if not self.keep_alive:
            self.close()

    def _fail(self, message: str, answered: bool) -> None:
        exchange, self._exchange = self._exchange, None
        if exchange is not None and not exchange.done.done():
            exchange.done.set_exception(ConnectionLost(message, answered))
