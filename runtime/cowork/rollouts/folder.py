"""A rollout's output folder: ``run.json``, ``results.jsonl``, ``summary.json`` and one bundle per
episode, locked while a run writes to it and checked before a run resumes it."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from pydantic_core import PydanticSerializationError

from ..episode.trajectory import Trajectory
from ..errors import CoworkError
from ..formats import any_surrogates, replace_surrogates
from ..grading import Grade
from ..spec.models import TaskSpec
from .metrics import NOT_SCORED
from .results import RESULTS_FILE, RolloutSample, append_jsonl, read_results

log = logging.getLogger(__name__)

#: The last call's summary (figures of the run), beside results.jsonl.
SUMMARY_FILE = "summary.json"
RUN_FILE = "run.json"
#: Run parameters a resumed run must share with the one that wrote the folder.
_RUN_KEYS = {"group_size": "group size", "agent": "agent", "reward": "reward", "seed": "seed"}


def bundle_path(task: str, sample: int) -> Path:
    """An episode's bundle folder, relative to the output folder."""
    return Path("episodes", task, str(sample))


def save_bundle(folder: str | os.PathLike, sample: RolloutSample, spec: TaskSpec, *, fresh: bool = False) -> Path:
    """Write an episode's bundle: the evidence (when there is some), ``grade.json``,
    ``spec.json`` (so ``cowork grade FOLDER`` regrades it offline) and ``trajectory.json``.

    A lone surrogate the model wrote is saved as U+FFFD (see :func:`savable`): the sample's
    trajectory and grade become the saved ones, so its results line says so too.

    Args:
        folder: The bundle's folder (made when missing).
        sample: The finished episode.
        spec: The task it ran.
        fresh: Empty the folder first (a bundle left half-written by a killed run); the
            files are synced before this returns.
    """
    try:
        grade_json, trajectory_json = sample.grade.model_dump_json(indent=1), sample.trajectory.model_dump_json(indent=1)
    except PydanticSerializationError:  # only then walk them: the common case serialises once
        sample.trajectory, sample.grade = savable(sample.trajectory, sample.grade)
        grade_json, trajectory_json = sample.grade.model_dump_json(indent=1), sample.trajectory.model_dump_json(indent=1)
    d = Path(folder)
    if fresh and d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True, exist_ok=True)
    if sample.evidence is not None:
        sample.evidence.save(d)
    (d / "grade.json").write_text(grade_json)
    (d / "spec.json").write_text(spec.model_dump_json(indent=1))
    (d / "trajectory.json").write_text(trajectory_json)
    if fresh:  # a results line names a complete bundle, power cut or not
        for f in sorted(d.rglob("*"), reverse=True):  # files first, then their folders (boundaries/)
            if f.is_dir():
                _fsync_dir(f)
            else:
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
        _fsync_dir(d)
    return d


def savable(trajectory: Trajectory, grade: Grade) -> tuple[Trajectory, Grade]:
    """The trajectory and grade as UTF-8 can hold them: a lone surrogate the model wrote (in a
    tool call's arguments, in its reply, quoted by a check) is replaced by U+FFFD and the
    trajectory marked ``surrogates_replaced``, as the audit log does; unchanged otherwise."""
    t, g = trajectory.model_dump(), grade.model_dump()
    if not any_surrogates(t) and not any_surrogates(g):
        return trajectory, grade
    log.warning("%s: the model wrote lone surrogates; saved as U+FFFD (surrogates_replaced)", trajectory.task[:200])
    t = {**replace_surrogates(t), "surrogates_replaced": True}
    return Trajectory.model_validate(t), Grade.model_validate(replace_surrogates(g))


def resumed_sample(out: Path, row: dict[str, Any], group: int) -> RolloutSample:
    """A sample written by an earlier run, read back from its line and bundle.

    Raises:
        CoworkError: the bundle's grade or trajectory cannot be read.
    """
    bundle = bundle_path(row["task"], row["sample"])
    try:
        g = Grade.model_validate_json((out / bundle / "grade.json").read_text())
        t = Trajectory.model_validate_json((out / bundle / "trajectory.json").read_text())
    except (OSError, ValueError) as exc:
        raise CoworkError(f"{out / bundle}: the bundle of a finished episode cannot be read ({exc}); remove its line "
                          f"from {out / RESULTS_FILE} to rerun it") from exc
    return RolloutSample(task=row["task"], group=group, sample=row["sample"], seed=row.get("seed"), grade=g,
                         trajectory=t, reward=row.get("reward"), infra_failures=list(row.get("infra_failures") or []),
                         bundle=bundle, total_s=float((row.get("durations") or {}).get("total_s") or 0.0), resumed=True,
                         node=row.get("node"))


def write_summary(out: Path, summary: dict[str, Any]) -> None:
    """The run's figures beside its results (what ``cowork view`` charts); rewritten by each call."""
    tmp = Path(out) / f"{SUMMARY_FILE}.tmp"
    tmp.write_text(json.dumps(summary, indent=1, default=str))
    os.replace(tmp, Path(out) / SUMMARY_FILE)


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class RunFolder:
    """An output folder: ``run.json`` (the run's parameters), ``results.jsonl`` (one line per
    finished episode, written after its bundle) and ``episodes/<task>/<sample>/`` (bundles).

    Opening takes a lock on the folder for as long as it is open: two runs writing to one
    folder would each redo what the other is doing.
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.results = self.root / RESULTS_FILE
        self._lock: int | None = None

    def open(self, params: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
        """Lock the folder, check or record the run's parameters, repair a torn last line;
        returns the finished episodes by (task, sample).

        Raises:
            CoworkError: another run holds the folder; the folder holds a run with other
                parameters (group size, agent, reward, seed); a results line is unreadable.
        """
        self._take_lock()
        try:
            self._check_params(params)
            return self._finished()
        except BaseException:
            self.close()
            raise

    def _take_lock(self) -> None:
        import fcntl

        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise CoworkError(f"{self.root}: another rollout is writing to this folder; wait for it or choose "
                              "another output folder") from exc
        self._lock = fd

    def _check_params(self, params: dict[str, Any]) -> None:
        path = self.root / RUN_FILE
        if path.exists():
            try:
                old = json.loads(path.read_text())
            except ValueError as exc:
                raise CoworkError(f"{path}: unreadable ({exc}); choose another output folder") from exc
            for key, what in _RUN_KEYS.items():
                if old.get(key) != params[key]:
                    raise CoworkError(f"{self.root} holds a rollout with {what} {old.get(key)!r}, not {params[key]!r} "
                                      f"(see {path}); rerun with the same {what} to resume it, or choose another "
                                      "output folder")
            tasks = list(old.get("tasks", []))
            if set(params["tasks"]) <= set(tasks):
                return
            params = {**old, "tasks": tasks + [t for t in params["tasks"] if t not in tasks]}
        elif self.results.exists() and self.results.stat().st_size:
            raise CoworkError(f"{self.results} exists but {path} does not: not a rollout folder; choose another one")
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(params, indent=1))
        os.replace(tmp, path)

    def record_agents(self, counts: dict[str, int]) -> None:
        """Write the episodes per agent into ``run.json`` (``agents``), beside the agent the run
        was asked for: a policy factory may mix agents, and the folder says which played."""
        path = self.root / RUN_FILE
        try:
            params = json.loads(path.read_text())
        except (OSError, ValueError):
            return  # never written (the folder did not open) or unreadable: nothing to add to
        if not isinstance(params, dict) or params.get("agents") == counts:
            return
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({**params, "agents": counts}, indent=1))
        os.replace(tmp, path)

    def _finished(self) -> dict[tuple[str, int], dict[str, Any]]:
        """The scored episodes of the results file by (task, sample), a torn last line dropped."""
        if not self.results.exists():
            return {}
        rows, end = read_results(self.results)
        if end < self.results.stat().st_size:
            log.warning("%s: dropping a torn last line (its writer was killed mid-write)", self.results)
            os.truncate(self.results, end)
        rows = self._drop_unscored(rows)
        done: dict[tuple[str, int], dict[str, Any]] = {}
        for row in rows:
            done.setdefault((row["task"], row["sample"]), row)
        return done

    def _drop_unscored(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """An episode that ended on an infrastructure (or model endpoint) failure says nothing of the
        agent and is not done: its line goes (the file is rewritten whole, atomically) and it runs again."""
        failed = [r for r in rows if r.get("grade_status") in NOT_SCORED]
        if not failed:
            return rows
        log.warning("%s: running again %d episode(s) that ended on an infrastructure or model "
                    "endpoint failure", self.results, len(failed))
        rows = [r for r in rows if r.get("grade_status") not in NOT_SCORED]
        tmp = self.results.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r, default=str) + "\n" for r in rows)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.results)
        _fsync_dir(self.root)
        return rows

    def append(self, row: dict[str, Any]) -> None:
        """Append one results line, synced."""
        append_jsonl(self.results, row)

    def close(self) -> None:
        """Release the folder's lock."""
        if self._lock is not None:
            os.close(self._lock)  # releases the flock
            self._lock = None


__all__ = ["RUN_FILE", "SUMMARY_FILE", "RunFolder", "bundle_path", "resumed_sample", "save_bundle", "savable", "write_summary"]
