"""A reference coworker harness: a main agent that delegates to subagents, and the coordinator.

The main agent is any :class:`~cowork.agents.base.Policy` (scripted, hf, openai, vllm). It
gets the task's tools plus three of the harness's own:

- ``delegate``: an assignment (``task`` text), the ``tools`` the subagent may use (a subset
  of the task's), a ``max_turns`` and ``max_tokens`` budget and an optional ``label``;
  answers the new assignment's id at once, the subagent runs in the background;
- ``await_result``: waits for an assignment (``id``) or for whichever ends first, and
  returns its status and final reply (the feedback pending for the main agent);
- ``accept``: takes a finished assignment's result as part of the work.

Subagents are Policies made by a factory, one per assignment, each with its own message
list and only its granted tools, in the same sandbox, several at once (``max_parallel``
asyncio tasks). The :class:`Coordinator` keeps the delegation tree, each assignment's
state (running, done, accepted, over_budget, failed) and enforces budgets.

Every sandbox call carries the calling agent's identity (``main`` or the subagent's id,
its parent and assignment label, and its grant) in the request's ``_meta``, never in the
tool's arguments: the server writes it into the audit records and refuses, and audits as
``tool_denied`` (``not granted``), any tool outside the grant, so grading can tell who did
what (docs/harness.md). The episode loop (cowork.episode.run) finds the coordinator through
:meth:`HarnessPolicy.attach`; the harness knows the sandbox only as something with
``call_tool(name, args, agent=...)``.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict

from ..errors import CoworkError, PolicyError
from .base import AssistantTurn, Policy, ToolCall

#: The main agent's id in the audit and the trajectory.
MAIN = "main"
DELEGATE, AWAIT, ACCEPT = "delegate", "await_result", "accept"
HARNESS_TOOLS = (DELEGATE, AWAIT, ACCEPT)

SUBAGENT_SYSTEM = ("You are a subagent of a coworker. Do exactly the assignment below with the tools you were "
                   "given, then reply with a short report of what you found or did. Do nothing else.")

Status = Literal["main", "running", "done", "accepted", "over_budget", "failed"]


class AgentRecord(BaseModel):
    """One agent of a harness episode, as the trajectory keeps it (``Trajectory.agents``)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """``main``, or the subagent's id (``sub-1``, ...)."""
    parent: str | None = None
    """The agent that delegated the assignment (None for the main agent)."""
    assignment: str | None = None
    """The assignment's label (the delegate call's ``label``), if it had one."""
    status: Status
    """``main`` for the main agent (its conversation is ``Trajectory.messages``); for a
    subagent: ``running`` (cut off when the episode ended), ``done`` (it replied; never
    accepted), ``accepted``, ``over_budget`` (stopped at its turn or token budget), ``failed``."""
    task: str = ""
    """The assignment text."""
    tools: list[str] = []
    """The tools granted (the main agent: every tool of the task)."""
    max_turns: int = 0
    max_tokens: int = 0
    turns: int = 0
    tokens: int = 0
    """Tokens its turns took (the backend's count; a scripted policy's text / 4)."""
    result: str | None = None
    """Its final reply."""
    error: str | None = None
    denied: list[str] = []
    """Tools it asked for outside its grant (each refused and audited as ``tool_denied``)."""
    messages: list[dict[str, Any]] = []
    """Its own conversation (OpenAI chat format)."""
    steps: list[dict[str, Any]] = []
    """Its tool calls as the host saw them (``tool``, ``args``, ``is_error``, ``output``)."""
    main_turns: list[int] = []
    """Per turn of this subagent, the main agent's turn (1-based) during which it began: the
    turn whose completion change its work shows in (turn-level credit per agent, cowork.export.rl)."""
    token_trajectory: dict[str, Any] | None = None
    """A subagent's token ids, logprobs and loss mask (``TokenTrajectory`` dumped), when its
    backend keeps them (hf, vllm, vllm-server); the main agent's is ``Trajectory.tokens``."""


@dataclass
class Assignment:
    """What a subagent factory is told about the subagent it makes."""

    id: str
    task: str
    tools: list[str]
    label: str | None
    max_turns: int
    max_tokens: int


@dataclass
class CallResult:
    """A tool call's answer as the episode records it (the fields of sandbox.ToolResult it reads)."""

    tool: str
    args: dict[str, Any]
    is_error: bool
    text: str
    duration_ms: float = 0.0


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required}}}


def harness_tools() -> list[dict[str, Any]]:
    """The harness's own tools, in OpenAI function-tool format."""
    return [
        _fn(DELEGATE, "Hand an assignment to a new subagent that works in the same workspace with only the tools you "
            "grant it; returns its id at once while it works. Collect its report with await_result, then accept it.",
            {"task": {"type": "string", "description": "The assignment, complete on its own."},
             "tools": {"type": "array", "items": {"type": "string"}, "description": "Tools it may use."},
             "max_turns": {"type": "integer", "description": "Most turns it may take."},
             "max_tokens": {"type": "integer", "description": "Most tokens it may generate."},
             "label": {"type": "string", "description": "A short name for the assignment."}},
            ["task", "tools"]),
        _fn(AWAIT, "Wait for a subagent's assignment to end (by id, or whichever ends first) and get its report.",
            {"id": {"type": "string"}, "timeout_s": {"type": "number"}}, []),
        _fn(ACCEPT, "Accept a finished assignment's report as part of your work.", {"id": {"type": "string"}}, ["id"]),
    ]


def turn_tokens(turn: AssistantTurn) -> int:
    """Tokens a turn took: the backend's count when it gives one, else its text's length / 4."""
    usage = turn.extra.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        return usage["completion_tokens"]
    if isinstance(turn.extra.get("tokens"), int):
        return turn.extra["tokens"]
    text = (turn.content or "") + "".join(c.name + json.dumps(c.arguments) for c in turn.tool_calls)
    return math.ceil(len(text) / 4)


@dataclass
class _Sub:
    """A running or finished assignment: its record, grant and task."""

    record: AgentRecord
    identity: dict[str, Any]
    task: asyncio.Task | None = None
    reported: bool = False
    #: Set when its run has ended, whatever ended it (before the coordinator is told).
    finished: bool = False


@dataclass
class Coordinator:
    """The harness's runtime for one episode: delegation tree, assignment states, pending
    feedback, budgets; routes the main agent's calls (see the module's docstring).

    Args:
        sandbox: What tools are called on: ``call_tool(name, args, agent=identity)``.
        factory: Makes the policy of each new subagent from its :class:`Assignment`.
        sandbox_tools: The task's tools (OpenAI format) as the sandbox listed them.
        max_parallel: Subagents working at once (the others wait their turn).
        max_subagents: Assignments per episode.
        max_turns: Largest turn budget an assignment may get (and the default).
        max_tokens: Largest token budget an assignment may get (and the default).
    """

    sandbox: Any
    factory: Callable[[Assignment], Policy]
    sandbox_tools: list[dict[str, Any]]
    max_parallel: int = 4
    max_subagents: int = 16
    max_turns: int = 20
    max_tokens: int = 16000
    subs: dict[str, _Sub] = field(default_factory=dict)
    main_turn: int = 0
    """The main agent's turns so far (its current one while it works; :class:`HarnessPolicy` counts them)."""
    _slots: asyncio.Semaphore | None = None
    _ended: asyncio.Event | None = None
    _calls: set[asyncio.Future] = field(default_factory=set)
    """Subagents' tool calls in flight (shielded: see :meth:`close`)."""

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.max_parallel)
        self._ended = asyncio.Event()
        self.served = {t["function"]["name"] for t in self.sandbox_tools}
        self.main_identity = {"id": MAIN, "parent": None, "assignment": None, "tools": None}

    @property
    def tools(self) -> list[dict[str, Any]]:
        """What the main agent is offered: the task's tools and the harness's own."""
        return [*self.sandbox_tools, *harness_tools()]

    # ------------------------------------------------------------------ the main agent's calls
    async def call(self, call: ToolCall) -> CallResult:
        """Run one of the main agent's calls: a harness tool here, any other in the sandbox as ``main``.

        A harness call the coordinator refuses (bad arguments, an unknown id, a grant of a tool
        the task lacks) is the main agent's tool error, not an exception.

        Raises:
            PolicyError: the subagent factory failed (the run's setup, not the agent's mistake).
            SandboxError: the sandbox stopped answering (as for any call).
        """
        if call.name not in HARNESS_TOOLS:
            return await self.sandbox.call_tool(call.name, call.arguments, agent=self.main_identity)
        t0 = time.perf_counter()
        try:
            if call.name == DELEGATE:
                answer = self._delegate(call.arguments)
            elif call.name == AWAIT:
                answer = await self._await(call.arguments)
            else:
                answer = self._accept(call.arguments)
            text, is_error = json.dumps(answer), False
        except _Refused as exc:
            text, is_error = str(exc), True
        return CallResult(call.name, call.arguments, is_error, text, (time.perf_counter() - t0) * 1000)

    def _delegate(self, args: dict[str, Any]) -> dict[str, Any]:
        task, grant, label = args.get("task"), args.get("tools"), args.get("label")
        if not isinstance(task, str) or not task.strip():
            raise _Refused("delegate needs `task`: the assignment's text")
        if not isinstance(grant, list) or not all(isinstance(t, str) for t in grant):
            raise _Refused("delegate needs `tools`: a list of tool names the subagent may use")
        unknown = sorted(set(grant) - self.served)
        if unknown:
            raise _Refused(f"cannot grant {unknown}: not tools of this task (grantable: {sorted(self.served)})")
        if label is not None and (not isinstance(label, str) or not label or len(label) > 64):
            raise _Refused("label must be a short non-empty string")
        if label in (MAIN, "subagent") or (isinstance(label, str) and re.fullmatch(r"sub-\d+", label)):
            # Graders select calls by these names (grading.agents): a label must not pass for an agent.
            raise _Refused(f"label {label!r} is reserved: main, subagent and sub-<n> name agents")
        if len(self.subs) >= self.max_subagents:
            raise _Refused(f"no more delegations: this episode allows {self.max_subagents}")
        turns = self._budget(args.get("max_turns"), self.max_turns, "max_turns")
        tokens = self._budget(args.get("max_tokens"), self.max_tokens, "max_tokens")
        sid = f"sub-{len(self.subs) + 1}"
        tools = sorted(set(grant))
        record = AgentRecord(id=sid, parent=MAIN, assignment=label, status="running", task=task, tools=tools,
                             max_turns=turns, max_tokens=tokens)
        sub = _Sub(record, {"id": sid, "parent": MAIN, "assignment": label, "tools": tools})
        try:
            policy = self.factory(Assignment(sid, task, tools, label, turns, tokens))
        except Exception as exc:  # noqa: BLE001 - a setup failure of the run, not the main agent's mistake
            raise PolicyError(f"the subagent factory failed for {sid}: {exc!r}") from exc
        self.subs[sid] = sub
        sub.task = asyncio.ensure_future(self._run(sub, policy))
        return {"id": sid, "status": "running", "tools": tools, "max_turns": turns, "max_tokens": tokens}

    @staticmethod
    def _budget(value: Any, cap: int, name: str) -> int:
        if value is None:
            return cap
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= cap:
            raise _Refused(f"{name} must be an integer from 1 to {cap}")
        return value

    async def _await(self, args: dict[str, Any]) -> dict[str, Any]:
        sid, timeout = args.get("id"), args.get("timeout_s")
        if timeout is not None and (not isinstance(timeout, (int, float)) or timeout < 0):
            raise _Refused("timeout_s must be a number of seconds")
        if sid is not None:
            sub = self._sub(sid)
            wanted = [sub]
        else:
            wanted = [s for s in self.subs.values() if not s.reported]
            if not wanted:
                raise _Refused("nothing to await: every assignment's report was already returned")
        assert self._ended is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            ended = [s for s in wanted if s.finished]
            if ended:
                sub = ended[0]
                sub.reported = True
                r = sub.record
                return {"id": r.id, "label": r.assignment, "status": r.status, "result": r.result,
                        "error": r.error, "turns": r.turns, "tokens": r.tokens}
            self._ended.clear()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return {"id": sid, "status": "running", "result": None}
            try:
                await asyncio.wait_for(self._ended.wait(), left)
            except asyncio.TimeoutError:
                pass

    def _accept(self, args: dict[str, Any]) -> dict[str, Any]:
        sub = self._sub(args.get("id"))
        if sub.record.status != "done":
            raise _Refused(f"{sub.record.id} is {sub.record.status}: only a finished (done) assignment can be accepted")
        sub.record.status = "accepted"
        return {"id": sub.record.id, "status": "accepted"}

    def _sub(self, sid: Any) -> _Sub:
        if not isinstance(sid, str) or sid not in self.subs:
            raise _Refused(f"no assignment {sid!r} (known: {sorted(self.subs)})")
        return self.subs[sid]

    # ------------------------------------------------------------------ a subagent's run
    async def _run(self, sub: _Sub, policy: Policy) -> None:
        """Let the subagent work until it replies, fails, or spends its budget."""
        r = sub.record
        r.messages = [{"role": "system", "content": SUBAGENT_SYSTEM}, {"role": "user", "content": r.task}]
        tools = [t for t in self.sandbox_tools if t["function"]["name"] in r.tools]
        assert self._slots is not None and self._ended is not None
        try:
            async with self._slots:
                await self._work(sub, policy, tools)
        except PolicyError as exc:
            r.status, r.error = "failed", f"policy error: {exc}"
        except asyncio.CancelledError:
            r.status, r.error = "failed", "cut off: the episode ended while it was working"
            raise
        except CoworkError as exc:
            r.status, r.error = "failed", str(exc)
        finally:
            tokens = getattr(policy, "token_trajectory", None)
            if callable(tokens):
                kept = tokens()
                r.token_trajectory = kept.model_dump() if kept is not None else None
            sub.finished = True
            self._ended.set()

    async def _work(self, sub: _Sub, policy: Policy, tools: list[dict[str, Any]]) -> None:
        r = sub.record
        while True:
            if r.turns >= r.max_turns:
                r.status, r.error = "over_budget", f"turn budget of {r.max_turns} spent"
                return
            r.turns += 1
            r.main_turns.append(self.main_turn)
            turn = await policy.act(r.messages, tools)
            r.tokens += turn_tokens(turn)
            msg: dict[str, Any] = {"role": "assistant", "content": turn.content}
            if turn.tool_calls:
                msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                    "name": c.name, "arguments": json.dumps(c.arguments)}} for c in turn.tool_calls]
            r.messages.append(msg)
            if r.tokens > r.max_tokens:  # nothing of an over-budget turn runs
                r.status, r.error = "over_budget", f"token budget of {r.max_tokens} spent ({r.tokens})"
                return
            if not turn.tool_calls:
                r.status, r.result = "done", turn.content or ""
                return
            for c in turn.tool_calls:
                res = await self._sub_call(sub, c)
                r.steps.append({"turn": r.turns, "call_id": c.id, "tool": c.name, "args": res.args,
                                "is_error": res.is_error, "output": res.text})
                r.messages.append({"role": "tool", "tool_call_id": c.id,
                                   "content": ("ERROR: " if res.is_error else "") + res.text})

    async def _sub_call(self, sub: _Sub, call: ToolCall) -> Any:
        """A subagent's call, in the sandbox under its identity and grant.

        A tool outside the grant is refused here too; it is still sent, so the server
        writes its ``tool_denied`` record (the attempt is evidence) and runs nothing.
        """
        # Shielded: a subagent cut off mid-call leaves the call to finish, so its result is in the
        # audit log before the evidence is exported (close() waits for it), never after.
        inner = asyncio.ensure_future(self.sandbox.call_tool(call.name, call.arguments, agent=sub.identity))
        self._calls.add(inner)
        inner.add_done_callback(self._calls.discard)
        res = await asyncio.shield(inner)
        if call.name not in sub.record.tools:
            sub.record.denied.append(call.name)
            if not res.is_error:
                raise CoworkError(f"the sandbox ran {call.name!r}, which {sub.record.id} was not granted "
                                  "(an image without grant enforcement?)")
            return CallResult(call.name, call.arguments, True,
                              f"Tool {call.name!r} was not granted to you; nothing was done.", res.duration_ms)
        return res

    # ------------------------------------------------------------------ the end
    async def close(self) -> None:
        """Stop the subagents still working (the episode is over): they end ``failed``, cut off."""
        running = [s.task for s in self.subs.values() if s.task is not None and not s.task.done()]
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        if self._calls:  # calls the cut-off subagents had in flight (each bounded by the tool timeout)
            await asyncio.gather(*list(self._calls), return_exceptions=True)
        for sub in self.subs.values():  # cancelled before its first step ran: it never set a status
            if sub.record.status == "running":
                sub.record.status, sub.record.error = "failed", "cut off: the episode ended before it began"

    def records(self, main_tools: list[str]) -> dict[str, AgentRecord]:
        """Every agent of the episode: ``main`` first, then each subagent."""
        main = AgentRecord(id=MAIN, status="main", tools=sorted(main_tools))
        return {MAIN: main, **{sid: s.record for sid, s in self.subs.items()}}


class _Refused(Exception):
    """A harness tool call the coordinator refuses (the main agent's mistake: a tool error)."""


class HarnessPolicy:
    """The harness as a Policy: the main agent acts; the episode routes its calls through a
    :class:`Coordinator` made by :meth:`attach` (see the module's docstring).

    Args:
        main: The main agent.
        subagents: Makes each subagent's policy from its :class:`Assignment` (a fresh one per
            assignment: a subagent's context is its own).
        max_parallel: Subagents working at once.
        max_subagents: Assignments per episode.
        max_turns: Largest (and default) turn budget of an assignment.
        max_tokens: Largest (and default) token budget of an assignment.
    """

    def __init__(self, main: Policy, subagents: Callable[[Assignment], Policy], *, max_parallel: int = 4,
                 max_subagents: int = 16, max_turns: int = 20, max_tokens: int = 16000):
        self.main = main
        self.subagents = subagents
        self.name = f"harness:{main.name}"
        self.max_parallel, self.max_subagents = max_parallel, max_subagents
        self.max_turns, self.max_tokens = max_turns, max_tokens
        self.coordinator: Coordinator | None = None

    def attach(self, sandbox: Any, tools: list[dict[str, Any]]) -> Coordinator:
        """A fresh coordinator for an episode in ``sandbox`` whose task offers ``tools``."""
        self.coordinator = Coordinator(sandbox, self.subagents, tools, max_parallel=self.max_parallel,
                                       max_subagents=self.max_subagents, max_turns=self.max_turns,
                                       max_tokens=self.max_tokens)
        return self.coordinator

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        """The main agent's next turn (the coordinator counts it: a subagent's turns record the
        main turn they began in, for turn-level credit per agent)."""
        if self.coordinator is not None:
            self.coordinator.main_turn += 1
        return await self.main.act(messages, tools)

    def reset(self) -> None:
        """Start over (an episode retried on a fresh sandbox)."""
        reset = getattr(self.main, "reset", None)
        if callable(reset):
            reset()
        self.coordinator = None

    def token_trajectory(self) -> Any:
        """The main agent's token trajectory, when its backend keeps one."""
        tokens = getattr(self.main, "token_trajectory", None)
        return tokens() if callable(tokens) else None

    @property
    def sampling(self) -> Any:
        """The main agent's sampling settings, when it has them."""
        return getattr(self.main, "sampling", None)


__all__ = ["AgentRecord", "Assignment", "Coordinator", "HarnessPolicy", "HARNESS_TOOLS", "MAIN", "harness_tools",
           "turn_tokens"]
