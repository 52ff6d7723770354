"""The environment's share of a rollout: how much of an episode's wall time is not the model's.

A simulated model takes exactly ``think_s`` (200 ms, ``asyncio.sleep``) per turn; ``c``
workers (4 and 16) each run episodes back to back through ``run_task`` over one real pool,
as group sampling does. An episode's wall time is ``run_task`` from its call to its return:
the acquire (and any wait for a reset), the model's turns, the tool calls, the evidence
export, the release and the grading. What is not the model's is the environment's.

The model's time is measured against a baseline of the same round: the same workers sleeping
the same turns with no environment at all (the **floor**: the event loop's own lateness in
waking a sleeper, which a real model's answer arriving on a socket would not have). So, per
round and summed over its episodes::

    environment share = (episode walls - floor walls) / episode walls

with the floor's median episode wall for each episode; the reported figure is the median over
rounds. Also kept: the share against the nominal model time (turns x 200 ms, which counts the
floor as environment), and where the extra time went (acquire, before the first turn, between
turns, after the last), medians per episode.

Two pools per concurrency, used in alternation within each round, so both see the same
machine: **before**, the pool as the rollout runner made it until issue 26 (``concurrency``
sandboxes, no spare: an acquire right after a release waits for its reset); **after**, the
runner's pool today (``concurrency`` + :func:`~cowork.sandbox.pool.spares_for` spares).

Also measured: one model request through a new HTTP client per request (as the vllm-server
client did) against one shared client (``VLLMServerClient.http``), on a loopback stand-in.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from ..engine.client import in_thread
from ..sandbox.pool import SandboxPool, spares_for
from ..spec.loader import LoadedSpec
from . import docker_probes as probes
from .phases import AGENT_STEPS
from .pooling import ThinkingPolicy, _env_cpu
from .report import summary

#: What the figure means; printed in the JSON and the docs.
ENV_SHARE_DEFINITION = (
    "environment share = sum over a round's episodes of (episode wall - floor episode wall) / sum of episode walls; "
    "episode wall = run_task from its call to its return (acquire, turns, tool calls, export, release, grading); "
    "floor = the same workers sleeping the same turns with no environment, same round; median over rounds")


class TimedPolicy(ThinkingPolicy):
    """A :class:`ThinkingPolicy` that notes when each of its turns began and ended."""

    def __init__(self, steps: list[tuple[str, dict[str, Any]] | str], think_s: float):
        super().__init__(steps, think_s)
        self.marks: list[tuple[float, float]] = []

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        """The script's next turn after ``think_s``, its start and end noted."""
        t0 = time.perf_counter()
        turn = await super().act(messages, tools)
        self.marks.append((t0, time.perf_counter()))
        return turn


class _TimedPool:
    """A pool as ``run_task`` sees it: each acquire timed, everything else forwarded."""

    def __init__(self, pool: SandboxPool):
        self._pool = pool
        self.acquire_ms: list[float] = []

    async def acquire(self, spec: Any, *, seed: int | None = None, early: bool = False) -> Any:
        t0 = time.perf_counter()
        sb = await self._pool.acquire(spec, seed=seed, early=early)
        self.acquire_ms.append((time.perf_counter() - t0) * 1000)
        return sb

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)


@dataclass
class _Run:
    """One round of one variant: each episode's wall and where its time went."""

    wall_s: float = 0.0
    walls: list[float] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    acquire_ms: list[float] = field(default_factory=list)
    before_first: list[float] = field(default_factory=list)
    between: list[float] = field(default_factory=list)
    after_last: list[float] = field(default_factory=list)
    cpu_s: float | None = None
    """CPU the environment used in the round: this process plus the session's containers."""

    def share(self, model_s: float) -> float:
        """Percent of the episodes' wall time beyond ``model_s`` per episode."""
        total = sum(self.walls)
        return 100 * (total - model_s * len(self.walls)) / total

    def figures(self, floor_s: float, think_s: float) -> dict[str, Any]:
        """The round in numbers (milliseconds per episode; medians unless said)."""
        med = lambda xs: round(statistics.median(xs), 2) if xs else None  # noqa: E731
        nominal = statistics.median(self.turns) * think_s
        return {"share_pct": round(self.share(floor_s), 2), "nominal_share_pct": round(self.share(nominal), 2),
                "episodes": len(self.walls), "wall_s": round(self.wall_s, 3),
                "env_ms_mean": round(1000 * (statistics.fmean(self.walls) - floor_s), 1),
                "acquire_ms": med(self.acquire_ms), "acquire_ms_max": round(max(self.acquire_ms, default=0.0), 1),
                "before_first_turn_ms": med(self.before_first), "between_turns_ms": med(self.between),
                "after_last_turn_ms": med(self.after_last),
                "env_cpu_ms_per_episode": None if self.cpu_s is None else round(1000 * self.cpu_s / len(self.walls), 1)}


async def _rollout(loaded: LoadedSpec, pool: SandboxPool, workers: int, per_worker: int, think_s: float) -> _Run:
    """``workers`` loops of ``per_worker`` episodes each, back to back, through ``pool``.

    Raises:
        RuntimeError: an episode did not complete and grade.
    """
    from ..episode.run import run_task

    timed, run = _TimedPool(pool), _Run()
    ids = list(await in_thread(probes.session_containers))
    cpu0 = await _env_cpu(ids)

    async def worker() -> None:
        for _ in range(per_worker):
            policy = TimedPolicy(AGENT_STEPS, think_s)
            t0 = time.perf_counter()
            res = await run_task(loaded, policy, pool=timed, infra_retries=0)
            t1 = time.perf_counter()
            if res.trajectory.status != "completed" or res.grade.status != "graded":
                raise RuntimeError(f"env-share episode ended {res.trajectory.status} / {res.grade.status}: "
                                   f"{res.trajectory.error or res.grade.error}")
            marks = policy.marks
            run.walls.append(t1 - t0)
            run.turns.append(len(marks))
            run.before_first.append(1000 * (marks[0][0] - t0))
            run.between.extend(1000 * (b[0] - a[1]) for a, b in zip(marks, marks[1:]))
            run.after_last.append(1000 * (t1 - marks[-1][1]))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    run.wall_s = time.perf_counter() - t0
    run.acquire_ms = timed.acquire_ms
    await pool.wait_idle()  # the round's resets are its cost too
    cpu = await _env_cpu(ids)
    if cpu is not None and cpu0 is not None:
        run.cpu_s = cpu - cpu0
    return run


async def _no_environment(workers: int, per_worker: int, turns: int, think_s: float) -> _Run:
    """The same workers and turns with nothing but the model's sleep: the floor."""
    run = _Run()

    async def worker() -> None:
        for _ in range(per_worker):
            t0 = time.perf_counter()
            for _ in range(turns):
                await asyncio.sleep(think_s)
            run.walls.append(time.perf_counter() - t0)
            run.turns.append(turns)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    run.wall_s = time.perf_counter() - t0
    return run


async def _share_at(loaded: LoadedSpec, c: int, spares: int, plan: Any) -> dict[str, Any]:
    """Before, after and floor at concurrency ``c``; both pools closed before it returns."""
    think, per_worker = plan.think_s, plan.env_share_episodes
    before = SandboxPool(max_per_task=c, max_total=c)
    after = SandboxPool(max_per_task=c + spares, max_total=c + spares, spares=spares)
    rounds: dict[str, list[_Run]] = {"before": [], "after": [], "floor": []}
    try:
        await asyncio.gather(before.prewarm(loaded, c), after.prewarm(loaded, c + spares))
        # One unmeasured zero-latency episode per sandbox: each asks its tool list and seed
        # hashes once, which a long rollout pays once per sandbox, not per episode.
        await asyncio.gather(_rollout(loaded, before, c, 1, 0.0), _rollout(loaded, after, c + spares, 1, 0.0))
        await asyncio.gather(before.wait_idle(), after.wait_idle())
        started = {"before": before.stats["started"], "after": after.stats["started"]}
        for _ in range(plan.env_share_rounds):
            for name, pool in (("before", before), ("after", after)):
                rounds[name].append(await _rollout(loaded, pool, c, per_worker, think))
            rounds["floor"].append(await _no_environment(c, per_worker, rounds["after"][-1].turns[0], think))
        cold = {"before": before.stats["started"] - started["before"],
                "after": after.stats["started"] - started["after"]}
    finally:
        await asyncio.shield(asyncio.gather(before.close(), after.close()))
    floors = [statistics.median(f.walls) for f in rounds["floor"]]
    out: dict[str, Any] = {"concurrency": c, "spares": spares, "cold_starts": cold}
    for name in ("before", "after"):
        runs = rounds[name]
        out[f"{name}_pct"] = round(statistics.median(r.share(f) for r, f in zip(runs, floors)), 2)
        out[f"{name}_nominal_pct"] = round(statistics.median(r.share(statistics.median(r.turns) * think)
                                                             for r in runs), 2)
        out[name] = [r.figures(f, think) for r, f in zip(runs, floors)]
        out[f"{name}_acquire_ms"] = summary([ms for r in runs for ms in r.acquire_ms], 2)
    turns = rounds["after"][0].turns[0]
    out["floor_nominal_pct"] = round(statistics.median(r.share(turns * think) for r in rounds["floor"]), 2)
    out["floor_episode_s"] = [round(f, 4) for f in floors]
    out["turns_per_episode"] = turns
    return out


async def http_client_cost(n: int = 30) -> dict[str, Any]:
    """One POST to a loopback stand-in through a new HTTP client each (what the vllm-server
    client did per model turn) against one shared client (``VLLMServerClient.http``)."""
    from ..agents.vllm_server import VLLMServerClient
    from ..llm import post_json

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    client = VLLMServerClient(url, "stand-in", mode="chat", retries=0)
    fresh, shared = [], []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            await post_json(f"{url}/completions", {}, retries=0)
            fresh.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            await client.post("/completions", {})
            shared.append((time.perf_counter() - t0) * 1000)
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
    f, s = summary(fresh, 2), summary(shared, 2)
    return {"fresh_client_ms": f, "shared_client_ms": s, "saved_ms_per_turn": round(f["p50"] - s["p50"], 2),
            "what": "POST of {} to a loopback HTTP/1.1 stand-in; fresh: httpx2.AsyncClient per request "
                    "(post_json without client=); shared: VLLMServerClient.http(), kept alive"}


async def env_share(bench: Any, say: Any) -> dict[str, Any]:
    """The environment's share at each concurrency of the plan, before and after, with the
    floor and the HTTP client figure; every pool is closed before it returns or raises."""
    plan = bench.plan
    out: dict[str, Any] = {"think_s": plan.think_s, "episodes_per_worker": plan.env_share_episodes,
                           "rounds": plan.env_share_rounds, "steps_per_episode": len(AGENT_STEPS),
                           "definition": ENV_SHARE_DEFINITION}
    for c in plan.env_share_concurrency:
        say(f"environment share at concurrency {c} ({plan.think_s * 1000:.0f} ms per turn)")
        spares = plan.env_share_spares if plan.env_share_spares is not None else spares_for(c)
        out[f"c{c}"] = await _share_at(bench.loaded, c, spares, plan)
    out["http_client"] = await http_client_cost()
    return out
