"""The pool's figures: warm acquire, verified reset, episodes/s pooled vs fresh, environment overhead.

Everything runs on real containers in the same run as the other figures. The sandboxes of a
pool are the pool's (closed on the way out); the ones started directly are tracked by
:class:`~cowork.bench.phases.Bench` like every other phase's.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from pathlib import Path
from typing import Any

from ..agents.base import AssistantTurn
from ..agents.scripted import ScriptedPolicy
from ..engine.client import in_thread
from ..sandbox.pool import SandboxPool
from ..spec.loader import LoadedSpec, load_spec
from . import docker_probes as probes
from .phases import AGENT_STEPS, ms_since
from .report import summary

#: What the overhead figure means; printed in the JSON and the docs.
OVERHEAD_DEFINITION = ("overhead = (wall - ideal) / wall; ideal = waves x turns per episode x think time, "
                       "waves = episodes / episodes in flight: the wall time a zero-cost environment would take")


class ThinkingPolicy(ScriptedPolicy):
    """A scripted policy that takes ``think_s`` (``asyncio.sleep``) before every turn, as a
    model behind a network would; ``think_s=0`` is the zero-latency agent.

    One instance per episode: it remembers where in its script it is.
    """

    def __init__(self, steps: list[tuple[str, dict[str, Any]] | str], think_s: float = 0.0, name: str = "bench"):
        super().__init__(steps, name=name)
        self.think_s = think_s
        self.turns = 0

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        """The script's next turn, after ``think_s`` of simulated model time (counted in :attr:`turns`)."""
        self.turns += 1
        if self.think_s:
            await asyncio.sleep(self.think_s)
        return await super().act(messages, tools)


def services_spec_path() -> Path:
    """The three-service spec of the reset figure: schedule-around-conflicts (contacts,
    calendar, mail)."""
    from .. import settings

    return settings.get().home / "specs" / "schedule-around-conflicts"


async def verified_reset(bench: Any, loaded: LoadedSpec, n: int) -> dict[str, Any]:
    """``n`` verified resets of one sandbox, each after the spec's oracle episode changed it.

    Timed: the host round trip of ``Sandbox.reset`` (the server kills agent processes,
    empties and reseeds the workspace and /tmp, restores the services, hashes the state; the
    host compares the hash with the pristine one). Also kept: the server's own ``reset_ms``.
    """
    from ..agents import make_policy
    from ..episode.run import run_episode

    sb = await bench.start(loaded=loaded)
    try:
        await sb.record_pristine()
        host, server, calls = [], [], 0
        for _ in range(n):
            traj = await run_episode(sb, make_policy("oracle", loaded.spec))
            if traj.status != "completed":
                raise RuntimeError(f"oracle episode of {loaded.spec.id} ended {traj.status}: {traj.error}")
            calls += len(traj.steps)
            await sb.export_evidence(trace=traj.model_dump())
            t0 = time.perf_counter()
            state = await sb.reset()  # raises ResetMismatch when it does not verify
            host.append(ms_since(t0))
            server.append(float(state.get("reset_ms", 0.0)))
        return {"spec": loaded.spec.id, "services": sorted(loaded.spec.services.model_dump(exclude_none=True)),
                "ms": summary(host), "server_ms": summary(server), "oracle_calls_per_episode": calls // max(n, 1),
                "what": "host round trip of Sandbox.reset() incl. hash verification, after an oracle episode "
                        "and its evidence export"}
    finally:
        await bench.stop(sb)


async def warm_acquire(pool: SandboxPool, loaded: LoadedSpec, n: int) -> dict[str, Any]:
    """``n`` acquires from a pool with a warm sandbox; after each, release and wait until the
    reset is done, so the next acquire finds it warm again."""
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        sb = await pool.acquire(loaded)
        samples.append(ms_since(t0))
        await pool.release(sb)
        await pool.wait_idle()
    return {"ms": summary(samples, 3),
            "what": "SandboxPool.acquire() of a warm sandbox: hand-out and the begin_episode health check"}


async def _episodes(loaded: LoadedSpec, steps: list, n: int, concurrency: int, *, pool: SandboxPool | None,
                    image: str, think_s: float = 0.0) -> dict[str, Any]:
    """Run ``n`` episodes with ``run_task``, at most ``concurrency`` at once; wall and errors."""
    from ..episode.run import run_task

    sem = asyncio.Semaphore(concurrency)
    counts = {"calls": 0, "tool_errors": 0, "turns": 0}
    call_ms: list[float] = []

    async def one() -> None:
        async with sem:
            policy = ThinkingPolicy(steps, think_s)
            res = await run_task(loaded, policy, pool=pool, image=image, infra_retries=0)
            if res.trajectory.status != "completed" or res.grade.status != "graded":
                raise RuntimeError(f"bench episode ended {res.trajectory.status} / {res.grade.status}: "
                                   f"{res.trajectory.error or res.grade.error}")
            counts["calls"] += len(res.trajectory.steps)
            counts["tool_errors"] += sum(s.is_error for s in res.trajectory.steps)
            counts["turns"] += policy.turns
            call_ms.extend(s.duration_ms for s in res.trajectory.steps)

    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    wall = time.perf_counter() - t0
    return {"episodes": n, "concurrency": concurrency, "wall_s": round(wall, 3),
            "episodes_per_s": round(n / wall, 2), **counts, "call_ms": summary(call_ms)}


async def episode_rate(pool: SandboxPool, loaded: LoadedSpec, steps: list, image: str, plan: Any) -> dict[str, Any]:
    """Episodes/s of a zero-latency agent through ``run_task`` (start or acquire, episode,
    evidence export, stop or release, grade), pooled vs a fresh sandbox per episode.

    Rounds alternate pooled and fresh so both see the same machine; the ratio is of the
    medians over rounds.
    """
    c = plan.pool_concurrency
    pooled, fresh = [], []
    for _ in range(plan.rate_rounds):
        pooled.append(await _episodes(loaded, steps, plan.pooled_episodes, c, pool=pool, image=image))
        fresh.append(await _episodes(loaded, steps, plan.fresh_episodes, c, pool=None, image=image))
    p = statistics.median(r["episodes_per_s"] for r in pooled)
    f = statistics.median(r["episodes_per_s"] for r in fresh)
    return {"concurrency": c, "steps_per_episode": len(steps), "pooled_eps": round(p, 2), "fresh_eps": round(f, 2),
            "ratio": round(p / f, 1), "pooled_rounds": pooled, "fresh_rounds": fresh,
            "what": "run_task with a zero-latency 8-call scripted agent; pooled: from a pre-warmed pool of "
                    f"{c} (reset on release); fresh: Sandbox.start and stop per episode; median over rounds"}


async def overhead(loaded: LoadedSpec, steps: list, image: str, plan: Any) -> dict[str, Any]:
    """Share of wall time the environment adds to a policy that thinks ``think_s`` per turn,
    with ``overhead_inflight`` episodes at once through a pool pre-warmed with as many.

    With ``overhead_compare`` set (and smaller), the same is measured with that many in flight
    through the same pool, to show how the overhead grows with the load.
    """
    k = plan.overhead_inflight
    pool = SandboxPool(max_per_task=k, max_total=max(k, 32))
    try:
        t0 = time.perf_counter()
        warm = await pool.prewarm(loaded, k)
        prewarm_s = time.perf_counter() - t0
        if warm < k:
            raise RuntimeError(f"prewarm gave {warm} warm sandboxes of {k}")
        out = await _overhead_run(pool, loaded, steps, image, plan, k)
        out.update(prewarm_s=round(prewarm_s, 2), definition=OVERHEAD_DEFINITION)
        if 0 < plan.overhead_compare < k:
            out["compare"] = await _overhead_run(pool, loaded, steps, image, plan, plan.overhead_compare)
        out["pool_stats"] = dict(pool.stats)
        out["cold_starts"] = pool.stats["started"] - k
    finally:
        await asyncio.shield(pool.close())
    return out


async def _overhead_run(pool: SandboxPool, loaded: LoadedSpec, steps: list, image: str, plan: Any,
                        k: int) -> dict[str, Any]:
    """``overhead_rounds`` runs of ``k`` x ``overhead_waves`` episodes, ``k`` at once; the median."""
    waves, rounds = plan.overhead_waves, []
    for _ in range(plan.overhead_rounds):
        ids = list(await in_thread(probes.session_containers))
        cpu0 = await _env_cpu(ids)
        run = await _episodes(loaded, steps, k * waves, k, pool=pool, image=image, think_s=plan.think_s)
        cpu = await _env_cpu(ids)
        await pool.wait_idle()  # every round starts with all k warm
        turns = run["turns"] / run["episodes"]  # the tool-call turns plus the final answer
        ideal = waves * turns * plan.think_s
        rounds.append({"wall_s": run["wall_s"], "ideal_s": round(ideal, 3), "turns_per_episode": turns,
                       "overhead_pct": round(100 * (run["wall_s"] - ideal) / run["wall_s"], 1),
                       "tool_errors": run["tool_errors"], "call_ms_p50": run["call_ms"]["p50"],
                       "call_ms_p90": run["call_ms"]["p90"]})
        if cpu is not None and cpu0 is not None:
            used = cpu - cpu0
            rounds[-1].update(env_cpu_ms_per_episode=round(1000 * used / run["episodes"], 1),
                              env_cpu_share_pct=round(100 * used / run["wall_s"] / (os.cpu_count() or 1), 1))
    mid = lambda key: (round(statistics.median(r[key] for r in rounds), 3)  # noqa: E731
                       if all(key in r for r in rounds) else None)
    return {"in_flight": k, "waves": waves, "episodes_per_round": k * waves, "think_s": plan.think_s,
            "ideal_s": rounds[0]["ideal_s"], "wall_s": mid("wall_s"), "overhead_pct": mid("overhead_pct"),
            "call_ms_p50": mid("call_ms_p50"), "env_cpu_ms_per_episode": mid("env_cpu_ms_per_episode"),
            "env_cpu_share_pct": mid("env_cpu_share_pct"), "rounds": rounds}


async def _env_cpu(container_ids: list[str]) -> float | None:
    """CPU seconds used so far by the environment: this process (host side: client, pool,
    export, grading; the simulated policy costs nothing) plus the given containers."""
    containers = await in_thread(probes.cpu_seconds, container_ids)
    return None if containers is None else time.process_time() + containers


async def pool_figures(bench: Any, say: Any) -> dict[str, Any]:
    """Every figure of this module; the pools are closed before it returns or raises."""
    plan, loaded = bench.plan, bench.loaded
    services = load_spec(services_spec_path())
    out: dict[str, Any] = {}
    say("verified reset")
    out["reset"] = {"workspace": await verified_reset(bench, loaded, plan.resets),
                    "services": await verified_reset(bench, services, plan.resets)}
    say("pool acquire and episodes/s, pooled vs fresh")
    c = plan.pool_concurrency
    pool = SandboxPool(max_per_task=c, max_total=c)
    try:
        await pool.prewarm(loaded, c)
        out["acquire"] = await warm_acquire(pool, loaded, plan.acquires)
        out["episode_rate"] = await episode_rate(pool, loaded, AGENT_STEPS, bench.image, plan)
        await pool.wait_idle()
        out["episode_rate"]["pool_stats"] = dict(pool.stats)
        # Starts beyond the pre-warmed ones would mean a measured episode waited for a start.
        out["episode_rate"]["cold_starts"] = pool.stats["started"] - c
    finally:
        await asyncio.shield(pool.close())
    say(f"environment overhead ({plan.overhead_inflight} episodes in flight, {plan.think_s * 1000:.0f} ms per turn)")
    out["overhead"] = await overhead(loaded, AGENT_STEPS, bench.image, plan)
    return out
