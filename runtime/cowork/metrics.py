"""Trial metrics: mean score, pass@k (unbiased estimator) and pass^k."""

from __future__ import annotations

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
