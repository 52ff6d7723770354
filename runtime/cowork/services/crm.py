"""CRM: accounts (tier, status, revenue), their contacts, deals with stages and amounts, logged activities, CSV
export, and exported reports (a record, and a CSV file in the workspace when asked)."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
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
    newest_first,
    page,
    parse_day,
    parse_time,
    resolve_day,
    resolve_time,
    tool_adder,
)

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

NAME = "crm"
ActivityKind = Literal["call", "email", "meeting", "note", "task"]
AccountStatus = Literal["prospect", "active", "inactive", "churned"]
STAGES = ["prospecting", "qualification", "proposal", "negotiation", "closed_won", "closed_lost"]
AccountId = Annotated[str, Field(description="Account id, as returned by crm_search.")]
DealId = Annotated[str, Field(description="Deal id, as returned by crm_search or crm_list_deals.")]
Amount = Annotated[float, Field(ge=0, description="Deal value in its currency.")]
Currency = Annotated[str, Field(pattern=r"^[A-Z]{3}$", description="ISO 4217 code, e.g. USD.")]
#: Columns of crm_export, in order.
EXPORT_COLUMNS = ("id", "name", "domain", "industry", "tier", "status", "revenue", "currency", "last_contact",
                  "owner")


class Account(SeedModel):
    """A customer or prospect company."""

    id: str | None = None
    """Stable id; default ``acct-<n>`` by position."""
    name: str = Field(min_length=1)
    """Company name."""
    domain: str = ""
    """Web/mail domain."""
    industry: str = ""
    """Industry."""
    owner: Email | None = None
    """Account owner; default the user."""
    tier: str = ""
    """Segment or tier, free text: gold, silver, bronze, enterprise..."""
    status: AccountStatus = "active"
    """Where the relationship stands: prospect, active, inactive or churned."""
    revenue: float | None = Field(None, ge=0)
    """Annual revenue of the account, in ``currency``; unknown when left out."""
    currency: str = Field("USD", pattern=r"^[A-Z]{3}$")
    """ISO 4217 code of ``revenue``."""
    last_contact: SeedTime | None = None
    """When someone last spoke with the account; unknown when left out."""
    notes: str = ""
    """Free notes."""


class Contact(SeedModel):
    """A person at an account."""

    id: str | None = None
    """Stable id; default ``con-<n>`` by position."""
    account_id: str
    """Their account."""
    name: str = Field(min_length=1)
    """Full name."""
    email: Email | None = None
    """Address."""
    title: str = ""
    """Job title."""
    phone: str = ""
    """Phone number."""


class Deal(SeedModel):
    """A sales opportunity."""

    id: str | None = None
    """Stable id; default ``deal-<n>`` by position."""
    account_id: str
    """Account it is with."""
    name: str = Field(min_length=1)
    """Deal name."""
    stage: str = "prospecting"
    """One of the seed's stages."""
    amount: float = Field(0, ge=0)
    """Value."""
    currency: str = Field("USD", pattern=r"^[A-Z]{3}$")
    """ISO 4217 currency code."""
    close_date: SeedDay | None = None
    """Expected close date."""
    owner: Email | None = None
    """Deal owner; default the user."""


class Activity(SeedModel):
    """A logged call, email, meeting, note or task."""

    id: str | None = None
    """Stable id; default ``act-<n>`` by position."""
    kind: ActivityKind = "note"
    """What happened."""
    subject: str = Field(min_length=1)
    """One line."""
    notes: str = ""
    """Details."""
    account_id: str | None = None
    """Account it concerns."""
    contact_id: str | None = None
    """Contact it concerns."""
    deal_id: str | None = None
    """Deal it concerns."""
    at: SeedTime = "now-1d"
    """When it happened."""
    by: Email | None = None
    """Who logged it; default the user."""


class CrmSeed(SeedModel):
    """Initial state of the CRM."""

    user: Email = "me@example.com"
    """The user's address: owner of new records."""
    stages: list[str] = Field(default=STAGES, min_length=1)
    """Deal stages in pipeline order."""
    accounts: list[Account] = []
    """Accounts."""
    contacts: list[Contact] = []
    """Contacts at those accounts."""
    deals: list[Deal] = []
    """Deals."""
    activities: list[Activity] = []
    """Activities."""

    @model_validator(mode="after")
    def _refs(self) -> "CrmSeed":
        accounts = set(check_unique(self.accounts, "acct", "accounts"))
        contacts = set(check_unique(self.contacts, "con", "contacts"))
        deals = set(check_unique(self.deals, "deal", "deals"))
        check_unique(self.activities, "act", "activities")
        for n, c in enumerate(self.contacts):
            check_ref(c.account_id, accounts, f"contacts[{n}].account_id", "account")
        for n, d in enumerate(self.deals):
            check_ref(d.account_id, accounts, f"deals[{n}].account_id", "account")
            if d.stage not in self.stages:
                raise ValueError(f"deals[{n}].stage: unknown stage {d.stage!r}; stages: {', '.join(self.stages)}")
        for n, a in enumerate(self.activities):
            check_ref(a.account_id, accounts, f"activities[{n}].account_id", "account")
            check_ref(a.contact_id, contacts, f"activities[{n}].contact_id", "contact")
            check_ref(a.deal_id, deals, f"activities[{n}].deal_id", "deal")
        return self


SEED = CrmSeed


def _cell(value: Any) -> str:
    """A CSV cell: empty for unknown, whole numbers without a trailing ``.0``."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def seed(store: Store, data: CrmSeed) -> None:
    """Write the seed's records and settings."""
    store.set_meta("user", data.user)
    store.set_meta("stages", list(data.stages))
    for rid, a in zip(check_unique(data.accounts, "acct", "accounts"), data.accounts):
        store.insert("accounts", {**a.model_dump(), "id": rid, "owner": a.owner or data.user,
                                  "last_contact": resolve_time(a.last_contact, store.now) if a.last_contact else None})
    for rid, c in zip(check_unique(data.contacts, "con", "contacts"), data.contacts):
        store.insert("contacts", {**c.model_dump(), "id": rid})
    for rid, d in zip(check_unique(data.deals, "deal", "deals"), data.deals):
        store.insert("deals", {**d.model_dump(), "id": rid, "owner": d.owner or data.user,
                               "close_date": resolve_day(d.close_date, store.now) if d.close_date else None})
    for rid, act in zip(check_unique(data.activities, "act", "activities"), data.activities):
        store.insert("activities", {**act.model_dump(), "id": rid, "by": act.by or data.user,
                                    "at": resolve_time(act.at, store.now)})


def register(mcp: ToolApp, ctx: ServiceContext, allowed: set[str]) -> None:
    """Add the allowed CRM tools to ``mcp``."""
    store = Store(ctx, NAME)
    tool = tool_adder(mcp, allowed)

    def user() -> str:
        return store.meta("user", "me@example.com")

    def stage_ok(stage: str) -> str:
        stages = store.meta("stages", STAGES)
        if stage not in stages:
            raise ToolError(f"Unknown stage {stage!r}; stages: {', '.join(stages)}")
        return stage

    def activities(key: str, rid: str) -> list[dict[str, Any]]:
        return newest_first([a for a in store.all("activities") if a[key] == rid], "at")[:20]

    def create(collection: str, prefix: str, rec: dict[str, Any]) -> dict[str, Any]:
        rid = store.new_id(collection, prefix)
        rec = {"id": rid, **rec}
        store.insert(collection, rec)
        store.audit(f"create_{collection[:-1]}", [rid], [k for k in rec if k != "id"])
        return rec

    def update(collection: str, rid: str, changes: dict[str, Any]) -> dict[str, Any]:
        changes = {k: v for k, v in changes.items() if v is not None}
        if not changes:
            raise ToolError("Nothing to change: give at least one field")
        rec, changed = store.update(collection, rid, changes)
        if changed:
            store.audit(f"update_{collection[:-1]}", [rid], changed)
        return {**rec, "changed": changed}

    def account_filter(tier: str | None, status: str | None) -> set[str]:
        """Ids of the accounts in ``tier`` (any case) and ``status``."""
        return {a["id"] for a in store.all("accounts")
                if (tier is None or a["tier"].lower() == tier.strip().lower())
                and (status is None or a["status"] == status)}

    @tool("crm_search", READ)
    def crm_search(query: Annotated[str, Field(description="Words that must all occur in the record's name, email, domain or title.")] = "",
                   kind: Literal["all", "accounts", "contacts", "deals"] = "all",
                   tier: Annotated[str | None, Field(description="Only accounts of this tier (any case), and their contacts and deals.")] = None,
                   status: Annotated[AccountStatus | None, Field(description="Only accounts of this status, and their contacts and deals.")] = None,
                   offset: Offset = 0, limit: Limit = 20) -> dict:
        """Search accounts, contacts and deals by name, optionally within a tier or account status."""
        with store.tx():
            names = {a["id"]: a["name"] for a in store.all("accounts")}
            within = account_filter(tier, status)
            hits: list[dict[str, Any]] = []
            if kind in ("all", "accounts"):
                hits += [{"type": "account", "id": a["id"], "name": a["name"], "domain": a["domain"], "owner": a["owner"],
                          "tier": a["tier"], "status": a["status"], "revenue": a["revenue"], "currency": a["currency"],
                          "last_contact": a["last_contact"]}
                         for a in store.all("accounts")
                         if a["id"] in within and matches(query, a["name"], a["domain"], a["industry"])]
            if kind in ("all", "contacts"):
                hits += [{"type": "contact", "id": c["id"], "name": c["name"], "email": c["email"], "title": c["title"],
                          "account_id": c["account_id"], "account": names.get(c["account_id"])}
                         for c in store.all("contacts")
                         if c["account_id"] in within and matches(query, c["name"], c["email"], c["title"], names.get(c["account_id"]))]
            if kind in ("all", "deals"):
                hits += [{"type": "deal", "id": d["id"], "name": d["name"], "stage": d["stage"], "amount": d["amount"],
                          "currency": d["currency"], "account_id": d["account_id"], "account": names.get(d["account_id"])}
                         for d in store.all("deals")
                         if d["account_id"] in within and matches(query, d["name"], names.get(d["account_id"]))]
        return page(hits, offset, limit, "results")

    @tool("crm_export", READ)
    def crm_export(tier: Annotated[str | None, Field(description="Only accounts of this tier (any case).")] = None,
                   status: Annotated[AccountStatus | None, Field(description="Only accounts of this status.")] = None) -> dict:
        """Export accounts as CSV text (one row per account, a header first), in the result; writes no file."""
        with store.tx():
            within = account_filter(tier, status)
            rows = [a for a in store.all("accounts") if a["id"] in within]
        buf = io.StringIO()
        out = csv.writer(buf, lineterminator="\n")
        out.writerow(EXPORT_COLUMNS)
        for a in rows:
            out.writerow([_cell(a.get(k)) for k in EXPORT_COLUMNS])
        return {"format": "csv", "columns": list(EXPORT_COLUMNS), "rows": len(rows), "csv": buf.getvalue()}

    @tool("crm_export_report", hints())
    async def crm_export_report(
        title: Annotated[str, Field(min_length=1, description="The report's title.")],
        account_ids: Annotated[list[str], Field(min_length=1, description="Accounts on the report, one row each, in this order.")],
        summary: Annotated[str, Field(description="The report's summary text, for its readers.")] = "",
        path: Annotated[str | None, Field(description="Also save the report as a CSV file here, relative to /workspace.")] = None,
        overwrite: Annotated[bool, Field(description="Replace a file already at path.")] = False,
    ) -> dict:
        """Export a report of the given accounts: kept as a CRM report record (id, rows as CSV), and
        saved as a CSV file in the workspace when path is given."""
        twice = sorted({a for a in account_ids if account_ids.count(a) > 1})
        if twice:
            raise ToolError(f"Account {twice[0]!r} is listed twice; a row per account")

        def rows() -> str:
            with store.tx():
                accounts = [store.require("accounts", a, "account") for a in account_ids]
            buf = io.StringIO()
            out = csv.writer(buf, lineterminator="\n")
            out.writerow(EXPORT_COLUMNS)
            for a in accounts:
                out.writerow([_cell(a.get(k)) for k in EXPORT_COLUMNS])
            return buf.getvalue()

        text = await asyncio.to_thread(rows)
        data = text.encode()
        saved = None
        if path is not None:
            # The file first, as the agent (its permissions, the workspace's path rules): the call
            # itself is audited before it runs, and a refused path leaves no report behind.
            if ctx.files is None:
                raise ToolError("This server has no workspace to save the report into; leave path out")
            saved = await ctx.files.write(path, data, overwrite)

        def record() -> dict[str, Any]:
            with store.tx():
                rid = store.new_id("reports", "report")
                rec = {"id": rid, "title": title, "summary": summary, "account_ids": list(account_ids),
                       "columns": list(EXPORT_COLUMNS), "rows": len(account_ids), "csv": text,
                       "sha256": hashlib.sha256(data).hexdigest(), "path": saved, "format": "csv",
                       "by": user(), "created": iso(store.now)}
                store.insert("reports", rec)
                store.audit("export_report", [rid], [k for k in rec if k != "id"])
            return rec

        return await asyncio.to_thread(record)

    @tool("crm_get_account", READ)
    def crm_get_account(account_id: AccountId) -> dict:
        """Read an account with its contacts, deals and latest activities."""
        with store.tx():
            a = store.require("accounts", account_id, "account")
            return {**a, "contacts": [c for c in store.all("contacts") if c["account_id"] == account_id],
                    "deals": [d for d in store.all("deals") if d["account_id"] == account_id],
                    "activities": activities("account_id", account_id)}

    @tool("crm_get_deal", READ)
    def crm_get_deal(deal_id: DealId) -> dict:
        """Read a deal with its account name and latest activities."""
        with store.tx():
            d = store.require("deals", deal_id, "deal")
            account = store.get("accounts", d["account_id"]) or {}
            return {**d, "account": account.get("name"), "activities": activities("deal_id", deal_id)}

    @tool("crm_list_deals", READ)
    def crm_list_deals(stage: str | None = None, account_id: str | None = None,
                       owner: Annotated[str | None, Field(description="Owner address.")] = None,
                       offset: Offset = 0, limit: Limit = 20) -> dict:
        """List deals in pipeline order, with the total amount per currency."""
        with store.tx():
            stages = store.meta("stages", STAGES)
            if stage is not None:
                stage_ok(stage)
            if account_id is not None:
                store.require("accounts", account_id, "account")
            deals = [d for d in store.all("deals") if (stage is None or d["stage"] == stage)
                     and (account_id is None or d["account_id"] == account_id)
                     and (owner is None or d["owner"] == owner.lower())]
        deals.sort(key=lambda d: (stages.index(d["stage"]) if d["stage"] in stages else len(stages), d["id"]))
        totals: dict[str, float] = {}
        for d in deals:
            totals[d["currency"]] = totals.get(d["currency"], 0) + d["amount"]
        return {**page(deals, offset, limit, "deals"), "total_amount": totals}

    @tool("crm_create_account", hints())
    def crm_create_account(name: Annotated[str, Field(min_length=1)], domain: str = "", industry: str = "",
                           owner: Email | None = None, tier: str = "",
                           status: Annotated[AccountStatus, Field(description="Default prospect: a new account has done no business yet.")] = "prospect",
                           revenue: Annotated[float | None, Field(ge=0, description="Annual revenue, in currency.")] = None,
                           currency: Currency = "USD", notes: str = "") -> dict:
        """Create an account; a name already in use is refused."""
        with store.tx():
            for a in store.all("accounts"):
                if a["name"].lower() == name.lower():
                    raise ToolError(f"An account named {name!r} exists already: {a['id']!r}")
            return create("accounts", "acct", {"name": name, "domain": domain, "industry": industry,
                                               "owner": owner or user(), "tier": tier, "status": status,
                                               "revenue": revenue, "currency": currency, "last_contact": None,
                                               "notes": notes})

    @tool("crm_update_account", hints(destructive=True, idempotent=True))
    def crm_update_account(account_id: AccountId, name: str | None = None, domain: str | None = None,
                           industry: str | None = None, owner: Email | None = None, tier: str | None = None,
                           status: AccountStatus | None = None,
                           revenue: Annotated[float | None, Field(ge=0, description="Annual revenue, in the account's currency.")] = None,
                           last_contact: Annotated[str | None, Field(description="When the account was last contacted, ISO 8601.")] = None,
                           notes: str | None = None) -> dict:
        """Change an account's details: tier, status, revenue, last contact, owner, name, notes."""
        when = iso(parse_time(last_contact, "last_contact")) if last_contact else None
        with store.tx():
            store.require("accounts", account_id, "account")
            if name is not None:
                for a in store.all("accounts"):
                    if a["id"] != account_id and a["name"].lower() == name.lower():
                        raise ToolError(f"An account named {name!r} exists already: {a['id']!r}")
            return update("accounts", account_id, {"name": name, "domain": domain, "industry": industry,
                                                   "owner": owner, "tier": tier, "status": status,
                                                   "revenue": revenue, "last_contact": when, "notes": notes})

    @tool("crm_create_contact", hints())
    def crm_create_contact(account_id: AccountId, name: Annotated[str, Field(min_length=1)],
                           email: Email | None = None, title: str = "", phone: str = "") -> dict:
        """Add a contact to an account."""
        with store.tx():
            store.require("accounts", account_id, "account")
            return create("contacts", "con", {"account_id": account_id, "name": name, "email": email,
                                              "title": title, "phone": phone})

    @tool("crm_create_deal", hints())
    def crm_create_deal(account_id: AccountId, name: Annotated[str, Field(min_length=1)], amount: Amount,
                        stage: Annotated[str | None, Field(description="Stage; default the first.")] = None,
                        currency: Currency = "USD",
                        close_date: Annotated[str | None, Field(description="Expected close date, YYYY-MM-DD.")] = None,
                        owner: Email | None = None) -> dict:
        """Open a deal with an account."""
        with store.tx():
            store.require("accounts", account_id, "account")
            return create("deals", "deal", {
                "account_id": account_id, "name": name, "stage": stage_ok(stage) if stage else store.meta("stages", STAGES)[0],
                "amount": amount, "currency": currency,
                "close_date": parse_day(close_date, "close_date") if close_date else None, "owner": owner or user()})

    @tool("crm_update_deal", hints(destructive=True, idempotent=True))
    def crm_update_deal(deal_id: DealId, stage: str | None = None, amount: Amount | None = None,
                        close_date: Annotated[str | None, Field(description="YYYY-MM-DD.")] = None,
                        name: str | None = None, owner: Email | None = None) -> dict:
        """Change a deal's stage, amount, close date, name or owner."""
        with store.tx():
            store.require("deals", deal_id, "deal")
            return update("deals", deal_id, {"stage": stage_ok(stage) if stage else None, "amount": amount,
                                              "close_date": parse_day(close_date, "close_date") if close_date else None,
                                              "name": name, "owner": owner})

    @tool("crm_update_contact", hints(destructive=True, idempotent=True))
    def crm_update_contact(contact_id: Annotated[str, Field(description="Contact id.")], name: str | None = None,
                           email: Email | None = None, title: str | None = None, phone: str | None = None,
                           account_id: str | None = None) -> dict:
        """Change a contact's details or move them to another account."""
        with store.tx():
            store.require("contacts", contact_id, "contact")
            if account_id is not None:
                store.require("accounts", account_id, "account")
            return update("contacts", contact_id, {"name": name, "email": email, "title": title, "phone": phone,
                                                   "account_id": account_id})

    @tool("crm_log_activity", hints())
    def crm_log_activity(kind: ActivityKind, subject: Annotated[str, Field(min_length=1)], notes: str = "",
                         account_id: str | None = None, contact_id: str | None = None,
                         deal_id: str | None = None) -> dict:
        """Log a call, email, meeting, note or task against an account, contact or deal."""
        if account_id is None and contact_id is None and deal_id is None:
            raise ToolError("Give account_id, contact_id or deal_id: an activity must concern a record")
        with store.tx():
            for collection, rid, what in (("contacts", contact_id, "contact"), ("deals", deal_id, "deal")):
                if rid is not None:
                    linked = store.require(collection, rid, what)
                    account_id = account_id or linked["account_id"]
            if account_id is not None:
                store.require("accounts", account_id, "account")
            return create("activities", "act", {"kind": kind, "subject": subject, "notes": notes,
                                                "account_id": account_id, "contact_id": contact_id,
                                                "deal_id": deal_id, "at": iso(store.now), "by": user()})
