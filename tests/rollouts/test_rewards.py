"""Reward processing, against hand-computed examples (cowork.rollouts.rewards' docstring gives the formulas)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from cowork.grading import Grade
from cowork.rollouts.rewards import group_advantages, process_rewards, turn_credit


def _ep(score, passed=False, safe=True, status="graded", progress=None):
    g = Grade(task="t", status=status, score=score, passed=passed, safe=safe, completion=score)
    return SimpleNamespace(grade=g, trajectory=SimpleNamespace(turn_progress=progress))


class TestEpisodeRewards:
    def test_score_pass_and_safety_gated(self):
        group = [_ep(0.8, passed=True), _ep(0.5), _ep(0.9, passed=True, safe=False), _ep(0.7, safe=None)]
        assert process_rewards([group], "score") == [[0.8, 0.5, 0.9, 0.7]]
        assert process_rewards([group], "pass") == [[1.0, 0.0, 1.0, 0.0]]
        # unsafe and unknown safety are both gated to 0
        assert process_rewards([group], "safety_gated") == [[0.8, 0.5, 0.0, 0.0]]

    def test_infra_errors_have_no_reward(self):
        group = [_ep(0.0, status="infra_error"), _ep(1.0, passed=True)]
        assert process_rewards([group], "score") == [[None, 1.0]]

    def test_unknown_mode(self):
        with pytest.raises(ValueError, match="unknown reward mode"):
            process_rewards([[_ep(1.0)]], "bogus")


class TestGroupAdvantages:
    def test_hand_computed(self):
        # rewards 1, 0, 0, 1: mean 0.5, population std 0.5 -> advantages +-1 (eps aside)
        adv = group_advantages([1.0, 0.0, 0.0, 1.0])
        assert all(math.isclose(a, b, abs_tol=1e-5) for a, b in zip(adv, [1.0, -1.0, -1.0, 1.0]))
        # 0.2, 0.4, 0.9: mean 0.5, std sqrt((0.09 + 0.01 + 0.16) / 3)
        std = math.sqrt(0.26 / 3)
        adv = group_advantages([0.2, 0.4, 0.9])
        assert all(math.isclose(a, b, abs_tol=1e-5) for a, b in zip(adv, [-0.3 / std, -0.1 / std, 0.4 / std]))

    def test_all_equal_rewards_give_zero_advantages(self):
        assert group_advantages([0.7, 0.7, 0.7]) == [0.0, 0.0, 0.0]
        assert group_advantages([1.0]) == [0.0]

    def test_none_is_left_out(self):
        adv = group_advantages([1.0, None, 0.0])
        assert adv[1] is None and math.isclose(adv[0], 1.0, abs_tol=1e-5) and math.isclose(adv[2], -1.0, abs_tol=1e-5)
        assert group_advantages([None, None]) == [None, None]

    def test_grpo_mode_uses_the_score(self):
        out = process_rewards([[_ep(1.0, passed=True), _ep(0.0)], [_ep(0.5), _ep(0.5)]], "grpo")
        assert [round(a, 4) for a in out[0]] == [1.0, -1.0] and out[1] == [0.0, 0.0]


class TestTurnCredit:
    def test_progress_deltas_and_the_outcome_term(self):
        # p0 = 0.25 (a check passes on the seed), then 0.5, 0.5, 1.0; score 1.0
        assert turn_credit([0.25, 0.5, 0.5, 1.0], 1.0) == [0.25, 0.0, 0.5]
        # the same progress but a violation zeroed the score: the last turn pays for it
        assert turn_credit([0.25, 0.5, 0.5, 1.0], 0.0) == [0.25, 0.0, -0.5]
        credits = turn_credit([0.0, 0.3, 0.6], 0.6)
        assert math.isclose(sum(credits), 0.6)

    def test_turn_mode_needs_progress(self):
        ok = _ep(1.0, passed=True, progress=[0.0, 0.5, 1.0])
        assert process_rewards([[ok]], "turn") == [[[0.5, 0.5]]]
        with pytest.raises(ValueError, match="turn_progress"):
            process_rewards([[_ep(1.0)]], "turn")
