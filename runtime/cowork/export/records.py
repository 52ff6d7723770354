"""The episodes an export reads: :class:`EpisodeRecord` (a results line, its trajectory and grade),
loaded from rollout folders or results files, and the tool calls of their messages."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Union

from ..episode.trajectory import Trajectory
from ..errors import CoworkError
from ..formats import INVALID_ARGUMENTS_KEY
from ..grading import Grade
from ..rollouts.results import RESULTS_FILE

log = logging.getLogger(__name__)


@dataclass
class EpisodeRecord:
    """One finished episode: its results line, its trajectory and its grade."""

    task: str
    group: int | None
    """The task's index in its rollout (None in results lines that predate groups)."""
    sample: int
    trajectory: Trajectory
    grade: Grade
    row: dict[str, Any] = field(default_factory=dict)
    """The episode's results line as read."""
    where: str = "<memory>"
    """``file:line`` of the results line (for messages)."""
    uid: str = ""
    """Unique among the episodes of one export (default ``task:group:sample``)."""

    def __post_init__(self) -> None:
        if not self.uid:
            self.uid = f"{self.group_id}:{self.sample}"

    @property
    def group_id(self) -> str:
        """The rollout's group: the G samples of one task (``task:group``)."""
        return self.task if self.group is None else f"{self.task}:{self.group}"


Source = Union[str, os.PathLike, EpisodeRecord, Iterable[Union[str, os.PathLike, EpisodeRecord]]]
"""What :func:`cowork.export.write.export` reads: paths of rollout folders or results files, or records."""


def load_episodes(path: str | os.PathLike) -> Iterator[EpisodeRecord]:
    """The episodes of a rollout output folder or of a results file, in file order.

    Reads the lines of ``cowork rollout --out DIR`` (``DIR/results.jsonl``, paths relative to
    DIR) and of ``cowork run --results FILE`` (which name the bundle in ``evidence`` and may
    carry the grade inline). A line's trajectory is the file its ``trajectory`` names, else
    ``<evidence>/trajectory.json``; its grade is the inline ``grade``, else ``grade.json``
    beside the trajectory. Relative paths are tried against the results file's folder, then
    the current directory. A last line without its newline was torn by a killed writer and
    is skipped.

    Raises:
        CoworkError: the path holds no results file; a whole line is not a JSON object with
            ``task`` and ``sample`` (or ``trial``); its trajectory or grade is missing or does
            not validate. The message names ``file:line``.
    """
    p = Path(path)
    results = p / RESULTS_FILE if p.is_dir() else p
    if not results.is_file():
        raise CoworkError(f"{p}: no {RESULTS_FILE} here; pass a rollout output folder (cowork rollout --out DIR) "
                          "or a results file (cowork run --results FILE)")
    data = results.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        log.warning("%s: skipping a torn last line (its writer was killed mid-write)", results)
    for n, raw in enumerate(data[:end].split(b"\n")[:-1], start=1):
        if raw.strip():
            yield _record(results, n, raw)


def _record(results: Path, n: int, raw: bytes) -> EpisodeRecord:
    where = f"{results}:{n}"
    try:
        row = json.loads(raw)
    except ValueError as exc:
        raise CoworkError(f"{where}: not a JSON line ({exc}); repair or remove the line") from exc
    sample = row.get("sample", row.get("trial")) if isinstance(row, dict) else None
    if not (isinstance(row, dict) and isinstance(row.get("task"), str) and isinstance(sample, int)):
        raise CoworkError(f"{where}: not a results line (needs 'task' and 'sample'); repair or remove the line")
    group = row.get("group")
    base = results.parent
    evidence = row.get("evidence")
    candidates = [c for c in (row.get("trajectory"), f"{evidence}/trajectory.json" if isinstance(evidence, str) else "")
                  if isinstance(c, str) and c]
    traj_path = next((f for c in candidates for f in _tried(base, c) if f.is_file()), None)
    if traj_path is None:
        tried = ", ".join(str(f) for c in candidates for f in _tried(base, c)) or "nothing (the line names no bundle)"
        raise CoworkError(f"{where}: no trajectory for task {row['task']!r} sample {sample}: tried {tried}; export "
                          "reads the bundles that `cowork rollout --out DIR` (or `cowork run --evidence DIR`) writes")
    try:
        traj = Trajectory.model_validate_json(traj_path.read_bytes())
        if isinstance(row.get("grade"), dict):
            g = Grade.model_validate(row["grade"])
        else:
            grade_path = traj_path.parent / "grade.json"
            if not grade_path.is_file():
                raise CoworkError(f"{where}: no grade for task {row['task']!r} sample {sample}: {grade_path} is "
                                  "missing and the line carries none")
            g = Grade.model_validate_json(grade_path.read_bytes())
    except ValueError as exc:  # pydantic's ValidationError and bad JSON
        raise CoworkError(f"{where}: the bundle in {traj_path.parent} does not load ({exc})") from exc
    return EpisodeRecord(task=row["task"], group=group if isinstance(group, int) else None, sample=sample,
                         trajectory=traj, grade=g, row=row, where=where)


def _tried(base: Path, rel: str) -> list[Path]:
    p = Path(rel)
    return [p] if p.is_absolute() else [base / p, p]


def pooled_records(source: Source) -> Iterator[EpisodeRecord]:
    """Episodes of one or several sources (paths or records), uids made unique."""
    items = [source] if isinstance(source, (str, os.PathLike, EpisodeRecord)) else list(source)
    seen: dict[str, int] = {}
    for item in items:
        for rec in [item] if isinstance(item, EpisodeRecord) else load_episodes(item):
            n = seen.get(rec.uid, 0)
            seen[rec.uid] = n + 1
            if n:  # the same task/group/sample from another run or file
                rec.uid = f"{rec.uid}#{n}"
            yield rec


# --------------------------------------------------------------------------- tool calls in messages
def call_pairs(calls: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(call, call["function"])`` pairs of a message's tool calls (a missing part as {})."""
    return [(c, c.get("function") or {}) if isinstance(c, dict) else ({}, {}) for c in calls or []]


def arguments_text(args: Any) -> str:
    """Arguments as the JSON string OpenAI's format carries."""
    return args if isinstance(args, str) else json.dumps(args if args is not None else {})


def arguments_object(args: Any) -> dict[str, Any]:
    """Decoded arguments; what is not a JSON object is kept as the sandbox was shown it."""
    if isinstance(args, dict):
        return args
    try:
        value = json.loads(args) if isinstance(args, str) and args else {}
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {INVALID_ARGUMENTS_KEY: args}


__all__ = ["EpisodeRecord", "Source", "arguments_object", "arguments_text", "call_pairs", "load_episodes",
           "pooled_records"]
