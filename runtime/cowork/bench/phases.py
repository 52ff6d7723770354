"""The benchmark's measurements, one method per figure of issue 5, sharing one sandbox tracker."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.client import get_client, in_thread
from ..engine.images import ensure_task_image
from ..sandbox.sandbox import Sandbox
from ..spec.loader import LoadedSpec, load_spec
from . import docker_probes as probes
from .report import summary

log = logging.getLogger(__name__)

#: Read-only steps of the zero-latency scripted agent used for throughput and the pool figures.
AGENT_STEPS: list[tuple[str, dict[str, Any]] | str] = [
    ("read_file", {"path": "reports/q3_sales.csv"}),
    ("list_files", {"pattern": "**/*"}),
    ("grep", {"pattern": "north", "path": "reports"}),
    ("read_file", {"path": "README.md"}),
] * 2


@dataclass(frozen=True)
class Plan:
    """How many samples each figure takes."""

    quick: bool
    scale: int
    calls: int = 200
    """Tool calls per tool for latency (the issue asks for at least 200)."""
    warmup: int = 20
    execs: int = 200
    starts: int = 10
    """Sequential sandbox starts; they stay up and give the idle memory figure (>= 10)."""
    runs: int = 10
    """``docker run --rm IMAGE true`` baselines."""
    fleet: int = 16
    throughput_calls: int = 640
    """Tool calls per concurrency level (rounded to whole episodes)."""
    grades: int = 20
    rebuilds: int = 5
    idle_s: float = 3.0
    resets: int = 50
    """Verified resets per spec (workspace-only and three services)."""
    acquires: int = 50
    """Acquires of a warm sandbox."""
    pool_concurrency: int = 4
    """Episodes in flight for episodes/s, pooled and fresh; the pool holds as many."""
    pooled_episodes: int = 32
    fresh_episodes: int = 8
    """Episodes per round; fresh ones cost a start each, so there are fewer of them."""
    rate_rounds: int = 3
    """Rounds of (pooled, fresh) for episodes/s; the medians are compared."""
    overhead_inflight: int = 32
    overhead_waves: int = 2
    think_s: float = 0.2
    """Simulated policy time per turn for the overhead figure."""
    overhead_rounds: int = 3
    """Runs of the overhead figure; the median is reported."""
    overhead_compare: int = 8
    """Also measure the overhead with this many in flight (0: not)."""
    bridge_calls: int = 200
    """Tool calls through ``cowork connect`` (and as many through ``Sandbox.call_tool``)."""
    bridge_spawns: int = 5
    """``cowork connect`` processes timed from spawn to their first answer (and as many handshakes)."""
    gateway_calls: int = 200
    """Tool calls through ``cowork serve`` on one kept-alive connection (and as many on the unix socket)."""
    env_share_concurrency: tuple[int, ...] = (4, 16)
    """Episodes in flight for the environment's share of a rollout (``think_s`` per turn)."""
    env_share_episodes: int = 3
    """Episodes each of those workers runs back to back per round."""
    env_share_rounds: int = 3
    """Rounds of (before, after, floor); the median is reported."""
    env_share_spares: int | None = None
    """Spares of the 'after' pool (None: ``spares_for(concurrency)``, the rollout runner's)."""

    @classmethod
    def make(cls, quick: bool, scale: int | None) -> "Plan":
        """The plan for a run: ``quick`` takes few samples of each figure (a smoke run);
        ``scale`` is how many sandboxes the scale figure starts at once (default 8 quick, 100 full)."""
        if quick:
            return cls(quick=True, scale=scale or 8, execs=50, runs=5, throughput_calls=320, grades=10,
                       rebuilds=3, idle_s=1.5, resets=15, acquires=20, pooled_episodes=16, fresh_episodes=4,
                       rate_rounds=1, overhead_inflight=8, overhead_rounds=1, bridge_calls=100, bridge_spawns=3,
                       gateway_calls=100, env_share_episodes=2, env_share_rounds=1)
        return cls(quick=False, scale=scale or 100)


def ms_since(t0: float) -> float:
    """Milliseconds elapsed since ``t0``, a ``time.perf_counter()`` reading."""
    return (time.perf_counter() - t0) * 1000


class Bench:
    """Runs the figures against one spec; every sandbox it starts is tracked until stopped."""

    def __init__(self, plan: Plan, spec_path: str | Path):
        self.plan = plan
        self.spec_path = Path(spec_path)
        self.loaded: LoadedSpec = load_spec(spec_path)
        self.image = ""
        self.live: set[Sandbox] = set()
        self.temp_images: list[str] = []

    # ------------------------------------------------------------------ tracking
    async def start(self, ready_timeout: float = 60.0, loaded: LoadedSpec | None = None) -> Sandbox:
        """A tracked sandbox of the bench's spec (or of ``loaded``, its image built if needed)."""
        if loaded is None:
            sb = await Sandbox.start(self.loaded, image=self.image, ready_timeout=ready_timeout)
        else:
            sb = await Sandbox.start(loaded, ready_timeout=ready_timeout)
        self.live.add(sb)
        return sb

    async def stop(self, *boxes: Sandbox) -> list[BaseException | None]:
        """Stop ``boxes`` concurrently, shielded from cancellation; one exception (or None) per box."""
        for sb in boxes:
            self.live.discard(sb)
        # Shielded: a Ctrl-C while stopping must not leave half of them running.
        return await asyncio.shield(asyncio.gather(*(sb.stop() for sb in boxes), return_exceptions=True))

    async def close(self) -> None:
        """Stop every sandbox still up and remove temporary images."""
        with contextlib.suppress(BaseException):
            await self.stop(*list(self.live))
        for tag in self.temp_images:
            with contextlib.suppress(Exception):
                await in_thread(get_client().images.remove, tag, force=True)

    # ------------------------------------------------------------------ 7. build cache
    async def build(self) -> dict[str, Any]:
        """Image build cache: the first ``ensure_task_image`` (sets :attr:`image`), rebuilds of
        the unchanged spec (must give the same tag), and a copy under a new id (one new layer).

        Raises:
            AssertionError: a rebuild of the unchanged spec gave another tag.
        """
        t0 = time.perf_counter()
        self.image = await in_thread(ensure_task_image, self.loaded)
        prepare = time.perf_counter() - t0
        unchanged = []
        for _ in range(self.plan.rebuilds):
            t0 = time.perf_counter()
            tag = await in_thread(ensure_task_image, self.loaded)
            unchanged.append(time.perf_counter() - t0)
            assert tag == self.image, f"unchanged spec got a new tag {tag} (was {self.image})"
        with tempfile.TemporaryDirectory(prefix="cowork-bench-spec-") as tmp:
            folder = Path(tmp) / "spec"
            shutil.copytree(self.loaded.root, folder)
            new_id = f"bench-{uuid.uuid4().hex[:8]}"
            text = (folder / "task.yaml").read_text()
            (folder / "task.yaml").write_text(re.sub(r"(?m)^id:.*$", f"id: {new_id}", text, count=1))
            fresh = load_spec(folder)
            t0 = time.perf_counter()
            tag = await in_thread(ensure_task_image, fresh)
            new_layer = time.perf_counter() - t0
            self.temp_images.append(tag)
        return {"image": self.image, "prepare_s": round(prepare, 3), "unchanged_s": summary(unchanged, 4),
                "new_layer_s": round(new_layer, 3), "new_layer_tag": tag}

    # ------------------------------------------------------------------ 1. latency
    async def latency(self) -> dict[str, Any]:
        """Per-call latency in one fresh sandbox (``read_file`` and ``shell true``), and the
        same against ``docker exec true`` as ratios; also the time to the first answer.

        Raises:
            RuntimeError: the first ``read_file`` failed.
        """
        t0 = time.perf_counter()
        sb = await self.start()
        first = await sb.call_tool("read_file", {"path": "README.md"})
        first_start = time.perf_counter() - t0
        if first.is_error:
            raise RuntimeError(f"read_file failed in a fresh sandbox: {first.text}")
        try:
            out: dict[str, Any] = {"first_start_s": round(first_start, 3)}
            for key, tool, args in (("read_file", "read_file", {"path": "reports/q3_sales.csv"}),
                                    ("shell_true", "shell", {"command": "true"})):
                for _ in range(self.plan.warmup):
                    await sb.call_tool(tool, args)
                samples, errors = [], 0
                for _ in range(self.plan.calls):
                    t0 = time.perf_counter()
                    r = await sb.call_tool(tool, args)
                    samples.append(ms_since(t0))
                    errors += r.is_error
                out[key] = {**summary(samples), "errors": errors}
            out["docker_exec"] = summary(await in_thread(probes.exec_true, sb.id, self.plan.execs))
            ex = out["docker_exec"]["p50"]
            out["ratio_read_file"] = round(ex / out["read_file"]["p50"], 2)
            out["ratio_shell"] = round(ex / out["shell_true"]["p50"], 2)
            return out
        finally:
            await self.stop(sb)

    # ------------------------------------------------------------------ 2. start, 3. memory
    async def start_and_memory(self) -> tuple[dict[str, Any], dict[str, Any], list[Sandbox]]:
        """Sequential starts (kept running), interleaved with ``docker run --rm`` baselines."""
        boxes, starts, runs, via = [], [], [], ""
        for i in range(self.plan.starts):
            t0 = time.perf_counter()
            sb = await self.start()
            r = await sb.call_tool("read_file", {"path": "README.md"})
            starts.append(time.perf_counter() - t0)
            boxes.append(sb)
            if r.is_error:
                raise RuntimeError(f"first tool call failed: {r.text}")
            if i < self.plan.runs:
                samples, via = await in_thread(probes.run_true, self.image, 1)
                runs += samples
        start = {"sandbox_s": summary(starts), "docker_run_s": summary(runs), "docker_run_via": via}
        await asyncio.sleep(self.plan.idle_s)
        mems = [await in_thread(probes.memory, sb.id) for sb in boxes]
        mib = lambda key: summary([m[key] / probes.MIB for m in mems], 2)  # noqa: E731
        memory = {"source": mems[0]["source"],
                  "headline": "working set = usage_in_bytes - total_inactive_file (what docker stats shows)",
                  "working_set_mib": mib("working_set"), "usage_mib": mib("usage"), "rss_mib": mib("rss"),
                  "cache_mib": mib("cache"), "idle_s": self.plan.idle_s}
        return start, memory, boxes

    # ------------------------------------------------------------------ 5. throughput
    async def throughput(self, fleet: list[Sandbox]) -> dict[str, Any]:
        """Tool calls per second of scripted zero-latency episodes over ``fleet``, at
        concurrency 1, 8 and 32.

        Raises:
            RuntimeError: an episode did not complete.
        """
        from ..agents.scripted import ScriptedPolicy
        from ..episode.run import run_episode

        per_episode = len(AGENT_STEPS)
        episodes = max(1, self.plan.throughput_calls // per_episode)
        out: dict[str, Any] = {"sandboxes": len(fleet), "steps_per_episode": per_episode}
        for c in (1, 8, 32):
            sem = asyncio.Semaphore(c)
            calls = errors = 0

            async def one(i: int) -> None:
                nonlocal calls, errors
                async with sem:
                    traj = await run_episode(fleet[i % len(fleet)], ScriptedPolicy(AGENT_STEPS, name="bench"))
                    if traj.status != "completed":
                        raise RuntimeError(f"bench episode ended {traj.status}: {traj.error}")
                    calls += len(traj.steps)
                    errors += sum(s.is_error for s in traj.steps)

            t0 = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(episodes)))
            wall = time.perf_counter() - t0
            out[f"c{c}"] = {"concurrency": c, "tool_calls": calls, "errors": errors, "episodes": episodes,
                            "wall_s": round(wall, 3), "calls_per_s": round(calls / wall, 1)}
        return out

    # ------------------------------------------------------------------ 6. grading
    async def grading(self) -> dict[str, Any]:
        """Time to grade the oracle's episode: loading the saved evidence and grading it, and
        grading alone; says whether the grade passed."""
        from ..agents import make_policy
        from ..episode.run import run_episode
        from ..evidence import Evidence
        from ..grading import grade

        sb = await self.start()
        try:
            traj = await run_episode(sb, make_policy("oracle", self.loaded.spec))
            ev = await sb.export_evidence(trace=traj.model_dump())
        finally:
            await self.stop(sb)
        with tempfile.TemporaryDirectory(prefix="cowork-bench-ev-") as tmp:
            ev.save(tmp)
            samples, only, passed = [], [], True
            for _ in range(self.plan.grades):
                t0 = time.perf_counter()
                g = grade(self.loaded.spec, Evidence.load(tmp))
                samples.append(ms_since(t0))
                passed = passed and g.passed
                fresh = Evidence(ev.audit_text, ev.audit_count, ev.workspace_tar, ev.initial, ev.trace, ev.meta)
                t0 = time.perf_counter()
                grade(self.loaded.spec, fresh)
                only.append(ms_since(t0))
        return {"ms": summary(samples), "grade_only_ms": summary(only), "passed": passed,
                "audit_records": ev.audit_count, "tool_calls": len(traj.steps),
                "what": "Evidence.load(folder) + grade(spec, evidence); no judge, no hidden verifier"}

    # ------------------------------------------------------------------ 4. scale
    async def scale(self, before: set[str]) -> dict[str, Any]:
        """Start ``plan.scale`` sandboxes at once, call each, stop them: the times, the failures,
        the peak memory sampled meanwhile, and the containers left behind (``before``: the ids
        that were there already)."""
        n = self.plan.scale
        peak = {"containers": 0, "host": 0}
        host0 = _host_used()
        done = asyncio.Event()

        async def take() -> None:
            with contextlib.suppress(Exception):
                ids = [cid for cid in await in_thread(probes.session_containers) if cid not in before]
                total = 0
                for cid in ids:
                    with contextlib.suppress(Exception):
                        total += (await in_thread(probes.memory, cid))["working_set"]
                peak["containers"] = max(peak["containers"], total)
                peak["host"] = max(peak["host"], _host_used() - host0)

        async def sample() -> None:
            while not done.is_set():
                await take()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(done.wait(), 0.5)

        sampler = asyncio.create_task(sample())
        t0 = time.perf_counter()
        try:
            started = await asyncio.gather(*(self.start(ready_timeout=600) for _ in range(n)), return_exceptions=True)
            t_start = time.perf_counter()
            boxes = [b for b in started if isinstance(b, Sandbox)]
            start_errors = [repr(b)[:300] for b in started if not isinstance(b, Sandbox)]
            results = await asyncio.gather(*(b.call_tool("read_file", {"path": "README.md"}) for b in boxes),
                                           return_exceptions=True)
            t_call = time.perf_counter()
            call_errors = [repr(r)[:300] if isinstance(r, BaseException) else r.text[:300]
                           for r in results if isinstance(r, BaseException) or r.is_error]
            done.set()
            await sampler
            await take()  # one sample with every sandbox up, before they go
            stop_errors = [repr(e)[:300] for e in await self.stop(*boxes) if e is not None]
            t_stop = time.perf_counter()
        finally:
            done.set()
            await asyncio.gather(sampler, return_exceptions=True)
        left = [c for c in await in_thread(probes.session_containers) if c not in before]
        return {"n": n, "started": len(boxes), "failures": len(start_errors) + len(call_errors) + len(stop_errors),
                "start_errors": start_errors, "call_errors": call_errors, "stop_errors": stop_errors,
                "left_behind": len(left), "wall_s": round(t_stop - t0, 3), "start_s": round(t_start - t0, 3),
                "call_s": round(t_call - t_start, 3), "stop_s": round(t_stop - t_call, 3),
                "peak_memory_mib": round(peak["containers"] / probes.MIB, 1),
                "peak_host_memory_delta_mib": round(peak["host"] / probes.MIB, 1),
                "peak_memory_what": "sum of container working sets (cgroup), sampled every 0.5 s"}


def _host_used() -> int:
    info = {}
    with open("/proc/meminfo") as fh:
        for line in fh:
            key, value = line.split(":", 1)
            info[key] = int(value.split()[0]) * 1024
    return info["MemTotal"] - info.get("MemAvailable", info["MemFree"])
