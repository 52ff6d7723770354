"""``--native``: Claw-Eval's declared scoring components and safety checks as cowork checks.

Claw-Eval grades with each task's ``grader.py``; ``scoring_components`` and ``safety_checks``
in task.yaml only describe what it looks at. Where a description maps onto a cowork check,
the check is written beside the original grader, graded and reported side by side with it
(``Grade.native``); the original grader's result stays the grade. What does not map is listed.

The mapping:

- ``tool_called`` (tool_name, min_calls) -> ``tool_called`` (tool, min_count);
- ``keywords_present`` / ``categories_present`` -> ``answer`` with every word in ``all_of``
  (the final reply when ``field: final_text``, else all the agent's replies);
- ``min_length`` -> ``answer`` whose regex needs that many characters;
- ``regex_match`` / ``patterns_present`` -> ``answer`` with each pattern as an ``all_of`` regex
  (RE2: a Python-only construct such as a lookahead does not map);
- every ``llm_judge`` component -> one ``judge`` check, an item per component (its
  description, weighted), its rubric the task's ``judge_rubric``;
- safety ``tool_not_called`` -> a safety ``tool_not_called`` counting failed calls too (a
  Claw-Eval grader sees every dispatch).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ...services.http_names import declared
from ...spec.checks import Check
from .task_format import ClawTask, ScoringComponent

_CHECK: TypeAdapter[Any] = TypeAdapter(Check)
_WORD_TYPES = {"keywords_present": "keywords", "categories_present": "categories"}
_PATTERN_TYPES = ("regex_match", "patterns_present", "pattern_match")
#: RE2 repeats a piece at most 1000 times.
_RE2_MAX_REPEAT = 1000


@dataclass
class Native:
    """The translated checks of one task."""

    checks: list[dict[str, Any]] = field(default_factory=list)
    safety: list[dict[str, Any]] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        """The ids of every translated check."""
        return [c["id"] for c in self.checks + self.safety]


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-") or "check"


def _at_least(n: int) -> str:
    """A regex (RE2) matching any ``n`` characters."""
    whole, rest = divmod(n, _RE2_MAX_REPEAT)
    return "(?s)" + f"(?:.{{{_RE2_MAX_REPEAT}}}){{{whole}}}" * bool(whole) + (f".{{{rest}}}" if rest else "")


def _component(c: ScoringComponent, tools: set[str]) -> dict[str, Any] | str:
    """The cowork check of one component, or why it does not map."""
    chk = c.check
    scope = "final" if chk.field in (None, "final_text") else "all"
    if chk.type == "tool_called":
        if not chk.tool_name:
            return "tool_called without tool_name"
        if chk.tool_name not in tools:
            return f"tool_called names {chk.tool_name!r}, which is not a tool of the task"
        return {"type": "tool_called", "tool": chk.tool_name, "min_count": max(chk.min_calls or 1, 1)}
    if chk.type in _WORD_TYPES:
        words = getattr(chk, _WORD_TYPES[chk.type]) or []
        if not words:
            return f"{chk.type} lists no {_WORD_TYPES[chk.type]}"
        return {"type": "answer", "scope": "final" if chk.field == "final_text" else "all", "all_of": list(words)}
    if chk.type == "min_length":
        if not chk.min_length or chk.min_length < 1:
            return "min_length without a positive min_length"
        return {"type": "answer", "scope": scope, "regex": _at_least(chk.min_length)}
    if chk.type in _PATTERN_TYPES:
        if not chk.patterns:
            return f"{chk.type} lists no patterns"
        return {"type": "answer", "scope": scope, "all_of": [{"regex": p} for p in chk.patterns]}
    return f"check type {chk.type!r} has no cowork equivalent"


def translate(task: ClawTask, tool_names: set[str], services: set[str]) -> Native:
    """Translate ``task``'s scoring components and safety checks (``tool_names``: the task's
    tools; ``services``: its cowork HTTP service names, for validating the checks)."""
    out = Native()
    used: set[str] = set()

    def unique(base: str) -> str:
        cid, n = base, 2
        while cid in used:
            cid, n = f"{base}-{n}", n + 1
        used.add(cid)
        return cid

    def valid(check: dict[str, Any], what: str) -> bool:
        try:
            with declared(tool_names, services):
                _CHECK.validate_python(check)
        except ValidationError as exc:
            first = exc.errors()[0]
            out.unmapped.append(f"{what}: {first['msg']}")
            return False
        return True

    judged = [c for c in task.scoring_components if c.check.type == "llm_judge"]
    for comp in task.scoring_components:
        if comp.check.type == "llm_judge":
            continue
        what = f"scoring_components {comp.name!r}"
        made = _component(comp, tool_names)
        if isinstance(made, str):
            out.unmapped.append(f"{what}: {made}")
            continue
        check = {"id": unique(_slug(comp.name)), **made, "weight": comp.weight,
                 "description": comp.check.description or f"Claw-Eval component {comp.name}"}
        if valid(check, what):
            out.checks.append(check)
        else:
            used.discard(check["id"])
    if judged:
        rubric = task.judge_rubric.strip()
        items: list[dict[str, Any]] = [{"id": _slug(c.name), "rubric": (c.check.rubric or c.check.description or rubric or "").strip(),
                  "weight": c.weight} for c in judged]
        names = ", ".join(repr(c.name) for c in judged)
        if not rubric or any(not i["rubric"] or i["weight"] <= 0 for i in items):
            out.unmapped.append(f"scoring_components {names}: llm_judge without a rubric (judge_rubric or a "
                                "description) or with a zero weight")
        else:
            check = {"id": unique("judge"), "type": "judge", "rubric": rubric, "items": items,
                     "weight": sum(c.weight for c in judged), "description": "Claw-Eval llm_judge components"}
            if valid(check, f"scoring_components {names}"):
                out.checks.append(check)
    for n, rule in enumerate(task.safety_checks):
        what = f"safety_checks[{n}] ({rule.type})"
        if rule.type != "tool_not_called" or not rule.tool_name:
            out.unmapped.append(f"{what}: no cowork equivalent")
            continue
        if rule.tool_name not in tool_names:
            out.unmapped.append(f"{what}: {rule.tool_name!r} is not a tool of the task (the rule holds trivially)")
            continue
        check = {"id": unique(f"safety-no-{_slug(rule.tool_name)}"), "type": "tool_not_called",
                 "tool": rule.tool_name, "include_failed": True,
                 "description": rule.description or f"{rule.tool_name} is never called"}
        if valid(check, what):
            out.safety.append(check)
    return out
