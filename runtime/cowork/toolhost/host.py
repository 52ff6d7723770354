"""The tool host: the sandbox's tools and middleware, served without importing fastmcp.

Importing fastmcp and the MCP SDK was ~0.6 s of a sandbox's start and nearly all of its
~57 MiB of memory. The host's own path needs none of it: :class:`ToolHost` keeps the same
tool functions, runs the same middleware (audit, faults) and answers the way a FastMCP app
answers (pydantic validates the arguments as fastmcp's does; results are converted by the
same rules; the tool list is fastmcp's own, generated once per image, see server.catalog).
:meth:`ToolHost.fastmcp` builds the real FastMCP app from the same registrations when an
external client attaches over streamable HTTP (server.__main__ imports it only then).

It offers the subset of FastMCP's API the tool modules use: ``tool(...)`` as a decorator,
``add_middleware``, ``get_tool``, ``list_tools``, ``call_tool``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from .errors import ToolError, ValidationError


class ToolApp(Protocol):
    """What the tool modules register on and call through: a :class:`ToolHost`, or a real
    FastMCP app (tests, and the catalog build), which has the same methods."""

    def tool(self, name: str | None = None, *, description: str | None = None,
             annotations: Any = None) -> Callable[[Callable[..., Any]], Any]:
        """A decorator that registers its function as the tool ``name``."""
        ...

    def add_middleware(self, middleware: Any) -> None:
        """Add a middleware (``on_call_tool(context, call_next)``)."""
        ...

    async def list_tools(self) -> list[Any]:
        """The tools served (each with ``name``, ``description``, ``parameters``)."""
        ...

    async def call_tool(self, name: str, arguments: dict[str, Any] | None) -> Any:
        """Run a tool through every middleware."""
        ...


@dataclass
class ToolEntry:
    """One registered tool."""

    name: str
    fn: Callable[..., Any]
    description: str | None = None
    annotations: Any = None
    #: pydantic's TypeAdapter of ``fn``, built on the first call.
    adapter: Any = None
    is_async: bool = False
    #: The tools/list entry of a tool registered with :meth:`ToolHost.listed_tool` (its own
    #: schema; ``fn`` takes the arguments as one dict); None for a function tool.
    wire: dict[str, Any] | None = None


@dataclass
class ToolInfo:
    """What ``list_tools`` returns per tool (the attributes fastmcp's Tool has that we read)."""

    name: str
    description: str | None
    parameters: dict[str, Any]
    output_schema: dict[str, Any] | None
    wire: dict[str, Any]


@dataclass
class TextBlock:
    """A text content block (what fastmcp's TextContent offers: ``type`` and ``text``)."""

    text: str
    type: str = "text"


@dataclass
class HostResult:
    """A tool's result, shaped like fastmcp's ToolResult (``content``, ``structured_content``, ``meta``)."""

    content: list[TextBlock]
    structured_content: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None

    def wire(self) -> dict[str, Any]:
        """The MCP ``tools/call`` result."""
        out: dict[str, Any] = {"content": [{"type": b.type, "text": b.text} for b in self.content], "isError": False}
        if self.structured_content is not None:
            out["structuredContent"] = self.structured_content
        if self.meta is not None:
            out["_meta"] = self.meta
        return out


@dataclass
class _Message:
    name: str
    arguments: dict[str, Any] | None

    def model_copy(self, update: dict[str, Any]) -> "_Message":
        return _Message(update.get("name", self.name), update.get("arguments", self.arguments))


@dataclass
class _AppContext:
    fastmcp: "ToolHost"


@dataclass
class _Context:
    """What a middleware's ``on_call_tool`` reads (the fields of fastmcp's MiddlewareContext it uses)."""

    message: _Message
    fastmcp_context: _AppContext
    method: str = "tools/call"

    def copy(self, **changes: Any) -> "_Context":
        return _Context(changes.get("message", self.message), self.fastmcp_context, self.method)


@dataclass
class ToolHost:
    """The sandbox's tools and middleware (see the module's docstring)."""

    name: str = "cowork"
    instructions: str | None = None
    _tools: dict[str, ToolEntry] = field(default_factory=dict)
    _middleware: list[Any] = field(default_factory=list)
    #: Every registered tool's tools/list entry; None until asked for, and again after a registration.
    _catalog: dict[str, dict[str, Any]] | None = None
    #: The middleware chain ending in the tool itself; built on the first call, again after add_middleware.
    _chain: Callable[[Any], Any] | None = None
    _fastmcp: Any = None
    #: Arguments the task hides, per tool: left out of the listing (see toolhost.hidden, whose
    #: middleware refuses a call that sends one anyway).
    hidden: dict[str, frozenset[str]] = field(default_factory=dict)

    # ------------------------------------------------------------------ registration
    def tool(self, name: str | None = None, *, description: str | None = None, annotations: Any = None,
             **_: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register ``fn`` as a tool (a decorator, as ``FastMCP.tool`` with these arguments)."""

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            if self._fastmcp is not None:
                raise RuntimeError("tools must be registered before the FastMCP app is built")
            self._tools[name or fn.__name__] = ToolEntry(name or fn.__name__, fn, description, annotations,
                                                         is_async=inspect.iscoroutinefunction(fn))
            self._catalog = None
            return fn
        return deco

    def listed_tool(self, wire: dict[str, Any], fn: Callable[[dict[str, Any]], Any]) -> None:
        """Register a tool whose listing is given (``name``, ``description``, ``inputSchema``,
        ``annotations``) and whose coroutine function ``fn`` takes the arguments as one dict: a
        task's HTTP tools (toolhost.http_tools), which check their arguments themselves."""
        if self._fastmcp is not None:
            raise RuntimeError("tools must be registered before the FastMCP app is built")
        self._tools[wire["name"]] = ToolEntry(wire["name"], fn, wire.get("description"), wire.get("annotations"),
                                              is_async=True, wire=wire)
        self._catalog = None

    def add_middleware(self, middleware: Any) -> None:
        """Add a middleware (``on_call_tool(context, call_next)``); the first added runs outermost."""
        self._middleware.append(middleware)
        self._chain = None

    @property
    def served(self) -> frozenset[str]:
        """The names of the tools it serves."""
        return frozenset(self._tools)

    # ------------------------------------------------------------------ FastMCP's API
    async def get_tool(self, name: str) -> ToolEntry | None:
        """The tool registered as ``name``, or None."""
        return self._tools.get(name)

    def tools_wire(self) -> list[dict[str, Any]]:
        """The ``tools`` of an MCP ``tools/list`` result, as fastmcp lists them, in registration order."""
        from .hidden import strip_schema

        catalog = self._tool_catalog()
        return [strip_schema(catalog[name], self.hidden.get(name)) for name in self._tools]

    async def list_tools(self) -> list[ToolInfo]:
        """Every tool served, in registration order, with its catalog entry."""
        return [ToolInfo(t["name"], t.get("description"), t.get("inputSchema") or {}, t.get("outputSchema"), t)
                for t in self.tools_wire()]

    async def call_tool(self, name: str, arguments: dict[str, Any] | None) -> HostResult:
        """Run the tool through every middleware, as ``FastMCP.call_tool`` does.

        Raises:
            ToolError: the tool's own failure, a middleware's refusal, or any other exception
                of the tool, as "Error calling tool 'name': ..." (fastmcp's words).
            ValidationError: the arguments do not fit the tool's parameters.
        """
        if self._chain is None:
            handler: Callable[[Any], Any] = self._run
            for mw in reversed(self._middleware):
                handler = _bind(mw, handler)
            self._chain = handler
        return await self._chain(_Context(_Message(name, arguments), _AppContext(self)))

    # ------------------------------------------------------------------ the tool itself
    async def _run(self, context: _Context) -> HostResult:
        name, args = context.message.name, context.message.arguments or {}
        entry = self._tools.get(name)
        if entry is None:
            raise ToolError(f"Unknown tool: {name!r}")
        if entry.wire is not None:  # a listed tool: the arguments as they came
            try:
                value = await entry.fn(dict(args))
            except ToolError:
                raise
            except Exception as exc:  # noqa: BLE001 - fastmcp's rule, as below
                raise ToolError(f"Error calling tool {name!r}: {exc}") from exc
            return self._convert(entry, value)
        if entry.adapter is None:
            from pydantic import TypeAdapter

            entry.adapter = TypeAdapter(entry.fn)
        if entry.is_async:
            coro = _validate(entry, args)
            try:
                value = await coro
            except ToolError:
                raise
            except Exception as exc:  # noqa: BLE001 - fastmcp's rule: any other failure is reported by name
                raise ToolError(f"Error calling tool {name!r}: {exc}") from exc
        else:
            # fastmcp runs a sync tool (validation and body) in a worker thread, context and all.
            try:
                value = await asyncio.to_thread(_validate, entry, args)
            except (ToolError, ValidationError):
                raise
            except Exception as exc:  # noqa: BLE001
                raise ToolError(f"Error calling tool {name!r}: {exc}") from exc
        return self._convert(entry, value)

    def _convert(self, entry: ToolEntry, value: Any) -> HostResult:
        """A return value as fastmcp's ``Tool.convert_result`` turns it into a result.

        Tools return str, dict or list (of JSON values); the structured form goes through
        JSON as fastmcp's does (non-finite floats refused), the text block is the string
        itself or pydantic's compact JSON of the structured form.
        """
        import pydantic_core

        if value is None:
            return HostResult(content=[])
        schema = self._tool_catalog()[entry.name].get("outputSchema")
        try:
            payload = pydantic_core.to_json(value, fallback=str, inf_nan_mode="constants")
        except (pydantic_core.PydanticSerializationError, UnicodeDecodeError) as exc:
            if schema is None:
                return HostResult([TextBlock(str(value))])
            raise ToolError(f"Could not serialize the return value of tool {entry.name!r} for its output schema: "
                            f"{exc}. If this is unexpected, set the tool's output_schema to None to disable "
                            "automatic serialization.") from exc
        structured = json.loads(payload)
        if b"NaN" in payload or b"Infinity" in payload:  # only then can a non-finite float be in it
            _refuse_nonfinite(structured, "$")
        text = structured if isinstance(structured, str) else pydantic_core.to_json(structured, fallback=str).decode()
        content = [TextBlock(text)]
        if schema is None:
            return HostResult(content, structured if isinstance(structured, dict) else None)
        if schema.get("x-fastmcp-wrap-result"):
            return HostResult(content, {"result": structured}, {"fastmcp": {"wrap_result": True}})
        return HostResult(content, structured)

    # ------------------------------------------------------------------ catalog and FastMCP
    def _tool_catalog(self) -> dict[str, dict[str, Any]]:
        if self._catalog is None:  # once per registration, not per call
            from .catalog import load_catalog

            catalog = load_catalog()
            listed = {name: e.wire for name, e in self._tools.items() if e.wire is not None}
            if any(name not in catalog and name not in listed for name in self._tools):  # one the image's lacks
                catalog = {**catalog, **_list_with_fastmcp(self)}
            self._catalog = {**catalog, **listed}  # a listed tool's own entry, even over a built-in name
        return self._catalog

    def fastmcp(self) -> Any:
        """The real FastMCP app serving the same tools and middleware (built once; imports fastmcp)."""
        if self._fastmcp is None:
            from fastmcp import FastMCP

            app = FastMCP(name=self.name, instructions=self.instructions)
            for mw in self._middleware:
                app.add_middleware(mw)
            for entry in self._tools.values():
                if entry.wire is not None:
                    from .http_tools import fastmcp_tool

                    app.add_tool(fastmcp_tool(entry.wire, entry.fn))
                    continue
                fn = entry.fn
                if self.hidden.get(entry.name):
                    from .hidden import trimmed

                    fn = trimmed(fn, self.hidden[entry.name])
                app.tool(name=entry.name, description=entry.description, annotations=entry.annotations)(fn)
            self._fastmcp = app
        return self._fastmcp


def _validate(entry: ToolEntry, args: dict[str, Any]) -> Any:
    """Validate ``args`` and call the tool (pydantic calls it; for an async tool, the coroutine)."""
    from pydantic import ValidationError as PydanticValidationError

    try:
        return entry.adapter.validate_python(args)
    except PydanticValidationError as exc:
        if exc.title != f"call[{entry.fn.__name__}]":  # raised by the body of a sync tool
            raise ToolError(f"Error calling tool {entry.name!r}: {exc}") from exc
        raise ValidationError(str(exc)) from None


def _bind(mw: Any, call_next: Callable[[Any], Any]) -> Callable[[Any], Any]:
    async def handler(context: Any) -> Any:
        return await mw.on_call_tool(context, call_next)
    return handler


def _refuse_nonfinite(value: Any, where: str) -> None:
    """ToolError naming the first NaN or infinity in a result (JSON has neither), as fastmcp words it."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        raise ToolError(f"Tool result contains a non-finite float ({value!r}) at {where}; "
                        "JSON cannot represent NaN or Infinity")
    if isinstance(value, dict):
        for key, item in value.items():
            _refuse_nonfinite(item, f"{where}.{key}")
    elif isinstance(value, list):
        for n, item in enumerate(value):
            _refuse_nonfinite(item, f"{where}[{n}]")


def _list_with_fastmcp(host: ToolHost) -> dict[str, dict[str, Any]]:
    """The wire entries of ``host``'s tools as fastmcp lists them (imports fastmcp; slow)."""
    from .catalog import list_wire

    return {t["name"]: t for t in list_wire(host)}
