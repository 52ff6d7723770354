r"""Hedged answers: the candidates a reply states for one asked value.

A reply *hedges* when it states the asked value beside other candidates for it ("30, 90 or
180 days"; the right total and two wrong ones side by side; every mail listed as urgent), so
that a check looking for the right one finds it. A check can only refuse what it can tell is
a candidate, so a candidate is defined narrowly, from what the spec declares:

- a *slot* is the rest of a line after a match of a fact's ``label`` (the pattern naming the
  asked value where the reply states it, such as ``^\W*total\b``), cut at :data:`SLOT_CHARS`;
- for a ``numbers`` entry with a label, every number in a slot is a candidate for it: the value
  must be in a slot, and a slot that states numbers but not the value states another one;
- a fact's or number's ``distractors`` are wrong candidates the spec names (the stale policy's
  period, the total with the lost deal counted): the reply must not state one, in a slot when
  the fact has a label, anywhere in the text when not;
- for ``structured``, every JSON object of the reply that gives an asked field is a candidate
  answer: the first must match, and every other one must give the asked fields the same way;
  a list field is compared as a set (or a sequence), not item by item (see
  :func:`.matching.match_value`).

Text is the agent's: every pattern runs on RE2 (linear time) and a slot is bounded.
"""

from __future__ import annotations

import reprlib
from typing import Any

from ..spec import checks as M
from ..spec.regex import compile_pattern, findall, search
from .matching import match_field
from .prose_json import json_objects
from .records import _field_value

#: A number as people write it: ``1,482,300``, ``1 482 300``, ``1482300.00``, ``-3.5``
#: (RE2: the reply is the agent's, so matching is linear in its length).
NUMBER = r"[-+]?(?:\d{1,3}(?:[, \x{00a0}]\d{3})+|\d+)(?:\.\d+)?"
#: Longest slot read after a label: a value is stated next to the words that name it.
SLOT_CHARS = 300


def numbers_in(text: str) -> list[float]:
    """Every number the text states: ``1,482,300``, ``1 482 300``, ``1482300.00``, ``-3.5``."""
    out = []
    for found in findall(NUMBER, text):
        try:
            out.append(float(found.replace(",", "").replace(" ", "").replace("\u00a0", "")))
        except ValueError:
            continue
    return out


def stated(f: M.Statement, text: str, ignore_case: bool) -> bool:
    """Whether the text makes the statement (its substring, or a match of its regex)."""
    if f.regex is not None:
        return search(f.regex, text, ignore_case=ignore_case)
    assert f.text is not None  # a statement is text or regex
    return f.text.casefold() in text.casefold() if ignore_case else f.text in text


def slots(label: str, text: str, ignore_case: bool) -> list[str]:
    """The rest of the line after each match of ``label`` (``^``/``$`` at line ends), each
    at most :data:`SLOT_CHARS` characters."""
    # Same length as the text: a lone surrogate (JSON allows \ud800) cannot go to RE2 as UTF-8.
    safe = text.encode("utf-8", "replace").decode("utf-8")
    out = []
    for m in compile_pattern(label, ignore_case, True).finditer(safe):
        end = safe.find("\n", m.end(), m.end() + SLOT_CHARS)
        out.append(safe[m.end(): end if end >= 0 else m.end() + SLOT_CHARS])
    return out


def _shown(f: M.Statement) -> str:
    return repr(f.text) if f.text is not None else f"/{f.regex}/"


def _near(x: float, value: float, tolerance: float) -> bool:
    return abs(x - value) <= tolerance + 1e-9


def fact_problems(f: M.Fact, text: str, ignore_case: bool) -> list[str]:
    """Why ``text`` does not state the fact as the one answer (empty: it does)."""
    where = [text] if f.label is None else slots(f.label, text, ignore_case)
    after = "" if f.label is None else f" after /{f.label}/"
    bad = [] if any(stated(f, w, ignore_case) for w in where) else [f"does not state {_shown(f)}{after}"]
    bad += [f"states {_shown(d)}{after} too, another candidate for {_shown(f)}"
            for d in f.distractors if any(stated(d, w, ignore_case) for w in where)]
    return bad


def number_problems(n: M.NumberFact, text: str, ignore_case: bool) -> list[str]:
    """Why ``text`` does not state the number as the one answer (empty: it does)."""
    if n.label is None:
        found = numbers_in(text)
        bad = [] if any(_near(x, n.value, n.tolerance) for x in found) else [f"does not state the number {n.value:g}"]
        return bad + [f"states {d:g} too, another candidate for {n.value:g}"
                      for d in n.distractors if any(_near(x, d, n.tolerance) for x in found)]
    stated_in = [numbers_in(s) for s in slots(n.label, text, ignore_case)]
    hits = [any(_near(x, n.value, n.tolerance) for x in found) for found in stated_in]
    after = f"after /{n.label}/"
    bad = [] if any(hits) else [f"does not state the number {n.value:g} {after}"]
    bad += [f"states {', '.join(f'{x:g}' for x in found[:5])} {after}, not {n.value:g}"
            for found, hit in zip(stated_in, hits) if found and not hit and any(hits)]
    return bad + [f"states {d:g} {after} too, another candidate for {n.value:g}" for d in n.distractors
                  if any(_near(x, d, n.tolerance) for found in stated_in for x in found)]


def _gives(obj: dict[str, Any], names: list[str]) -> bool:
    return any(_field_value(obj, name)[0] for name in names)


def structured_problems(c: M.Answer, text: str) -> list[str]:
    """Why the JSON answer in ``text`` is not the asked one (empty: it is)."""
    assert c.structured is not None  # only called for a structured check
    names = list(c.structured)
    objects = list(json_objects(text))
    if not objects:
        return ["holds no JSON object"]
    giving = [o for o in objects if _gives(o, names)]
    answer = giving[0] if giving else objects[0]
    bad = []
    for name, m in c.structured.items():
        present, value = _field_value(answer, name)
        if not match_field(m, present, value, c.list_match):
            bad.append(f"JSON field {name!r} is {reprlib.repr(value) if present else 'missing'}")
    if c.list_match == "any":
        return bad  # the first object alone, as before list_match existed
    for other in giving[1:]:
        for name, m in c.structured.items():
            present, value = _field_value(other, name)
            if present and not match_field(m, present, value, c.list_match):
                bad.append(f"another JSON object gives {name!r} as {reprlib.repr(value)}")
    return bad
