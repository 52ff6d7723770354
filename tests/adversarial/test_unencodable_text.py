"""Text no file can hold as UTF-8, written by the model: a lone surrogate in a tool call's
arguments or reply, a file name that is not UTF-8. The episode is graded and saved, the
text replaced and marked, and the results folder resumes and shows in the view."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cowork.agents.openai import OpenAIPolicy
from cowork.agents.scripted import ScriptedPolicy
from cowork.episode.trajectory import Trajectory
from cowork.evidence import Evidence
from cowork.grading import Grade
from cowork.rollouts.runner import RolloutRunner
from cowork.spec.loader import load_spec
from cowork.view import export_html
from fakes import FakeChatServer

pytestmark = pytest.mark.docker

SPEC = Path(__file__).resolve().parents[2] / "specs" / "fix-csv-report"


def _answers():
    """A tool call whose arguments' JSON text holds the escape \\ud800, then a reply holding one."""
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c0", "type": "function",
         "function": {"name": "shell", "arguments": '{"command": "echo \\ud800 > lone.txt"}'}}]}
    done = {"role": "assistant", "content": "done \ud800"}  # json.dumps sends it as \ud800
    return [(200, {"choices": [{"message": call}]}), (200, {"choices": [{"message": done}]})]


async def test_a_lone_surrogate_from_the_model_is_saved_replaced_and_marked(no_leftovers, tmp_path):
    """Once: PydanticSerializationError out of save_bundle, no results.jsonl, and the same on resume."""
    out = tmp_path / "out"
    task = load_spec(SPEC)
    server = FakeChatServer(_answers())
    try:
        async with RolloutRunner(concurrency=1) as runner:
            result = await runner.rollout([task], lambda spec: OpenAIPolicy(model="m", base_url=server.url, retries=0),
                                          group_size=1, out_dir=out)
            s = result.samples[0]
            assert s.grade.status == "graded" and s.trajectory.status == "completed"
            rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
            assert len(rows) == 1 and rows[0]["grade_status"] == "graded" and rows[0]["score"] is not None
            assert rows[0]["surrogates_replaced"] is True
            bundle = out / rows[0]["evidence"]
            traj = Trajectory.model_validate_json((bundle / "trajectory.json").read_text())
            assert traj.surrogates_replaced and traj.steps[0].args == {"command": "echo \ufffd > lone.txt"}
            assert traj.messages[-1]["content"] == "done \ufffd"
            Grade.model_validate_json((bundle / "grade.json").read_text())
            ev = Evidence.load(bundle)
            assert [c["args"] for c in ev.tool_calls if c.get("tool") == "shell"] == [
                {"command": "echo \ufffd > lone.txt"}]
            again = await runner.rollout([task], lambda spec: OpenAIPolicy(model="m", base_url=server.url, retries=0),
                                         group_size=1, out_dir=out)
    finally:
        server.close()
    r = again.samples[0]
    assert r.resumed and r.grade == s.grade and r.trajectory.surrogates_replaced
    assert len((out / "results.jsonl").read_text().splitlines()) == 1
    export_html(out, tmp_path / "view.html")


async def test_a_file_name_that_is_not_utf8_shows_escaped_in_the_view(no_leftovers, tmp_path):
    """Once: UnicodeEncodeError out of export_html for the whole results folder."""
    out = tmp_path / "out"

    def policy(spec):
        return ScriptedPolicy([("shell", {"command": "touch $'\\xff' reports/$'bad\\xfe.csv'"})])

    async with RolloutRunner(concurrency=1) as runner:
        result = await runner.rollout([load_spec(SPEC)], policy, group_size=1, out_dir=out)
    assert result.samples[0].grade.status == "graded"
    html = export_html(out, tmp_path / "view.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="cowork-data">(.*?)</script>', html,
                                re.DOTALL).group(1))
    files = {f["path"]: f["change"] for f in data["episodes"][0]["view"]["workspace"]["files"]}
    # shown as printable shows them on a terminal: the byte that is not UTF-8 as \xNN
    assert files["\\xff"] == files["reports/bad\\xfe.csv"] == "added"
