"""Validation of specs graded by their original grader: the pieces that need no sandbox (tool
probe arguments, what counts as an answer, the comparison with the original harness)."""

from types import SimpleNamespace

import jsonschema

from cowork.validate.imported import answered, compare, sample_args


def test_probe_arguments_satisfy_the_schema_they_come_from():
    schemas = [
        {"type": "object", "properties": {"message_id": {"type": "string"}}, "required": ["message_id"]},
        {"type": "object", "properties": {"days": {"type": "integer", "minimum": 3}, "q": {"type": "string"}},
         "required": ["days"]},
        {"type": "object", "properties": {"status": {"type": "string", "enum": ["open", "closed"]},
                                          "tags": {"type": "array", "items": {"type": "string"}},
                                          "filter": {"type": "object", "properties": {"x": {"type": "boolean"}},
                                                     "required": ["x"]},
                                          "code": {"type": "string", "minLength": 20},
                                          "amount": {"type": ["number", "null"]}},
         "required": ["status", "tags", "filter", "code", "amount"]},
        {"type": "object", "properties": {"limit": {"type": "integer", "default": 7}}, "required": ["limit"]},
    ]
    for schema in schemas:
        args = sample_args(schema)
        jsonschema.validate(args, schema)
        assert set(args) == set(schema["required"])
    assert sample_args(schemas[1])["days"] == 3
    assert sample_args(schemas[2])["status"] == "open"
    assert sample_args(schemas[3])["limit"] == 7
    # Optional arguments are left out: only what the schema requires is sent.
    assert sample_args({"type": "object", "properties": {"q": {"type": "string"}}}) == {}


def _step(output, is_error=True):
    return SimpleNamespace(output=output, is_error=is_error)


def test_a_client_error_is_an_answer_but_a_dead_or_failing_service_is_not():
    assert answered(_step('{"ok": true}', is_error=False))[0]
    assert answered(_step("HTTP 404 Not Found: no such note"))[0]
    for text in ("HTTP 500 Internal Server Error: boom", "notes_list: the service 'notes' is not answering",
                 "notes_slow: the service 'notes' did not answer within 10s",
                 "Invalid arguments for notes_get: 'note_id' is a required property; nothing was sent."):
        ok, why = answered(_step(text))
        assert not ok and why == text


def _grade(score, passed, status="graded"):
    return SimpleNamespace(score=score, passed=passed, status=status)


def test_the_comparison_with_the_original_harness_fails_closed():
    same = compare("trajectory", _grade(0.52, False), {"harness": {"task_score": 0.52, "passed": False}}, judged=False)
    assert same["ok"] and same["detail"].startswith("same grade")
    differ = compare("trajectory", _grade(0.2, False), {"harness": {"task_score": 0.52, "passed": False}}, judged=False)
    assert not differ["ok"] and differ["field"] == "original_grader"
    # A grade that is not "graded" is never the same as the harness's number.
    assert not compare("nop", _grade(0.0, False, "infra_error"), {"harness": {"task_score": 0.0, "passed": False}},
                       judged=True)["ok"]
    # The harness failed: a failure, not a silent match.
    failed = compare("nop", _grade(0.0, False), {"error": "the grader container could not run"}, judged=True)
    assert not failed["ok"] and "could not run" in failed["detail"]
    # The harness's own call raised inside the grader container: its error is named.
    raised = compare("nop", _grade(0.0, False), {"harness": {"error": "IndexError: list index out of range"}},
                     judged=False)
    assert not raised["ok"] and "IndexError" in raised["detail"]
    # Without a judge, a grader that raises the same on both paths (it calls its judge anyway)
    # is not proven; raising on one path only, or with a judge given, is a failure.
    err = "AttributeError: 'NoneType' object has no attribute 'evaluate'"
    both = {"harness": {"error": err}, "cowork": {"error": err}}
    needs = compare("nop", _grade(0.0, False, "not graded"), both, judged=False, asked=True)
    assert needs["ok"] and needs["proven"] is False and "NOT PROVEN" in needs["detail"]
    # The same error on both paths from a grader that never asked the judge is broken code.
    assert not compare("nop", _grade(0.0, False, "not graded"), both, judged=False)["ok"]
    assert not compare("nop", _grade(0.0, False), both, judged=True)["ok"]
    one_sided = {"harness": {"error": err}, "cowork": {"task_score": 0.0, "passed": False}}
    assert not compare("nop", _grade(0.0, False), one_sided, judged=False)["ok"]
    # A no-op agent that passes is a task that cannot tell work from none.
    assert not compare("nop", _grade(0.9, True), {"harness": {"task_score": 0.9, "passed": True}}, judged=True)["ok"]
    # Without a judge, cowork's translation and the harness graded with no judge agree, but a
    # grader that asks the judge is not proven by that: NOT PROVEN, never proven.
    unproven = compare("nop", _grade(0.2, False), {"harness": {"task_score": 0.2, "passed": False}},
                       judged=False, asked=True)
    assert unproven["ok"] and unproven["proven"] is False and "NOT PROVEN" in unproven["detail"]
    # A grader that never asks the judge is proven without one.
    proven = compare("nop", _grade(0.2, False), {"harness": {"task_score": 0.2, "passed": False}}, judged=False)
    assert proven["ok"] and proven.get("proven", True)
    # With a judge given, its failures are a failure, not a match.
    failing = compare("nop", _grade(0.0, False), {"harness": {"task_score": 0.2, "passed": False},
                                                  "judge_errors": ["judge answered 500"]}, judged=True)
    assert not failing["ok"] and "judge failed" in failing["detail"]
