"""Tickets: a helpdesk with tickets, comments, status, priority, assignee and SLA deadlines."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, model_validator

from ..toolhost.errors import ToolError
from .base import (
    READ,
    Email,
    Limit,
    Offset,
    SeedModel,
    SeedTime,
    ServiceContext,
    Store,
    check_unique,
    hints,
    iso,
    matches,
    page,
    resolve_time,
    tool_adder,
)
from .people import Person, is_address, resolve

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

NAME = "tickets"
Status = Literal["new", "open", "pending", "resolved", "closed"]
Priority = Literal["low", "normal", "high", "urgent"]
TicketId = Annotated[str, Field(description="Ticket id, as listed by tickets_search.")]
_ORDER = {"urgent": 0, "high": 1, "normal": 2, "low": 3}
_DONE = ("resolved", "closed")


class Comment(SeedModel):
    """A comment on a ticket."""

    author: Email
    """Who wrote it."""
    body: str = Field(min_length=1)
    """Text."""
    internal: bool = False
    """Internal notes are hidden from the requester."""
    at: SeedTime = "now"
    """When it was written."""


class Ticket(SeedModel):
    """A helpdesk ticket."""

    id: str | None = None
    """Stable id; default ``tkt-<n>`` by position."""
    title: str = Field(min_length=1)
    """Short summary."""
    description: str = ""
    """The request as the requester wrote it."""
    status: Status = "open"
    """Workflow status."""
    priority: Priority | None = "normal"
    """Priority; it sets the SLA deadline. ``null``: not yet triaged (no deadline unless ``due`` is given)."""
    requester: Person
    """Who asked: an address, or a name (kept as ``requester_name``, with no address)."""
    requester_name: str = ""
    """The requester's name, as they signed."""
    department: str = ""
    """The requester's department, e.g. Finance."""
    category: str = ""
    """What kind of request, e.g. hardware, access, billing; free text."""
    assignee: Email | None = None
    """Agent working on it; one of the seed's agents."""
    tags: list[str] = []
    """Labels."""
    created: SeedTime = "now-1h"
    """When it was opened."""
    due: SeedTime | None = None
    """SLA deadline; default created plus the SLA hours of its priority."""
    comments: list[Comment] = []
    """Comments, oldest first."""


class TicketsSeed(SeedModel):
    """Initial state of the helpdesk."""

    user: Email = "me@example.com"
    """The user's address: author of comments, and an agent."""
    agents: list[Email] = []
    """Other agents tickets can be assigned to."""
    sla_hours: dict[Priority, int] = {"urgent": 4, "high": 8, "normal": 24, "low": 72}
    """Hours from creation to the SLA deadline, per priority."""
    tickets: list[Ticket] = []
    """Tickets."""

    @model_validator(mode="after")
    def _refs(self) -> "TicketsSeed":
        missing = set(_ORDER) - set(self.sla_hours)
        if missing:
            raise ValueError(f"sla_hours: missing {', '.join(sorted(missing))}")
        agents = {self.user, *self.agents}
        check_unique(self.tickets, "tkt", "tickets")
        for n, t in enumerate(self.tickets):
            if t.assignee is not None and t.assignee not in agents:
                raise ValueError(f"tickets[{n}].assignee: {t.assignee!r} is not an agent; agents: {', '.join(sorted(agents))}")
        return self


SEED = TicketsSeed


def seed(store: Store, data: TicketsSeed) -> None:
    """Write the seed's records and settings."""
    store.set_meta("user", data.user)
    store.set_meta("agents", sorted({data.user, *data.agents}))
    store.set_meta("sla_hours", dict(data.sla_hours))
    n_comment = 0
    for rid, t in zip(check_unique(data.tickets, "tkt", "tickets"), data.tickets):
        created = resolve_time(t.created, store.now)
        due = resolve_time(t.due, store.now) if t.due else None if t.priority is None else iso(
            datetime.fromisoformat(created) + timedelta(hours=data.sla_hours[t.priority]))
        updated = max([created] + [resolve_time(c.at, store.now) for c in t.comments])
        store.insert("tickets", {"id": rid, "title": t.title, "description": t.description, "status": t.status,
                                 "priority": t.priority,
                                 "requester": t.requester if is_address(t.requester) else None,
                                 "requester_name": t.requester_name or ("" if is_address(t.requester) else t.requester), "department": t.department,
                                 "category": t.category, "assignee": t.assignee,
                                 "tags": list(t.tags), "created": created, "updated": updated, "due": due,
                                 "resolution": None})
        for c in t.comments:
            n_comment += 1
            store.insert("comments", {"id": f"cmt-{n_comment}", "ticket_id": rid, "author": c.author, "body": c.body,
                                      "internal": c.internal, "at": resolve_time(c.at, store.now)})


def register(mcp: ToolApp, ctx: ServiceContext, allowed: set[str]) -> None:
    """Add the allowed ticket tools to ``mcp``."""
    store = Store(ctx, NAME)
    tool = tool_adder(mcp, allowed)

    def sla(t: dict[str, Any]) -> dict[str, Any]:
        if t["due"] is None:  # not triaged: no deadline yet
            return {"due": None, "minutes_left": None, "breached": False}
        left = (datetime.fromisoformat(t["due"]) - store.now).total_seconds() // 60
        return {"due": t["due"], "minutes_left": int(left),
                "breached": t["status"] not in _DONE and left < 0}

    def view(t: dict[str, Any]) -> dict[str, Any]:
        return {**t, "sla": sla(t)}

    def agent(email: str | None) -> str | None:
        agents = store.meta("agents", [])
        if email is not None and email not in agents:
            raise ToolError(f"Unknown assignee {email!r}; agents: {', '.join(agents)}")
        return email

    def due_for(created: str, priority: str) -> str:
        hours = store.meta("sla_hours", {"urgent": 4, "high": 8, "normal": 24, "low": 72})[priority]
        return iso(datetime.fromisoformat(created) + timedelta(hours=hours))

    @tool("tickets_search", READ)
    def tickets_search(
        query: Annotated[str, Field(description="Words that must all occur in title, description, requester, category, department or tags.")] = "",
        status: Status | None = None,
        priority: Annotated[Priority | Literal["none"] | None, Field(description="Priority, or 'none' for tickets not yet prioritised.")] = None,
        assignee: Annotated[str | None, Field(description="Assignee address, or 'none' for unassigned tickets.")] = None,
        tag: str | None = None,
        department: Annotated[str | None, Field(description="Only this department (any case).")] = None,
        category: Annotated[str | None, Field(description="Only this category (any case).")] = None,
        offset: Offset = 0, limit: Limit = 20,
    ) -> dict:
        """Search tickets, most urgent and soonest due first (unprioritised last); each shows its SLA state."""
        with store.tx():
            tickets = store.all("tickets")
        same = lambda a, b: b is None or a.lower() == b.strip().lower()
        hits = [t for t in tickets if matches(query, t["title"], t["description"], t["requester"], t["requester_name"],
                                              t["category"], t["department"], *t["tags"])
                and (status is None or t["status"] == status)
                and (priority is None or t["priority"] == (None if priority == "none" else priority))
                and (assignee is None or t["assignee"] == (None if assignee == "none" else assignee.lower()))
                and (tag is None or tag in t["tags"]) and same(t["department"], department)
                and same(t["category"], category)]
        hits.sort(key=lambda t: (_ORDER.get(t["priority"], len(_ORDER)), t["due"] or "~", t["id"]))
        return page([view(t) for t in hits], offset, limit, "tickets")

    @tool("tickets_get", READ)
    def tickets_get(ticket_id: TicketId) -> dict:
        """Read a ticket with its comments and SLA state."""
        with store.tx():
            t = store.require("tickets", ticket_id, "ticket")
            comments = [c for c in store.all("comments") if c["ticket_id"] == ticket_id]
        return {**view(t), "comments": comments}

    @tool("tickets_create", hints())
    def tickets_create(title: Annotated[str, Field(min_length=1)], description: str = "",
                       requester: Annotated[Person | None, Field(description="Who asked: an address, or a name (looked up in contacts); default you.")] = None,
                       priority: Annotated[Priority | None, Field(description="Priority; null leaves it unset (no SLA deadline until one is set).")] = "normal",
                       assignee: Annotated[Email | None, Field(description="Agent to assign.")] = None,
                       tags: list[str] = [], requester_name: str = "", department: str = "", category: str = "") -> dict:
        """Open a ticket; its SLA deadline follows from the priority."""
        with store.tx():
            now = iso(store.now)
            email, name = resolve(ctx, requester) if requester else (store.meta("user", "me@example.com"), "")
            rid = store.new_id("tickets", "tkt")
            rec = {"id": rid, "title": title, "description": description, "status": "new" if assignee is None else "open",
                   "priority": priority, "requester": email,
                   "requester_name": requester_name or name, "department": department, "category": category,
                   "assignee": agent(assignee), "tags": list(tags), "created": now, "updated": now,
                   "due": None if priority is None else due_for(now, priority), "resolution": None}
            store.insert("tickets", rec)
            by_name = requester is not None and not is_address(requester)  # what it resolved to is not in the arguments
            store.audit("create", [rid], [k for k in rec if k != "id"],
                        {"requester": email, "requester_name": rec["requester_name"]} if by_name else None)
        return view(rec)

    @tool("tickets_update", hints(destructive=True, idempotent=True))
    def tickets_update(ticket_id: TicketId, status: Status | None = None, priority: Priority | None = None,
                       assignee: Annotated[str | None, Field(description="Agent address, or 'none' to unassign.")] = None,
                       title: str | None = None, tags: list[str] | None = None,
                       department: str | None = None, category: str | None = None) -> dict:
        """Change a ticket's status, priority (which moves its SLA deadline), assignee, title, tags, department or category."""
        with store.tx():
            t = store.require("tickets", ticket_id, "ticket")
            changes: dict[str, Any] = {}
            if status is not None:
                changes["status"] = status
            if priority is not None:
                changes["priority"] = priority
                changes["due"] = due_for(t["created"], priority)
            if assignee is not None:
                changes["assignee"] = None if assignee == "none" else agent(assignee.lower())
            if title is not None:
                changes["title"] = title
            if tags is not None:
                changes["tags"] = list(tags)
            if department is not None:
                changes["department"] = department
            if category is not None:
                changes["category"] = category
            if not changes:
                raise ToolError("Nothing to change: give status, priority, assignee, title, tags, department or category")
            if t["status"] == "closed" and changes.get("status", "closed") == "closed":
                raise ToolError(f"Ticket {ticket_id!r} is closed; set status to reopen it first")
            changes["updated"] = iso(store.now)
            rec, changed = store.update("tickets", ticket_id, changes)
            if set(changed) - {"updated"}:
                store.audit("update", [ticket_id], changed)
        return {**view(rec), "changed": changed}

    @tool("tickets_comment", hints())
    def tickets_comment(ticket_id: TicketId, body: Annotated[str, Field(min_length=1)],
                        internal: Annotated[bool, Field(description="An internal note the requester does not see.")] = False) -> dict:
        """Add a comment to a ticket."""
        with store.tx():
            t = store.require("tickets", ticket_id, "ticket")
            if t["status"] == "closed":
                raise ToolError(f"Ticket {ticket_id!r} is closed; reopen it to comment")
            cid = store.new_id("comments", "cmt")
            rec = {"id": cid, "ticket_id": ticket_id, "author": store.meta("user", "me@example.com"),
                   "body": body, "internal": internal, "at": iso(store.now)}
            store.insert("comments", rec)
            store.update("tickets", ticket_id, {"updated": rec["at"]})
            store.audit("comment", [ticket_id, cid], ["body", "internal"])
        return rec

    @tool("tickets_close", hints(idempotent=True))
    def tickets_close(ticket_id: TicketId, resolution: Annotated[str, Field(min_length=1, description="How it was resolved.")]) -> dict:
        """Close a ticket with a resolution."""
        with store.tx():
            store.require("tickets", ticket_id, "ticket")
            rec, changed = store.update("tickets", ticket_id, {"status": "closed", "resolution": resolution})
            if changed:
                rec, _ = store.update("tickets", ticket_id, {"updated": iso(store.now)})
                store.audit("close", [ticket_id], changed)
        return view(rec)
