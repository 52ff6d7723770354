"""The Inspect AI integration without a daemon: the plugin entry point, the task built from
specs, the stderr split, the trace the grader reads, and the metrics."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai", reason="the inspect extra is not installed (pip install 'cowork-runtime[inspect]')")

from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, ChatMessageUser
from inspect_ai.scorer import SampleScore, Score
from inspect_ai.tool import ToolCall

from cowork.errors import SpecError
from cowork.evidence import Evidence
from cowork.grading.checks import assistant_texts
from cowork.integrations import inspect as plugin
from cowork.integrations.inspect.sandbox import _spec_path, _split_marked
from cowork.integrations.inspect.tools import _inline_refs

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess:
    # Run outside the checkout: a stale ``*.egg-info`` left at its root by an old build would be
    # read first (``-c`` puts the working folder on sys.path) and hide the installed entry points.
    return subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                          timeout=120, cwd=cwd)


class TestPluginRegistration:
    def test_inspect_finds_the_cowork_sandbox_through_the_entry_point_alone(self, tmp_path):
        r = _run(
            "import sys\n"
            "from inspect_ai._util.entrypoints import ensure_entry_points\n"
            "from inspect_ai.util._sandbox.registry import registry_find_sandboxenv\n"
            "assert 'cowork.integrations.inspect' not in sys.modules\n"
            "ensure_entry_points()\n"
            "print(registry_find_sandboxenv('cowork').__qualname__)\n", tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "CoworkSandboxEnvironment"

    def test_without_the_extra_the_import_says_how_to_install_it(self, tmp_path):
        r = _run("import sys; sys.modules['inspect_ai'] = None\nimport cowork.integrations.inspect\n", tmp_path)
        assert r.returncode != 0
        assert "pip install 'cowork-runtime[inspect]'" in r.stderr


class TestCoworkTask:
    def test_one_sample_per_single_turn_spec_in_its_own_cowork_sandbox(self, caplog):
        specs = [ROOT / "specs" / "fix-csv-report", ROOT / "specs" / "mt-clarify-meeting-slot"]
        task = plugin.cowork_task(specs)
        [sample] = list(task.dataset)
        assert sample.id == "fix-csv-report"
        assert [m.role for m in sample.input] == ["system", "user"]
        assert sample.input[1].text.startswith("Finance says our Q3 sales report")
        assert sample.sandbox.type == "cowork"
        assert sample.sandbox.config == str((ROOT / "specs" / "fix-csv-report").resolve())
        assert sample.metadata[plugin.SPEC_KEY] == sample.sandbox.config
        assert task.message_limit == 2 + 2 * 20  # fix-csv-report's max_turns
        assert "mt-clarify-meeting-slot is multi-turn" in caplog.text

    def test_only_multi_turn_specs_is_an_error(self):
        with pytest.raises(SpecError, match="no single-turn cowork spec"):
            plugin.cowork_task(ROOT / "specs" / "mt-clarify-meeting-slot")

    def test_a_sandbox_without_a_spec_says_where_to_name_one(self):
        assert _spec_path("specs/a", {plugin.SPEC_KEY: "specs/b"}) == "specs/a"
        assert _spec_path(None, {plugin.SPEC_KEY: "specs/b"}) == "specs/b"
        with pytest.raises(SpecError, match="cowork_spec"):
            _spec_path(None, {})


class TestStderrSplit:
    MARK = "<<m>>"

    @pytest.mark.parametrize("output, stdout, stderr", [
        ("a\n<<m>>b\nc\n", "a\nc\n", "b\n"),
        ("ab<<m>>err\ncd\n", "abcd\n", "err\n"),  # a stderr line cut into a stdout line
        ("no newline", "no newline", ""),
        ("", "", ""),
        ("keeps\r\x1ecarriage\n", "keeps\r\x1ecarriage\n", ""),
        ("<<m>>only<<m>>err", "", "onlyerr"),
    ])
    def test_split(self, output, stdout, stderr):
        assert _split_marked(output, self.MARK) == (stdout, stderr)


class TestTraceAndMetrics:
    def test_the_agents_reply_reaches_the_answer_checks(self):
        messages = [
            ChatMessageUser(content="What is 6 x 7?"),
            ChatMessageAssistant(content="", tool_calls=[ToolCall(id="c1", function="shell",
                                                                  arguments={"command": "echo $((6*7))"})]),
            ChatMessageTool(content="42", tool_call_id="c1", function="shell"),
            ChatMessageAssistant(content="The answer is 42."),
        ]
        trace = plugin.inspect_trace("t", messages, "mockllm/model")
        assert trace["source"] == "inspect" and trace["turns"] == 2
        assert trace["messages"][1]["tool_calls"][0]["function"]["name"] == "shell"
        ev = Evidence(audit_text="", audit_count=0, workspace_tar=b"", initial={}, trace=trace)
        assert assistant_texts(ev) == ["The answer is 42."]

    def test_metrics_average_what_was_measured(self):
        def sample(completion, safety, robustness):
            return SampleScore(score=Score(value={"completion": completion, "safety": safety,
                                                  "robustness": robustness, "score": 0.0, "passed": 0.0}))

        scores = [sample(1.0, 1.0, float("nan")), sample(0.5, 0.0, float("nan"))]
        assert plugin.completion()(scores) == 0.75
        assert plugin.safety()(scores) == 0.5
        assert math.isnan(plugin.robustness()(scores))
        assert plugin.robustness()([*scores, sample(0.0, 1.0, 0.25)]) == 0.25


def test_tool_schemas_keep_their_definitions():
    schema = {"type": "object", "required": ["items"],
              "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
              "$defs": {"Item": {"type": "object", "properties": {"name": {"type": "string"},
                                                                  "child": {"$ref": "#/$defs/Item"}}}}}
    inlined = _inline_refs(schema)
    item = inlined["properties"]["items"]["items"]
    assert "$defs" not in inlined and item["properties"]["name"] == {"type": "string"}
    assert item["properties"]["child"] == {"type": "object"}  # a definition that refers to itself stops
