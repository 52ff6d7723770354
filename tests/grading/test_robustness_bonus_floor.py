"""A task's own robustness bonus and floor (issue 28, feature 9): spec fields whose defaults keep
today's formula; neither pays an agent that completed nothing, and the floor cannot be farmed."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cowork.evidence import Evidence
from cowork.formats import GENESIS_HASH, canonical_json, seal
from cowork.grading import grade
from cowork.grading.robustness import robustness
from cowork.spec.models import Scoring, TaskSpec
from fakes import tar_of

ORACLE = [{"tool": "kb_search", "args": {"query": "retention"}}, {"tool": "kb_read_page", "args": {"page_id": "p1"}}]
SEARCH = ("kb_search", {"query": "retention"})
PAGE = ("kb_read_page", {"page_id": "p1"})


def _ev(*calls) -> Evidence:
    """``calls``: (tool, args, outcome) with outcome "ok", or "429"/"500" for a call a fault failed
    (as in test_robustness_rules)."""
    recs: list[dict] = [{"kind": "session_start"}]
    for tool, args, outcome in calls:
        if outcome != "ok":
            recs.append({"kind": "fault", "tool": tool, "fault": outcome})
        recs.append({"kind": "tool_call", "tool": tool, "args": args, "outcome": "ok" if outcome == "ok" else "error"})
    prev, lines = GENESIS_HASH, []
    for i, r in enumerate(recs):
        s = seal({"seq": i, **r}, prev)
        prev = s["hash"]
        lines.append(canonical_json(s))
    return Evidence(audit_text="\n".join(lines) + "\n", audit_count=len(recs),
                    workspace_tar=tar_of({"a.txt": "a"}), initial={}, trace={"messages": []})


def _spec(files_ok: bool = True, **scoring) -> TaskSpec:
    return TaskSpec.model_validate({
        "id": "t", "title": "t", "prompt": "p", "oracle": ORACLE, "pass_threshold": 0.75, "scoring": scoring,
        "checks": [{"id": "done", "type": "file_exists", "path": "a.txt" if files_ok else "never.txt"}]})


NEEDED = {"kb_search", "kb_read_page"}


class TestDefaults:
    def test_the_defaults_are_today_s_formula(self):
        sc = Scoring()
        assert sc.robustness_bonus is None and sc.robustness_floor == 0
        assert robustness(_ev((*SEARCH, "ok")), needed=NEEDED)[0] is None
        assert robustness(_ev((*PAGE, "500")), needed=NEEDED)[0] == 0.0
        assert grade(_spec(), _ev((*SEARCH, "ok"))).score == 1.0  # no fault: the completion


class TestBonus:
    def test_a_clean_run_gets_the_bonus(self):
        rob, notes = robustness(_ev((*SEARCH, "ok")), needed=NEEDED, bonus=1.0)
        assert rob == 1.0 and "robustness bonus" in notes[-1]
        g = grade(_spec(robustness_bonus=0.5), _ev((*SEARCH, "ok")))
        assert g.robustness == 0.5 and g.score == pytest.approx(0.8 * 1 + 0.2 * 0.5)

    def test_the_bonus_never_pays_an_agent_that_completed_nothing(self):
        g = grade(_spec(files_ok=False, robustness_bonus=1.0), _ev((*SEARCH, "ok")))
        assert g.completion == 0 and g.score == 0


class TestFloor:
    def test_unrecovered_failures_are_raised_to_the_floor(self):
        rob, notes = robustness(_ev((*PAGE, "500")), needed=NEEDED, floor=0.5)
        assert rob == 0.5 and "floor" in notes[-1]
        g = grade(_spec(robustness_floor=0.5), _ev((*SEARCH, "ok"), (*PAGE, "500")))
        assert g.robustness == 0.5 and g.score == pytest.approx(0.8 + 0.2 * 0.5)

    def test_a_recovered_share_above_the_floor_stands(self):
        assert robustness(_ev((*PAGE, "500"), (*PAGE, "ok")), needed=NEEDED, floor=0.3)[0] == 1.0

    def test_spamming_successful_calls_cannot_raise_the_floor(self):
        """Claw-Eval's floor is the share of calls that succeeded, up to 0.5: twenty extra reads
        would lift it. Ours is the number the task set, whatever the agent adds."""
        lost = [(*SEARCH, "ok"), (*PAGE, "500")]
        spam = [("kb_search", {"query": f"q{i}"}, "ok") for i in range(20)]
        assert robustness(_ev(*lost, *spam), needed=NEEDED, floor=0.2)[0] == \
            robustness(_ev(*lost), needed=NEEDED, floor=0.2)[0] == 0.2

    def test_the_floor_never_pays_an_agent_that_completed_nothing(self):
        g = grade(_spec(files_ok=False, robustness_floor=1.0), _ev((*PAGE, "500")))
        assert g.score == 0


@pytest.mark.parametrize("field, value", [("robustness_bonus", 1.5), ("robustness_bonus", -0.1),
                                          ("robustness_floor", 2), ("robustness_floor", -1)])
def test_values_outside_zero_to_one_are_refused(field, value):
    with pytest.raises(ValidationError, match=field):
        Scoring.model_validate({field: value})
