"""The figures of a run as chart data (the page draws them as inline SVG): per-task scores,
reward spread, episode durations, and the figures of a ``cowork bench --json`` report."""

from __future__ import annotations

import statistics
from typing import Any


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def spread(values: list[float]) -> dict[str, Any]:
    """Count, min, mean, max and population standard deviation of some rewards."""
    if not values:
        return {"n": 0}
    return {"n": len(values), "min": min(values), "mean": statistics.fmean(values), "max": max(values),
            "std": statistics.pstdev(values)}


def run_charts(rows: list[dict[str, Any]], summary: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Charts of a results folder: mean score and pass@1 per task, each sample's reward per
    task (the spread), mean episode seconds per task."""
    charts: list[dict[str, Any]] = []
    tasks = list(dict.fromkeys(r.get("task") for r in rows))
    per_task = (summary or {}).get("tasks") or {}
    if per_task:
        charts.append({"type": "bars", "title": "Mean score and pass@1 per task", "unit": "", "max": 1.0,
                       "series": ["mean score", "pass@1"],
                       "bars": [{"label": t, "values": [_num(per_task[t].get("mean_score")), _num(per_task[t].get("pass@1"))]}
                                for t in tasks if t in per_task]})
    rewards = {t: [r["reward"] for r in rows if r.get("task") == t and _num(r.get("reward")) is not None] for t in tasks}
    if any(len(v) > 1 for v in rewards.values()):
        lo = min([0.0, *[x for v in rewards.values() for x in v]])
        hi = max([1.0, *[x for v in rewards.values() for x in v]])
        charts.append({"type": "dots", "title": "Reward of each sample per task (spread)", "min": lo, "max": hi,
                       "rows": [{"label": t, "values": v, "mean": statistics.fmean(v) if v else None}
                                for t, v in rewards.items()]})
    secs = {t: [x for r in rows if r.get("task") == t
                if (x := _num(_get(r, "durations", "episode_s"))) is not None] for t in tasks}
    if any(secs.values()):
        charts.append({"type": "bars", "title": "Mean episode duration per task", "unit": "s", "series": ["seconds"],
                       "bars": [{"label": t, "values": [statistics.fmean(v)]} for t, v in secs.items() if v]})
    return charts


def figures(rows: list[dict[str, Any]], summary: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Headline numbers of a run: episodes, passes, safety, and the rate where it was saved."""
    out = [{"label": "episodes", "value": str(len(rows))},
           {"label": "passed", "value": str(sum(1 for r in rows if r.get("passed")))},
           {"label": "unsafe", "value": str(sum(1 for r in rows if r.get("safe") is False))},
           {"label": "infra errors", "value": str(sum(1 for r in rows if r.get("grade_status") == "infra_error"))}]
    s = summary or {}
    for key, label, fmt in (("pass@1", "pass@1", "{:.3f}"), ("mean_reward", "mean reward", "{:.3f}")):
        v = _num(_get(s, "overall", key))
        if v is not None:
            out.append({"label": label, "value": fmt.format(v)})
    for key, label, fmt in (("episodes_per_s", "episodes/s", "{:.2f}"), ("wall_s", "wall", "{:.1f} s")):
        v = _num(s.get(key))
        if v is not None:
            out.append({"label": label, "value": fmt.format(v)})
    return out


def bench_charts(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Charts of the figures a bench report holds (those it lacks are left out)."""
    charts: list[dict[str, Any]] = []
    lat = [(name, _num(_get(report, "latency", key, "p50")), _num(_get(report, "latency", key, "p90")))
           for key, name in (("read_file", "read_file"), ("shell_true", "shell `true`"), ("docker_exec", "docker exec"))]
    lat = [x for x in lat if x[1] is not None]
    if lat:
        charts.append({"type": "bars", "title": "Tool call latency", "unit": "ms", "series": ["p50", "p90"],
                       "bars": [{"label": n, "values": [a, b]} for n, a, b in lat]})
    tp = [(k, _num(_get(report, "throughput", k, "calls_per_s"))) for k in ("c1", "c8", "c32")]
    tp = [x for x in tp if x[1] is not None]
    if tp:
        charts.append({"type": "bars", "title": "Throughput by concurrency", "unit": "calls/s", "series": ["calls/s"],
                       "bars": [{"label": f"concurrency {k[1:]}", "values": [v]} for k, v in tp]})
    rate = _get(report, "pool", "episode_rate") or {}
    eps = [(n, _num(rate.get(k))) for k, n in (("pooled_eps", "pooled sandbox"), ("fresh_eps", "fresh sandbox"))]
    eps = [x for x in eps if x[1] is not None]
    if eps:
        charts.append({"type": "bars", "title": "Episodes per second (8-call agent)", "unit": "episodes/s",
                       "series": ["episodes/s"], "bars": [{"label": n, "values": [v]} for n, v in eps]})
    return charts


def bench_targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The bench's verdict table (figure, measured, target, pass)."""
    return [{"figure": str(t.get("figure")), "shown": str(t.get("shown")), "target": str(t.get("target")),
             "pass": bool(t.get("pass"))} for t in report.get("targets") or [] if isinstance(t, dict)]
