"""Prove a generated spec in one sandbox: validation, then the quality gates, back to back.

``validate_spec`` (oracle twice, nop, violation, probes) and the trivial-agent gates
(``synth.trivial.trivial_runs``: empty answer, do everything, read everything and hedge) share
one :class:`~cowork.sandbox.pool.SandboxPool` sandbox, reset and verified between the runs,
and the task layer is mounted from a folder on the sandbox image (no image build per spec)
when this process may (root). The per-spec static gates (the answer gate, the difficulty
label) run first, without a sandbox. The corpus-wide gates (near-duplicates, clones) need
every spec and are the caller's (``cowork synth corpus --validate``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..spec.loader import LoadedSpec, load_spec


def can_bundle() -> bool:
    """True when the task layer may be mounted from a folder (the host process is root)."""
    return os.geteuid() == 0


@dataclass
class Proof:
    """What proving one spec found; ``ok`` when it validated and no gate refused it."""

    spec: str
    task: str | None = None
    capabilities: list[str] = field(default_factory=list)
    validation: Any = None
    """The :class:`~cowork.validate.validate.ValidationReport`."""
    trivial: Any = None
    """The :class:`~cowork.synth.trivial.TrivialRunReport` (None: not run, the spec did not validate)."""
    reasons: list[str] = field(default_factory=list)
    """Why it is rejected, each starting with its kind (``invalid <step>:``, ``gate:``)."""
    relabelled: str | None = None
    """``declared -> measured`` when the difficulty label was rewritten."""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Validated, gates passed, and every gate could judge it."""
        return not self.reasons

    def kinds(self) -> list[str]:
        """The kind of each reason (``invalid oracle``, ``gate trivial``, ...), for counting rejects."""
        return [r.split(":", 1)[0] for r in self.reasons]

    def as_record(self) -> dict[str, Any]:
        """This proof as JSON-ready data (the corpus journal's); :meth:`from_record` reads it
        back. ``trivial`` is left out: what the corpus reports use of it is in ``reasons``."""
        return {"spec": self.spec, "task": self.task, "capabilities": list(self.capabilities), "ok": self.ok,
                "reasons": list(self.reasons), "relabelled": self.relabelled, "seconds": round(self.seconds, 3),
                "validation": None if self.validation is None else self.validation.model_dump(mode="json")}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Proof:
        """The proof :meth:`as_record` wrote (``ok`` is recomputed from ``reasons``).

        Raises:
            KeyError: A field is missing.
            ValueError: The validation report does not read (a pydantic ValidationError).
        """
        from ..validate.validate import ValidationReport

        report = record["validation"]
        return cls(spec=record["spec"], task=record["task"], capabilities=list(record["capabilities"]),
                   validation=None if report is None else ValidationReport.model_validate(report),
                   reasons=list(record["reasons"]), relabelled=record["relabelled"], seconds=float(record["seconds"]))


async def prove(spec: str | Path | LoadedSpec, *, gates: bool = True, bundles: bool | None = None,
                judge: Any = None, fix_difficulty: bool = False) -> Proof:
    """Validate ``spec`` and, when it validates, run its quality gates in the same sandbox.

    Never raises for a bad spec. A gate that could not run (an infrastructure error) rejects
    the spec with its reason: what was not judged does not count as passed.

    Args:
        spec: A task folder, its task.yaml, or a loaded spec.
        gates: Also run the static answer gate and the trivial-agent runs.
        bundles: Mount the task layer instead of building an image (default: when root).
        judge: An LLM judge for ``judge`` checks (see ``validate_spec``).
        fix_difficulty: Rewrite an overclaimed ``difficulty:`` to the measured level instead
            of rejecting the spec.
    """
    from ..sandbox.pool import SandboxPool
    from ..validate.validate import validate_spec
    from . import gates as G
    from .trivial import trivial_runs

    t0 = time.monotonic()
    shown = str(spec.path if isinstance(spec, LoadedSpec) else spec)
    proof = Proof(spec=shown)
    try:
        loaded = spec if isinstance(spec, LoadedSpec) else load_spec(spec)
    except SpecError as exc:
        proof.reasons = [f"invalid schema: {p}" for p in exc.problems]
        proof.seconds = time.monotonic() - t0
        return proof
    proof.task, proof.capabilities = loaded.spec.id, list(loaded.spec.capabilities)
    if gates:
        answer = G.answer_gate(loaded)
        proof.reasons += [f"gate answer: {r}" for r in answer.reasons()] if answer.refused else []
    pool = SandboxPool(max_per_task=1, max_total=1, bundles=can_bundle() if bundles is None else bundles)
    try:
        episodes: dict[str, Any] = {}
        report = proof.validation = await validate_spec(loaded, judge, pool=pool, runs=episodes)
        proof.reasons += [f"invalid {f.step}: {f.detail}" for f in report.findings if not f.ok]
        if gates and report.ok:
            # Validation's no-op agent replied with an empty message: that is the empty-answer run.
            runs = proof.trivial = await trivial_runs(loaded, pool=pool, empty=episodes.get("nop"))
            if runs.error:
                proof.reasons.append(f"gate not run: {runs.error}")
            proof.reasons += [f"gate trivial: {r}" for r in runs.reasons]
            signal = G.difficulty(loaded, runs.empty_completion)
            if signal.overclaims and fix_difficulty:
                G.relabel(loaded, signal.predicted)
                proof.relabelled = f"{signal.declared} -> {signal.predicted}"
            elif signal.overclaims:
                proof.reasons.append(f"gate difficulty: declared {signal.declared} but measures {signal.predicted} "
                                     f"(score {signal.score:g})")
    finally:
        await pool.close()
    proof.seconds = time.monotonic() - t0
    return proof


async def _baseline(folder: Path) -> bool:
    """The path before: a task image, validation in one pool, the gates in another."""
    from ..validate.validate import validate_spec
    from .trivial import trivial_runs

    report = await validate_spec(folder, bundles=False)
    if not report.ok:
        return False
    runs = await trivial_runs(load_spec(folder), bundles=False)
    return not runs.refused and not runs.error


async def bench(folders: list[Path], *, concurrency: int = 2, rounds: int = 2) -> dict[str, Any]:
    """Time proving ``folders`` with :func:`prove` against the path before it (a task image per
    spec, validation and the gates each in their own sandbox), on the same specs, in alternating
    rounds (``rounds`` of each, new first then old, then old first), so that both see the same
    machine. Task images of the old path are removed before each of its rounds: a corpus is
    built once. Returns each path's specs per second (median over its rounds) and the ratio.
    """
    import asyncio
    import statistics

    from ..engine.client import get_client, in_thread
    from ..engine.images import TASK_REPO_PREFIX

    ids = {load_spec(f).spec.id for f in folders}

    def drop_images() -> None:
        client = get_client()
        for image in client.images.list():
            if any(t.startswith(TASK_REPO_PREFIX) and t[len(TASK_REPO_PREFIX):].rsplit(":", 1)[0] in ids
                   for t in image.tags):
                client.images.remove(image.id, force=True)

    async def one_round(new: bool) -> tuple[float, int]:
        if not new:
            await in_thread(drop_images)
        limit = asyncio.Semaphore(concurrency)

        async def one(folder: Path) -> bool:
            async with limit:
                return (await prove(folder)).ok if new else await _baseline(folder)

        t0 = time.monotonic()
        oks = await asyncio.gather(*(one(f) for f in folders))
        return len(folders) / (time.monotonic() - t0), sum(oks)

    rates: dict[str, list[float]] = {"one sandbox, bundles": [], "before": []}
    accepted: dict[str, int] = {}
    for r in range(rounds):
        for new in ((True, False) if r % 2 == 0 else (False, True)):
            rate, ok = await one_round(new)
            key = "one sandbox, bundles" if new else "before"
            rates[key].append(rate)
            accepted[key] = ok
    med = {k: statistics.median(v) for k, v in rates.items()}
    return {"specs": len(folders), "concurrency": concurrency, "rounds": rounds,
            "specs_per_second": {k: round(v, 3) for k, v in med.items()},
            "each_round": {k: [round(x, 3) for x in v] for k, v in rates.items()},
            "accepted": accepted, "speedup": round(med["one sandbox, bundles"] / med["before"], 2)}
