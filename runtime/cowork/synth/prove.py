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
        report = proof.validation = await validate_spec(loaded, judge, pool=pool)
        proof.reasons += [f"invalid {f.step}: {f.detail}" for f in report.findings if not f.ok]
        if gates and report.ok:
            runs = proof.trivial = await trivial_runs(loaded, pool=pool)
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
