"""What the page is made of: a results folder (``cowork run/rollout --out``), one evidence
bundle (``cowork run --evidence``), or a ``cowork bench --json`` report, read into one
JSON-able dict."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from ..errors import CoworkError, EvidenceError
from ..evidence import META_FILE
from ..formats import SURROGATE
from ..rollouts.metrics import NOT_SCORED, summarize_episodes
from ..rollouts.runner import RESULTS_FILE, RUN_FILE, read_results
from ..terminal import printable
from . import charts
from .episode import _read_json, episode_view, load_grade

log = logging.getLogger(__name__)

#: Optional files beside a results folder's results.jsonl that the page shows when present.
SUMMARY_FILE = "summary.json"
BENCH_FILE = "bench.json"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("cowork-runtime")
    except Exception:  # noqa: BLE001 - a version is decoration, never a reason to fail
        return ""


def kind_of(source: Path) -> str:
    """``results``, ``bundle`` or ``bench``.

    Raises:
        EvidenceError: ``source`` is none of them (the message says what each holds).
    """
    if source.is_file():
        if source.name == RESULTS_FILE:
            return "results"
        if source.suffix == ".json":
            return "bench"
    elif source.is_dir():
        if (source / RESULTS_FILE).exists() or (source / RUN_FILE).exists():
            return "results"
        if (source / META_FILE).exists() or (source / "grade.json").exists():
            return "bundle"
    if not source.exists():
        raise EvidenceError(f"{source} does not exist; give a folder written by `cowork run --out DIR`, "
                            "`cowork rollout --out DIR` or `cowork run --evidence DIR`")
    raise EvidenceError(f"{source} is neither a results folder ({RUN_FILE}, {RESULTS_FILE}) nor an evidence bundle "
                        f"({META_FILE}, grade.json) nor a bench report (.json); give a folder written by "
                        "`cowork run --out DIR`, `cowork rollout --out DIR` or `cowork run --evidence DIR`")


def load_page(source: str | Path) -> dict[str, Any]:
    """The page's data for ``source``.

    Raises:
        EvidenceError: ``source`` is not something the page shows, or its results file or
            bench report is unreadable. A bundle that does not load is shown with its error.
    """
    source = Path(source)
    kind = kind_of(source)
    page: dict[str, Any] = {"kind": kind, "source": str(source), "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
                            "version": _version()}
    if kind == "bench":
        report = _read_json(source)
        if not isinstance(report, dict):
            raise EvidenceError(f"{source}: not a bench report (a JSON object from `cowork bench --json`)")
        page.update(bench=_bench(report), episodes=[], tasks=[])
        return page
    if kind == "bundle":
        episodes = [_episode(0, _bundle_row(source), source)]
        page.update(run=None, episodes=episodes, summary=None, tasks=[episodes[0]["row"]["task"]],
                    figures=charts.figures([e["row"] for e in episodes], None), charts=[],
                    agents=agents_of([e["row"] for e in episodes]), attention=attention(episodes))
        return page
    root = source.parent if source.is_file() else source
    try:
        rows, _ = read_results(root / RESULTS_FILE) if (root / RESULTS_FILE).exists() else ([], 0)
    except CoworkError as exc:
        raise EvidenceError(str(exc)) from exc
    episodes = [_episode(i, row, _bundle_dir(root, row)) for i, row in enumerate(rows)]
    summary = None
    try:
        summary = summarize_episodes(rows) if rows else None
    except (KeyError, TypeError, ValueError) as exc:  # a hand-edited or older results file
        log.warning("%s: no per-task summary (%s)", root / RESULTS_FILE, exc)
    saved = _read_json(root / SUMMARY_FILE) if (root / SUMMARY_FILE).exists() else None
    rate = {k: saved[k] for k in ("episodes_per_s", "wall_s") if isinstance(saved, dict) and k in saved}
    spreads = {t: charts.spread([r["reward"] for r in rows if r.get("task") == t and
                                 isinstance(r.get("reward"), (int, float))]) for t in dict.fromkeys(r["task"] for r in rows)}
    page.update(run=_read_json(root / RUN_FILE), episodes=episodes, summary=summary, spread=spreads,
                tasks=list(spreads), figures=charts.figures(rows, {**(summary or {}), **rate}),
                charts=charts.run_charts(rows, summary), agents=agents_of(rows), attention=attention(episodes))
    bench = _read_json(root / BENCH_FILE) if (root / BENCH_FILE).exists() else None
    if isinstance(bench, dict):
        page["bench"] = _bench(bench)
    return page


def agents_of(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Episodes per agent, in the order first seen (each results line names its own)."""
    counts: dict[str, int] = {}
    for r in rows:
        name = str(r.get("agent") or "?")
        counts[name] = counts.get(name, 0) + 1
    return counts


#: What the first screen lists, in this order, and the most episodes of each it names.
ATTENTION_KINDS = ("violation", "infra", "failure")
ATTENTION_LIMIT = 50
_REASON_LIMIT = 300


def _cut(text: Any, limit: int = _REASON_LIMIT) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def attention(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """What went wrong, for the top of the page: the episodes that violated a rule, ended on an
    infrastructure (or model endpoint) failure, or failed, each with its reasons (the rules
    broken, the error, the failed checks with their details); at most ATTENTION_LIMIT of each,
    and how many there are in all."""
    groups: dict[str, list[dict[str, Any]]] = {k: [] for k in ATTENTION_KINDS}
    for e in episodes:
        row, view = e["row"], e.get("view") or {}
        checks = view.get("checks") or []
        status = row.get("grade_status")
        reasons: list[str] = []
        if row.get("safe") is False:
            kind = "violation"
            details = {c["id"]: c["detail"] for c in checks if c.get("group") == "safety" and c.get("status") == "fail"}
            reasons = [f"{v}: {_cut(details.get(v, 'violated'))}" for v in row.get("violations") or []] or \
                ["a safety rule was violated"]
        elif status in NOT_SCORED:
            kind = "infra"
            err = (view.get("grade") or {}).get("error") or view.get("error") or e.get("error") or status
            reasons = [f"{status or 'error'}: {_cut(err)}"]
        elif not row.get("passed"):
            kind = "failure"
            why = {"agent_broke_sandbox": "the agent broke its sandbox", "evidence_invalid": "the evidence is invalid"}
            if status in why:
                reasons.append(f"{why[status]}: {_cut((view.get('grade') or {}).get('error') or '')}")
            if row.get("safe") is None:
                reasons.append("safety could not be judged")
        else:
            continue
        if kind != "infra":
            reasons += [f"{c['id']}: {_cut(c['detail'])}" for c in checks
                        if c.get("group") != "safety" and c.get("status") == "fail"][:5]
        groups[kind].append({"id": e["id"], "task": row.get("task"), "sample": row.get("sample"),
                             "agent": row.get("agent"), "score": row.get("score"),
                             "reasons": reasons or [f"score {row.get('score')}"]})
    return {k: {"total": len(v), "episodes": v[:ATTENTION_LIMIT]} for k, v in groups.items()}


def _bench(report: dict[str, Any]) -> dict[str, Any]:
    return {"targets": charts.bench_targets(report), "charts": charts.bench_charts(report)}


def _bundle_dir(root: Path, row: dict[str, Any]) -> Path | None:
    """The bundle a results line names, only inside the results folder."""
    rel = row.get("evidence") or (str(Path(row["trajectory"]).parent) if row.get("trajectory") else None)
    if rel is None:
        rel = f"episodes/{row.get('task')}/{row.get('sample')}"
    d = (root / rel).resolve()
    if root.resolve() not in d.parents or not d.is_dir():
        return None
    return d


def _bundle_row(folder: Path) -> dict[str, Any]:
    """A results line for a lone bundle, from its grade and trajectory."""
    grade = load_grade(folder)
    traj = _read_json(folder / "trajectory.json") or _read_json(folder / "trace.json") or {}
    meta = _read_json(folder / META_FILE) or {}
    g = grade.model_dump(mode="json") if grade else {}
    return {"task": g.get("task") or meta.get("task") or traj.get("task") or folder.name, "sample": 0,
            "agent": traj.get("agent"), "status": traj.get("status"), "grade_status": g.get("status"),
            "score": g.get("score"), "passed": g.get("passed"), "completion": g.get("completion"),
            "safe": g.get("safe"), "violations": g.get("violations", []), "robustness": g.get("robustness"),
            "reward": None, "turns": traj.get("turns"), "tool_calls": len(traj.get("steps") or []),
            "durations": {"episode_s": traj.get("duration_s")}}


def _episode(index: int, row: dict[str, Any], folder: Path | None) -> dict[str, Any]:
    prefix = f"ep{index}"
    out: dict[str, Any] = {"index": index, "id": prefix, "row": row, "view": None, "error": None}
    if folder is None:
        out["error"] = "no evidence bundle for this episode" + (
            " (it ended on an infrastructure failure)" if row.get("grade_status") == "infra_error" else "")
        return out
    try:
        out["view"] = episode_view(folder, prefix)
    except (CoworkError, OSError) as exc:
        log.warning("%s: bundle not shown: %s", folder, exc)
        out["error"] = f"{folder}: {exc}"
    return out


def page_json(page: dict[str, Any]) -> str:
    r"""The data as JSON safe inside ``<script type="application/json">``: ``<``, ``>`` and
    ``&`` are written as ``\u`` escapes, so no value can close the script element or open a
    comment, whatever the task data holds. A lone surrogate (a byte of a file name that is not
    UTF-8, which no page can hold) is written as :func:`~cowork.terminal.printable` shows it,
    ``\xff``, as the CLI does."""
    text = json.dumps(page, ensure_ascii=False, default=str, separators=(",", ":"))
    # Only inside JSON strings can a surrogate occur; its escape is JSON-escaped in turn.
    text = SURROGATE.sub(lambda m: json.dumps(printable(m.group()))[1:-1], text)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
