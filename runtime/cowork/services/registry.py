"""All mock services together: the seed model, seeding and reset, tool registration, state dumps and diffs."""

from __future__ import annotations

import inspect
import json
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

from pydantic import BaseModel, ConfigDict

from ..formats import canonical_json, diff_state, state_hash  # noqa: F401  (re-exported: the server's callers)
from . import (
    calendar,
    chat,
    config,
    contacts,
    crm,
    documents,
    expenses,
    inventory,
    kb,
    mail,
    memory,
    news,
    scheduler,
    tickets,
    todo,
    web,
)
from .base import ServiceContext, Store, open_db
from .calendar import CalendarSeed
from .chat import ChatSeed
from .config import ConfigSeed
from .contacts import ContactsSeed
from .crm import CrmSeed
from .documents import DocumentsSeed
from .expenses import ExpensesSeed
from .faults import FaultMiddleware
from .inventory import InventorySeed
from .kb import KbSeed
from .mail import MailSeed
from .memory import MemorySeed
from .names import SERVICE_TOOLS, TOOL_SERVICE
from .news import NewsSeed
from .scheduler import SchedulerSeed
from .tickets import TicketsSeed
from .todo import TodoSeed
from .web import WebSeed

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

#: Every service module by name. Each has NAME, SEED (its seed model), seed(store, data)
#: and register(mcp, ctx, allowed).
SERVICES: dict[str, ModuleType] = {
    m.NAME: m for m in (mail, calendar, contacts, documents, tickets, crm, chat, kb, expenses, todo,
                        inventory, config, scheduler, news, web, memory)
}


class ServicesSeed(BaseModel):
    """Initial records of every mock service; a service left out starts empty."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    mail: MailSeed | None = None
    """Mailboxes and messages."""
    calendar: CalendarSeed | None = None
    """Calendars and events."""
    contacts: ContactsSeed | None = None
    """People and organisations."""
    documents: DocumentsSeed | None = None
    """Folders and documents with sharing and versions."""
    tickets: TicketsSeed | None = None
    """Helpdesk agents, tickets and comments."""
    crm: CrmSeed | None = None
    """Accounts, contacts, deals and activities."""
    chat: ChatSeed | None = None
    """Users, channels, direct messages and threads."""
    kb: KbSeed | None = None
    """Knowledge-base pages and offline web pages."""
    expenses: ExpensesSeed | None = None
    """Expense policy, claims, card transactions and expense reports."""
    todo: TodoSeed | None = None
    """Task lists and tasks."""
    inventory: InventorySeed | None = None
    """Warehouses, products with stock levels, and orders."""
    config: ConfigSeed | None = None
    """Feature flags, settings and their change history."""
    scheduler: SchedulerSeed | None = None
    """Scheduled jobs and their runs."""
    news: NewsSeed | None = None
    """Subscribed RSS feeds, their items, and the offline feed directory."""
    web: WebSeed | None = None
    """Pages of the offline web, for web_search and web_fetch."""
    memory: MemorySeed | None = None
    """Memories the agent starts with (what an earlier session left), for memory_search."""


def seed_all(ctx: ServiceContext, seed: ServicesSeed) -> None:
    """Replace every service's state with the seeded one (services left out get their defaults).

    Args:
        ctx: The service context; its clock resolves relative seed times.
        seed: The validated seed.
    """
    with ctx.lock, ctx.db:
        ctx.db.execute("DELETE FROM records")
        ctx.db.execute("DELETE FROM meta")
        for name, module in SERVICES.items():
            data = getattr(seed, name)
            module.seed(Store(ctx, name), data if data is not None else module.SEED())
        records = ctx.db.execute("SELECT * FROM records ORDER BY rowid").fetchall()
        meta = ctx.db.execute("SELECT * FROM meta").fetchall()
    ctx.snapshot = (seed, ctx.clock, records, meta)
    ctx.seeded_ids = {}
    for service, collection, rid, _ in records:
        ctx.seeded_ids.setdefault((service, collection), set()).add(rid)


def reset(ctx: ServiceContext, seed: ServicesSeed) -> None:
    """Restore exactly the seeded state (same state hash) and restart the fault counters.

    The rows of the last seeding are re-inserted when the seed and clock are unchanged,
    so a reset costs one delete and one bulk insert.
    """
    snap = ctx.snapshot
    if snap is None or snap[0] is not seed or snap[1] != ctx.clock:
        seed_all(ctx, seed)
    else:
        with ctx.lock, ctx.db:
            ctx.db.execute("DELETE FROM records")
            ctx.db.execute("DELETE FROM meta")
            ctx.db.executemany("INSERT INTO records VALUES (?,?,?,?)", snap[2])
            ctx.db.executemany("INSERT INTO meta VALUES (?,?,?)", snap[3])
    if ctx.faults is not None:
        ctx.faults.reset()


def register_all(mcp: ToolApp, ctx: ServiceContext, allowed_tools: set[str]) -> None:
    """Add the allowed service tools to ``mcp``; names of other tools are ignored.

    When ``ctx.faults`` is set, the fault middleware is added too: call this after adding
    the audit middleware, so the audit log also records calls that a fault failed.
    """
    for name, module in SERVICES.items():
        wanted = set(SERVICE_TOOLS[name]) & set(allowed_tools)
        if wanted:
            module.register(mcp, ctx, wanted)
    if ctx.faults is not None:
        mcp.add_middleware(FaultMiddleware(ctx.faults, ctx.audit))


class _Recorder:
    """Takes the tool functions a service registers, serving nothing (see tool_parameters)."""

    def __init__(self) -> None:
        self.functions: dict[str, Callable[..., Any]] = {}

    def tool(self, name: str | None = None, **_: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.functions[name or fn.__name__] = fn
            return fn
        return deco

    def add_middleware(self, middleware: Any) -> None:
        return None


@lru_cache(maxsize=None)
def tool_parameters(tool: str) -> dict[str, bool] | None:
    """A service tool's arguments, each mapped to whether it is required; None for a tool that
    is not a service tool. Read from the function the service registers (no app is built)."""
    service = TOOL_SERVICE.get(tool)
    if service is None:
        return None
    recorder = _Recorder()
    SERVICES[service].register(recorder, ServiceContext(db=open_db()), {tool})
    params = inspect.signature(recorder.functions[tool]).parameters
    return {name: p.default is inspect.Parameter.empty for name, p in params.items()}


def dump_state(db: Any) -> dict[str, dict[str, dict[str, Any]]]:
    """Every service record as ``{service: {collection: {id: record}}}`` (JSON-able).

    Args:
        db: The services' sqlite3 connection (or a ServiceContext).
    """
    conn = getattr(db, "db", db)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for service, collection, rid, data in conn.execute(
            "SELECT service, collection, id, data FROM records ORDER BY service, collection, id"):
        out.setdefault(service, {}).setdefault(collection, {})[rid] = json.loads(data)
    return out
