"""Cross-references of a world: every id and address an entity names resolves to the right
kind of entity. :func:`problems` lists what does not (an empty list: the world is consistent)."""

from __future__ import annotations

from collections.abc import Iterable

from .model import WorldData
from .ops import FOLDERS


class _Refs:
    """Collects broken references, each as ``where: what``."""

    def __init__(self, w: WorldData) -> None:
        self.out: list[str] = []
        self.ids = {name: {x.id for x in getattr(w, name)} for name in (
            "offices", "people", "orgs", "externals", "accounts", "deals", "projects", "documents", "threads",
            "meetings", "tickets", "channels", "kb", "products", "orders", "jobs", "feeds", "warehouses", "expenses",
            "transactions", "reports", "activities", "todos", "policies")}
        self.files = {f.path for f in w.files}
        self.addresses = {p.email for p in w.people} | {x.email for x in w.externals}

    def need(self, where: str, value: str | None, kind: str, optional: bool = False) -> None:
        """``value`` is the id of an entity of ``kind`` (or None when ``optional``)."""
        if value is None and optional:
            return
        if value not in self.ids[kind]:
            self.out.append(f"{where}: {value!r} is not one of the {kind}")

    def all(self, where: str, values: Iterable[str], kind: str) -> None:
        """Every one of ``values`` is an id of ``kind``."""
        for v in values:
            self.need(where, v, kind)

    def address(self, where: str, value: str) -> None:
        """``value`` is the address of an employee or an outside contact."""
        if value not in self.addresses:
            self.out.append(f"{where}: {value!r} is nobody's address")

    def file(self, where: str, path: str) -> None:
        """``path`` is one of the world's office files."""
        if path not in self.files:
            self.out.append(f"{where}: no office file {path!r}")


def problems(w: WorldData) -> list[str]:
    """Every broken cross-reference of ``w`` (empty when all hold)."""
    r = _Refs(w)
    r.need("company", w.company, "orgs")
    r.need("user", w.user, "people")
    _people(w, r)
    _business(w, r)
    _comms(w, r)
    _ops(w, r)
    return r.out


def _people(w: WorldData, r: _Refs) -> None:
    for p in w.people:
        r.need(f"{p.id}.office", p.office, "offices")
        r.need(f"{p.id}.manager", p.manager, "people", optional=True)
        r.need(f"{p.id}.assistant", p.assistant, "people", optional=True)
    kinds = {o.id: o.kind for o in w.orgs}
    for o in w.orgs:
        r.need(f"{o.id}.imitates", o.imitates, "orgs", optional=o.kind != "lookalike")
    for x in w.externals:
        r.need(f"{x.id}.org", x.org, "orgs")
        if kinds.get(x.org) == "self":
            r.out.append(f"{x.id}.org: an outside contact works for the company itself")


def _business(w: WorldData, r: _Refs) -> None:
    org_of = {x.id: x.org for x in w.externals}
    deal_account = {d.id: d.account for d in w.deals}
    for a in w.accounts:
        r.need(f"{a.id}.org", a.org, "orgs")
        r.need(f"{a.id}.owner", a.owner, "people")
        for c in a.contacts:
            if org_of.get(c) != a.org:
                r.out.append(f"{a.id}.contacts: {c!r} does not work at {a.org!r}")
    for d in w.deals:
        r.need(f"{d.id}.account", d.account, "accounts")
        r.need(f"{d.id}.owner", d.owner, "people")
    for x in w.activities:
        r.need(f"{x.id}.account", x.account, "accounts")
        r.need(f"{x.id}.contact", x.contact, "externals", optional=True)
        r.need(f"{x.id}.deal", x.deal, "deals", optional=True)
        if x.deal and deal_account.get(x.deal) != x.account:
            r.out.append(f"{x.id}.deal: {x.deal!r} belongs to another account")
        r.need(f"{x.id}.by", x.by, "people")
    for p in w.projects:
        r.need(f"{p.id}.owner", p.owner, "people")
        r.all(f"{p.id}.members", p.members, "people")
        r.need(f"{p.id}.account", p.account, "accounts", optional=True)
        r.all(f"{p.id}.documents", p.documents, "documents")
        for path in p.files:
            r.file(f"{p.id}.files", path)
    for e in w.expenses:
        r.need(f"{e.id}.employee", e.employee, "people")
        r.need(f"{e.id}.approver", e.approver, "people", optional=True)
    for t in w.transactions:
        r.need(f"{t.id}.holder", t.holder, "people")
    for rep in w.reports:
        r.need(f"{rep.id}.employee", rep.employee, "people")
        r.all(f"{rep.id}.expenses", rep.expenses, "expenses")
        r.all(f"{rep.id}.transactions", rep.transactions, "transactions")
        if rep.file:
            r.file(f"{rep.id}.file", rep.file)
    for wh in w.warehouses:
        r.need(f"{wh.id}.office", wh.office, "offices")
    for prod in w.products:
        r.need(f"{prod.id}.warehouse", prod.warehouse, "warehouses")
        r.need(f"{prod.id}.vendor", prod.vendor, "orgs")
    accounts = {a.id: a for a in w.accounts}
    for o in w.orders:
        r.need(f"{o.id}.account", o.account, "accounts")
        if o.account in accounts and o.contact not in accounts[o.account].contacts:
            r.out.append(f"{o.id}.contact: {o.contact!r} is not a contact of {o.account!r}")
        r.all(f"{o.id}.lines", (ln.product for ln in o.lines), "products")


def _comms(w: WorldData, r: _Refs) -> None:
    for t in w.threads:
        ids = {m.id for m in t.messages}
        for m in t.messages:
            for a in (m.sender, *m.to, *m.cc, *m.bcc):
                r.address(f"{m.id}.participants", a)
            for path in m.attachments:
                r.file(f"{m.id}.attachments", path)
            if m.in_reply_to is not None and m.in_reply_to not in ids:
                r.out.append(f"{m.id}.in_reply_to: {m.in_reply_to!r} is not in thread {t.id!r}")
    for mtg in w.meetings:
        r.need(f"{mtg.id}.organizer", mtg.organizer, "people")
        r.all(f"{mtg.id}.attendees", mtg.attendees, "people")
        if not set(mtg.declined) <= set(mtg.attendees):
            r.out.append(f"{mtg.id}.declined: someone declined who was not invited")
    for tkt in w.tickets:
        r.address(f"{tkt.id}.requester", tkt.requester)
        r.need(f"{tkt.id}.assignee", tkt.assignee, "people", optional=True)
        for c in tkt.comments:
            r.address(f"{tkt.id}.comments", c.author)
    members = {c.id: set(c.members) for c in w.channels}
    channel_of = {m.id: m.channel for m in w.chat}
    for ch in w.channels:
        r.all(f"{ch.id}.members", ch.members, "people")
    for cm in w.chat:
        r.need(f"{cm.id}.channel", cm.channel, "channels")
        if cm.author not in members.get(cm.channel, set()):
            r.out.append(f"{cm.id}.author: {cm.author!r} is not a member of {cm.channel!r}")
        if cm.thread is not None and channel_of.get(cm.thread) != cm.channel:
            r.out.append(f"{cm.id}.thread: {cm.thread!r} is not a message of {cm.channel!r}")
        for _, who in cm.reactions:
            r.all(f"{cm.id}.reactions", who, "people")


def _ops(w: WorldData, r: _Refs) -> None:
    folders = {fid for fid, _ in FOLDERS}
    for d in w.documents:
        r.need(f"{d.id}.owner", d.owner, "people")
        r.all(f"{d.id}.shared_with", (pid for pid, _ in d.shared_with), "people")
        r.all(f"{d.id}.history", (who for _, who, _ in d.history), "people")
        if d.folder not in folders:
            r.out.append(f"{d.id}.folder: no folder {d.folder!r}")
    for pol in w.policies:
        r.need(f"{pol.id}.owner", pol.owner, "people")
        r.all(f"{pol.id}.versions", (v.document for v in pol.versions), "documents")
    for f in w.files:
        r.need(f"{f.path}.owner", f.owner, "people")
    for a in w.kb:
        r.need(f"{a.id}.author", a.author, "people")
    for fl in w.flags:
        r.need(f"flag {fl.key}.owner", fl.owner, "people")
    for c in w.config_history:
        r.need(f"{c.id}.by", c.by, "people")
    for j in w.jobs:
        r.need(f"{j.id}.owner", j.owner, "people")
    for run in w.runs:
        r.need(f"{run.id}.job", run.job, "jobs")
    for i in w.news:
        r.need(f"{i.id}.feed", i.feed, "feeds")
        r.all(f"{i.id}.mentions", i.mentions, "orgs")
    every = set().union(*r.ids.values())
    for t in w.todos:
        r.need(f"{t.id}.owner", t.owner, "people")
        for ref in t.refs:
            if ref not in every:
                r.out.append(f"{t.id}.refs: {ref!r} is no entity")
