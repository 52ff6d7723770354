"""Validation: prove a spec is gradable (oracle passes, no-op fails, violation trips safety)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..agents import make_policy
from ..episode.run import EpisodeResult, run_task
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


async def validate_spec(path: str | Path | LoadedSpec, judge: Any = None, *, reuse: bool = True) -> ValidationReport:
    """Validate one spec in real sandboxes; never raises for a bad spec, reports it.

    The steps, in order: schema, build, oracle (with the judge note, the user's and the
    world's actions, oracle-repeat), nop (with initial-state), violation (with
    safety-can-fire). A failure of the machine, not the spec, ends the report with ``run``.

    Args:
        path: A task folder, its ``task.yaml``, or a spec already loaded.
        judge: An LLM judge (``grading.judge.LLMJudge``) for the spec's ``judge`` checks and
            rules; without one they cannot be proven, and the report says so (step ``judge``).
        reuse: Run the episodes one after another in one sandbox, reset between them and the
            reset verified (``SandboxPool``: a failed or unverified reset replaces the sandbox,
            one the agent broke is never reused); False starts a fresh sandbox per episode.
    """
    from ..sandbox.pool import SandboxPool

    loaded, report = _schema(path)
    if loaded is None:
        return report
    pool = SandboxPool(max_per_task=1, max_total=1) if reuse else None
    steps = _Steps(loaded, judge, report, pool)
    try:
        await steps.build()
        oracle = await steps.oracle()
        steps.actions(oracle)
        await steps.oracle_repeat(oracle)
        steps.initial_state(await steps.nop())
        violation = await steps.violation()
        if violation is not None:
            steps.safety_can_fire(violation)
    except CoworkError as exc:
        report.findings.append(Finding(step="run", ok=False, detail=f"{type(exc).__name__}: {exc}",
                                       hint="see the error; infrastructure problems are not spec problems"))
    finally:
        if pool is not None:
            await pool.close()
    report.ok = all(f.ok for f in report.findings)
    return report


def _schema(path: str | Path | LoadedSpec) -> tuple[LoadedSpec | None, ValidationReport]:
    """Step ``schema``: the spec loads (None and the problems when it does not)."""
    shown = str(path.path if isinstance(path, LoadedSpec) else path)
    try:
        loaded = path if isinstance(path, LoadedSpec) else load_spec(path)
    except SpecError as exc:
        return None, ValidationReport(spec=shown, ok=False, findings=[
            Finding(step="schema", ok=False, detail=p, hint="correct the field as the message says")
            for p in exc.problems])
    report = ValidationReport(spec=str(loaded.path), task=loaded.spec.id, ok=True)
    report.findings.append(Finding(step="schema", ok=True, detail="spec is valid"))
    return loaded, report


class _Steps:
    """The steps that run the spec in sandboxes, each adding its findings to one report."""

    def __init__(self, loaded: LoadedSpec, judge: Any, report: ValidationReport, pool: Any = None):
        self.loaded, self.spec, self.judge, self.report, self.pool = loaded, loaded.spec, judge, report, pool
        self.image = ""
        #: Judge checks and rules: unproven without a judge.
        self.judged = [c for c in (*self.spec.checks, *self.spec.safety) if c.type == "judge"]

    def _add(self, **finding: Any) -> None:
        self.report.findings.append(Finding(**finding))

    async def _run(self, agent: str) -> EpisodeResult:
        return await run_task(self.loaded, make_policy(agent, self.spec), image=self.image, judge=self.judge,
                              pool=self.pool)

    async def build(self) -> None:
        """Step ``build``: the task's image builds."""
        from ..engine.client import in_thread
        from ..engine.images import ensure_task_image

        self.image = await in_thread(ensure_task_image, self.loaded)
        self._add(step="build", ok=True, detail=self.image)

    async def oracle(self) -> EpisodeResult:
        """Step ``oracle``: the reference solution earns full marks (step ``judge`` says what
        could not be proven without a judge)."""
        o1 = await self._run("oracle")
        g = o1.grade
        if self.judge is None and self.judged:
            # Judge items cannot be proven without a judge: the oracle is held to the rest.
            ok = g.status == "graded" and (g.completion_graded if g.completion_graded is not None else g.completion) \
                == 1.0 and not g.violations and all(c.status != "not_graded" or c.type == "judge" for c in g.checks)
        else:
            ok = g.passed and g.score == 1.0
        self._add(step="oracle", ok=ok,
                  detail=f"score {g.score:.2f}" + ("" if ok else f" ({g.status}); failing: {_failed(g)}"),
                  field="oracle",
                  hint=None if ok else "make the oracle's tool calls satisfy every check, or fix the checks it fails")
        if self.judged and self.judge is None:
            self._add(step="judge", ok=True,
                      detail=f"NOT PROVEN: {len(self.judged)} judge check(s)/rule(s) ("
                             + ", ".join(c.id or c.type for c in self.judged)
                             + ") were not run; without --judge-model nothing shows the oracle earns them, the no-op "
                               "agent misses them or a judge safety rule can fire",
                      hint="run `cowork validate --judge-model M` to prove them")
        return o1

    def actions(self, oracle: EpisodeResult) -> None:
        """Step ``actions``: the user's and the world's actions are the spec's own script: in the
        oracle's run every one must work (a wrong argument would silently change the story)."""
        for e in oracle.trajectory.conversation:
            for action, result in zip(e.get("actions") or [], e.get("results") or []):
                if not result.get("ok"):
                    where = "user.turns" if e.get("kind") == "user_actions" else "events" if e.get("kind") == "event" \
                        else "days"
                    self._add(step="actions", ok=False, field=where,
                              detail=f"{e.get('actor')} action {action} failed in the oracle's run: "
                                     f"{result.get('error')}",
                              hint="fix the action's tool name or arguments (see docs/services.md), or the record "
                                   "it adds")

    async def oracle_repeat(self, oracle: EpisodeResult) -> None:
        """Step ``oracle-repeat``: a second oracle run gives the same grade."""
        again = await self._run("oracle")
        same = oracle.grade.model_dump() == again.grade.model_dump()
        self._add(step="oracle-repeat", ok=same,
                  detail="second oracle run gives an identical grade" if same
                  else "second oracle run gave a different grade", field="checks",
                  hint=None if same else "remove nondeterminism (timestamps, random values) from the oracle or the "
                                         "checks")

    async def nop(self) -> EpisodeResult:
        """Step ``nop``: an agent that does nothing fails."""
        nop = await self._run("nop")
        ok = nop.grade.status == "graded" and not nop.grade.passed
        self._add(step="nop", ok=ok, detail=f"no-op agent scores {nop.grade.score:.2f}" + ("" if ok else " and passes"),
                  field="checks", hint=None if ok else "add a completion check that only real work can satisfy")
        return nop

    def initial_state(self, nop: EpisodeResult) -> None:
        """Step ``initial-state``: the no-op agent leaves the initial state untouched, so no
        completion check may hold there (unless marked ``holds_initially``)."""
        completion = [c for c in nop.grade.checks if c.group == "completion"]
        for i, (check, res) in enumerate(zip(self.spec.checks, completion)):
            if res.passed and not check.holds_initially:
                self._add(step="initial-state", ok=False, field=f"checks[{i}]",
                          detail=f"check {res.id!r} already holds on the untouched initial state ({res.detail})",
                          hint="make it require real work, or mark it `holds_initially: true` if it guards "
                               "something that must stay as it is")

    async def violation(self) -> EpisodeResult | None:
        """Step ``violation``: the violation script trips a safety rule (None: nothing to prove)."""
        safety = self.spec.safety
        if not safety or (self.judge is None and all(r.type == "judge" for r in safety)):
            self._add(step="violation", ok=True, detail=(
                "no safety rules: no violation script needed" if not safety
                else "NOT PROVEN: every safety rule is a judge rule, and no judge was given"))
            return None
        vio = await self._run("violation")
        # A violation named, not merely safety unknown: a rule that cannot be judged proves nothing.
        ok = vio.grade.status == "graded" and bool(vio.grade.violations)
        self._add(step="violation", ok=ok,
                  detail=f"violation script trips {', '.join(vio.grade.violations)}" if ok
                  else "violation script trips no safety rule", field="violation" if not ok else None,
                  hint=None if ok else "add a safety rule the violation script breaks, or make the script break one")
        return vio

    def safety_can_fire(self, vio: EpisodeResult) -> None:
        """Step ``safety-can-fire``: every safety rule can fire, by the violation script or by a
        generated probe."""
        for i in range(len(self.spec.safety)):
            rid = self.spec.check_id("safety", i)
            if rid in vio.grade.violations or vio.evidence is None:
                continue
            if self.spec.safety[i].type == "judge" and self.judge is None:
                continue  # reported as not proven by the oracle step
            fired, how = probe_rule(self.spec, i, vio.evidence)
            self._add(step="safety-can-fire", ok=fired, field=f"safety[{i}]", detail=f"rule {rid!r}: {how}",
                      hint=None if fired else "make the violation script break this rule, or give the rule an "
                                              "`example:` it must catch; a rule that can never fire protects nothing")


def report_json(reports: list[ValidationReport]) -> list[dict[str, Any]]:
    """JSON-ready form of several reports."""
    return [r.model_dump() for r in reports]
