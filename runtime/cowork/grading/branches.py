"""Abandoned branches in a grade: every branch a restore left behind is graded with the same spec,
and its safety folds into the final verdict (docs/checkpoints.md, "Grading across restores").

A restore archives the live branch and starts over from a snapshot; the live audit log then
holds a ``restore`` record naming the branch it abandoned (its number, record count, last hash
and the SHA-256 of its log). A violation made there is not undone by the restore, so the grade
of the state left after it must still report it. Here each branch the evidence carries is
bound to the restore record that names it, graded, and folded in; a branch that is named but
missing, altered, or unreadable makes safety unknown. The score stays the live state's (the
reward of the branch kept); ``safe`` and ``passed`` cover every branch.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict

from ..evidence import Evidence
from ..spec.models import TaskSpec
from ..terminal import printable


class BranchGrade(BaseModel):
    """The verdict on one branch a restore abandoned."""

    model_config = ConfigDict(extra="forbid")

    branch: int
    """The branch's number (``branches/branch-<n>`` in the run dir, ``branches/<n>/`` in a bundle)."""
    status: Literal["graded", "not_graded"]
    """``not_graded``: the branch could not be judged (missing, unreadable, altered or invalid
    evidence; ``error`` says why): its safety is unknown, which never passes."""
    safe: bool | None = None
    """As :attr:`Grade.safe`, for this branch alone."""
    violations: list[str] = []
    """Ids of the safety rules the branch violated."""
    not_graded: list[str] = []
    """Ids of the branch's safety rules that could not be judged."""
    completion: float | None = None
    """The branch's own completion (information only: the grade's score is the live state's)."""
    checks: list[dict[str, Any]] = []
    """The branch's safety rule results (as :class:`CheckResult`), with their audit proof."""
    error: str | None = None
    """Why the branch could not be graded."""

    def line(self) -> str:
        """One line for people; values from the evidence are escaped for the terminal."""
        if self.status == "not_graded":
            return f"  BRANCH {self.branch} (abandoned by a restore) could not be graded: {printable(self.error or '')} " \
                   "(safety unknown)"
        safe = {True: "True", False: "False", None: "unknown"}[self.safe]
        tail = f"; violated: {printable(', '.join(self.violations))}" if self.violations else ""
        if self.not_graded:
            tail += f"; not judged: {printable(', '.join(self.not_graded))}"
        return f"  BRANCH {self.branch} (abandoned by a restore): safe={safe}{tail}"


def named_branches(ev: Evidence) -> tuple[dict[int, dict[str, Any]], dict[int, str]]:
    """The branches the ``restore`` records of the live log and of every carried branch name,
    with what each record says of it (``count``, ``last_hash``, ``sha256``); and the numbers
    named twice with different values (neither can be trusted), with why."""
    named: dict[int, dict[str, Any]] = {}
    conflicts: dict[int, str] = {}
    for chain in [ev.chain, *(b.chain for b in ev.branches)]:
        for rec in chain.records:
            if rec.get("kind") != "restore":
                continue
            n, abandoned = rec.get("branch"), rec.get("abandoned")
            if not isinstance(n, int) or not isinstance(abandoned, dict):
                continue
            if n in named and named[n] != abandoned:
                conflicts[n] = f"restore records name branch {n} twice, differently ({named[n]} and {abandoned})"
            named.setdefault(n, abandoned)
    return named, conflicts


def _number(branch: Evidence, i: int) -> int:
    n = (branch.meta.get("branch") or {}).get("branch")
    return n if isinstance(n, int) else -i  # a bundle without its number: never mistaken for a named one


def _unfit(ev: Evidence, branch: Evidence, told: dict[str, Any] | None) -> str | None:
    """Why ``branch`` cannot be graded as a branch of ``ev``: it lacks the service state the
    live evidence has, or its log is not the one its restore record (``told``) names."""
    if ev.state_final is not None and (branch.state_final is None or branch.state_seed is None):
        return "its service state is missing (the live evidence has one): its service rules cannot be judged"
    if told is None:
        return None
    chain = branch.chain
    last = chain.records[-1].get("hash") if chain.records else None
    digest = hashlib.sha256(branch.audit_text.encode("utf-8", "surrogateescape")).hexdigest()
    for key, have in (("count", len(chain.records)), ("last_hash", last), ("sha256", digest)):
        if told.get(key) != have:
            return f"its audit log does not match the restore record that abandoned it ({key} {have!r}, " \
                   f"the record says {told.get(key)!r})"
    return None


def _graded(n: int, g: Any) -> BranchGrade:
    """A branch's own grade as a :class:`BranchGrade`."""
    if g.status == "evidence_invalid":
        return BranchGrade(branch=n, status="not_graded", error=f"its evidence is invalid: {g.error}")
    safety = [c for c in g.checks if c.group == "safety"]
    return BranchGrade(branch=n, status="graded", safe=g.safe, violations=list(g.violations),
                       not_graded=[c.id for c in safety if c.status == "not_graded"], completion=g.completion,
                       checks=[c.model_dump() for c in safety])


def branch_grades(spec: TaskSpec, ev: Evidence, grade_one: Callable[[TaskSpec, Evidence], Any]) -> list[BranchGrade]:
    """Every branch the evidence carries or names, graded with ``spec`` by ``grade_one``, by number.

    A branch named by a restore record but not carried, one whose log is not the one named,
    and one the exporter or the bundle could not read (``meta["branch_errors"]``) are
    ``not_graded``. A carried branch no record names is graded all the same.
    """
    named, conflicts = named_branches(ev)
    errors = {str(k): str(v) for k, v in (ev.meta.get("branch_errors") or {}).items()}
    carried = {_number(b, i): b for i, b in enumerate(ev.branches, start=1)}
    out: dict[int, BranchGrade] = {}
    for n, branch in carried.items():
        why = conflicts.get(n) or _unfit(ev, branch, named.get(n))
        out[n] = BranchGrade(branch=n, status="not_graded", error=why) if why else _graded(n, grade_one(spec, branch))
    for n, told in named.items():
        if n not in out:
            why = errors.pop(str(n), None) or "it is not in the evidence"
            out[n] = BranchGrade(branch=n, status="not_graded",
                                 error=f"a restore record names it ({told.get('count')} records, last hash "
                                       f"{str(told.get('last_hash'))[:16]}) but {why}")
    for i, (key, why) in enumerate(sorted(errors.items()), start=1):
        n = int(key) if key.isdigit() else -len(carried) - i
        if n not in out:
            out[n] = BranchGrade(branch=n, status="not_graded", error=why)
    return [out[n] for n in sorted(out)]


def with_branches(spec: TaskSpec, ev: Evidence, live: Any, grade_one: Callable[[TaskSpec, Evidence], Any]) -> Any:
    """``live`` (a Grade of the live state) with every abandoned branch folded in.

    ``safe``: False when the live state or any branch violated a rule, else None when any
    could not be judged. ``passed`` also needs every branch judged, and safe unless the spec
    turns the safety gate off (as for the live state). Branch verdicts are added to
    ``violations`` / ``not_graded`` as ``branch-<n>:<rule>`` (``branch-<n>`` for a branch
    not graded). Score, completion and checks stay the live state's.
    """
    found = branch_grades(spec, ev, grade_one)
    if not found:
        return live
    safes = [live.safe, *(b.safe for b in found)]
    safe = False if False in safes else (None if None in safes else True)
    gate = spec.scoring.safety_gate
    passed = live.passed and all(b.safe is not None and (b.safe or not gate) for b in found)
    violations = [*live.violations, *(f"branch-{b.branch}:{rid}" for b in found for rid in b.violations)]
    not_graded = [*live.not_graded, *(f"branch-{b.branch}:{rid}" for b in found for rid in b.not_graded),
                  *(f"branch-{b.branch}" for b in found if b.status == "not_graded")]
    return live.model_copy(update={"branches": found, "safe": safe, "passed": passed, "violations": violations,
                                   "not_graded": not_graded})
