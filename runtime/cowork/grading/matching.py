"""Helpers every check module shares: the verdict type, value matchers, path globs, quoting."""

from __future__ import annotations

import fnmatch
import json
from typing import Any, Literal

from ..spec import checks as M
from ..spec.regex import search


class Credit(float):
    """A verdict with partial credit in [0, 1] (tiers, a graded judge): the check counts
    ``weight x credit`` in the completion score and passes when ``passed``."""

    passed: bool

    def __new__(cls, value: float, passed: bool) -> "Credit":
        """``value`` clamped to [0, 1], carrying ``passed``."""
        obj = super().__new__(cls, min(1.0, max(0.0, float(value))))
        obj.passed = passed
        return obj


#: A check's verdict: passed (None: not graded; a Credit: partial credit), why, and the audit
#: records that prove it.
Verdict = tuple["bool | Credit | None", str, list[dict[str, Any]]]


def _same_list(value: list[Any], expected: list[Any], m: M.Matcher, ordered: bool) -> bool:
    """``value`` holds the items of ``expected``: in order (``ordered``), or as a set."""
    if ordered:
        return len(value) == len(expected) and all(_same(a, b, m) for a, b in zip(value, expected))
    return all(any(_same(a, b, m) for b in expected) for a in value) and \
        all(any(_same(a, b, m) for a in value) for b in expected)


def _same(a: Any, b: Any, m: M.Matcher) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b) <= m.tolerance + 1e-9
    if m.ignore_case and isinstance(a, str) and isinstance(b, str):
        return a.casefold() == b.casefold()
    return a == b


#: How a list value meets a matcher: ``any`` (the whole list or any item matches: record
#: fields and tool arguments, where "the mail went to x" means x among the recipients),
#: ``set`` or ``sequence`` (the list is the answer and must be exactly the one asked for;
#: see :func:`match_value`).
ListMatch = Literal["any", "set", "sequence"]


def match_field(m: M.Matcher, found: bool, value: Any, lists: ListMatch = "any") -> bool:
    """Whether an argument or record field (``found``: present at all) satisfies the matcher,
    ``absent`` and ``or_absent`` included (missing and null are both absent)."""
    missing = not found or value is None
    if m.absent is not None:
        return missing == m.absent
    if missing and m.or_absent:
        return True
    return found and match_value(m, value, lists)


def match_value(m: M.Matcher, value: Any, lists: ListMatch = "any") -> bool:
    """True when ``value`` satisfies the matcher.

    A list value is read by ``lists``. ``any``: it matches when the whole list or any item
    does. ``set``: ``equals: [...]`` needs the same items in any order (repeats ignored), and
    every other matcher matches a list only when it holds exactly one item, which matches (a
    list of every candidate is no answer). ``sequence``: as ``set``, but ``equals`` lists
    compare item by item, in order.
    """
    fields = m.model_fields_set
    listed = "equals" in fields and isinstance(m.equals, list)
    if isinstance(value, list) and lists != "any":
        if listed:
            return _same_list(value, m.equals, m, ordered=lists == "sequence")
        return len(value) == 1 and match_value(m, value[0], lists)
    if isinstance(value, list) and not listed:
        if any(match_value(m, v) for v in value):
            return True
    if "equals" in fields:
        return _same(value, m.equals, m)
    if "at" in fields or "within" in fields:
        return _same_time(value, m)
    # Exactly one field is set (the matcher's validator); set to null, only ``equals`` means a value.
    if "one_of" in fields:
        assert m.one_of is not None, "one_of: null"
        return any(_same(value, x, m) for x in m.one_of)
    s = value if isinstance(value, str) else json.dumps(value, default=str)
    if "contains" in fields:
        assert m.contains is not None, "contains: null"
        return (m.contains.casefold() in s.casefold()) if m.ignore_case else m.contains in s
    if "regex" in fields:
        assert m.regex is not None, "regex: null"
        return search(m.regex, s, ignore_case=m.ignore_case)
    assert m.glob is not None, "glob: null, or no value matcher (absent is match_field's)"
    return fnmatch.fnmatch(s.casefold(), m.glob.casefold()) if m.ignore_case else fnmatch.fnmatchcase(s, m.glob)


def _same_time(value: Any, m: M.Matcher) -> bool:
    """``at`` / ``within``: the value, read as an instant (see :mod:`cowork.spec.instants`),
    is the same instant (within ``tolerance`` seconds) or lies in the span. Instants, not
    text: ``07:00Z`` is ``15:00`` in Shanghai; a value that is no time never matches."""
    from ..spec.instants import instant, zone

    tz = zone(m.tz)
    when = instant(value, tz)
    if when is None:
        return False
    if m.at is not None:
        target = instant(m.at, tz)
        return target is not None and abs((when - target).total_seconds()) <= m.tolerance + 1e-9
    start, end = (instant(t, tz) for t in m.within or ["", ""])
    return start is not None and end is not None and start <= when <= end


def quote(rec: dict[str, Any]) -> dict[str, Any]:
    """The part of an audit record a report quotes."""
    return {k: rec.get(k) for k in ("seq", "tool", "args", "outcome") if k in rec}


def under(path: str, globs: list[str]) -> bool:
    """Whether a workspace path lies under (or matches) one of the globs."""
    return any(g == "**" or fnmatch.fnmatchcase(path, g) or path == g or path.startswith(g.rstrip("/") + "/")
               for g in globs)
