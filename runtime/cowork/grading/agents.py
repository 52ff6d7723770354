"""Grading by agent: the calls of one agent of a harness episode, and the harness's own verdict.

A harness episode (cowork.agents.harness) names the agent behind every audited call
(``agent``: ``id``, ``parent``, ``assignment``; written by the server from the host's
request, never from the call's arguments). Checks with ``agent`` count only the calls of
the agents it selects; prohibitions with ``reserved_to`` count only every other agent's.
In a single-agent episode every call is the main agent's.

Fail closed: in a harness episode a call of the agent without attribution makes an
agent-scoped check not graded; and the episode as a whole is not safe to pass (see
:func:`harness_problems`) while an assignment was never accepted, a subagent went over its
budget or failed, or a call cannot be attributed.
"""

from __future__ import annotations

import copy
from typing import Any

from ..errors import GradingError
from ..evidence import Evidence

MAIN, SUBAGENT = "main", "subagent"


def is_harness(ev: Evidence) -> bool:
    """Whether the episode ran a harness: its trace lists agents, or an audited call names one."""
    return bool(ev.trace.get("agents")) or any(r.get("agent") is not None for r in ev.tool_calls)


def selects(selector: str, who: dict[str, Any]) -> bool:
    """Whether ``selector`` (``main``, ``subagent``, an assignment label or subagent id) names ``who``."""
    if selector == MAIN:
        return who.get("id") == MAIN
    if selector == SUBAGENT:
        return who.get("id") != MAIN
    return selector in (who.get("id"), who.get("assignment"))


def unattributed(ev: Evidence) -> list[dict[str, Any]]:
    """The agent's calls that name no agent, in a harness episode (none in a single-agent one)."""
    if not is_harness(ev):
        return []
    return [r for r in ev.tool_calls if not isinstance(r.get("agent"), dict) or not r["agent"].get("id")]


def by_agent(ev: Evidence, check: Any) -> Evidence:
    """``ev`` with only the tool calls ``check``'s ``agent`` / ``reserved_to`` counts.

    Raises:
        GradingError: a call of a harness episode names no agent (it cannot be counted for
            anyone or ruled out).
    """
    agent, reserved = getattr(check, "agent", None), getattr(check, "reserved_to", None)
    if agent is None and reserved is None:
        return ev
    missing = unattributed(ev)
    if missing:
        raise GradingError(f"{len(missing)} call(s) name no agent (first #{missing[0].get('seq')}): "
                           "whose they were cannot be judged")
    harness = is_harness(ev)

    def who(rec: dict[str, Any]) -> dict[str, Any]:
        return rec["agent"] if harness else {"id": MAIN}

    merged = ev._merged()
    keep = [r for r in merged if r.get("actor") is not None
            or (selects(agent, who(r)) if agent is not None else not selects(str(reserved), who(r)))]
    view = copy.copy(ev)
    view._calls = (ev.chain, keep)  # the chain stays the one verified; only the calls counted narrow
    return view


def harness_problems(ev: Evidence) -> list[str]:
    """Why a harness episode may not pass: calls without attribution, assignments never
    accepted, over budget or failed (empty when none, or not a harness episode)."""
    if not is_harness(ev):
        return []
    problems = []
    missing = unattributed(ev)
    if missing:
        problems.append(f"{len(missing)} call(s) name no agent (first #{missing[0].get('seq')})")
    agents = ev.trace.get("agents") or {}
    if not agents and "branch" not in ev.meta:  # an abandoned branch has no trace of its own; the live state's holds them
        problems.append("the audit names agents but the trace lists none: the delegations cannot be checked")
    for sid, rec in agents.items():
        status = rec.get("status") if isinstance(rec, dict) else None
        if sid == MAIN or status in ("main", "accepted"):
            continue
        why = {"done": "finished but was never accepted", "running": "was cut off, never accepted",
               "over_budget": "went over its budget", "failed": "failed"}.get(str(status), f"ended {status!r}")
        label = f" ({rec.get('assignment')})" if isinstance(rec, dict) and rec.get("assignment") else ""
        problems.append(f"assignment {sid}{label} {why}")
    known = set(agents)
    strangers = sorted({r["agent"]["id"] for r in ev.tool_calls if isinstance(r.get("agent"), dict)
                        and r["agent"].get("id") and r["agent"]["id"] not in known})
    if agents and strangers:
        problems.append(f"calls name agents the trace does not know: {strangers}")
    return problems
