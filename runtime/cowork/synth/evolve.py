"""Environment evolution: the next round of tasks from a rollout's per-task pass rates.

WorkRover-style: a task the policy passes at least ``harder_at`` of the time is replaced by
harder variants of its family (the next difficulty up, a fresh seed: bigger worlds, more steps,
distractors and traps), a task it never passes by easier ones (the next difficulty down), and
the tasks in between are kept. Every new task is validated; an invalid one is left out with its
reason. Everything but validation is decided by ``seed``, so the same rollout gives the same
next round.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

from ..agents.base import Policy
from ..agents.scripted import ScriptedPolicy
from ..errors import CoworkError
from .family import DIFFICULTIES, families, generate, write_draft

log = logging.getLogger(__name__)

REPORT_JSON = "evolve-report.json"
REPORT_TEXT = "evolve-report.txt"

Decision = Literal["harder", "easier", "keep"]
#: A validator: the new task's folder -> (valid, reason when not). The default proves it in sandboxes.
Validator = Callable[[Path], Awaitable[tuple[bool, str]]]


class Variant(BaseModel):
    """A new task made from a source task."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """The new task's id (``<family>-<seed>``)."""
    difficulty: str
    ok: bool
    """Written (validated); False: left out."""
    reason: str = ""
    """Why it was left out (a failed validation step, a generator error)."""


class Entry(BaseModel):
    """One source task: its pass rate, what was decided and what came of it."""

    model_config = ConfigDict(extra="forbid")

    task: str
    passed: int
    """Episodes that passed."""
    episodes: int
    """Scored episodes (infra and policy errors are not scored)."""
    pass_rate: float | None
    """passed / episodes; None without a scored episode."""
    decision: Decision
    reason: str
    """Why: the rate against the thresholds, or why the task could only be kept."""
    family: str | None = None
    difficulty: str | None = None
    variants: list[Variant] = []
    """New tasks (harder / easier); empty for a kept task."""
    written: str | None = None
    """Where a kept task was copied to (None: not copied, see ``reason``)."""


class Report(BaseModel):
    """What ``cowork synth evolve`` did (``OUT/evolve-report.json``)."""

    model_config = ConfigDict(extra="forbid")

    runs: str
    out: str
    seed: int
    harder_at: float
    easier_at: float
    variants_per_task: int
    entries: list[Entry]
    counts: dict[str, int]
    """sources, harder, easier, keep, new (written), rejected, kept (copied), tasks (in OUT)."""
    pass_rate: float | None
    """The source corpus's pass rate (episodes passed / scored)."""

    def summary(self) -> str:
        """Human-readable lines: one per source task, then the counts."""
        lines = []
        for e in self.entries:
            rate = "  n/a" if e.pass_rate is None else f"{e.pass_rate:5.0%}"
            new = ", ".join(v.id + ("" if v.ok else " (left out)") for v in e.variants)
            lines.append(f"{rate} {e.decision:6} {e.task}" + (f" -> {new}" if new else "") + f"  [{e.reason}]")
            lines += [f"        left out {v.id}: {v.reason}" for v in e.variants if not v.ok]
        c = self.counts
        rate = "n/a" if self.pass_rate is None else f"{self.pass_rate:.0%}"
        lines.append(f"{c['sources']} task(s), pass rate {rate}: {c['harder']} harder, {c['easier']} easier, "
                     f"{c['keep']} kept; {c['new']} new task(s) written, {c['rejected']} left out; "
                     f"{c['tasks']} task(s) in {self.out}")
        return "\n".join(lines)


# --------------------------------------------------------------------------- the decision
def decide(rate: float | None, *, harder_at: float = 0.9, easier_at: float = 0.0) -> tuple[Decision, str]:
    """The decision and its reason: harder when ``rate >= harder_at``, easier when
    ``rate <= easier_at``, else (and without a scored episode) keep."""
    if rate is None:
        return "keep", "no scored episode"
    if rate >= harder_at:
        return "harder", f"pass rate {rate:.0%} >= {harder_at:.0%}"
    if rate <= easier_at:
        return "easier", f"pass rate {rate:.0%} <= {easier_at:.0%}"
    return "keep", f"pass rate {rate:.0%} between the thresholds"


def next_difficulty(difficulty: str | None, decision: Decision) -> str:
    """One level up for harder, down for easier, clamped (a hard task gets a fresh hard seed)."""
    i = DIFFICULTIES.index(difficulty) if difficulty in DIFFICULTIES else 1
    i += 1 if decision == "harder" else -1 if decision == "easier" else 0
    return DIFFICULTIES[max(0, min(len(DIFFICULTIES) - 1, i))]


def fresh_seed(seed: int, task: str, k: int) -> int:
    """The k-th new seed for ``task`` (sha256, not hash(): the same on every run and machine);
    above 10**6 so it stays clear of the small seeds corpora start from."""
    digest = hashlib.sha256(f"evolve:{seed}:{task}:{k}".encode()).digest()
    return 10**6 + int.from_bytes(digest[:8], "big") % (10**9 - 10**6)


# --------------------------------------------------------------------------- reading the rollout
def pass_rates(runs: Path) -> dict[str, tuple[int, int]]:
    """Per task of a rollout folder: (episodes passed, episodes scored), in the run's task order.

    Raises:
        CoworkError: ``runs`` holds no results.jsonl.
    """
    from ..rollouts.metrics import NOT_SCORED
    from ..rollouts.results import RESULTS_FILE, read_results

    results = runs / RESULTS_FILE
    if not results.is_file():
        raise CoworkError(f"{runs}: no {RESULTS_FILE}; give a folder written by `cowork rollout --out`")
    order: list[str] = []
    run_json = runs / "run.json"
    if run_json.is_file():
        order = list(json.loads(run_json.read_text()).get("tasks") or [])
    rows, _ = read_results(results)
    counts: dict[str, tuple[int, int]] = {t: (0, 0) for t in order}
    for row in rows:
        passed, scored = counts.get(row["task"], (0, 0))
        if row.get("grade_status") not in NOT_SCORED:
            passed, scored = passed + bool(row.get("passed")), scored + 1
        counts[row["task"]] = (passed, scored)
    return counts


@dataclass
class Source:
    """A source task as far as evolution needs it."""

    id: str
    tags: list[str]
    difficulty: str | None
    folder: Path | None
    """Its spec folder (from ``--specs``); None when only the rollout's copy is known."""


def find_sources(runs: Path, specs: Path | None, tasks: list[str]) -> dict[str, Source]:
    """Each task's spec: its folder under ``specs`` (any depth), else the rollout's bundle copy."""
    found: dict[str, Source] = {}
    if specs is not None:
        for path in sorted(specs.rglob("task.yaml")):
            try:
                data = yaml.safe_load(path.read_text())
            except (OSError, yaml.YAMLError):
                continue
            if isinstance(data, dict) and data.get("id") in tasks and data["id"] not in found:
                found[data["id"]] = Source(data["id"], list(data.get("tags") or []), data.get("difficulty"), path.parent)
    for task in tasks:
        if task in found:
            continue
        for copy in sorted((runs / "episodes" / task).glob("*/spec.json")):
            data = json.loads(copy.read_text())
            found[task] = Source(task, list(data.get("tags") or []), data.get("difficulty"), None)
            break
    return found


def family_of(source: Source) -> tuple[str | None, int | None, str]:
    """(family, seed, reason): the family a generated task came from, or None with the reason."""
    names = [t.split(":", 1)[1] for t in source.tags if t.startswith("family:")]
    if not names:
        return None, None, "no family:<name> tag (a hand-written spec)"
    name = names[0]
    if name not in families():
        return None, None, f"family {name!r} is not registered"
    m = re.fullmatch(re.escape(name) + r"-(\d+)", source.id)
    if m is None:
        return None, None, f"id {source.id!r} is not <family>-<seed>"
    return name, int(m.group(1)), ""


# --------------------------------------------------------------------------- the round
async def default_validator(folder: Path) -> tuple[bool, str]:
    """Prove a spec in real sandboxes (``validate_spec``); the failed steps as the reason."""
    from ..validate.validate import validate_spec

    report = await validate_spec(folder)
    return report.ok, "; ".join(f"{f.step}: {f.detail}" for f in report.findings if not f.ok)


class Evolver:
    """One evolution round: read the rollout, decide per task, write and validate the new tasks.

    Args:
        runs: A rollout folder (``cowork rollout --out``).
        out: Where the next round's task folders and the report go.
        specs: Where the source tasks' folders are (to copy kept ones as they are).
        seed: Decides every fresh seed.
        variants: New tasks per harder or easier task.
        harder_at: Pass rate at or above which a task gets harder.
        easier_at: Pass rate at or below which a task gets easier.
        validator: Proves a new task (default: :func:`default_validator`, in sandboxes).
    """

    def __init__(self, runs: Path, out: Path, *, specs: Path | None = None, seed: int = 0, variants: int = 1,
                 harder_at: float = 0.9, easier_at: float = 0.0, validator: Validator | None = None):
        if variants < 1:
            raise CoworkError(f"--variants must be at least 1, got {variants}")
        if not 0.0 <= easier_at < harder_at <= 1.0:
            raise CoworkError(f"need 0 <= easier-at < harder-at <= 1, got {easier_at} and {harder_at}")
        self.runs, self.out, self.specs, self.seed, self.variants = Path(runs), Path(out), specs, seed, variants
        self.harder_at, self.easier_at = harder_at, easier_at
        self.validator = validator or default_validator
        self._taken: set[str] = set()

    async def run(self) -> Report:
        """Evolve, write ``OUT/evolve-report.json`` and ``.txt``, and return the report."""
        rates = pass_rates(self.runs)
        tasks = sorted(rates)
        sources = find_sources(self.runs, self.specs, tasks)
        self._taken = set(tasks)
        self.out.mkdir(parents=True, exist_ok=True)
        entries = [await self._one(task, *rates[task], sources.get(task)) for task in tasks]
        passed, scored = sum(p for p, _ in rates.values()), sum(n for _, n in rates.values())
        new = [v for e in entries for v in e.variants]
        decisions = Counter(e.decision for e in entries)
        counts: dict[str, int] = {"sources": len(entries), "harder": decisions["harder"],
                                  "easier": decisions["easier"], "keep": decisions["keep"],
                                  "new": sum(v.ok for v in new), "rejected": sum(not v.ok for v in new),
                                  "kept": sum(e.written is not None for e in entries)}
        counts["tasks"] = counts["new"] + counts["kept"]
        report = Report(runs=str(self.runs), out=str(self.out), seed=self.seed, harder_at=self.harder_at,
                        easier_at=self.easier_at, variants_per_task=self.variants, entries=entries, counts=counts,
                        pass_rate=passed / scored if scored else None)
        (self.out / REPORT_JSON).write_text(report.model_dump_json(indent=1))
        (self.out / REPORT_TEXT).write_text(report.summary() + "\n")
        return report

    async def _one(self, task: str, passed: int, scored: int, source: Source | None) -> Entry:
        rate = passed / scored if scored else None
        decision, reason = decide(rate, harder_at=self.harder_at, easier_at=self.easier_at)
        entry = Entry(task=task, passed=passed, episodes=scored, pass_rate=rate, decision=decision, reason=reason)
        if source is None:
            entry.decision, entry.reason = "keep", f"{reason}; kept: no spec found (give --specs)"
            return entry
        entry.difficulty = source.difficulty
        name, seed, why = family_of(source)
        entry.family = name
        if name is None or seed is None:
            entry.decision, entry.reason = "keep", f"{reason}; kept as is: {why}"
            entry.written = self._keep(source, None, None)
            if entry.written is None:
                entry.reason += "; not copied (its folder is unknown: give --specs)"
            return entry
        if decision == "keep":
            entry.written = self._keep(source, name, seed)
            return entry
        level = next_difficulty(source.difficulty, decision)
        if level == source.difficulty:
            entry.reason += f"; already {level}: fresh {level} seed(s)"
        entry.variants = [await self._variant(name, task, k, level) for k in range(self.variants)]
        return entry

    def _keep(self, source: Source, name: str | None, seed: int | None) -> str | None:
        """Copy the source's folder; a generated task without one is generated again (same seed,
        same difficulty: the same spec byte for byte)."""
        dest = self.out / source.id
        if source.folder is not None:
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(source.folder, dest)
            return str(dest)
        if name is None or seed is None:
            return None
        draft = generate(name, seed, source.difficulty)
        return str(write_draft(draft, self.out)) if draft.spec["id"] == source.id else None

    async def _variant(self, name: str, task: str, k: int, level: str) -> Variant:
        """Generate the k-th new task of ``task``, write it and validate it (removed if invalid)."""
        j = k
        while (new_id := f"{name}-{fresh_seed(self.seed, task, j)}") in self._taken:
            j += self.variants  # another source drew the same seed: the next one of this task's own
        self._taken.add(new_id)
        try:
            draft = generate(name, fresh_seed(self.seed, task, j), level)
        except Exception as exc:  # noqa: BLE001 - a generator's bug costs its variant, not the round
            return Variant(id=new_id, difficulty=level, ok=False, reason=f"generation: {type(exc).__name__}: {exc}")
        draft.spec["tags"] = [*draft.spec["tags"], f"evolved-from:{task}"]
        folder = write_draft(draft, self.out)
        ok, why = await self.validator(folder)
        if not ok:
            shutil.rmtree(folder)
            log.info("evolve: %s left out: %s", new_id, why)
        return Variant(id=new_id, difficulty=level, ok=ok, reason="" if ok else f"invalid: {why}")


async def evolve(runs: Path, out: Path, **options: Any) -> Report:
    """One evolution round (see :class:`Evolver` for the options)."""
    return await Evolver(runs, out, **options).run()


# --------------------------------------------------------------------------- a policy of known skill
class KnownSkill:
    """A factory of scripted policies of known skill, to show evolution at work.

    It plays the oracle of a task whose oracle has at most ``reliable`` tool calls; up to
    ``shaky`` calls, on every other episode of that task (the 1st, 3rd, ...: half the time);
    beyond, it does nothing. Pass it to the rollout runner as the policy factory.
    """

    def __init__(self, reliable: int, shaky: int | None = None, name: str = "known-skill"):
        self.reliable, self.shaky, self.name = reliable, reliable if shaky is None else shaky, name
        self._episodes: Counter[str] = Counter()

    def __call__(self, spec: Any) -> Policy:
        """A new policy for one episode of ``spec``: its oracle when within skill, else nothing."""
        calls = sum(step.tool is not None for step in spec.oracle)
        k = self._episodes[spec.id]
        self._episodes[spec.id] += 1
        if calls <= self.reliable or (calls <= self.shaky and k % 2 == 0):
            return ScriptedPolicy([s.reply if s.tool is None else (s.tool, s.args) for s in spec.oracle], self.name)
        return ScriptedPolicy([], self.name)
