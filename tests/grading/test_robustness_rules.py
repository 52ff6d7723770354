"""Farmed robustness (issue 27 item 6) on synthetic evidence, no Docker: only failures on calls
the task needed count, once per call and never on a repeat of a call that had succeeded;
recovery is the same call succeeding; a tool counts as a whole; no completion, no score."""

from __future__ import annotations

import pytest

from cowork.evidence import Evidence
from cowork.formats import GENESIS_HASH, canonical_json, seal
from cowork.grading import grade
from cowork.grading.robustness import robustness
from cowork.spec.models import TaskSpec
from fakes import tar_of

#: The task needs kb_search and kb_read_page (its oracle's tools); kb_web_search is not needed.
ORACLE = [{"tool": "kb_search", "args": {"query": "retention"}}, {"tool": "kb_read_page", "args": {"page_id": "p1"}}]


def _ev(*calls, files=None) -> Evidence:
    """``calls``: (tool, args, outcome) with outcome "ok", or "429"/"500" for a call a fault failed."""
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
                    workspace_tar=tar_of(files or {"a.txt": "a"}), initial={}, trace={"messages": []})


def _spec(weights=(3, 1)) -> TaskSpec:
    """Four completion checks by weight: ``done.txt`` holds (3 of 4) and ``never.txt`` does not."""
    return TaskSpec.model_validate({
        "id": "t", "title": "t", "prompt": "p", "oracle": ORACLE, "pass_threshold": 0.75,
        "checks": [{"id": "done", "type": "file_exists", "path": "a.txt", "weight": weights[0]},
                   {"id": "never", "type": "file_exists", "path": "never.txt", "weight": weights[1]}]})


SEARCH = ("kb_search", {"query": "retention"})
PAGE = ("kb_read_page", {"page_id": "p1"})


def _spam(tool_args, n, faults_at):
    """``n`` identical calls, the ones at ``faults_at`` failed by a 429 and retried at once."""
    out = []
    for i in range(n):
        if i in faults_at:
            out.append((*tool_args, "429"))
        out.append((*tool_args, "ok"))
    return out


class TestWhatCounts:
    def test_an_honest_retry_recovers(self):
        rob, notes = robustness(_ev((*SEARCH, "500"), (*SEARCH, "ok")), needed={"kb_search"})
        assert rob == 1.0 and notes == ["fault 500 on kb_search at #1: recovered"]

    def test_repeats_of_a_call_that_had_succeeded_add_nothing(self):
        # The real failure: the page read failed and was never made again.
        lost = [(*SEARCH, "ok"), (*PAGE, "500")]
        farmed = lost + _spam(SEARCH, 20, faults_at={2, 5, 9, 11, 14, 17, 19})
        assert robustness(_ev(*lost), needed={"kb_search", "kb_read_page"})[0] == 0.0
        rob, notes = robustness(_ev(*farmed), needed={"kb_search", "kb_read_page"})
        assert rob == 0.0 and sum("a repeat of a call that had succeeded" in n for n in notes) == 7

    def test_faults_on_a_tool_the_task_does_not_need_add_nothing(self):
        web = [("kb_web_search", {"q": f"x{i}"}, "429") for i in range(5)] + \
              [("kb_web_search", {"q": f"x{i}"}, "ok") for i in range(5)]
        rob, notes = robustness(_ev((*PAGE, "500"), *web), needed={"kb_search", "kb_read_page"})
        assert rob == 0.0 and sum("does not need kb_web_search" in n for n in notes) == 5
        assert robustness(_ev(*web), needed={"kb_read_page"})[0] is None
        assert robustness(_ev(*web))[0] == 1.0  # without a spec every tool counts

    def test_recovery_is_the_same_call_succeeding(self):
        other_page = ("kb_read_page", {"page_id": "p2"}, "ok")
        assert robustness(_ev((*PAGE, "500"), other_page), needed={"kb_read_page"})[0] == 0.0
        assert robustness(_ev((*PAGE, "500"), other_page, (*PAGE, "ok")), needed={"kb_read_page"})[0] == 1.0

    def test_new_arguments_on_one_tool_cannot_outweigh_a_lost_failure(self):
        varied = [c for i in range(6) for c in (("kb_read_page", {"page_id": f"q{i}"}, "429"),
                                                 ("kb_read_page", {"page_id": f"q{i}"}, "ok"))]
        # Same tool: the tool is not recovered while one of its calls is lost.
        assert robustness(_ev((*PAGE, "500"), *varied), needed={"kb_read_page"})[0] == 0.0
        # Another needed tool: one unit each, however many calls were farmed on it.
        spam = [c for i in range(6) for c in (("kb_search", {"query": f"q{i}"}, "429"), ("kb_search", {"query": f"q{i}"}, "ok"))]
        assert robustness(_ev((*PAGE, "500"), *spam), needed={"kb_search", "kb_read_page"})[0] == 0.5

    def test_a_call_failing_twice_counts_once(self):
        rob, _ = robustness(_ev((*PAGE, "429"), (*PAGE, "500"), (*PAGE, "ok")), needed={"kb_read_page"})
        assert rob == 1.0


class TestScore:
    def test_nothing_completed_scores_nothing_whatever_robustness_says(self):
        g = grade(_spec(), _ev(*_spam(SEARCH, 10, faults_at={0, 3, 6}), files={"b.txt": "b"}))
        assert g.completion == 0.0 and g.robustness == 1.0 and g.score == 0.0 and not g.passed

    def test_a_partial_answer_with_farmed_retries_does_not_pass(self):
        spec = _spec()
        honest = [(*SEARCH, "ok"), (*PAGE, "500")]
        g = grade(spec, _ev(*honest))
        assert g.completion == 0.75 and g.robustness == 0.0 and g.score == pytest.approx(0.6) and not g.passed
        farmed = grade(spec, _ev(*honest, *_spam(SEARCH, 20, faults_at={2, 5, 9, 11, 14, 17, 19})))
        assert farmed.robustness == 0.0 and farmed.score == pytest.approx(0.6) and not farmed.passed

    def test_recovering_what_the_task_needed_still_pays(self):
        g = grade(_spec(), _ev((*SEARCH, "ok"), (*PAGE, "500"), (*PAGE, "ok")))
        assert g.robustness == 1.0 and g.score == pytest.approx(0.8 * 0.75 + 0.2) and g.passed
