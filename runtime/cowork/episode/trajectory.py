"""What an episode leaves behind on the host: its tool calls (StepRecord) and the whole
conversation (Trajectory), and a trace rebuilt from the audit log of a session the host did
not drive."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr

from ..agents.tokens import TokenTrajectory
from ..evidence import Evidence

#: The agent name of a session an outside MCP client drove (``cowork up`` / ``cowork grade``).
OUTSIDE_AGENT = "mcp-client"


class StepRecord(BaseModel):
    """One tool call of the episode as the host saw it."""

    model_config = ConfigDict(extra="forbid")

    turn: int
    """Assistant turn (1-based) that made the call."""
    call_id: str
    """The policy's id for the call."""
    tool: str
    args: dict[str, Any]
    is_error: bool
    output: str
    """Text returned to the agent."""
    duration_ms: float


class Trajectory(BaseModel):
    """Everything that happened in an episode, in order."""

    model_config = ConfigDict(extra="forbid")

    task: str
    agent: str
    status: Literal["completed", "truncated", "max_turns", "timeout", "policy_error", "agent_broke_sandbox",
                    "infra_error"]
    """How it ended: the agent finished, it was cut short by a length limit (``truncated``:
    its last turn hit the token limit without a tool call, or the conversation outgrew the
    model's context; see ``stop_reason``), it ran out of turns or time, the policy failed,
    the agent broke its own sandbox (server killed, memory filled, a tool hung for good), or
    the infrastructure failed (Docker, the host). ``truncated`` and ``max_turns`` episodes
    are graded on their evidence and rewarded like any other: dropping them would hide
    looping or over-long behaviour from the gradient."""
    stop_reason: Literal["length", "context_length", "max_turns"] | None = None
    """What cut the episode short: ``length`` (the last turn reached ``max_tokens``),
    ``context_length`` (the next prompt no longer fit the model's context), ``max_turns``;
    None when nothing did."""
    messages: list[dict[str, Any]] = []
    """The conversation in OpenAI chat format (system, user, assistant, tool)."""
    tools: list[dict[str, Any]] = []
    """The tools the agent was offered, in OpenAI function-tool format (for SFT exports)."""
    steps: list[StepRecord] = []
    turns: int = 0
    duration_s: float = 0.0
    error: str | None = None
    turn_progress: list[float] | None = None
    """With ``turn_progress``: completion of the deterministic checks before the first turn
    and after each assistant turn (p_0..p_T), for turn-level credit (see cowork.rollouts.rewards)."""
    tokens: TokenTrajectory | None = None
    """Token ids, logprobs and loss mask of the episode, from policies that keep them
    (``token_trajectory()``: the hf, vllm and vllm-server backends)."""
    surrogates_replaced: bool = False
    """True when the model wrote lone surrogates (JSON allows ``\\ud800``; UTF-8 cannot hold
    it) and they were replaced by U+FFFD here and in the grade, to save the episode: the
    same replacement and flag as the audit log's ``tool_call`` records."""
    agents: dict[str, dict[str, Any]] = {}
    """A harness episode (agents.harness): each agent by id, ``main`` first, each an
    ``AgentRecord`` (``parent``, ``assignment``, ``status``, its own ``messages`` and
    ``steps``, budgets); the main agent's conversation is ``messages``. Empty otherwise."""
    conversation: list[dict[str, Any]] = []
    """Multi-turn tasks: what the task did around the agent, in order. ``kind`` is ``user``
    (a user message: ``turn``, ``day``, ``message`` = its index in ``messages``, ``source``
    = prompt / scripted / llm / day), ``simulated_user`` (the user model's answer, with the
    model and settings), ``user_actions`` and ``event`` and ``day`` (actions run as the user
    or the world, with their results), ``boundary`` (the state when the agent ended a turn)."""

    # default=[] (pydantic copies it per instance), not default_factory=list: for a factory
    # pydantic reads the builtin's text signature on every instance (~0.3 ms each).
    _world: list[dict[str, Any]] = PrivateAttr(default=[])
    _boundaries: list[dict[str, Any]] = PrivateAttr(default=[])

    def user_message_indices(self) -> list[int]:
        """Indices in ``messages`` of the user messages that came after the first request
        (a simulated or scripted user, a new day)."""
        return [e["message"] for e in self.conversation if e.get("kind") == "user" and e.get("turn", 1) > 1]


def audit_trace(ev: Evidence, task: str) -> dict[str, Any]:
    """A trace in the shape of an episode's (``Trajectory.model_dump()``), rebuilt from the
    audit log of a session the host did not drive.

    Each call the client made (the agent's, not the task's own actors'), in the order it was
    made, becomes an assistant message with one tool call and the tool message that answered
    it (as audited: long results were cut to their first 8 KiB), and a step. There is no
    system prompt, no user message and no assistant text: checks on the agent's reply find
    none and fail. A refused call (tool_denied) is there as the error the client got.
    """
    def call_seq(rec: dict[str, Any]) -> int:
        seq = rec.get("call_seq")
        return seq if isinstance(seq, int) else -1

    calls = sorted(ev.tool_calls, key=call_seq)
    messages: list[dict[str, Any]] = []
    steps: list[StepRecord] = []
    for n, rec in enumerate(calls, start=1):
        call_id = f"audit-{rec.get('call_seq')}"
        given = rec.get("args")
        args: dict[str, Any] = given if isinstance(given, dict) else {}
        ok = rec.get("outcome") == "ok"
        text = str(rec.get("result") if ok else rec.get("error") or f"(outcome {rec.get('outcome')})")
        if not ok and rec.get("kind") == "tool_denied":
            text = f"denied: {text}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": str(rec.get("tool")), "arguments": json.dumps(args)}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": ("" if ok else "ERROR: ") + text})
        steps.append(StepRecord(turn=n, call_id=call_id, tool=str(rec.get("tool")), args=args, is_error=not ok,
                                output=text, duration_ms=float(rec.get("duration_ms") or 0.0)))
    traj = Trajectory(task=task, agent=OUTSIDE_AGENT, status="completed", messages=messages, steps=steps,
                      turns=len(calls))
    return {**traj.model_dump(), "source": "audit"}
