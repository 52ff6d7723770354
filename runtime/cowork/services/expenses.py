"""Expenses: claims under a written policy, submitted, approved or rejected."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field, model_validator

from .base import (Email, Limit, Offset, READ, SeedDay, SeedModel, ServiceContext, Store, check_unique, hints,
                   iso, page, parse_day, resolve_day, tool_adder)

NAME = "expenses"
Status = Literal["submitted", "approved", "rejected", "reimbursed"]
ExpenseId = Annotated[str, Field(description="Expense id, as listed by expenses_list.")]


class Policy(SeedModel):
    """The expense policy."""

    currency: str = Field("USD", pattern=r"^[A-Z]{3}$")
    """Currency of the limits."""
    limits: dict[str, float] = {}
    """Highest amount of one claim per category; a category not listed is not reimbursable (when any are listed)."""
    receipt_over: float = Field(25, ge=0)
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
    currency: str = Field("USD", pattern=r"^[A-Z]{3}$")
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


class ExpensesSeed(SeedModel):
    """Initial state of the expenses service."""

    user: Email = "me@example.com"
    """The user's address: claimant of new expenses, approver of others'."""
    policy: Policy = Policy()
    """The expense policy."""
    expenses: list[Expense] = []
    """Claims."""

    @model_validator(mode="after")
    def _refs(self) -> "ExpensesSeed":
        check_unique(self.expenses, "exp", "expenses")
        return self


SEED = ExpensesSeed


def seed(store: Store, data: ExpensesSeed) -> None:
    """Write the seed's records and settings."""
    store.set_meta("user", data.user)
    store.set_meta("policy", data.policy.model_dump())
    for rid, e in zip(check_unique(data.expenses, "exp", "expenses"), data.expenses):
        store.insert("expenses", {**e.model_dump(), "id": rid, "date": resolve_day(e.date, store.now),
                                  "decided": None})


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


def register(mcp: FastMCP, ctx: ServiceContext, allowed: set[str]) -> None:
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
