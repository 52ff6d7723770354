"""The cowork tools of the current sample as an Inspect tool source."""

from __future__ import annotations

from typing import Any

from inspect_ai.tool import Tool, ToolDef, ToolError, ToolParams
from inspect_ai.util import sandbox

from .sandbox import CoworkSandboxEnvironment


class CoworkTools:
    """Inspect tool source: the current sample's cowork tools, read from its sandbox.

    A tool error (bad arguments, a refusal, a failed command) goes back to the model as
    Inspect's ToolError, as it would to any cowork agent.
    """

    def __init__(self, sandbox_name: str | None = None):
        self.sandbox_name = sandbox_name

    def _env(self) -> CoworkSandboxEnvironment:
        return sandbox(self.sandbox_name).as_type(CoworkSandboxEnvironment)

    async def tools(self) -> list[Tool]:
        """One Inspect tool per MCP tool of the sample's sandbox, with its own schema."""
        return [self._tool(t) for t in await self._env().cowork.tools()]

    def _tool(self, mcp_tool: Any) -> Tool:
        name = mcp_tool.name

        async def execute(**kwargs: Any) -> str:
            r = await self._env().cowork.call_tool(name, kwargs)
            if r.is_error:
                raise ToolError(r.text)
            return r.text

        schema = dict(getattr(mcp_tool, "input_schema", None) or {})
        schema.pop("$schema", None)
        schema.pop("title", None)
        params = ToolParams.model_validate({"type": "object", **schema, "additionalProperties": False})
        for pname, param in params.properties.items():
            param.description = param.description or pname
        return ToolDef(execute, name=name, description=mcp_tool.description or name, parameters=params).as_tool()


def cowork_tools(sandbox_name: str | None = None) -> CoworkTools:
    """The cowork tools of the current sample, for Inspect agents (``react(tools=[cowork_tools()])``).

    Args:
        sandbox_name: The sample's sandbox to use (None: the default one).
    """
    return CoworkTools(sandbox_name)
