"""Expense tools: policy checks, approvals and their permissions."""

from __future__ import annotations

from cowork.services.registry import dump_state

from .support import ME, actions, call, fails


def expenses(env):
    return dump_state(env.ctx.db)["expenses"]["expenses"]


class TestExpenses:
    async def test_list_and_violations(self, client):
        out = await call(client, "expenses_list", status="submitted")
        assert {e["id"]: e["policy_violations"] for e in out["expenses"]} == {
            "exp-1": [], "exp-2": ["120 USD is over the meals limit of 75", "no receipt for a claim over 25"],
            "exp-3": []}
        assert (await call(client, "expenses_list", employee="DANA@acme.com"))["total"] == 2
        assert (await call(client, "expenses_list", category="travel"))["total"] == 1

    async def test_get_and_policy(self, client):
        assert (await call(client, "expenses_get", expense_id="exp-4"))["status"] == "approved"
        await fails(client, "expenses_get", "Unknown expense id 'exp-9'", expense_id="exp-9")
        policy = await call(client, "expenses_get_policy")
        assert policy["limits"] == {"meals": 75, "travel": 1500} and policy["text"] == "Meals up to 75 USD."

    async def test_submit(self, client, env):
        out = await call(client, "expenses_submit", amount=2000, category="travel", date="2026-02-27", currency="EUR")
        assert out["employee"] == ME and out["status"] == "submitted"
        assert "no receipt for a claim over 25" in out["policy_violations"]
        await fails(client, "expenses_submit", "Unknown category 'golf'", amount=1, category="golf", date="2026-02-27")
        await fails(client, "expenses_submit", "Bad date for date: '27/02'", amount=1, category="meals", date="27/02")
        await fails(client, "expenses_submit", "amount", amount=0, category="meals", date="2026-02-27")

    async def test_approve(self, client, env):
        out = await call(client, "expenses_approve", expense_id="exp-1", note="ok")
        assert out["status"] == "approved" and expenses(env)["exp-1"]["approver"] == ME
        assert actions(env) == [("expenses", "approve")]
        await fails(client, "expenses_approve", "is approved; only submitted", expense_id="exp-1")
        await fails(client, "expenses_approve", "Permission denied: you cannot decide your own", expense_id="exp-3")
        await fails(client, "expenses_approve", "Unknown expense id", expense_id="x")

    async def test_reject(self, client, env):
        out = await call(client, "expenses_reject", expense_id="exp-2", reason="Over the limit")
        assert out["status"] == "rejected" and expenses(env)["exp-2"]["note"] == "Over the limit"
        await fails(client, "expenses_reject", "reason", expense_id="exp-1", reason="")
        await fails(client, "expenses_reject", "is rejected", expense_id="exp-2", reason="again")
        await fails(client, "expenses_reject", "own expense", expense_id="exp-3", reason="x")
