"""What a TRL rollout said, as the conversation cowork grades: TRL's transcript of one rollout
(the prompt, then the assistant messages with their tool calls and the tool results) turned
into a :class:`~cowork.episode.trajectory.Trajectory`'s OpenAI-format messages.

TRL 1.16 gives the final reply, and every assistant text, only to reward functions (as
``completions``); an environment sees its tool calls and nothing else. The adapter's reward
function hands each environment its transcript, and this module reads it: assistant texts
become assistant messages (so ``answer`` checks see the reply), each tool call gets the id of
the call that reached the sandbox (so the trace and the audit log agree), and a call of the
user channel (see :data:`USER_TOOL`) becomes what it stands for: the agent's reply ending a
turn, then the user's answer as a user message.

Pure functions, no sandbox: the environment (``cowork.integrations.trl``) keeps the live log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: The name of the tool that carries the conversation in TRL episodes of multi-turn tasks:
#: TRL ends a rollout at the first reply without a tool call, so a user's answer (or a new
#: day's request) can only reach the model as a tool result.
USER_TOOL = "message_user"



def channel_note(tool: str = USER_TOOL) -> str:
    """What the model is told about the user channel (after the system prompt)."""
    return (f"In this session you talk to the user through the {tool} tool: send them your questions, and your "
            "report each time you have done what they asked, with it, and read their answer in its result. A reply "
            "without any tool call ends the whole session.")


def channel_tool(tool: str = USER_TOOL) -> dict[str, Any]:
    """The user channel as a tool dict (``name``, ``description``, ``input_schema``)."""
    return {"name": tool, "description": CHANNEL_DESCRIPTION, "input_schema": {
        "type": "object", "additionalProperties": False, "required": ["message"],
        "properties": {"message": {"type": "string", "description": MESSAGE_DESCRIPTION}}}}


CHANNEL_DESCRIPTION = ("Send the user a message and wait for their answer: ask what you need to know, or report "
                       "what you did once you have done what they asked. It returns the user's answer, a new "
                       "day's request, or that the conversation is over. A reply without any tool call ends the "
                       "whole session, so talk to the user with this tool.")
MESSAGE_DESCRIPTION = "What you tell the user: a question, or your report."
OVER = ("The user has nothing more to say: the conversation is over. End the session now with a reply without a "
        "tool call.")


def user_says(text: str, day: int | None = None, clock: str | None = None) -> str:
    """The user channel's result that carries the user's next message (or a new day's first)."""
    if day is not None:
        return f"A new day began (day {day}, the clock is now {clock}). The user writes:\n\n{text}"
    return f"The user answers:\n\n{text}"


@dataclass
class Said:
    """One call of the user channel that reached the environment, as it answered it."""

    message: str
    """What the agent told the user (its reply ending the turn)."""
    returned: str
    """The text the tool returned to the model."""
    answer: str | None = None
    """The user's message (or the new day's) that came back; None when the conversation was over."""


@dataclass
class Step:
    """One tool call that reached the sandbox (the environment's live log), for matching."""

    call_id: str
    tool: str
    returned: str
    """The text the tool returned to the model."""


@dataclass
class Transcript:
    """The rollout as cowork grades it."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    """OpenAI chat format: the prompt's messages, assistant (with ``tool_calls``), tool, user."""
    turns: int = 0
    """Assistant messages TRL generated (each is one generation: one turn of the policy)."""
    step_turns: dict[str, int] = field(default_factory=dict)
    """Call id of each call that reached the sandbox -> the turn that made it."""
    user_messages: list[int] = field(default_factory=list)
    """Index in ``messages`` of each user message the channel delivered, in order."""
    final_reply: str | None = None
    """The text of the last assistant message when it called no tool (the rollout's end);
    None when the rollout was cut while calling tools."""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _arguments(function: dict[str, Any]) -> dict[str, Any]:
    args = function.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return {}
    return args if isinstance(args, dict) else {}


def read_transcript(prompt: Any, completion: Any, steps: list[Step], said: list[Said],
                    user_tool: str | None = USER_TOOL) -> Transcript:
    """The conversation of one TRL rollout, matched to what reached its environment.

    Args:
        prompt: The rollout's prompt as TRL passes it to reward functions (its messages, or a
            string for a non-conversational dataset).
        completion: Its completion: TRL's messages after the prompt (assistant messages with
            ``tool_calls`` whose arguments are dicts, ``tool`` results in call order), or a string.
        steps: The tool calls that reached the sandbox, in order (a call TRL refused before it
            reached the tool, for bad arguments, is in the transcript only).
        said: The calls of the user channel that reached the environment, in order.
        user_tool: The user channel's name (None: no channel).
    """
    out = Transcript()
    if isinstance(prompt, str):
        out.messages.append({"role": "user", "content": prompt})
    else:
        out.messages += [dict(m) for m in prompt or [] if isinstance(m, dict)]
    if isinstance(completion, str):
        completion = [{"role": "assistant", "content": completion}]
    todo = [m for m in completion or [] if isinstance(m, dict) and m]
    next_step, next_said, made = 0, 0, 0
    i = 0
    while i < len(todo):
        m = todo[i]
        i += 1
        if m.get("role") != "assistant":
            # TRL adds nothing else between assistant messages; keep what it gave as it was.
            out.messages.append(dict(m))
            continue
        out.turns += 1
        calls = [c for c in m.get("tool_calls") or [] if isinstance(c, dict)]
        results: list[str | None] = []
        while i < len(todo) and todo[i].get("role") == "tool" and len(results) < len(calls):
            results.append(_text(todo[i].get("content")))
            i += 1
        results += [None] * (len(calls) - len(results))  # rolled back by TRL (over the length budget)
        content = _text(m.get("content"))
        if not calls:
            out.messages.append({"role": "assistant", "content": content})
            out.final_reply = content
            continue
        out.final_reply = None
        group: list[tuple[dict[str, Any], str | None]] = []  # (OpenAI call, its tool message)

        def flush() -> None:
            nonlocal content
            if not group and not content:
                return
            msg: dict[str, Any] = {"role": "assistant", "content": content or None}
            if group:
                msg["tool_calls"] = [c for c, _ in group]
            out.messages.append(msg)
            for c, result in group:
                if result is not None:
                    out.messages.append({"role": "tool", "tool_call_id": c["id"], "content": result})
            group.clear()
            content = ""

        for call, result in zip(calls, results):
            given = call.get("function")
            function: dict[str, Any] = given if isinstance(given, dict) else {}
            name, args = str(function.get("name") or call.get("name") or ""), _arguments(function)
            if (user_tool is not None and name == user_tool and next_said < len(said)
                    and result == said[next_said].returned):
                s = said[next_said]
                next_said += 1
                flush()
                out.messages.append({"role": "assistant", "content": s.message})
                if s.answer is not None:
                    out.user_messages.append(len(out.messages))
                    out.messages.append({"role": "user", "content": s.answer})
                continue
            step = steps[next_step] if next_step < len(steps) else None
            if step is not None and step.tool == name and step.returned == result:
                call_id = step.call_id
                out.step_turns[call_id] = out.turns
                next_step += 1
            else:  # refused before it reached the sandbox (TRL's error result), or cut away
                made += 1
                call_id = f"trl_call_{made}"
            group.append(({"id": call_id, "type": "function",
                           "function": {"name": name, "arguments": json.dumps(args)}}, result))
        flush()
    return out


def completion_from_log(log: list[tuple[str, Any]], user_tool: str | None = USER_TOOL) -> list[dict[str, Any]]:
    """A TRL-style completion rebuilt from an environment's own log, for an episode whose
    transcript never reached it (used outside TRL): one assistant message per call, no text.

    Args:
        log: ``("tool", (name, args, returned))`` and ``("user", Said)`` in the order they happened.
        user_tool: The user channel's name.
    """
    out: list[dict[str, Any]] = []
    for kind, item in log:
        if kind == "user":
            name, args, returned = user_tool, {"message": item.message}, item.returned
        else:
            name, args, returned = item
        out.append({"role": "assistant", "content": "",
                    "tool_calls": [{"type": "function", "function": {"name": name, "arguments": args}}]})
        out.append({"role": "tool", "name": name, "content": returned})
    return out


__all__ = ["CHANNEL_DESCRIPTION", "MESSAGE_DESCRIPTION", "OVER", "USER_TOOL", "Said", "Step", "Transcript",
           "channel_note", "channel_tool", "completion_from_log", "read_transcript", "user_says"]
