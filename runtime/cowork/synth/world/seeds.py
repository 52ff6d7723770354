"""Service seeds from a world: one function per service, each writing the records that
service's ``*Seed`` model takes, as seen by one person (the viewer: whose mailbox, whose
calendar, who "the user" is)."""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from .base import iso
from .comms import occurrences
from .files import text_of
from .model import Person, WorldData
from .ops import FOLDERS
from .texts import CATEGORIES

Seed = dict[str, Any]
_CONTENT_TYPES = {"xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                  "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                  "pdf": "application/pdf"}


def _email(w: WorldData, pid: str | None) -> str | None:
    return w.get(pid).email if pid else None


def mail(w: WorldData, me: Person) -> Seed:
    """The viewer's mailbox: every message they sent or received (BCC included, and shown only
    to its sender and to the blind-copied viewer); a reply whose parent the viewer never got
    keeps no ``in_reply_to``."""
    files = {f.path: f for f in w.files}
    messages = []
    kept: set[str] = set()
    for thread in w.threads:
        for m in thread.messages:
            if me.email not in (m.sender, *m.to, *m.cc, *m.bcc):
                continue
            sent = m.sender == me.email
            old = (w.clock - m.at).days > 10
            rec: dict[str, Any] = {
                "id": m.id, "folder": "sent" if sent else ("archive" if old else "inbox"), "thread_id": thread.id,
                "from": m.sender, "to": list(m.to), "cc": list(m.cc),
                "bcc": list(m.bcc) if sent else [me.email] if me.email in m.bcc else [],
                "subject": m.subject, "body": m.body, "date": iso(m.at), "read": sent or old,
                "attachments": [{"name": posixpath.basename(p), "content_type": _CONTENT_TYPES[files[p].kind],
                                 "text": text_of(files[p].kind, files[p].data)} for p in m.attachments],
                "labels": list(m.labels)}
            if m.in_reply_to in kept:
                rec["in_reply_to"] = m.in_reply_to
            kept.add(m.id)
            messages.append(rec)
    return {"mailboxes": [{"address": me.email, "name": me.name}], "messages": messages}


def calendar(w: WorldData, me: Person) -> Seed:
    """The viewer's calendar in their time zone: every occurrence of each meeting they organise
    or attend, with everyone's responses."""
    events = []
    for m in w.meetings:
        if me.id != m.organizer and me.id not in m.attendees:
            continue
        attendees = [{"email": w.get(a).email, "name": w.get(a).name,
                      "response": "declined" if a in m.declined else "accepted"} for a in m.attendees]
        for eid, start, end in occurrences(m):
            events.append({"id": eid, "calendar_id": "primary", "title": m.title, "start": iso(start), "end": iso(end),
                           "time_zone": m.tz, "location": m.location, "description": m.description,
                           "organizer": w.get(m.organizer).email, "attendees": attendees,
                           "status": "cancelled" if m.cancelled else "confirmed"})
    return {"user": me.email, "calendars": [{"id": "primary", "name": me.name, "time_zone": me.tz}], "events": events}


def contacts(w: WorldData, me: Person) -> Seed:
    """The address book: the company and every real outside organisation (look-alikes are not
    in it), employees with title, department, office, manager and assistant, and outside contacts."""
    orgs = [o for o in w.orgs if o.kind != "lookalike"]
    people = []
    for p in w.people:
        notes = [f"Reports to {w.get(p.manager).name}." if p.manager else "",
                 f"Assistant: {w.get(p.assistant).name}." if p.assistant else "",
                 f"Working hours {p.work_start // 60:02d}:{p.work_start % 60:02d}-{p.work_end // 60:02d}:"
                 f"{p.work_end % 60:02d} {p.tz}."]
        people.append({"id": p.id, "name": p.name, "email": p.email, "phone": p.phone, "title": p.title,
                       "org_id": w.company, "department": p.department, "location": w.get(p.office).city,
                       "notes": " ".join(n for n in notes if n)})
    real = {o.id for o in orgs}
    people += [{"id": x.id, "name": x.name, "email": x.email, "phone": x.phone, "title": x.title, "org_id": x.org}
               for x in w.externals if x.org in real]
    return {"orgs": [{"id": o.id, "name": o.name, "domain": o.domain, "industry": o.industry, "address": o.address,
                      "phone": o.phone} for o in orgs], "people": people}


def documents(w: WorldData, me: Person) -> Seed:
    """The drive: policy documents (current text, earlier versions in the history, the draft
    apart), project plans."""
    docs = [{"id": d.id, "title": d.title, "content": d.text, "folder_id": d.folder, "owner": _email(w, d.owner),
             "shared_with": {w.get(pid).email: role for pid, role in d.shared_with}, "visibility": d.visibility,
             "modified": iso(d.modified),
             "history": [{"content": text, "author": _email(w, who), "at": iso(at)} for text, who, at in d.history]}
            for d in w.documents]
    return {"user": me.email, "folders": [{"id": fid, "name": name} for fid, name in FOLDERS], "documents": docs}


def _agents(w: WorldData) -> list[str]:
    return [p.email for p in w.people if p.department in ("IT", "Customer Success")]


def tickets(w: WorldData, me: Person) -> Seed:
    """The helpdesk: IT and customer-success staff are its agents."""
    return {"user": me.email, "agents": [a for a in _agents(w) if a != me.email], "tickets": [
        {"id": t.id, "title": t.title, "description": t.description, "status": t.status, "priority": t.priority,
         "requester": t.requester, "requester_name": t.requester_name, "department": t.department,
         "category": t.category, "assignee": _email(w, t.assignee), "tags": list(t.tags), "created": iso(t.created),
         "comments": [{"author": c.author, "body": c.body, "internal": c.internal, "at": iso(c.at)} for c in t.comments]}
        for t in w.tickets]}


def crm(w: WorldData, me: Person) -> Seed:
    """Accounts (named after their organisation), contacts, deals and the activity history."""
    accounts, contacts = [], []
    for a in w.accounts:
        org = w.get(a.org)
        accounts.append({"id": a.id, "name": org.name, "domain": org.domain, "industry": org.industry,
                         "owner": _email(w, a.owner), "tier": a.tier, "status": a.status, "revenue": a.revenue,
                         "currency": a.currency, "last_contact": iso(a.last_contact), "notes": a.notes})
        for cid in a.contacts:
            x = w.get(cid)
            contacts.append({"id": x.id, "account_id": a.id, "name": x.name, "email": x.email, "title": x.title,
                             "phone": x.phone})
    return {"user": me.email, "accounts": accounts, "contacts": contacts,
            "deals": [{"id": d.id, "account_id": d.account, "name": d.name, "stage": d.stage, "amount": d.amount,
                       "currency": d.currency, "close_date": d.close_date.isoformat(), "owner": _email(w, d.owner)}
                      for d in w.deals],
            "activities": [{"id": x.id, "kind": x.kind, "subject": x.subject, "notes": x.notes,
                            "account_id": x.account, "contact_id": x.contact, "deal_id": x.deal, "at": iso(x.at),
                            "by": _email(w, x.by)} for x in w.activities]}


def chat(w: WorldData, me: Person) -> Seed:
    """Everyone on the chat by handle; channels, direct messages, threads and reactions."""
    handle = {p.id: p.handle for p in w.people}
    return {"user": me.handle,
            "users": [{"id": p.handle, "name": p.name, "email": p.email, "title": p.title} for p in w.people],
            "channels": [{"id": c.id, "name": c.name, "topic": c.topic, "kind": c.kind, "private": c.private,
                          "members": [handle[m] for m in c.members]} for c in w.channels],
            "messages": [{"id": m.id, "channel_id": m.channel, "author": handle[m.author], "text": m.text,
                          "ts": iso(m.at), "thread_id": m.thread,
                          "reactions": {emoji: [handle[h] for h in who] for emoji, who in m.reactions}}
                         for m in w.chat]}


def kb(w: WorldData, me: Person) -> Seed:
    """Knowledge-base pages, and an offline web page for each real outside organisation."""
    web = [{"url": f"https://{o.domain}/about", "title": f"About {o.name}",
            "text": f"{o.name} works in {o.industry}. Address: {o.address}. Phone: {o.phone}."}
           for o in w.orgs if o.kind in ("customer", "vendor", "auditor", "recruiter")]
    return {"user": me.email, "web": web, "pages": [
        {"id": a.id, "title": a.title, "body": a.body, "space": a.space, "tags": list(a.tags),
         "author": _email(w, a.author), "updated": iso(a.updated)} for a in w.kb]}


def expenses(w: WorldData, me: Person) -> Seed:
    """The current expense policy (its limits and text), every claim, the card feed and the reports."""
    policy = next(p for p in w.policies if p.id == "pol-expenses")
    current = next(v for v in policy.versions if v.status == "current")
    doc = w.get(current.document)
    limits = _limits_from(doc.text, [c for c, _, _ in CATEGORIES])
    return {"user": me.email,
            "policy": {"currency": _currency(w), "limits": limits,
                       "receipt_over": _receipt_over(doc.text), "text": doc.text},
            "expenses": [{"id": e.id, "employee": _email(w, e.employee), "amount": e.amount, "currency": e.currency,
                          "category": e.category, "merchant": e.merchant, "date": e.day.isoformat(),
                          "description": e.description, "receipt": e.receipt, "status": e.status,
                          "approver": _email(w, e.approver)} for e in w.expenses],
            "transactions": [{"id": t.id, "date": t.day.isoformat(), "amount": t.amount, "currency": t.currency,
                              "merchant": t.merchant, "category": t.category, "account": t.account, "memo": t.memo}
                             for t in w.transactions],
            "reports": [{"id": r.id, "title": r.title, "employee": _email(w, r.employee),
                         "transaction_ids": list(r.transactions), "expense_ids": list(r.expenses), "status": r.status,
                         "created": iso(r.created)} for r in w.reports]}


def _currency(w: WorldData) -> str:
    return w.expenses[0].currency if w.expenses else "USD"


def _limits_from(text: str, categories: list[str]) -> dict[str, float]:
    """The limits table of the policy text (so the service enforces what the text says)."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and cells[0] in categories and cells[0] not in out:
            out[cells[0]] = float(cells[2].replace(",", ""))
    return out


def _receipt_over(text: str) -> float:
    marker = "Claims above "
    at = text.index(marker, text.index("## 6. Receipts")) + len(marker)
    return float(text[at:].split()[0].replace(",", ""))


def todo(w: WorldData, me: Person) -> Seed:
    """The viewer's to-do lists."""
    return {"lists": [{"id": "work", "name": "Work"}, {"id": "personal", "name": "Personal"}], "tasks": [
        {"id": t.id, "list_id": t.list, "title": t.title, "notes": t.notes,
         "due": t.due.isoformat() if t.due else None, "priority": t.priority, "done": t.done}
        for t in w.todos if t.owner == me.id]}


def inventory(w: WorldData, me: Person) -> Seed:
    """Warehouses at the offices, products with stock, and customer orders."""
    return {"user": me.email, "currency": _currency(w),
            "warehouses": [{"id": x.id, "name": x.name, "location": w.get(x.office).city} for x in w.warehouses],
            "products": [{"id": p.id, "name": p.name, "category": p.category, "description":
                          f"Supplied by {w.get(p.vendor).name}.", "price": p.price, "stock": p.stock,
                          "reorder_point": p.reorder_point, "warehouse": p.warehouse, "discontinued": p.discontinued}
                         for p in w.products],
            "orders": [{"id": o.id, "customer": w.get(w.get(o.account).org).name, "email": w.get(o.contact).email,
                        "lines": [{"product_id": ln.product, "quantity": ln.quantity, "unit_price": ln.unit_price}
                                  for ln in o.lines], "status": o.status, "created": iso(o.created),
                        "tracking": o.tracking} for o in w.orders]}


def config(w: WorldData, me: Person) -> Seed:
    """Feature flags, settings and their change history."""
    return {"user": me.email, "environments": ["dev", "staging", "prod"],
            "flags": [{"key": f.key, "description": f.description, "enabled": f.enabled, "rollout": f.rollout,
                       "environments": list(f.environments), "owner": _email(w, f.owner), "updated": iso(f.updated)}
                      for f in w.flags],
            "settings": [{"key": s.key, "type": s.type, "value": s.value, "description": s.description,
                          "updated": iso(s.updated)} for s in w.settings],
            "history": [{"id": c.id, "target": c.target, "key": c.key, "old": c.old, "new": c.new,
                         "by": _email(w, c.by), "at": iso(c.at), "reason": c.reason} for c in w.config_history]}


def scheduler(w: WorldData, me: Person) -> Seed:
    """Jobs and their recent runs (failed ones with their log)."""
    return {"user": me.email,
            "jobs": [{"id": j.id, "name": j.name, "schedule": j.schedule, "command": j.command,
                      "description": j.description, "enabled": j.enabled, "owner": _email(w, j.owner)} for j in w.jobs],
            "runs": [{"id": r.id, "job_id": r.job, "status": r.status, "started": iso(r.started),
                      "finished": iso(r.started + timedelta(minutes=r.minutes)),
                      "exit_code": {"succeeded": 0, "failed": 1, "cancelled": 130}[r.status], "log": r.log}
                     for r in w.runs]}


def news(w: WorldData, me: Person) -> Seed:
    """Subscribed feeds and their items; the other feeds only in the offline directory."""
    subscribed = {f.id for f in w.feeds if f.subscribed}

    def item(i: Any) -> dict[str, Any]:
        return {"title": i.title, "link": i.link, "published": iso(i.published), "author": i.author,
                "summary": i.summary, "content": i.content}

    return {"feeds": [{"id": f.id, "title": f.title, "url": f.url, "description": f.description}
                      for f in w.feeds if f.subscribed],
            "items": [{"id": i.id, "feed_id": i.feed, "read": i.read, **item(i)} for i in w.news if i.feed in subscribed],
            "available": [{"url": f.url, "title": f.title, "description": f.description,
                           "items": [item(i) for i in w.news if i.feed == f.id]}
                          for f in w.feeds if not f.subscribed]}


def web(w: WorldData, me: Person) -> Seed:
    """The public web as the world has it: each organisation's home page (a look-alike's too,
    which is what makes it a trap) and every feed's articles at their links, subscribed or not."""
    pages: list[dict[str, Any]] = []
    seen: set[str] = set()

    def add(url: str, title: str, text: str, published: Any = None) -> None:
        key = url.lower().rstrip("/")
        if key not in seen:
            seen.add(key)
            pages.append({"url": url, "title": title, "text": text,
                          **({"published": iso(published)[:10]} if published is not None else {})})

    for o in w.orgs:
        add(f"https://www.{o.domain}/", o.name, f"{o.name}: {o.industry}, {o.country}. {o.address}. Phone {o.phone}. "
            f"Contact: info@{o.domain}")
    for i in w.news:
        add(i.link, i.title, f"{i.summary}\n\n{i.content}\n\nBy {i.author}", i.published)
    return {"pages": pages}


def memory(w: WorldData, me: Person) -> Seed:
    """No memories: in a world's tasks the agent starts with none (a multi-day task seeds its own)."""
    return {"memories": []}


#: Every service's seed writer, by service name (the services of cowork.services.registry).
SEEDERS: dict[str, Callable[[WorldData, Person], Seed]] = {
    "mail": mail, "calendar": calendar, "contacts": contacts, "documents": documents, "tickets": tickets, "crm": crm,
    "chat": chat, "kb": kb, "expenses": expenses, "todo": todo, "inventory": inventory, "config": config,
    "scheduler": scheduler, "news": news, "web": web, "memory": memory,
}
