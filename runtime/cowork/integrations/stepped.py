"""Cowork episodes driven one action at a time from outside: what SkyRL-gym and OpenEnv need.

Their trainers own the loop (``env.step(action)`` until ``done``), while cowork's episode
loop (:func:`cowork.episode.run.run_task`) asks a policy for each turn. A
:class:`SteppedEpisode` joins the two without a second implementation of the episode: it runs
``run_task`` on a background event loop with a policy whose ``act`` waits for the next action
from outside. So every stepped episode is a real cowork episode: scripted and simulated users
answer a reply, world events happen, limits hold, the final reply is graded by the ``answer``
checks, an episode cut short is graded as ``truncated``, and the sandbox goes back to the pool
(reset and verified) exactly as in a rollout.

Rewards: with ``reward="turn"`` each step earns the turn-level credit of
:mod:`cowork.rollouts.rewards` (the change in check completion the action made; the last step
also gets the outcome term r - p), so the steps of an episode sum to r - p_0. Completion is
measured before each action, while the episode waits for it. Other modes pay the graded reward
(:func:`cowork.rollouts.rewards.reward_for`) on the last step and 0 before it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..agents.base import AssistantTurn
from ..errors import CoworkError, SandboxError
from ..sandbox.pool import early_acquire
from ..spec.loader import LoadedSpec
from .loop_thread import PoolRuntime, Runtimes

log = logging.getLogger(__name__)

StepReward = Literal["score", "pass", "safety_gated", "turn"]


class PoolOptions(BaseModel):
    """The sandbox pool behind a process's stepped episodes (equal options share one pool)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_sandboxes: int = Field(default=8, ge=1)
    """Most sandboxes at once, all tasks together: an episode holds one from its start to its
    end, so at least the episodes a trainer runs at once in this process."""
    max_per_task: int | None = Field(default=None, ge=1)
    """Most sandboxes of one task at once (None: ``max_sandboxes``)."""
    max_uses: int = Field(default=100, ge=1)
    """Episodes one sandbox serves before it is replaced by a fresh one."""
    backend: str | None = None
    """Sandbox backend name (``docker``, ``gvisor``; None: ``settings.sandbox_backend``)."""


class StepRuntime(PoolRuntime):
    """An event loop on a daemon thread, the sandbox pool on it, and each task's spec and tools.

    Trainers call environments synchronously from their own threads (SkyRL from an executor,
    OpenEnv's server from one thread per session); the pool's sandboxes live on one loop.

    Args:
        options: The pool settings.
        pool: The pool to drive (None: one made from ``options``).
    """

    thread_name = "cowork-step-loop"

    def __init__(self, options: PoolOptions, *, pool: Any = None):
        super().__init__(options, pool=pool)
        self._tools: dict[str, list[Any]] = {}

    async def tools(self, loaded: LoadedSpec, sb: Any = None) -> list[Any]:
        """The MCP tools the task's sandboxes serve, read once per task: from ``sb`` (a
        sandbox of the task the caller holds) or else from a pooled one (which then serves the
        next episode), so a client may list them before any episode starts.

        Raises:
            SandboxError: no sandbox of the task could be started.
        """
        key = str(loaded.root)
        if key not in self._tools:
            if sb is not None:
                self._tools[key] = list(await sb.tools())
            else:
                sb = await self.pool.acquire(loaded)
                try:
                    self._tools[key] = list(await sb.tools())
                finally:
                    await self.pool.release(sb)
        return self._tools[key]


_RUNTIMES_BY_KEY: Runtimes[StepRuntime] = Runtimes(StepRuntime)
_RUNTIMES = _RUNTIMES_BY_KEY.runtimes


def step_runtime(options: PoolOptions | None = None) -> StepRuntime:
    """The process's runtime for these pool options (made on first use, closed at exit)."""
    options = options or PoolOptions()
    return _RUNTIMES_BY_KEY.get(options, options)


def close_runtimes() -> None:
    """Remove every sandbox of this process's stepped episodes and stop their loops (also at exit)."""
    _RUNTIMES_BY_KEY.close_all()


# --------------------------------------------------------------------------- the episode
@dataclass
class Step:
    """What one action led to."""

    messages: list[dict[str, Any]]
    """What the environment said after the action, as chat messages: one ``tool`` message per
    call (its output, ``ERROR: ``-prefixed when it failed), then the user's next message in a
    conversation. Empty when the episode ended."""
    reward: float | None
    """This step's reward (see the module docstring); None when the episode ended unscorable
    (``infra_error``, ``policy_error``)."""
    done: bool
    """The episode is over: graded, its sandbox given back."""
    result: Any = None
    """When done: the :class:`cowork.episode.run.EpisodeResult` (trajectory, grade, evidence)."""


class _Channel:
    """The policy ``run_task`` drives: each turn waits for the action given from outside."""

    name = "stepped"

    def __init__(self) -> None:
        self.asks: asyncio.Queue[list[dict[str, Any]]] = asyncio.Queue()
        self.replies: asyncio.Queue[AssistantTurn] = asyncio.Queue()

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        self.asks.put_nowait(messages)
        return await self.replies.get()


class _Limited:
    """A sandbox seen with a lower turn limit (the trainer's), everything else its own."""

    def __init__(self, sb: Any, max_turns: int):
        self._sb = sb
        self.spec = sb.spec.model_copy(update={"limits": sb.spec.limits.model_copy(update={"max_turns": max_turns})})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sb, name)


class _EpisodePool:
    """The pool as ``run_task`` sees it for one stepped episode: it keeps the sandbox it hands
    out (to measure progress between actions) and gives it the episode's turn limit."""

    def __init__(self, pool: Any, max_turns: int | None):
        self.pool, self.max_turns, self.sandbox = pool, max_turns, None

    async def acquire(self, loaded: LoadedSpec, *, seed: int | None = None, early: bool = False) -> Any:
        sb = await self.pool.acquire(loaded, seed=seed, **(early_acquire(self.pool) if early else {}))
        self.sandbox = sb
        if self.max_turns is not None and self.max_turns < sb.spec.limits.max_turns:
            return _Limited(sb, self.max_turns)
        return sb

    async def release(self, sb: Any, **kw: Any) -> None:
        await self.pool.release(getattr(sb, "_sb", sb), **kw)

    async def discard(self, sb: Any) -> None:
        await self.pool.discard(getattr(sb, "_sb", sb))


@dataclass
class SteppedEpisode:
    """One cowork episode of ``loaded`` on ``runtime``'s pool, one action at a time.

    Use from the runtime's loop (``runtime.run(episode.start())``): :meth:`start`, then
    :meth:`act` until a step is ``done``; :meth:`abandon` ends an episode early (graded as
    ``truncated``, its sandbox given back).

    Args:
        runtime: Where the episode runs.
        loaded: The task.
        reward: ``score``, ``pass``, ``safety_gated`` (paid on the last step) or ``turn``
            (turn-level credit on every step).
        seed: The episode's fault seed (None: the spec's own).
        max_turns: The trainer's turn limit, where lower than the task's own.
        infra_retries: Fresh sandboxes to try when one fails to start (only before the first
            action: after it the episode cannot be replayed).
        judge: The LLM judge of the task's ``judge`` checks (:class:`cowork.grading.judge.LLMJudge`;
            None: they are not graded).
    """

    runtime: StepRuntime
    loaded: LoadedSpec
    reward: StepReward = "score"
    seed: int | None = None
    max_turns: int | None = None
    infra_retries: int = 1
    judge: Any = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    """The tools offered to the model (OpenAI function format), known after :meth:`start`."""
    turns: int = 0
    """Actions taken."""
    result: Any = None
    """The EpisodeResult once done."""
    _channel: _Channel = field(default_factory=_Channel)
    _task: asyncio.Task | None = None
    _pool: _EpisodePool | None = None
    _messages: list[dict[str, Any]] = field(default_factory=list)
    _progress: list[float] = field(default_factory=list)

    @property
    def done(self) -> bool:
        """The episode is over."""
        return self.result is not None

    async def start(self) -> list[dict[str, Any]]:
        """Get a sandbox and run the episode up to its first turn.

        Returns:
            The first messages (the task's system prompt and its prompt).

        Raises:
            SandboxError: no sandbox could be had (after ``infra_retries`` more tries).
        """
        from ..agents.base import mcp_tool_to_openai

        for attempt in range(self.infra_retries + 1):
            self._channel = _Channel()
            self._launch()
            if await self._next():
                break
            error = self.result.grade.error or self.result.trajectory.error
            if attempt == self.infra_retries:
                raise SandboxError(f"task {self.loaded.spec.id}: the episode could not start: {error}")
            log.warning("task %s: the episode could not start, retrying on a fresh sandbox: %s",
                        self.loaded.spec.id, error)
            self.result = None
        assert self._pool is not None
        tools = await self.runtime.tools(self.loaded, self._pool.sandbox)
        self.tools = [mcp_tool_to_openai(t) for t in tools]
        if self.reward == "turn":
            await self._measure()
        return [dict(m) for m in self._messages]

    async def act(self, turn: AssistantTurn) -> Step:
        """Take one action: run its tool calls (or its reply) and wait for the episode's next turn.

        Raises:
            CoworkError: the episode was not started, or is over.
        """
        if self._task is None or self.result is not None:
            raise CoworkError(f"task {self.loaded.spec.id}: act() on an episode that is "
                              + ("over; start a new one" if self.result is not None else "not started; call start()"))
        seen = len(self._messages)
        self.turns += 1
        self._channel.replies.put_nowait(turn)
        if await self._next():
            said = [dict(m) for m in self._messages[seen + 1:]]  # after the action's own assistant message
            reward = 0.0
            if self.reward == "turn":
                before = self._progress[-1]
                reward = await self._measure() - before
            return Step(messages=said, reward=reward, done=False)
        return Step(messages=[], reward=self._final_reward(), done=True, result=self.result)

    async def abandon(self) -> Any:
        """End the episode now, as a trainer that stops early does (SkyRL's length limit, an
        OpenEnv reset mid-episode): graded ``truncated`` on its evidence, its sandbox given
        back. Returns the EpisodeResult (None when the episode never started)."""
        if self._task is None:
            return None
        if self.result is None:
            self._channel.replies.put_nowait(AssistantTurn(content=None, tool_calls=[],
                                                           extra={"finish_reason": "length"}))
            await self._next()
        return self.result

    # ------------------------------------------------------------------ internals
    def _launch(self) -> None:
        from ..episode.run import run_task

        self._pool = _EpisodePool(self.runtime.pool, self.max_turns)
        self._task = asyncio.ensure_future(run_task(self.loaded, self._channel, pool=self._pool, seed=self.seed,
                                                    infra_retries=0, judge=self.judge))

    async def _next(self) -> bool:
        """Wait until the episode asks for its next action (True) or ends (False, ``result`` set)."""
        assert self._task is not None
        ask = asyncio.ensure_future(self._channel.asks.get())
        await asyncio.wait({ask, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if ask.done():
            self._messages = ask.result()
            return True
        ask.cancel()
        self.result = self._task.result()
        return False

    async def _measure(self) -> float:
        """The task's completion on the live state (deterministic checks), as turn credit reads it."""
        from ..grading import grade

        assert self._pool is not None and self._pool.sandbox is not None
        ev = await self._pool.sandbox.export_evidence()
        p = round(grade(self.loaded.spec, ev).completion, 6)
        self._progress.append(p)
        return p

    def _final_reward(self) -> float | None:
        from ..rollouts.rewards import reward_for

        r = reward_for(self.result.grade, "score" if self.reward == "turn" else self.reward)
        if r is None or self.reward != "turn":
            return r
        return r - self._progress[-1]  # the last turn's credit: its progress plus the outcome term


__all__ = ["PoolOptions", "Step", "StepReward", "StepRuntime", "SteppedEpisode", "close_runtimes", "step_runtime"]
