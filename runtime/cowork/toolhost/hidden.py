"""Arguments a task hides: left out of the schema the agent sees, and refused when sent anyway.

A task may expose a tool without some of its arguments (Claw-Eval's ``tickets_update``
without ``status``: the agent triages, it may not close). Hiding an argument from the listing
alone would leave it one guess away, so the middleware refuses every call that carries one:
the call is audited like any other (its ``tool_call`` record, then a ``tool_result`` with
outcome ``error``) and nothing runs, so graders see the attempt and the state never has it.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Iterable, Mapping
from typing import Any, Callable

from .errors import FastmcpMiddleware, ToolError

#: Arguments hidden per tool name.
Hidden = Mapping[str, frozenset[str]]


def hidden_map(options: Mapping[str, Iterable[str]] | None) -> dict[str, frozenset[str]]:
    """``{tool: hidden argument names}`` without empty entries."""
    return {tool: frozenset(args) for tool, args in (options or {}).items() if args}


def strip_schema(entry: dict[str, Any], hidden: frozenset[str] | None) -> dict[str, Any]:
    """A ``tools/list`` entry without the hidden arguments (a copy; the catalog stays whole)."""
    schema = entry.get("inputSchema")
    if not hidden or not isinstance(schema, dict):
        return entry
    schema = copy.deepcopy(schema)
    props = schema.get("properties") or {}
    for name in hidden:
        props.pop(name, None)
    if "required" in schema:
        schema["required"] = [r for r in schema["required"] if r not in hidden]
    return {**entry, "inputSchema": schema}


def trimmed(fn: Callable[..., Any], hidden: frozenset[str]) -> Callable[..., Any]:
    """``fn`` with a signature that lacks the hidden parameters, so an app that builds its
    schema from the signature (FastMCP) lists the tool without them."""
    sig = inspect.signature(fn)
    params = [p for name, p in sig.parameters.items() if name not in hidden]
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            return await fn(*args, **kwargs)
        wrapper: Callable[..., Any] = run_async
    else:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)
        wrapper = run
    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {k: v for k, v in getattr(fn, "__annotations__", {}).items() if k not in hidden}
    return wrapper


class HiddenArguments(FastmcpMiddleware):
    """Refuses a call that sends an argument its tool hides (add it after the audit middleware,
    so the refusal is audited as a failed call).

    Args:
        hidden: The hidden argument names per tool.
    """

    def __init__(self, hidden: Hidden):
        self.hidden = dict(hidden)

    async def on_call_tool(self, context: Any, call_next: Any) -> Any:
        """Run the call unless it carries a hidden argument.

        Raises:
            ToolError: the call sent a hidden argument; nothing ran.
        """
        name = context.message.name
        hidden = self.hidden.get(name)
        args = context.message.arguments
        if hidden and isinstance(args, dict):
            sent = sorted(hidden & set(args))
            if sent:
                raise ToolError(f"Refused: {name} does not take {', '.join(repr(s) for s in sent)} in this task; "
                                "nothing was done.")
        return await call_next(context)
