"""Policies (agents): scripted, OpenAI-compatible, and (optional extras) vLLM / transformers."""

from __future__ import annotations

from typing import Any

from .base import AssistantTurn, Policy, ToolCall, mcp_tool_to_openai
from .scripted import ScriptedPolicy, nop_policy

AGENTS = ("oracle", "nop", "violation", "openai")


def make_policy(kind: str, spec: Any = None, **options: Any) -> Policy:
    """Build a policy by name; backends import lazily.

    Args:
        kind: ``oracle``, ``nop``, ``violation`` or ``openai``.
        spec: The TaskSpec (needed by the scripted ones).
        options: Backend options (``model``, ``base_url``, ...).

    Raises:
        ValueError: for an unknown kind.
    """
    if kind == "oracle":
        return ScriptedPolicy([(s.tool, s.args) for s in spec.oracle], name="oracle")
    if kind == "violation":
        return ScriptedPolicy([(s.tool, s.args) for s in spec.violation], name="violation")
    if kind == "nop":
        return nop_policy()
    if kind == "openai":
        from .openai import OpenAIPolicy

        return OpenAIPolicy(**options)
    raise ValueError(f"unknown agent {kind!r}; choose one of {', '.join(AGENTS)}")


__all__ = ["AGENTS", "AssistantTurn", "Policy", "ScriptedPolicy", "ToolCall", "make_policy", "mcp_tool_to_openai", "nop_policy"]
