"""Ticket tools: SLA, workflow, assignees."""

from __future__ import annotations

from cowork.services.registry import dump_state

from .support import ME, actions, call, fails


def tickets(env):
    return dump_state(env.ctx.db)["tickets"]


class TestTickets:
    async def test_search_orders_by_urgency_and_shows_sla(self, client):
        out = await call(client, "tickets_search")
        assert [t["id"] for t in out["tickets"]] == ["tkt-1", "tkt-3", "tkt-2", "tkt-4"]  # unprioritised last
        vpn = out["tickets"][0]
        assert vpn["due"] == "2026-03-02T07:00:00Z" and vpn["sla"] == {
            "due": "2026-03-02T07:00:00Z", "minutes_left": -120, "breached": True}
        assert out["tickets"][1]["sla"]["breached"] is False  # closed tickets never breach
        ids = lambda **kw: call(client, "tickets_search", **kw)
        assert [t["id"] for t in (await ids(assignee="none", status="open"))["tickets"]] == ["tkt-1", "tkt-4"]
        assert [t["id"] for t in (await ids(assignee="sam@acme.com"))["tickets"]] == ["tkt-2"]
        assert [t["id"] for t in (await ids(tag="network", query="vpn"))["tickets"]] == ["tkt-1"]
        assert (await ids(priority="high"))["total"] == 0
        await fails(client, "tickets_search", "status", status="done")

    async def test_get(self, client):
        t = await call(client, "tickets_get", ticket_id="tkt-1")
        assert [c["body"] for c in t["comments"]] == ["Since this morning"]
        await fails(client, "tickets_get", "Unknown ticket id 'tkt-9'", ticket_id="tkt-9")

    async def test_create_sets_sla_from_priority(self, client, env):
        out = await call(client, "tickets_create", title="Mouse", priority="high", assignee="sam@acme.com", tags=["hw"])
        assert out["due"] == "2026-03-02T17:00:00Z" and out["status"] == "open" and out["requester"] == ME
        assert (await call(client, "tickets_create", title="Other"))["status"] == "new"
        await fails(client, "tickets_create", "Unknown assignee 'eve@acme.com'", title="x", assignee="eve@acme.com")
        await fails(client, "tickets_create", "priority", title="x", priority="critical")
        assert actions(env) == [("tickets", "create")] * 2

    async def test_update(self, client, env):
        out = await call(client, "tickets_update", ticket_id="tkt-2", priority="urgent", assignee="none", status="pending")
        assert sorted(out["changed"]) == ["assignee", "due", "priority", "status", "updated"]
        assert out["due"] == "2026-03-02T12:00:00Z" and out["assignee"] is None
        await fails(client, "tickets_update", "Nothing to change", ticket_id="tkt-2")
        await fails(client, "tickets_update", "Unknown assignee", ticket_id="tkt-2", assignee="x@y.com")
        await fails(client, "tickets_update", "Unknown ticket id", ticket_id="t", status="open")
        await fails(client, "tickets_update", "is closed; set status to reopen", ticket_id="tkt-3", priority="high")
        await call(client, "tickets_update", ticket_id="tkt-3", status="open")
        assert tickets(env)["tickets"]["tkt-3"]["status"] == "open"

    async def test_comment(self, client, env):
        out = await call(client, "tickets_comment", ticket_id="tkt-1", body="On it", internal=True)
        assert tickets(env)["comments"][out["id"]] == {**out, "ticket_id": "tkt-1"}
        assert out["author"] == ME and out["internal"] is True
        await fails(client, "tickets_comment", "is closed", ticket_id="tkt-3", body="x")
        await fails(client, "tickets_comment", "Unknown ticket id", ticket_id="x", body="x")
        await fails(client, "tickets_comment", "body", ticket_id="tkt-1", body="")

    async def test_close(self, client, env):
        out = await call(client, "tickets_close", ticket_id="tkt-1", resolution="Restarted")
        assert out["status"] == "closed" and out["sla"]["breached"] is False
        assert tickets(env)["tickets"]["tkt-1"]["resolution"] == "Restarted"
        await fails(client, "tickets_close", "Unknown ticket id", ticket_id="x", resolution="r")
        await fails(client, "tickets_close", "resolution", ticket_id="tkt-1", resolution="")


class TestTriageFields:
    async def test_seeded_fields_and_unset_priority(self, client, env):
        t = tickets(env)["tickets"]
        assert (t["tkt-1"]["requester_name"], t["tkt-1"]["department"], t["tkt-1"]["category"]) == (
            "Carol Diaz", "Finance", "network")
        assert t["tkt-2"]["department"] == "" and t["tkt-2"]["category"] == ""
        assert t["tkt-4"]["priority"] is None and t["tkt-4"]["due"] is None
        got = await call(client, "tickets_get", ticket_id="tkt-4")
        assert got["sla"] == {"due": None, "minutes_left": None, "breached": False}

    async def test_search_filters(self, client):
        ids = lambda out: [t["id"] for t in out["tickets"]]
        assert ids(await call(client, "tickets_search", department="finance")) == ["tkt-1"]
        assert ids(await call(client, "tickets_search", category=" ACCESS ")) == ["tkt-4"]
        assert ids(await call(client, "tickets_search", priority="none")) == ["tkt-4"]
        assert ids(await call(client, "tickets_search", query="erin payroll")) == ["tkt-4"]  # requester name searched
        assert ids(await call(client, "tickets_search", query="hr")) == ["tkt-4"]  # department searched
        assert (await call(client, "tickets_search", department="Legal"))["total"] == 0
        await fails(client, "tickets_search", "priority", priority="unset")

    async def test_create_with_fields_and_without_priority(self, client, env):
        out = await call(client, "tickets_create", title="Badge broken", priority=None, requester="fred@acme.com",
                         requester_name="Fred", department="Facilities", category="hardware")
        rec = tickets(env)["tickets"][out["id"]]
        assert rec["priority"] is None and rec["due"] is None and out["sla"]["minutes_left"] is None
        assert (rec["requester_name"], rec["department"], rec["category"]) == ("Fred", "Facilities", "hardware")
        plain = await call(client, "tickets_create", title="Default")
        assert plain["priority"] == "normal" and plain["category"] == "" and plain["due"] == "2026-03-03T09:00:00Z"

    async def test_triage_sets_priority_category_and_department(self, client, env):
        out = await call(client, "tickets_update", ticket_id="tkt-4", priority="high", category="permissions",
                         department="People")
        assert sorted(out["changed"]) == ["category", "department", "due", "priority", "updated"]
        assert out["due"] == "2026-03-02T15:00:00Z"  # created now-2h, plus 8 h
        assert actions(env) == [("tickets", "update")]
        await fails(client, "tickets_update", "Nothing to change: give status, priority, assignee, title, tags, "
                    "department or category", ticket_id="tkt-4")
