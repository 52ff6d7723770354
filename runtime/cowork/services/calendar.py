"""Calendar: calendars and events with attendees and time zones, free/busy, visible conflicts."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from ..toolhost.errors import ToolError
from .base import (
    READ,
    Email,
    EmailList,
    Limit,
    Offset,
    SeedModel,
    SeedTime,
    ServiceContext,
    Store,
    check_ref,
    check_unique,
    hints,
    iso,
    matches,
    page,
    parse_time,
    resolve_time,
    tool_adder,
    zone,
)
from .people import PersonList, is_address, name_key, resolve

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

NAME = "calendar"
EventId = Annotated[str, Field(description="Event id, as listed by calendar_list_events.")]
When = Annotated[str, Field(description="ISO 8601 time; without an offset it is read in the event's time zone.")]
Response = Literal["needs_action", "accepted", "declined", "tentative"]
_REFERENCE = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)  # to order relative seed times


def _tz(value: str) -> str:
    zone(value)
    return value


class CalendarDef(SeedModel):
    """One calendar of the user."""

    id: str = Field(min_length=1)
    """Stable id, e.g. ``primary``."""
    name: str = ""
    """Display name."""
    time_zone: str = "UTC"
    """IANA time zone of the calendar, e.g. ``Europe/Berlin``."""

    _zone = field_validator("time_zone")(lambda cls, v: _tz(v))


class Attendee(SeedModel):
    """A person invited to an event, by address, by name, or both."""

    email: Email | None = None
    """Their address; may be left out for someone known by name alone."""
    name: str = ""
    """Their name."""
    response: Response = "needs_action"
    """Their answer to the invitation."""

    @model_validator(mode="after")
    def _someone(self) -> "Attendee":
        if self.email is None and not self.name.strip():
            raise ValueError("an attendee needs an email or a name")
        return self


class Event(SeedModel):
    """One calendar event."""

    id: str | None = None
    """Stable id; default ``evt-<n>`` by position."""
    calendar_id: str | None = None
    """Calendar holding it; default the first calendar."""
    title: str = Field(min_length=1)
    """Title."""
    start: SeedTime
    """Start; relative times with ``@HH:MM`` are read in the event's time zone."""
    end: SeedTime
    """End, after the start."""
    time_zone: str | None = None
    """IANA time zone of the event; default the calendar's."""
    location: str = ""
    """Room, address or meeting link."""
    description: str = ""
    """Agenda or notes."""
    organizer: Email | None = None
    """Who organises it; default the user."""
    attendees: list[Attendee] = []
    """Invited people and their responses."""
    status: Literal["confirmed", "tentative", "cancelled"] = "confirmed"
    """Event status."""

    _zone = field_validator("time_zone")(lambda cls, v: v if v is None else _tz(v))


class CalendarSeed(SeedModel):
    """Initial state of the calendar service."""

    user: Email = "me@example.com"
    """The user's address: organiser of new events and the one who responds."""
    calendars: list[CalendarDef] = Field(default=[CalendarDef(id="primary", name="Calendar")], min_length=1)
    """The user's calendars; the first is the default."""
    events: list[Event] = []
    """Events on those calendars."""

    @model_validator(mode="after")
    def _refs(self) -> "CalendarSeed":
        cals = {c.id: c.time_zone for c in self.calendars}
        if len(cals) != len(self.calendars):
            raise ValueError("calendars: an id is listed twice")
        check_unique(self.events, "evt", "events")
        for n, e in enumerate(self.events):
            check_ref(e.calendar_id, cals, f"events[{n}].calendar_id", "calendar")
            tz = e.time_zone or cals[e.calendar_id or self.calendars[0].id]
            if resolve_time(e.end, _REFERENCE, tz) <= resolve_time(e.start, _REFERENCE, tz):
                raise ValueError(f"events[{n}].end: {e.end!r} is not after start {e.start!r}")
        return self


SEED = CalendarSeed


def seed(store: Store, data: CalendarSeed) -> None:
    """Write the seed's records and settings."""
    store.set_meta("user", data.user)
    store.set_meta("calendars", [c.model_dump() for c in data.calendars])
    for rid, e in zip(check_unique(data.events, "evt", "events"), data.events):
        cal = e.calendar_id or data.calendars[0].id
        tz = e.time_zone or next(c.time_zone for c in data.calendars if c.id == cal)
        store.insert("events", {
            "id": rid, "calendar_id": cal, "title": e.title, "start": resolve_time(e.start, store.now, tz),
            "end": resolve_time(e.end, store.now, tz), "time_zone": tz, "location": e.location,
            "description": e.description, "organizer": e.organizer or data.user,
            "attendees": [a.model_dump() for a in e.attendees], "status": e.status})


def _local(utc: str, tz: str) -> str:
    return datetime.fromisoformat(utc).astimezone(zone(tz)).isoformat()


def _same_attendee(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The same person: the same address, or, where either has none, the same name."""
    if a.get("email") and b.get("email"):
        return a["email"] == b["email"]
    return not (a.get("email") or b.get("email")) and name_key(a.get("name") or "") == name_key(b.get("name") or "")


def _involves(e: dict[str, Any], email: str) -> bool:
    return e["organizer"] == email or any(a["email"] == email and a["response"] != "declined" for a in e["attendees"])


def register(mcp: ToolApp, ctx: ServiceContext, allowed: set[str]) -> None:
    """Add the allowed calendar tools to ``mcp``."""
    store = Store(ctx, NAME)
    tool = tool_adder(mcp, allowed)

    def user() -> str:
        return store.meta("user", "me@example.com")

    def calendars() -> list[dict[str, Any]]:
        return store.meta("calendars") or [{"id": "primary", "name": "Calendar", "time_zone": "UTC"}]

    def calendar(cid: str | None) -> dict[str, Any]:
        cals = calendars()
        for c in cals:
            if cid is None or c["id"] == cid:
                return c
        raise ToolError(f"Unknown calendar id {cid!r}; calendars: {', '.join(c['id'] for c in cals)}")

    def check_zone(tz: str) -> str:
        try:
            return _tz(tz)
        except ValueError as exc:
            raise ToolError(f"Unknown time zone {tz!r}; use an IANA name like 'Europe/Berlin'") from exc

    def view(e: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, Any]:
        mine = {c["id"] for c in calendars()}
        conflicts = [] if e["status"] == "cancelled" else [
            o["id"] for o in events if o["id"] != e["id"] and o["status"] != "cancelled"
            and o["calendar_id"] in mine and o["start"] < e["end"] and e["start"] < o["end"]]
        return {**e, "start_local": _local(e["start"], e["time_zone"]), "end_local": _local(e["end"], e["time_zone"]),
                "conflicts": conflicts}

    def span(start: str, end: str, tz: str) -> tuple[str, str]:
        s, f = iso(parse_time(start, "start", tz)), iso(parse_time(end, "end", tz))
        if f <= s:
            raise ToolError(f"end {end!r} must be after start {start!r}")
        return s, f

    def invitees(people: list[str]) -> list[dict[str, Any]]:
        """Attendee entries for addresses or names (names looked up in contacts), each person once."""
        out: list[dict[str, Any]] = []
        for person in people:
            email, name = resolve(ctx, person)
            entry = {"email": email, "name": name, "response": "needs_action"}
            if not any(_same_attendee(entry, o) for o in out):
                out.append(entry)
        return out

    def organised(event_id: str) -> dict[str, Any]:
        e = store.require("events", event_id, "event")
        if e["organizer"] != user():
            raise ToolError(f"Permission denied: only the organiser {e['organizer']!r} can change event {event_id!r}")
        return e

    @tool("calendar_list_calendars", READ)
    def calendar_list_calendars() -> dict:
        """List the user's calendars and time zones."""
        with store.tx():
            return {"user": user(), "calendars": calendars()}

    @tool("calendar_list_events", READ)
    def calendar_list_events(
        start: Annotated[str | None, Field(description="Only events ending after this ISO 8601 time.")] = None,
        end: Annotated[str | None, Field(description="Only events starting before this ISO 8601 time.")] = None,
        calendar_id: Annotated[str | None, Field(description="Only this calendar.")] = None,
        query: Annotated[str, Field(description="Words that must occur in title, description, location or attendees.")] = "",
        include_cancelled: bool = False, offset: Offset = 0, limit: Limit = 20,
    ) -> dict:
        """List events by start time; each lists the ids of overlapping events as conflicts."""
        lo = iso(parse_time(start, "start")) if start else None
        hi = iso(parse_time(end, "end")) if end else None
        with store.tx():
            if calendar_id is not None:
                calendar(calendar_id)
            events = store.all("events")
        hits = [e for e in events if (calendar_id is None or e["calendar_id"] == calendar_id)
                and (include_cancelled or e["status"] != "cancelled")
                and (lo is None or e["end"] > lo) and (hi is None or e["start"] < hi)
                and matches(query, e["title"], e["description"], e["location"],
                            *(a["email"] for a in e["attendees"]), *(a["name"] for a in e["attendees"]))]
        hits.sort(key=lambda e: (e["start"], e["id"]))
        return page([view(e, events) for e in hits], offset, limit, "events")

    @tool("calendar_get_event", READ)
    def calendar_get_event(event_id: EventId) -> dict:
        """Read one event with its attendees, local times and conflicts."""
        with store.tx():
            return view(store.require("events", event_id, "event"), store.all("events"))

    @tool("calendar_free_busy", READ)
    def calendar_free_busy(
        emails: Annotated[EmailList, Field(min_length=1, description="People to look up.")],
        start: When, end: When,
    ) -> dict:
        """Busy intervals of each person between start and end, and the slots when all are free."""
        lo, hi = span(start, end, "UTC")
        with store.tx():
            events = [e for e in store.all("events") if e["status"] != "cancelled" and e["start"] < hi and e["end"] > lo]
        people: dict[str, list[dict[str, str]]] = {}
        for email in emails:
            busy = sorted((max(e["start"], lo), min(e["end"], hi)) for e in events if _involves(e, email))
            people[email] = [{"start": s, "end": f} for s, f in busy]
        merged: list[list[str]] = []
        for s, f in sorted((b["start"], b["end"]) for bs in people.values() for b in bs):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], f)
            else:
                merged.append([s, f])
        free, cursor = [], lo
        for s, f in merged:
            if s > cursor:
                free.append({"start": cursor, "end": s})
            cursor = max(cursor, f)
        if cursor < hi:
            free.append({"start": cursor, "end": hi})
        return {"start": lo, "end": hi, "busy": people, "free": free}

    @tool("calendar_create_event", hints())
    def calendar_create_event(
        title: Annotated[str, Field(min_length=1)], start: When, end: When,
        attendees: Annotated[PersonList, Field(description="Addresses or names of people to invite (a name is looked up in contacts).")] = [],
        calendar_id: Annotated[str | None, Field(description="Calendar; default the first.")] = None,
        time_zone: Annotated[str | None, Field(description="IANA time zone; default the calendar's.")] = None,
        location: str = "", description: str = "",
    ) -> dict:
        """Create an event organised by the user and invite attendees; the result lists conflicts."""
        with store.tx():
            cal = calendar(calendar_id)
            tz = check_zone(time_zone) if time_zone else cal["time_zone"]
            s, f = span(start, end, tz)
            rid = store.new_id("events", "evt")
            rec = {"id": rid, "calendar_id": cal["id"], "title": title, "start": s, "end": f, "time_zone": tz,
                   "location": location, "description": description, "organizer": user(),
                   "attendees": invitees(attendees), "status": "confirmed"}
            store.insert("events", rec)
            stored: dict[str, Any] = {"start": s, "end": f, "time_zone": tz}
            if not all(is_address(a) for a in attendees):  # names: what they resolved to is not in the arguments
                stored["attendees"] = rec["attendees"]
            store.audit("create_event", [rid], [k for k in rec if k != "id"], stored)
            return view(rec, store.all("events"))

    @tool("calendar_update_event", hints(destructive=True, idempotent=True))
    def calendar_update_event(
        event_id: EventId, title: str | None = None, start: When | None = None, end: When | None = None,
        attendees: Annotated[PersonList | None, Field(description="The new full list of attendees: addresses or names (looked up in contacts).")] = None,
        time_zone: str | None = None, location: str | None = None, description: str | None = None,
    ) -> dict:
        """Change an event the user organises; only the given fields change."""
        with store.tx():
            e = organised(event_id)
            if e["status"] == "cancelled":
                raise ToolError(f"Event {event_id!r} is cancelled and cannot be changed")
            tz = check_zone(time_zone) if time_zone else e["time_zone"]
            changes: dict[str, Any] = {"time_zone": tz}
            if start is not None or end is not None:
                changes["start"], changes["end"] = span(start or e["start"], end or e["end"], tz)
            if attendees is not None:  # people invited before keep their answer
                changes["attendees"] = [next((o for o in e["attendees"] if _same_attendee(o, new)), new)
                                        for new in invitees(attendees)]
            for key, value in (("title", title), ("location", location), ("description", description)):
                if value is not None:
                    changes[key] = value
            rec, changed = store.update("events", event_id, changes)
            if changed:
                names = attendees is not None and not all(is_address(a) for a in attendees)
                store.audit("update_event", [event_id], changed,
                            {k: rec[k] for k in ("start", "end", "time_zone") if k in changed}
                            | ({"attendees": rec["attendees"]} if names and "attendees" in changed else {}))
            return {**view(rec, store.all("events")), "changed": changed}

    @tool("calendar_cancel_event", hints(destructive=True, idempotent=True))
    def calendar_cancel_event(event_id: EventId) -> dict:
        """Cancel an event the user organises (attendees see it cancelled)."""
        with store.tx():
            organised(event_id)
            rec, changed = store.update("events", event_id, {"status": "cancelled"})
            if changed:
                store.audit("cancel_event", [event_id], changed)
        return {"id": event_id, "status": "cancelled"}

    @tool("calendar_respond", hints(idempotent=True))
    def calendar_respond(event_id: EventId, response: Literal["accepted", "declined", "tentative"]) -> dict:
        """Answer an invitation as the user."""
        with store.tx():
            e = store.require("events", event_id, "event")
            me = user()
            if not any(a["email"] == me for a in e["attendees"]):
                raise ToolError(f"{me!r} is not invited to event {event_id!r}")
            people = [{**a, "response": response} if a["email"] == me else a for a in e["attendees"]]
            rec, changed = store.update("events", event_id, {"attendees": people})
            if changed:
                store.audit("respond", [event_id], changed)
        return {"id": event_id, "response": response}
