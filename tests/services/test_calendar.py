"""Calendar tools: time zones, conflicts, free/busy, permissions."""

from __future__ import annotations

from cowork.services.registry import dump_state

from .support import ME, actions, call, fails


def events(env):
    return dump_state(env.ctx.db)["calendar"]["events"]


class TestReading:
    async def test_calendars(self, client):
        out = await call(client, "calendar_list_calendars")
        assert out["user"] == ME and [c["id"] for c in out["calendars"]] == ["primary", "team"]

    async def test_relative_seed_times_use_the_calendar_zone(self, client):
        e = await call(client, "calendar_get_event", event_id="evt-1")
        assert e["start"] == "2026-03-03T08:00:00Z" and e["start_local"] == "2026-03-03T09:00:00+01:00"

    async def test_conflicts_are_visible(self, client):
        out = await call(client, "calendar_list_events")
        by_id = {e["id"]: e for e in out["events"]}
        assert set(by_id) == {"evt-1", "evt-2"}  # cancelled hidden by default
        assert by_id["evt-1"]["conflicts"] == ["evt-2"] and by_id["evt-2"]["conflicts"] == ["evt-1"]
        out = await call(client, "calendar_list_events", include_cancelled=True, calendar_id="team")
        assert [e["id"] for e in out["events"]] == ["evt-3"] and out["events"][0]["conflicts"] == []

    async def test_window_and_query(self, client):
        out = await call(client, "calendar_list_events", start="2026-03-03T08:20:00Z", end="2026-03-03T12:00:00Z")
        assert [e["id"] for e in out["events"]] == ["evt-1", "evt-2"]
        out = await call(client, "calendar_list_events", start="2026-03-03T08:30:00Z")
        assert [e["id"] for e in out["events"]] == ["evt-2"]
        out = await call(client, "calendar_list_events", query="review")
        assert [e["id"] for e in out["events"]] == ["evt-2"]
        await fails(client, "calendar_list_events", "Bad date for start: 'monday'", start="monday")
        await fails(client, "calendar_list_events", "Unknown calendar id 'x'", calendar_id="x")

    async def test_get_unknown(self, client):
        await fails(client, "calendar_get_event", "Unknown event id 'evt-9'", event_id="evt-9")

    async def test_free_busy(self, client):
        out = await call(client, "calendar_free_busy", emails=[ME, "sam@acme.com"],
                         start="2026-03-03T07:00:00Z", end="2026-03-03T10:00:00Z")
        assert out["busy"][ME] == [{"start": "2026-03-03T08:00:00Z", "end": "2026-03-03T08:30:00Z"},
                                   {"start": "2026-03-03T08:15:00Z", "end": "2026-03-03T09:00:00Z"}]
        assert out["busy"]["sam@acme.com"] == []  # declined
        assert out["free"] == [{"start": "2026-03-03T07:00:00Z", "end": "2026-03-03T08:00:00Z"},
                               {"start": "2026-03-03T09:00:00Z", "end": "2026-03-03T10:00:00Z"}]
        await fails(client, "calendar_free_busy", "must be after start", emails=[ME],
                    start="2026-03-03T10:00:00Z", end="2026-03-03T09:00:00Z")
        await fails(client, "calendar_free_busy", "Bad date for end", emails=[ME], start="2026-03-03T10:00:00Z", end="x")


class TestChanging:
    async def test_create_in_zone_shows_conflict(self, client, env):
        out = await call(client, "calendar_create_event", title="1:1", start="2026-03-03T09:20:00",
                         end="2026-03-03T09:50:00", attendees=["dana@acme.com", "dana@acme.com"])
        assert out["start"] == "2026-03-03T08:20:00Z" and out["time_zone"] == "Europe/Berlin"
        assert out["conflicts"] == ["evt-1", "evt-2"]
        assert [a["email"] for a in out["attendees"]] == ["dana@acme.com"]
        out = await call(client, "calendar_create_event", title="NY call", start="2026-03-03T09:00:00",
                         end="2026-03-03T10:00:00", time_zone="America/New_York", calendar_id="team")
        assert out["start"] == "2026-03-03T14:00:00Z"
        assert actions(env) == [("calendar", "create_event")] * 2

    async def test_create_errors(self, client):
        base = {"title": "x", "start": "2026-03-03T09:00:00Z", "end": "2026-03-03T10:00:00Z"}
        await fails(client, "calendar_create_event", "Bad date for start: '3pm'", **{**base, "start": "3pm"})
        await fails(client, "calendar_create_event", "must be after start", **{**base, "end": "2026-03-03T08:00:00Z"})
        await fails(client, "calendar_create_event", "Unknown time zone 'Mars/Base'", **base, time_zone="Mars/Base")
        await fails(client, "calendar_create_event", "Unknown calendar id 'zz'", **base, calendar_id="zz")
        # A bare word is a name now (test_people_names.py); text with an @ must be a plain address.
        await fails(client, "calendar_create_event", "not an email address", **base, attendees=["dana@"])

    async def test_update_keeps_responses(self, client, env):
        out = await call(client, "calendar_update_event", event_id="evt-1", start="2026-03-03T11:00:00",
                         end="2026-03-03T11:30:00", attendees=["dana@acme.com", "sam@acme.com"], location="Room 1")
        assert out["conflicts"] == [] and sorted(out["changed"]) == ["attendees", "end", "location", "start"]
        assert [a["response"] for a in events(env)["evt-1"]["attendees"]] == ["accepted", "needs_action"]

    async def test_update_errors(self, client):
        await fails(client, "calendar_update_event", "Unknown event id", event_id="evt-9", title="x")
        await fails(client, "calendar_update_event", "Permission denied: only the organiser 'dana@acme.com'",
                    event_id="evt-2", title="x")
        await fails(client, "calendar_update_event", "must be after start", event_id="evt-1", end="2026-03-01T00:00:00Z")
        await fails(client, "calendar_update_event", "is cancelled", event_id="evt-3", title="x")

    async def test_cancel(self, client, env):
        assert (await call(client, "calendar_cancel_event", event_id="evt-1"))["status"] == "cancelled"
        assert events(env)["evt-1"]["status"] == "cancelled"
        await fails(client, "calendar_cancel_event", "Permission denied", event_id="evt-2")
        await fails(client, "calendar_cancel_event", "Unknown event id", event_id="nope")

    async def test_respond(self, client, env):
        await call(client, "calendar_respond", event_id="evt-2", response="tentative")
        assert events(env)["evt-2"]["attendees"][0]["response"] == "tentative"
        await fails(client, "calendar_respond", "is not invited to event 'evt-1'", event_id="evt-1", response="accepted")
        await fails(client, "calendar_respond", "Unknown event id", event_id="x", response="accepted")
        await fails(client, "calendar_respond", "response", event_id="evt-2", response="maybe")
