"""The business side of the world: CRM accounts with deals and history, projects, expenses,
card transactions and reports, warehouses, products and orders."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime, timedelta

from . import names
from .base import Size, money, workday
from .model import (
    Account,
    Activity,
    CardTransaction,
    Deal,
    Expense,
    ExpenseReport,
    External,
    Office,
    Order,
    OrderLine,
    Org,
    Person,
    Product,
    Project,
    Warehouse,
)
from .texts import CATEGORIES, ExpenseTerms

STAGES = ("prospecting", "qualification", "proposal", "negotiation", "closed_won", "closed_lost")
CURRENCY = {"DE": "EUR", "GB": "GBP", "BR": "BRL", "JP": "JPY"}


def currency_of(country: str) -> str:
    """The currency a company of ``country`` trades in (USD unless listed)."""
    return CURRENCY.get(country, "EUR" if country in ("FR", "ES") else "USD")


def sellers(people: Sequence[Person], user: Person) -> list[Person]:
    """Who owns accounts and deals: sales and customer-success staff (and the user)."""
    out = [p for p in people if p.department in ("Sales", "Customer Success") and "VP" not in p.title]
    return out + ([user] if user not in out else [])


def crm(rng: random.Random, clock: datetime, orgs: Sequence[Org], externals: Sequence[External],
        people: Sequence[Person], user: Person) -> tuple[tuple[Account, ...], tuple[Deal, ...], tuple[Activity, ...]]:
    """An account per customer, one to three deals each (some deal names repeat across accounts),
    and a history of calls, mails, meetings and notes."""
    owners = sellers(people, user)
    accounts: list[Account] = []
    deals: list[Deal] = []
    acts: list[Activity] = []
    common = ("Renewal " + str(clock.year), "Support Plus upgrade", "Pilot expansion")
    for n, org in enumerate(o for o in orgs if o.kind == "customer"):
        contacts = tuple(x.id for x in externals if x.org == org.id)
        owner = user if n % 3 == 0 else rng.choice(owners)
        cur = currency_of(org.country)
        status = rng.choices(("active", "prospect", "inactive", "churned"), (6, 2, 1, 1))[0]
        acct = Account(f"acct-{n + 1:03d}", org.id, rng.choice(("enterprise", "gold", "silver", "bronze")), status,
                       money(rng, 2e5, 5e7, 1000), cur, owner.id, contacts,
                       clock - timedelta(days=rng.randint(1, 120), hours=rng.randint(0, 8)),
                       rng.choice(("", "Prefers calls on Tuesdays.", "Budget freeze until next quarter.",
                                   "Renewal owner changed this year.", "Asked for a security questionnaire.")))
        accounts.append(acct)
        for k in range(rng.randint(1, 3)):
            name = rng.choice(common) if rng.random() < 0.35 else \
                f"{org.name.split()[0]} {rng.choice(names.PRODUCT_WORDS)[0]} {rng.choice(('rollout', 'order', 'expansion'))}"
            stage = rng.choice(STAGES if status != "prospect" else STAGES[:3])
            deals.append(Deal(f"deal-{len(deals) + 1:03d}", acct.id, name, stage, money(rng, 5e3, 4e5, 500), cur,
                              (clock + timedelta(days=rng.randint(-60, 120))).date(),
                              owner.id if rng.random() < 0.7 else rng.choice(owners).id))
        for _ in range(rng.randint(2, 5)):
            kind = rng.choice(("call", "email", "meeting", "note", "task"))
            deal = rng.choice([d for d in deals if d.account == acct.id])
            contact = rng.choice(contacts) if contacts else None
            acts.append(Activity(f"act-{len(acts) + 1:03d}", acct.id, contact, deal.id, kind,
                                 f"{kind.title()} about {deal.name}",
                                 rng.choice(("Discussed timeline and next steps.", "They asked for a discount.",
                                             "Sent the revised quote.", "Legal review pending on their side.",
                                             "Agreed to follow up next week.")),
                                 clock - timedelta(days=rng.randint(1, 90), hours=rng.randint(0, 9)), owner.id))
    return tuple(accounts), tuple(deals), tuple(acts)


def projects(rng: random.Random, size: Size, clock: datetime, people: Sequence[Person],
             accounts: Sequence[Account], currency: str) -> tuple[Project, ...]:
    """Projects with an owner, members from several departments, a budget and what was spent;
    their plan documents and files have ids and paths fixed here (``doc-plan-N``)."""
    out = []
    words = rng.sample(names.PROJECT_WORDS, size.projects)
    goals = rng.sample(names.PROJECT_GOALS, size.projects)
    leads = [p for p in people if p.department not in ("Executive",)]
    for n, (word, goal) in enumerate(zip(words, goals)):
        owner = rng.choice(leads)
        members = tuple(sorted({owner.id, *(p.id for p in rng.sample(leads, rng.randint(3, 7)))}))
        start = (clock - timedelta(days=rng.randint(10, 120))).date()
        end = start + timedelta(weeks=rng.randint(8, 30))
        budget = money(rng, 4e4, 9e5, 1000)
        spent = round(budget * rng.uniform(0.1, 1.15), 2)
        status = "at-risk" if spent > budget * 0.95 else rng.choice(("planned", "active", "active", "done"))
        acct = rng.choice(accounts).id if accounts and rng.random() < 0.4 else None
        slug = names.slug(word)
        out.append(Project(f"proj-{n + 1:02d}", word, goal, owner.id, members, acct, budget, currency, spent, start,
                           end, status, (f"doc-plan-{n + 1:02d}",),
                           (f"projects/{slug}/budget.xlsx", f"projects/{slug}/plan.docx")))
    return tuple(out)


def expenses(rng: random.Random, size: Size, clock: datetime, people: Sequence[Person], user: Person,
             terms: ExpenseTerms) -> tuple[tuple[Expense, ...], tuple[CardTransaction, ...], tuple[ExpenseReport, ...]]:
    """Claims across the company (some over a limit or without a needed receipt), the card feed
    of the user and a few colleagues, and reports bundling them."""
    claims: list[Expense] = []
    merchants = {"airfare": ("SkyBridge Air", "Lufthansa", "Qantas"), "lodging": ("Harbour Hotel", "Cityline Suites"),
                 "meals": ("Trattoria Roma", "Noodle Bar", "Café Central"), "ground": ("Metro Cabs", "RailLink"),
                 "entertainment": ("Skyline Lounge", "Steakhouse 21"), "software": ("Figmentary", "CodeCloud"),
                 "training": ("LearnPro", "CertHub"), "conference": ("DataConf", "OpsSummit"),
                 "home-office": ("DeskDepot", "ErgoShop"), "phone": ("TelcoOne", "MobileMax")}
    claimants = [user] + rng.sample([p for p in people if p.id != user.id], min(len(people) - 1, 8))
    for n in range(size.expenses):
        who = claimants[n % len(claimants)] if n < len(claimants) else rng.choice(claimants)
        key = rng.choice([c for c, _, _ in CATEGORIES])
        limit = terms.limits[key]
        amount = money(rng, limit * 0.2, limit * (1.25 if rng.random() < 0.2 else 0.98))
        status = rng.choices(("submitted", "approved", "rejected", "reimbursed"), (5, 3, 1, 2))[0]
        claims.append(Expense(f"exp-{n + 1:03d}", who.id, amount, terms.currency, key, rng.choice(merchants[key]),
                              (clock - timedelta(days=rng.randint(1, 50))).date(),
                              rng.choice(("Customer visit", "Team offsite", "Conference trip", "Late delivery "
                                          "night", "Quarterly planning")),
                              amount <= terms.receipt_over or rng.random() < 0.8, status,
                              who.manager if status != "submitted" else None))
    holders = [user] + rng.sample([p for p in people if p.id != user.id], 2)
    txns: list[CardTransaction] = []
    for n in range(size.expenses // 2 + 4):
        holder = holders[n % len(holders)]
        key = rng.choice([c for c, _, _ in CATEGORIES])
        amount = money(rng, 8, terms.limits[key])
        if rng.random() < 0.06:
            amount = -amount  # a refund
        txns.append(CardTransaction(f"txn-{n + 1:03d}", holder.id, (clock - timedelta(days=rng.randint(1, 40))).date(),
                                    amount, terms.currency, rng.choice(merchants[key]),
                                    key if rng.random() < 0.8 else "", f"visa-{4000 + int(holder.id[2:]) * 7}",
                                    rng.choice(("", "team lunch", "client dinner", "taxi to airport", "monthly plan"))))
    mine_claims = [c.id for c in claims if c.employee == user.id]
    mine_txns = [t.id for t in txns if t.holder == user.id]
    reports = [ExpenseReport("rpt-001", f"{(clock - timedelta(days=30)):%B} expenses", user.id,
                             tuple(mine_claims[:2]), tuple(mine_txns[:3]), "draft",
                             clock - timedelta(days=2), "finance/expense-reports/rpt-001.xlsx")]
    other = [c for c in claims if c.employee != user.id and c.id not in mine_claims]
    if other:
        emp = other[0].employee
        reports.append(ExpenseReport("rpt-002", "Conference trip", emp,
                                     tuple(c.id for c in other if c.employee == emp)[:3], (), "submitted",
                                     clock - timedelta(days=5)))
    return tuple(claims), tuple(txns), tuple(reports)


def inventory(rng: random.Random, size: Size, clock: datetime, offices: Sequence[Office], orgs: Sequence[Org],
              accounts: Sequence[Account]
              ) -> tuple[tuple[Warehouse, ...], tuple[Product, ...], tuple[Order, ...]]:
    """Warehouses at two or three offices, products supplied by the vendors (stock above and
    below the reorder point), and customer orders by account contacts."""
    whs = tuple(Warehouse(f"wh-{names.slug(o.city)}", f"{o.city} warehouse", o.id) for o in offices[:3])
    vendors = [o for o in orgs if o.kind == "vendor"]
    products: list[Product] = []
    used: set[str] = set()
    for n in range(size.products):
        word, cat = rng.choice(names.PRODUCT_WORDS)
        model = rng.choice(("S", "M", "X", "Pro", "Lite", "2", "3"))
        name = f"{word} {model}"
        if name in used:
            name = f"{word} {model}{n}"
        used.add(name)
        point = rng.randint(5, 40)
        stock = rng.randint(0, point - 1) if rng.random() < 0.3 else rng.randint(point, point * 6)
        products.append(Product(f"{names.slug(word)[:3].upper()}-{100 + n}", name, cat, money(rng, 15, 2500, 0.5),
                                stock, point, rng.choice(whs).id, rng.random() < 0.07, rng.choice(vendors).id))
    orders: list[Order] = []
    active = [a for a in accounts if a.contacts]
    for n in range(size.products // 2 + 3):
        acct = rng.choice(active)
        picked = rng.sample([p for p in products if not p.discontinued], rng.randint(1, 3))
        lines = tuple(OrderLine(p.id, rng.randint(1, 25), p.price) for p in picked)
        status = rng.choice(("placed", "processing", "shipped", "delivered", "cancelled"))
        orders.append(Order(f"ord-{n + 1:04d}", acct.id, rng.choice(acct.contacts), lines, status,
                            clock - timedelta(days=rng.randint(0, 30), hours=rng.randint(0, 12)),
                            f"1Z{rng.randint(10**9, 10**10 - 1)}" if status in ("shipped", "delivered") else ""))
    return whs, tuple(products), tuple(orders)


def due_in(rng: random.Random, clock: datetime, low: int, high: int) -> datetime:
    """A working day ``low``..``high`` working days from the clock, same time of day."""
    day = workday(clock.date(), rng.randint(low, high))
    return datetime.combine(day, clock.timetz())
