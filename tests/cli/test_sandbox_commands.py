"""Sandbox housekeeping without a daemon (tests/integration/test_sandbox_housekeeping.py has
the Docker ones): the one id rule, the JSON shapes of ``cowork ps`` and ``cowork up``, errors
that name the right thing, help examples the commands accept, and what Ctrl-C says."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import types
from pathlib import Path
from urllib.parse import unquote, urlsplit

import jsonschema
import pytest

from cowork import cli
from cowork.cli import exits, interrupted, sandboxes
from cowork.cli.checkpoints import SNAPSHOT_ID
from cowork.engine import labels as L
from cowork.episode import run as episode
from cowork.episode.run import EpisodeResult, Trajectory
from cowork.grading import Grade

ROOT = Path(__file__).resolve().parents[2]
CSV = str(ROOT / "specs" / "fix-csv-report")
CID = "5ca0c003c377" + "ab" * 26
NAME = "cowork-fix-csv-report-16c7c5617279"


def _container(**labels: str) -> types.SimpleNamespace:
    return types.SimpleNamespace(id=CID, name=NAME, status="running",
                                 attrs={"Created": "2026-01-02T03:04:05.123456789Z"},
                                 labels={**L.owner_labels("fix-csv-report", "/nonexistent/16c7c5617279"), **labels})


# --------------------------------------------------------------------------- one id per sandbox
class TestOneId:
    @pytest.mark.parametrize("ref", [CID[:12], CID, CID[:4], NAME, "16c7c5617279"])
    def test_every_id_the_cli_prints_names_the_sandbox(self, ref):
        assert L.refers_to(ref, CID, NAME)

    @pytest.mark.parametrize("ref", ["", "16c7c561727", "6c7c5617279", "report-16c7c5617279", "fix-csv-report",
                                     "cowork-fix-csv-report"])
    def test_nothing_else_does(self, ref):
        assert not L.refers_to(ref, CID, NAME)

    def test_the_run_id_is_the_run_dirs_name(self):
        # start_container names the container cowork-<task>-<short> and its run dir <run root>/<short>.
        assert L.run_id(NAME) == "16c7c5617279" and L.run_id("other-16c7c5617279") is None

    def test_find_container_takes_the_run_id_and_says_where_to_look(self, monkeypatch):
        from cowork.engine import reaper

        box = _container()
        monkeypatch.setattr(reaper, "managed_containers", lambda: [box])
        assert reaper.find_container("16c7c5617279") is box
        with pytest.raises(reaper.NoSuchSandbox, match="`cowork ps` lists every sandbox"):
            reaper.find_container("0000")


# --------------------------------------------------------------------------- JSON shapes
class TestShapes:
    def test_the_schemas_are_valid_json_schema(self):
        for schema in (sandboxes.PS_SCHEMA, sandboxes.UP_SCHEMA):
            jsonschema.Draft202012Validator.check_schema(schema)

    def test_a_described_sandbox_fits_the_ps_shape(self):
        row = sandboxes.describe(_container(**{L.KEEP: "true"}), now=1767323045.0 + 60)
        jsonschema.validate({"sandboxes": [row]}, sandboxes.PS_SCHEMA)
        sandboxes.PsOutput.model_validate({"sandboxes": [row]})
        with pytest.raises(jsonschema.ValidationError):  # a field the shape does not name
            jsonschema.validate({"sandboxes": [{**row, "token": "x"}]}, sandboxes.PS_SCHEMA)
        assert row["id"] == CID[:12] and row["run_id"] == "16c7c5617279" and row["kept"] and not row["orphan"]
        assert row["created"] == "2026-01-02T03:04:05.123456Z" and 59 <= row["age_s"] <= 61
        # An unreadable run dir is unknown, not "unused".
        assert row["client_calls"] is None and row["used"] is None and row["snapshots"] is None

    def test_an_orphan_is_what_gc_removes(self):
        row = sandboxes.describe(_container(**{L.OWNER_PID: "999999999"}))
        assert row["orphan"] and not row["owner"]["alive"]

    def test_mcp_url_is_a_url_of_the_socket(self):
        url = sandboxes.mcp_url("/tmp/cowork-0/16c7c5617279/mcp.sock")
        parts = urlsplit(url)
        assert (parts.scheme, parts.path) == ("http+unix", "/mcp")
        assert unquote(parts.netloc) == "/tmp/cowork-0/16c7c5617279/mcp.sock"
        assert re.fullmatch(sandboxes.UP_SCHEMA["properties"]["mcp_url"]["pattern"], url)

    def test_up_json_has_one_shape_with_and_without_http(self):
        base = {"id": CID[:12], "name": NAME, "run_id": "16c7c5617279", "task": "t",
                "mcp_socket": "/tmp/x/mcp.sock", "mcp_url": sandboxes.mcp_url("/tmp/x/mcp.sock"),
                "stdio_bridge": f"cowork connect {CID[:12]}", "http": None}
        jsonschema.validate(base, sandboxes.UP_SCHEMA)
        jsonschema.validate({**base, "http": {"url": "http://127.0.0.1:8765/sandboxes/x/mcp", "token": "t",
                                              "serve": "cowork serve", "clients": {}}}, sandboxes.UP_SCHEMA)
        with pytest.raises(jsonschema.ValidationError):  # the old value, a URL with a remark after it
            jsonschema.validate({**base, "mcp_url": "http://localhost/mcp (streamable HTTP over the unix socket)"},
                                sandboxes.UP_SCHEMA)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({k: v for k, v in base.items() if k != "http"}, sandboxes.UP_SCHEMA)

    def test_ps_with_no_sandboxes(self, monkeypatch, capsys):
        from cowork.engine import reaper

        monkeypatch.setattr(reaper, "managed_containers", lambda: [])
        assert cli.main(["ps", "--json"]) == exits.OK
        assert json.loads(capsys.readouterr().out) == {"sandboxes": []}
        assert cli.main(["ps"]) == exits.OK
        assert "no cowork sandboxes" in capsys.readouterr().out


# --------------------------------------------------------------------------- errors and examples
class TestErrors:
    def test_grade_of_a_missing_path_names_folder_and_sandbox(self, tmp_path, capsys):
        # A path is never a sandbox id: answered without asking Docker.
        assert cli.main(["grade", str(tmp_path / "nonexistent")]) == exits.BAD_INPUT
        err = capsys.readouterr().err
        assert "no folder or sandbox named" in err and "no cowork sandbox matches" not in err

    def test_grade_of_an_unknown_name(self, monkeypatch, capsys):
        from cowork.engine import reaper

        monkeypatch.setattr(reaper, "managed_containers", lambda: [])
        assert cli.main(["grade", "nosuchthing"]) == exits.BAD_INPUT
        err = capsys.readouterr().err
        assert "no folder or sandbox named 'nosuchthing'" in err and "cowork ps" in err

    def test_grade_of_a_file(self, tmp_path, capsys):
        (tmp_path / "f.json").write_text("{}")
        assert cli.main(["grade", str(tmp_path / "f.json")]) == exits.BAD_INPUT
        assert "is a file, not a folder" in capsys.readouterr().err

    @pytest.mark.parametrize("cmd", ["run", "rollout", "validate"])
    def test_a_folder_without_task_yaml_says_so(self, cmd, tmp_path, capsys):
        argv = [cmd, str(tmp_path)] + (["--out", str(tmp_path / "out")] if cmd == "rollout" else [])
        assert cli.main(argv) == exits.BAD_INPUT
        err = capsys.readouterr().err
        assert "no task.yaml in" in err and "no tasks given" not in err

    @pytest.mark.parametrize("snap", ["snap-1", "cp-1", "cp-0000000000000000x"])
    def test_restore_refuses_what_is_no_snapshot_id_in_one_line(self, snap, capsys):
        assert cli.main(["restore", "3f2a9c1b7d0e", snap]) == exits.BAD_INPUT
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err and "--list" in err


class TestHelpExamples:
    def _epilog(self, name: str) -> str:
        return cli.build_command().commands[name].epilog or ""

    def test_the_restore_example_is_a_snapshot_id_restore_accepts(self):
        from cowork.server.state.checkpoint import SNAPSHOT_ID as SERVER_ID

        snaps = re.findall(r"cowork restore \S+ (\S+)", self._epilog("restore"))
        assert snaps and all(SNAPSHOT_ID.fullmatch(s) and SERVER_ID.match(s) for s in snaps)
        assert SNAPSHOT_ID.pattern in SERVER_ID.pattern

    def test_the_gc_example_is_the_safe_form(self):
        epilog = self._epilog("gc")
        assert "cowork gc" in epilog and "--all" not in epilog

    def test_checkpoint_lists(self):
        assert "--list" in self._epilog("checkpoint")
        assert "ps" in cli.build_command().commands


# --------------------------------------------------------------------------- Ctrl-C
def _passed(task: str) -> EpisodeResult:
    return EpisodeResult(Trajectory(task=task, agent="oracle", status="completed", turns=1, duration_s=0.1),
                         Grade(task=task, status="graded", score=1.0, passed=True, safe=True, completion=1.0,
                               checks=[]), None, [])


@pytest.fixture
def ctrl_c_after(monkeypatch):
    """Episodes that pass; the one after the first ``n`` gets a real SIGINT (Ctrl-C) and waits for it."""
    state = {"n": 0, "after": 2}

    async def fake_run_task(loaded, *args, **kwargs):
        state["n"] += 1
        if state["n"] > state["after"]:
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(30)
        return _passed(loaded.spec.id)

    monkeypatch.setattr(episode, "run_task", fake_run_task)
    return state


class TestInterrupted:
    def test_a_rollout_says_what_finished_and_the_rerun_resumes(self, ctrl_c_after, tmp_path, capsys):
        out = str(tmp_path / "runs")
        argv = ["rollout", CSV, "--group-size", "5", "--concurrency", "1", "--out", out]
        assert cli.main(argv) == exits.INTERRUPTED
        err = capsys.readouterr().err
        assert (f"cowork: interrupted: 2 of 5 episode(s) finished, saved in {out}" in err
                and "rerun the same command to run the other 3" in err), err
        ctrl_c_after["after"] = 99
        assert cli.main(argv) == exits.OK
        assert "5 (3 run now, 2 done before)" in capsys.readouterr().out

    def test_a_run_without_out_says_nothing_resumable_was_kept(self, ctrl_c_after, tmp_path, capsys):
        results = str(tmp_path / "r.jsonl")
        assert cli.main(["run", CSV, "--trials", "4", "--results", results]) == exits.INTERRUPTED
        err = capsys.readouterr().err
        assert "interrupted: 2 of 4 episode(s) finished" in err and results in err
        assert "nothing resumable was kept: rerun with --out DIR" in err
        assert len(Path(results).read_text().splitlines()) == 2

    def test_every_command_says_it_was_interrupted(self, monkeypatch, capsys):
        from cowork.cli import commands

        def stop() -> int:
            raise KeyboardInterrupt

        monkeypatch.setattr(commands, "spec_schema", stop)
        assert cli.main(["spec", "schema"]) == exits.INTERRUPTED
        assert "cowork: interrupted" in capsys.readouterr().err
        interrupted.reset()
        assert interrupted.message().startswith("interrupted")

    def test_the_notes_say_only_what_is_true(self):
        assert "nothing to keep" in interrupted.episodes(0, 4, out="runs/x")
        assert "rerun the same command for the summary" in interrupted.episodes(4, 4, out="runs/x")
        note = interrupted.episodes(1, 4, out=None, evidence="ev/")
        assert "their evidence under ev/" in note and "nothing resumable was kept" in note
        figures = types.SimpleNamespace(done=1, total=3)
        assert interrupted.specs(figures).startswith("interrupted: 1 of 3 spec(s) validated")
