"""``record: {last_acted: ...}``: the record the agent's last successful call acted on.

"The report it submitted" is not "some report": an agent that submits a wrong report and
then a right one, or the other way round, is judged on the last. The record is read from the
audit log: the id the call's argument names (``arg``), or the records its audited service
actions changed. Where the audit cannot tell which call came last or what it touched (a
later call whose outcome is unknown, an argument cut for size, a change no single call
explains), the check is not graded rather than judged on a guess.
"""

from __future__ import annotations

from typing import Any

from ..errors import GradingError
from ..evidence import Evidence
from ..spec import checks as M
from .history import _cut, _pair


def _wanted(sel: M.LastActed, call: dict[str, Any]) -> bool:
    tool = str(call.get("tool", ""))
    return tool == sel.tool if sel.tool is not None else tool.startswith(f"{sel.service}_")


def _known(ev: Evidence, service: str, collection: str) -> set[str]:
    """Ids of the collection's records, seeded or final."""
    ids: set[str] = set()
    for state in (ev.state_before, ev.state_final):
        ids |= set(((state or {}).get(service) or {}).get(collection) or {})
    return ids


def selected(c: Any, ev: Evidence) -> tuple[set[str], str]:
    """The ids ``c.record`` selects in ``c``'s collection, and a phrase saying which they are.

    Raises:
        GradingError: the audit cannot tell which record the last call acted on.
    """
    sel: M.LastActed = c.record.last_acted
    what = sel.tool or f"{sel.service} tool"
    calls = [r for r in ev.tool_calls if _wanted(sel, r)]
    known = _known(ev, c.service, c.collection)
    chosen: dict[str, Any] | None = None
    ids: set[str] = set()
    if sel.arg is not None:
        for call in calls:
            args = call.get("args") or {}
            if call.get("outcome") == "ok" and isinstance(args, dict) and sel.arg in args:
                if _cut(call, sel.arg):
                    raise GradingError(f"{call.get('tool')} (seq {call.get('seq')}): its {sel.arg} was cut in "
                                       "the audit; which record it acted on cannot be told")
                chosen, ids = call, {str(args[sel.arg])}
    else:
        actions = [r for r in ev.chain.records if r.get("kind") == "service_action" and r.get("actor") is None
                   and r.get("service") == c.service and set(map(str, r.get("ids") or [])) & known]
        paired = _pair(ev, actions)
        by_call: dict[Any, set[str]] = {}
        for a in actions:
            owner = paired.get(a["seq"]) if isinstance(a.get("seq"), int) else None
            if owner is None:
                if _could_be_wanted(a, calls):
                    raise GradingError(f"{c.service} action {a.get('action')!r} (seq {a.get('seq')}) on "
                                       f"{', '.join(map(str, a.get('ids') or []))} cannot be tied to one call; which "
                                       f"record the last {what} call acted on cannot be told")
                continue
            by_call.setdefault(owner.get("seq"), set()).update(str(i) for i in a.get("ids") or [] if str(i) in known)
        for call in calls:
            if call.get("outcome") == "ok" and by_call.get(call.get("seq")):
                chosen, ids = call, by_call[call["seq"]]
    after = [r for r in calls if chosen is None or int(r.get("seq", 0)) > int(chosen.get("seq", 0))]
    unknown = [r for r in after if r.get("outcome") == "unknown"]
    if unknown:
        raise GradingError(f"{unknown[-1].get('tool')} (seq {unknown[-1].get('seq')}) has no recorded outcome (the "
                           f"server died mid-call): it may be the last {what} call that acted")
    if chosen is None:
        return set(), f"no successful {what} call acted on a {c.service}.{c.collection} record"
    return ids, f"the record the last {what} call (seq {chosen.get('seq')}) acted on: {', '.join(sorted(ids))}"


def _could_be_wanted(action: dict[str, Any], calls: list[dict[str, Any]]) -> bool:
    """Whether an action no single call explains could be a wanted call's: it comes after
    one of them began."""
    seq = action.get("seq")
    return isinstance(seq, int) and any(isinstance(c.get("call_seq"), int) and c["call_seq"] < seq for c in calls)
