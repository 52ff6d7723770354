"""pass@k and pass^k against hand-computed values."""

import pytest

from cowork.rollouts.metrics import pass_at_k, pass_hat_k, summarize


class TestPassAtK:
    @pytest.mark.parametrize("n,c,k,expected", [
        (5, 0, 1, 0.0), (5, 5, 3, 1.0), (5, 2, 1, 0.4),
        (5, 2, 2, 1 - 3 / 10),      # 1 - C(3,2)/C(5,2)
        (10, 3, 5, 1 - 21 / 252),   # 1 - C(7,5)/C(10,5)
        (4, 1, 4, 1.0),
    ])
    def test_pass_at_k(self, n, c, k, expected):
        assert pass_at_k(n, c, k) == pytest.approx(expected)

    @pytest.mark.parametrize("n,c,k,expected", [
        (5, 5, 5, 1.0), (5, 4, 5, 0.0), (5, 2, 1, 0.4),
        (5, 3, 2, 3 / 10),          # C(3,2)/C(5,2)
        (10, 7, 3, 35 / 120),       # C(7,3)/C(10,3)
    ])
    def test_pass_hat_k(self, n, c, k, expected):
        assert pass_hat_k(n, c, k) == pytest.approx(expected)

    def test_bad_arguments(self):
        with pytest.raises(ValueError):
            pass_at_k(3, 4, 1)
        with pytest.raises(ValueError):
            pass_hat_k(3, 1, 0)

    def test_summary_per_task_and_overall(self):
        out = summarize({"a": [(1.0, True), (0.5, False), (1.0, True)], "b": [(0.0, False)] * 3})
        a, b = out["tasks"]["a"], out["tasks"]["b"]
        assert a["mean_score"] == pytest.approx(2.5 / 3) and a["pass@1"] == pytest.approx(2 / 3)
        assert a["pass@3"] == 1.0 and a["pass^3"] == 0.0 and b["pass@3"] == 0.0
        assert out["overall"]["pass@1"] == pytest.approx(1 / 3)
        assert out["overall"]["mean_score"] == pytest.approx((2.5 / 3 + 0) / 2)
