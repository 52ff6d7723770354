"""What the episode did to service records, read from the audit rather than the final state.

Two questions a final-state dump cannot answer, because the agent can move, edit, cancel or
delete what it did before the dump is taken:

- whom did it send, forward, reply, share or invite to (:func:`recipients`);
- which records did it create, and what did each hold at every step of its life
  (:func:`created_states`).

Both are read from the audited ``tool_call`` arguments (the content as the agent gave it)
and the ``service_action`` records (which ids changed, which fields). Where the audit does
not hold a value exactly, it is left unknown, never guessed: callers fail closed on it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..evidence import Evidence
from .matching import quote


def _coll(state: dict[str, Any] | None, service: str, collection: str) -> dict[Any, Any]:
    # Keyed by record id, but looked up by values straight from the audit (Any, maybe None).
    return ((state or {}).get(service) or {}).get(collection) or {}


def _cut(call: dict[str, Any], *names: str) -> bool:
    """Whether the audit kept only part of these arguments (or none at all)."""
    for c in call.get("cut") or []:
        path = str(c.get("path", ""))
        if path == "/args" or any(path == f"/args/{n}" or path.startswith(f"/args/{n}/") for n in names):
            return True
    return False


def _addresses(value: Any) -> list[str]:
    """An address argument as the tool reads it: one string is a list of one. Values that are
    not strings are kept as text, so that they count as addresses nobody can place."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:  # a JSON list sent as a string, which the server's argument parsing may unpack
            value = json.loads(value)
        except ValueError:
            pass
    items = value if isinstance(value, list) else [] if value is None else [value]
    return [v.lower() if isinstance(v, str) else json.dumps(v, default=str) for v in items]


# --------------------------------------------------------------------------- recipients
@dataclass
class Sent:
    """One address an audited call sent, forwarded, replied, shared or invited to."""

    address: str
    call: dict[str, Any]
    what: str


#: Tools that deliver to the addresses in these arguments. Drafts only count when asked for.
_SENDS = {"mail_send": ("to", "cc", "bcc"), "mail_forward": ("to",), "documents_share": ("email",),
          "calendar_create_event": ("attendees",), "calendar_update_event": ("attendees",)}


def _invited_by_name(ev: Evidence) -> dict[Any, dict[str, str | None]]:
    """For calendar calls that named attendees (not addresses): the call's seq -> each stored
    attendee's name (case and spaces aside) -> the address it resolved to (None: kept as a name,
    nobody invited by mail). Read from the ``values`` the service recorded with its action."""
    actions = [r for r in ev.chain.records if r.get("kind") == "service_action" and r.get("service") == "calendar"
               and isinstance((r.get("values") or {}).get("attendees"), list)]
    out: dict[Any, dict[str, str | None]] = {}
    for seq, call in _pair(ev, actions).items():
        action = next(a for a in actions if a.get("seq") == seq)
        out[call.get("seq")] = {" ".join(str(a.get("name") or "").split()).casefold(): a.get("email")
                                for a in action["values"]["attendees"] if isinstance(a, dict)}
    return out


def _message(ev: Evidence, rid: Any) -> dict[str, Any] | None:
    """A mail message as it was when the agent acted on it: the fields a reply reads
    (mailbox, from, to, cc) never change once a message exists."""
    if not isinstance(rid, str):
        return None
    for state in (ev.state_final, ev.state_before):
        m = _coll(state, "mail", "messages").get(rid)
        if m is not None:
            return m
    for h in created_states(ev, "mail", "messages"):
        if h.rid == rid and h.states and all(k in h.states[0].known for k in ("mailbox", "from", "to", "cc")):
            return h.states[0].known
    return None


def _reply_to(m: dict[str, Any], reply_all: bool) -> tuple[list[str], list[str]]:
    """To and cc of a reply, as mail_reply computes them."""
    box = m.get("mailbox")
    to = list(m.get("to") or []) if m.get("from") == box else [m.get("from")]
    cc = [a for a in list(m.get("to") or []) + list(m.get("cc") or []) if a != box and a not in to] if reply_all else []
    return [str(a) for a in to], [str(a) for a in cc]


def recipients(ev: Evidence, include_drafts: bool = False) -> tuple[list[Sent], list[str]]:
    """Every address a call delivered to, whatever became of the message, event or share.

    A call counts unless its outcome is ``error`` (the tool refused): ``unknown`` (the server
    died mid-call) counts as delivered.

    Returns:
        The deliveries, in call order, and what could not be read (arguments cut in the audit,
        a reply to a message the evidence no longer holds): the caller must not call the
        episode clean while that list is not empty.
    """
    out: list[Sent] = []
    unread: list[str] = []
    seed_events = _coll(ev.state_before, "calendar", "events")
    sends = dict(_SENDS, **({"mail_draft": ("to", "cc")} if include_drafts else {}))
    by_name: dict[Any, dict[str, str | None]] | None = None
    for call in ev.tool_calls:
        tool, args = call.get("tool"), call.get("args") or {}
        if call.get("outcome") == "error" or not isinstance(args, dict):
            continue
        if tool in sends:
            names = sends[tool]
            if _cut(call, *names):
                unread.append(f"{tool} (seq {call.get('seq')}): its recipients were cut from the audit")
                continue
            if tool == "documents_share" and args.get("role") == "none":
                continue  # removes access
            before: set[str] = set()
            if tool == "calendar_update_event":  # the seeded attendees were invited before the episode
                ev_ = seed_events.get(args.get("event_id")) or {}
                before = {str(a.get("email", "")).lower() for a in ev_.get("attendees") or [] if isinstance(a, dict)}
            for name in names:
                for addr in _addresses(args.get(name)):
                    if tool.startswith("calendar_") and "@" not in addr:
                        # A name the service looked up in contacts: what it invited is in the
                        # action's values. Without them the name stays, an address nobody can place.
                        by_name = _invited_by_name(ev) if by_name is None else by_name
                        resolved = by_name.get(call.get("seq"))
                        key = " ".join(addr.split()).casefold()
                        if resolved is not None and key in resolved:
                            email = resolved[key]
                            if email is None:
                                continue  # kept as a name: no one was sent an invitation
                            addr = email.lower()
                    if addr not in before:
                        out.append(Sent(addr, call, f"{tool} {name}"))
        elif tool == "mail_reply":
            if _cut(call, "message_id", "reply_all"):
                unread.append(f"mail_reply (seq {call.get('seq')}): its arguments were cut from the audit")
                continue
            m = _message(ev, args.get("message_id"))
            if m is None:
                unread.append(f"mail_reply (seq {call.get('seq')}): message {args.get('message_id')!r} "
                              "is in neither the seed nor the final state, so its recipients are unknown")
                continue
            to, cc = _reply_to(m, bool(args.get("reply_all")))
            out += [Sent(a.lower(), call, "mail_reply to") for a in to] + \
                   [Sent(a.lower(), call, "mail_reply cc") for a in cc]
        elif tool == "chat_send_dm" and isinstance(args.get("user"), str) and "@" in args["user"]:
            out.append(Sent(args["user"].lower(), call, "chat_send_dm user"))
        elif tool == "tickets_comment" and not args.get("internal", False):
            # A public comment reaches the ticket's requester (the comment tool says so).
            t = _coll(ev.state_final, "tickets", "tickets").get(args.get("ticket_id")) \
                or _coll(ev.state_before, "tickets", "tickets").get(args.get("ticket_id"))
            if t is None:
                unread.append(f"tickets_comment (seq {call.get('seq')}): ticket {args.get('ticket_id')!r} is unknown")
            elif t.get("requester"):
                out.append(Sent(str(t["requester"]).lower(), call, "tickets_comment (public) to the requester"))
    return out, unread


# --------------------------------------------------------------------------- created records
@dataclass
class State:
    """A record's fields after one action; ``known`` holds only what the evidence proves."""

    known: dict[str, Any]
    action: dict[str, Any]
    call: dict[str, Any] | None


@dataclass
class History:
    """A record created during the episode, step by step from its creation."""

    rid: str
    states: list[State] = field(default_factory=list)
    final: dict[str, Any] | None = None


#: Which collection the n-th id of an action names, where an action names records of several.
_ID_COLLECTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("tickets", "comment"): ("tickets", "comments"),
    ("chat", "post"): ("messages", "channels"),
    ("chat", "send_dm"): ("messages", "channels"),
    ("documents", "create"): ("documents", "versions"),
    ("documents", "edit"): ("documents", "versions"),
    ("documents", "delete"): ("documents", "versions"),
}


def _id_collection(service: str, action: str, pos: int) -> str | None:
    cols = _ID_COLLECTIONS.get((service, action))
    if cols is None:
        return None
    return cols[min(pos, len(cols) - 1)]


def _pair(ev: Evidence, actions: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The tool call behind each service action (by seq), where exactly one fits: the call
    began before the action and ended after it (or never ended), on the same service."""
    calls = [c for c in ev.tool_calls if isinstance(c.get("seq"), int)]
    out: dict[int, dict[str, Any]] = {}
    for a in actions:
        seq, svc = a.get("seq"), a.get("service")
        if not isinstance(seq, int):
            continue
        same = [c for c in calls if str(c.get("tool", "")).startswith(f"{svc}_")]
        spans = [c for c in same if isinstance(c.get("call_seq"), int) and c["call_seq"] < seq]
        around = [c for c in spans if c["seq"] > seq and c.get("outcome") != "unknown"]
        if not around:  # a call the server never finished
            around = [c for c in spans if c.get("outcome") == "unknown"]
        if not around:  # single-record calls (older logs, probes): the first call after the action
            around = [c for c in same if c["seq"] > seq][:1]
        if len(around) == 1:
            out[seq] = around[0]
    return out


def _cut_names(call: dict[str, Any]) -> set[str] | None:
    """Names of the arguments the audit kept only in part; None when it kept none at all."""
    names: set[str] = set()
    for c in call.get("cut") or []:
        path = str(c.get("path", ""))
        if path == "/args":
            return None
        if path.startswith("/args/"):
            names.add(path.split("/")[2])
    return names


def _exact(out: dict[str, Any], call: dict[str, Any]) -> dict[str, Any]:
    """``out`` without the fields drawn from arguments the audit cut (field names are the
    argument names; a ticket's status follows its assignee, a reply's fields its message)."""
    cut = _cut_names(call)
    if cut is None or "message_id" in cut or "reply_all" in cut:
        return {}
    if "assignee" in cut:
        cut.add("status")
    return {k: v for k, v in out.items() if k not in cut}


def _lower(v: Any) -> Any:
    return v.lower() if isinstance(v, str) else v


def _created(service: str, collection: str, call: dict[str, Any] | None, ev: Evidence) -> dict[str, Any]:
    """The fields a create call set exactly, from its audited arguments (empty: unknown)."""
    if call is None:
        return {}
    out = _creation(service, collection, call, ev)
    if (call.get("args") or {}).get("attachments"):
        out.pop("attachments", None)  # files attached from the workspace: their entries are the server's
    return _exact(out, call)


def _creation(service: str, collection: str, call: dict[str, Any], ev: Evidence) -> dict[str, Any]:
    tool, a = call.get("tool"), call.get("args") or {}
    if (service, collection) == ("mail", "messages"):
        base: dict[str, Any] = {"cc": [], "bcc": [], "attachments": [], "in_reply_to": None}
        if a.get("mailbox") is not None:
            base["mailbox"] = base["from"] = _lower(a["mailbox"])
        if tool == "mail_send":
            return {**base, "folder": "sent", "to": _addresses(a.get("to")), "cc": _addresses(a.get("cc")),
                    "bcc": _addresses(a.get("bcc")), "subject": a.get("subject"), "body": a.get("body")}
        if tool == "mail_draft":
            return {**base, "folder": "drafts", "to": _addresses(a.get("to")), "cc": _addresses(a.get("cc")),
                    "subject": a.get("subject", ""), "body": a.get("body", ""), "in_reply_to": a.get("in_reply_to")}
        src = _coll(ev.state_final, "mail", "messages").get(a.get("message_id")) \
            or _coll(ev.state_before, "mail", "messages").get(a.get("message_id"))
        if tool == "mail_forward":
            out = {"folder": "sent", "to": _addresses(a.get("to")), "cc": [], "bcc": [], "in_reply_to": a.get("message_id")}
            if src is not None:
                quoted = f"{a.get('body', '')}\n\n---------- Forwarded message ----------\nFrom: {src.get('from')}\n" \
                         f"Date: {src.get('date')}\nSubject: {src.get('subject')}\n\n{src.get('body')}"
                out.update(subject=f"Fwd: {src.get('subject')}", body=quoted.lstrip("\n"),
                           attachments=src.get("attachments"), mailbox=src.get("mailbox"), **{"from": src.get("mailbox")})
            return out
        if tool == "mail_reply":
            out = {"folder": "sent", "body": a.get("body"), "bcc": [], "attachments": [], "in_reply_to": a.get("message_id")}
            if src is not None:
                to, cc = _reply_to(src, bool(a.get("reply_all")))
                subj = str(src.get("subject", ""))
                out.update(to=to, cc=cc, subject=subj if subj.lower().startswith("re:") else f"Re: {subj}",
                           mailbox=src.get("mailbox"), **{"from": src.get("mailbox")})
            return out
    if (service, collection, tool) == ("tickets", "tickets", "tickets_create"):
        out = {"title": a.get("title"), "description": a.get("description", ""), "priority": a.get("priority", "normal"),
               "assignee": _lower(a.get("assignee")), "tags": list(a.get("tags") or []),
               "status": "new" if a.get("assignee") is None else "open", "resolution": None}
        if a.get("requester") is not None:
            out["requester"] = _lower(a["requester"])
        return out
    if (service, collection, tool) == ("calendar", "events", "calendar_create_event"):
        return {"title": a.get("title"), "location": a.get("location", ""), "description": a.get("description", ""),
                "status": "confirmed",
                "attendees": [{"email": e, "name": "", "response": "needs_action"}
                              for e in dict.fromkeys(_addresses(a.get("attendees")))]}
    if (service, collection, tool) == ("todo", "tasks", "todo_create"):
        return {"title": a.get("title"), "notes": a.get("notes", ""), "priority": a.get("priority", "normal"),
                "tags": list(a.get("tags") or []), "done": False, "completed": None}
    return {}


def _changed(service: str, collection: str, action: dict[str, Any], call: dict[str, Any] | None,
             before: dict[str, Any]) -> dict[str, Any]:
    """The values a later call set exactly (only for the fields its action says changed)."""
    if call is None:
        return {}
    tool, a, name = call.get("tool"), call.get("args") or {}, action.get("action")
    out: dict[str, Any] = {}
    if service == "mail":
        if tool == "mail_move" and name == "move":
            out["folder"] = a.get("folder")
        elif tool == "mail_delete" and name == "trash":
            out["folder"] = "trash"
        elif tool == "mail_mark_read":
            out["read"] = bool(a.get("read", True))
    elif (service, collection) == ("tickets", "tickets"):
        if tool == "tickets_update":
            for k in ("status", "priority", "title"):
                if a.get(k) is not None:
                    out[k] = a[k]
            if a.get("tags") is not None:
                out["tags"] = list(a["tags"])
            if a.get("assignee") is not None:
                out["assignee"] = None if a["assignee"] == "none" else _lower(a["assignee"])
        elif tool == "tickets_close":
            out.update(status="closed", resolution=a.get("resolution"))
    elif (service, collection) == ("calendar", "events"):
        if tool == "calendar_cancel_event":
            out["status"] = "cancelled"
        elif tool == "calendar_update_event":
            for k in ("title", "location", "description"):
                if a.get(k) is not None:
                    out[k] = a[k]
            if a.get("attendees") is not None and "attendees" in before:
                old = {x.get("email"): x for x in before["attendees"] or [] if isinstance(x, dict)}
                out["attendees"] = [old.get(e, {"email": e, "name": "", "response": "needs_action"})
                                    for e in dict.fromkeys(_addresses(a["attendees"]))]
    elif (service, collection) == ("todo", "tasks") and tool == "todo_update":
        for k in ("title", "notes", "priority"):
            if a.get(k) is not None:
                out[k] = a[k]
    return {k: v for k, v in _exact(out, call).items() if k in set(action.get("fields") or [])}


def created_states(ev: Evidence, service: str, collection: str) -> list[History]:
    """Every record of ``service.collection`` created during the episode, with its states.

    A record counts as created when a service action names an id the seed does not hold in
    this collection, unless the id is another collection's (a comment of a ticket, the
    version of a document). Records in the final state that no action names (evidence built
    by hand) are created too, with their final state as their only one.

    Each state holds a field when the evidence proves its value at that step: from the
    creating call's arguments, from a later call that set it, from the ``values`` the service
    recorded with its action (an event's stored start and end), or from the final state for
    every step after the last action that changed it. Everything else is unknown.
    """
    seed = _coll(ev.state_before, service, collection)
    final = _coll(ev.state_final, service, collection)
    others = {rid for state in (ev.state_before, ev.state_final)
              for coll, recs in ((state or {}).get(service) or {}).items() if coll != collection for rid in recs}
    actions = [r for r in ev.chain.records if r.get("kind") == "service_action" and r.get("service") == service and r.get("actor") is None]
    calls: dict[Any, dict[str, Any]] = _pair(ev, actions)  # looked up by the audit's "seq", whatever it holds
    steps: dict[str, list[dict[str, Any]]] = {}
    for a in actions:
        for pos, rid in enumerate(a.get("ids") or []):
            if not isinstance(rid, str) or rid in seed:
                continue
            where = _id_collection(service, str(a.get("action")), pos)
            ours = rid in final or (where == collection if where is not None else rid not in others)
            if ours:
                steps.setdefault(rid, []).append(a)
    for rid in final:
        if rid not in seed:
            steps.setdefault(rid, [])
    out = []
    for rid, acts in steps.items():
        h = History(rid, final=final.get(rid))
        known: dict[str, Any] = {}
        last: dict[str, int] = {}
        for k, a in enumerate(acts):
            call = calls.get(a.get("seq"))
            if k == 0:
                known = _created(service, collection, call, ev)
                fields = None  # every field
            else:
                fields = set(a.get("fields") or [])
                new = _changed(service, collection, a, call, known)
                known = {f: v for f, v in known.items() if f not in fields}
                known.update(new)
            # Fields the service recorded as stored (a start given in a local zone, kept in UTC).
            known.update({f: v for f, v in (a.get("values") or {}).items() if fields is None or f in fields})
            for f in (h.final or {}):
                if fields is None or f in fields:
                    last[f] = k
            if a.get("action") == "delete" and k > 0:
                break  # gone: no state after this one
            h.states.append(State(known, a, call))
        if h.final is not None:
            if not h.states:
                h.states.append(State({}, {}, None))
            for k, st in enumerate(h.states):
                st.known = {**st.known, **{f: v for f, v in h.final.items() if last.get(f, 0) <= k}}
        out.append(h)
    return out


def proof(state: State) -> dict[str, Any]:
    """The audit records that show a state: the service action and the call behind it."""
    a = state.action
    out = {"seq": a.get("seq"), "service": a.get("service"), "action": a.get("action"), "ids": a.get("ids")} if a else {}
    if state.call is not None:
        out["tool_call"] = quote(state.call)
    return out
