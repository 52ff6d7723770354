"""Rollouts: every task G times over a pool of warm sandboxes -> rewards, a results file, metrics.

A trainer calls :meth:`RolloutRunner.rollout` once per step and gets one group of G graded
samples per task; ``cowork rollout`` and ``cowork run`` are the same call from the command
line. With an output folder every finished episode is written at once (its bundle, then one
line of ``results.jsonl``, flushed and synced), so a run that was killed is resumed by
running it again: only what is missing runs.

The parts: :mod:`.results` (samples, groups, results lines), :mod:`.folder` (the output
folder, resume), :mod:`.schedule` (which episode runs next), :mod:`.progress_line`,
:mod:`.rewards` and :mod:`.metrics` (the summary's figures).
"""

from __future__ import annotations

import asyncio
import glob
import inspect
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..agents.base import Policy
from ..agents.tokens import seed_sample
from ..episode import run as episode
from ..errors import CoworkError, SpecError
from ..sandbox.pool import spares_for
from ..spec.loader import LoadedSpec, load_specs
from ..spec.models import TaskSpec
from ..synth.dataset import resolve_tasks
from .folder import RUN_FILE, SUMMARY_FILE, RunFolder, bundle_path, resumed_sample, save_bundle, write_summary
from .metrics import summarize_episodes
from .progress_line import ProgressLine
from .results import RESULTS_FILE, RolloutGroup, RolloutResult, RolloutSample, append_jsonl, read_results
from .rewards import REWARDS, Reward, reward_for
from .schedule import Schedule
from .stream import RolloutStream, VersionFn

PolicyOrFactory = Policy | Callable[[TaskSpec], Policy]
TaskInput = LoadedSpec | str | os.PathLike
OnEpisode = Callable[[RolloutSample], Awaitable[None] | None]

log = logging.getLogger(__name__)


@dataclass
class _Call:
    """What one :meth:`RolloutRunner.rollout` call works on, shared by its steps."""

    specs: list[LoadedSpec]
    make: Callable[[TaskSpec], Policy]
    group_size: int
    seed: int | None
    agent: str
    first: Policy | None
    """The policy built to name the agent: the first episode's (scripted policies are single-use)."""
    out: Path | None
    on_episode: OnEpisode | None
    groups: list[RolloutGroup]
    todo: list[tuple[int, int]]
    """(task index, sample) of the episodes to run: every one, then what resuming left."""
    folder: RunFolder | None = None
    resumed: list[RolloutSample] = field(default_factory=list)
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """One results line written at a time."""
    wall_s: float = 0.0


class RolloutRunner:
    """Runs tasks x G episodes over a sandbox pool it keeps between calls.

    ``results = await runner.rollout(tasks, policy, group_size=G)`` once per training step;
    the pool's sandboxes stay warm (reset and verified) from one call to the next. Use one
    event loop for the runner's life (``async with RolloutRunner(...) as runner:``).

    Args:
        concurrency: Most episodes in flight at once.
        pool: A :class:`~cowork.sandbox.pool.SandboxPool` to use (and leave open); by default the
            runner makes one of ``pool_size`` sandboxes and closes it in :meth:`close`.
        pool_size: Most sandboxes of the runner's own pool (default: ``concurrency`` plus
            :func:`~cowork.sandbox.pool.spares_for` it); those beyond ``concurrency`` are spares,
            kept warm so that an episode never waits for the reset of the one before it.
        out_dir: Default output folder of :meth:`rollout` (None: keep results in memory only).
        reward: ``"score"``, ``"pass"``, ``"safety_gated"`` or a function of the Grade
            (see :func:`reward_for`).
        infra_retries: Fresh sandboxes tried after an infrastructure failure, per episode.
        progress: Show live progress on stderr (or on this stream).
        judge: An LLM judge for rubric items (``grading.judge.LLMJudge``).
        backend: Where the runner's own pool runs sandboxes (a backend name or instance).
        turn_progress: Measure the checks' progress after every turn of every episode
            (``Trajectory.turn_progress``, for turn-level credit; see cowork.rollouts.rewards).
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
        self.pool_size = pool_size or concurrency + spares_for(concurrency)
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
                      on_episode: OnEpisode | None = None) -> RolloutResult:
        """Run every task ``group_size`` times and grade each episode.

        Args:
            tasks: Loaded specs, task folders, ``task.yaml`` files, folders of tasks, glob
                patterns of those, or spec datasets (``DIR`` or ``DIR:SPLIT``, see
                :func:`cowork.synth.dataset.resolve_tasks`); one, or several in order.
            policy: A stateless Policy shared by every episode, or a factory
                ``spec -> Policy`` called once per episode (scripted policies keep their
                place in the script, so they need a factory). A factory's policy whose
                ``sampling`` carries a seed samples with
                :func:`cowork.agents.tokens.sample_seed` (seed, task, sample).
            group_size: Samples per task (G).
            seed: Base fault seed: sample s gets ``seed + s`` (None: each spec's own).
            out_dir: Output folder (default: the runner's). An interrupted run resumes
                when called again with the same folder: only missing episodes run. Give
                each training step its own folder, or None.
            agent: The agent's name in ``run.json`` (default: the first policy's ``name``); a
                resumed run must give the same. ``run.json``'s ``agents`` counts the episodes
                by the agent each one's policy named (a factory may mix them).
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
        call = self._plan(tasks, policy, group_size, seed, out_dir, agent, on_episode)
        done = await self._open_folder(call)
        try:
            await self._resume(call, done)
            await self._run_episodes(call)
        finally:
            if call.folder is not None:
                try:  # run.json says who played, episode by episode counted, whatever stopped the run
                    call.folder.record_agents(_agents(call))  # one small file: no thread (a cancel may be under way)
                except OSError as exc:
                    log.warning("%s: the agents were not recorded in run.json (%s)", call.out, exc)
                finally:
                    call.folder.close()
        return self._result(call)

    def stream(self, tasks: TaskInput | Iterable[TaskInput], policy: PolicyOrFactory, *, group_size: int,
               max_staleness: int | None = None, version: VersionFn | None = None, seed: int | None = None,
               max_groups_ahead: int | None = None, on_episode: OnEpisode | None = None) -> RolloutStream:
        """Run every task ``group_size`` times, handing each group over as soon as it is graded
        while later groups run (see :mod:`cowork.rollouts.stream`). Results stay in memory.

        ``async with runner.stream(tasks, policy, group_size=G, max_staleness=1,
        version=lambda: engine.version) as groups: async for group in groups: ...``

        Args:
            tasks: As for :meth:`rollout`.
            policy: As for :meth:`rollout`.
            group_size: Samples per task (G).
            max_staleness: Most versions a handed-over sample may lag: one that started at
                version v is run again once ``version()`` is past v + max_staleness (None: no
                bound; 0: on-policy).
            version: The trainer's current policy version (e.g. ``lambda: engine.version``),
                recorded on each sample as it starts (``RolloutSample.policy_version``).
            seed: Base fault seed, as for :meth:`rollout`.
            max_groups_ahead: Most groups started and not yet handed over (default: enough to
                keep every worker busy, plus one).
            on_episode: Called with each sample as it finishes (may be a coroutine function).

        Raises:
            SpecError: a task does not load, or two tasks share an id.
            ValueError: ``group_size`` or ``max_groups_ahead`` below 1, ``max_staleness``
                below 0 or without ``version``; a stateful policy instance instead of a factory.
            TypeError: ``policy`` is neither a Policy nor callable.
        """
        return RolloutStream(self, _load_tasks(tasks), _policy_factory(policy), group_size=group_size, seed=seed,
                             max_staleness=max_staleness, version=version, max_groups_ahead=max_groups_ahead,
                             on_episode=on_episode)

    def _plan(self, tasks: TaskInput | Iterable[TaskInput], policy: PolicyOrFactory, group_size: int,
              seed: int | None, out_dir: str | os.PathLike | None, agent: str | None,
              on_episode: OnEpisode | None) -> _Call:
        """Load the tasks and lay out every episode of the call."""
        specs = _load_tasks(tasks)
        make = _policy_factory(policy)
        first = None
        if agent is None:
            first = make(specs[0].spec)  # built once: scripted policies are single-use
            agent = first.name
        return _Call(specs=specs, make=make, group_size=group_size, seed=seed, agent=agent, first=first,
                     out=Path(out_dir) if out_dir is not None else self.out_dir, on_episode=on_episode,
                     groups=[RolloutGroup(task=ld.spec.id, index=i,
                                          samples=[None] * group_size)  # type: ignore[list-item]
                             for i, ld in enumerate(specs)],
                     todo=[(i, s) for i in range(len(specs)) for s in range(group_size)])

    async def _open_folder(self, call: _Call) -> dict[tuple[str, int], dict[str, Any]]:
        """Lock the output folder and check the run's parameters; the episodes it holds already."""
        if call.out is None:
            return {}
        call.folder = RunFolder(call.out)
        params = {"group_size": call.group_size, "agent": call.agent, "reward": _reward_name(self.reward),
                  "seed": call.seed, "tasks": [ld.spec.id for ld in call.specs]}
        return await asyncio.to_thread(call.folder.open, params)

    async def _resume(self, call: _Call, done: dict[tuple[str, int], dict[str, Any]]) -> None:
        """Read back the episodes an earlier run finished; the rest is left to run."""
        if call.out is None:  # no folder: nothing was done before (``done`` is empty)
            return
        for i, s in [(i, s) for i, s in call.todo if (call.specs[i].spec.id, s) in done]:
            sample = await asyncio.to_thread(resumed_sample, call.out, done[(call.specs[i].spec.id, s)], i)
            call.groups[i].samples[s] = sample
            call.resumed.append(sample)
        call.todo = [(i, s) for i, s in call.todo if call.groups[i].samples[s] is None]

    async def _run_episodes(self, call: _Call) -> None:
        """Run what is left, one episode in flight per worker; the first error stops the rollout
        (what finished is written)."""
        stream = None if not self.progress else (sys.stderr if self.progress is True else self.progress)
        progress = ProgressLine(stream, len(call.specs) * call.group_size, len(call.specs), call.group_size,
                                call.resumed)
        todo = call.todo
        policies = {todo[0]: call.first} if todo and call.first is not None and todo[0][0] == 0 else {}
        pool = self._get_pool()
        schedule = Schedule(todo, self.concurrency)

        async def worker() -> None:
            current = None
            while (job := schedule.next(current)) is not None:
                current, s = job
                policy = policies.pop(job, None) or call.make(call.specs[current].spec)
                # A seeded SamplingSettings: each sample its own seed from (seed, task, sample).
                seed_sample(policy, call.specs[current].spec.id, s)
                progress.add(await self._one(call, current, s, policy, pool))

        t0 = time.monotonic()
        running = [asyncio.ensure_future(worker()) for _ in range(min(self.concurrency, len(todo)))]
        try:
            for fut in asyncio.as_completed(running):
                await fut
        finally:
            for fut in running:
                fut.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            progress.close()
        call.wall_s = time.monotonic() - t0

    async def _one(self, call: _Call, i: int, s: int, policy: Policy, pool: Any) -> RolloutSample:
        """Run one episode, write it, tell ``on_episode``; the sample, in its group."""
        sample = await self._episode(call.specs[i], i, s, call.seed, policy, pool)
        if call.folder is not None:
            await self._write(call.folder, call.write_lock, sample, call.specs[i].spec)
        if call.on_episode is not None:
            result = call.on_episode(sample)
            if inspect.isawaitable(result):
                await result
        if call.folder is not None:
            sample.evidence = None  # on disk now; memory stays flat over long runs
        call.groups[i].samples[s] = sample
        return sample

    @staticmethod
    async def _write(folder: RunFolder, lock: asyncio.Lock, sample: RolloutSample, spec: TaskSpec) -> None:
        """The episode's bundle, then its results line (a line names a complete bundle)."""
        sample.bundle = bundle_path(sample.task, sample.sample)
        await asyncio.to_thread(save_bundle, folder.root / sample.bundle, sample, spec, fresh=True)
        async with lock:
            await asyncio.to_thread(folder.append, sample.row())

    def _result(self, call: _Call) -> RolloutResult:
        """The call's figures (also written as the folder's summary) and its groups."""
        ran = len(call.todo)
        rate = ran / call.wall_s if ran and call.wall_s > 0 else 0.0
        summary = summarize_episodes([s.row() for g in call.groups for s in g.samples], k=call.group_size)
        summary.update(episodes_per_s=round(rate, 3), wall_s=round(call.wall_s, 3), episodes_run=ran,
                       episodes_resumed=len(call.resumed), group_size=call.group_size,
                       reward=_reward_name(self.reward), agent=call.agent)
        if call.out is not None:
            write_summary(call.out, summary)
        return RolloutResult(groups=call.groups, summary=summary, episodes_per_s=rate, out_dir=call.out)

    async def _episode(self, loaded: LoadedSpec, group: int, s: int, base_seed: int | None, policy: Policy,
                       pool: Any) -> RolloutSample:
        seed = None if base_seed is None else base_seed + s
        t0 = time.monotonic()
        # Looked up on the module at call time, so tests can stand in for run_task.
        # Only the options in use are passed: a stand-in may not know the others.
        extra: dict[str, Any] = {}
        if self.turn_progress:
            extra["turn_progress"] = True
        if self.user_model is not None:
            extra["user_model"] = self.user_model
        res = await episode.run_task(loaded, policy, infra_retries=self.infra_retries, judge=self.judge, pool=pool,
                                     seed=seed, **extra)
        return RolloutSample(task=loaded.spec.id, group=group, sample=s, seed=seed, grade=res.grade,
                             trajectory=res.trajectory, reward=reward_for(res.grade, self.reward),
                             infra_failures=list(res.infra_failures), evidence=res.evidence,
                             total_s=time.monotonic() - t0)

    def _get_pool(self) -> Any:
        if self._pool is None:
            from ..sandbox.pool import SandboxPool

            self._pool = SandboxPool(max_per_task=self.pool_size, max_total=self.pool_size, backend=self.backend,
                                     spares=max(0, self.pool_size - self.concurrency))
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
        paths: Sequence[str | os.PathLike] = [t]
        if isinstance(t, str) and glob.has_magic(t):
            paths = sorted(glob.glob(t))
            if not paths:
                raise SpecError(f"no task matches {t!r}")
        loaded += load_specs(resolve_tasks(paths))
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


def _agents(call: _Call) -> dict[str, int]:
    """Episodes per agent (each trajectory's own agent) among those the call holds."""
    counts: dict[str, int] = {}
    for g in call.groups:
        for sample in g.samples:
            if sample is not None:
                counts[sample.trajectory.agent] = counts.get(sample.trajectory.agent, 0) + 1
    return counts


def _reward_name(reward: Reward) -> str:
    return reward if isinstance(reward, str) else getattr(reward, "__qualname__", repr(reward))

# Names kept importable from here (view, the CLI, the Ray runner and tests import them).
__all__ = ["REWARDS", "RESULTS_FILE", "RUN_FILE", "SUMMARY_FILE", "RolloutGroup", "RolloutResult", "RolloutRunner",
           "RolloutSample", "RolloutStream", "RunFolder", "append_jsonl", "read_results", "reward_for", "rollout", "save_bundle"]
