"""Multi-turn tasks in the spec: the user after the first request, world events, later days.

A conversation is counted in **turns**: turn 1 is the spec's ``prompt`` and the agent's work
on it, until the agent replies without calling a tool; each later user message (a scripted
or simulated user's reply, or a new day's ``prompt``) starts the next turn. Days number from
1 (the first request); ``days`` lists day 2 onwards.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .checks import Check, Pattern
from .toolnames import ToolName


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Condition(_Frozen):
    """When a user turn or an event applies: every field given must hold."""

    reply_matches: Pattern | None = None
    """The agent's last reply (its text when it stopped calling tools) matches this regex (RE2)."""
    reply_lacks: Pattern | None = None
    """The agent's last reply does not match this regex."""
    called: ToolName | None = None
    """The agent called this tool during the turn that just ended (a failed call counts)."""
    not_called: ToolName | None = None
    """The agent did not call this tool during the turn that just ended."""
    check: Check | None = None
    """This check holds on the state as the agent left it at the end of the turn."""


class Action(_Frozen):
    """One change made by the user or the world: exactly one of ``tool``, ``add``, ``clock``."""

    tool: ToolName | None = None
    """Call this tool (any workspace or service tool, allowed to the agent or not) as the actor."""
    args: dict[str, Any] = {}
    """Arguments of the ``tool`` call."""
    add: dict[str, dict[str, list[dict[str, Any]]]] | None = None
    """Records that arrive, as seed records per service and collection, each with its own
    ``id`` (``{mail: {messages: [{id: m9, from: ..., subject: ...}]}}``); relative times are
    read on the clock at that moment."""
    clock: str | None = None
    """Move the task clock: ISO 8601, or relative to the task's start clock (``now+1d@09:00``)."""
    as_: str | None = Field(default=None, alias="as")
    """With ``tool``: who does it, instead of the service's own user: a colleague commenting on
    a ticket (``as: priya@acme.com``), posting in chat (``as: priya``, a chat user id), moving
    a meeting. For the services that have a user: calendar, chat, crm, documents, expenses,
    kb, tickets."""

    @model_validator(mode="after")
    def _one(self) -> "Action":
        given = [k for k in ("tool", "add", "clock") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("an action needs exactly one of tool, add, clock")
        if self.args and self.tool is None:
            raise ValueError("args go with tool")
        if self.as_ is not None:
            service = service_of(self.tool) if self.tool else None
            if service not in AS_SERVICES:
                raise ValueError(f"`as` works with a tool of {', '.join(AS_SERVICES)}, not {self.tool!r}")
        if self.clock is not None:
            _check_time(self.clock)
        return self


#: Services whose tools act as a configurable user (their seed's ``user``), so an action may
#: be done ``as`` someone else.
AS_SERVICES = ("calendar", "chat", "crm", "documents", "expenses", "kb", "tickets")


def service_of(tool: str) -> str | None:
    """The service a tool belongs to (None for workspace tools)."""
    from ..services.names import SERVICE_TOOLS

    return next((name for name, tools in SERVICE_TOOLS.items() if tool in tools), None)


def _check_time(value: str) -> None:
    from datetime import datetime

    from ..services.base import _RELATIVE  # the seed-time syntax

    if _RELATIVE.match(value):
        return
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"time {value!r} is neither ISO 8601 nor relative to the clock "
                         "('now+1d@09:00')") from None


class UserTurn(_Frozen):
    """One message of the scripted user, optionally conditional and with actions."""

    say: str = Field(min_length=1)
    """What the user says (the agent gets it as a user message)."""
    when: Condition | None = None
    """Say it only when this holds after the agent's turn; otherwise the user looks further."""
    actions: list[Action] = []
    """What the user does in the sandbox before saying it (as ``actor: user``)."""
    day: int = Field(default=1, ge=1)
    """The day this message belongs to."""


class LLMUser(_Frozen):
    """A user simulated by a language model (tau2-bench style), from ``--user-model``.

    Without a user model (validation, tests, runs that give none) the scripted ``turns`` are
    the fallback, so every LLM-user spec also carries them.
    """

    persona: str = Field(min_length=1)
    """Who the user is and how they talk."""
    goal: str = Field(min_length=1)
    """What the user wants from the agent."""
    facts: list[str] = []
    """Hidden facts the user knows and gives only when the agent asks for them."""
    stop: str = "###STOP###"
    """The marker the simulated user writes to end the conversation."""
    temperature: float = Field(default=0.0, ge=0, le=2)
    """Sampling temperature of the user model."""


class User(_Frozen):
    """The user after the first request."""

    turns: list[UserTurn] = []
    """Scripted replies, in order. After each agent turn the user says the first remaining
    turn of the current day whose ``when`` holds (the turns it passes over are dropped); when
    none holds, the day's conversation ends."""
    llm: LLMUser | None = None
    """Simulate the user with a model instead (the ``turns`` stay the fallback)."""
    max_turns: int = Field(default=10, ge=0, le=200)
    """Most user replies in the whole episode."""

    @model_validator(mode="after")
    def _fallback(self) -> "User":
        if self.llm is not None and not self.turns:
            raise ValueError("a simulated (llm) user needs scripted turns too: they are its fallback "
                             "for validation and for runs without a user model")
        return self


class Event(_Frozen):
    """A change of the world, made by the environment (``actor: world``)."""

    id: str | None = None
    """Name of the event in the trajectory; defaults to ``event-<n>``."""
    day: int = Field(default=1, ge=1)
    """The day it belongs to; without ``after_turn`` or ``at`` it fires at that day's start,
    before the day's first message."""
    after_turn: int | None = Field(default=None, ge=1)
    """Fire after the agent ends this turn (before the user's next message)."""
    at: str | None = None
    """Fire when the task clock reaches this time (ISO 8601 or relative to the start clock)."""
    when: Condition | None = None
    """Fire only when this holds (checked when the event is due; it is not retried)."""
    actions: list[Action] = Field(min_length=1)
    """What happens."""

    @model_validator(mode="after")
    def _one_trigger(self) -> "Event":
        if self.after_turn is not None and self.at is not None:
            raise ValueError("give after_turn or at, not both")
        if self.at is not None:
            _check_time(self.at)
        return self


class Day(_Frozen):
    """A later day (or session) of the task: the clock moves, then the user writes again."""

    clock: str
    """The clock at the start of the day: ISO 8601, or relative to the task's start clock
    (``now+1d@09:00``)."""
    prompt: str = Field(min_length=1)
    """The user's first message of the day."""

    @model_validator(mode="after")
    def _check(self) -> Day:
        _check_time(self.clock)
        return self
