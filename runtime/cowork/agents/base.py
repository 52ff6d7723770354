"""The Policy protocol: given the conversation and the tools, produce the next assistant turn."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..formats import INVALID_ARGUMENTS_KEY


@dataclass
class ToolCall:
    """One tool call requested by a policy."""

    id: str
    name: str
    arguments: dict[str, Any]
    """Always a dict: see parse_arguments for what a model's unreadable arguments become."""


def parse_arguments(raw: Any) -> dict[str, Any]:
    r"""A model's tool-call arguments (JSON text or an already decoded value) as a dict.

    Anything that is not a JSON object (bad JSON, ``"[\"ls\"]"``, a number, JSON nested
    past the parser's depth) comes back as ``{INVALID_ARGUMENTS_KEY: raw}``: the episode
    goes on, and the sandbox answers with a tool error the model can learn from, since
    such a call is the model's own mistake, not a failure of the run.
    """
    if raw is None or raw == "":
        return {}
    value = raw
    if isinstance(raw, (str, bytes, bytearray)):
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):  # JSONDecodeError and bad UTF-8 are ValueErrors
            return {INVALID_ARGUMENTS_KEY: raw if isinstance(raw, str) else raw.decode("utf-8", "replace")}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return value
    return {INVALID_ARGUMENTS_KEY: raw}


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
