"""`cowork validate` on a spec that does not load: each problem names its field and a repair
hint made for it (never the same hint for every problem), and the report names the task by its
``id:`` line (or its folder), not ``?`` (no Docker: the schema step runs nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cowork import cli
from cowork.cli import exits
from cowork.validate.validate import _schema, schema_hint

BROKEN = Path(__file__).resolve().parents[1] / "fixtures" / "broken_specs"

#: (fixture, the field at fault, words the hint must hold).
CASES = [
    ("unknown_top_level_key", "titel", "rename 'titel' to 'title'"),
    ("unknown_check_key", "checks[1].paht", "rename 'paht' to 'path'"),
    ("unknown_check_type", "checks[0].type", "write 'file_exists' instead"),
    ("missing_prompt", "prompt", "add 'prompt' to the spec"),
    ("missing_check_field", "checks[1].text", "add 'text' to checks[1]"),
    ("oracle_tool_not_allowed", "oracle[1].tool", "add the tool (or its service) to `tools:`"),
    ("missing_source", "workspace.files[1].source", "add the file or folder to the task folder"),
    ("invalid_regex", "checks[1].pattern", "RE2"),
    ("wrong_type", "limits.max_turns", "make 'max_turns' a valid integer"),
    ("duplicate_check_id", "safety[1].id", "its own id"),
    ("duplicate_yaml_key", "title", "remove one of the two 'title' keys"),
    ("path_escape", "checks[1].path", "inside the workspace"),
    ("absolute_path", "workspace.files[1].path", "relative to the workspace"),
]


@pytest.fixture(autouse=True)
def _in_fixtures(monkeypatch):
    monkeypatch.chdir(BROKEN)


@pytest.mark.parametrize(("case", "field", "hint"), CASES, ids=[c[0] for c in CASES])
def test_each_problem_has_its_field_and_its_own_hint(case, field, hint):
    loaded, report = _schema(case)
    assert loaded is None and not report.ok
    (finding,) = report.findings
    assert finding.step == "schema" and finding.field == field, finding
    assert hint in (finding.hint or ""), finding.hint
    assert "as the message says" not in (finding.hint or "")


def test_the_hints_differ_from_problem_to_problem():
    hints = {_schema(case)[1].findings[0].hint for case, _, _ in CASES}
    assert len(hints) == len(CASES)


def test_the_task_is_named_by_its_id_line_or_its_folder(tmp_path):
    assert _schema("unknown_check_type")[1].task == "unknown-check-type"
    (tmp_path / "no-id").mkdir()
    (tmp_path / "no-id" / "task.yaml").write_text("title: t\nprompt: p\n")
    assert _schema(tmp_path / "no-id")[1].task == "no-id"


def test_a_problem_without_a_field_keeps_none_and_still_gets_a_hint():
    hint = schema_hint(None, "invalid YAML: mapping values are not allowed here")
    assert "YAML syntax" in hint


def test_the_cli_report_shows_task_field_and_hint(capsys):
    assert cli.main(["validate", "unknown_check_type", "oracle_tool_not_allowed"]) == exits.GATE_FAILED
    out = capsys.readouterr().out
    assert "INVALID unknown-check-type (unknown_check_type)" in out and "INVALID ?" not in out
    assert "fix checks[0].type: write 'file_exists' instead" in out
    assert "fix oracle[1].tool: add the tool (or its service) to `tools:`" in out
    assert cli.main(["validate", "unknown_top_level_key", "--json"]) == exits.GATE_FAILED
    (report,) = json.loads(capsys.readouterr().out)
    assert report["task"] == "unknown-top-level-key"
    assert [(f["field"], f["hint"]) for f in report["findings"]] == [
        ("titel", "rename 'titel' to 'title', or remove it")]
