"""Reward processing for RL: episode rewards, group-normalized advantages, turn-level credit.

Options (``process_rewards(..., mode=)``), for a group of G episodes of one task with grades
g_1..g_G:

- ``score``: r_i = score(g_i), the grade's weighted score in [0, 1].
- ``pass``: r_i = 1 if g_i passed else 0.
- ``safety_gated``: r_i = score(g_i) if g_i is judged safe, else 0 (unknown safety counts as
  unsafe: what could not be judged is never rewarded as safe).
- ``grpo``: the group-normalized advantage of the score, A_i = (r_i - mean(r)) / (std(r) + eps)
  with the population std over the group's graded episodes; when every reward in the group
  is equal (std = 0) every advantage is 0: the group teaches nothing, rather than dividing
  by eps and blowing noise up.
- ``turn``: turn-level credit from check progress. After each assistant turn the
  deterministic checks run on the live state (``run_episode(..., turn_progress=True)``):
  p_t is the completion after turn t (p_0 before the first). Turn t gets c_t = p_t - p_{t-1};
  the credits sum to p_T - p_0. The final turn also gets the episode's outcome term
  r - p_T (r the score reward), so the credits of an episode sum to r - p_0 and a violation
  that zeroes the score is charged to the turn that ended the episode.

An ``infra_error`` or ``policy_error`` episode has no reward (None): it says nothing of the agent, and is left out
of group means and standard deviations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Sequence

from .metrics import NOT_SCORED

if TYPE_CHECKING:
    from ..grading import Grade

#: The reward of a graded episode, by name (or a function of the Grade).
REWARDS = ("score", "pass", "safety_gated")
Reward = str | Callable[["Grade"], float]


def reward_for(grade: Grade, reward: Reward = "score") -> float | None:
    """The RL reward of one graded episode.

    Args:
        grade: The episode's grade.
        reward: ``"score"`` (the grade's score), ``"pass"`` (1.0 if passed, else 0.0),
            ``"safety_gated"`` (the score if ``safe`` is True, else 0.0: unknown safety is
            unsafe), or a function of the Grade.

    Returns:
        None for an episode that ended ``infra_error`` or ``policy_error`` (it says nothing of
        the agent: leave it out of means); 0.0 for one whose sandbox the agent broke, whatever ``reward`` says.

    Raises:
        ValueError: ``reward`` is not one of the names above nor callable.
    """
    if grade.status in NOT_SCORED:
        return None
    if grade.status == "agent_broke_sandbox":
        return 0.0
    if callable(reward):
        return float(reward(grade))
    if reward == "score":
        return float(grade.score)
    if reward == "pass":
        return 1.0 if grade.passed else 0.0
    if reward == "safety_gated":
        return float(grade.score) if grade.safe is True else 0.0
    raise ValueError(f"unknown reward {reward!r}; choose one of {', '.join(REWARDS)} or pass a function of the Grade")

Mode = Literal["score", "pass", "safety_gated", "grpo", "turn"]
MODES = ("score", "pass", "safety_gated", "grpo", "turn")
EPS = 1e-6


def group_advantages(rewards: Sequence[float | None], eps: float = EPS) -> list[float | None]:
    """GRPO advantages of one group: (r - mean) / (std + eps); all 0 when the std is 0.

    None rewards (infrastructure errors) stay None and are left out of mean and std.
    """
    known = [r for r in rewards if r is not None]
    if not known:
        return [None for _ in rewards]
    mean = sum(known) / len(known)
    std = math.sqrt(sum((r - mean) ** 2 for r in known) / len(known))
    if std < eps:
        return [None if r is None else 0.0 for r in rewards]
    return [None if r is None else (r - mean) / (std + eps) for r in rewards]


def turn_credit(progress: Sequence[float], final_reward: float | None) -> list[float]:
    """Per-turn credit from check progress (see the module docstring).

    Args:
        progress: p_0..p_T: completion before the first turn and after each turn.
        final_reward: The episode's reward r (None: no outcome term).

    Returns:
        T credits; they sum to r - p_0 (or p_T - p_0 without a reward).
    """
    if len(progress) < 2:
        return [] if final_reward is None else [final_reward - (progress[0] if progress else 0.0)]
    credits = [b - a for a, b in zip(progress, progress[1:])]
    if final_reward is not None:
        credits[-1] += final_reward - progress[-1]
    return credits


def process_rewards(groups: Sequence[Sequence[Any]], mode: Mode = "score") -> list[list[Any]]:
    """Rewards of B groups of G graded episodes, by ``mode``.

    Args:
        groups: Per group, its episodes: objects with ``grade`` (a Grade) and, for ``turn``,
            ``trajectory.turn_progress`` (RolloutSample and EpisodeResult both fit).
        mode: One of :data:`MODES`.

    Returns:
        Per group, per episode: a float (or None for an infrastructure error); for ``turn``
        a list of per-turn credits.

    Raises:
        ValueError: an unknown mode, or ``turn`` on an episode run without turn progress.
    """
    if mode not in MODES:
        raise ValueError(f"unknown reward mode {mode!r}; choose one of {', '.join(MODES)}")
    out: list[list[Any]] = []
    for group in groups:
        if mode == "grpo":
            out.append(group_advantages([reward_for(e.grade, "score") for e in group]))
        elif mode == "turn":
            row: list[list[float] | None] = []
            for e in group:
                r = reward_for(e.grade, "score")
                progress = getattr(e.trajectory, "turn_progress", None)
                if r is None:
                    row.append(None)
                    continue
                if not progress:
                    raise ValueError("turn credit needs episodes run with turn_progress=True "
                                     f"(task {e.grade.task} has none)")
                row.append(turn_credit(progress, r))
            out.append(row)
        else:
            out.append([reward_for(e.grade, mode) for e in group])
    return out


__all__ = ["EPS", "MODES", "group_advantages", "process_rewards", "turn_credit"]
