"""Robustness: the share of injected failures the agent recovered from.

Only faults the agent saw as failures count: a 429 or 500 makes the call fail, and the agent
recovers by calling the same tool again, successfully, in a later, separate call. A latency
fault delays a call that then succeeds: there is nothing to recover from, so it is left out
of the denominator (counting it let every latency fault score as "recovered" with no action).
"""

from __future__ import annotations

from typing import Any

from ..evidence import Evidence

#: Fault kinds the agent sees as a failed call.
FAILURES = ("429", "500")


def _faulted_call(calls: list[dict[str, Any]], fault: dict[str, Any]) -> int | None:
    """Index in ``calls`` (the tool's calls in log order) of the call the fault failed.

    The fault record sits inside its call: before the call's record when a call is one record
    written at its end, after the call's start when start and result are separate records.
    """
    f = fault.get("seq", -1)
    after = [i for i, c in enumerate(calls) if c.get("seq", -1) > f and c.get("outcome") != "ok"]
    before = [i for i, c in enumerate(calls) if c.get("seq", -1) < f]
    if after and (not before or calls[before[-1]].get("outcome") == "ok"):
        return after[0]
    return before[-1] if before else (after[0] if after else None)


def robustness(ev: Evidence) -> tuple[float | None, list[str]]:
    """Share of injected failures after which the agent called the same tool again successfully.

    Returns:
        ``(None, notes)`` when no failure was injected (latency faults alone included), else the
        share and one line per fault.
    """
    faults = [r for r in ev.chain.records if r.get("kind") == "fault"]
    notes: list[str] = []
    counted = recovered = 0
    for f in faults:
        where = f"fault {f.get('fault')} on {f.get('tool')} at #{f.get('seq')}"
        if f.get("fault") not in FAILURES:
            notes.append(f"{where}: a delay, not a failure; not counted")
            continue
        calls = [c for c in ev.tool_calls if c.get("tool") == f.get("tool")]
        idx = _faulted_call(calls, f)
        ok = idx is not None and any(c.get("outcome") == "ok" for c in calls[idx + 1:])
        counted += 1
        recovered += ok
        notes.append(f"{where}: {'recovered' if ok else 'not recovered'}")
    return (recovered / counted if counted else None), notes
