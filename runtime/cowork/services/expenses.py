"""Expenses: claims under a written policy, card transactions, and expense reports built from them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, model_validator

from ..toolhost.errors import ToolError
from .base import (
    READ,
    Email,
    Limit,
    Offset,
    SeedDay,
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
    parse_day,
    resolve_day,
    resolve_time,
    tool_adder,
)

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

NAME = "expenses"
Status = Literal["submitted", "approved", "rejected", "reimbursed"]
ReportStatus = Literal["draft", "submitted", "approved", "rejected", "reimbursed"]
#: Where a card transaction stands: booked (completed), not yet settled (pending), or voided (cancelled).
TransactionStatus = Literal["completed", "pending", "cancelled"]
ExpenseId = Annotated[str, Field(description="Expense id, as listed by expenses_list.")]
ReportId = Annotated[str, Field(description="Report id, as listed by expenses_list_reports.")]


class Policy(SeedModel):
    """The expense policy."""

    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    """Currency of the limits."""
    limits: dict[str, float] = {}
    """Highest amount of one claim per category; a category not listed is not reimbursable (when any are listed)."""
    receipt_over: float = Field(default=25, ge=0)
    """Claims above this amount need a receipt."""
    text: str = ""
    """The written policy, as employees read it."""


class Expense(SeedModel):
    """One expense claim."""

    id: str | None = None
    """Stable id; default ``exp-<n>`` by position."""
    employee: Email
    """Who claims it."""
    amount: float = Field(gt=0)
    """Amount."""
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    """ISO 4217 code."""
    category: str = Field(min_length=1)
    """Category, e.g. travel, meals."""
    merchant: str = ""
    """Where the money was spent."""
    date: SeedDay = "now-3d"
    """When it was spent."""
    description: str = ""
    """Business purpose."""
    receipt: bool = False
    """Whether a receipt is attached."""
    status: Status = "submitted"
    """Where the claim stands."""
    approver: Email | None = None
    """Who decided it, once decided."""
    note: str = ""
    """The decision's note or reason."""


class Transaction(SeedModel):
    """One card or account transaction, as the bank feed shows it."""

    id: str | None = None
    """Stable id; default ``txn-<n>`` by position."""
    date: SeedDay = "now-3d"
    """When it was booked."""
    amount: float
    """Amount spent; negative for a refund."""
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    """ISO 4217 code."""
    merchant: str = ""
    """Who was paid."""
    category: str = ""
    """Spending category, e.g. travel, meals; empty when not yet categorised."""
    account: str = "corporate card"
    """Card or account it was paid with, e.g. ``visa-4411``."""
    memo: str = ""
    """The bank's or the cardholder's note."""
    status: TransactionStatus = "completed"
    """completed (booked; the default), pending (authorised, not yet settled) or cancelled
    (voided): a claim matched against a pending or cancelled transaction is not yet, or no
    longer, backed by a payment."""


class Report(SeedModel):
    """An expense report: line items drawn from transactions and claims, with a computed total."""

    id: str | None = None
    """Stable id; default ``rpt-<n>`` by position."""
    title: str = Field(min_length=1)
    """What it covers, e.g. ``Berlin trip, March``."""
    employee: Email | None = None
    """Whose report it is; default the user."""
    transaction_ids: list[str] = []
    """Transactions on it, one line each, in this order."""
    expense_ids: list[str] = []
    """Claims on it, one line each, after the transactions."""
    status: ReportStatus = "draft"
    """Where it stands."""
    created: SeedTime = "now-1d"
    """When it was created."""
    submitted: SeedTime | None = None
    """When it was submitted; default ``created`` for a report past draft."""


class ExpensesSeed(SeedModel):
    """Initial state of the expenses service."""

    user: Email = "me@example.com"
    """The user's address: claimant of new expenses, approver of others'."""
    policy: Policy = Policy()
    """The expense policy."""
    expenses: list[Expense] = []
    """Claims."""
    transactions: list[Transaction] = []
    """The card and account feed."""
    reports: list[Report] = []
    """Expense reports."""

    @model_validator(mode="after")
    def _refs(self) -> "ExpensesSeed":
        expenses = check_unique(self.expenses, "exp", "expenses")
        transactions = check_unique(self.transactions, "txn", "transactions")
        check_unique(self.reports, "rpt", "reports")
        used: dict[str, int] = {}
        for n, r in enumerate(self.reports):
            for field, known, what in (("transaction_ids", transactions, "transaction"), ("expense_ids", expenses, "expense")):
                for k, rid in enumerate(getattr(r, field)):
                    check_ref(rid, known, f"reports[{n}].{field}[{k}]", what)
                    if r.status != "rejected" and rid in used:
                        raise ValueError(f"reports[{n}].{field}[{k}]: {what} {rid!r} is on reports[{used[rid]}] already")
                    if r.status != "rejected":
                        used[rid] = n
        return self


SEED = ExpensesSeed


def seed(store: Store, data: ExpensesSeed) -> None:
    """Write the seed's records and settings."""
    store.set_meta("user", data.user)
    store.set_meta("policy", data.policy.model_dump())
    for rid, e in zip(check_unique(data.expenses, "exp", "expenses"), data.expenses):
        store.insert("expenses", {**e.model_dump(), "id": rid, "date": resolve_day(e.date, store.now),
                                  "decided": None})
    for rid, t in zip(check_unique(data.transactions, "txn", "transactions"), data.transactions):
        store.insert("transactions", {**t.model_dump(), "id": rid, "date": resolve_day(t.date, store.now)})
    for rid, r in zip(check_unique(data.reports, "rpt", "reports"), data.reports):
        refs = [("transactions", x, "transaction") for x in r.transaction_ids] + \
            [("expenses", x, "expense") for x in r.expense_ids]
        sources = [(c, store.require(c, x, what)) for c, x, what in refs]  # the seed's validator checked them
        created = resolve_time(r.created, store.now)
        submitted = resolve_time(r.submitted, store.now) if r.submitted else None if r.status == "draft" else created
        store.insert("reports", {"id": rid, "title": r.title, "employee": r.employee or data.user, "status": r.status,
                                 **report_lines(sources),
                                 "created": created, "submitted": submitted})


def report_lines(sources: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The line items of a report drawn from ``(collection, record)`` pairs, and its totals.

    Returns:
        ``lines`` (one per source, numbered from 1), ``totals`` per currency, and ``total``
        and ``currency`` when every line shares one currency (mixed: None; no lines: 0).
    """
    lines = []
    for n, (collection, rec) in enumerate(sources, start=1):
        txn = collection == "transactions"
        lines.append({"line": n, "source": "transaction" if txn else "expense", "source_id": rec["id"],
                      "date": rec["date"], "merchant": rec["merchant"], "category": rec["category"],
                      "amount": rec["amount"], "currency": rec["currency"],
                      "description": rec["memo"] if txn else rec["description"]})
    totals: dict[str, float] = {}
    for line in lines:
        totals[line["currency"]] = round(totals.get(line["currency"], 0) + line["amount"], 2)
    currency, total = next(iter(totals.items())) if len(totals) == 1 else (None, None if totals else 0)
    return {"lines": lines, "totals": totals, "total": total, "currency": currency}


def violations(e: dict[str, Any], policy: dict[str, Any]) -> list[str]:
    """What in a claim breaks the policy, one sentence each."""
    out = []
    limits = policy["limits"]
    if limits and e["category"] not in limits:
        out.append(f"category {e['category']!r} is not reimbursable")
    elif e["category"] in limits and e["currency"] == policy["currency"] and e["amount"] > limits[e["category"]]:
        out.append(f"{e['amount']:g} {e['currency']} is over the {e['category']} limit of {limits[e['category']]:g}")
    if e["currency"] != policy["currency"]:
        out.append(f"currency {e['currency']} differs from the policy's {policy['currency']}; check the limit by hand")
    if e["amount"] > policy["receipt_over"] and not e["receipt"]:
        out.append(f"no receipt for a claim over {policy['receipt_over']:g}")
    return out


def register(mcp: ToolApp, ctx: ServiceContext, allowed: set[str]) -> None:
    """Add the allowed expenses tools to ``mcp``."""
    store = Store(ctx, NAME)
    tool = tool_adder(mcp, allowed)

    def policy() -> dict[str, Any]:
        return store.meta("policy") or Policy().model_dump()

    def user() -> str:
        return store.meta("user", "me@example.com")

    def decide(expense_id: str, status: str, note: str) -> dict[str, Any]:
        e = store.require("expenses", expense_id, "expense")
        if e["status"] != "submitted":
            raise ToolError(f"Expense {expense_id!r} is {e['status']}; only submitted claims can be decided")
        if e["employee"] == user():
            raise ToolError(f"Permission denied: you cannot decide your own expense {expense_id!r}")
        rec, changed = store.update("expenses", expense_id, {"status": status, "approver": user(), "note": note,
                                                              "decided": iso(store.now)})
        store.audit("approve" if status == "approved" else "reject", [expense_id], changed)
        return {**rec, "policy_violations": violations(rec, policy())}

    @tool("expenses_list", READ)
    def expenses_list(status: Status | None = None,
                      employee: Annotated[str | None, Field(description="Claimant address.")] = None,
                      category: str | None = None, offset: Offset = 0, limit: Limit = 20) -> dict:
        """List expense claims, newest first, each with its policy violations."""
        with store.tx():
            pol = policy()
            items = [e for e in store.all("expenses") if (status is None or e["status"] == status)
                     and (employee is None or e["employee"] == employee.lower())
                     and (category is None or e["category"] == category)]
        items.sort(key=lambda e: (e["date"], e["id"]), reverse=True)
        return page([{**e, "policy_violations": violations(e, pol)} for e in items], offset, limit, "expenses")

    @tool("expenses_get", READ)
    def expenses_get(expense_id: ExpenseId) -> dict:
        """Read one claim with its policy violations."""
        with store.tx():
            e = store.require("expenses", expense_id, "expense")
            return {**e, "policy_violations": violations(e, policy())}

    @tool("expenses_get_policy", READ)
    def expenses_get_policy() -> dict:
        """Read the expense policy: limits per category, receipt rule and its text."""
        with store.tx():
            return policy()

    @tool("expenses_submit", hints())
    def expenses_submit(amount: Annotated[float, Field(gt=0)], category: Annotated[str, Field(min_length=1)],
                        date: Annotated[str, Field(description="When it was spent, YYYY-MM-DD.")],
                        merchant: str = "", description: str = "",
                        currency: Annotated[str | None, Field(pattern=r"^[A-Z]{3}$", description="Default the policy's.")] = None,
                        receipt: bool = False) -> dict:
        """Submit an expense claim of your own."""
        day = parse_day(date, "date")
        with store.tx():
            pol = policy()
            if pol["limits"] and category not in pol["limits"]:
                raise ToolError(f"Unknown category {category!r}; categories: {', '.join(pol['limits'])}")
            rid = store.new_id("expenses", "exp")
            rec = {"id": rid, "employee": user(), "amount": amount, "currency": currency or pol["currency"],
                   "category": category, "merchant": merchant, "date": day, "description": description,
                   "receipt": receipt, "status": "submitted", "approver": None, "note": "", "decided": None}
            store.insert("expenses", rec)
            store.audit("submit", [rid], [k for k in rec if k != "id"])
        return {**rec, "policy_violations": violations(rec, pol)}

    @tool("expenses_approve", hints(destructive=True))
    def expenses_approve(expense_id: ExpenseId, note: str = "") -> dict:
        """Approve someone else's submitted claim for payment; it cannot be undone."""
        with store.tx():
            return decide(expense_id, "approved", note)

    @tool("expenses_reject", hints(destructive=True))
    def expenses_reject(expense_id: ExpenseId,
                        reason: Annotated[str, Field(min_length=1, description="Why, for the claimant.")]) -> dict:
        """Reject someone else's submitted claim; it cannot be undone."""
        with store.tx():
            return decide(expense_id, "rejected", reason)

    def holder(collection: str, rid: str) -> str | None:
        """The report (not rejected) that holds a transaction or claim, if any."""
        field = "transaction" if collection == "transactions" else "expense"
        for r in store.all("reports"):
            if r["status"] != "rejected" and any(x["source"] == field and x["source_id"] == rid for x in r["lines"]):
                return r["id"]
        return None

    @tool("expenses_list_transactions", READ)
    def expenses_list_transactions(
        query: Annotated[str, Field(description="Words that must all occur in merchant, memo, category or account.")] = "",
        category: str | None = None,
        account: Annotated[str | None, Field(description="Card or account, as the transactions name it.")] = None,
        start: Annotated[str | None, Field(description="Only on or after this date, YYYY-MM-DD.")] = None,
        end: Annotated[str | None, Field(description="Only on or before this date, YYYY-MM-DD.")] = None,
        unreported: Annotated[bool, Field(description="Only transactions on no report (rejected reports aside).")] = False,
        status: Annotated[TransactionStatus | None, Field(description="Only completed, pending or cancelled transactions.")] = None,
        offset: Offset = 0, limit: Limit = 20,
    ) -> dict:
        """List card and account transactions, newest first, each with its status and the report holding it (report_id)."""
        lo = parse_day(start, "start") if start else None
        hi = parse_day(end, "end") if end else None
        with store.tx():
            items = [{**t, "report_id": holder("transactions", t["id"])} for t in store.all("transactions")]
        items = [t for t in items if matches(query, t["merchant"], t["memo"], t["category"], t["account"])
                 and (category is None or t["category"].lower() == category.strip().lower())
                 and (account is None or t["account"].lower() == account.strip().lower())
                 and (lo is None or t["date"] >= lo) and (hi is None or t["date"] <= hi)
                 and not (unreported and t["report_id"]) and (status is None or t["status"] == status)]
        items.sort(key=lambda t: (t["date"], t["id"]), reverse=True)
        return page(items, offset, limit, "transactions")

    @tool("expenses_list_reports", READ)
    def expenses_list_reports(status: ReportStatus | None = None,
                              employee: Annotated[str | None, Field(description="Whose reports; default everyone's.")] = None,
                              offset: Offset = 0, limit: Limit = 20) -> dict:
        """List expense reports, newest first, with their totals (lines left out)."""
        with store.tx():
            items = [r for r in store.all("reports") if (status is None or r["status"] == status)
                     and (employee is None or r["employee"] == employee.lower())]
        items.sort(key=lambda r: (r["created"], r["id"]), reverse=True)
        return page([{**{k: v for k, v in r.items() if k != "lines"}, "line_count": len(r["lines"])} for r in items],
                    offset, limit, "reports")

    @tool("expenses_get_report", READ)
    def expenses_get_report(report_id: ReportId) -> dict:
        """Read one report with its line items and totals."""
        with store.tx():
            return store.require("reports", report_id, "report")

    @tool("expenses_create_report", hints())
    def expenses_create_report(
        title: Annotated[str, Field(min_length=1, description="What the report covers.")],
        transaction_ids: Annotated[list[str], Field(description="Transactions to put on it, one line each.")] = [],
        expense_ids: Annotated[list[str], Field(description="Your own claims to put on it, one line each.")] = [],
    ) -> dict:
        """Create a draft expense report whose lines are the given transactions and claims; the total is computed."""
        if not transaction_ids and not expense_ids:
            raise ToolError("An empty report: give transaction_ids or expense_ids")
        for ids, what in ((transaction_ids, "transaction"), (expense_ids, "expense")):
            twice = sorted({x for x in ids if ids.count(x) > 1})
            if twice:
                raise ToolError(f"{what.capitalize()} {twice[0]!r} is listed twice; a line per {what}")
        with store.tx():
            sources = []
            for collection, ids, what in (("transactions", transaction_ids, "transaction"), ("expenses", expense_ids, "expense")):
                for rid in ids:
                    rec = store.require(collection, rid, what)
                    if collection == "expenses" and rec["employee"] != user():
                        raise ToolError(f"Expense {rid!r} is {rec['employee']}'s claim; a report holds only your own")
                    on = holder(collection, rid)
                    if on is not None:
                        raise ToolError(f"{what.capitalize()} {rid!r} is on report {on!r} already")
                    sources.append((collection, rec))
            rid = store.new_id("reports", "rpt")
            rec = {"id": rid, "title": title, "employee": user(), "status": "draft", **report_lines(sources),
                   "created": iso(store.now), "submitted": None}
            store.insert("reports", rec)
            store.audit("create_report", [rid], [k for k in rec if k != "id"])
        return rec

    @tool("expenses_submit_report", hints(idempotent=True))
    def expenses_submit_report(report_id: ReportId) -> dict:
        """Submit a draft report of your own for approval; a submitted one stays as it is."""
        with store.tx():
            r = store.require("reports", report_id, "report")
            if r["employee"] != user():
                raise ToolError(f"Permission denied: report {report_id!r} is {r['employee']}'s, not yours")
            if r["status"] == "submitted":
                return r
            if r["status"] != "draft":
                raise ToolError(f"Report {report_id!r} is {r['status']}; only a draft can be submitted")
            if not r["lines"]:
                raise ToolError(f"Report {report_id!r} has no lines; an empty report cannot be submitted")
            rec, changed = store.update("reports", report_id, {"status": "submitted", "submitted": iso(store.now)})
            store.audit("submit_report", [report_id], changed)
        return rec
