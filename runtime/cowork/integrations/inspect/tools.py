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

        schema = _inline_refs(dict(getattr(mcp_tool, "input_schema", None) or {}))
        schema.pop("$schema", None)
        schema.pop("title", None)
        params = ToolParams.model_validate({"type": "object", **schema, "additionalProperties": False})
        for pname, param in params.properties.items():
            param.description = param.description or pname
        return ToolDef(execute, name=name, description=mcp_tool.description or name, parameters=params).as_tool()


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with each local ``$ref`` (``#/$defs/X``) replaced by its definition: Inspect's
    ToolParams keeps only ``properties`` and ``required``, so the definitions would be lost.
    A definition that refers to itself is left as an open object at the second level."""
    defs = schema.pop("$defs", None) or schema.pop("definitions", None) or {}

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.rsplit("/", 1)[-1] in defs:
                key = ref.rsplit("/", 1)[-1]
                if key in seen:
                    return {"type": "object"}
                rest = {k: v for k, v in node.items() if k != "$ref"}
                return {**walk(defs[key], (*seen, key)), **walk(rest, seen)}
            return {k: walk(v, seen) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, seen) for v in node]
        return node

    return walk(schema, ())


def cowork_tools(sandbox_name: str | None = None) -> CoworkTools:
    """The cowork tools of the current sample, for Inspect agents (``react(tools=[cowork_tools()])``).

    Args:
        sandbox_name: The sample's sandbox to use (None: the default one).
    """
    return CoworkTools(sandbox_name)
