"""Trial metrics: mean score, pass@k (unbiased estimator) and pass^k; a rollout's summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from math import comb
from typing import Any


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k trials drawn from n (c of them passing) passes.

    The unbiased estimator 1 - C(n-c, k) / C(n, k) (Chen et al., 2021).

    Raises:
        ValueError: unless 0 <= c <= n and 1 <= k <= n.
    """
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Probability that all of k trials drawn from n (c of them passing) pass: C(c, k) / C(n, k).

    Raises:
        ValueError: unless 0 <= c <= n and 1 <= k <= n.
    """
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    return comb(c, k) / comb(n, k)


def summarize(outcomes: dict[str, list[tuple[float, bool]]], k: int | None = None) -> dict[str, Any]:
    """Per task and overall: trials, mean score, pass@1, pass@k, pass^k.

    Args:
        outcomes: ``{task: [(score, passed), ...]}``; infrastructure errors left out by the caller.
        k: The k to report (default: the number of trials of each task).
    """
    tasks = {}
    for task, trials in outcomes.items():
        n = len(trials)
        if n == 0:
            continue
        c = sum(1 for _, p in trials if p)
        kk = min(k or n, n)
        tasks[task] = {"trials": n, "passes": c, "mean_score": sum(s for s, _ in trials) / n,
                       "pass@1": pass_at_k(n, c, 1), f"pass@{kk}": pass_at_k(n, c, kk),
                       f"pass^{kk}": pass_hat_k(n, c, kk), "k": kk}
    overall: dict[str, Any] = {"tasks": len(tasks)}
    if tasks:
        keys = {key for t in tasks.values() for key in t if key.startswith(("pass@", "pass^", "mean"))}
        for key in sorted(keys):
            vals = [t[key] for t in tasks.values() if key in t]
            overall[key] = sum(vals) / len(vals)
    return {"tasks": tasks, "overall": overall}


#: Grade statuses that say nothing of the agent: counted, never scored (no reward, out of
#: pass@k and of every mean), and run again when a rollout resumes.
NOT_SCORED = ("infra_error", "policy_error")


def summarize_episodes(episodes: Iterable[Mapping[str, Any]], k: int | None = None) -> dict[str, Any]:
    """What :func:`summarize` reports, plus reward, safety and what was not scored.

    Args:
        episodes: Finished episodes as a rollout's ``results.jsonl`` lines: each needs
            ``task``, ``grade_status``, ``score``, ``passed``, ``safe``, ``reward`` and
            ``infra_failures``.
        k: The k of pass@k and pass^k (default: the number of scored trials of each task).

    Returns:
        ``tasks`` and ``overall`` as :func:`summarize` gives them, each task also with
        ``mean_reward``, ``unsafe`` (episodes with ``safe`` False), ``safety_unknown`` (``safe``
        None), ``violation_rate`` (unsafe / scored), ``infra_error`` and ``agent_broke_sandbox``;
        ``overall`` also with ``mean_reward`` and ``violation_rate``; ``safety``: ``scored``,
        ``unsafe``, ``unknown``, ``violation_rate`` over every scored episode; ``episodes``:
        ``total``, ``infra_error``, ``policy_error`` (the model endpoint failed), ``policy_error_unsafe``
        (of those, the ones that had violated a rule before), ``infra_retries`` (failures retried
        away), ``agent_broke_sandbox``; ``agents``: episodes per agent (the lines' ``agent``, in
        the order first seen), every episode counted.

    An episode that ended ``infra_error`` or ``policy_error`` says nothing of the agent: it is
    counted, never scored (and a task with nothing but those has no entry in ``tasks``). An episode whose
    sandbox the agent broke is scored (0).
    """
    outcomes: dict[str, list[tuple[float, bool]]] = {}
    rewards: dict[str, list[float]] = {}
    counts: dict[str, Counter] = {}
    totals = {"total": 0, "infra_error": 0, "policy_error": 0, "policy_error_unsafe": 0, "infra_retries": 0,
              "agent_broke_sandbox": 0}
    agents: Counter = Counter()
    for e in episodes:
        task = e["task"]
        agents[str(e.get("agent") or "?")] += 1
        c = counts.setdefault(task, Counter())
        totals["total"] += 1
        totals["infra_retries"] += len(e.get("infra_failures") or [])
        if e["grade_status"] in NOT_SCORED:
            totals[e["grade_status"]] += 1
            c[e["grade_status"]] += 1
            # cut short by the model endpoint, yet a violation made before is never hidden
            totals["policy_error_unsafe"] += e["grade_status"] == "policy_error" and e.get("safe") is False
            continue
        if e["grade_status"] == "agent_broke_sandbox":
            totals["agent_broke_sandbox"] += 1
            c["agent_broke_sandbox"] += 1
        outcomes.setdefault(task, []).append((e["score"], bool(e["passed"])))
        if e.get("reward") is not None:
            rewards.setdefault(task, []).append(e["reward"])
        c["scored"] += 1
        c["unsafe"] += e["safe"] is False
        c["safety_unknown"] += e["safe"] is None
    out = summarize(outcomes, k)
    for task, m in out["tasks"].items():
        c, r = counts[task], rewards.get(task, [])
        m.update(mean_reward=sum(r) / len(r) if r else None, unsafe=c["unsafe"], safety_unknown=c["safety_unknown"],
                 violation_rate=c["unsafe"] / c["scored"], infra_error=c["infra_error"],
                 policy_error=c["policy_error"],
                 agent_broke_sandbox=c["agent_broke_sandbox"])
    scored = sum(c["scored"] for c in counts.values())
    unsafe = sum(c["unsafe"] for c in counts.values())
    out["safety"] = {"scored": scored, "unsafe": unsafe, "unknown": sum(c["safety_unknown"] for c in counts.values()),
                     "violation_rate": unsafe / scored if scored else None}
    means = [m["mean_reward"] for m in out["tasks"].values() if m["mean_reward"] is not None]
    if out["tasks"]:
        out["overall"]["mean_reward"] = sum(means) / len(means) if means else None
        out["overall"]["violation_rate"] = out["safety"]["violation_rate"]
    out["episodes"] = totals
    out["agents"] = dict(agents)
    return out
