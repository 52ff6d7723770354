"""`cowork import claw-eval` on our own Claw-Eval-format fixture checkout (no Docker)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from cowork.errors import SpecError
from cowork.integrations.claw_eval.importer import import_checkout
from cowork.integrations.claw_eval.native import _at_least
from cowork.spec.loader import load_spec

CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "claw_eval_checkout"
IMPORTED = {"C901_trip_budget", "T901zh_notes_cleanup", "T902en_notes_cleanup", "T903_status_digest"}


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("imported")
    return import_checkout(CHECKOUT, out, native=True, judge_model="judge-m"), out


def _spec(out: Path, task: str) -> dict:
    return yaml.safe_load((out / task / "task.yaml").read_text(encoding="utf-8"))


def _source(task: str) -> dict:
    return yaml.safe_load((CHECKOUT / "tasks" / task / "task.yaml").read_text(encoding="utf-8"))


@pytest.fixture
def checkout(tmp_path):
    """A copy of the fixture checkout that a test may break."""
    root = tmp_path / "checkout"
    shutil.copytree(CHECKOUT, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _add_task(root: Path, name: str, edit) -> Path:
    """A new task folder: T901zh's, with its task.yaml changed by ``edit(data)``."""
    folder = root / "tasks" / name
    shutil.copytree(root / "tasks" / "T901zh_notes_cleanup", folder)
    data = yaml.safe_load((folder / "task.yaml").read_text(encoding="utf-8"))
    data["task_id"] = name
    data["services"][0]["env"]["NOTES_FIXTURES"] = f"tasks/{name}/fixtures/notes/notes.json"
    edit(data)
    (folder / "task.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return folder


class TestReport:
    def test_imported_and_refused(self, imported):
        report, out = imported
        assert {t.task_id for t in report.imported} == IMPORTED
        assert [(r.task_id, r.kind, r.file, r.field) for r in report.refused] == [
            ("M901_photo_count", "multimodal", "tasks/M901_photo_count/task.yaml", "prompt.attachments[0]")]
        assert "fixtures/photo.png" in report.refused[0].reason
        assert report.ok
        assert not (out / "M901_photo_count").exists()

    def test_written_as_json_and_text(self, imported):
        report, out = imported
        data = json.loads((out / "import-report.json").read_text(encoding="utf-8"))
        assert data == report.model_dump(mode="json")
        by_id = {t["task_id"]: t for t in data["imported"]}
        assert by_id["T901zh_notes_cleanup"]["tools"] == ["notes_list", "notes_get", "notes_delete", "notes_create"]
        assert by_id["T903_status_digest"]["services"] == {"kb_api": "kb"}
        text = report.text()
        assert "REFUSED  M901_photo_count: multimodal" in text
        assert "kb_api (was kb)" in text
        assert "4 imported, 1 refused" in text
        assert "--judge-model judge-m" in text

    def test_every_imported_task_loads(self, imported):
        report, out = imported
        for task in report.imported:
            spec = load_spec(out / task.folder).spec
            assert spec.original_grader is not None
            assert spec.original_grader.task_id == task.task_id
            assert spec.id == task.task_id.lower()


class TestFiles:
    def test_service_folder_mirrors_the_checkout(self, imported):
        _, out = imported
        svc = out / "T901zh_notes_cleanup" / "services" / "notes"
        for rel in ("mock_services/_base.py", "mock_services/notes/server.py",
                    "tasks/T901zh_notes_cleanup/fixtures/notes/notes.json"):
            assert (svc / rel).read_bytes() == (CHECKOUT / rel).read_bytes(), rel
        spec = _spec(out, "T901zh_notes_cleanup")
        (service,) = spec["http_services"]
        assert service["command"] == "python mock_services/notes/server.py"
        assert (out / "T901zh_notes_cleanup" / service["files"] / service["env"]["NOTES_FIXTURES"]).is_file()

    def test_grader_folder_has_the_package_the_task_and_its_peer(self, imported):
        report, out = imported
        grader = out / "T902en_notes_cleanup" / "claw_eval"
        for rel in ("src/claw_eval/__init__.py", "src/claw_eval/cli.py", "src/claw_eval/graders/base.py",
                    "src/claw_eval/trace/reader.py", "tasks/T902en_notes_cleanup/grader.py",
                    "tasks/T901zh_notes_cleanup/grader.py", "tasks/T901zh_notes_cleanup/task.yaml"):
            assert (grader / rel).is_file(), rel
        entry = next(t for t in report.imported if t.task_id == "T902en_notes_cleanup")
        assert entry.peers == ["T901zh_notes_cleanup"]
        # a task without peers carries no other task's folder
        assert sorted(p.name for p in (out / "T901zh_notes_cleanup" / "claw_eval" / "tasks").iterdir()) == [
            "T901zh_notes_cleanup"]
        # nothing of the grader goes where the agent's files are
        assert not (out / "C901_trip_budget" / "workspace").exists()

    def test_reimport_replaces_a_task_folder(self, tmp_path):
        import_checkout(CHECKOUT, tmp_path, only=["T901zh_notes_cleanup"])
        stray = tmp_path / "T901zh_notes_cleanup" / "stray.txt"
        stray.write_text("old")
        report = import_checkout(CHECKOUT, tmp_path, only=["T901zh_notes_cleanup"])
        assert [t.task_id for t in report.imported] == ["T901zh_notes_cleanup"]
        assert not stray.exists()
        assert not list(tmp_path.glob(".*importing"))


class TestMapping:
    def test_service_rename_and_endpoints(self, imported):
        _, out = imported
        spec = _spec(out, "T903_status_digest")
        (svc,) = spec["http_services"]
        assert svc["name"] == "kb_api" and svc["files"] == "services/kb_api" and svc["port"] == 9132
        assert svc["health"] == {"method": "POST", "path": "/notes/list"}
        assert svc["reset"] == {"method": "POST", "path": "/notes/reset"}
        assert svc["audit"] == {"method": "GET", "path": "/notes/audit"}
        assert spec["original_grader"]["services"] == {"kb_api": "kb"}
        assert {t["service"] for t in spec["http_tools"]} == {"kb_api"}
        # a name cowork has no built-in service for is kept
        assert _spec(out, "T901zh_notes_cleanup")["http_services"][0]["name"] == "notes"

    def test_tools(self, imported):
        _, out = imported
        source = {t["name"]: t for t in _source("T901zh_notes_cleanup")["tools"]}
        tools = {t["name"]: t for t in _spec(out, "T901zh_notes_cleanup")["http_tools"]}
        assert set(tools) == set(source)
        delete = tools["notes_delete"]
        assert delete["input_schema"] == source["notes_delete"]["input_schema"]
        assert delete["description"] == source["notes_delete"]["description"]
        assert (delete["service"], delete["method"], delete["path"]) == ("notes", "POST", "/notes/delete")
        # an endpoint without a method is POST, as in Claw-Eval
        kb_list = next(t for t in _spec(out, "T903_status_digest")["http_tools"] if t["name"] == "kb_list")
        assert (kb_list["method"], kb_list["path"]) == ("POST", "/notes/list")

    def test_request_language_limits(self, imported):
        _, out = imported
        spec = _spec(out, "T901zh_notes_cleanup")
        source = _source("T901zh_notes_cleanup")
        assert spec["prompt"] == source["prompt"]["text"]
        assert spec["title"] == source["task_name"]
        assert "lang-zh" in spec["tags"] and "claw-eval" in spec["tags"]
        assert spec["limits"] == {"max_turns": 12, "episode_timeout_s": 300.0}
        assert spec["tools"] == []
        assert "lang-en" in _spec(out, "T902en_notes_cleanup")["tags"]

    def test_user_agent(self, imported):
        _, out = imported
        spec = _spec(out, "C901_trip_budget")
        ua = _source("C901_trip_budget")["user_agent"]
        user = spec["user"]
        assert user["max_turns"] == ua["max_rounds"] == 4
        assert user["llm"]["persona"] == ua["persona"].strip()
        assert user["llm"]["goal"] == spec["prompt"]
        assert user["llm"]["stop"] == "[DONE]"
        assert len(user["turns"]) == 1 and "45" not in user["turns"][0]["say"]  # the fallback tells no hidden fact
        assert spec["system_prompt"] == ua["system_prompt_suffix"]
        assert "http_services" not in spec and spec["tools"] == []
        loaded = load_spec(out / "C901_trip_budget").spec
        assert loaded.user is not None and loaded.user.llm is not None

    def test_text_attachment_is_inlined_as_the_harness_does(self, checkout, tmp_path):
        def edit(data):
            data["prompt"]["attachments"] = ["fixtures/brief.md"]

        folder = _add_task(checkout, "T940_brief", edit)
        (folder / "fixtures" / "brief.md").write_text("Only the void draft goes.\n", encoding="utf-8")
        report = import_checkout(checkout, tmp_path / "out", only=["T940_brief"])
        assert [t.task_id for t in report.imported] == ["T940_brief"]
        prompt = _spec(tmp_path / "out", "T940_brief")["prompt"]
        assert prompt.endswith("\n[attached document: brief.md]\nOnly the void draft goes.")
        assert prompt.startswith(_source("T901zh_notes_cleanup")["prompt"]["text"])

    def test_sandbox_files_from_the_task_or_another_task(self, checkout, tmp_path):
        def edit(data):
            data["sandbox_files"] = ["fixtures/notes/notes.json", "tasks/T903_status_digest/fixtures/notes/notes.json"]

        _add_task(checkout, "T941_seeded", edit)
        report = import_checkout(checkout, tmp_path / "out", only=["T941_seeded"])
        (entry,) = report.imported
        ws = tmp_path / "out" / "T941_seeded" / "workspace"
        assert (ws / "fixtures/notes/notes.json").read_bytes() == (
            checkout / "tasks/T901zh_notes_cleanup/fixtures/notes/notes.json").read_bytes()
        assert (ws / "tasks/T903_status_digest/fixtures/notes/notes.json").is_file()
        spec = _spec(tmp_path / "out", "T941_seeded")
        assert spec["workspace"] == {"dir": "workspace"}
        assert spec["tools"] == ["shell", "read_file", "write_file", "edit_file", "list_files", "grep"]
        assert entry.tools[-6:] == spec["tools"]

    def test_persona_bullets_become_facts(self, checkout, tmp_path):
        def edit(data):
            data.update(tools=[], tool_endpoints=[], services=[], safety_checks=[], scoring_components=[])
            data["user_agent"] = {"enabled": True, "persona": "A shopper.\n- budget: 40 EUR\n- size: M\n",
                                  "max_rounds": 2}

        _add_task(checkout, "C902_shop", edit)
        report = import_checkout(checkout, tmp_path / "out", only=["C902_shop"])
        assert [t.task_id for t in report.imported] == ["C902_shop"]
        assert _spec(tmp_path / "out", "C902_shop")["user"]["llm"]["facts"] == ["budget: 40 EUR", "size: M"]


class TestNative:
    def test_translated_checks(self, imported):
        report, out = imported
        spec = _spec(out, "T901zh_notes_cleanup")
        checks = {c["id"]: c for c in spec["checks"]}
        assert checks["looked_first"] == {"id": "looked_first", "type": "tool_called", "tool": "notes_list",
                                          "min_count": 1, "weight": 0.2,
                                          "description": "Claw-Eval component looked_first"}
        assert checks["reported"]["type"] == "answer" and checks["reported"]["all_of"] == ["删除"]
        assert checks["reported"]["scope"] == "final"
        (rule,) = spec["safety"]
        assert (rule["type"], rule["tool"], rule["include_failed"]) == ("tool_not_called", "notes_create", True)
        entry = next(t for t in report.imported if t.task_id == "T901zh_notes_cleanup")
        assert any("stale_removed" in u and "audit_action" in u for u in entry.unmapped)
        assert entry.native == ["looked_first", "reported", "safety-no-notes_create"]

    def test_judge_and_text_checks(self, imported):
        report, out = imported
        checks = {c["id"]: c for c in _spec(out, "T903_status_digest")["checks"]}
        assert checks["digest_length"]["regex"] == "(?s).{40}"
        assert checks["statuses_named"]["all_of"] == [{"regex": "(?i)blocked"}, {"regex": "(?i)done"}]
        judge = checks["judge"]
        assert judge["type"] == "judge" and judge["rubric"] == _source("T903_status_digest")["judge_rubric"]
        assert judge["items"] == [{"id": "digest_quality", "rubric": "Accurate, short digest", "weight": 0.4}]
        entry = next(t for t in report.imported if t.task_id == "T903_status_digest")
        assert any("kb_delete" in u for u in entry.unmapped)  # a rule about a tool the task lacks
        c901 = _spec(out, "C901_trip_budget")["checks"]
        assert [(c["type"], [i["id"] for i in c["items"]], c["weight"]) for c in c901] == [
            ("judge", ["clarification", "answer"], 1.0)]

    def test_without_native_no_checks(self, tmp_path):
        import_checkout(CHECKOUT, tmp_path, only=["T901zh_notes_cleanup"])
        spec = _spec(tmp_path, "T901zh_notes_cleanup")
        assert "checks" not in spec and "safety" not in spec

    @pytest.mark.parametrize("n", [1, 40, 999, 1000, 1001, 2500])
    def test_min_length_regex_counts_exactly(self, n):
        pattern = re.compile(_at_least(n))
        assert pattern.search("x" * n) and not pattern.search("x" * (n - 1))

    def test_python_only_regex_is_unmapped(self, checkout, tmp_path):
        def edit(data):
            data["scoring_components"] = [{"name": "ahead", "weight": 1.0, "check": {
                "type": "regex_match", "field": "final_text", "patterns": ["(?=note)note"]}}]

        _add_task(checkout, "T950_lookahead", edit)
        report = import_checkout(checkout, tmp_path / "out", only=["T950_lookahead"], native=True)
        (entry,) = report.imported
        assert entry.native == ["safety-no-notes_create"]
        assert any(u.startswith("scoring_components 'ahead'") for u in entry.unmapped)


def _no_port(data):
    data["services"][0]["port"] = "lots"


class TestRefusals:
    def test_broken_yaml_names_file_and_field(self, checkout, tmp_path):
        _add_task(checkout, "T960_bad_port", _no_port)
        bad = checkout / "tasks" / "T961_bad_yaml"
        bad.mkdir()
        (bad / "task.yaml").write_text("task_id: T961\nprompt: {text: [unclosed\n", encoding="utf-8")
        (checkout / "tasks" / "T962_no_yaml").mkdir()
        report = import_checkout(checkout, tmp_path / "out")
        refused = {r.task_id: r for r in report.refused}
        port = refused["T960_bad_port"]
        assert (port.kind, port.file, port.field) == ("invalid", "tasks/T960_bad_port/task.yaml", "services[0].port")
        assert "services[0].port" in port.reason
        assert refused["T961_bad_yaml"].file == "tasks/T961_bad_yaml/task.yaml"
        assert refused["T961_bad_yaml"].reason.startswith("line ")
        assert refused["T962_no_yaml"].reason == "no task.yaml in the task folder"
        assert IMPORTED <= {t.task_id for t in report.imported}  # the others still import
        assert not any(r.kind == "error" for r in report.refused)

    @pytest.mark.parametrize(("name", "code", "kind", "field", "words"), [
        ("T970_web", "import httpx\n", "live_web", "services[0].command", "httpx"),
        ("T971_numpy", "import numpy as np\n", "missing_dependency", "services[0].command", "numpy"),
        ("T972_local", "from helpers import ok\n", None, None, None),
    ])
    def test_service_imports(self, checkout, tmp_path, name, code, kind, field, words):
        extra = checkout / "mock_services" / "extra"
        shutil.copytree(checkout / "mock_services" / "notes", extra)
        (extra / "helpers.py").write_text("import json\nok = True\n", encoding="utf-8")
        server = extra / "server.py"
        server.write_text(code + server.read_text(encoding="utf-8"), encoding="utf-8")
        _add_task(checkout, name, lambda d: d["services"][0].update(command="python mock_services/extra/server.py"))
        report = import_checkout(checkout, tmp_path / "out", only=[name])
        if kind is None:
            assert [t.task_id for t in report.imported] == [name]
            assert (tmp_path / "out" / name / "services" / "notes" / "mock_services" / "extra" / "helpers.py").is_file()
            return
        (r,) = report.refused
        assert (r.kind, r.field) == (kind, field) and words in r.reason

    @pytest.mark.parametrize(("name", "edit", "kind", "field"), [
        ("T980_sandbox_tool", lambda d: d["tools"].append({"name": "BrowserScreenshot", "description": "look"}),
         "unsupported", "tools[4]"),
        ("T981_snapshot", lambda d: d.update(env_snapshot_files=["/workspace/out.html"]), "unsupported",
         "env_snapshot_files"),
        ("T982_video", lambda d: d.update(sandbox_files=["fixtures/clip.mp4"]), "multimodal", "sandbox_files[0]"),
        ("T988_media_token", lambda d: d["prompt"].update(text="What is shown? [media attached 1/1: /tmp/a.png]"),
         "multimodal", "prompt.text"),
        ("T989_audio", lambda d: d["prompt"].update(attachments=["fixtures/notes/notes.json", "fixtures/b.wav"]), "multimodal",
         "prompt.attachments[1]"),
        ("T990_escape", lambda d: d.update(sandbox_files=["../../secret.txt"]), "invalid", "sandbox_files[0]"),
        ("T983_remote", lambda d: d["tool_endpoints"][0].update(url="https://api.example.com/notes/list"),
         "live_web", "tool_endpoints[0].url"),
        ("T984_key", lambda d: d["services"][0]["env"].update(SERP_API_KEY="x"), "live_web",
         "services[0].env.SERP_API_KEY"),
        ("T985_no_fixture", lambda d: d["services"][0]["env"].update(NOTES_FIXTURES="tasks/nowhere/notes.json"),
         "invalid", "services[0].env.NOTES_FIXTURES"),
        ("T986_wrong_port", lambda d: d["tool_endpoints"][1].update(url="http://localhost:9999/notes/get"),
         "invalid", "tool_endpoints[1].url"),
    ])
    def test_refused_with_field(self, checkout, tmp_path, name, edit, kind, field):
        _add_task(checkout, name, edit)
        report = import_checkout(checkout, tmp_path / "out", only=[name])
        assert report.imported == []
        (r,) = report.refused
        assert (r.task_id, r.kind, r.file, r.field) == (name, kind, f"tasks/{name}/task.yaml", field), r.reason
        assert not (tmp_path / "out" / name).exists()

    def test_harness_shell_and_file_tools_become_workspace_tools(self, checkout, tmp_path):
        name = "T979_bash"
        _add_task(checkout, name, lambda d: d["tools"].extend([{"name": "Bash", "description": "shell"},
                                                               {"name": "Read", "description": "read"}]))
        report = import_checkout(checkout, tmp_path / "out", only=[name])
        assert [t.task_id for t in report.imported] == [name], report.refused
        spec = _spec(tmp_path / "out", name)
        assert {"shell", "read_file"} <= set(spec["tools"]) and "write_file" not in spec["tools"]
        assert {t["name"] for t in spec["http_tools"]} == {"notes_list", "notes_get", "notes_delete", "notes_create"}

    def test_lfs_pointer_fixture(self, checkout, tmp_path):
        folder = _add_task(checkout, "T987_lfs", lambda d: None)
        (folder / "fixtures" / "notes" / "notes.json").write_text(
            "version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 3\n", encoding="utf-8")
        (r,) = import_checkout(checkout, tmp_path / "out", only=["T987_lfs"]).refused
        assert r.kind == "invalid" and "Git LFS pointer" in r.reason

    def test_missing_peer_grader(self, checkout, tmp_path):
        shutil.rmtree(checkout / "tasks" / "T901zh_notes_cleanup")
        report = import_checkout(checkout, tmp_path / "out", only=["T902en_notes_cleanup"])
        (r,) = report.refused
        assert r.kind == "invalid" and "T901zh_notes_cleanup" in r.reason
        assert r.file == "tasks/T902en_notes_cleanup/grader.py"

    def test_grader_importing_a_missing_package(self, checkout, tmp_path):
        grader = checkout / "tasks" / "T903_status_digest" / "grader.py"
        grader.write_text("import numpy\n" + grader.read_text(encoding="utf-8"), encoding="utf-8")
        (r,) = import_checkout(checkout, tmp_path / "out", only=["T903_status_digest"]).refused
        assert r.kind == "missing_dependency" and "numpy" in r.reason

    def test_unknown_only_and_bad_paths(self, tmp_path):
        report = import_checkout(CHECKOUT, tmp_path / "out", only=["T999_nope"])
        assert report.imported == [] and not report.ok
        assert [(r.task_id, r.field) for r in report.refused] == [("T999_nope", "--only")]
        with pytest.raises(SpecError, match="not a Claw-Eval checkout"):
            import_checkout(tmp_path, tmp_path / "out2")


class TestCli:
    def _run(self, *args):
        from cowork.cli.app import main

        return main(["import", "claw-eval", *map(str, args)])

    def test_exit_codes(self, tmp_path, capsys):
        assert self._run(CHECKOUT, "--out", tmp_path / "a", "--only", "T903_status_digest", "--native") == 0
        assert "IMPORTED T903_status_digest" in capsys.readouterr().out
        assert self._run(CHECKOUT, "--out", tmp_path / "b", "--only", "M901_photo_count", "--json") == 1
        data = json.loads(capsys.readouterr().out)
        assert data["imported"] == [] and data["refused"][0]["kind"] == "multimodal"
        assert self._run(tmp_path, "--out", tmp_path / "c") == 2
        assert "not a Claw-Eval checkout" in capsys.readouterr().err


def test_a_service_s_default_fixture_path_into_another_task_is_copied_beside_it(tmp_path):
    # Claw-Eval's services fall back to `<checkout>/tasks/<id>/fixtures/...` when the task sets
    # no variable, often another task's folder: the same relative path must resolve beside the
    # copied service, or the service does not start.
    from cowork.integrations.claw_eval.importer import _default_fixtures

    root = tmp_path / "checkout"
    (root / "tasks" / "T011zh_x" / "fixtures" / "finance").mkdir(parents=True)
    (root / "tasks" / "T011zh_x" / "fixtures" / "finance" / "tx.json").write_text("[]")
    (root / "tasks" / "T011zh_x" / "task.yaml").write_text("id: x")
    outside = tmp_path / "elsewhere" / "fixtures"
    outside.mkdir(parents=True)
    (outside / "secret.json").write_text("{}")
    (root / "tasks" / "Tlink").mkdir()
    (root / "tasks" / "Tlink" / "fixtures").symlink_to(outside)
    server = root / "mock_services" / "finance" / "server.py"
    server.parent.mkdir(parents=True)
    server.write_text('P = Path(__file__).parent.parent.parent / "tasks" / "T011zh_x" / "fixtures"\n'
                      'Q = "tasks/Tlink/fixtures/secret.json"\nR = "tasks" / "Tmissing"\n')
    found = _default_fixtures(root, [server])
    assert [p.relative_to(root).as_posix() for p in found] == ["tasks/T011zh_x/fixtures/finance/tx.json"]
