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


def state(env):
    return dump_state(env.ctx.db)["expenses"]


class TestTransactions:
    async def test_list_newest_first_with_report(self, client):
        out = await call(client, "expenses_list_transactions")
        assert [(t["id"], t["date"], t["report_id"]) for t in out["transactions"]] == [
            ("txn-4", "2026-03-01", None), ("txn-3", "2026-02-28", "rpt-1"), ("txn-2", "2026-02-27", None),
            ("txn-1", "2026-02-26", "rpt-2")]
        assert out["transactions"][0]["currency"] == "EUR" and out["transactions"][3]["memo"] == "FRA-BER"

    async def test_filters(self, client):
        ids = lambda out: [t["id"] for t in out["transactions"]]
        list_ = lambda **kw: call(client, "expenses_list_transactions", **kw)
        assert ids(await list_(category="Travel", account="VISA-4411")) == ["txn-4", "txn-2", "txn-1"]
        assert ids(await list_(query="coffee")) == ["txn-3"]
        assert ids(await list_(start="2026-02-27", end="2026-02-28")) == ["txn-3", "txn-2"]
        assert ids(await list_(unreported=True)) == ["txn-4", "txn-2"]
        await fails(client, "expenses_list_transactions", "Bad date for start: 'monday'", start="monday")


class TestReports:
    async def test_seeded_reports(self, client):
        r = await call(client, "expenses_get_report", report_id="rpt-1")
        assert r["status"] == "submitted" and r["submitted"] == r["created"] == "2026-03-01T09:00:00Z"
        assert [(x["line"], x["source"], x["source_id"], x["amount"]) for x in r["lines"]] == [
            (1, "transaction", "txn-3", 18.5), (2, "expense", "exp-3", 300)]
        assert r["lines"][0]["description"] == "Coffee with Dana" and r["total"] == 318.5 and r["currency"] == "USD"
        out = await call(client, "expenses_list_reports")
        assert [(x["id"], x["line_count"], x["total"]) for x in out["reports"]] == [("rpt-2", 1, 420), ("rpt-1", 2, 318.5)]
        assert "lines" not in out["reports"][0]
        assert (await call(client, "expenses_list_reports", status="draft", employee=ME.upper()))["total"] == 1
        await fails(client, "expenses_get_report", "Unknown report id 'rpt-9'", report_id="rpt-9")

    async def test_create_computes_lines_and_totals(self, client, env):
        out = await call(client, "expenses_create_report", title="Hotel and taxi", transaction_ids=["txn-2"])
        assert out["id"] == "rpt-3" and out["status"] == "draft" and out["employee"] == ME
        assert out["total"] == 310.4 and out["totals"] == {"USD": 310.4} and out["submitted"] is None
        assert state(env)["reports"]["rpt-3"] == out
        mixed = await call(client, "expenses_create_report", title="Mixed", transaction_ids=["txn-4"])
        assert mixed["total"] == 35 and mixed["currency"] == "EUR"
        assert actions(env) == [("expenses", "create_report")] * 2

    async def test_mixed_currencies_have_no_single_total(self, client, env):
        out = await call(client, "expenses_submit", amount=12, category="meals", date="2026-03-01", currency="EUR")
        r = await call(client, "expenses_create_report", title="Mixed", transaction_ids=["txn-2"], expense_ids=[out["id"]])
        assert r["total"] is None and r["currency"] is None and r["totals"] == {"USD": 310.4, "EUR": 12}

    async def test_create_errors(self, client, env):
        await fails(client, "expenses_create_report", "An empty report", title="x")
        await fails(client, "expenses_create_report", "Transaction 'txn-3' is on report 'rpt-1' already",
                    title="x", transaction_ids=["txn-3"])
        await fails(client, "expenses_create_report", "Expense 'exp-1' is dana@acme.com's claim; a report holds only your own",
                    title="x", expense_ids=["exp-1"])
        await fails(client, "expenses_create_report", "Unknown transaction id 'txn-9'", title="x", transaction_ids=["txn-2", "txn-9"])
        await fails(client, "expenses_create_report", "Transaction 'txn-2' is listed twice", title="x",
                    transaction_ids=["txn-2", "txn-2"])
        await fails(client, "expenses_create_report", "title", title="", transaction_ids=["txn-2"])
        assert "rpt-3" not in state(env)["reports"] and actions(env) == []

    async def test_submit(self, client, env):
        out = await call(client, "expenses_submit_report", report_id="rpt-2")
        assert out["status"] == "submitted" and out["submitted"] == "2026-03-02T09:00:00Z"
        assert (await call(client, "expenses_submit_report", report_id="rpt-2")) == out  # again: unchanged
        assert actions(env) == [("expenses", "submit_report")]
        await fails(client, "expenses_submit_report", "Unknown report id", report_id="x")

    async def test_submit_refusals(self, env):
        from fastmcp import Client, FastMCP

        from cowork.services.base import ServiceContext, open_db
        from cowork.services.registry import ServicesSeed, register_all, seed_all

        seed = ServicesSeed.model_validate({"expenses": {"user": ME, "transactions": [{"amount": 5}], "reports": [
            {"title": "Dana's", "employee": "dana@acme.com"}, {"title": "Empty"},
            {"title": "Done", "status": "approved", "transaction_ids": ["txn-1"]}]}})
        ctx = ServiceContext(db=open_db())
        seed_all(ctx, seed)
        mcp = FastMCP("t")
        register_all(mcp, ctx, {"expenses_submit_report"})
        async with Client(mcp) as c:
            await fails(c, "expenses_submit_report", "Permission denied: report 'rpt-1' is dana@acme.com's", report_id="rpt-1")
            await fails(c, "expenses_submit_report", "has no lines", report_id="rpt-2")
            await fails(c, "expenses_submit_report", "Report 'rpt-3' is approved; only a draft", report_id="rpt-3")
