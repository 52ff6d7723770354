"""Long documents of the world, written from its facts: the expense policy (every version),
the security and remote-work policies, project plans and knowledge-base articles.

The text is composed from the world's own figures (limits, approvers, offices, budgets,
milestones), so a question about a document has one answer the world knows. The longest
pages pass 20,000 characters: tasks that must find one clause in a long text need them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from .model import Office, Person

#: Expense categories: (key, what it covers, base limit per claim).
CATEGORIES: tuple[tuple[str, str, float], ...] = (
    ("airfare", "flights booked for business travel", 900.0), ("lodging", "hotel nights and serviced apartments", 260.0),
    ("meals", "meals while travelling or working late", 75.0), ("ground", "taxis, trains, rental cars and parking", 120.0),
    ("entertainment", "hosting customers and partners", 180.0), ("software", "software and subscriptions", 300.0),
    ("training", "courses, books and certifications", 1200.0), ("conference", "conference tickets and fees", 1500.0),
    ("home-office", "equipment for working from home", 400.0), ("phone", "mobile phone and data plans", 60.0),
)


@dataclass(frozen=True)
class ExpenseTerms:
    """The figures one version of the expense policy sets."""

    version: str
    effective: date
    currency: str
    limits: dict[str, float]
    receipt_over: float
    submit_days: int
    approver_over: float
    """Claims above this need the CFO as well as the manager."""


def expense_terms(rng: random.Random, version: int, effective: date, currency: str) -> ExpenseTerms:
    """The figures of version ``version`` (limits drift a little from version to version)."""
    scale = 1 + 0.08 * (version - 3) + rng.uniform(-0.03, 0.03)
    limits = {k: float(round(base * scale / 5) * 5) for k, _, base in CATEGORIES}
    return ExpenseTerms(f"{version}.0", effective, currency, limits, float(rng.choice((20, 25, 30, 40))),
                        rng.choice((30, 45, 60)), float(rng.choice((1000, 1500, 2500))))


def _p(*sentences: str) -> str:
    return " ".join(s for s in sentences if s)


def expense_policy(terms: ExpenseTerms, company: str, cfo: Person, controller: Person, offices: Sequence[Office],
                   status: str, rng: random.Random) -> str:
    """The full expense policy of one version, in Markdown (well over 20,000 characters)."""
    cur = terms.currency
    out = [f"# {company} Travel and Expense Policy", "",
           f"Version {terms.version} ({status}), effective {terms.effective:%d %B %Y}. Owner: {cfo.name}, "
           f"{cfo.title}. Questions go to {controller.name} ({controller.email}).", "",
           "## 1. Purpose and scope", "",
           _p(f"This policy says which business expenses {company} pays for, up to which amounts, and how "
              "employees claim them.", "It applies to every employee, contractor and intern, in every office, "
              "and to expenses paid personally as well as with a corporate card.",
              "Where a local law requires more than this policy, the law wins; where this policy is stricter, "
              "this policy applies."), "",
           "## 2. Definitions", ""]
    defs = (("Claim", "one expense submitted for reimbursement, with its amount, category, merchant and purpose"),
            ("Limit", "the highest amount of a single claim in a category, in " + cur),
            ("Receipt", "an itemised proof of payment from the merchant; a card slip alone is not a receipt"),
            ("Approver", "the claimant's manager, and for larger claims also the CFO"),
            ("Corporate card", "a company-issued card whose transactions appear in the expense feed"),
            ("Per diem", "a fixed daily allowance that replaces individual meal claims where a country sets one"),
            ("Business purpose", "one sentence saying why the expense was needed for the company's work"),
            ("Report", "a bundle of claims and card transactions submitted together for approval"))
    out += [f"- **{term}**: {meaning}." for term, meaning in defs] + [""]
    out += ["## 3. Approvals", "",
            _p(f"Every claim needs its claimant's manager's approval. Claims above {terms.approver_over:,.2f} {cur} "
               f"also need {cfo.name} ({cfo.title}).", "Nobody approves their own claim, nor a claim of someone "
               "they report to.", f"When an approver is out of office for more than three working days, "
               f"{controller.name} may approve in their place and records that in the claim's note."), "",
            "## 4. Limits per claim", "", "| category | covers | limit (" + cur + ") |", "|---|---|---|"]
    out += [f"| {key} | {what} | {terms.limits[key]:,.2f} |" for key, what, _ in CATEGORIES] + [""]
    out += [_p("A category not in this table is not reimbursable.", "Splitting one expense into several claims "
               "to stay under a limit is a breach of this policy and is reported to the claimant's manager."), ""]
    out += ["## 5. Rules per category", ""]
    for key, what, _ in CATEGORIES:
        out += [f"### 5.{CATEGORIES.index((key, what, _)) + 1} {key.replace('-', ' ').title()}", "",
                *_category_rules(key, what, terms, rng), ""]
    out += ["## 6. Receipts", "",
            _p(f"Claims above {terms.receipt_over:,.2f} {cur} need a receipt attached.", "A lost receipt can be "
               "replaced once per quarter by a signed statement; a second missing receipt in the same quarter "
               "means the claim is rejected.", "Receipts in another language are accepted; the claimant adds a "
               "one-line translation of what was bought."), "",
            "## 7. Corporate cards", "",
            _p("Card transactions appear in the expense feed within two working days.", "Each must be put on a "
               f"report within {terms.submit_days} days of the booking date, with a category and a business "
               "purpose.", "Personal spending on a corporate card is not allowed; when it happens by mistake, the "
               "cardholder repays it within ten days and says so in the transaction memo."), "",
            "## 8. Deadlines and reimbursement", "",
            _p(f"Claims are submitted within {terms.submit_days} days of the expense.", "Approved claims are paid "
               "with the next payroll run; claims approved after the 20th of a month are paid the month after.",
               "Late claims are paid only with the CFO's written approval."), "",
            "## 9. Offices", ""]
    for office in offices:
        out += [f"### {office.city}", "", _office_note(office, terms, rng), ""]
    out += ["## 10. Questions and answers", ""]
    for key, what, _ in CATEGORIES:
        out += _faq(key, what, terms, rng)
    out += ["## 11. Worked examples", ""]
    for key, what, _ in CATEGORIES:
        out += _examples(key, terms, rng)
    out += ["## 12. Exceptions", "",
            _p("An exception is asked for before the expense, in writing, with the reason and the amount.",
               f"Only {cfo.name} grants exceptions; a granted exception is attached to the claim.",
               "An exception covers one expense, never a category or a period."), ""]
    return "\n".join(out)


def _category_rules(key: str, what: str, t: ExpenseTerms, rng: random.Random) -> list[str]:
    cur, limit = t.currency, t.limits[key]
    rules = [
        _p(f"This category covers {what}.", f"The limit of one claim is {limit:,.2f} {cur}.",
           rng.choice(("Amounts above the limit are not paid, even with a receipt.",
                       "The part above the limit is the claimant's own cost.",
                       "A claim above the limit is rejected as a whole and can be resubmitted at the limit."))),
        _p(rng.choice(("Book through the company travel tool where it offers the item.",
                       "Prefer the company's negotiated suppliers; their prices are already within the limit.",
                       "Compare at least two offers when the amount is above half the limit.")),
           f"Claims above {t.receipt_over:,.2f} {cur} in this category need an itemised receipt.",
           "The business purpose names the customer, project or event the expense was for."),
        _p(rng.choice(("Alcohol is not reimbursed unless a customer was hosted.",
                       "Upgrades, loyalty fees and late-booking surcharges are not reimbursed.",
                       "Tips are reimbursed up to ten percent of the bill.",
                       "Items that stay the company's property are tagged by IT before they are used.")),
           f"When the same expense is shared by several employees, the most senior person pays and claims it, "
           f"and names everyone present; the limit of {limit:,.2f} {cur} then applies per person."),
    ]
    if key in ("airfare", "lodging", "ground"):
        rules.append(_p("Travel is booked at least fourteen days ahead where the trip is known that early.",
                        "Business class is allowed only on flights longer than eight hours and with the CFO's "
                        "approval before booking."))
    if key in ("entertainment", "meals"):
        rules.append(_p("Entertaining public officials needs Legal's approval before the event.",
                        "The claim lists every guest by name and organisation."))
    return rules


def _office_note(office: Office, t: ExpenseTerms, rng: random.Random) -> str:
    return _p(f"Employees of the {office.city} office follow local time ({office.tz}) for every deadline in this "
              "policy.", rng.choice(("Local VAT is claimed back by Finance; claims show the gross amount.",
                                     "Taxi receipts must show the route and the time.",
                                     "Public transport passes are reimbursed pro rata for business days.",
                                     "The office keeps a list of approved hotels near the customer sites.")),
              f"Amounts in another currency are converted at the rate of the expense day; the limits in "
              f"{t.currency} apply after conversion.")


def _faq(key: str, what: str, t: ExpenseTerms, rng: random.Random) -> list[str]:
    cur, limit = t.currency, t.limits[key]
    return [f"**Can I claim {limit + rng.choice((5, 10, 25, 50)):,.2f} {cur} for {what}?**", "",
            f"Not in full: one claim of {key} is paid up to {limit:,.2f} {cur}. Ask for an exception before "
            "spending when a higher amount cannot be avoided.", "",
            f"**Do I need a receipt for {key} under {t.receipt_over:,.2f} {cur}?**", "",
            "No, but keep it for a year: Finance may ask for it in an audit sample.", "",
            f"**Who approves a {key} claim of {limit * 0.9:,.2f} {cur}?**", "",
            "The claimant's manager" + (f", and the CFO as well, since it is above {t.approver_over:,.2f} {cur}."
                                        if limit * 0.9 > t.approver_over else
                                        f" alone; the CFO signs only claims above {t.approver_over:,.2f} {cur}."),
            ""]


def _examples(key: str, t: ExpenseTerms, rng: random.Random) -> list[str]:
    cur, limit = t.currency, t.limits[key]
    out = []
    for claimed in (round(limit * rng.uniform(0.4, 0.95), 2), round(limit * rng.uniform(1.05, 1.6), 2)):
        paid = min(claimed, limit)
        receipt = "needs" if claimed > t.receipt_over else "does not need"
        out += [_p(f"*Example ({key}).* An employee claims {claimed:,.2f} {cur}.", f"The claim {receipt} a receipt "
                   f"(the threshold is {t.receipt_over:,.2f} {cur}).",
                   f"Finance pays {paid:,.2f} {cur}" + (f"; the {claimed - paid:,.2f} {cur} above the limit of "
                                                         f"{limit:,.2f} {cur} stay with the employee." if paid < claimed
                                                         else ", the full amount, because it is within the limit."),
                   "It is approved by the manager" + (f" and the CFO, being above {t.approver_over:,.2f} {cur}."
                                                       if claimed > t.approver_over else " alone.")), ""]
    return out


def security_policy(company: str, owner: Person, it_head: Person, version: str, effective: date,
                    rng: random.Random) -> str:
    """The information security policy (a few thousand characters)."""
    rules = (("Access", "Access is granted per role and reviewed every quarter by the system owner.",
              "Leavers lose every access on their last working day."),
             ("Passwords", f"Passwords have at least {rng.choice((12, 14, 16))} characters and are kept in the "
              "company password manager.", "Multi-factor authentication is on for every system that offers it."),
             ("Devices", "Laptops are encrypted and locked after five idle minutes.",
              "Lost devices are reported to IT within one hour."),
             ("Sharing", "Confidential documents are never shared outside the company without the owner's "
              "approval.", "External shares expire after thirty days."),
             ("Mail", "Mail asking for payments, passwords or gift cards is checked by phone with the sender "
              "before anything is done.", "Look-alike domains are reported to IT as phishing."),
             ("Incidents", f"Security incidents go to {it_head.name} ({it_head.email}) at once, day or night.",
              "Nobody investigates alone or deletes evidence."),
             ("Vendors", "Vendors with access to company data sign the data processing agreement first.",
              "Their access is reviewed yearly."))
    out = [f"# {company} Information Security Policy", "",
           f"Version {version}, effective {effective:%d %B %Y}. Owner: {owner.name}.", ""]
    for n, (head, a, b) in enumerate(rules, 1):
        out += [f"## {n}. {head}", "", _p(a, b, rng.choice((
            "Exceptions are approved in writing by the policy owner.", "Breaches are handled under the "
            "disciplinary procedure.", "The IT team checks this monthly and reports the findings.")))]
        out += ["", _p("Why: " + rng.choice(("most breaches start with stolen credentials.",
                                             "customers' contracts require it.",
                                             "auditors sample it every year.")),
                       "Ask IT when unsure before acting, not after."), ""]
    return "\n".join(out)


def remote_work_policy(company: str, owner: Person, version: str, effective: date, days: int) -> str:
    """The remote-work policy (short)."""
    return "\n".join([
        f"# {company} Remote Work Policy", "", f"Version {version}, effective {effective:%d %B %Y}. "
        f"Owner: {owner.name}.", "", "## Who", "",
        f"Every employee may work remotely up to {days} days a week after their probation period.", "",
        "## Core hours", "", "Meetings are placed inside the core hours of every attendee's own time zone; "
        "nobody is expected to join a meeting outside their working hours.", "",
        "## Equipment", "", "The home-office category of the expense policy covers equipment; IT ships a laptop and "
        "a headset.", ""])


def project_plan(name: str, goal: str, owner: Person, members: Sequence[Person], budget: float, currency: str,
                 start: date, end: date, workstreams: int, rng: random.Random, tasks: int = 6) -> str:
    """A project plan in Markdown: scope, milestones, workstreams with tasks, RACI, risks, budget,
    communication; ``workstreams`` and ``tasks`` (per workstream) set its length (12 and 14
    pass 20,000 characters)."""
    weeks = max(1, (end - start).days // 7)
    out = [f"# Project {name}: plan", "", f"Goal: {goal}. Owner: {owner.name} ({owner.title}). "
           f"Budget: {budget:,.2f} {currency}. Runs {start:%d %b %Y} to {end:%d %b %Y} ({weeks} weeks).", "",
           "## Scope", "", _p(f"The project delivers the {goal} for the whole company.",
                                "Out of scope: changes to contracts, price lists and the org chart.",
                                "Anything else is added only through the change process below."), "",
           "## Milestones", "", "| # | milestone | due | owner |", "|---|---|---|---|"]
    step = max(1, (end - start).days // 5)
    for n in range(5):
        who = members[n % len(members)] if members else owner
        out.append(f"| M{n + 1} | {('Kick-off', 'Design signed off', 'Build complete', 'Pilot', 'Go-live')[n]} | "
                   f"{start + timedelta(days=step * (n + 1)):%Y-%m-%d} | {who.name} |")
    out += ["", "## Workstreams", ""]
    verbs = ("Inventory", "Design", "Prototype", "Review", "Migrate", "Test", "Document", "Train", "Roll out",
             "Measure")
    objects = ("current processes", "data model", "integrations", "access roles", "reports", "user guides",
               "vendor contracts", "support runbooks", "cut-over plan", "success metrics")
    for w in range(workstreams):
        lead = members[w % len(members)] if members else owner
        out += [f"### W{w + 1}: {objects[w % len(objects)].capitalize()}", "",
                _p(f"Lead: {lead.name} ({lead.email}).", f"This workstream owns the {objects[w % len(objects)]} "
                   f"of the {goal} and reports weekly to {owner.name}."), ""]
        for t in range(tasks):
            days = rng.randint(2, 15)
            out.append(f"- {verbs[(w + t) % len(verbs)]} {objects[(w + t * 3) % len(objects)]}: {days} days, "
                       f"estimate {days * rng.choice((600, 750, 900)):,} {currency}; done when "
                       f"{rng.choice(('the lead signs it off', 'the pilot team accepts it', 'tests pass in staging', 'the owner reviews it'))}.")
        out += ["", _p("Dependencies: " + (f"W{w}" if w else "none") + ".", "Risks are logged below and "
                       "reviewed in the weekly meeting."), ""]
    out += ["## RACI", "", "| person | role | responsible for |", "|---|---|---|"]
    for n, m in enumerate(members):
        out.append(f"| {m.name} | {m.title} | W{n % max(1, workstreams) + 1} |")
    out += ["", "## Risks", "", "| risk | likelihood | impact | mitigation |", "|---|---|---|---|"]
    for n in range(max(4, workstreams)):
        out.append(f"| {rng.choice(('Key person away', 'Vendor slips', 'Data quality', 'Scope creep', 'Budget overrun', 'Security review fails'))} "
                   f"R{n + 1} | {rng.choice(('low', 'medium', 'high'))} | {rng.choice(('low', 'medium', 'high'))} | "
                   f"{rng.choice(('weekly check-in', 'second supplier', 'cleansing sprint', 'change board', 'monthly forecast', 'early review'))} |")
    out += ["", "## Budget", "", f"The budget of {budget:,.2f} {currency} splits into people "
            f"({budget * 0.6:,.2f}), vendors ({budget * 0.3:,.2f}) and contingency ({budget * 0.1:,.2f}). "
            "Spending above the contingency needs the steering group.", "",
            "## Communication", "", _p("A weekly status mail goes out on Fridays.", "Decisions are recorded in "
                                       "this document's decision log.", "The steering group meets monthly."), ""]
    return "\n".join(out)


def kb_article(title: str, space: str, facts: Sequence[tuple[str, str]], rng: random.Random,
               repeat: int = 1) -> str:
    """A knowledge-base article: an introduction, one section per ``(heading, fact)`` with steps,
    and troubleshooting; ``repeat`` > 1 writes a handbook (each fact in several situations)."""
    out = [f"# {title}", "", _p(f"This page belongs to the {space} space.", "It is kept current by its author; "
                                "tell them when a step no longer works."), ""]
    situations = ("in the office", "when working remotely", "on a new laptop", "for a new joiner",
                  "out of hours", "during an incident", "for a contractor", "after a password reset")
    for r in range(repeat):
        for head, fact in facts:
            where = situations[(r + len(head)) % len(situations)]
            out += [f"## {head}" + (f" ({where})" if repeat > 1 else ""), "", fact, ""]
            out += [f"{n}. {step}" for n, step in enumerate(rng.sample((
                "Open the self-service portal and sign in with single sign-on.",
                "Check that the device shows the company's certificate.",
                "Pick the matching request type; the form fills in your department.",
                "Attach a screenshot of the error message, if there is one.",
                "Wait for the confirmation mail before trying again.",
                "Restart the application after the change has been applied.",
                "Write down the ticket number for the follow-up."), 4), 1)] + [""]
    out += ["## Troubleshooting", "", _p("If a step fails twice, open a ticket with the IT team and mention this "
                                         "page.", "Do not share passwords or one-time codes in a ticket, a chat or "
                                         "a mail: IT never asks for them."), ""]
    return "\n".join(out)
