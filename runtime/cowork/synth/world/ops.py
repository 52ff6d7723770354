"""The company's paperwork and machinery: policies with versions, project documents, the
knowledge base, feature flags and settings, scheduled jobs, news feeds and to-do lists."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import date, datetime, timedelta

from . import names, texts
from .base import Size
from .model import (
    Account,
    ConfigChange,
    Document,
    Feed,
    Flag,
    Job,
    JobRun,
    KbArticle,
    NewsItem,
    Office,
    Org,
    Person,
    Policy,
    PolicyVersion,
    Project,
    Setting,
    TodoItem,
)

FOLDERS = (("fld-policies", "Policies"), ("fld-projects", "Projects"), ("fld-finance", "Finance"),
           ("fld-customers", "Customers"), ("fld-people", "People"))


def head_of(people: Sequence[Person], dept: str) -> Person:
    """The head of ``dept`` (its first title), else the first person of the department, else the CEO."""
    head_title = names.DEPARTMENTS[dept][0]
    return next((p for p in people if p.department == dept and p.title == head_title),
                next((p for p in people if p.department == dept), people[0]))


def policies(rng: random.Random, clock: datetime, company: str, people: Sequence[Person], offices: Sequence[Office],
             currency: str) -> tuple[tuple[Policy, ...], tuple[Document, ...], texts.ExpenseTerms]:
    """The expense policy (two superseded versions, the current one, a draft not yet in force),
    the security policy (one superseded, one current) and the remote-work policy; the
    documents holding their text; and the current expense terms."""
    cfo, controller = head_of(people, "Finance"), next(
        (p for p in people if p.title == "Controller"), head_of(people, "Finance"))
    it_head, people_head = head_of(people, "IT"), head_of(people, "People")
    today = clock.date()
    eff = [today - timedelta(days=d) for d in (900, 520, rng.randint(60, 200))] + \
        [today + timedelta(days=rng.randint(20, 75))]
    terms = [texts.expense_terms(rng, v + 1, eff[v], currency) for v in range(4)]
    status = ("superseded", "superseded", "current", "draft")
    bodies = [texts.expense_policy(t, company, cfo, controller, offices, s, rng) for t, s in zip(terms, status)]
    saved = [datetime.combine(e, clock.timetz()) - timedelta(days=14) for e in eff]
    docs = [Document("doc-pol-expenses", f"{company} Travel and Expense Policy", "fld-policies", cfo.id, bodies[2],
                     saved[2], history=((bodies[0], cfo.id, saved[0]), (bodies[1], controller.id, saved[1])),
                     visibility="org"),
            Document("doc-pol-expenses-draft", f"DRAFT Travel and Expense Policy v{terms[3].version}", "fld-policies",
                     controller.id, bodies[3], saved[3], shared_with=((cfo.id, "editor"),))]
    expense = Policy("pol-expenses", "Travel and Expense Policy", cfo.id, tuple(
        PolicyVersion(t.version, s, t.effective, "doc-pol-expenses-draft" if s == "draft" else "doc-pol-expenses",
                      f"limits of {t.limits['meals']:.0f} {currency} for meals, receipts over {t.receipt_over:.0f}")
        for t, s in zip(terms, status)))
    sec_eff = (today - timedelta(days=700), today - timedelta(days=rng.randint(30, 300)))
    sec = [texts.security_policy(company, it_head, it_head, v, e, rng) for v, e in zip(("1.0", "2.0"), sec_eff)]
    docs.append(Document("doc-pol-security", f"{company} Information Security Policy", "fld-policies", it_head.id,
                         sec[1], datetime.combine(sec_eff[1], clock.timetz()),
                         history=((sec[0], it_head.id, datetime.combine(sec_eff[0], clock.timetz())),),
                         visibility="org"))
    security = Policy("pol-security", "Information Security Policy", it_head.id,
                      (PolicyVersion("1.0", "superseded", sec_eff[0], "doc-pol-security", "first version"),
                       PolicyVersion("2.0", "current", sec_eff[1], "doc-pol-security", "MFA everywhere")))
    rw_eff = today - timedelta(days=rng.randint(100, 400))
    days = rng.choice((2, 3))
    docs.append(Document("doc-pol-remote", f"{company} Remote Work Policy", "fld-policies", people_head.id,
                         texts.remote_work_policy(company, people_head, "1.0", rw_eff, days),
                         datetime.combine(rw_eff, clock.timetz()), visibility="org"))
    remote = Policy("pol-remote", "Remote Work Policy", people_head.id,
                    (PolicyVersion("1.0", "current", rw_eff, "doc-pol-remote", f"{days} remote days a week"),))
    return (expense, security, remote), tuple(docs), terms[2]


def project_documents(rng: random.Random, clock: datetime, projects: Sequence[Project],
                      people: dict[str, Person]) -> tuple[Document, ...]:
    """Each project's plan (the first one long enough to pass 20,000 characters) and meeting notes."""
    out = []
    for n, proj in enumerate(projects):
        owner, members = people[proj.owner], [people[m] for m in proj.members]
        text = texts.project_plan(proj.name, proj.goal, owner, members, proj.budget, proj.currency, proj.start,
                                  proj.end, 12 if n == 0 else rng.randint(3, 6), rng, 16 if n == 0 else 6)
        out.append(Document(proj.documents[0], f"Project {proj.name}: plan", "fld-projects", owner.id, text,
                            clock - timedelta(days=rng.randint(1, 20)),
                            shared_with=tuple((m, "editor" if m != owner.id else "viewer")
                                              for m in proj.members if m != owner.id)))
    return tuple(out)


def kb(rng: random.Random, size: Size, clock: datetime, people: Sequence[Person],
       products: Sequence[str]) -> tuple[KbArticle, ...]:
    """Knowledge-base pages of the IT, people, sales and engineering spaces; the on-call
    handbook passes 20,000 characters."""
    it, hr, eng = head_of(people, "IT"), head_of(people, "People"), head_of(people, "Engineering")
    sales = head_of(people, "Sales")
    pages = [
        ("Reset your password", "it", it, [("Self-service reset", "The reset link is valid for 15 minutes."),
                                           ("Locked account", "Five wrong attempts lock the account for 30 minutes.")]),
        ("Connect to the VPN", "it", it, [("Install the client", "The VPN client is in the software centre."),
                                          ("Split tunnelling", "Only company ranges go through the tunnel.")]),
        ("Set up multi-factor authentication", "it", it, [("Authenticator app", "Use the approved app only."),
                                                          ("Lost phone", "IT issues one-time backup codes.")]),
        ("Book time off", "people", hr, [("Annual leave", "Requests go to your manager two weeks ahead."),
                                         ("Out of office", "Set an auto-reply naming a deputy.")]),
        ("Onboarding checklist", "people", hr, [("First day", "Your laptop is ready at the front desk."),
                                                ("First week", "Meet your buddy and finish the security course.")]),
        ("Price list and discounts", "sales", sales, [(p, f"{p}: list price in the CRM; discounts above 15 percent "
                                                          "need the VP Sales.") for p in products[:6]]),
        ("Expense claims, step by step", "finance", head_of(people, "Finance"),
         [("Claim", "Every claim needs a category and a business purpose."),
          ("Report", "Bundle claims into a report and submit it to your manager.")]),
        ("Deploy to production", "engineering", eng, [("Freeze", "No deploys on Fridays after 14:00 local time."),
                                                      ("Rollback", "Every deploy has a rollback command.")]),
        ("Incident severity levels", "engineering", eng, [("SEV1", "Customer-facing outage; page on-call."),
                                                          ("SEV2", "Degraded service; fix within a day.")]),
    ]
    out = []
    for n, (title, space, author, facts) in enumerate(pages[: size.kb]):
        out.append(KbArticle(f"kb-{n + 1:03d}", title, space, texts.kb_article(title, space, facts, rng), author.id,
                             clock - timedelta(days=rng.randint(3, 200)), (space,)))
    handbook = [(f"Runbook: {job}", f"When {job} fails, check its last log lines, then the dependency it names. "
                 "Retry once; a second failure is an incident.") for job in JOB_NAMES] + \
               [("Escalation", "Page the secondary after 15 minutes without an acknowledgement."),
                ("Handover", "Write the handover note in the on-call channel before your shift ends.")]
    out.append(KbArticle(f"kb-{len(out) + 1:03d}", "On-call handbook", "engineering",
                         texts.kb_article("On-call handbook", "engineering", handbook, rng, repeat=6), eng.id,
                         clock - timedelta(days=rng.randint(3, 60)), ("engineering", "on-call")))
    return tuple(out)


JOB_NAMES = ("nightly-backup", "crm-export", "invoice-sync", "search-reindex", "payroll-upload", "cert-renewal",
             "log-rotate", "inventory-sync")
_SCHEDULES = ("0 2 * * *", "30 5 * * 1-5", "15 * * * *", "0 4 * * 0", "0 6 1 * *", "0 3 * * 1", "@daily",
              "*/30 * * * *")


def scheduler(rng: random.Random, clock: datetime, people: Sequence[Person]) -> tuple[tuple[Job, ...], tuple[JobRun, ...]]:
    """Scheduled jobs owned by engineers and IT, with recent runs (some failed, with logs)."""
    owners = [p for p in people if p.department in ("Engineering", "IT")] or list(people)
    jobs: list[Job] = []
    runs: list[JobRun] = []
    for n, (name, cron) in enumerate(zip(JOB_NAMES, _SCHEDULES)):
        job = Job(f"job-{n + 1:02d}", name, cron, f"/opt/jobs/{name}.sh", f"Runs {name.replace('-', ' ')}.",
                  rng.random() > 0.1, rng.choice(owners).id)
        jobs.append(job)
        for k in range(rng.randint(2, 5)):
            status = rng.choices(("succeeded", "failed", "cancelled"), (8, 3, 1))[0]
            log = {"succeeded": f"{name}: done", "cancelled": f"{name}: cancelled by operator",
                   "failed": f"{name}: " + rng.choice(("connection refused by db-primary:5432",
                                                       "disk full on /var/backups", "token expired for crm api",
                                                       "timeout after 900s"))}[status]
            runs.append(JobRun(f"run-{len(runs) + 1:03d}", job.id, status,
                               clock - timedelta(days=k + 1, hours=rng.randint(0, 5)), rng.randint(1, 40), log))
    return tuple(jobs), tuple(runs)


def config(rng: random.Random, clock: datetime, people: Sequence[Person]
           ) -> tuple[tuple[Flag, ...], tuple[Setting, ...], tuple[ConfigChange, ...]]:
    """Feature flags (partly rolled out), typed settings, and the history of their changes."""
    eng = [p for p in people if p.department in ("Engineering", "IT")] or list(people)
    flags = tuple(
        Flag(key, desc, rng.random() < 0.6, rng.choice((0, 10, 25, 50, 100)),
             tuple(sorted(rng.sample(("dev", "staging", "prod"), rng.randint(1, 3)))), rng.choice(eng).id,
             clock - timedelta(days=rng.randint(1, 60)))
        for key, desc in (("new-checkout", "The redesigned checkout flow."), ("beta-dashboard", "Dashboard v2."),
                          ("sso-enforced", "Single sign-on for every login."), ("bulk-export", "CSV bulk export."),
                          ("smart-routing", "Ticket routing by topic.")))
    settings = (Setting("session.timeout_minutes", "int", rng.choice((15, 30, 60)), "Idle minutes before logout.",
                        clock - timedelta(days=rng.randint(1, 90))),
                Setting("billing.currency", "string", rng.choice(("EUR", "USD", "GBP")), "Invoice currency.",
                        clock - timedelta(days=rng.randint(1, 90))),
                Setting("search.boost", "float", round(rng.uniform(0.5, 2.0), 2), "Weight of recent documents.",
                        clock - timedelta(days=rng.randint(1, 90))),
                Setting("mail.external_warning", "bool", True, "Banner on mail from outside.",
                        clock - timedelta(days=rng.randint(1, 90))),
                Setting("support.sla_hours", "json", {"urgent": 4, "high": 8, "normal": 24, "low": 72},
                        "Hours to the SLA deadline per priority.", clock - timedelta(days=rng.randint(1, 90))))
    history = []
    for n, flag in enumerate(flags):
        history.append(ConfigChange(f"chg-{n + 1:03d}", "flag", flag.key, {"rollout": max(0, flag.rollout - 25)},
                                    {"rollout": flag.rollout}, rng.choice(eng).id, flag.updated,
                                    rng.choice(("gradual rollout", "customer request", "incident follow-up"))))
    return flags, settings, tuple(history)


def news(rng: random.Random, clock: datetime, orgs: Sequence[Org], company: str
         ) -> tuple[tuple[Feed, ...], tuple[NewsItem, ...]]:
    """Industry feeds (three subscribed, two only in the directory) whose items mention customers and vendors."""
    feeds = (Feed("feed-1", "Industry Wire", "https://news.example.org/industry.rss", "Industry news.", True),
             Feed("feed-2", "Markets Daily", "https://markets.example.net/daily.rss", "Deals and earnings.", True),
             Feed("feed-3", "Tech Procurement", "https://procure.example.com/feed", "Buying software.", True),
             Feed("feed-4", "Security Bulletin", "https://security.example.org/feed.xml", "Advisories.", False),
             Feed("feed-5", "Regional Business", "https://regional.example.com/rss", "Local companies.", False))
    others = [o for o in orgs if o.kind in ("customer", "vendor")]
    items = []
    for n in range(10 + len(others) // 2):
        org = rng.choice(others)
        event = rng.choice(("raises new funding", "announces layoffs", "opens an office in Lisbon",
                            "is acquired by a competitor", "names a new CEO", "reports record revenue",
                            "discloses a data breach"))
        feed = rng.choice(feeds)
        items.append(NewsItem(f"item-{n + 1:03d}", feed.id, f"{org.name} {event}",
                              f"{feed.url.rsplit('/', 1)[0]}/articles/{n + 1}", clock - timedelta(hours=rng.randint(2, 400)),
                              rng.choice(("Staff writer", "Newsdesk", "A. Reporter")), f"{org.name} {event}.",
                              f"{org.name} ({org.domain}) {event}, according to people familiar with the matter. "
                              f"Analysts expect the news to matter for suppliers such as {company}.",
                              rng.random() < 0.3, (org.id,)))
    return feeds, tuple(items)


def todos(rng: random.Random, clock: datetime, user: Person, projects: Sequence[Project],
          accounts: Sequence[Account], orgs: dict[str, Org]) -> tuple[TodoItem, ...]:
    """The user's to-do lists: work items about projects and accounts, a few done."""
    out: list[TodoItem] = []
    for proj in projects[:4]:
        out.append(TodoItem(f"task-{len(out) + 1:03d}", user.id, "work", f"Review {proj.name} budget",
                            f"Spent {proj.spent:,.2f} of {proj.budget:,.2f} {proj.currency}.",
                            _day(clock, rng.randint(-3, 10)), rng.choice(("normal", "high")), rng.random() < 0.2,
                            (proj.id,)))
    for acct in [a for a in accounts if a.owner == user.id][:4]:
        out.append(TodoItem(f"task-{len(out) + 1:03d}", user.id, "work", f"Call {orgs[acct.org].name} about renewal",
                            "", _day(clock, rng.randint(0, 14)), "normal", False, (acct.id,)))
    out.append(TodoItem(f"task-{len(out) + 1:03d}", user.id, "personal", "Book dentist", "", None, "low", False))
    return tuple(out)


def _day(clock: datetime, days: int) -> date:
    return (clock + timedelta(days=days)).date()
