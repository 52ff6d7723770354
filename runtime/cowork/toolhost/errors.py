"""The errors tools raise, without importing fastmcp.

The in-container server answers the host over its own lean transport (server.rpc) and
imports fastmcp only when an external client attaches over streamable HTTP. Tools and
middleware therefore raise these classes; :func:`to_fastmcp` turns them into fastmcp's
own on that path, so both transports answer with the same text.
"""

from __future__ import annotations

from typing import Any


class ToolError(Exception):
    """A tool's failure, shown to the agent as is (an ``isError`` result with this text)."""


class ValidationError(Exception):
    """The arguments do not match the tool's parameters (pydantic's message, as fastmcp gives it)."""


def to_fastmcp(exc: BaseException) -> BaseException:
    """The fastmcp counterpart of one of our errors (the same text), or ``exc`` itself."""
    if isinstance(exc, ToolError):
        from fastmcp.exceptions import ToolError as FastmcpToolError

        return FastmcpToolError(str(exc))
    return exc


class FastmcpMiddleware:
    """Lets a cowork middleware (``on_call_tool(context, call_next)``) sit in a FastMCP app.

    fastmcp calls a middleware as ``await mw(context, call_next)`` for every message; only
    ``tools/call`` reaches ``on_call_tool``. Our ToolError leaving it becomes fastmcp's, and a
    tool's own ToolError, which fastmcp wraps as "Error calling tool ...", is unwrapped again,
    so the agent reads the same text over either transport.
    """

    async def on_call_tool(self, context: Any, call_next: Any) -> Any:  # pragma: no cover - overridden
        """Handle one ``tools/call``: subclasses act, and call ``call_next(context)`` to go on."""
        return await call_next(context)

    async def __call__(self, context: Any, call_next: Any) -> Any:
        """What fastmcp calls for every message: ``tools/call`` goes through :meth:`on_call_tool`,
        with our ToolError turned into fastmcp's on the way out (see the class docstring)."""
        if getattr(context, "method", None) != "tools/call":
            return await call_next(context)

        async def inner(ctx: Any) -> Any:
            try:
                return await call_next(ctx)
            except Exception as exc:  # noqa: BLE001 - re-raised, maybe unwrapped
                cause = exc.__cause__
                if isinstance(cause, ToolError) and type(exc).__name__ == "ToolError":
                    raise to_fastmcp(cause) from None
                raise

        try:
            return await self.on_call_tool(context, inner)
        except ToolError as exc:
            raise to_fastmcp(exc) from None
