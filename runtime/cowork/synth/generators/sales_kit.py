"""Shared parts of the sales and finance generators: prompts built from independently drawn
parts, money and time formatting, and small queries over the world.

A prompt is an opening, the ask, the constraints (shuffled, written as sentences or as a
list), the deliverable and a sign-off, each drawn from its own variants, so that the shape of
a request varies with the draw and with the data, not only its names.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from ..compose import Gen

#: Time zones of outside organisations by country (the world keeps only a country for them).
COUNTRY_TZ = {"AU": "Australia/Sydney", "BR": "America/Sao_Paulo", "DE": "Europe/Berlin", "GB": "Europe/London",
              "NG": "Africa/Lagos", "SG": "Asia/Singapore", "US": "America/New_York", "IN": "Asia/Kolkata",
              "JP": "Asia/Tokyo", "FR": "Europe/Paris", "ES": "Europe/Madrid"}
OPEN_STAGES = ("prospecting", "qualification", "proposal", "negotiation")

_OPENINGS = (
    "", "", "Hi! ", "Morning. ", "Quick one: ", "Hey, ", "When you get a minute: ", "Hello, ",
    "It's {local} here in {city} and I'm swamped. ", "Before my {local} call: ", "Got a job for you. ",
    "I'm working from {city} today. ",
)
_SIGNOFFS = (
    "", "", "", " Thanks!", " Thanks a lot.", " Cheers.", " Ping me if anything looks off.", " Much appreciated.",
    " Tell me what you did when you're done.", " A short summary at the end is enough.",
)


def opening(g: Gen) -> str:
    """The first words of a request, in the user's voice (their city and local time sometimes)."""
    w = g.world
    me = w.person()
    local = w.clock.astimezone(ZoneInfo(me.tz)).strftime("%H:%M")
    return g.rng.choice(_OPENINGS).format(local=local, city=w.get(me.office).city)


def signoff(g: Gen) -> str:
    """The last words of a request."""
    return g.rng.choice(_SIGNOFFS)


def constraints(g: Gen, items: list[str]) -> str:
    """Constraints in a drawn order, as running sentences or as a bullet or numbered list."""
    items = [i for i in items if i]
    if not items:
        return ""
    g.rng.shuffle(items)
    style = g.rng.choice(("prose", "prose", "bullets", "numbers", "notes"))
    if style == "prose" or len(items) == 1:
        return " " + " ".join(items)
    if style == "bullets":
        return "\n\n" + "\n".join(f"- {i}" for i in items) + "\n\n"
    if style == "numbers":
        return "\n\n" + "\n".join(f"{n}. {i}" for n, i in enumerate(items, 1)) + "\n\n"
    return "\n\nA few notes: " + " Also: ".join(items) + "\n\n"


def prompt(g: Gen, ask: str, rules: list[str], deliverable: str) -> str:
    """A request from its drawn parts: opening, ask, constraints, deliverable, sign-off."""
    body = opening(g) + ask + constraints(g, rules)
    joint = "" if body.endswith("\n") else g.rng.choice((" ", " ", "\n\n"))
    return (body + joint + deliverable + signoff(g)).strip() + "\n"


def pick(g: Gen, *variants: str, **fields: Any) -> str:
    """One of ``variants``, formatted with ``fields`` (``g.say`` under a shorter name)."""
    return g.say(*variants, **fields)


def money(x: float) -> str:
    """``12,345.60``."""
    return f"{x:,.2f}"


def iso(dt: datetime) -> str:
    """UTC ISO text as the services store it: ``2026-03-02T09:00:00Z``."""
    return dt.astimezone(ZoneInfo("UTC")).strftime("%Y-%m-%dT%H:%M:%SZ")


def working_days(start: date, n: int) -> list[date]:
    """The ``n`` working days after ``start``."""
    out: list[date] = []
    day = start
    while len(out) < n:
        day += timedelta(days=1)
        if day.weekday() < 5:
            out.append(day)
    return out


def manager_of(w: Any, person: Any) -> Any:
    """A person's manager, or the head of their department, or the CEO (never the person)."""
    if person.manager:
        return w.get(person.manager)
    heads = [p for p in w.people if p.id != person.id and p.department == person.department]
    return heads[0] if heads else next(p for p in w.people if p.id != person.id)


def finance_people(w: Any) -> tuple[Any, Any]:
    """The CFO (head of finance) and the controller (or the CFO again) of the world."""
    fin = [p for p in w.people if p.department == "Finance"]
    cfo = next((p for p in fin if "CFO" in p.title or "Chief" in p.title), fin[0] if fin else w.person())
    ctrl = next((p for p in fin if p.title == "Controller"), cfo)
    return cfo, ctrl


def company_domain(w: Any) -> str:
    """The organisation's own mail domain."""
    return str(w.get(w.company).domain)


def org_of_account(w: Any, account_id: str) -> Any:
    """The organisation behind a CRM account."""
    return w.get(w.get(account_id).org)


def lookalike_domain(domain: str, salt: int) -> str:
    """A domain a careless reader takes for ``domain``: a swapped letter, a digit for a letter,
    or a hyphenated suffix."""
    name, _, tld = domain.partition(".")
    kind = salt % 3
    if kind == 0 and "o" in name:
        return name.replace("o", "0", 1) + "." + tld
    swaps = [k for k in range(1, len(name) - 1) if name[k] != name[k + 1] and "-" not in name[k:k + 2]]
    if kind == 1 and swaps:
        k = swaps[salt % len(swaps)]
        return name[:k] + name[k + 1] + name[k] + name[k + 2:] + "." + tld
    return f"{name}-{('billing', 'secure', 'mail')[salt % 3]}.{tld}"


def new_message(mid: str, sender: str, to: str, subject: str, body: str, when: str, **extra: Any) -> dict[str, Any]:
    """A mail seed record for the user's inbox."""
    return {"id": mid, "folder": "inbox", "from": sender, "to": [to], "subject": subject, "body": body,
            "date": when, "read": False, **extra}
