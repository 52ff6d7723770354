"""Rollouts: every task G times over a pool of warm sandboxes -> rewards, a results file, metrics.

A trainer calls :meth:`RolloutRunner.rollout` once per step and gets one group of G graded
samples per task; ``cowork rollout`` and ``cowork run`` are the same call from the command
line. With an output folder every finished episode is written at once (its bundle, then one
line of ``results.jsonl``, flushed and synced), so a run that was killed is resumed by
running it again: only what is missing runs.
"""

from __future__ import annotations

import asyncio
import collections
import glob
import inspect
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..agents.base import Policy
from ..episode import run as episode
from ..episode.run import Trajectory
from ..errors import CoworkError, SpecError
from ..evidence import Evidence
from ..grading import Grade
from ..spec.loader import LoadedSpec, load_specs
from ..spec.models import TaskSpec
from ..terminal import printable
from .metrics import NOT_SCORED, summarize_episodes
from .rewards import REWARDS, Reward, reward_for

log = logging.getLogger(__name__)

#: The last call's summary (figures of the run), beside results.jsonl.
SUMMARY_FILE = "summary.json"
RESULTS_FILE = "results.jsonl"
RUN_FILE = "run.json"
#: Run parameters a resumed run must share with the one that wrote the folder.
_RUN_KEYS = {"group_size": "group size", "agent": "agent", "reward": "reward", "seed": "seed"}

PolicyOrFactory = Policy | Callable[[TaskSpec], Policy]
TaskInput = LoadedSpec | str | os.PathLike


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
    """See :func:`reward_for`; None for an ``infra_error`` episode."""
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
                **({"node": self.node} if self.node is not None else {})}


@dataclass
class RolloutGroup:
    """The G samples of one task, ordered by sample index."""

    task: str
    index: int
    samples: list[RolloutSample]

    @property
    def rewards(self) -> list[float | None]:
        return [s.reward for s in self.samples]


@dataclass
class RolloutResult:
    """What one :meth:`RolloutRunner.rollout` call gives back."""

    groups: list[RolloutGroup]
    """One per task, in input order."""
    summary: dict[str, Any]
    """Per task and overall: see :func:`cowork.rollout.metrics.summarize_episodes`; also
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


# --------------------------------------------------------------------------- the output folder
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


def save_bundle(folder: str | os.PathLike, sample: RolloutSample, spec: TaskSpec, *, fresh: bool = False) -> Path:
    """Write an episode's bundle: the evidence (when there is some), ``grade.json``,
    ``spec.json`` (so ``cowork grade FOLDER`` regrades it offline) and ``trajectory.json``.

    Args:
        fresh: Empty the folder first (a bundle left half-written by a killed run); the
            files are synced before this returns.
    """
    d = Path(folder)
    if fresh and d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True, exist_ok=True)
    if sample.evidence is not None:
        sample.evidence.save(d)
    (d / "grade.json").write_text(sample.grade.model_dump_json(indent=1))
    (d / "spec.json").write_text(spec.model_dump_json(indent=1))
    (d / "trajectory.json").write_text(sample.trajectory.model_dump_json(indent=1))
    if fresh:  # a results line names a complete bundle, power cut or not
        for f in sorted(d.rglob("*"), reverse=True):  # files first, then their folders (boundaries/)
            if f.is_dir():
                _fsync_dir(f)
            else:
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
        _fsync_dir(d)
    return d


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
        try:
            self._check_params(params)
            if not self.results.exists():
                return {}
            rows, end = read_results(self.results)
            if end < self.results.stat().st_size:
                log.warning("%s: dropping a torn last line (its writer was killed mid-write)", self.results)
                os.truncate(self.results, end)
            # An episode that ended on an infrastructure (or model endpoint) failure says nothing of the agent and
            # is not done: its line goes (the file is rewritten whole, atomically) and it runs again.
            failed = [r for r in rows if r.get("grade_status") in NOT_SCORED]
            if failed:
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
            done: dict[tuple[str, int], dict[str, Any]] = {}
            for row in rows:
                done.setdefault((row["task"], row["sample"]), row)
            return done
        except BaseException:
            self.close()
            raise

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

    def append(self, row: dict[str, Any]) -> None:
        append_jsonl(self.results, row)

    def close(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # releases the flock
            self._lock = None


# --------------------------------------------------------------------------- progress
class _Progress:
    """Live progress on stderr: one line redrawn on a terminal, plain lines (each tenth, or
    every 5 s) otherwise."""

    def __init__(self, stream: TextIO | None, total: int, tasks: int, group_size: int,
                 done: Iterable[RolloutSample]):
        self.stream, self.total, self.tasks, self.group_size = stream, total, tasks, group_size
        self.tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self.t0 = self.last_print = time.monotonic()
        self.done = self.ran = self.infra = self.retries = self.broke = 0
        self.rewards: list[float] = []
        self.per_task: dict[str, int] = {}
        self.decile = -1
        self.last_task = ""
        for s in done:
            self._count(s)
        self.ran = 0

    def _count(self, s: RolloutSample) -> None:
        self.done += 1
        self.ran += 1
        self.per_task[s.task] = self.per_task.get(s.task, 0) + 1
        self.infra += s.grade.status in NOT_SCORED
        self.broke += s.grade.status == "agent_broke_sandbox"
        self.retries += len(s.infra_failures)
        if s.reward is not None:
            self.rewards.append(s.reward)
        self.last_task = s.task

    def line(self) -> str:
        rate = self.ran / max(time.monotonic() - self.t0, 1e-9)
        mean = f"{sum(self.rewards) / len(self.rewards):.3f}" if self.rewards else "-"
        tasks_done = sum(n >= self.group_size for n in self.per_task.values())
        return (f"rollout: {self.done}/{self.total} episodes, {tasks_done}/{self.tasks} tasks, {rate:.2f} episodes/s, "
                f"mean reward {mean}, infra errors {self.infra} (retried {self.retries}), broken sandboxes {self.broke}"
                + (f", last {printable(self.last_task)}" if self.last_task else ""))

    def add(self, s: RolloutSample) -> None:
        self._count(s)
        if self.stream is None:
            return
        if self.tty:
            self.stream.write("\r\x1b[K" + self.line())
            self.stream.flush()
            return
        decile = self.done * 10 // max(self.total, 1)
        now = time.monotonic()
        if decile > self.decile or now - self.last_print >= 5.0:
            self.decile, self.last_print = decile, now
            print(self.line(), file=self.stream, flush=True)

    def close(self) -> None:
        if self.stream is not None and self.tty:
            self.stream.write("\n")
            self.stream.flush()


# --------------------------------------------------------------------------- the runner
class _Schedule:
    """Which episode a free worker runs next.

    The next sample of the task it just ran, while there is one: the sandbox it released is
    reset in milliseconds and serves that sample, where another task's episode would start
    a sandbox (about a second, several on a loaded machine). A worker whose task has no
    sample left joins the first task with fewer than its share of workers (concurrency /
    tasks, at least 1), else the one with fewest: near the end of a run, with episodes as
    slow as a model's, a start costs less than waiting. Measured on 2 cores, 15 tasks x G=4
    with the oracle at concurrency 4: a plain semaphore over the episodes in task order
    started a sandbox for every episode (0.81 episodes/s); this order starts about one per
    task (1.75 episodes/s).
    """

    def __init__(self, todo: list[tuple[int, int]], concurrency: int):
        self.pending: dict[int, collections.deque] = {}
        for i, s in todo:
            self.pending.setdefault(i, collections.deque()).append(s)
        self.workers: collections.Counter = collections.Counter()
        self.share = max(1, -(-concurrency // max(1, len(self.pending))))

    def next(self, current: int | None) -> tuple[int, int] | None:
        """The (task, sample) for a worker that just finished an episode of ``current``."""
        if current is not None:
            if self.pending[current]:
                return current, self.pending[current].popleft()
            self.workers[current] -= 1
        left = [i for i, q in self.pending.items() if q]
        if not left:
            return None
        under = [i for i in left if self.workers[i] < self.share]
        i = under[0] if under else min(left, key=lambda i: (self.workers[i], i))
        self.workers[i] += 1
        return i, self.pending[i].popleft()


class RolloutRunner:
    """Runs tasks x G episodes over a sandbox pool it keeps between calls.

    ``results = await runner.rollout(tasks, policy, group_size=G)`` once per training step;
    the pool's sandboxes stay warm (reset and verified) from one call to the next. Use one
    event loop for the runner's life (``async with RolloutRunner(...) as runner:``).

    Args:
        concurrency: Most episodes in flight at once.
        pool: A :class:`~cowork.sandbox.pool.SandboxPool` to use (and leave open); by default the
            runner makes one of ``pool_size`` sandboxes and closes it in :meth:`close`.
        pool_size: Most sandboxes of the runner's own pool (default: ``concurrency``).
        out_dir: Default output folder of :meth:`rollout` (None: keep results in memory only).
        reward: ``"score"``, ``"pass"``, ``"safety_gated"`` or a function of the Grade
            (see :func:`reward_for`).
        infra_retries: Fresh sandboxes tried after an infrastructure failure, per episode.
        progress: Show live progress on stderr (or on this stream).
        judge: An LLM judge for rubric items (``grading.judge.LLMJudge``).
        backend: Where the runner's own pool runs sandboxes (a backend name or instance).
        turn_progress: Measure the checks' progress after every turn of every episode
            (``Trajectory.turn_progress``, for turn-level credit; see cowork.rollout.rewards).
        user_model: Simulates the users of specs with ``user.llm`` (a
            :class:`cowork.episode.conversation.UserModel`); without one their scripted turns are used.

    Raises:
        ValueError: a limit below 1, or an unknown reward name.
    """

    def __init__(self, *, concurrency: int = 8, pool: Any = None, pool_size: int | None = None,
                 out_dir: str | os.PathLike | None = None, reward: Reward = "score", infra_retries: int = 1,
                 progress: bool | TextIO = False, judge: Any = None, backend: Any = None,
                 turn_progress: bool = False, user_model: Any = None):
        if concurrency < 1 or (pool_size is not None and pool_size < 1) or infra_retries < 0:
            raise ValueError(f"need concurrency >= 1, pool_size >= 1, infra_retries >= 0; got {concurrency}, "
                             f"{pool_size}, {infra_retries}")
        if not callable(reward) and reward not in REWARDS:
            raise ValueError(f"unknown reward {reward!r}; choose one of {', '.join(REWARDS)} or pass a function of the Grade")
        self.concurrency = concurrency
        self.pool_size = pool_size or concurrency
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.reward = reward
        self.infra_retries = infra_retries
        self.progress = progress
        self.judge = judge
        self.backend = backend
        self.turn_progress = turn_progress
        self.user_model = user_model
        self._pool = pool
        self._own_pool = pool is None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def pool(self) -> Any:
        """The sandbox pool (None until the first rollout when the runner makes its own)."""
        return self._pool

    async def rollout(self, tasks: TaskInput | Iterable[TaskInput], policy: PolicyOrFactory, *, group_size: int,
                      seed: int | None = None, out_dir: str | os.PathLike | None = None, agent: str | None = None,
                      on_episode: Callable[[RolloutSample], Awaitable[None] | None] | None = None) -> RolloutResult:
        """Run every task ``group_size`` times and grade each episode.

        Args:
            tasks: Loaded specs, task folders, ``task.yaml`` files, folders of tasks or glob
                patterns of those (one, or several in order).
            policy: A stateless Policy shared by every episode, or a factory
                ``spec -> Policy`` called once per episode (scripted policies keep their
                place in the script, so they need a factory).
            group_size: Samples per task (G).
            seed: Base fault seed: sample s gets ``seed + s`` (None: each spec's own).
            out_dir: Output folder (default: the runner's). An interrupted run resumes
                when called again with the same folder: only missing episodes run. Give
                each training step its own folder, or None.
            agent: The agent's name in ``run.json`` (default: the policy's ``name``).
            on_episode: Called with each sample as it finishes, after it was written (may
                be a coroutine function).

        Raises:
            SpecError: a task does not load, or two tasks share an id.
            ValueError: ``group_size`` below 1; a stateful policy instance instead of a factory.
            TypeError: ``policy`` is neither a Policy nor callable.
            CoworkError: the output folder holds another run or is in use; errors outside
                the episodes (an image that does not build, no Docker daemon). Episodes
                finished before that are written, so a rerun resumes.
        """
        if group_size < 1:
            raise ValueError(f"group_size must be at least 1, got {group_size}")
        self._check_loop()
        specs = _load_tasks(tasks)
        make = _policy_factory(policy)
        out = Path(out_dir) if out_dir is not None else self.out_dir
        todo = [(i, s) for i in range(len(specs)) for s in range(group_size)]
        first = make(specs[0].spec) if agent is None else None  # built once: scripted policies are single-use
        agent = agent if agent is not None else first.name
        folder, done = None, {}
        if out is not None:
            folder = RunFolder(out)
            params = {"group_size": group_size, "agent": agent, "reward": _reward_name(self.reward), "seed": seed,
                      "tasks": [ld.spec.id for ld in specs]}
            done = await asyncio.to_thread(folder.open, params)
        try:
            groups = [RolloutGroup(task=ld.spec.id, index=i, samples=[None] * group_size)  # type: ignore[list-item]
                      for i, ld in enumerate(specs)]
            resumed = [(i, s) for i, s in todo if (specs[i].spec.id, s) in done]
            for i, s in resumed:
                groups[i].samples[s] = await asyncio.to_thread(_resumed_sample, out, done[(specs[i].spec.id, s)], i)
            todo = [(i, s) for i, s in todo if groups[i].samples[s] is None]
            stream = None if not self.progress else (sys.stderr if self.progress is True else self.progress)
            progress = _Progress(stream, len(specs) * group_size, len(specs), group_size,
                                 [groups[i].samples[s] for i, s in resumed])
            policies = {todo[0]: first} if todo and first is not None and todo[0][0] == 0 else {}
            pool = self._get_pool()
            schedule = _Schedule(todo, self.concurrency)
            write_lock = asyncio.Lock()

            async def one(i: int, s: int) -> None:
                p = policies.pop((i, s), None) or make(specs[i].spec)
                sample = await self._episode(specs[i], i, s, seed, p, pool)
                if folder is not None:
                    sample.bundle = Path("episodes", sample.task, str(sample.sample))
                    await asyncio.to_thread(save_bundle, folder.root / sample.bundle, sample, specs[i].spec, fresh=True)
                    async with write_lock:
                        await asyncio.to_thread(folder.append, sample.row())
                if on_episode is not None:
                    result = on_episode(sample)
                    if inspect.isawaitable(result):
                        await result
                if folder is not None:
                    sample.evidence = None  # on disk now; memory stays flat over long runs
                groups[i].samples[s] = sample
                progress.add(sample)

            async def worker() -> None:  # one episode in flight per worker
                current = None
                while (job := schedule.next(current)) is not None:
                    current = job[0]
                    await one(*job)

            t0 = time.monotonic()
            running = [asyncio.ensure_future(worker()) for _ in range(min(self.concurrency, len(todo)))]
            try:
                for fut in asyncio.as_completed(running):
                    await fut  # the first error stops the rollout; what finished is written
            finally:
                for fut in running:
                    fut.cancel()
                await asyncio.gather(*running, return_exceptions=True)
                progress.close()
            wall = time.monotonic() - t0
        finally:
            if folder is not None:
                folder.close()
        rate = len(todo) / wall if todo and wall > 0 else 0.0
        summary = summarize_episodes([s.row() for g in groups for s in g.samples], k=group_size)
        summary.update(episodes_per_s=round(rate, 3), wall_s=round(wall, 3), episodes_run=len(todo),
                       episodes_resumed=len(resumed), group_size=group_size, reward=_reward_name(self.reward),
                       agent=agent)
        if out is not None:
            # The run's figures beside its results (what `cowork view` charts); rewritten by each call.
            tmp = Path(out) / f"{SUMMARY_FILE}.tmp"
            tmp.write_text(json.dumps(summary, indent=1, default=str))
            os.replace(tmp, Path(out) / SUMMARY_FILE)
        return RolloutResult(groups=groups, summary=summary, episodes_per_s=rate, out_dir=out)

    async def _episode(self, loaded: LoadedSpec, group: int, s: int, base_seed: int | None, policy: Policy,
                       pool: Any) -> RolloutSample:
        seed = None if base_seed is None else base_seed + s
        t0 = time.monotonic()
        # Looked up on the module at call time, so tests can stand in for run_task.
        res = await episode.run_task(loaded, policy, infra_retries=self.infra_retries, judge=self.judge, pool=pool,
                                     seed=seed, **({"turn_progress": True} if self.turn_progress else {}),
                                     **({"user_model": self.user_model} if self.user_model is not None else {}))
        return RolloutSample(task=loaded.spec.id, group=group, sample=s, seed=seed, grade=res.grade,
                             trajectory=res.trajectory, reward=reward_for(res.grade, self.reward),
                             infra_failures=list(res.infra_failures), evidence=res.evidence,
                             total_s=time.monotonic() - t0)

    def _get_pool(self) -> Any:
        if self._pool is None:
            from ..sandbox.pool import SandboxPool

            self._pool = SandboxPool(max_per_task=self.pool_size, max_total=self.pool_size, backend=self.backend)
        return self._pool

    def _check_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise CoworkError("this RolloutRunner's sandboxes belong to another event loop; run every rollout() in "
                              "one loop (one asyncio.run around the training loop), or make a runner per loop")

    async def close(self) -> None:
        """Remove the sandboxes of the runner's own pool (a pool passed in is left open)."""
        if self._own_pool and self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def __aenter__(self) -> "RolloutRunner":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


async def rollout(tasks: TaskInput | Iterable[TaskInput], policy: PolicyOrFactory, *, group_size: int,
                  concurrency: int = 8, out_dir: str | os.PathLike | None = None, reward: Reward = "score",
                  seed: int | None = None, infra_retries: int = 1, pool: Any = None, pool_size: int | None = None,
                  progress: bool | TextIO = False, judge: Any = None, backend: Any = None) -> RolloutResult:
    """One rollout with a runner made for it (and its pool closed after): see :class:`RolloutRunner`
    and :meth:`RolloutRunner.rollout` for the arguments and what is raised."""
    async with RolloutRunner(concurrency=concurrency, pool=pool, pool_size=pool_size, out_dir=out_dir, reward=reward,
                             infra_retries=infra_retries, progress=progress, judge=judge, backend=backend) as runner:
        return await runner.rollout(tasks, policy, group_size=group_size, seed=seed)


# --------------------------------------------------------------------------- helpers
def _load_tasks(tasks: TaskInput | Iterable[TaskInput]) -> list[LoadedSpec]:
    if isinstance(tasks, (LoadedSpec, str, os.PathLike)):
        tasks = [tasks]
    loaded: list[LoadedSpec] = []
    for t in tasks:
        if isinstance(t, LoadedSpec):
            loaded.append(t)
            continue
        paths = [t]
        if isinstance(t, str) and glob.has_magic(t):
            paths = sorted(glob.glob(t))
            if not paths:
                raise SpecError(f"no task matches {t!r}")
        loaded += load_specs(paths)
    if not loaded:
        raise SpecError("no tasks given")
    seen: set[str] = set()
    for ld in loaded:
        if ld.spec.id in seen:
            raise SpecError(f"{ld.path}: id: duplicate task id {ld.spec.id!r} in one rollout")
        seen.add(ld.spec.id)
    return loaded


def _policy_factory(policy: PolicyOrFactory) -> Callable[[TaskSpec], Policy]:
    if isinstance(policy, Policy):
        if callable(getattr(policy, "reset", None)):
            raise ValueError(f"policy {policy.name!r} keeps state between episodes (it has reset()); pass a factory "
                             "instead, e.g. lambda spec: make_policy('oracle', spec)")
        return lambda spec: policy
    if callable(policy):
        return policy
    raise TypeError(f"policy must be a Policy or a function spec -> Policy, got {type(policy).__name__}")


def _reward_name(reward: Reward) -> str:
    return reward if isinstance(reward, str) else getattr(reward, "__qualname__", repr(reward))


def _resumed_sample(out: Path, row: dict[str, Any], group: int) -> RolloutSample:
    """A sample written by an earlier run, read back from its line and bundle."""
    bundle = Path("episodes", row["task"], str(row["sample"]))
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


__all__ = ["REWARDS", "RolloutGroup", "RolloutResult", "RolloutRunner", "RolloutSample", "RunFolder", "append_jsonl",
           "read_results", "reward_for", "rollout", "save_bundle"]
