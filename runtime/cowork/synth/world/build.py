""":func:`build_world`: one seed, one organisation, built part by part in a fixed order."""

from __future__ import annotations

from datetime import datetime

from . import business, comms, files, names, ops, people
from .base import rng_for, size_of, world_clock
from .model import OfficeFile, Person
from .world import World


def _user(staff: tuple[Person, ...], seed: int) -> Person:
    """The person the agent works for: someone with a manager, outside the executive team."""
    heads = {t[0] for t in names.DEPARTMENTS.values()}
    pool = [p for p in staff if p.department in ("Sales", "Customer Success", "Operations", "Finance", "Marketing")
            and p.manager and p.title not in heads and p.title != "Executive Assistant"]
    return rng_for(seed, "user").choice(pool or [p for p in staff if p.manager])


def build_world(seed: int, size: str = "medium") -> World:
    """The world of ``seed``: people, organisations, business records, documents, office files,
    mail, calendars, tickets, chat and the rest, every cross-reference consistent.

    Deterministic: the same ``(seed, size)`` gives the same world, byte for byte
    (:meth:`World.to_json`). ``size`` is small, medium or large.

    Raises:
        CoworkError: ``size`` is unknown.
    """
    sz = size_of(size)
    clock = world_clock(seed)
    today = clock.date()

    def rng(part: str):
        return rng_for(seed, part)

    offs = people.offices(rng("offices"), sz)
    company = rng("company").choice(names.COMPANIES)
    directory = people.Directory(set(), set())
    staff = people.people(rng("people"), sz, offs, company[1], today, directory)
    by_id = {p.id: p for p in staff}
    user = _user(staff, seed)
    orgs = people.orgs(rng("orgs"), sz, company, offs[0])
    org_by_id = {o.id: o for o in orgs}
    exts = people.externals(rng("externals"), orgs, staff, directory)
    currency = business.currency_of(offs[0].country)
    policies, pol_docs, terms = ops.policies(rng("policies"), clock, company[0], staff, offs, currency)
    accounts, deals, acts = business.crm(rng("crm"), clock, orgs, exts, staff, user)
    projects = business.projects(rng("projects"), sz, clock, staff, accounts, currency)
    plan_docs = ops.project_documents(rng("plans"), clock, projects, by_id)
    claims, txns, reports = business.expenses(rng("expenses"), sz, clock, staff, user, terms)
    warehouses, products, orders = business.inventory(rng("inventory"), sz, clock, offs, orgs, accounts)
    cfo, controller = ops.head_of(staff, "Finance"), next(
        (p for p in staff if p.title == "Controller"), ops.head_of(staff, "Finance"))
    office_files, invoices, contracts, audit, draft = _files(
        seed, clock, staff, by_id, orgs, org_by_id, accounts, deals, projects, plan_docs, pol_docs, products, reports,
        claims, txns, cfo, controller)
    cast = comms.Cast(by_id, {x.id: x for x in exts}, org_by_id, user, cfo, controller, staff[0])
    threads = comms.mail(rng("mail"), sz, clock, cast, accounts, projects, {f.path: f for f in office_files},
                         invoices, audit, draft, contracts)
    meetings = comms.meetings(rng("calendar"), clock, staff, user, projects, accounts, org_by_id, cast.externals)
    tickets = comms.tickets(rng("tickets"), sz, clock, staff, exts, org_by_id)
    channels, chat = comms.chat(rng("chat"), clock, staff, user, projects)
    kb = ops.kb(rng("kb"), sz, clock, staff, [p.name for p in products])
    jobs, runs = ops.scheduler(rng("scheduler"), clock, staff)
    flags, settings, history = ops.config(rng("config"), clock, staff)
    feeds, news = ops.news(rng("news"), clock, orgs, company[0])
    todos = ops.todos(rng("todo"), clock, user, projects, accounts, org_by_id)
    return World(
        seed=seed, size=size, clock=clock, company="org-self", user=user.id, offices=offs, people=staff, orgs=orgs,
        externals=exts, accounts=accounts, deals=deals, activities=acts, projects=projects, policies=policies,
        documents=pol_docs + plan_docs, files=tuple(office_files), threads=threads, meetings=meetings,
        tickets=tickets, channels=channels, chat=chat, kb=kb, expenses=claims, transactions=txns, reports=reports,
        warehouses=warehouses, products=products, orders=orders, flags=flags, settings=settings,
        config_history=history, jobs=jobs, runs=runs, feeds=feeds, news=news, todos=todos)


def _files(seed: int, clock: datetime, staff, by_id, orgs, org_by_id, accounts, deals, projects, plan_docs, pol_docs,
           products, reports, claims, txns, cfo: Person, controller: Person
           ) -> tuple[list[OfficeFile], dict[str, str], dict[str, str], str | None, str]:
    """The office files, and where mail finds them: invoices by vendor, contracts by customer,
    the audit letter, the draft policy."""
    rng = rng_for(seed, "files")
    out: list[OfficeFile] = []
    plans = {d.id: d.text for d in plan_docs}
    for proj in projects:
        out += files.project_files(rng, proj, by_id[proj.owner], plans[proj.documents[0]])
    sales_head = ops.head_of(staff, "Sales")
    out.append(files.pipeline_report(clock, deals, {a.id: a for a in accounts}, org_by_id, sales_head))
    invoices = {}
    for n, vendor in enumerate(o for o in orgs if o.kind == "vendor"):
        f = files.invoice(rng, clock, vendor, org_by_id["org-self"], controller, 4100 + n * 37 + rng.randint(0, 30))
        invoices[vendor.id] = f.path
        out.append(f)
    contracts = {}
    for acct in accounts[:4]:
        f = files.contract(rng, acct, org_by_id[acct.org], org_by_id["org-self"], by_id[acct.owner])
        contracts[acct.org] = f.path
        out.append(f)
    out.append(files.stock_count(rng, clock, products, ops.head_of(staff, "Operations")))
    claim_by_id, txn_by_id = {c.id: c for c in claims}, {t.id: t for t in txns}
    for rep in reports:
        if rep.file:
            rows = [[t.day, t.merchant, t.category, t.amount, t.currency] for t in map(txn_by_id.get, rep.transactions)
                    if t] + [[c.day, c.merchant, c.category, c.amount, c.currency]
                             for c in map(claim_by_id.get, rep.expenses) if c]
            out.append(files.expense_export(rep, rows, by_id[rep.employee]))
    auditor = next((o for o in orgs if o.kind == "auditor"), None)
    audit = None
    if auditor:
        f = files.audit_letter(clock, auditor, org_by_id["org-self"], cfo,
                               ("Bank statements for December", "The fixed-asset register", "Expense reports above "
                                "the approval limit", "Signed customer contracts over 100k"))
        audit = f.path
        out.append(f)
    draft_doc = next(d for d in pol_docs if d.id == "doc-pol-expenses-draft")
    draft = files.policy_file("policies/expense-policy-draft.docx", draft_doc.title, draft_doc.text, controller)
    current = next(d for d in pol_docs if d.id == "doc-pol-expenses")
    out += [draft, files.policy_file("policies/expense-policy.pdf", current.title, current.text, cfo, "pdf")]
    return out, invoices, contracts, audit, draft.path
