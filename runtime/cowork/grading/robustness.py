"""Robustness: did the agent recover from the injected failures on the calls the task needed.

Only faults the agent saw as failures count: a 429 or 500 makes the call fail. A latency
fault delays a call that then succeeds: there is nothing to recover from, so it is left out
(counting it let every latency fault score as "recovered" with no action).

Robustness could be farmed: spamming a read-only call until faults fire and retrying each
one scored 1.0 and drowned the real, unrecovered failures (a do-nothing agent earned 0.2 of
the score). So a failure counts only where the task needed the call, and the unit is the tool:

- **needed tools**: the tools the spec's oracle calls (any arguments). The oracle is the
  spec's proof of what the task takes, and it is on every spec; a fault on any other tool
  (a listing the task never needs) adds nothing. Judged without a spec, every tool counts.
- **one call, one failure**: calls are the same when tool and arguments are. A failure on
  a call that already succeeded earlier adds nothing (the agent had the result: repeating
  an identical read is not work), and repeated failures of one call count once.
- **recovered**: the same call (same tool, same arguments) succeeded after its last failure.
  A success with other arguments is other work: reading deal-201 does not recover a failed
  read of deal-210.
- **per tool**: a needed tool counts as recovered when every counted call of it was;
  robustness is the share of such tools among the needed tools that had a counted failure.
  Spamming new arguments on one tool cannot outweigh a failure left on it or on another.

The score itself is 0 when the completion is 0 (see grade.py): robustness never rewards an
agent that completed nothing.
"""

from __future__ import annotations

import json
from collections.abc import Collection
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


def _key(call: dict[str, Any]) -> str:
    """What makes two calls the same call: tool and arguments."""
    return json.dumps([call.get("tool"), call.get("args") or {}], sort_keys=True, default=str)


def _verdict(calls: list[dict[str, Any]], idx: int) -> str:
    """``repeat`` (the same call had already succeeded), ``recovered`` or ``lost``."""
    key = _key(calls[idx])
    same = [i for i, c in enumerate(calls) if _key(c) == key]
    if any(calls[i].get("outcome") == "ok" for i in same if i < idx):
        return "repeat"
    return "recovered" if any(calls[i].get("outcome") == "ok" for i in same if i > idx) else "lost"


def robustness(ev: Evidence, needed: Collection[str] | None = None, *, bonus: float | None = None,
               floor: float = 0.0) -> tuple[float | None, list[str]]:
    """Share of the needed tools whose every failed call (429/500) the agent made again, successfully.

    Args:
        ev: The evidence.
        needed: The tools the task needs (the spec's oracle tools); None counts every tool.
        bonus: What a run with no counted failure gets (the spec's ``scoring.robustness_bonus``);
            None: nothing, the run is scored on its completion alone.
        floor: The least a run with counted failures gets (``scoring.robustness_floor``). Fixed,
            not a share of successful calls, so that extra calls cannot raise it.

    Returns:
        ``(bonus, notes)`` when no failure counted (none injected, latency faults only, or only
        on calls the task did not need), else the share (at least ``floor``) and one line per fault.
    """
    notes: list[str] = []
    by_tool: dict[str, dict[str, bool]] = {}  # tool -> call key -> recovered
    for f in (r for r in ev.chain.records if r.get("kind") == "fault"):
        tool = str(f.get("tool"))
        where = f"fault {f.get('fault')} on {tool} at #{f.get('seq')}"
        if f.get("fault") not in FAILURES:
            notes.append(f"{where}: a delay, not a failure; not counted")
            continue
        if needed is not None and tool not in needed:
            notes.append(f"{where}: the task does not need {tool}; not counted")
            continue
        calls = [c for c in ev.tool_calls if c.get("tool") == tool]
        idx = _faulted_call(calls, f)
        verdict = "lost" if idx is None else _verdict(calls, idx)
        if verdict == "repeat":
            notes.append(f"{where}: a repeat of a call that had succeeded; not counted")
            continue
        key = "?" if idx is None else _key(calls[idx])
        calls_of_tool = by_tool.setdefault(tool, {})
        calls_of_tool[key] = calls_of_tool.get(key, True) and verdict == "recovered"
        notes.append(f"{where}: {'recovered' if verdict == 'recovered' else 'not recovered'}")
    if not by_tool:
        if bonus is not None:
            notes.append(f"no failure counted: the task's robustness bonus, {bonus:g}")
        return bonus, notes
    share = sum(all(keys.values()) for keys in by_tool.values()) / len(by_tool)
    if share < floor:
        notes.append(f"{share:g} recovered, raised to the task's robustness floor {floor:g}")
    return max(share, floor), notes
