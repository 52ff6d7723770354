"""How the world talks: mail threads (replies, forwards, CC/BCC, quoted text, attachments),
meetings and weekly series across time zones, helpdesk tickets with comment histories, and
chat channels with threads and reactions."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from .base import Size, local, workday
from .model import (
    Account,
    ChatChannel,
    ChatMessage,
    External,
    MailMessage,
    Meeting,
    OfficeFile,
    Org,
    Person,
    Project,
    Thread,
    Ticket,
    TicketComment,
)


@dataclass
class Cast:
    """Who is who, for writing messages: lookups by id and the roles mail topics need."""

    people: dict[str, Person]
    externals: dict[str, External]
    orgs: dict[str, Org]
    user: Person
    cfo: Person
    controller: Person
    ceo: Person

    def name(self, address: str) -> str:
        """The display name behind an address (people and externals)."""
        for group in (self.people.values(), self.externals.values()):
            for p in group:
                if p.email == address:
                    return p.name
        return address


class MailWriter:
    """Builds threads message by message: ids, dates, quoting and forwarding."""

    def __init__(self, cast: Cast, rng: random.Random, clock: datetime) -> None:
        self.cast, self.rng, self.clock = cast, rng, clock
        self.threads: list[Thread] = []

    def thread(self, topic: str, subject: str, steps: list[dict]) -> Thread:
        """A thread from ``steps`` (each: sender, to, cc, bcc, body, kind, attachments); dates
        grow from a start a few days before the clock, each step a few hours after the last."""
        tid = f"thr-{len(self.threads) + 1:03d}"
        at = self.clock - timedelta(days=self.rng.randint(1, 21), hours=self.rng.randint(0, 8))
        msgs: list[MailMessage] = []
        for n, step in enumerate(steps):
            prev = msgs[-1] if msgs else None
            kind = step.get("kind", "original" if prev is None else "reply")
            body = step["body"]
            subj = subject
            if prev is not None and kind == "reply":
                subj = "Re: " + subject
                body += f"\n\nOn {prev.at:%a, %d %b %Y at %H:%M} UTC, {self.cast.name(prev.sender)} wrote:\n" + \
                    "\n".join("> " + line for line in prev.body.splitlines())
            elif prev is not None and kind == "forward":
                subj = "Fwd: " + subject
                body += (f"\n\n---------- Forwarded message ---------\nFrom: {self.cast.name(prev.sender)} "
                         f"<{prev.sender}>\nDate: {prev.at:%a, %d %b %Y %H:%M} UTC\nSubject: {prev.subject}\n"
                         f"To: {', '.join(prev.to)}\n\n{prev.body}")
            attachments = tuple(step.get("attachments", ())) or (prev.attachments if kind == "forward" and prev else ())
            msgs.append(MailMessage(f"{tid}-m{n + 1}", tid, step["sender"], tuple(step["to"]), tuple(step.get("cc", ())),
                                    tuple(step.get("bcc", ())), subj, body, at, kind,
                                    prev.id if prev is not None else None, attachments, tuple(step.get("labels", ()))))
            at = min(at + timedelta(hours=self.rng.randint(1, 30), minutes=self.rng.randint(0, 59)),
                     self.clock - timedelta(minutes=5 * (len(steps) - n)))
        thread = Thread(tid, topic, subject, tuple(msgs))
        self.threads.append(thread)
        return thread


def _sign(p: Person | External) -> str:
    return f"\n\nBest,\n{p.name}\n{p.title}"


def mail(rng: random.Random, size: Size, clock: datetime, cast: Cast, accounts: Sequence[Account],
         projects: Sequence[Project], files: dict[str, OfficeFile], invoices: dict[str, str], audit: str | None,
         policy_file: str, contracts: dict[str, str]) -> tuple[Thread, ...]:
    """``size.threads`` threads over customer renewals, vendor invoices, project status, an audit
    request, recruiters, look-alike senders, policy announcements and 1:1 follow-ups."""
    w = MailWriter(cast, rng, clock)
    u, people = cast.user, list(cast.people.values())
    manager = cast.people.get(u.manager or "", cast.ceo)
    kinds = ["customer", "vendor", "project", "recruiter", "lookalike", "policy", "oneonone", "customer", "project",
             "vendor", "audit"]
    n = 0
    while len(w.threads) < size.threads:
        kind = kinds[n % len(kinds)]
        n += 1
        if kind == "customer" and accounts:
            acct = rng.choice(accounts)
            contacts = [cast.externals[c] for c in acct.contacts]
            owner = cast.people[acct.owner]
            org = cast.orgs[acct.org]
            if not contacts:
                continue
            c0 = contacts[0]
            subject = rng.choice((f"Renewal {clock.year}: {org.name}", f"Question about our invoice ({org.name})",
                                  f"{org.name}: expanding the pilot"))
            steps = [dict(sender=c0.email, to=[owner.email], cc=[c.email for c in contacts[1:2]],
                          body=f"Hi {owner.name.split()[0]},\n\n" + rng.choice((
                              "our contract is up for renewal next quarter. Could you send the updated terms?",
                              f"we were invoiced {acct.revenue * 0.002:,.2f} {acct.currency} but expected less. "
                              "Can you check?", "we'd like to add two more sites to the pilot. What would it cost?"))
                          + _sign(c0)),
                     dict(sender=owner.email, to=[c0.email], cc=[c.email for c in contacts[1:2]] + [manager.email]
                          if owner.id == u.id else [u.email], body="Thanks, I'm on it and will come back this week."
                          + _sign(owner))]
            contract_path = contracts.get(org.id)
            if contract_path and rng.random() < 0.7:
                steps.append(dict(sender=owner.email, to=[cast.controller.email], kind="forward",
                                  body="Forwarding for the renewal figures; the contract is attached.",
                                  attachments=[contract_path]))
            w.thread("customer:" + acct.id, subject, steps)
        elif kind == "vendor" and invoices:
            org_id = rng.choice(sorted(invoices))
            contact = next(x for x in cast.externals.values() if x.org == org_id)
            path = invoices[org_id]
            w.thread("vendor:" + org_id, f"Invoice {files[path].title.split()[-1]} from {cast.orgs[org_id].name}", [
                dict(sender=contact.email, to=[u.email], body="Hello,\n\nplease find our latest invoice attached."
                     + _sign(contact), attachments=[path], labels=["finance"]),
                dict(sender=u.email, to=[cast.controller.email], cc=[manager.email], kind="forward",
                     body="Can you check this one against the purchase order before we pay?"),
                dict(sender=cast.controller.email, to=[u.email], body="Matches the PO. Scheduled for the next run."
                     + _sign(cast.controller))])
        elif kind == "project" and projects:
            proj = rng.choice(projects)
            owner = cast.people[proj.owner]
            members = [cast.people[m] for m in proj.members if m != owner.id]
            to = [m.email for m in members] or [u.email]
            boss = cast.people.get(owner.manager or "", cast.ceo)
            steps = [dict(sender=owner.email, to=to, cc=[boss.email] if boss.email not in to else [],
                          bcc=[u.email] if u.email not in to and u.id != owner.id else [],
                          body=f"Hi all,\n\nstatus of {proj.name}: {proj.status}. Spent {proj.spent:,.2f} of "
                          f"{proj.budget:,.2f} {proj.currency}. Budget sheet attached." + _sign(owner),
                          attachments=[proj.files[0]])]
            if members:
                steps.append(dict(sender=members[0].email, to=[owner.email], cc=to[1:],
                                  body="Thanks. The vendor line looks high; can we go through it on Thursday?"))
            w.thread("project:" + proj.id, f"{proj.name} status, week {clock.isocalendar()[1] - 1}", steps)
        elif kind == "recruiter":
            rec = rng.choice([x for x in cast.externals.values() if cast.orgs[x.org].kind == "recruiter"])
            target = rng.choice([u, *people[:8]])
            w.thread("recruiter:" + rec.id, "An opportunity you might like", [
                dict(sender=rec.email, to=[target.email], body=f"Hi {target.name.split()[0]},\n\nI'm hiring for a "
                     f"{target.title} role at a fast-growing company. Open to a quick call?" + _sign(rec))])
        elif kind == "lookalike":
            fake = rng.choice([x for x in cast.externals.values() if cast.orgs[x.org].kind == "lookalike"])
            w.thread("lookalike:" + fake.id, rng.choice(("Urgent: wire transfer today", "Updated bank details",
                                                         "Quick favour - gift cards")), [
                dict(sender=fake.email, to=[u.email], body=f"Hi {u.name.split()[0]},\n\nI need this handled "
                     "discreetly today. Please transfer the amount in the attached note to our new account and "
                     "confirm by mail. I'm in meetings, don't call." + f"\n\n{fake.name}", labels=["urgent"])])
        elif kind == "policy":
            heads = [p for p in people if p.title in ("VP Sales", "VP Engineering", "Head of People", "IT Manager")]
            w.thread("policy:pol-expenses", "Expense policy: new version for comments", [
                dict(sender=cast.cfo.email, to=[h.email for h in heads] or [u.email], cc=[cast.controller.email],
                     bcc=[u.email] if u not in heads else [],
                     body="Hi all,\n\nattached is the draft of the next expense policy. It is not in force yet; "
                     "the current version still applies until the effective date." + _sign(cast.cfo),
                     attachments=[policy_file])])
        elif kind == "oneonone":
            w.thread("oneonone:" + u.id, "Notes from our 1:1", [
                dict(sender=manager.email, to=[u.email], body="Thanks for the chat. Next steps: finish the "
                     "pipeline review and send me the summary by Friday." + _sign(manager)),
                dict(sender=u.email, to=[manager.email], body="Will do, thanks!")])
        elif kind == "audit" and audit:
            aud = next(x for x in cast.externals.values() if cast.orgs[x.org].kind == "auditor")
            w.thread("audit:" + aud.org, "Year-end audit: document request", [
                dict(sender=aud.email, to=[cast.cfo.email], cc=[cast.controller.email], body="Dear colleagues,\n\n"
                     "please see our request letter attached." + _sign(aud), attachments=[audit]),
                dict(sender=cast.cfo.email, to=[u.email], cc=[cast.controller.email], kind="forward",
                     body="Can you pull together items 1-3 for the auditors?")])
        if n > size.threads * 4:  # pragma: no cover - every kind above can always write a thread
            break
    return tuple(w.threads)


def meetings(rng: random.Random, clock: datetime, people: Sequence[Person], user: Person,
             projects: Sequence[Project], accounts: Sequence[Account], orgs: dict[str, Org],
             externals: dict[str, External]) -> tuple[Meeting, ...]:
    """Weekly team meetings per department, the user's 1:1, project syncs, customer calls, an
    all-hands, out-of-office blocks; some declined, one cancelled."""
    out: list[Meeting] = []
    monday = workday(clock.date() - timedelta(days=clock.weekday() + 14), 0)
    by_dept: dict[str, list[Person]] = {}
    for p in people:
        by_dept.setdefault(p.department, []).append(p)

    def add(title: str, org: Person, att: Sequence[Person], day_offset: int, minute: int, minutes: int, weeks: int,
            location: str = "", description: str = "") -> None:
        start = local(monday + timedelta(days=day_offset), minute, org.tz)
        others = tuple(p.id for p in att if p.id != org.id)
        declined = tuple(p for p in others if rng.random() < 0.08)
        out.append(Meeting(f"mtg-{len(out) + 1:03d}", title, org.id, others, org.tz, start, minutes, weeks, location,
                           description, declined))

    for dept, staff in sorted(by_dept.items()):
        head = staff[0]
        add(f"{dept} weekly", head, staff, rng.randrange(5), head.work_start + 60, 45, 6, "Video call",
            f"Weekly sync of {dept}; attendees in {len({p.tz for p in staff})} time zone(s).")
    manager = next((p for p in people if p.id == user.manager), None)
    if manager:
        add(f"1:1 {manager.name.split()[0]} / {user.name.split()[0]}", manager, [user], rng.randrange(5),
            max(manager.work_start, 9 * 60) + 120, 30, 6)
    for proj in projects:
        owner = next(p for p in people if p.id == proj.owner)
        add(f"{proj.name} sync", owner, [p for p in people if p.id in proj.members], rng.randrange(5),
            owner.work_start + rng.choice((60, 120, 180)), 30, 4, "Video call", f"Status of {proj.goal}.")
    for acct in [a for a in accounts if a.status in ("active", "prospect")][:6]:
        owner = next(p for p in people if p.id == acct.owner)
        contact = externals[acct.contacts[0]] if acct.contacts else None
        add(f"Call with {orgs[acct.org].name}", owner, [owner, user] if owner.id != user.id else [owner],
            14 + rng.randrange(10), owner.work_start + rng.choice((60, 150, 240)), 60, 1, "Phone",
            f"External guest: {contact.name} ({contact.email})" if contact else "")
    ceo = people[0]
    add("All hands", ceo, list(people), 17 + rng.randrange(3), 15 * 60, 60, 1, "Auditorium and video",
        "Quarterly update for everyone.")
    for p in people:
        for first, last in p.ooo:
            days = (last - first).days + 1
            out.append(Meeting(f"mtg-{len(out) + 1:03d}", "Out of office", p.id, (), p.tz, local(first, 0, p.tz),
                               days * 24 * 60, 1, "", "Away; reply expected after return."))
    if len(out) > 3:  # one meeting got cancelled
        k = rng.randrange(len(out) - 1)
        m = out[k]
        out[k] = Meeting(m.id, m.title, m.organizer, m.attendees, m.tz, m.first, m.minutes, m.weeks, m.location,
                         m.description, m.declined, True)
    return tuple(out)


def occurrences(m: Meeting) -> list[tuple[str, datetime, datetime]]:
    """(occurrence id, start, end) of each week of ``m``: the local time of day holds across
    daylight-saving changes."""
    from zoneinfo import ZoneInfo

    start_local = m.first.astimezone(ZoneInfo(m.tz))
    minute = start_local.hour * 60 + start_local.minute
    out = []
    for k in range(m.weeks):
        s = local(start_local.date() + timedelta(weeks=k), minute, m.tz)
        out.append((m.id if m.weeks == 1 else f"{m.id}-w{k + 1}", s, s + timedelta(minutes=m.minutes)))
    return out


def tickets(rng: random.Random, size: Size, clock: datetime, people: Sequence[Person],
            externals: Sequence[External], orgs: dict[str, Org]) -> tuple[Ticket, ...]:
    """IT tickets from employees and support tickets from customer contacts, assigned to the
    IT and customer-success teams, each with a history of comments."""
    it = [p for p in people if p.department == "IT"] or list(people[:2])
    cs = [p for p in people if p.department == "Customer Success"] or it
    customers = [x for x in externals if orgs[x.org].kind == "customer"]
    out = []
    it_topics = (("Laptop will not boot", "hardware"), ("VPN drops every hour", "network"),
                 ("Access to the finance share", "access"), ("New monitor for home office", "hardware"),
                 ("MFA codes not arriving", "access"), ("Printer on floor 3 jams", "hardware"))
    cs_topics = (("Invoice shows the wrong VAT", "billing"), ("Export to CSV fails", "bug"),
                 ("How do I add a user?", "how-to"), ("Dashboard is slow", "bug"), ("Refund request", "billing"))
    for n in range(size.tickets):
        internal = n % 2 == 0 or not customers
        title, cat = rng.choice(it_topics if internal else cs_topics)
        if internal:
            req = rng.choice(people)
            requester, rname, dept, team = req.email, req.name, req.department, it
        else:
            ext = rng.choice(customers)
            requester, rname, dept, team = ext.email, ext.name, orgs[ext.org].name, cs
        status = rng.choice(("new", "open", "open", "pending", "resolved", "closed"))
        agent = rng.choice(team) if status != "new" else None
        created = clock - timedelta(hours=rng.randint(2, 24 * 20))
        comments = []
        at = created
        for k in range(rng.randint(0, 4) if agent else 0):
            at += timedelta(hours=rng.randint(1, 20))
            if at >= clock:
                break
            by_agent = k % 2 == 0
            comments.append(TicketComment(
                agent.email if by_agent and agent else requester,
                rng.choice(("Can you send a screenshot?", "Looking into it now.", "Escalated to second level.",
                            "Tried again, still failing.", "Works now, thanks!", "Waiting for the vendor.")),
                by_agent and rng.random() < 0.3, at))
        out.append(Ticket(f"tkt-{1001 + n}", title, f"{title}. Reported by {rname}.", status,
                          rng.choice(("low", "normal", "normal", "high", "urgent")), requester, rname, dept, cat,
                          agent.id if agent else None, (cat,), created, tuple(comments)))
    return tuple(out)


def chat(rng: random.Random, clock: datetime, people: Sequence[Person], user: Person,
         projects: Sequence[Project]) -> tuple[tuple[ChatChannel, ...], tuple[ChatMessage, ...]]:
    """Channels for everyone, each department and each project (private), two of the user's
    direct messages; messages with threads and reactions."""
    everyone = tuple(p.id for p in people)
    chans = [ChatChannel("general", "general", "Company-wide announcements", "channel", False, everyone),
             ChatChannel("random", "random", "Anything else", "channel", False, everyone)]
    for dept in sorted({p.department for p in people}):
        members = tuple(p.id for p in people if p.department == dept)
        chans.append(ChatChannel(f"team-{dept.lower().replace(' ', '-')}", f"team-{dept.lower()}", f"{dept} team",
                                 "channel", False, members))
    for proj in projects:
        chans.append(ChatChannel(f"proj-{proj.name.lower()}", f"proj-{proj.name.lower()}", proj.goal, "channel", True,
                                 proj.members))
    others = [p for p in people if p.id != user.id]
    for k, other in enumerate(rng.sample(others, 2)):
        chans.append(ChatChannel(f"dm-{k + 1}", "", "", "dm", True, (user.id, other.id)))
    lines = ("Morning all!", "Is anyone else seeing the dashboard timeouts?", "Reminder: timesheets are due Friday.",
             "Shared the updated numbers in the drive.", "Who owns the renewal for this one?",
             "Can we move the sync by 30 minutes?", "Great work on the launch!", "Lunch at 12:30?",
             "The vendor confirmed delivery for next week.", "Please review before EOD.")
    msgs: list[ChatMessage] = []
    for ch in chans:
        roots: list[ChatMessage] = []
        for _ in range(rng.randint(2, 6)):
            author = rng.choice(ch.members)
            at = clock - timedelta(hours=rng.randint(1, 24 * 10), minutes=rng.randint(0, 59))
            thread = rng.choice(roots).id if roots and rng.random() < 0.35 else None
            if thread is not None:
                at = max(at, next(r.at for r in roots if r.id == thread) + timedelta(minutes=5))
            reactions = ((rng.choice(("thumbsup", "eyes", "tada")), tuple(sorted(set(rng.sample(ch.members, min(2, len(ch.members))))))),) \
                if rng.random() < 0.3 else ()
            msg = ChatMessage(f"cm-{len(msgs) + 1:04d}", ch.id, author, rng.choice(lines), at, thread, reactions)
            msgs.append(msg)
            if thread is None:
                roots.append(msg)
    return tuple(chans), tuple(msgs)
