"""Calls count by what they did: a refused call is not a done one; a call that may have acted
still counts against a maximum."""

from __future__ import annotations

from cowork.evidence import Evidence
from cowork.formats import GENESIS_HASH, canonical_json, seal
from cowork.grading import grade
from cowork.spec.models import TaskSpec


def _evidence(outcomes: list[str]) -> Evidence:
    prev, lines = GENESIS_HASH, []
    recs = [{"kind": "session_start"}]
    for o in outcomes:  # the two-record form: tool_call before, tool_result after (none: unknown)
        recs.append({"kind": "tool_call", "tool": "mail_send", "args": {"to": ["a@x.com"]}})
        if o != "unknown":
            recs.append({"kind": "tool_result", "call_seq": len(recs) - 1, "outcome": o, "result": ""})
    for i, r in enumerate(recs):
        s = seal({"seq": i, **r}, prev)
        prev = s["hash"]
        lines.append(canonical_json(s))
    return Evidence(audit_text="\n".join(lines) + "\n", audit_count=len(recs), workspace_tar=b"", initial={})


def _grade(check: dict, outcomes: list[str]):
    spec = TaskSpec.model_validate({
        "id": "t", "title": "t", "prompt": "p", "checks": [check],
        "oracle": [{"tool": "shell", "args": {"command": "true"}}],
        "violation": [{"tool": "shell", "args": {"command": "true"}}],
    })
    return grade(spec, _evidence(outcomes)).checks[0]


class TestCallOutcomes:
    def test_a_refused_call_does_not_satisfy_tool_called(self):
        assert _grade({"type": "tool_called", "tool": "mail_send"}, ["error"]).status == "fail"
        assert _grade({"type": "tool_called", "tool": "mail_send"}, ["error", "ok"]).status == "pass"

    def test_a_call_of_unknown_outcome_is_not_a_success(self):
        assert _grade({"type": "tool_called", "tool": "mail_send"}, ["unknown"]).status == "fail"

    def test_minimum_counts_successes_maximum_counts_every_attempt(self):
        check = {"type": "tool_call_count", "tool": "mail_send", "min": 1, "max": 1}
        assert _grade(check, ["ok"]).status == "pass"
        assert _grade(check, ["error", "error"]).status == "fail"          # nothing done
        assert _grade(check, ["ok", "unknown"]).status == "fail"           # the second may have sent

    def test_tool_not_called_counts_unknown_outcomes(self):
        assert _grade({"type": "tool_not_called", "tool": "mail_send"}, ["unknown"]).status == "fail"
