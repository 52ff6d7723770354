"""Tool names a spec may use: the workspace tools, the optional ``python`` and ``read_document``
tools and every service's tools."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from ..formats import DOCUMENT_TOOL, PYTHON_TOOL, WORKSPACE_TOOLS
from ..services.names import SERVICE_TOOLS


def known_tools() -> tuple[str, ...]:
    """Every tool name a spec may allow."""
    return tuple(WORKSPACE_TOOLS) + (PYTHON_TOOL, DOCUMENT_TOOL) + tuple(t for tools in SERVICE_TOOLS.values() for t in tools)


def _tool_name(name: str) -> str:
    from ..services.http_names import DECLARED

    if name not in known_tools() and name not in DECLARED.get()[0]:  # or one of the task's HTTP tools
        import difflib

        close = difflib.get_close_matches(str(name), known_tools(), n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(repr(c) for c in close)}?" if close else \
            "a service name (mail, calendar, ...) stands for all its tools"
        raise ValueError(f"unknown tool {name!r}; {hint} (every tool: docs/services.md, `cowork spec schema`)")
    return name


ToolName = Annotated[str, AfterValidator(_tool_name)]
