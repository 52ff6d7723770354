"""A rollout's results: its samples and groups, and the ``results.jsonl`` lines they are written
as and read back from."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..episode.trajectory import Trajectory
from ..errors import CoworkError
from ..evidence import Evidence
from ..grading import Grade

#: One line per finished episode, in the order they finished.
RESULTS_FILE = "results.jsonl"


@dataclass
class RolloutSample:
    """One finished episode of a group."""

    task: str
    group: int
    """Index of the task in the rollout's input."""
    sample: int
    """Index of the sample in its group (0 .. G-1)."""
    seed: int | None
    """The episode's fault seed (None: the spec's own)."""
    grade: Grade
    trajectory: Trajectory
    reward: float | None
    """See :func:`cowork.rollouts.rewards.reward_for`; None for an ``infra_error`` episode."""
    infra_failures: list[str] = field(default_factory=list)
    """Infrastructure failures retried away on a fresh sandbox (each one's message)."""
    evidence: Evidence | None = None
    """The evidence; None when there is none (``infra_error``) or once it was written to the
    output folder (read it back with ``Evidence.load(out_dir / bundle)``)."""
    bundle: Path | None = None
    """The episode's folder, relative to the output folder (None without one)."""
    total_s: float = 0.0
    """Seconds from asking for a sandbox to the grade, retries included."""
    resumed: bool = False
    """Read back from the output folder of an earlier, interrupted run."""
    node: str | None = None
    """The Ray node that ran it (``cowork.integrations.ray``); None for a local episode."""
    policy_version: int | None = None
    """The trainer's policy version when the episode started (a streaming rollout's
    ``version``; each turn's own is ``TurnSpan.policy_version``); None where none is counted."""

    @property
    def status(self) -> str:
        """How the episode ended (the trajectory's status)."""
        return self.trajectory.status

    def row(self) -> dict[str, Any]:
        """The episode's line in ``results.jsonl`` (paths relative to the output folder)."""
        g, t = self.grade, self.trajectory
        return {"task": self.task, "group": self.group, "sample": self.sample, "seed": self.seed, "agent": t.agent,
                "status": t.status, "grade_status": g.status, "score": g.score, "passed": g.passed,
                "completion": g.completion, "safe": g.safe, "violations": g.violations, "robustness": g.robustness,
                "reward": self.reward, "turns": t.turns, "tool_calls": len(t.steps),
                "durations": {"episode_s": t.duration_s, "total_s": round(self.total_s, 3)},
                "infra_failures": self.infra_failures,
                "evidence": str(self.bundle) if self.bundle is not None and g.status != "infra_error" else None,
                "trajectory": str(self.bundle / "trajectory.json") if self.bundle is not None else None,
                **({"node": self.node} if self.node is not None else {}),
                **({"policy_version": self.policy_version} if self.policy_version is not None else {}),
                **({"surrogates_replaced": True} if t.surrogates_replaced else {})}


@dataclass
class RolloutGroup:
    """The G samples of one task, ordered by sample index."""

    task: str
    index: int
    samples: list[RolloutSample]

    @property
    def rewards(self) -> list[float | None]:
        """The samples' rewards, in sample order."""
        return [s.reward for s in self.samples]


@dataclass
class RolloutResult:
    """What one :meth:`~cowork.rollouts.runner.RolloutRunner.rollout` call gives back."""

    groups: list[RolloutGroup]
    """One per task, in input order."""
    summary: dict[str, Any]
    """Per task and overall: see :func:`cowork.rollouts.metrics.summarize_episodes`; also
    ``episodes_per_s``, ``wall_s``, ``episodes_run`` (this call) and ``episodes_resumed``."""
    episodes_per_s: float
    """Episodes run by this call per second of its wall time (resumed ones not counted)."""
    out_dir: Path | None = None

    @property
    def rewards(self) -> list[list[float | None]]:
        """B x G rewards (None for an ``infra_error`` episode)."""
        return [g.rewards for g in self.groups]

    @property
    def samples(self) -> list[RolloutSample]:
        """Every sample, task by task, in sample order."""
        return [s for g in self.groups for s in g.samples]


def append_jsonl(path: str | os.PathLike, obj: Any) -> None:
    """Append one JSON line to ``path``, flushed and synced: once this returns, a crash of the
    process or the machine loses nothing of it."""
    line = json.dumps(obj, default=str) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)  # one write: a kill leaves a whole line or a line without its newline
        fh.flush()
        os.fsync(fh.fileno())


def read_results(path: str | os.PathLike) -> tuple[list[dict[str, Any]], int]:
    """The lines of a results file and the byte length of its whole lines.

    A last line without its newline is torn (its writer was killed mid-write) and left out.

    Raises:
        CoworkError: a whole line is not a JSON object naming ``task`` and ``sample``.
    """
    data = Path(path).read_bytes()
    end = data.rfind(b"\n") + 1
    rows = []
    for n, line in enumerate(data[:end].split(b"\n")[:-1], start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise CoworkError(f"{path}:{n}: not a JSON line ({exc}); remove the line to rerun that episode") from exc
        if not (isinstance(row, dict) and isinstance(row.get("task"), str) and isinstance(row.get("sample"), int)):
            raise CoworkError(f"{path}:{n}: not a results line (needs 'task' and 'sample'); remove it to rerun that episode")
        rows.append(row)
    return rows, end


__all__ = ["RESULTS_FILE", "RolloutGroup", "RolloutResult", "RolloutSample", "append_jsonl", "read_results"]
