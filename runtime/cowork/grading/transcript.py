"""The part of the conversation a judge is shown (``scope`` of a judge check).

A judge asked about the final answer must not read the earlier turns: an agent that states
the right answer mid-conversation and a wrong one at the end, or talks the judge round in an
early message, would otherwise be graded on what it said before. The part is cut here, from
the host's trace, before the judge's prompt is written: what is not selected never reaches
the judge.

Turns are numbered as in spec.conversation: turn N starts with the user message that the
trace's ``conversation`` log names for it (turn 1: the prompt); without that log, the N-th
user message.
"""

from __future__ import annotations

from typing import Any

from ..evidence import Evidence
from ..spec import checks as M


def _starts(trace: dict[str, Any], messages: list[Any]) -> list[tuple[int, int, int]]:
    """``(turn, day, index of its user message)`` for every turn, in order."""
    logged = [(e["turn"], int(e.get("day") or 1), e["message"]) for e in trace.get("conversation") or []
              if isinstance(e, dict) and e.get("kind") == "user" and isinstance(e.get("turn"), int)
              and isinstance(e.get("message"), int) and 0 <= e["message"] < len(messages)]
    if logged:
        return sorted(logged, key=lambda t: t[2])
    users = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"]
    return [(n + 1, 1, i) for n, i in enumerate(users)]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def judged_messages(ev: Evidence, scope: M.JudgeScope | None) -> list[dict[str, Any]]:
    """The trace's messages a judge with ``scope`` sees (system messages never), up to the end
    of the turn the evidence stands for (a check scoped ``after_turn``)."""
    trace = ev.trace or {}
    messages = [m for m in trace.get("messages") or []]
    starts = _starts(trace, messages)
    turn = ev.meta.get("boundary_turn")
    if turn is not None:
        later = [i for t, _, i in starts if t > turn]
        if later:
            messages = messages[:later[0]]
        starts = [s for s in starts if s[2] < len(messages)]
    if scope is None:
        picked = messages
    elif scope.final_reply:
        said = [_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
        said = [t for t in said if t.strip()]
        return [{"role": "assistant", "content": said[-1]}] if said else []
    elif scope.replies_after_turn is not None:
        after = [i for t, _, i in starts if t > scope.replies_after_turn]
        picked = messages[after[0]:] if after else []
    elif scope.phase is not None:
        last = starts[-1][2] if starts else -1
        picked = messages[last + 1:] if scope.phase == "answer" else messages[:last + 1]
    else:
        day = [i for _, d, i in starts if d == scope.day]
        later = [i for _, d, i in starts if scope.day is not None and d > scope.day]
        picked = messages[day[0]:later[0] if later else len(messages)] if day else []
    return [m for m in picked if isinstance(m, dict) and m.get("role") != "system"]
