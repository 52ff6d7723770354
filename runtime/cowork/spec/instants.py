"""Times as instants, for matchers that compare times across time zones (``at``, ``within``).

A service stores an event at ``2026-03-04T07:00:00Z``; the task says 15:00 in Shanghai. Text
comparison calls those different; as instants they are the same. Only the standard library
(``datetime.fromisoformat``, ``zoneinfo``): named zones need the IANA database (Debian's
``tzdata`` or the ``tzdata`` wheel); UTC works without it.
"""

from __future__ import annotations

from datetime import date, datetime, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def zone(name: str | None) -> tzinfo:
    """The time zone called ``name`` (None: UTC).

    Raises:
        ValueError: an unknown zone name.
    """
    if name is None or name in ("UTC", "Etc/UTC", "Z"):
        return timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}; use an IANA name like 'Asia/Shanghai'") from None


def instant(value: Any, tz: tzinfo) -> datetime | None:
    """``value`` as an aware datetime: ISO 8601 text with an offset (or ``Z``) as written, one
    without in ``tz`` (a date alone is its midnight there); None when it is no such text.

    A local time that a daylight-saving change makes ambiguous is read as its first occurrence
    (``fold=0``)."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, date):
        parsed = datetime(value.year, value.month, value.day)
    elif isinstance(value, str) and 8 <= len(value.strip()) <= 40:
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    else:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=tz)
