"""Validation: prove a spec is gradable (oracle passes, no-op fails, violation trips safety)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..agents import make_policy
from ..episode.run import run_task
from ..errors import CoworkError, SpecError
from ..spec.loader import LoadedSpec, load_spec
from .probes import probe_rule

log = logging.getLogger(__name__)


class Finding(BaseModel):
    """One validation step's outcome."""

    model_config = ConfigDict(extra="forbid")

    step: str
    """What was checked: schema, build, oracle, actions (the user's and the world's, in the
    oracle's run), oracle-repeat, nop, initial-state, violation, safety-can-fire."""
    ok: bool
    detail: str
    field: str | None = None
    """The spec field at fault, when one is."""
    hint: str | None = None
    """How to repair the spec."""


class ValidationReport(BaseModel):
    """Validation of one spec."""

    model_config = ConfigDict(extra="forbid")

    spec: str
    """Path of the task.yaml."""
    task: str | None = None
    ok: bool
    findings: list[Finding] = []

    def summary(self) -> str:
        """Human-readable lines."""
        lines = [f"{'VALID  ' if self.ok else 'INVALID'} {_escaped(self.task or '?')} ({_escaped(self.spec)})"]
        for f in self.findings:
            # Details quote grades, and grades quote the agent's file names: escape them.
            lines.append(f"  {'ok  ' if f.ok else 'FAIL'} {f.step}: {_escaped(f.detail)}")
            if not f.ok and f.hint:
                lines.append(f"       fix {_escaped(f.field or '')}: {_escaped(f.hint)}")
        return "\n".join(lines)


def _failed(g) -> str:
    return "; ".join(f"{c.id}: {c.detail}" for c in g.checks if not c.passed) or g.error or "no failing check"


def _escaped(text: str) -> str:
    from ..terminal import printable

    return printable(text)


async def validate_spec(path: str | Path | LoadedSpec, judge: Any = None) -> ValidationReport:
    """Validate one spec in real sandboxes; never raises for a bad spec, reports it.

    Args:
        judge: An LLM judge (``grading.judge.LLMJudge``) for the spec's ``judge`` checks and
            rules; without one they cannot be proven, and the report says so (step ``judge``).
    """
    shown = str(path.path if isinstance(path, LoadedSpec) else path)
    try:
        loaded = path if isinstance(path, LoadedSpec) else load_spec(path)
    except SpecError as exc:
        return ValidationReport(spec=shown, ok=False, findings=[
            Finding(step="schema", ok=False, detail=p, hint="correct the field as the message says") for p in exc.problems])
    rep = ValidationReport(spec=str(loaded.path), task=loaded.spec.id, ok=True)
    rep.findings.append(Finding(step="schema", ok=True, detail="spec is valid"))
    spec = loaded.spec
    try:
        from ..engine.client import in_thread
        from ..engine.images import ensure_task_image

        image = await in_thread(ensure_task_image, loaded)
        rep.findings.append(Finding(step="build", ok=True, detail=image))

        judged = [c for c in (*spec.checks, *spec.safety) if c.type == "judge"]
        o1 = await run_task(loaded, make_policy("oracle", spec), image=image, judge=judge)
        if judge is None and judged:
            # Judge items cannot be proven without a judge: the oracle is held to the rest.
            g = o1.grade
            ok = g.status == "graded" and (g.completion_graded if g.completion_graded is not None else g.completion) == 1.0 \
                and not g.violations and all(c.status != "not_graded" or c.type == "judge" for c in g.checks)
        else:
            ok = o1.grade.passed and o1.grade.score == 1.0
        rep.findings.append(Finding(
            step="oracle", ok=ok,
            detail=f"score {o1.grade.score:.2f}" + ("" if ok else f" ({o1.grade.status}); failing: {_failed(o1.grade)}"),
            field="oracle", hint=None if ok else "make the oracle's tool calls satisfy every check, or fix the checks it fails"))
        if judged and judge is None:
            rep.findings.append(Finding(
                step="judge", ok=True,
                detail=f"NOT PROVEN: {len(judged)} judge check(s)/rule(s) ("
                       + ", ".join(c.id or c.type for c in judged)
                       + ") were not run; without --judge-model nothing shows the oracle earns them, the no-op "
                         "agent misses them or a judge safety rule can fire",
                hint="run `cowork validate --judge-model M` to prove them"))
        # The user's and the world's actions are the spec's own script: in the oracle's run
        # every one must work (a wrong argument would silently change the story).
        for e in o1.trajectory.conversation:
            for action, result in zip(e.get("actions") or [], e.get("results") or []):
                if not result.get("ok"):
                    where = "user.turns" if e.get("kind") == "user_actions" else "events" if e.get("kind") == "event" else "days"
                    rep.findings.append(Finding(
                        step="actions", ok=False, field=where,
                        detail=f"{e.get('actor')} action {action} failed in the oracle's run: {result.get('error')}",
                        hint="fix the action's tool name or arguments (see docs/services.md), or the record it adds"))
        o2 = await run_task(loaded, make_policy("oracle", spec), image=image, judge=judge)
        same = o1.grade.model_dump() == o2.grade.model_dump()
        rep.findings.append(Finding(
            step="oracle-repeat", ok=same, detail="second oracle run gives an identical grade" if same
            else "second oracle run gave a different grade", field="checks",
            hint=None if same else "remove nondeterminism (timestamps, random values) from the oracle or the checks"))

        nop = await run_task(loaded, make_policy("nop", spec), image=image, judge=judge)
        ok = nop.grade.status == "graded" and not nop.grade.passed
        rep.findings.append(Finding(
            step="nop", ok=ok, detail=f"no-op agent scores {nop.grade.score:.2f}" + ("" if ok else " and passes"),
            field="checks", hint=None if ok else "add a completion check that only real work can satisfy"))
        # The no-op agent leaves the initial state untouched: no completion check may hold there.
        for i, (check, res) in enumerate(zip(spec.checks, [c for c in nop.grade.checks if c.group == "completion"])):
            if res.passed and not check.holds_initially:
                rep.findings.append(Finding(
                    step="initial-state", ok=False, field=f"checks[{i}]",
                    detail=f"check {res.id!r} already holds on the untouched initial state ({res.detail})",
                    hint="make it require real work, or mark it `holds_initially: true` if it guards "
                         "something that must stay as it is"))

        if not spec.safety or (judge is None and all(r.type == "judge" for r in spec.safety)):
            rep.findings.append(Finding(step="violation", ok=True, detail=(
                "no safety rules: no violation script needed" if not spec.safety
                else "NOT PROVEN: every safety rule is a judge rule, and no judge was given")))
            rep.ok = all(f.ok for f in rep.findings)
            return rep
        vio = await run_task(loaded, make_policy("violation", spec), image=image, judge=judge)
        # A violation named, not merely safety unknown: a rule that cannot be judged proves nothing.
        ok = vio.grade.status == "graded" and bool(vio.grade.violations)
        rep.findings.append(Finding(
            step="violation", ok=ok,
            detail=f"violation script trips {', '.join(vio.grade.violations)}" if ok
            else "violation script trips no safety rule", field="violation" if not ok else None,
            hint=None if ok else "add a safety rule the violation script breaks, or make the script break one"))
        # Every safety rule must be able to fire: by the violation script, or by a generated probe.
        for i in range(len(spec.safety)):
            rid = spec.check_id("safety", i)
            if rid in vio.grade.violations or vio.evidence is None:
                continue
            if spec.safety[i].type == "judge" and judge is None:
                continue  # reported as not proven above
            fired, how = probe_rule(spec, i, vio.evidence)
            rep.findings.append(Finding(
                step="safety-can-fire", ok=fired, field=f"safety[{i}]",
                detail=f"rule {rid!r}: {how}",
                hint=None if fired else "make the violation script break this rule, or give the rule an "
                                        "`example:` it must catch; a rule that can never fire protects nothing"))
    except CoworkError as exc:
        rep.findings.append(Finding(step="run", ok=False, detail=f"{type(exc).__name__}: {exc}",
                                    hint="see the error; infrastructure problems are not spec problems"))
    rep.ok = all(f.ok for f in rep.findings)
    return rep


def report_json(reports: list[ValidationReport]) -> list[dict[str, Any]]:
    """JSON-ready form of several reports."""
    return [r.model_dump() for r in reports]
