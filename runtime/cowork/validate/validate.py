"""Validation: prove a spec is gradable (oracle passes, no-op fails, violation trips safety)."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..agents import make_policy
from ..agents.scripted import ScriptedPolicy
from ..episode.run import EpisodeResult, run_task
from ..errors import CoworkError, SpecError
from ..grading.grade import completion_bounds, score_bounds, unjudged
from ..spec.checks import walk
from ..spec.loader import LoadedSpec, load_spec
from .probes import probe_rule

log = logging.getLogger(__name__)


class Finding(BaseModel):
    """One validation step's outcome."""

    model_config = ConfigDict(extra="forbid")

    step: str
    """What was checked: schema, build, oracle-call (an oracle call that returned an error),
    oracle, actions (the user's and the world's, in the oracle's run), oracle-repeat, nop,
    initial-state, violation, safety-can-fire."""
    ok: bool
    detail: str
    field: str | None = None
    """The spec field at fault, when one is."""
    hint: str | None = None
    """How to repair the spec."""
    proven: bool = True
    """False: nothing failed, but the step could not be shown to hold (it needs a judge that
    was not given): NOT PROVEN, which never counts as proven."""


class ValidationReport(BaseModel):
    """Validation of one spec."""

    model_config = ConfigDict(extra="forbid")

    spec: str
    """Path of the task.yaml."""
    task: str | None = None
    ok: bool
    """No step failed."""
    proven: bool = True
    """No step failed and every step was proven; ``ok`` with some step NOT PROVEN (a judge
    check validated without a judge) is reported ``UNPROVEN``, never as proven."""
    findings: list[Finding] = []

    def summary(self) -> str:
        """Human-readable lines."""
        verdict = "INVALID" if not self.ok else "VALID  " if self.proven else "UNPROVEN"
        lines = [f"{verdict} {_escaped(self.task or '?')} ({_escaped(self.spec)})"]
        for f in self.findings:
            # Details quote grades, and grades quote the agent's file names: escape them.
            mark = "FAIL" if not f.ok else "ok  " if f.proven else "n/p "
            lines.append(f"  {mark} {f.step}: {_escaped(f.detail)}")
            if not f.ok and f.hint:
                lines.append(f"       fix{' ' + _escaped(f.field) if f.field else ''}: {_escaped(f.hint)}")
        return "\n".join(lines)


def _failed(g) -> str:
    return "; ".join(f"{c.id}: {c.detail}" for c in g.checks if not c.passed) or g.error or "no failing check"


def _escaped(text: str) -> str:
    from ..terminal import printable

    return printable(text)


async def validate_spec(path: str | Path | LoadedSpec, judge: Any = None, *, reuse: bool = True,
                        pool: Any = None, bundles: bool = False,
                        runs: dict[str, EpisodeResult] | None = None) -> ValidationReport:
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
        pool: Run in this :class:`~cowork.sandbox.pool.SandboxPool` (the caller's: not closed
            here), for example to run the quality gates in the same sandbox afterwards.
        bundles: With ``reuse``, mount the task layer from a folder on the sandbox image instead
            of building a task image (``SandboxPool(bundles=True)``).
        runs: Filled with the episodes run, by step (``oracle``, ``nop``, ``violation``), for a
            caller that reuses them (the no-op run is the quality gates' empty-answer run).
    """
    from ..sandbox.pool import SandboxPool

    loaded, report = _schema(path)
    if loaded is None:
        return report
    own = pool is None and reuse
    if own:
        pool = SandboxPool(max_per_task=1, max_total=1, bundles=bundles)
    steps = _Steps(loaded, judge, report, pool)
    if runs is not None:
        steps.runs = runs
    try:
        await steps.build()
        if getattr(loaded.spec, "original_grader", None) is not None and not loaded.spec.oracle:
            from .imported import validate_imported

            await validate_imported(steps)  # no reference solution: prove what can be without one
            return _finish(report)
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
        if own:
            await pool.close()
    return _finish(report)


def _finish(report: ValidationReport) -> ValidationReport:
    report.ok = all(f.ok for f in report.findings)
    report.proven = report.ok and all(f.proven for f in report.findings)
    return report


def _schema(path: str | Path | LoadedSpec) -> tuple[LoadedSpec | None, ValidationReport]:
    """Step ``schema``: the spec loads (None and the problems when it does not, each with
    its field and a repair hint, and the task named by its ``id:`` line or its folder)."""
    shown = str(path.path if isinstance(path, LoadedSpec) else path)
    try:
        loaded = path if isinstance(path, LoadedSpec) else load_spec(path)
    except SpecError as exc:
        return None, ValidationReport(spec=shown, task=_task_of(Path(shown)), ok=False,
                                      findings=[schema_finding(p) for p in exc.problems])
    report = ValidationReport(spec=str(loaded.path), task=loaded.spec.id, ok=True)
    report.findings.append(Finding(step="schema", ok=True, detail="spec is valid"))
    return loaded, report


#: ``file:line: field: message`` of a spec problem; the field is one word (``checks[1].paht``,
#: ``(top level)``); a problem without one (invalid YAML) has ``file:line: message``.
_PROBLEM = re.compile(r"^(?P<file>.*?):(?P<line>\d+): (?:(?P<field>\(top level\)|[^\s:]+): )?(?P<message>.*)$", re.DOTALL)
#: The task id of a spec that does not load: its ``id:`` line, read as text.
_ID_LINE = re.compile(r"^id:[ \t]*['\"]?([^'\"\s#]+)", re.MULTILINE)


def _task_of(path: Path) -> str | None:
    """The task a spec that does not load is about: its ``id:`` line, else its folder's name."""
    file = path / "task.yaml" if path.is_dir() else path
    try:
        m = _ID_LINE.search(file.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        m = None
    if m:
        return m.group(1)
    folder = file.parent if file.name == "task.yaml" else path
    return folder.name or None


def schema_finding(problem: str) -> Finding:
    """A load problem (``file:line: field: message``) as a ``schema`` finding: the field at
    fault and the repair its message calls for."""
    m = _PROBLEM.match(problem)
    field, message = (m.group("field"), m.group("message")) if m else (None, problem)
    return Finding(step="schema", ok=False, detail=problem, field=field, hint=schema_hint(field, message))


def schema_hint(field: str | None, message: str) -> str:
    """How to repair one load problem, from its field and message: the suggestion when the
    message makes one, else the repair its kind of problem needs."""
    leaf = (re.split(r"[.\[]", field)[-1].rstrip("]") if field and field != "(top level)" else "") or "the field"
    if leaf.isdigit():  # an item of a list: name it whole (checks[0])
        leaf = str(field)
    parent = field.rsplit(".", 1)[0] if field and "." in field else "the spec"
    said = re.search(r"did you mean ([^?]+)\?", message)
    if said and message.startswith("unknown field"):
        return f"rename {leaf!r} to {said.group(1)}, or remove it"
    if said:
        return f"write {said.group(1)} instead (the name as written does not exist)"
    rules: list[tuple[str, str]] = [
        ("unknown field", f"remove {leaf!r} from {parent}, or correct its spelling (every field: docs/spec.md, "
                          "`cowork spec schema`)"),
        ("required field is missing", f"add {leaf!r} to {parent}"),
        ("is not in the spec's tools allow-list", "add the tool (or its service) to `tools:`, or use a tool the "
                                                   "spec allows"),
        ("unknown tool", "use a tool that exists: docs/services.md lists them, `cowork spec schema` too"),
        ("unknown check type", "use one of the check types listed (docs/checks.md)"),
        ("duplicate key", f"remove one of the two {leaf!r} keys: YAML keeps only the last"),
        ("duplicate check id", "give every check and safety rule its own id"),
        ("duplicate task id", "give each task its own id"),
        ("is listed twice", "list each workspace file once"),
        ("invalid YAML", "fix the YAML syntax on that line (quote text holding ': ' or '#')"),
        ("not UTF-8", "save the file as UTF-8"),
        ("not found", "add the file or folder to the task folder, or correct the path"),
        ("outside the task folder", "give a path inside the task folder (no '..', not absolute)"),
        ("escapes the workspace", "give a path inside the workspace (no '..')"),
        ("is absolute", "give the path relative to the workspace"),
        ("is a symlink", "replace the link with a copy of the file"),
        ("invalid regular expression", "fix the pattern (RE2 syntax: no look-around, no backreferences)"),
        ("expected a mapping", "write the spec as a mapping of fields (id:, title:, prompt:, ...)"),
        ("a matcher needs exactly one of", "keep exactly one of equals, contains, regex, glob, one_of, absent, at, "
                                           "within"),
    ]
    for needle, hint in rules:
        if needle in message:
            return hint
    should = re.search(r"Input should be (.+?)(?:,| \(got |$)", message)
    if should:  # pydantic's "Input should be a valid integer, ..." / "... greater than 0"
        return f"make {leaf!r} {should.group(1).strip()}"
    # A message that carries its own repair: "what is wrong; what to do".
    if "; " in message:
        return message.rsplit("; ", 1)[1]
    return f"give {leaf!r} a valid value ({message})"


class _Steps:
    """The steps that run the spec in sandboxes, each adding its findings to one report."""

    def __init__(self, loaded: LoadedSpec, judge: Any, report: ValidationReport, pool: Any = None):
        self.loaded, self.spec, self.judge, self.report, self.pool = loaded, loaded.spec, judge, report, pool
        self.image = ""
        self.runs: dict[str, EpisodeResult] = {}
        #: Checks and rules that are or hold a judge: unproven without one.
        self.judged = [c for c in (*self.spec.checks, *self.spec.safety) if _needs_judge(c)]

    def _add(self, **finding: Any) -> None:
        self.report.findings.append(Finding(**finding))

    async def _run(self, agent: str) -> EpisodeResult:
        return await run_task(self.loaded, make_policy(agent, self.spec), image=self.image, judge=self.judge,
                              pool=self.pool)

    async def build(self) -> None:
        """Step ``build``: the task's image builds."""
        from ..engine.client import in_thread
        from ..engine.images import ensure_task_image

        if self.pool is not None:
            self.image, bundle = await self.pool.prepare(self.loaded)
        else:
            self.image, bundle = await in_thread(ensure_task_image, self.loaded), None
        self._add(step="build", ok=True, detail=self.image if bundle is None else f"{self.image} + bundle {bundle.name}")

    async def oracle(self) -> EpisodeResult:
        """Step ``oracle``: the reference solution earns full marks (step ``judge`` says what
        could not be proven without a judge)."""
        o1 = await self._run("oracle")
        g = o1.grade
        unproven = self.judge is None and bool(self.judged)
        if unproven:
            # Judge items cannot be proven without a judge: the oracle is held to the rest. Its
            # completion with every unjudged check at its best must be full marks (a formula
            # bounded by interval arithmetic), every other check judged, and no rule violated.
            by_id = _by_id(self.spec)
            low, high = completion_bounds(self.spec, g)
            ok = g.status == "graded" and high >= 1.0 - 1e-9 and not g.violations and \
                all(c.status != "not_graded" or (unjudged(c) and _needs_judge(by_id.get(c.id))) for c in g.checks)
            detail = f"completion {low:.2f} with the judges at 0, {high:.2f} at their best: NOT PROVEN without a judge"
        else:
            ok = g.passed and g.score == 1.0
            detail = f"score {g.score:.2f}"
        self.oracle_calls(o1, ok)
        self._add(step="oracle", ok=ok, proven=not unproven,
                  detail=detail + ("" if ok else f" ({g.status}); failing: {_failed(g)}"),
                  field="oracle",
                  hint=None if ok else "make the oracle's tool calls satisfy every check, or fix the checks it fails")
        if unproven:
            self._add(step="judge", ok=True, proven=False,
                      detail=f"NOT PROVEN: {len(self.judged)} judge check(s)/rule(s) ("
                             + ", ".join(c.id or c.type for c in self.judged)
                             + ") were not run; without --judge-model nothing shows the oracle earns them, the no-op "
                               "agent misses them or a judge safety rule can fire",
                      field=", ".join(f"{group}[{i}]" for group in ("checks", "safety")
                                      for i, c in enumerate(getattr(self.spec, group)) if _needs_judge(c)),
                      hint="run `cowork validate --judge-model M` to prove them")
        return o1

    def oracle_calls(self, oracle: EpisodeResult, passed: bool) -> None:
        """Step ``oracle-call``, before ``oracle``: every oracle tool call that returned an error,
        with its index in ``oracle``, the tool, the tool's error and the argument at fault where
        it can be told (a grade alone says only "0 records match"). A failure when the oracle
        fails; a note (ok) when it passes anyway, as a call meant to fail under faults may."""
        offered = {t["function"]["name"]: t["function"].get("parameters") or {}
                   for t in oracle.trajectory.tools if isinstance(t.get("function"), dict)}
        calls = [i for i, s in enumerate(self.spec.oracle) if s.tool is not None]
        for n, step in enumerate(oracle.trajectory.steps):
            if not step.is_error:
                continue
            # The oracle's policy numbers its steps call_1, call_2, ... (replies included).
            m = re.fullmatch(r"call_(\d+)", step.call_id)
            index = int(m.group(1)) - 1 if m else calls[n] if n < len(calls) else n
            arg, hint = call_fault(step.tool, step.args, step.output, offered.get(step.tool))
            self._add(step="oracle-call", ok=passed, field=f"oracle[{index}]" + (f".args.{arg}" if arg else ""),
                      detail=f"oracle[{index}] {step.tool} returned an error: {error_text(step.output)}"
                             + (" (the oracle passes anyway)" if passed else ""), hint=hint)

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
        """Step ``nop``: an agent that does nothing fails. It replies with an empty message:
        nothing done and nothing said (the quality gates' empty-answer agent, whose run a
        caller may reuse)."""
        nop = self.runs["nop"] = await run_task(self.loaded, ScriptedPolicy([""], name="nop"), image=self.image,
                                                judge=self.judge, pool=self.pool)
        ok = nop.grade.status == "graded" and not nop.grade.passed
        detail = f"no-op agent scores {nop.grade.score:.2f}" + ("" if ok else " and passes")
        proven = True
        if ok and self.judge is None and self.judged:
            # It fails with the judges at 0; it is proven to fail only if it fails with them
            # at their best too.
            high = score_bounds(self.spec, nop.grade)[1]
            if high >= self.spec.pass_threshold:
                proven = False
                detail = (f"NOT PROVEN: the no-op agent scores {nop.grade.score:.2f} with the judges at 0 and up to "
                          f"{high:.2f} with them at their best (threshold {self.spec.pass_threshold:.2f}); only a "
                          "judge can show it fails")
            else:
                detail += f", at most {high:.2f} whatever the judges say"
        self._add(step="nop", ok=ok, proven=proven, detail=detail,
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
        if not safety or (self.judge is None and all(_needs_judge(r) for r in safety)):
            self._add(step="violation", ok=True, proven=not safety, detail=(
                "no safety rules: no violation script needed" if not safety
                else "NOT PROVEN: every safety rule is or holds a judge rule, and no judge was given"))
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
            if _needs_judge(self.spec.safety[i]) and self.judge is None:
                continue  # reported as not proven by the judge step
            fired, how = probe_rule(self.spec, i, vio.evidence)
            self._add(step="safety-can-fire", ok=fired, field=f"safety[{i}]", detail=f"rule {rid!r}: {how}",
                      hint=None if fired else "make the violation script break this rule, or give the rule an "
                                              "`example:` it must catch; a rule that can never fire protects nothing")


def _needs_judge(check: Any) -> bool:
    """Whether a check is, or holds, a judge check."""
    return check is not None and any(c.type == "judge" for c in walk(check))


def _by_id(spec: Any) -> dict[str, Any]:
    """The spec's checks and rules by the id they are reported under."""
    return {spec.check_id(group, i): c for group in ("checks", "safety") for i, c in enumerate(getattr(spec, group))}


#: One problem in pydantic's text for a call's arguments: the argument, the message, its type.
_ARG_PROBLEM = re.compile(r"^(\S[^\n]*)\n  ([^\n\[]+?)(?: \[type=(\w+)[^\n]*)?$", re.MULTILINE)


def error_text(output: str, limit: int = 600) -> str:
    """A tool's error as one line: pydantic's argument problems as ``arg: message; ...``
    (without its links), any other error as it came, cut at ``limit`` characters."""
    problems = _ARG_PROBLEM.findall(output) if "validation error" in output else []
    text = "; ".join(f"{arg}: {msg}" for arg, msg, _ in problems) or " ".join(output.split())
    return text if len(text) <= limit else text[:limit] + "..."


def call_fault(tool: str, args: dict[str, Any], output: str, schema: dict[str, Any] | None) -> tuple[str | None, str]:
    """The argument at fault in a failed call (None when it cannot be told) and how to repair it.

    An unknown argument is named first (a misspelling leaves the real one missing too), with
    the closest parameter of the tool's schema; then a missing or mistyped one; for any other
    error, the argument whose value the error quotes (a record id that does not exist)."""
    import difflib

    params = list((schema or {}).get("properties") or {})
    required = set((schema or {}).get("required") or [])
    takes = ", ".join(p + ("" if p in required else "?") for p in params)
    problems = _ARG_PROBLEM.findall(output) if "validation error" in output else []
    for arg, msg, kind in sorted(problems, key=lambda p: p[2] != "unexpected_keyword_argument"):
        if kind == "unexpected_keyword_argument":
            close = difflib.get_close_matches(arg, params, n=1, cutoff=0.5)
            return arg, (f"{tool} has no argument {arg!r}" + (f"; did you mean {close[0]!r}?" if close else "")
                         + (f" It takes: {takes}" if params else ""))
        if kind == "missing_argument":
            return arg, f"give {tool} its required argument {arg!r}" + (f" (it takes: {takes})" if params else "")
        return arg, f"{arg}: {msg.strip()}; fix the value's type or form"
    for key, value in args.items():
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value) \
                and (repr(value) in output or f'"{value}"' in output):
            return key, (f"the call failed on {key}={value!r}: use a value the seed holds (or seed the record "
                         "it names), or the form the tool expects")
    return None, "fix the call's tool or arguments (docs/services.md), or seed the record it needs"


def report_json(reports: list[ValidationReport]) -> list[dict[str, Any]]:
    """JSON-ready form of several reports."""
    return [r.model_dump() for r in reports]
