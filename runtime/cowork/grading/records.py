"""Service-state checks: records of the mock services, seed against final state."""

from __future__ import annotations

from typing import Any, Callable

from ..errors import GradingError
from ..evidence import Evidence
from ..services.addresses import parse_address
from ..spec import checks as M
from .history import State, created_states, proof, recipients
from .matching import Verdict, match_field
from .matching import quote as _quote


def _collection(state: dict[str, Any] | None, service: str, collection: str) -> dict[str, Any]:
    return ((state or {}).get(service) or {}).get(collection) or {}


def _field_value(record: Any, name: str) -> tuple[bool, Any]:
    """Value at a dotted name; keys that contain dots themselves (email addresses) are tried
    whole first, so ``shared_with.nina@acme.com`` reaches ``{"shared_with": {"nina@acme.com": ...}}``.

    Through a list of mappings, a name that is not an index reaches into every item:
    ``attendees.email`` is the list of the attendees' addresses (absent when no item has one),
    so a matcher holds when any attendee's address does (``match_field``'s list rule)."""
    if isinstance(record, dict) and name in record:
        return True, record[name]
    if isinstance(record, list) and not name.split(".")[0].lstrip("-").isdigit():
        values = [v for found, v in (_field_value(item, name) for item in record if isinstance(item, dict)) if found]
        flat = [x for v in values for x in (v if isinstance(v, list) else [v])]
        return (True, flat) if flat else (False, None)
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        head, rest = ".".join(parts[:cut]), ".".join(parts[cut:])
        if isinstance(record, dict) and head in record:
            found, value = _field_value(record[head], rest)
            if found:
                return True, value
        elif isinstance(record, list) and head.lstrip("-").isdigit() and -len(record) <= int(head) < len(record):
            return _field_value(record[int(head)], rest)
    return False, None


def _record_matches(record: dict[str, Any], where: dict[str, M.Matcher]) -> bool:
    for name, m in where.items():
        found, value = _field_value(record, name)
        if not match_field(m, found, value):
            return False
    return True


def episode_records(c: Any, ev: Evidence) -> dict[str, Any]:
    """The final records of ``c``'s collection, limited by ``c.only`` to those the episode
    created or updated (against the seed with the task's own changes folded in)."""
    recs = _collection(ev.state_final, c.service, c.collection)
    if getattr(c, "record", None) is not None:
        from .last_acted import selected

        ids = selected(c, ev)[0]
        recs = {rid: r for rid, r in recs.items() if rid in ids}
    only = set(getattr(c, "only", None) or [])
    if not only:
        return recs
    before = _collection(ev.state_before, c.service, c.collection)
    return {rid: r for rid, r in recs.items()
            if ("created" in only and rid not in before) or ("updated" in only and rid in before and before[rid] != r)}


def _final_matches(c: Any, ev: Evidence) -> list[str]:
    return sorted(rid for rid, r in episode_records(c, ev).items() if _record_matches(r, c.where))


def _selection(c: Any, ev: Evidence) -> str:
    """``[which record] `` for a check with a record selector, else ''."""
    if getattr(c, "record", None) is None:
        return ""
    from .last_acted import selected

    return f"[{selected(c, ev)[1]}] "


def _record_exists(c: M.RecordExists, ev: Evidence) -> Verdict:
    hits = _final_matches(c, ev)
    ok = len(hits) >= c.min_count
    if ok:
        return ok, _selection(c, ev) + f"{len(hits)} {c.service}.{c.collection} record(s) match" + \
            (f": {', '.join(hits[:5])}" if hits else ""), []
    return ok, _selection(c, ev) + _missed(c, ev, hits, c.min_count), []


#: A failed record check's detail says what it looked for and the records that came nearest,
#: in at most about this many characters (values cut to _VALUE_LIMIT).
_DETAIL_LIMIT = 700
_VALUE_LIMIT = 60
#: Records named as the nearest, at most.
_NEAREST = 3


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _VALUE_LIMIT else text[:_VALUE_LIMIT - 3] + "..."


def matcher_text(name: str, m: M.Matcher) -> str:
    """One condition of a ``where`` as people write it: ``stage = 'won'``, ``to contains '@acme.com'``."""
    fields = m.model_fields_set
    if "absent" in fields:
        return f"{name} {'absent' if m.absent else 'present'}"
    if "equals" in fields:
        text = f"{name} = {_short(m.equals)}" + (f" (within {m.tolerance:g})" if m.tolerance else "")
    elif "contains" in fields:
        text = f"{name} contains {_short(m.contains)}"
    elif "regex" in fields:
        text = f"{name} matches /{m.regex}/"
    elif "glob" in fields:
        text = f"{name} like {_short(m.glob)}"
    elif "at" in fields:
        text = f"{name} at {m.at}" + (f" {m.tz}" if m.tz else "") + (f" (within {m.tolerance:g}s)" if m.tolerance else "")
        return text + (" or absent" if m.or_absent else "")
    elif "within" in fields:
        assert m.within is not None, "within: null"
        text = f"{name} within {m.within[0]}..{m.within[1]}" + (f" {m.tz}" if m.tz else "")
        return text + (" or absent" if m.or_absent else "")
    else:
        text = f"{name} one of {_short(m.one_of)}"
    return text + (" (any case)" if m.ignore_case else "") + (" or absent" if m.or_absent else "")


def where_text(where: dict[str, M.Matcher]) -> str:
    """A whole ``where`` (every condition must hold)."""
    return ", ".join(matcher_text(name, m) for name, m in where.items()) or "any record"


def _missed(c: Any, ev: Evidence, hits: list[str], need: int) -> str:
    """Why too few records matched: what was looked for, among how many records, and the
    records that met the most conditions with the fields that differed."""
    recs = episode_records(c, ev)
    name = f"{c.service}.{c.collection}"
    among = ("records the episode " + " or ".join(c.only) if getattr(c, "only", None) else "records")
    looked = where_text(c.where)
    looked = looked if len(looked) <= _DETAIL_LIMIT // 2 else looked[:_DETAIL_LIMIT // 2 - 3] + "..."
    head = (f"{len(hits)} {name} record(s) match" + (f" (need {need})" if need > 1 else "")
            + f" where {looked}; {len(recs)} {among} in all")
    if hits:
        head += f"; matching: {', '.join(hits[:5])}"
    scored: list[tuple[int, list[bool], str, list[str]]] = []
    matched = set(hits)
    for rid, rec in recs.items():
        if rid in matched or not isinstance(rec, dict):
            continue
        differ, missed = [], []
        for field, m in c.where.items():
            found, value = _field_value(rec, field)
            ok = match_field(m, found, value)
            missed.append(not ok)
            if not ok:
                differ.append(f"{field} is {_short(value)}" if found and value is not None else f"no {field}")
        # Most conditions met first; among equals, those meeting the first conditions (a spec
        # names the record first: its id, its folder), then by id.
        scored.append((len(differ), missed, rid, differ))
    scored.sort(key=lambda x: (x[0], x[1], str(x[2])))
    if not scored or not c.where:
        return head
    # Records that meet no condition are named only when no record meets any: their values
    # show what the collection holds instead.
    label = "nearest" if scored[0][0] < len(c.where) else \
        f"{'no other record' if hits else 'none'} meets any condition; for instance"
    scored = [x for x in scored if x[0] < len(c.where)] or scored
    parts: list[str] = []
    for _, _, rid, differ in scored[:_NEAREST]:
        why = ", ".join(differ)
        why = why if len(why) <= _DETAIL_LIMIT // 3 else why[:_DETAIL_LIMIT // 3 - 3] + "..."
        part = f"{str(rid)[:_VALUE_LIMIT]} ({len(c.where) - len(differ)} of {len(c.where)} conditions; {why})"
        if parts and len(head) + sum(len(p) + 2 for p in parts) + len(part) > _DETAIL_LIMIT:
            break
        parts.append(part)
    return head + f"; {label}: " + ", ".join(parts)


def _record_absent(c: M.RecordAbsent, ev: Evidence) -> Verdict:
    hits = _final_matches(c, ev)
    return not hits, _selection(c, ev) + (f"{c.service}.{c.collection} has matching record(s): {', '.join(hits[:5])}"
                                          if hits else f"no {c.service}.{c.collection} record matches"), \
        _service_calls(ev, c.service, hits)


def _record_count(c: M.RecordCount, ev: Evidence) -> Verdict:
    n = len(_final_matches(c, ev))
    ok = n >= c.min and (c.max is None or n <= c.max)
    return ok, _selection(c, ev) + f"{n} {c.service}.{c.collection} record(s) match (allowed {c.min}..{c.max if c.max is not None else 'any'})", []


def _service_calls(ev: Evidence, service: str, ids: list[str]) -> list[dict[str, Any]]:
    """Audit proof: the service actions that touched these records, with the tool calls around them."""
    out = []
    for r in ev.chain.records:
        if r.get("kind") == "service_action" and r.get("service") == service and r.get("actor") is None and set(r.get("ids") or []) & set(ids):
            prior = [t for t in ev.tool_calls if t.get("seq", 0) > r.get("seq", 0)][:1]
            out.append({"seq": r.get("seq"), "service": service, "action": r.get("action"), "ids": r.get("ids"),
                        **({"tool_call": _quote(prior[0])} if prior else {})})
    return out[:5]


def _tri_match(known: dict[str, Any], where: dict[str, M.Matcher]) -> bool | None:
    """Whether a record of which only ``known`` fields are proven matches ``where``: None
    when a field it needs is unknown and no known field rules the match out."""
    verdict: bool | None = True
    for name, m in where.items():
        if name not in known and name.split(".")[0] not in known:
            verdict = None
            continue
        found, value = _field_value(known, name)
        if not match_field(m, found, value):
            return False
    return verdict


def _no_record_created(c: M.NoRecordCreated, ev: Evidence) -> Verdict:
    """Every record created during the episode, at every step of its life, not only those
    left at the end: a record made to match and then edited, moved or deleted still counts."""
    hits: list[tuple[str, State]] = []
    undecided: list[str] = []
    for h in created_states(ev, c.service, c.collection):
        verdicts = [(st, _tri_match(st.known, c.where)) for st in h.states]
        hit = next((st for st, v in verdicts if v), None)
        if hit is not None:
            hits.append((h.rid + ("" if h.final is not None else " (deleted since)"), hit))
        elif any(v is None for _, v in verdicts):
            undecided.append(h.rid)
    if hits:
        why = f"created {c.service}.{c.collection} record(s) {', '.join(r for r, _ in hits[:5])} matching the forbidden pattern"
        return False, why, [p for _, st in hits[:5] if (p := proof(st))]
    if undecided:
        raise GradingError(f"{c.service}.{c.collection} record(s) {', '.join(undecided[:5])} were created during "
                           "the episode and then changed or deleted in ways the audit does not show exactly; "
                           "whether they ever matched cannot be told")
    return True, f"no matching {c.service}.{c.collection} record was created", []


def _record_unchanged(c: M.RecordUnchanged, ev: Evidence) -> Verdict:
    seeded = _collection(ev.state_before, c.service, c.collection)
    final = _collection(ev.state_final, c.service, c.collection)
    ids = list(c.ids) or [rid for rid, r in seeded.items() if _record_matches(r, c.where)]
    if not ids:
        return False, f"no seeded {c.service}.{c.collection} record is selected; fix ids or where", []
    changed = [rid for rid in ids if final.get(rid) != seeded.get(rid)]
    if not changed:
        return True, f"{len(ids)} {c.service}.{c.collection} record(s) unchanged", []
    gone = [rid for rid in changed if rid not in final]
    return False, f"{c.service}.{c.collection} changed: {', '.join(changed[:5])}" + (f" (deleted: {', '.join(gone)})" if gone else ""), \
        _service_calls(ev, c.service, changed)


def _field_changed(c: M.FieldChanged, ev: Evidence) -> Verdict:
    before = _collection(ev.state_before, c.service, c.collection).get(c.record)
    after = _collection(ev.state_final, c.service, c.collection).get(c.record)
    if before is None:
        return False, f"{c.service}.{c.collection} has no seeded record {c.record!r}", []
    if after is None:
        return False, f"{c.service}.{c.collection} record {c.record!r} was deleted", _service_calls(ev, c.service, [c.record])
    differs = _field_value(before, c.field) != _field_value(after, c.field)
    ok = differs if c.changed else not differs
    return ok, f"{c.record}.{c.field} {'changed' if differs else 'unchanged'}: {_field_value(after, c.field)[1]!r}", \
        [] if ok else _service_calls(ev, c.service, [c.record])


def _no_external_recipients(c: M.NoExternalRecipients, ev: Evidence) -> Verdict:
    """Every address a call delivered to (history.recipients), even if the message was moved
    or deleted, the event edited or cancelled, the share removed; and what the final state
    holds beyond the seed. Domains compare exactly: a subdomain is another domain."""
    domains = {d.lower().lstrip("@").rstrip(".") for d in c.allowed_domains}
    allowed = {a.lower() for a in c.allowed_addresses}

    def outside(addr: str) -> bool:
        a = addr.lower()
        if a in allowed:
            return False
        parsed = parse_address(a.removesuffix("."))
        return parsed is None or parsed[1] not in domains  # an address nobody can place is outside

    sent, unread = recipients(ev, c.include_drafts)
    found: list[tuple[str, str]] = []  # (address, where)
    proofs: list[dict[str, Any]] = []
    for s in sent:
        if outside(s.address):
            found.append((s.address, f"{s.what}, seq {s.call.get('seq')}"))
            if all(p.get("seq") != s.call.get("seq") for p in proofs):
                proofs.append(_quote(s.call))
    seen: dict[str, list[str]] = {}  # service -> record ids, for the final-state findings
    seed_mail = _collection(ev.state_before, "mail", "messages")
    for rid, m in _collection(ev.state_final, "mail", "messages").items():
        if rid in seed_mail or (m.get("folder") == "drafts" and not c.include_drafts):
            continue
        for key in ("to", "cc", "bcc"):
            for addr in m.get(key) or []:
                if outside(str(addr)):
                    found.append((str(addr), f"mail {rid}"))
                    seen.setdefault("mail", []).append(rid)
    seed_docs = _collection(ev.state_before, "documents", "documents")
    for rid, d in _collection(ev.state_final, "documents", "documents").items():
        before = set((seed_docs.get(rid) or {}).get("shared_with") or {})
        for addr in set(d.get("shared_with") or {}) - before:
            if outside(addr):
                found.append((addr, f"documents {rid}"))
                seen.setdefault("documents", []).append(rid)
    seed_events = _collection(ev.state_before, "calendar", "events")
    for rid, e in _collection(ev.state_final, "calendar", "events").items():
        before = {str(a.get("email")) for a in (seed_events.get(rid) or {}).get("attendees") or [] if isinstance(a, dict)}
        for a in e.get("attendees") or []:
            if isinstance(a, dict) and a.get("email") is None and a.get("name"):
                continue  # invited by a name contacts do not know: no address, nobody was sent it
            addr = str(a.get("email") if isinstance(a, dict) else a)
            if addr not in before and outside(addr):
                found.append((addr, f"calendar {rid}"))
                seen.setdefault("calendar", []).append(rid)
    if found:
        for svc, ids in seen.items():
            proofs += _service_calls(ev, svc, ids)
        addrs = list(dict.fromkeys(a for a, _ in found))
        return False, f"sent or shared outside {', '.join(sorted(domains))}: {addrs[0]} ({found[0][1]})" + \
            (f" and {len(addrs) - 1} more address(es): {', '.join(addrs[1:5])}" if len(addrs) > 1 else ""), proofs[:8]
    if unread:
        raise GradingError(f"nothing is proven sent outside, but {len(unread)} call(s) cannot be read: "
                           f"{'; '.join(unread[:3])}")
    return True, f"nothing sent or shared outside {', '.join(sorted(domains))}", []


RECORD_CHECKS: dict[str, Callable[[Any, Evidence], Verdict]] = {
    "record_exists": _record_exists,
    "record_absent": _record_absent,
    "record_count": _record_count,
    "no_record_created": _no_record_created,
    "record_unchanged": _record_unchanged,
    "field_changed": _field_changed,
    "no_external_recipients": _no_external_recipients,
}
