"""A task's HTTP tools: each call of one is an HTTP request to the task's own service.

The services run in the sandbox's companion container, on their own network namespace; the
server reaches each through a unix socket in the root-only run dir (``/run/cowork/http/<name>.sock``),
which the companion's supervisor forwards to the service's loopback port (server.http_supervisor).
A call is registered on the tool host like any tool (ToolHost.listed_tool), so the audit
middleware records it before it runs and its result after; here it is checked against the
tool's input schema, may meet an injected fault, is sent within the task's tool timeout, and
its answer is cut to the task's output limit.

Only the standard library (and jsonschema, which comes with fastmcp) is used: no HTTP client
package in the sandbox's server.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import socket
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import quote, urlencode

from .errors import ToolError

#: Largest answer read from a service (bytes); more is cut and said so (the agent sees at most
#: the output limit anyway; the audit endpoint's answer has its own limit, see server.http_services).
MAX_ANSWER_BYTES = 8 << 20
#: Placeholders in a path (kept in step with cowork.spec.http_services.PLACEHOLDER).
_PLACEHOLDER = "{%s}"


class UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTP/1.1 connection over a unix socket (the service's, through the companion)."""

    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        """Connect to the unix socket instead of a TCP address."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.unix_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


@dataclass
class Answer:
    """A service's answer."""

    status: int
    reason: str
    content_type: str
    body: bytes
    cut: bool = False
    """The body was longer than the limit read."""

    def json(self) -> Any:
        """The body as JSON (ValueError when it is not)."""
        return json.loads(self.body.decode("utf-8"))

    def text(self) -> str:
        """The body as text (undecodable bytes replaced)."""
        return self.body.decode("utf-8", "replace")


def request(sock_path: str, port: int, method: str, target: str, *, body: bytes | None = None,
            timeout: float = 30.0, max_bytes: int = MAX_ANSWER_BYTES,
            headers: dict[str, str] | None = None) -> Answer:
    """Send one request to a service through its socket and read its answer (blocking).

    Raises:
        OSError: the socket does not answer (the service or the companion is down), or the
            request timed out.
        http.client.HTTPException: the answer is not HTTP.
    """
    conn = UnixHTTPConnection(sock_path, timeout)
    try:
        hdrs = {"Host": f"localhost:{port}", "Connection": "close", "Accept": "application/json",
                **(headers or {})}
        if body is not None:
            hdrs.setdefault("Content-Type", "application/json")
        conn.request(method, target, body=body, headers=hdrs)
        resp = conn.getresponse()
        data = resp.read(max_bytes + 1)
        return Answer(resp.status, resp.reason or "", resp.getheader("Content-Type") or "", data[:max_bytes],
                      cut=len(data) > max_bytes)
    finally:
        conn.close()


def build_target(path: str, method: str, args: dict[str, Any]) -> tuple[str, bytes | None]:
    """The request target (path with placeholders filled, and the query for GET) and the JSON
    body (None for GET) of a call with ``args``."""
    rest = dict(args)
    for name in list(rest):
        key = _PLACEHOLDER % name
        if key in path:
            value = rest.pop(name)
            text = value if isinstance(value, str) else json.dumps(value)
            path = path.replace(key, quote(text, safe=""))
    if method in ("GET",):
        pairs: list[tuple[str, str]] = []
        for key, value in rest.items():
            for item in (value if isinstance(value, list) else [value]):
                pairs.append((key, item if isinstance(item, str) else
                              ("true" if item is True else "false" if item is False else json.dumps(item))))
        if pairs:
            path += ("&" if "?" in path else "?") + urlencode(pairs)
        return path, None
    return path, json.dumps(rest, ensure_ascii=False, allow_nan=False).encode("utf-8")


def _cut_text(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    shown = data[:limit].decode("utf-8", "ignore")
    return f"{shown}\n[output truncated: {limit} of {len(data)} bytes shown]"


@dataclass
class HttpTool:
    """One HTTP tool of a task, as the server runs it.

    Args:
        config: The tool as task.json holds it (``name``, ``service``, ``method``, ``path``,
            ``input_schema``).
        port: The service's port (for the Host header).
        socket_path: The service's unix socket.
        timeout_s: The task's tool timeout.
        output_limit: The task's output limit (bytes the agent sees).
        faults: Decides this call's injected fault (``decide(tool, service)``), or None.
        audit: Appends a record to the audit log (the faults').
        down: Says why the service does not answer, if the companion knows (exited, never
            became ready), else None.
    """

    config: dict[str, Any]
    port: int
    socket_path: str
    timeout_s: float = 30.0
    output_limit: int = 16384
    faults: Any = None
    audit: Callable[[dict[str, Any]], Any] | None = None
    down: Callable[[str], str | None] = lambda _service: None
    _validator: Any = field(default=None, repr=False)

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.config["name"]

    def wire(self) -> dict[str, Any]:
        """The tool's ``tools/list`` entry."""
        out: dict[str, Any] = {"name": self.name, "description": self.config.get("description", ""),
                               "inputSchema": self.config.get("input_schema") or {"type": "object", "properties": {}}}
        if self.config.get("annotations"):
            out["annotations"] = self.config["annotations"]
        return out

    def check(self, args: dict[str, Any]) -> None:
        """Refuse arguments the tool's input schema does not take.

        Raises:
            ToolError: naming the first mismatch and where it is.
        """
        if self._validator is None:
            try:
                from jsonschema.validators import validator_for
            except ImportError:  # pragma: no cover - jsonschema comes with fastmcp
                self._validator = False
                return
            schema = self.wire()["inputSchema"]
            self._validator = validator_for(schema)(schema)
        if self._validator is False:
            return
        error = next(iter(sorted(self._validator.iter_errors(args), key=lambda e: list(e.path))), None)
        if error is not None:
            where = ".".join(str(p) for p in error.path)
            raise ToolError(f"Invalid arguments for {self.name}: {error.message}"
                            f"{f' (at {where})' if where else ''}; nothing was sent.")

    async def __call__(self, args: dict[str, Any]) -> Any:
        """Run one call: check, maybe fail by an injected fault, send, and shape the answer.

        Raises:
            ToolError: invalid arguments, an injected fault, a service that does not answer or
                answers with an error status (its text, cut to the output limit).
        """
        self.check(args)
        service = self.config["service"]
        if self.faults is not None:
            fault = self.faults.decide(self.name, service)
            if fault is not None:
                if self.audit is not None:
                    self.audit(fault.record())
                if fault.kind == "latency":
                    await asyncio.sleep((fault.latency_ms or 0) / 1000)
                else:
                    raise fault.error()
        method = self.config.get("method", "POST")
        target, body = build_target(self.config["path"], method, args)
        try:
            answer = await asyncio.wait_for(
                asyncio.to_thread(request, self.socket_path, self.port, method, target, body=body,
                                  timeout=self.timeout_s),
                self.timeout_s)
        except (asyncio.TimeoutError, TimeoutError):
            raise ToolError(f"{self.name}: the service {service!r} did not answer within {self.timeout_s:g}s; "
                            "the call may or may not have taken effect.") from None
        except (OSError, http.client.HTTPException) as exc:
            why = self.down(service)
            raise ToolError(f"{self.name}: the service {service!r} is not answering "
                            f"({why or exc}); the call may not have taken effect.") from None
        if answer.status >= 400:
            raise ToolError(_cut_text(f"HTTP {answer.status} {answer.reason}: {answer.text()}", self.output_limit))
        return self.shape(answer)

    def shape(self, answer: Answer) -> Any:
        """The tool's result: the JSON the service answered (an object gives structured
        content), or its text; cut to the output limit (as text) when longer."""
        try:
            value: Any = answer.json()
        except ValueError:
            value = answer.text()
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        if answer.cut or len(text.encode("utf-8")) > self.output_limit:
            return _cut_text(text, self.output_limit)
        return value


def socket_path(run_dir: str, service: str) -> str:
    """Where the server finds a service's socket."""
    return os.path.join(run_dir, "http", f"{service}.sock")


def fastmcp_tool(wire: dict[str, Any], fn: Callable[[dict[str, Any]], Any]) -> Any:
    """A FastMCP tool with ``wire``'s listing that runs ``fn`` (for external MCP clients over
    streamable HTTP; imports fastmcp)."""
    from fastmcp.tools import Tool
    from mcp.types import ToolAnnotations

    class ListedTool(Tool):
        async def run(self, arguments: dict[str, Any]) -> Any:
            try:
                return self.convert_result(await fn(dict(arguments)))
            except ToolError as exc:
                from .errors import to_fastmcp

                raise to_fastmcp(exc) from None

    hints = wire.get("annotations")
    return ListedTool(name=wire["name"], description=wire.get("description") or None,
                      parameters=wire.get("inputSchema") or {"type": "object", "properties": {}},
                      annotations=ToolAnnotations(**hints) if hints else None)
