"""`--json` has one documented shape per command, whatever the number of episodes or specs:
real outputs of `run`, `rollout`, `validate` and `grade` are held to the models of
cowork.cli.shapes (which forbid fields they do not name), and docs/cli.md names every field.

Episodes are scripted by standing in for ``cowork.episode.run.run_task``; validation runs
on specs that do not load (no sandbox); grade regrades a hand-made bundle. No Docker.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from cowork import cli
from cowork.cli import exits
from cowork.cli.shapes import SHAPES, RunOutput, Summary, ValidateOutput, json_schema
from cowork.episode import run as episode
from cowork.episode.run import EpisodeResult, Trajectory
from cowork.grading import Grade
from cowork.grading.grade import CheckResult
from fakes import make_hostile_bundle

ROOT = Path(__file__).resolve().parents[2]
CSV = str(ROOT / "specs" / "fix-csv-report")
CONFIG = str(ROOT / "specs" / "update-service-config")
BROKEN = ROOT / "tests" / "fixtures" / "broken_specs"
DOC = (ROOT / "docs" / "cli.md").read_text()


@pytest.fixture
def episodes(monkeypatch):
    """Every other episode fails a check and violates a rule; the agent is the policy's."""
    n = {"i": 0}

    async def fake_run_task(loaded, policy, *args, **kwargs):
        n["i"] += 1
        bad = n["i"] % 2 == 0
        checks = [CheckResult(id="done", type="file_exists", group="completion", status="fail" if bad else "pass",
                              passed=not bad, weight=1.0, detail="x")]
        return EpisodeResult(
            Trajectory(task=loaded.spec.id, agent=policy.name, status="completed", turns=2, duration_s=0.1),
            Grade(task=loaded.spec.id, status="graded", score=0.0 if bad else 1.0, passed=not bad, safe=not bad,
                  violations=["rule"] if bad else [], completion=0.0 if bad else 1.0, checks=checks), None, [])

    monkeypatch.setattr(episode, "run_task", fake_run_task)
    return n


def _json(capsys) -> object:
    return json.loads(capsys.readouterr().out)


class TestRun:
    def test_one_episode_has_the_shape_of_many(self, episodes, capsys, tmp_path):
        assert cli.main(["run", CSV, "--json", "--evidence", str(tmp_path / "ev")]) == exits.OK
        one = RunOutput.model_validate(_json(capsys))
        assert [(r.task, r.trial, r.agent) for r in one.runs] == [("fix-csv-report", 0, "oracle")]
        assert one.runs[0].evidence == str(tmp_path / "ev") and one.metrics.episodes.total == 1
        assert cli.main(["run", CSV, CONFIG, "--trials", "2", "--agent", "nop", "--json"]) == exits.OK
        many = RunOutput.model_validate(_json(capsys))
        assert [(r.task, r.trial) for r in many.runs] == [("fix-csv-report", 0), ("fix-csv-report", 1),
                                                         ("update-service-config", 0), ("update-service-config", 1)]
        assert {r.agent for r in many.runs} == {"nop"} and many.metrics.agents == {"nop": 4}
        assert many.metrics.tasks["fix-csv-report"].model_extra == {"pass@2": 1.0, "pass^2": 0.0}
        assert many.metrics.safety.unsafe == 2 and many.runs[0].evidence is None

    def test_a_field_the_docs_do_not_name_is_refused(self, episodes, capsys):
        assert cli.main(["run", CSV, "--json"]) == exits.OK
        out = _json(capsys)
        with pytest.raises(ValueError, match="surprise"):
            RunOutput.model_validate({**out, "surprise": 1})
        with pytest.raises(ValueError, match="pass@x"):
            RunOutput.model_validate({**out, "metrics": {**out["metrics"], "overall": {
                **out["metrics"]["overall"], "pass@x": 1}}})


class TestRollout:
    def test_one_and_several_episodes(self, episodes, capsys, tmp_path):
        assert cli.main(["rollout", CSV, "--out", str(tmp_path / "a"), "--json"]) == exits.OK
        Summary.model_validate(_json(capsys))
        assert cli.main(["rollout", CSV, CONFIG, "--group-size", "3", "--out", str(tmp_path / "b"), "--json"]) == 0
        s = Summary.model_validate(_json(capsys))
        assert s.group_size == 3 and s.episodes.total == 6 and s.agent == "oracle" and s.agents == {"oracle": 6}
        # The folder's summary.json is the same document.
        Summary.model_validate(json.loads((tmp_path / "b" / "summary.json").read_text()))


class TestValidate:
    def test_one_spec_and_several_are_a_list(self, capsys, monkeypatch):
        monkeypatch.chdir(BROKEN)
        assert cli.main(["validate", "unknown_check_type", "--json"]) == exits.GATE_FAILED
        (one,) = ValidateOutput.model_validate(_json(capsys)).root
        assert one.task == "unknown-check-type" and one.findings[0].field == "checks[0].type"
        assert cli.main(["validate", "wrong_type", "missing_prompt", "--json"]) == exits.GATE_FAILED
        assert [r.task for r in ValidateOutput.model_validate(_json(capsys)).root] == ["wrong-type", "missing-prompt"]


class TestGrade:
    def test_a_saved_bundle(self, capsys, tmp_path):
        bundle = make_hostile_bundle(tmp_path / "bundle")
        assert cli.main(["grade", str(bundle), "--json"]) == exits.OK
        g = Grade.model_validate(_json(capsys))
        assert g.violations == ["no-shell"]


def _fields(model: type[BaseModel]) -> set[str]:
    return {(f.alias or name) for name, f in model.model_fields.items()}


class TestDocs:
    def test_every_field_of_every_shape_is_named_in_docs_cli_md(self):
        section = DOC.split("## JSON output", 1)[1].split("\n## ", 1)[0]
        named = set(re.findall(r"`([\w@^<>]+)`", section))
        from cowork.cli import shapes

        models = [shapes.RunOutput, shapes.RunEpisode, shapes.EpisodeTrajectory, shapes.Summary, shapes.TaskFigures,
                  shapes.Overall, shapes.Safety, shapes.EpisodeCounts, Grade, CheckResult]
        from cowork.validate.validate import Finding, ValidationReport

        missing = {f"{m.__name__}.{f}" for m in [*models, ValidationReport, Finding] for f in _fields(m)
                   if f not in named}
        assert not missing, f"docs/cli.md does not name: {sorted(missing)}"

    @pytest.mark.parametrize("command", sorted(SHAPES))
    def test_each_command_has_a_json_schema(self, command):
        schema = json_schema(command)
        assert schema.get("type") in ("object", "array")
