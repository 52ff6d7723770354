"""Ticket tools: SLA, workflow, assignees."""

from __future__ import annotations

from cowork.services.registry import dump_state

from .support import ME, actions, call, fails


def tickets(env):
    return dump_state(env.ctx.db)["tickets"]


class TestTickets:
    async def test_search_orders_by_urgency_and_shows_sla(self, client):
        out = await call(client, "tickets_search")
        assert [t["id"] for t in out["tickets"]] == ["tkt-1", "tkt-3", "tkt-2"]
        vpn = out["tickets"][0]
        assert vpn["due"] == "2026-03-02T07:00:00Z" and vpn["sla"] == {
            "due": "2026-03-02T07:00:00Z", "minutes_left": -120, "breached": True}
        assert out["tickets"][1]["sla"]["breached"] is False  # closed tickets never breach
        ids = lambda **kw: call(client, "tickets_search", **kw)
        assert [t["id"] for t in (await ids(assignee="none", status="open"))["tickets"]] == ["tkt-1"]
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
