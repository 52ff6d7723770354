"""Scripted policies: the spec's oracle and violation scripts, and the no-op agent."""

from __future__ import annotations

from typing import Any

from .base import AssistantTurn, ToolCall


class ScriptedPolicy:
    """Plays a fixed list of tool calls, one per turn, then says it is done.

    A step that is a string is a reply: the turn ends with that text (in a multi-turn task
    the user answers, and the script goes on with the next step).

    Args:
        steps: ``(tool, arguments)`` pairs, and reply strings.
        name: Reported agent name.
    """

    def __init__(self, steps: list[tuple[str, dict[str, Any]] | str], name: str = "scripted"):
        self.steps = list(steps)
        self.name = name
        self._next = 0

    def reset(self) -> None:
        """Start the script over (used when an episode is retried on a fresh sandbox)."""
        self._next = 0

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        """The script's next step: a tool call, or a reply; ``"Done."`` once the script is over."""
        if self._next >= len(self.steps):
            return AssistantTurn(content="Done.")
        step = self.steps[self._next]
        self._next += 1
        if isinstance(step, str):
            return AssistantTurn(content=step)
        tool, args = step
        return AssistantTurn(tool_calls=[ToolCall(id=f"call_{self._next}", name=tool, arguments=dict(args))])


def nop_policy() -> ScriptedPolicy:
    """An agent that does nothing: completion checks must fail for it."""
    return ScriptedPolicy([], name="nop")
