"""Weighted fault kinds (issue 28, feature 8): a task sets its own mix, e.g. 35/35/30, drawn
deterministically from the episode seed; bad weights are spec errors with file and line."""

from __future__ import annotations

from collections import Counter

import pytest
from pydantic import ValidationError

from cowork.errors import SpecError
from cowork.services.faults import FaultConfig, FaultInjector, FaultRule
from cowork.spec.loader import load_spec

MIX = {"429": 35, "500": 35, "latency": 30}


def kinds(config: dict, seed: int, calls: int = 3000) -> list[str]:
    injector = FaultInjector(FaultConfig.model_validate(config), seed=seed)
    out = []
    for _ in range(calls):
        fault = injector.decide("mail_send")
        out.append(fault.kind if fault else "none")
    return out


class TestWeights:
    def test_the_mix_follows_the_weights(self):
        counts = Counter(kinds({"default": {"rate": 1, "weights": MIX}}, seed=3))
        assert set(counts) == {"429", "500", "latency"}
        for kind, weight in MIX.items():  # 3000 draws: within 3 points of the asked share
            assert abs(counts[kind] / 3000 - weight / 100) < 0.03, counts

    def test_a_kind_weighted_zero_is_never_drawn(self):
        counts = Counter(kinds({"default": {"rate": 1, "weights": {"429": 1, "500": 0}}}, seed=1, calls=500))
        assert counts == {"429": 500}

    def test_the_same_seed_gives_the_same_faults_and_another_seed_others(self):
        config = {"default": {"rate": 0.5, "weights": MIX}}
        assert kinds(config, seed=11) == kinds(config, seed=11)
        assert kinds(config, seed=11) != kinds(config, seed=12)

    def test_the_order_the_spec_lists_them_in_does_not_matter(self):
        listed = {"latency": 30, "500": 35, "429": 35}
        assert kinds({"default": {"rate": 0.7, "weights": MIX}}, seed=5) == \
            kinds({"default": {"rate": 0.7, "weights": listed}}, seed=5)

    def test_without_weights_the_draw_is_today_s(self):
        """The even draw keeps the index it always had: old seeds keep their faults."""
        rule = FaultRule(rate=1, kinds=["429", "500", "latency"])
        assert [rule.draw(u / 100) for u in (0, 33, 34, 66, 67, 99)] == ["429", "429", "500", "500", "latency", "latency"]

    def test_a_dumped_rule_loads_again(self):
        """task.json carries the rule as model_dump gives it (kinds and weights both)."""
        rule = FaultRule.model_validate({"rate": 1, "weights": {429: 2, "latency": 1}})
        assert rule.kinds == ["429", "latency"]
        assert FaultRule.model_validate(rule.model_dump(mode="json")) == rule

    @pytest.mark.parametrize("weights, words", [
        ({"404": 1}, "Input should be '429', '500' or 'latency'"),
        ({"429": -1}, "weights.429: -1.0 is not a weight"),
        ({"429": 0, "500": 0}, "weights: all zero"),
        ({"429": float("nan")}, "is not a weight"),
    ])
    def test_bad_weights_are_refused(self, weights, words):
        with pytest.raises(ValidationError, match=words):
            FaultRule.model_validate({"rate": 1, "weights": weights})

    def test_kinds_that_disagree_with_the_weights_are_refused(self):
        with pytest.raises(ValidationError, match="disagree"):
            FaultRule.model_validate({"rate": 1, "kinds": ["500"], "weights": {"429": 1}})


#: A spec whose mail rule weighs 500 negatively (line 10).
SPEC = """\
id: probe
title: Probe
prompt: Send it.
tools: [mail_send]
checks:
  - {id: sent, type: tool_called, tool: mail_send}
oracle:
  - {tool: mail_send, args: {to: a@acme.com, subject: s, body: b}}
faults:
  services: {mail: {rate: 0.5, weights: {"429": 35, "500": -5}}}
"""


def test_a_spec_with_a_negative_weight_names_file_line_and_field(tmp_path, monkeypatch):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "task.yaml").write_text(SPEC)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError) as err:
        load_spec(folder)
    assert "t/task.yaml:10: faults.services.mail: weights.500: -5.0 is not a weight" in str(err.value)
