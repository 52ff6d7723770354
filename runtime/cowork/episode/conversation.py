"""Drives a multi-turn episode: the user after the first request, world events, later days.

``run_episode`` lets the agent work until it replies without calling a tool (a turn ends);
for a multi-turn spec it then asks :class:`Conversation` what comes next. The conversation
records the state as the agent left it (a boundary, for scoped checks and conditions), fires
the world's events due after that turn, asks the user (scripted, or simulated by a model with
the scripted turns as fallback) and applies the user's actions; when the day's conversation
is over it moves the clock to the next day, fires that day's events and gives its first
message. Everything it does is kept in the trajectory (``Trajectory.conversation``), and what
the user and the world changed goes into the evidence, so graders never blame the agent
for it.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any

from ..evidence import Evidence
from ..sandbox.sandbox import Sandbox
from ..services.base import resolve_time
from ..spec.conversation import Action, Condition, UserTurn
from ..spec.models import TaskSpec

log = logging.getLogger(__name__)


@dataclass
class UserModel:
    """The model that simulates users of specs with ``user.llm`` (``--user-model``)."""

    model: str
    base_url: str | None = None
    api_key: str | None = None
    max_tokens: int = 512
    seed: int | None = None


@dataclass
class TurnEnd:
    """What the conditions of user turns and events look at when the agent's turn ends."""

    reply: str | None = None
    """The agent's reply text (None before the first turn)."""
    called: set[str] = field(default_factory=set)
    """Tools the agent called during the turn."""
    evidence: Evidence | None = None
    """The state as the agent left it."""


def holds(cond: Condition | None, end: TurnEnd) -> bool:
    """Whether every part of ``cond`` holds at ``end`` (no condition always holds)."""
    if cond is None:
        return True
    from ..grading.checks import run_check
    from ..spec.regex import search

    reply = end.reply or ""
    if cond.reply_matches is not None and not search(cond.reply_matches, reply):
        return False
    if cond.reply_lacks is not None and search(cond.reply_lacks, reply):
        return False
    if cond.called is not None and cond.called not in end.called:
        return False
    if cond.not_called is not None and cond.not_called in end.called:
        return False
    if cond.check is not None:
        if end.evidence is None:
            return False
        ok, _, _, _ = run_check(cond.check, end.evidence, "condition")
        if ok is not True:  # a check that cannot be judged does not hold
            return False
    return True


def at_time(value: str, spec: TaskSpec) -> str:
    """A spec time (ISO 8601, or relative to the task's start clock) as canonical UTC ISO."""
    from datetime import datetime, timezone

    from ..services.base import iso

    resolved = resolve_time(value, spec.clock)
    dt = datetime.fromisoformat(resolved.replace("Z", "+00:00"))
    return iso(dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc))


def _action(a: Action, spec: TaskSpec) -> dict[str, Any]:
    if a.clock is not None:
        return {"clock": at_time(a.clock, spec)}
    if a.add is not None:
        return {"add": a.add}
    return {"tool": a.tool, "args": dict(a.args), **({"as": a.as_} if a.as_ is not None else {})}


class Conversation:
    """The task's side of a multi-turn episode (see the module docstring).

    Args:
        sb: The sandbox.
        traj: The trajectory being written (``conversation`` entries, world changes).
        user_model: Simulates ``user.llm`` users; None: their scripted turns are used.
    """

    def __init__(self, sb: Sandbox, traj: Any, user_model: UserModel | None = None):
        self.sb = sb
        self.spec: TaskSpec = sb.spec
        self.traj = traj
        self.turn = 1
        self.day = 1
        self.user_said = 0
        self._cursor = 0
        self._fired: set[int] = set()
        self._sim = None
        #: The task clock now (canonical UTC ISO); events with ``at`` fire once it reaches them.
        self.clock = at_time(self.spec.clock.isoformat(), self.spec)
        user = self.spec.user
        if user is not None and user.llm is not None and user_model is not None:
            from ..agents.user_sim import SimulatedUser

            self._sim = SimulatedUser(user.llm, self.spec.prompt, model=user_model.model,
                                      base_url=user_model.base_url, api_key=user_model.api_key,
                                      max_tokens=user_model.max_tokens, seed=user_model.seed)

    def _log(self, **entry: Any) -> None:
        self.traj.conversation.append(entry)

    async def start(self) -> None:
        """Before the first request: day 1's start events, and those due at the start clock."""
        self._log(kind="user", turn=1, day=1, source="prompt", message=len(self.traj.messages) - 1)
        await self._fire_due(TurnEnd(), start_of_day=True)

    async def after_turn(self, reply: str | None, called: set[str]) -> str | None:
        """The agent ended its turn with ``reply``: record the boundary, fire what is due,
        and give the next user message (None: the episode is over)."""
        end = TurnEnd(reply=reply, called=called, evidence=await self._boundary())
        await self._fire(end, lambda e: e.after_turn == self.turn)
        message = await self._user_says(end)
        if message is not None:
            self.turn += 1
            self._log(kind="user", turn=self.turn, day=self.day, message=len(self.traj.messages), **message[1])
            return message[0]
        if self.day <= len(self.spec.days):
            self.day += 1
            day = self.spec.days[self.day - 2]
            await self._act("world", [{"clock": at_time(day.clock, self.spec)}], kind="day", day=self.day)
            await self._fire_due(end, start_of_day=True)
            self.turn += 1
            self._log(kind="user", turn=self.turn, day=self.day, source="day", message=len(self.traj.messages))
            return day.prompt
        return None

    # ------------------------------------------------------------------ the user
    async def _user_says(self, end: TurnEnd) -> tuple[str, dict[str, Any]] | None:
        user = self.spec.user
        if user is None or self.user_said >= user.max_turns:
            return None
        if self._sim is not None:
            got = await self._sim.reply(end.reply or "")
            self._log(kind="simulated_user", turn=self.turn, day=self.day, stop=got.stop, text=got.text, **got.record)
            if got.stop:
                return None
            self.user_said += 1
            return got.text, {"source": "llm", "model": got.record.get("model")}
        for n in range(self._cursor, len(user.turns)):
            t: UserTurn = user.turns[n]
            if t.day != self.day:
                if t.day > self.day:
                    break  # a later day's turns wait for that day
                continue
            if holds(t.when, end):
                self._cursor = n + 1
                if t.actions:
                    await self._act("user", [_action(a, self.spec) for a in t.actions], kind="user_actions",
                                    user_turn=n)
                self.user_said += 1
                return t.say, {"source": "scripted", "user_turn": n}
        return None

    # ------------------------------------------------------------------ the world
    async def _fire_due(self, end: TurnEnd, start_of_day: bool = False) -> None:
        clock = self.clock
        await self._fire(end, lambda e: (e.at is not None and at_time(e.at, self.spec) <= clock)
                         or (start_of_day and e.day == self.day and e.after_turn is None and e.at is None))

    async def _fire(self, end: TurnEnd, due: Any) -> None:
        for n, e in enumerate(self.spec.events):
            if n in self._fired or not due(e):
                continue
            self._fired.add(n)  # due once: an event whose condition fails is not retried
            name = e.id or f"event-{n}"
            if not holds(e.when, end):
                self._log(kind="event", id=name, turn=self.turn, day=self.day, fired=False)
                continue
            await self._act("world", [_action(a, self.spec) for a in e.actions], kind="event", id=name)
            if any(a.clock is not None for a in e.actions):
                await self._fire_due(end)

    async def _act(self, actor: str, actions: list[dict[str, Any]], **entry: Any) -> None:
        got = await self.sb.act(actor, actions)
        for a in actions:
            if "clock" in a:
                self.clock = a["clock"]
        self.traj._world.append({"actor": actor, "audit_count": got["audit_count"],
                                 "records": got["records"], "files": got["files"]})
        entry.setdefault("day", self.day)
        self._log(turn=self.turn, actor=actor, actions=actions, results=got["results"], **entry)
        failed = [r.get("error") for r in got["results"] if not r.get("ok")]
        if failed:
            log.warning("%s: %s actions failed: %s", self.spec.id, actor, "; ".join(map(str, failed)))

    async def _boundary(self) -> Evidence:
        ev = await self.sb.export_evidence(keep_jobs=True)  # background jobs run on into the next turn
        self.traj._boundaries.append({
            "turn": self.turn, "day": self.day, "audit_count": ev.audit_count, "state": ev.state_final,
            "workspace_tar": ev.workspace_tar, "workspace_sha256": hashlib.sha256(ev.workspace_tar).hexdigest()})
        self._log(kind="boundary", turn=self.turn, day=self.day, audit_count=ev.audit_count,
                  workspace_sha256=self.traj._boundaries[-1]["workspace_sha256"],
                  **({"state_hash": _hash(ev.state_final)} if ev.state_final is not None else {}),
                  **({"jobs": ev.meta["export"]["jobs"]} if ev.meta["export"].get("jobs") else {}))
        ev.meta["world"] = list(self.traj._world)
        return ev


def _hash(dump: dict[str, Any]) -> str:
    from ..formats import state_hash

    return state_hash(dump)
