"""The gateway's ASGI app: ``/sandboxes/<id>/mcp`` checked against the sandbox's bearer token,
then passed through, byte for byte, to that sandbox's own MCP server on its unix socket.

A reverse proxy rather than an MCP proxy (fastmcp's ``create_proxy``, as ``cowork connect``
uses for stdio): sessions, protocol versions, errors, JSON or SSE answers and session DELETE
stay exactly the sandbox server's, and nothing here has to follow MCP's evolution.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from . import auth as tokens
from .upstream import Answer, Upstream, UpstreamGone

log = logging.getLogger(__name__)

Scope = dict[str, Any]

#: A sandbox reference: a start of its id (the 12 characters `cowork up` prints, the full id)
#: or its name, as every command takes one. One path segment only, so `..`, `/` and `%2F`
#: tricks cannot name another path.
ROUTE = re.compile(r"/sandboxes/(?P<ref>[A-Za-z0-9][A-Za-z0-9_.-]{0,127})/mcp/?")
#: The request headers MCP's streamable HTTP transport uses; nothing else reaches the sandbox
#: (not Authorization: the sandbox never sees the token; not Host, Origin or cookies).
REQUEST_HEADERS = frozenset({b"accept", b"content-type", b"mcp-session-id", b"mcp-protocol-version",
                             b"last-event-id"})
#: The response headers passed back (hop-by-hop ones such as transfer-encoding are the
#: gateway's own server's to set).
RESPONSE_HEADERS = frozenset({b"content-type", b"content-length", b"mcp-session-id", b"mcp-protocol-version",
                              b"cache-control", b"allow"})
METHODS = frozenset({"GET", "POST", "DELETE"})
#: Where OAuth clients look for metadata (RFC 8414, RFC 9728, OpenID discovery), at the root
#: (``/.well-known/oauth-protected-resource/sandboxes/<id>/mcp``) or under the endpoint's path.
WELL_KNOWN = re.compile(r"(?:/sandboxes/[^/]+/mcp)?/\.well-known/.*")
#: The answer to them: no metadata. MCP's authorization spec is optional, and a server that
#: follows it MUST name at least one authorization server in its protected-resource metadata;
#: the gateway has none (its bearer tokens come from `cowork up --http`, out of band), so it
#: publishes no metadata. A 404 is how RFC 8414 and RFC 9728 discovery learns that, and MCP
#: clients holding a configured header go on and send it (mcp-remote, the MCP SDKs).
NO_OAUTH = (b'{"error": "not found", "detail": "no OAuth metadata: this server has no authorization server; '
            b'send the bearer token `cowork up --http` printed for the sandbox"}')
#: One JSON-RPC message per POST; a larger body is refused before it is buffered whole.
MAX_BODY_BYTES = 16 * 1024 * 1024
#: The sandbox server's own socket and path (see cowork.server.__main__).
UPSTREAM_PATH = "/mcp"
MCP_SOCKET = "mcp.sock"


@dataclass(frozen=True)
class Target:
    """A running sandbox the gateway may forward to."""

    container_id: str
    run_dir: Path


def _find_sandbox(ref: str) -> Target | None:
    """The one running cowork sandbox named by ``ref`` (blocking: Docker calls), or None: none
    or several match (:func:`cowork.engine.reaper.find_container`), it is not running, or its
    run dir is not one this runtime made. The caller answers every None alike (401)."""
    from ..engine import labels
    from ..engine.container import run_root
    from ..engine.reaper import find_container
    from ..errors import CoworkError, DockerUnavailable

    try:
        container = find_container(ref)
    except DockerUnavailable:
        raise  # an outage is not an unknown sandbox
    except CoworkError:  # none or several match
        return None
    if container.status != "running":
        return None
    run_dir = (container.labels or {}).get(labels.RUN_DIR)
    # A label is data: only a run dir this runtime made is trusted to hold a token file.
    if not run_dir or Path(run_dir).resolve().parent != run_root().resolve():
        return None
    return Target(container.id, Path(run_dir))


class Gateway:
    """The ASGI app. Sandboxes are looked up by reference (cached while their run dir exists,
    since the run dir is made afresh per container and removed with it); the token is checked
    against the run dir's hash file on every request."""

    def __init__(self) -> None:
        self._targets: dict[str, Target] = {}
        self._upstreams: dict[Path, Upstream] = {}

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        """The ASGI entry: lifespan events and HTTP requests (other scopes are ignored)."""
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                for upstream in self._upstreams.values():
                    upstream.close()
                self._upstreams.clear()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # ------------------------------------------------------------------ checks
    async def _http(self, scope: Scope, receive: Any, send: Any) -> None:
        method, path = scope["method"], scope["path"]
        peer = "{}:{}".format(*scope["client"]) if scope.get("client") else "?"
        match = ROUTE.fullmatch(path)
        if match is None and WELL_KNOWN.fullmatch(path):
            # Every start of mcp-remote or an MCP SDK client probes several of these: an
            # expected question with a definite answer, so logged only with `cowork -v serve`.
            log.info("%s %r from %s: 404, no OAuth metadata (bearer tokens only)", method, _cut(path), peer)
            await _answer(send, 404, NO_OAUTH)
            return
        if match is None:
            log.warning("refused %s %r from %s: no such route", method, _cut(path), peer)
            await _answer(send, 404, b'{"error": "not found"}')
            return
        ref = match["ref"]
        token = _bearer(_header(scope, b"authorization"))
        if token is None:
            self._refuse(method, _cut(ref), peer, "no bearer token")
            await _unauthorized(send, presented=False)
            return
        target = await self._target(ref)
        why = "unknown sandbox" if target is None else tokens.check(target.run_dir, token)
        if why is not None:
            # The same answer whether the sandbox exists or not: only the log tells them apart.
            self._refuse(method, ref if target else _cut(ref), peer, why)
            await _unauthorized(send, presented=True)
            return
        assert target is not None
        if method not in METHODS:
            self._refuse(method, ref, peer, "method not allowed")
            await _answer(send, 405, b'{"error": "method not allowed"}', [(b"allow", b"GET, POST, DELETE")])
            return
        try:
            body = await _read_body(receive)
        except _Disconnected:
            return
        if body is None:
            self._refuse(method, ref, peer, f"body over {MAX_BODY_BYTES} bytes")
            await _answer(send, 413, b'{"error": "request body too large"}')
            return
        await self._forward(scope, receive, send, target, body, ref, peer)

    @staticmethod
    def _refuse(method: str, ref: str, peer: str, reason: str) -> None:
        log.warning("refused %s for sandbox %r from %s: %s", method, ref, peer, reason)

    async def _target(self, ref: str) -> Target | None:
        target = self._targets.get(ref)
        if target is not None and target.run_dir.is_dir():
            return target
        if target is not None:  # removed since: forget it and its connection pool
            self._targets.pop(ref, None)
            upstream = self._upstreams.pop(target.run_dir, None)
            if upstream is not None:
                upstream.close()
        target = await anyio.to_thread.run_sync(_find_sandbox, ref)
        if target is not None:
            self._targets[ref] = target
        return target

    # ------------------------------------------------------------------ forwarding
    def _upstream(self, run_dir: Path) -> Upstream:
        upstream = self._upstreams.get(run_dir)
        if upstream is None:
            # No timeout on an answer: a tool call is bounded by the sandbox server's own limit,
            # and a GET stream of server messages lasts as long as the session.
            upstream = self._upstreams[run_dir] = Upstream(run_dir / MCP_SOCKET)
        return upstream

    async def _forward(self, scope: Scope, receive: Any, send: Any, target: Target, body: bytes, ref: str,
                       peer: str) -> None:
        try:
            answer = await self._upstream(target.run_dir).request(_request_head(scope, len(body)), body)
        except UpstreamGone as exc:
            log.warning("sandbox %r (%s) did not answer %s from %s: %s", ref, target.container_id[:12],
                        scope["method"], peer, exc)
            await _answer(send, 502, b'{"error": "the sandbox did not answer"}')
            return
        log.info("%s for sandbox %r from %s: %d", scope["method"], ref, peer, answer.status)
        try:
            await send({"type": "http.response.start", "status": answer.status,
                        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers.items()
                                    if k.encode("latin-1") in RESPONSE_HEADERS]})
            if answer.complete:  # a JSON answer whole in hand (most): one message, no watcher
                await send({"type": "http.response.body", "body": b"".join([piece async for piece in answer])})
                return
            await _stream(answer, receive, send)
        except UpstreamGone as exc:  # the sandbox went away mid-answer
            log.warning("sandbox %r stream broke off for %s: %s", ref, peer, exc)
        finally:
            answer.release()


def _request_head(scope: Scope, length: int) -> bytes:
    """The request line and headers sent to the sandbox: the method, the MCP transport's
    headers (REQUEST_HEADERS) and the body's length; nothing else of the client's."""
    lines = [f"{scope['method']} {UPSTREAM_PATH} HTTP/1.1".encode(), b"host: localhost",
             b"content-length: %d" % length]
    lines += [k.lower() + b": " + v for k, v in scope["headers"]
              if k.lower() in REQUEST_HEADERS and b"\r" not in v and b"\n" not in v]
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def _stream(answer: Answer, receive: Any, send: Any) -> None:
    """Pass an answer on as it arrives (an SSE stream can last the whole session)."""
    async with anyio.create_task_group() as tg:
        # A client that hangs up ends an endless SSE stream here too.
        tg.start_soon(_cancel_on_disconnect, receive, tg.cancel_scope)
        async for piece in answer:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        tg.cancel_scope.cancel()


async def _cancel_on_disconnect(receive: Any, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


#: What the log keeps of a path or reference that names no sandbox: enough to tell what was
#: asked for, too little to rebuild a token pasted there by mistake (43 characters, 256 bits;
#: 24 shown leave 112 unknown).
_LOGGED_CHARS = 24


def _cut(text: str) -> str:
    return text if len(text) <= _LOGGED_CHARS else text[:_LOGGED_CHARS] + "..."


def _header(scope: Scope, name: bytes) -> bytes | None:
    values = [v for k, v in scope["headers"] if k.lower() == name]
    return values[0] if len(values) == 1 else None


def _bearer(value: bytes | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme case-insensitive)."""
    if value is None:
        return None
    scheme, _, token = value.decode("latin-1").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token and " " not in token else None


class _Disconnected(Exception):
    """The client hung up before its request was whole."""


async def _read_body(receive: Any) -> bytes | None:
    """The whole request body, or None past MAX_BODY_BYTES."""
    parts, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        parts.append(chunk)
        if not message.get("more_body"):
            return b"".join(parts)


async def _answer(send: Any, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


async def _unauthorized(send: Any, *, presented: bool) -> None:
    """401 with the RFC 6750 challenge; ``invalid_token`` only when a token was sent."""
    challenge = b'Bearer realm="cowork"' + (b', error="invalid_token"' if presented else b"")
    await _answer(send, 401, b'{"error": "unauthorized", "detail": "send the bearer token `cowork up --http` '
                             b'printed for this sandbox"}', [(b"www-authenticate", challenge)])
