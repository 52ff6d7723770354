"""Tool names a spec may use: the workspace tools and every service's tools."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from ..formats import WORKSPACE_TOOLS
from ..services.catalog import SERVICE_TOOLS


def known_tools() -> tuple[str, ...]:
    """Every tool name a spec may allow."""
    return tuple(WORKSPACE_TOOLS) + tuple(t for tools in SERVICE_TOOLS.values() for t in tools)


def _tool_name(name: str) -> str:
    if name not in known_tools():
        raise ValueError(f"unknown tool {name!r}; known tools: {', '.join(known_tools())}")
    return name


ToolName = Annotated[str, AfterValidator(_tool_name)]
