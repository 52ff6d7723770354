"""The Policy protocol: given the conversation and the tools, produce the next assistant turn."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class ToolCall:
    """One tool call requested by a policy."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class AssistantTurn:
    """What a policy said: optional text and zero or more tool calls (none means it is done)."""

    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    #: Backend-specific extras (token ids, logprobs, raw response) kept for export.
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Policy(Protocol):
    """Anything that can act in an episode. Policies know nothing about Docker."""

    name: str

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        """Return the next assistant turn.

        Args:
            messages: The conversation so far, in OpenAI chat format.
            tools: The available tools, in OpenAI function-tool format.

        Raises:
            PolicyError: when the backend fails (after its own retries).
        """
        ...


def mcp_tool_to_openai(tool: Any) -> dict[str, Any]:
    """Convert an MCP tool (name, description, inputSchema) to an OpenAI function tool."""
    schema = dict(getattr(tool, "input_schema", None) or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": (tool.description or "").strip(),
            "parameters": schema,
        },
    }
