"""What every part of the world generator shares: sizes, the seeded random source, time helpers."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

from ...errors import CoworkError


@dataclass(frozen=True)
class Size:
    """How many of each entity a world holds."""

    people: int
    offices: int
    customers: int
    vendors: int
    projects: int
    threads: int
    tickets: int
    products: int
    expenses: int
    kb: int


SIZES: dict[str, Size] = {
    "small": Size(people=16, offices=4, customers=6, vendors=4, projects=3, threads=14, tickets=10, products=10,
                  expenses=12, kb=5),
    "medium": Size(people=40, offices=5, customers=16, vendors=6, projects=6, threads=36, tickets=24, products=24,
                   expenses=30, kb=9),
    "large": Size(people=120, offices=7, customers=48, vendors=10, projects=12, threads=110, tickets=70,
                  products=60, expenses=90, kb=16),
}


def size_of(name: str) -> Size:
    """The :class:`Size` called ``name``.

    Raises:
        CoworkError: ``name`` is not small, medium or large.
    """
    if name not in SIZES:
        raise CoworkError(f"world size must be one of {', '.join(SIZES)}, not {name!r}")
    return SIZES[name]


def rng_for(seed: int, part: str) -> random.Random:
    """A random source for one part of the world (people, mail, ...), from the seed.

    Each part draws from its own stream, so that changing how mail is written does not move
    every later draw (the people stay who they were). Not ``hash()``: that is salted per
    process; sha256 gives the same world on every machine.
    """
    digest = hashlib.sha256(f"world:{seed}:{part}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def world_clock(seed: int) -> datetime:
    """The world's "now": a weekday morning in 2026, decided by the seed."""
    rng = rng_for(seed, "clock")
    day = date(2026, 1, 5) + timedelta(weeks=rng.randint(0, 44), days=rng.randint(0, 3))
    return datetime.combine(day, time(8 + rng.randint(0, 2), 0), timezone.utc)


def local(day: date, minute: int, tz: str) -> datetime:
    """``minute`` after midnight of ``day`` in ``tz``, as an aware UTC datetime."""
    naive = datetime.combine(day, time()) + timedelta(minutes=minute)
    return naive.replace(tzinfo=ZoneInfo(tz)).astimezone(timezone.utc)


def workday(day: date, shift: int) -> date:
    """The day ``shift`` working days from ``day`` (Saturday and Sunday skipped)."""
    step = 1 if shift >= 0 else -1
    left = abs(shift)
    while left:
        day += timedelta(days=step)
        if day.weekday() < 5:
            left -= 1
    return day


def money(rng: random.Random, low: float, high: float, step: float = 0.01) -> float:
    """A random amount in [low, high], rounded to ``step``."""
    value = rng.uniform(low, high)
    return round(round(value / step) * step, 2)


def iso(dt: datetime) -> str:
    """An aware datetime as ISO text in UTC with a ``Z``."""
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def phone(rng: random.Random, country: str) -> str:
    """A plausible phone number of ``country`` (fictional ranges)."""
    prefix = {"DE": "+49 30", "GB": "+44 20", "US": "+1 555", "SG": "+65 6", "IN": "+91 80", "AU": "+61 2",
              "BR": "+55 11", "JP": "+81 3", "NG": "+234 1"}.get(country, "+1 555")
    return f"{prefix} {rng.randint(100, 999)} {rng.randint(1000, 9999)}"
