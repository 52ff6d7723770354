"""Benchmark report: sample statistics, the targets (the second performance rung's where it set one), the table and the JSON form."""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable


def pct(samples: list[float], p: float) -> float | None:
    """Nearest-rank percentile (``p`` in 0..100) of ``samples``; None when there are none."""
    if not samples:
        return None
    s = sorted(samples)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def summary(samples: list[float], digits: int = 3) -> dict[str, Any]:
    """n, p50, p90, mean, min, max and the raw samples, rounded."""
    r = lambda v: None if v is None else round(v, digits)  # noqa: E731
    return {"n": len(samples), "p50": r(pct(samples, 50)), "p90": r(pct(samples, 90)),
            "mean": r(statistics.fmean(samples)) if samples else None,
            "min": r(min(samples, default=None)), "max": r(max(samples, default=None)),
            "samples": [r(v) for v in samples]}


@dataclass(frozen=True)
class Target:
    """One row of the targets table: how to read the figure, how to show it, when it passes."""

    figure: str
    target: str
    value: Callable[[dict], Any]
    show: Callable[[dict], str]
    ok: Callable[[dict], bool]


def _g(d: dict, *path: str) -> Any:
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def _safe(fn: Callable[[dict], Any], default: Any) -> Callable[[dict], Any]:
    def wrapped(r: dict) -> Any:
        try:
            return fn(r)
        except (TypeError, KeyError, ZeroDivisionError):
            return default
    return wrapped


TARGETS = [
    Target("read_file call p50 (x faster than docker exec)", "<= 1 ms, >= 50x",
           lambda r: _g(r, "latency", "read_file", "p50"),
           _safe(lambda r: f"{r['latency']['read_file']['p50']:.2f} ms ({r['latency']['ratio_read_file']:.0f}x)", "-"),
           _safe(lambda r: r["latency"]["read_file"]["p50"] <= 1 and r["latency"]["ratio_read_file"] >= 50, False)),
    Target("shell `true` p50 (x faster than docker exec)", "<= 4 ms",
           lambda r: _g(r, "latency", "shell_true", "p50"),
           _safe(lambda r: f"{r['latency']['shell_true']['p50']:.2f} ms ({r['latency']['ratio_shell']:.1f}x)", "-"),
           _safe(lambda r: r["latency"]["shell_true"]["p50"] <= 4, False)),
    Target("stdio bridge (cowork connect) call p50 vs Sandbox.call_tool", "<= +2 ms",
           lambda r: _g(r, "bridge", "overhead_ms"),
           _safe(lambda r: (f"{r['bridge']['bridge_ms']['p50']:.2f} vs {r['bridge']['direct_ms']['p50']:.2f} ms "
                            f"({r['bridge']['overhead_ms']:+.2f} ms)"), "-"),
           _safe(lambda r: r["bridge"]["overhead_ms"] <= 2 and r["bridge"]["errors"] == 0, False)),
    Target("cowork connect spawn to initialize answered p50", "<= 0.5 s",
           lambda r: _g(r, "bridge", "spawn_to_ready_s", "p50"),
           _safe(lambda r: (f"{r['bridge']['spawn_to_ready_s']['p50']:.2f} s (handshake alone "
                            f"{r['bridge']['initialize_ms']['p50']:.1f} ms)"), "-"),
           _safe(lambda r: r["bridge"]["spawn_to_ready_s"]["p50"] <= 0.5
                 and r["bridge"]["initialize_ms"]["p50"] <= 500, False)),
    Target("HTTP gateway (cowork serve) kept-alive call p50 vs the unix socket", "<= +2 ms",
           lambda r: _g(r, "gateway", "overhead_ms"),
           _safe(lambda r: (f"{r['gateway']['keepalive_ms']['p50']:.2f} vs {r['gateway']['unix_ms']['p50']:.2f} ms "
                            f"({r['gateway']['overhead_ms']:+.2f} ms, {r['gateway']['ratio']:.2f}x)"), "-"),
           _safe(lambda r: r["gateway"]["overhead_ms"] <= 2 and r["gateway"]["errors"] == 0, False)),
    Target("start to first tool call p50 (x `docker run --rm true`)", "<= 0.5 s, <= 2x",
           lambda r: _g(r, "start", "sandbox_s", "p50"),
           _safe(lambda r: (f"{r['start']['sandbox_s']['p50']:.2f} s "
                            f"({r['start']['sandbox_s']['p50'] / r['start']['docker_run_s']['p50']:.1f}x)"), "-"),
           _safe(lambda r: r["start"]["sandbox_s"]["p50"] <= 0.5
                 and r["start"]["sandbox_s"]["p50"] <= 2 * r["start"]["docker_run_s"]["p50"], False)),
    Target("idle memory per sandbox (mean)", "<= 32 MiB",
           lambda r: _g(r, "memory", "working_set_mib", "mean"),
           _safe(lambda r: f"{r['memory']['working_set_mib']['mean']:.1f} MiB (n={r['memory']['working_set_mib']['n']})", "-"),
           _safe(lambda r: r["memory"]["working_set_mib"]["mean"] <= 32 and r["memory"]["working_set_mib"]["n"] >= 10, False)),
    Target("100 sandboxes at once: all ready", "<= 30 s, 0 failures, 0 left behind",
           lambda r: _g(r, "scale", "start_s"),
           _safe(lambda r: (f"N={r['scale']['n']}: ready in {r['scale']['start_s']:.1f} s, "
                            f"{r['scale']['failures']} failed, {r['scale']['left_behind']} left"), "-"),
           _safe(lambda r: r["scale"]["failures"] == 0 and r["scale"]["left_behind"] == 0
                 and r["scale"]["n"] >= 100 and r["scale"]["start_s"] <= 30, False)),
    Target("throughput at concurrency 32", ">= 1,000 calls/s",
           lambda r: _g(r, "throughput", "c32", "calls_per_s"),
           _safe(lambda r: f"{r['throughput']['c32']['calls_per_s']:.0f} calls/s", "-"),
           _safe(lambda r: r["throughput"]["c32"]["calls_per_s"] >= 1000, False)),
    Target("grading one episode p50", "<= 50 ms",
           lambda r: _g(r, "grading", "ms", "p50"),
           _safe(lambda r: f"{r['grading']['ms']['p50']:.1f} ms", "-"),
           _safe(lambda r: r["grading"]["ms"]["p50"] <= 50 and r["grading"]["passed"], False)),
    Target("unchanged spec rebuild p50", "<= 0.1 s",
           lambda r: _g(r, "build", "unchanged_s", "p50"),
           _safe(lambda r: f"{r['build']['unchanged_s']['p50']:.3f} s", "-"),
           _safe(lambda r: r["build"]["unchanged_s"]["p50"] <= 0.1, False)),
    Target("pool acquire of a warm sandbox p50", "<= 5 ms",
           lambda r: _g(r, "pool", "acquire", "ms", "p50"),
           _safe(lambda r: f"{r['pool']['acquire']['ms']['p50']:.2f} ms", "-"),
           _safe(lambda r: r["pool"]["acquire"]["ms"]["p50"] <= 5, False)),
    Target("verified reset p50, workspace-only spec", "<= 50 ms",
           lambda r: _g(r, "pool", "reset", "workspace", "ms", "p50"),
           _safe(lambda r: f"{r['pool']['reset']['workspace']['ms']['p50']:.1f} ms", "-"),
           _safe(lambda r: r["pool"]["reset"]["workspace"]["ms"]["p50"] <= 50, False)),
    Target("verified reset p50, spec with 3 services", "<= 100 ms",
           lambda r: _g(r, "pool", "reset", "services", "ms", "p50"),
           _safe(lambda r: f"{r['pool']['reset']['services']['ms']['p50']:.1f} ms", "-"),
           _safe(lambda r: r["pool"]["reset"]["services"]["ms"]["p50"] <= 100
                 and len(r["pool"]["reset"]["services"]["services"]) >= 3, False)),
    Target("episodes/s, 8-call agent, pooled vs fresh sandbox", ">= 5x",
           lambda r: _g(r, "pool", "episode_rate", "ratio"),
           _safe(lambda r: (f"{r['pool']['episode_rate']['pooled_eps']:.1f} vs "
                            f"{r['pool']['episode_rate']['fresh_eps']:.2f}/s ({r['pool']['episode_rate']['ratio']:.0f}x)"),
                 "-"),
           _safe(lambda r: r["pool"]["episode_rate"]["ratio"] >= 5, False)),
    Target("environment overhead, 200 ms/turn agent", "<= 5 % of wall, 32 in flight",
           lambda r: _g(r, "pool", "overhead", "overhead_pct"),
           _safe(lambda r: (f"{r['pool']['overhead']['overhead_pct']:.1f} % "
                            f"({r['pool']['overhead']['in_flight']} in flight)"), "-"),
           _safe(lambda r: r["pool"]["overhead"]["overhead_pct"] <= 5 and r["pool"]["overhead"]["in_flight"] >= 32,
                 False)),
]


def _env_share_target(c: int) -> Target:
    """The row of the environment's share at concurrency ``c`` (issue 26: < 2 % at 4 and 16)."""
    key = f"c{c}"
    return Target(f"environment share of a rollout, 200 ms/turn, concurrency {c}", "< 2 % of wall",
                  lambda r: _g(r, "env_share", key, "after_pct"),
                  _safe(lambda r: env_share_shown(r["env_share"][key]), "-"),
                  _safe(lambda r: r["env_share"][key]["after_pct"] < 2 and r["env_share"]["think_s"] == 0.2, False))


TARGETS += [_env_share_target(c) for c in (4, 16)]
TARGETS.append(Target("harness delegation overhead beyond its tool call p50", "< 5 ms",
                      lambda r: _g(r, "delegation", "overhead_ms"),
                      _safe(lambda r: (f"{r['delegation']['overhead_ms']:.2f} ms ({r['delegation']['delegated_ms']:.2f} "
                                       f"delegated vs {r['delegation']['direct_ms']:.2f} direct; coordinator alone "
                                       f"{r['delegation']['bare_ms']:.2f})"), "-"),
                      _safe(lambda r: r["delegation"]["overhead_ms"] < 5, False)))


def env_share_shown(e: dict[str, Any]) -> str:
    """One concurrency's environment share, after and before, in the targets table."""
    return (f"{e['after_pct']:.1f} % ({e['spares']} spare{'' if e['spares'] == 1 else 's'}; "
            f"{e['before_pct']:.1f} % without)")


def _env_share_of(d: dict, key: str) -> str:
    return env_share_detail(d["env_share"][key])


def env_share_detail(e: dict[str, Any]) -> str:
    """Where one concurrency's environment time went (medians per episode, 'after' pool)."""
    rounds = e["after"]
    mid = lambda key: statistics.median(r[key] for r in rounds)  # noqa: E731
    return (f"c={e['concurrency']}: {e['after_pct']:.2f} % vs {e['before_pct']:.2f} % before (against turns x "
            f"200 ms: {e['after_nominal_pct']:.2f} % vs {e['before_nominal_pct']:.2f} %; the floor alone "
            f"{e['floor_nominal_pct']:.2f} %); per episode: acquire {mid('acquire_ms'):.1f} ms "
            f"({e['before_acquire_ms']['p50']:.1f} ms before), first turn after {mid('before_first_turn_ms'):.1f} ms, "
            f"{mid('between_turns_ms'):.1f} ms between turns, {mid('after_last_turn_ms'):.1f} ms after the last"
            + (f", environment CPU {mid('env_cpu_ms_per_episode'):.0f} ms"
               if all(r.get("env_cpu_ms_per_episode") is not None for r in rounds) else "")
            + f"; {e['cold_starts']['after']} cold starts")


def overhead_detail(o: dict[str, Any]) -> str:
    """One overhead run (median of its rounds) in words."""
    return (f"{o['overhead_pct']:.1f} % with {o['in_flight']} in flight: wall {o['wall_s']:.2f} s vs ideal "
            f"{o['ideal_s']:.2f} s ({o['waves']} waves of {o['in_flight']} episodes, "
            f"{o['rounds'][0]['turns_per_episode']:g} turns x {o['think_s'] * 1000:.0f} ms; median of "
            f"{_n(len(o['rounds']), 'round')}), tool call p50 {o['call_ms_p50']:.1f} ms under that load"
            + (f"; environment CPU {o['env_cpu_ms_per_episode']:.0f} ms per episode, "
               f"{o['env_cpu_share_pct']:.0f} % of all cores" if o.get("env_cpu_ms_per_episode") is not None else ""))


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


@dataclass
class Report:
    """Everything one bench run measured; ``data`` is what ``--json`` prints."""

    data: dict[str, Any] = field(default_factory=dict)

    def verdicts(self) -> list[dict[str, Any]]:
        """One entry per target: figure, target, shown value, pass/miss."""
        return [{"figure": t.figure, "target": t.target, "value": t.value(self.data),
                 "shown": t.show(self.data), "pass": bool(t.ok(self.data))} for t in TARGETS]

    def as_json(self) -> dict[str, Any]:
        """Every raw figure plus the verdicts."""
        return {**self.data, "targets": self.verdicts()}

    def table(self) -> str:
        """The targets table and the baselines, for people."""
        rows = [("figure", "measured", "target", "")]
        shown = [v for v in self.verdicts() if not self.data.get("only") or v["value"] is not None]
        rows += [(v["figure"], v["shown"], v["target"], "pass" if v["pass"] else "MISS") for v in shown]
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
        out = [line(rows[0]), line(tuple("-" * w for w in widths))] + [line(r) for r in rows[1:]]
        out += ["", "baselines and other figures (same run):"]
        out += [f"  {k}: {v}" for k, v in self.extras()]
        return "\n".join(out)

    def extras(self) -> list[tuple[str, str]]:
        """Baselines and informational figures."""
        d, out = self.data, []

        def add(label: str, fn: Callable[[dict], str]) -> None:
            out.append((label, _safe(fn, "-")(d)))

        add("docker exec `true` (docker SDK exec_run)", lambda d: (
            f"p50 {d['latency']['docker_exec']['p50']:.1f} ms, p90 {d['latency']['docker_exec']['p90']:.1f} ms "
            f"(n={d['latency']['docker_exec']['n']})"))
        add("read_file / shell `true` p90", lambda d: (
            f"{d['latency']['read_file']['p90']:.2f} ms / {d['latency']['shell_true']['p90']:.2f} ms "
            f"(n={d['latency']['read_file']['n']} each)"))
        add("stdio bridge detail", lambda d: (
            f"p90 {d['bridge']['bridge_ms']['p90']:.2f} vs {d['bridge']['direct_ms']['p90']:.2f} ms direct "
            f"(n={d['bridge']['bridge_ms']['n']} each, {d['bridge']['tool']}); spawn to ready p90 "
            f"{d['bridge']['spawn_to_ready_s']['p90']:.2f} s (n={d['bridge']['spawn_to_ready_s']['n']}); "
            f"exit codes {d['bridge']['exit_codes']}"))
        add("HTTP gateway detail", lambda d: (
            f"kept alive p90 {d['gateway']['keepalive_ms']['p90']:.2f} vs {d['gateway']['unix_ms']['p90']:.2f} ms "
            f"on the unix socket (n={d['gateway']['keepalive_ms']['n']} each, {d['gateway']['tool']}); a new "
            f"connection per call p50 {d['gateway']['fresh_ms']['p50']:.2f} ms (n={d['gateway']['fresh_ms']['n']})"))
        add("`docker run --rm IMAGE true`", lambda d: (
            f"p50 {d['start']['docker_run_s']['p50']:.2f} s via {d['start']['docker_run_via']}; "
            f"sandbox start is {d['start']['sandbox_s']['p50'] / d['start']['docker_run_s']['p50']:.1f}x that"))
        add("sandbox start p90 / first start in process", lambda d: (
            f"{d['start']['sandbox_s']['p90']:.2f} s / {d['start']['first_start_s']:.2f} s"))
        add("idle memory detail (mean)", lambda d: (
            f"usage {d['memory']['usage_mib']['mean']:.1f} MiB, rss {d['memory']['rss_mib']['mean']:.1f} MiB, "
            f"page cache {d['memory']['cache_mib']['mean']:.1f} MiB; source {d['memory']['source']}"))
        add("scale detail", lambda d: (
            f"start {d['scale']['start_s']:.1f} s, calls {d['scale']['call_s']:.2f} s, stop {d['scale']['stop_s']:.1f} s, "
            f"peak {d['scale']['peak_memory_mib']:.0f} MiB in containers "
            f"({d['scale']['peak_memory_mib'] / max(d['scale']['n'], 1):.1f} MiB each)"))
        add("throughput c=1 / c=8 / c=32", lambda d: " / ".join(
            f"{d['throughput'][k]['calls_per_s']:.0f}" for k in ("c1", "c8", "c32")) + " calls/s")
        add("new spec thin layer build", lambda d: f"{d['build']['new_layer_s']:.2f} s")
        add("verified reset p90; server-side p50 (workspace / services)", lambda d: (
            f"{d['pool']['reset']['workspace']['ms']['p90']:.1f} / {d['pool']['reset']['services']['ms']['p90']:.1f} ms; "
            f"{d['pool']['reset']['workspace']['server_ms']['p50']:.1f} / "
            f"{d['pool']['reset']['services']['server_ms']['p50']:.1f} ms (n={d['pool']['reset']['workspace']['ms']['n']} "
            f"each, {d['pool']['reset']['services']['spec']}: {', '.join(d['pool']['reset']['services']['services'])})"))
        add("pool acquire p90", lambda d: f"{d['pool']['acquire']['ms']['p90']:.2f} ms (n={d['pool']['acquire']['ms']['n']})")
        add("episodes/s detail", lambda d: (
            f"{d['pool']['episode_rate']['concurrency']} at once, medians of "
            f"{_n(len(d['pool']['episode_rate']['pooled_rounds']), 'round')} of "
            f"{d['pool']['episode_rate']['pooled_rounds'][0]['episodes']} pooled / "
            f"{d['pool']['episode_rate']['fresh_rounds'][0]['episodes']} fresh episodes; "
            f"{d['pool']['episode_rate']['cold_starts']} cold starts in the pool"))
        add("overhead detail", lambda d: overhead_detail(d["pool"]["overhead"]))
        if _g(d, "pool", "overhead", "compare"):
            add("overhead with fewer in flight", lambda d: overhead_detail(d["pool"]["overhead"]["compare"]))
        for key in sorted((k for k in d.get("env_share") or {} if k.startswith("c") and k[1:].isdigit()),
                          key=lambda k: int(k[1:])):
            add("environment share detail", functools.partial(_env_share_of, key=key))
        add("model request, new HTTP client vs one shared", lambda d: (
            f"p50 {d['env_share']['http_client']['fresh_client_ms']['p50']:.1f} vs "
            f"{d['env_share']['http_client']['shared_client_ms']['p50']:.2f} ms "
            f"({d['env_share']['http_client']['saved_ms_per_turn']:.1f} ms saved per turn)"))
        add("left behind at the end", lambda d: str(d["left_behind"]))
        if d.get("only"):  # one part: its own figures, not a column of dashes for the others'
            out = [(k, v) for k, v in out if v != "-"]
        return out
