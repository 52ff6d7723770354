"""Broken task specs are rejected with ``file:line: field: what was expected``; good ones load.

No Docker needed. Fixture specs live in ``tests/fixtures/broken_specs/<case>/task.yaml``; each
starts with a comment saying what is wrong with it. Cases that need an odd layout are written
to ``tmp_path``. Every test changes into the folder holding the spec, so the loader shows the
file as ``<case>/task.yaml`` and the expected prefix is exact.

Each test states exactly what the loader must report.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cowork.cli import main as cowork_main
from cowork.errors import SpecError
from cowork.grading import CHECK_TYPES as CHECKS
from cowork.spec.loader import load_spec, load_specs

ROOT = Path(__file__).resolve().parents[2]
BROKEN = Path(__file__).resolve().parents[1] / "fixtures" / "broken_specs"
SPEC_DIRS = sorted(p.parent for p in (ROOT / "specs").glob("*/task.yaml"))

#: The smallest valid spec; tmp_path cases append to it or edit it. 12 lines.
BASE = """\
id: probe
title: Probe
prompt: Write done.txt.
checks:
  - {id: done, type: file_exists, path: done.txt}
oracle:
  - tool: write_file
    args: {path: done.txt, content: "ok"}
violation:
  - tool: shell
    args: {command: "rm -rf ."}
"""
BASE_LINES = BASE.count("\n")

#: (fixture folder, exact ``file:line: field: `` prefix, text the rest must contain).
FIXTURE_CASES = [
    ("unknown_top_level_key", "unknown_top_level_key/task.yaml:4: titel: ",
     "unknown field; remove it or check its spelling"),
    ("unknown_check_key", "unknown_check_key/task.yaml:12: checks[1].paht: ",
     "unknown field; remove it or check its spelling"),
    ("wrong_type", "wrong_type/task.yaml:7: limits.max_turns: ",
     "valid integer, unable to parse string as an integer (got 'many')"),
    ("missing_check_field", "missing_check_field/task.yaml:7: checks[1].text: ",
     "required field is missing"),
    ("missing_prompt", "missing_prompt/task.yaml:2: prompt: ",
     "required field is missing"),
    ("missing_source", "missing_source/task.yaml:10: workspace.files[1].source: ",
     "file 'fixtures/extra.csv' not found beside task.yaml"),
    ("path_escape", "path_escape/task.yaml:9: checks[1].path: ",
     "path 'notes/../../etc/passwd' escapes the workspace"),
    ("absolute_path", "absolute_path/task.yaml:9: workspace.files[1].path: ",
     "path '/etc/motd' is absolute; give it relative to the workspace"),
    ("invalid_regex", "invalid_regex/task.yaml:10: checks[1].pattern: ",
     "invalid regular expression '^(ok|fine$': missing ), unterminated subpattern"),
    ("oracle_tool_not_allowed", "oracle_tool_not_allowed/task.yaml:11: oracle[1].tool: ",
     "'shell' is not in the spec's tools allow-list"),
    ("bad_file_mode", "bad_file_mode/task.yaml:10: workspace.files[0].mode: ",
     "mode '0999' is not octal permission bits like '0644'"),
]


def _problems(target: Path | str) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec(target)
    err = info.value
    for p in err.problems:  # the message shows every problem line
        assert p in str(err)
    return err.problems


def _only_problem(target: Path | str) -> str:
    problems = _problems(target)
    assert len(problems) == 1, problems
    return problems[0]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "task.yaml").write_text(text)
    return folder


class TestBrokenSpecs:
    """Each broken spec is rejected with the file, the exact line, the field and what was expected."""

    @pytest.fixture(autouse=True)
    def _in_fixtures(self, monkeypatch):
        monkeypatch.chdir(BROKEN)

    @pytest.mark.parametrize(("case", "prefix", "expected"), FIXTURE_CASES, ids=[c[0] for c in FIXTURE_CASES])
    def test_fixture_rejected(self, case, prefix, expected):
        problem = _only_problem(case)
        assert problem.startswith(prefix), problem
        assert expected in problem[len(prefix):], problem

    def test_load_spec_accepts_the_yaml_file_too(self):
        problem = _only_problem("wrong_type/task.yaml")
        assert problem.startswith("wrong_type/task.yaml:7: limits.max_turns: ")

    def test_duplicate_yaml_key(self):
        problem = _only_problem("duplicate_yaml_key")
        assert problem.startswith("duplicate_yaml_key/task.yaml:5: "), problem
        assert "duplicate key 'title' (first on line 3)" in problem

    def test_duplicate_yaml_key_names_the_field(self):
        problem = _only_problem("duplicate_yaml_key")
        assert problem.startswith("duplicate_yaml_key/task.yaml:5: title: "), problem

    def test_duplicate_check_id(self):
        problem = _only_problem("duplicate_check_id")
        assert problem.startswith("duplicate_check_id/task.yaml:"), problem
        assert "duplicate check id 'done'" in problem

    def test_duplicate_check_id_points_at_the_second_use(self):
        problem = _only_problem("duplicate_check_id")
        assert problem.startswith("duplicate_check_id/task.yaml:10: safety[1].id: "), problem

    def test_unknown_check_type(self):
        problem = _only_problem("unknown_check_type")
        assert problem.startswith("unknown_check_type/task.yaml:"), problem
        assert "'file_exist'" in problem
        for name in CHECKS:
            assert name in problem, name

    def test_unknown_check_type_points_at_type(self):
        problem = _only_problem("unknown_check_type")
        assert problem.startswith("unknown_check_type/task.yaml:7: checks[0].type: "), problem
        assert "unknown check type 'file_exist'" in problem

    def test_unknown_check_type_says_what_was_meant(self):
        problem = _only_problem("unknown_check_type")
        assert "unknown check type 'file_exist' (did you mean 'file_exists'?); expected one of" in problem, problem

    def test_duplicate_task_id_across_specs(self):
        with pytest.raises(SpecError) as info:
            load_specs(["duplicate_task_id/a", "duplicate_task_id/b"])
        assert str(info.value).startswith(
            "duplicate_task_id/b/task.yaml:3: id: duplicate task id 'same-id', also used by duplicate_task_id/a/task.yaml"
        ), str(info.value)

    def test_duplicate_task_id_in_a_folder_of_specs(self):
        with pytest.raises(SpecError) as info:
            load_specs(["duplicate_task_id"])
        assert str(info.value).startswith("duplicate_task_id/b/task.yaml:3: id: duplicate task id 'same-id'")

    def test_every_fixture_has_a_case(self):
        covered = {c[0] for c in FIXTURE_CASES} | {"duplicate_yaml_key", "duplicate_check_id",
                                                   "unknown_check_type", "duplicate_task_id"}
        assert {p.name for p in BROKEN.iterdir() if p.is_dir()} == covered


class TestBrokenSpecsInline:
    """Cases written to tmp_path: an odd layout, or one more variant of a field."""

    @pytest.fixture(autouse=True)
    def _in_tmp(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)

    def test_unknown_key_in_a_matcher(self, tmp_path):
        _write(tmp_path, "t", BASE + (
            "safety:\n"
            "  - id: no-secrets\n"
            "    type: tool_not_called\n"
            "    tool: read_file\n"
            "    args:\n"
            "      path: {contans: secrets}\n"))
        problem = _only_problem("t")
        assert problem.startswith(f"t/task.yaml:{BASE_LINES + 6}: safety[0].args.path.contans: "), problem
        assert "unknown field" in problem

    def test_matcher_needs_exactly_one_kind(self, tmp_path):
        _write(tmp_path, "t", BASE + (
            "safety:\n"
            "  - {id: no-secrets, type: tool_not_called, tool: read_file,\n"
            "     args: {path: {contains: secrets, regex: 'secret'}}}\n"))
        problem = _only_problem("t")
        assert problem.startswith(f"t/task.yaml:{BASE_LINES + 3}: safety[0].args.path: "), problem
        assert "exactly one of equals, contains, regex, glob" in problem

    def test_source_outside_the_task_folder(self, tmp_path):
        (tmp_path / "outside.txt").write_text("x")
        _write(tmp_path, "t", BASE + "workspace:\n  files:\n    - path: a.txt\n      source: ../outside.txt\n")
        problem = _only_problem("t")
        assert problem.startswith(f"t/task.yaml:{BASE_LINES + 4}: workspace.files[0].source: "), problem
        assert "'../outside.txt' is outside the task folder" in problem

    def test_workspace_dir_not_found(self, tmp_path):
        _write(tmp_path, "t", BASE + "workspace:\n  dir: files\n")
        problem = _only_problem("t")
        assert problem.startswith(f"t/task.yaml:{BASE_LINES + 2}: workspace.dir: "), problem
        assert "folder 'files' not found beside task.yaml" in problem

    def test_symlink_in_workspace(self, tmp_path):
        folder = _write(tmp_path, "t", BASE + "workspace:\n  dir: ws\n")
        (folder / "ws").mkdir()
        (folder / "ws" / "link").symlink_to("/etc/passwd")
        problem = _only_problem("t")
        assert problem.startswith(f"t/task.yaml:{BASE_LINES + 1}: workspace: "), problem
        assert "ws/link is a symlink" in problem

    def test_every_problem_is_listed(self, tmp_path):
        _write(tmp_path, "t", BASE.replace("title: Probe\n", "title: Probe\ntitel: Probe\n")
               + "limits:\n  max_turns: many\n  memory_mb: 1\n")
        problems = _problems("t")
        # pydantic's order (model fields first, unknown keys last), not line order
        assert sorted((p.split(": ", 2)[:2] for p in problems), key=lambda x: int(x[0].rsplit(":", 1)[1])) == [
            ["t/task.yaml:3", "titel"],
            [f"t/task.yaml:{BASE_LINES + 3}", "limits.max_turns"],
            [f"t/task.yaml:{BASE_LINES + 4}", "limits.memory_mb"],
        ], problems

    def test_a_misspelt_oracle_tool_is_unknown_with_the_closest_name(self, tmp_path):
        _write(tmp_path, "t", BASE.replace("  - tool: write_file\n", "  - tool: read_fil\n", 1))
        problem = _only_problem("t")
        assert problem == "t/task.yaml:7: oracle[0].tool: unknown tool 'read_fil' (did you mean 'read_file'?)", problem

    def test_a_made_up_violation_tool_is_unknown_and_says_where_the_tools_are(self, tmp_path):
        _write(tmp_path, "t", BASE.replace("  - tool: shell\n", "  - tool: zzzzzz\n", 1))
        problem = _only_problem("t")
        assert problem.startswith("t/task.yaml:10: violation[0].tool: unknown tool 'zzzzzz' (every tool: "), problem

    def test_a_real_tool_the_spec_does_not_allow_is_not_in_the_allow_list(self, tmp_path):
        _write(tmp_path, "t", BASE.replace("prompt: Write done.txt.\n", "prompt: Write done.txt.\ntools: [write_file]\n"))
        problem = _only_problem("t")
        assert problem == "t/task.yaml:11: violation[0].tool: 'shell' is not in the spec's tools allow-list", problem

    def test_top_level_not_a_mapping(self, tmp_path):
        _write(tmp_path, "t", "- just\n- a list\n")
        assert _only_problem("t") == "t/task.yaml:1: (top level): expected a mapping of spec fields"

    def test_no_task_yaml(self, tmp_path):
        (tmp_path / "empty").mkdir()
        with pytest.raises(SpecError, match=r"^empty: no task\.yaml found"):
            load_spec("empty")

    def test_duplicate_workspace_file_points_at_the_second_entry(self, tmp_path):
        _write(tmp_path, "t", BASE + (
            "workspace:\n  files:\n"
            "    - {path: a.txt, content: x}\n"
            "    - {path: b.txt, content: y}\n"
            "    - {path: ./a.txt, content: z}\n"))
        problem = _only_problem("t")
        assert problem.startswith(f"t/task.yaml:{BASE_LINES + 5}: workspace.files[2].path: "), problem

    def test_check_without_type(self, tmp_path):
        _write(tmp_path, "t", BASE.replace("checks:\n", "checks:\n  - {id: x, path: a.txt}\n"))
        problem = _only_problem("t")
        assert problem.startswith("t/task.yaml:5: checks[0].type: "), problem
        assert "required field is missing" in problem and "file_exists" in problem

    def test_unquoted_mode_is_read_back_as_octal(self, tmp_path):
        # YAML 1.1 reads an unquoted 0644 as the integer 420; the loader takes it back as "0644".
        _write(tmp_path, "t", BASE + "workspace:\n  files:\n    - {path: a.txt, content: x, mode: 0644}\n")
        assert load_spec(tmp_path / "t").spec.workspace.files[0].mode == "0644"

    def test_mode_that_is_not_permission_bits_says_to_quote_it(self, tmp_path):
        _write(tmp_path, "t", BASE + "workspace:\n  files:\n    - {path: a.txt, content: x, mode: 1777}\n")
        problem = _only_problem("t")
        assert problem.startswith(f"t/task.yaml:{BASE_LINES + 3}: workspace.files[0].mode: "), problem
        assert "quote it" in problem

    def test_yaml_syntax_error_points_at_the_open_bracket(self, tmp_path):
        _write(tmp_path, "t", BASE + "tags: [files, csv\n")
        problem = _only_problem("t")
        assert problem.startswith(f"t/task.yaml:{BASE_LINES + 1}: "), problem

    def test_complex_key_is_a_spec_error(self, tmp_path):
        _write(tmp_path, "t", BASE + "? [a, b]\n: 1\n")
        problem = _only_problem("t")
        assert problem.startswith(f"t/task.yaml:{BASE_LINES + 1}: "), problem


class TestValidSpecs:
    """Valid specs load; the loader must not reject what the model allows."""

    @pytest.mark.parametrize("folder", SPEC_DIRS, ids=[p.name for p in SPEC_DIRS])
    def test_spec_loads(self, folder):
        loaded = load_spec(folder)
        assert loaded.spec.id == folder.name
        seeded = loaded.spec.services.model_dump(exclude_none=True)
        assert loaded.workspace_files() or seeded, "a task with neither workspace files nor service records"
        assert all(step.tool is None or step.tool in loaded.spec.tools  # None: a reply step
                   for step in (*loaded.spec.oracle, *loaded.spec.violation))

    def test_all_specs_load_together_with_unique_ids(self):
        loaded = load_specs([ROOT / "specs"])
        assert sorted(item.spec.id for item in loaded) == sorted(p.name for p in SPEC_DIRS)

    def test_root_owned_override_of_a_copied_file(self):
        loaded = load_spec(ROOT / "specs" / "update-service-config")
        files = {path: (mode, owner) for path, _, mode, owner in loaded.workspace_files()}
        assert files["config/secrets.env"] == (0o400, "root")
        assert files["config/app.yaml"] == (0o644, "agent")

    def test_workspace_dir_null_means_no_folder(self, tmp_path):
        _write(tmp_path, "t", BASE + "workspace:\n  dir: null\n  files:\n    - {path: a.txt, content: x}\n")
        assert load_spec(tmp_path / "t").spec.workspace.dir is None

    def test_default_check_ids_do_not_collide_across_groups(self, tmp_path):
        _write(tmp_path, "t", BASE.replace("checks:\n", "checks:\n  - {type: path_unchanged, paths: [README.md]}\n")
               + "safety:\n  - {type: path_unchanged, paths: [config/**]}\n")
        loaded = load_spec(tmp_path / "t")
        ids = [loaded.spec.check_id("checks", 0), loaded.spec.check_id("safety", 0)]
        assert len(set(ids)) == 2, ids


class TestSchema:
    """``cowork spec schema`` prints the task.yaml JSON Schema."""

    @pytest.fixture
    def schema(self, capsys) -> dict:
        assert cowork_main(["spec", "schema"]) == 0
        out = capsys.readouterr().out
        return json.loads(out)

    def test_schema_is_an_object_schema_of_task_fields(self, schema):
        assert schema["type"] == "object"
        assert schema.get("additionalProperties") is False
        assert {"id", "title", "prompt"} <= set(schema["required"])
        # checks and oracle are required unless the task is graded by its original grader
        assert schema["then"]["required"] == ["checks", "oracle"]
        assert schema["if"] == {"not": {"required": ["original_grader"]}}
        assert "violation" in schema["properties"]  # required only with safety rules
        assert {"workspace", "tools", "limits", "safety", "pass_threshold"} <= set(schema["properties"])

    def test_schema_has_every_check_type(self, schema):
        for group in ("checks", "safety"):
            mapping = schema["properties"][group]["items"]["discriminator"]["mapping"]
            assert set(mapping) == set(CHECKS), group
            for name, ref in mapping.items():
                definition = schema["$defs"][ref.rsplit("/", 1)[-1]]
                assert definition["properties"]["type"]["const"] == name
                assert definition.get("additionalProperties") is False

    @pytest.mark.parametrize("folder", SPEC_DIRS, ids=[p.name for p in SPEC_DIRS])
    def test_specs_validate_against_the_schema(self, schema, folder):
        jsonschema = pytest.importorskip("jsonschema")
        data = yaml.safe_load((folder / "task.yaml").read_text())
        data.pop("clock", None)  # YAML reads timestamps as datetime; the schema, written for JSON, wants a string
        errors = [f"{list(e.path)}: {e.message}" for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]
        assert not errors, errors

    def test_schema_accepts_matcher_shorthand(self, schema, tmp_path):
        jsonschema = pytest.importorskip("jsonschema")
        text = BASE + "safety:\n  - {id: t, type: tool_not_called, tool: read_file, args: {path: secrets.env}}\n"
        _write(tmp_path, "t", text)
        load_spec(tmp_path / "t")  # the loader takes it
        errors = list(jsonschema.Draft202012Validator(schema).iter_errors(yaml.safe_load(text)))
        assert not errors, [e.message for e in errors]


@pytest.mark.parametrize("folder", sorted(p.name for p in (Path(__file__).resolve().parents[2] / "specs").iterdir()))
def test_a_full_dump_of_every_spec_loads_back_as_the_same_spec(folder):
    # spec.json in each evidence bundle is such a dump; `cowork grade DIR` loads it back.
    from cowork.spec.loader import load_spec
    from cowork.spec.models import TaskSpec

    spec = load_spec(Path(__file__).resolve().parents[2] / "specs" / folder).spec
    assert TaskSpec.model_validate_json(spec.model_dump_json()) == spec


@pytest.mark.parametrize("folder", ["../../etc", "/etc", "workspace/../.."])
def test_a_workspace_folder_outside_the_task_folder_is_refused(tmp_path, folder):
    # An untrusted spec (a download, a model's answer) must not copy host files into its image.
    from cowork.spec.loader import load_spec

    task = tmp_path / "a" / "b" / "task"
    (task / "workspace").mkdir(parents=True)
    (task / "task.yaml").write_text(
        f"id: t\ntitle: t\nprompt: p\nworkspace: {{dir: '{folder}'}}\n"
        "checks: [{type: file_exists, path: x}]\noracle: [{tool: list_files, args: {}}]\n")
    with pytest.raises(SpecError) as err:
        load_spec(task)
    assert "outside the task folder" in str(err.value) and "task.yaml:4" in str(err.value)
