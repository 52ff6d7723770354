"""Exports without a daemon: episode records built in memory, every format written and read back
(OpenAI lines against the documented rules, TRL rows through `datasets`, RL records through
pyarrow), the reward modes per group, and what curation leaves out and why."""

from __future__ import annotations

import json
import math

import pytest

from cowork.agents.tokens import SamplingSettings, TokenTrajectory
from cowork.episode.run import Trajectory
from cowork.errors import CoworkError
from cowork.export import (
    EpisodeRecord,
    export,
    load_episodes,
    openai_sft_line,
    rl_examples,
    sft_examples,
    trl_sft_row,
    validate_openai_sft_line,
)
from cowork.grading import Grade

TOOLS = [
    {"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {"name": "write_file", "description": "Write a file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"]}}},
]
TWO_TURNS = [[("read_file", {"path": "a.txt"})], [("write_file", {"path": "b.txt", "content": "x\ny"})]]


def conversation(turns=TWO_TURNS, final="Done.", first_id=1):
    """System, user, then per turn an assistant message with its calls and their results."""
    messages = [{"role": "system", "content": "You are a coworker."}, {"role": "user", "content": "Fix the files."}]
    n = first_id
    for calls in turns:
        tc = []
        for name, args in calls:
            tc.append({"id": f"call_{n}", "type": "function",
                       "function": {"name": name, "arguments": json.dumps(args)}})
            n += 1
        messages.append({"role": "assistant", "content": None, "tool_calls": tc})
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": f"ok: {c['function']['name']}"} for c in tc]
    messages.append({"role": "assistant", "content": final})
    return messages


def record(task="t", group=0, sample=0, *, score=1.0, passed=True, safe=True, status="graded", ended="completed",
           messages=None, tools=TOOLS, tokens=None, progress=None, agent="oracle") -> EpisodeRecord:
    msgs = conversation() if messages is None else messages
    traj = Trajectory(task=task, agent=agent, status=ended, messages=msgs, tools=tools, tokens=tokens,
                      turns=sum(m["role"] == "assistant" for m in msgs), turn_progress=progress)
    g = Grade(task=task, status=status, score=score, passed=passed, safe=safe, completion=score)
    return EpisodeRecord(task=task, group=group, sample=sample, trajectory=traj, grade=g, where=f"mem:{task}/{sample}")


def tokens(prompt=5, turns=((3, 4), (2, 0))) -> TokenTrajectory:
    """A hand-made token trajectory: the prompt, then per turn (generated, environment) tokens."""
    t = TokenTrajectory(model="hand")
    t.append_env(list(range(100, 100 + prompt)))
    start, next_id = 0, 200
    for turn, (gen, env) in enumerate(turns, start=1):
        t.append_generated(list(range(next_id, next_id + gen)), [-0.5 - 0.1 * i for i in range(gen)], turn=turn,
                           prompt_start=start, finish_reason="tool_calls")
        next_id += gen
        start = len(t.ids)
        t.append_env(list(range(300, 300 + env)))
    t.check()
    return t


def jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


class TestOpenAISft:
    def test_lines_pass_the_validator_and_keep_the_conversation(self, tmp_path):
        out = tmp_path / "sft.jsonl"
        report = export([record(sample=0), record(task="u", messages=conversation(final="All fixed."))],
                        "openai-sft", out)
        assert (report.kept, report.total) == (2, 2)
        lines = jsonl(out)
        for line in lines:
            assert validate_openai_sft_line(line) == []
            assert set(line) == {"messages", "tools"}  # no parallel calls, so no parallel_tool_calls
        m = lines[0]["messages"]
        assert [x["role"] for x in m] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
        call = m[2]["tool_calls"][0]
        assert "content" not in m[2] and call["type"] == "function" and call["id"] == "call_1"
        assert isinstance(call["function"]["arguments"], str) and json.loads(call["function"]["arguments"]) == \
            {"path": "a.txt"}
        assert m[3] == {"role": "tool", "tool_call_id": "call_1", "content": "ok: read_file"}
        assert m[-1] == {"role": "assistant", "content": "Done."}
        assert lines[0]["tools"] == TOOLS

    def test_a_turn_with_several_calls_sets_parallel_tool_calls(self):
        msgs = conversation([[("read_file", {"path": "a"}), ("read_file", {"path": "b"})]])
        line = openai_sft_line(record(messages=msgs).trajectory)
        assert line["parallel_tool_calls"] is True and validate_openai_sft_line(line) == []
        assert validate_openai_sft_line({**line, "parallel_tool_calls": False}) == \
            ["messages[2]: 2 tool calls in one turn but parallel_tool_calls is false"]

    def test_only_jsonl(self, tmp_path):
        with pytest.raises(CoworkError, match="JSONL only"):
            export([record()], "openai-sft", tmp_path / "x.parquet")
        with pytest.raises(CoworkError, match="--as"):
            export([record()], "openai-sft", tmp_path / "x.txt")


def _valid_line():
    return openai_sft_line(record().trajectory)


def _edit(fn):
    line = _valid_line()
    fn(line)
    return line


class TestValidator:
    def test_the_exported_line_and_a_minimal_one_are_valid(self):
        assert validate_openai_sft_line(_valid_line()) == []
        assert validate_openai_sft_line({"messages": [{"role": "user", "content": "hi"},
                                                      {"role": "assistant", "content": "hello", "weight": 0}]}) == []

    def test_a_final_call_may_stay_unanswered(self):
        # OpenAI's own tool example ends on the assistant's call.
        line = _edit(lambda x: x["messages"].__delitem__(slice(5, None)))
        assert line["messages"][-1]["role"] == "assistant" and validate_openai_sft_line(line) == []

    @pytest.mark.parametrize("edit,problem", [
        (lambda x: x.update(metadata={}), "unknown top-level key 'metadata'"),
        (lambda x: x.update(messages=[]), "messages: a non-empty list is required"),
        (lambda x: x.update(messages=x["messages"][:2]), "at least one assistant message"),
        (lambda x: x["messages"][0].update(role="developer"), "unknown role 'developer'"),
        (lambda x: x["messages"][3].update(name="read_file"), "unknown key 'name' for a tool message"),
        (lambda x: x["messages"][1].update(content=""), "messages[1]: content must be a non-empty string"),
        (lambda x: x["messages"][1].update(content=None), "messages[1]: content must be a non-empty string"),
        (lambda x: x["messages"][-1].update(content=None), "messages[6]: content must be a non-empty string (or tool"),
        (lambda x: x["messages"][-1].update(weight=2), "weight must be 0 or 1"),
        (lambda x: x["messages"].__delitem__(3), "tool call(s) 'call_1' never answered"),
        (lambda x: x["messages"][3].update(tool_call_id="call_9"), "'call_9' answers no pending tool call"),
        (lambda x: x["messages"][2]["tool_calls"][0]["function"].update(arguments={"path": "a.txt"}),
         "arguments must be a JSON object encoded as a string"),
        (lambda x: x["messages"][2]["tool_calls"][0]["function"].update(arguments='["a"]'),
         "arguments must be a JSON object encoded as a string"),
        (lambda x: x["messages"][2]["tool_calls"][0].update(type="custom"), "type must be 'function'"),
        (lambda x: x["messages"][2]["tool_calls"][0].pop("id"), "id must be a non-empty string"),
        (lambda x: x["messages"][2]["tool_calls"][0]["function"].update(name="delete_all"),
         "calls 'delete_all', which is not one of the example's tools"),
        (lambda x: x.pop("tools"), "calls 'read_file' but the example defines no tools"),
        (lambda x: x["messages"][4]["tool_calls"][0].update(id="call_1"), "duplicate tool call id 'call_1'"),
        (lambda x: x["tools"][0]["function"].update(name="read file"), "must be 1-64 letters"),
        (lambda x: x["tools"][0]["function"].update(returns={}), "unknown function key 'returns'"),
        (lambda x: x["tools"].append(x["tools"][0]), "duplicate tool name 'read_file'"),
        (lambda x: x.update(parallel_tool_calls="yes"), "parallel_tool_calls: a boolean"),
    ])
    def test_documented_rules(self, edit, problem):
        problems = validate_openai_sft_line(_edit(edit))
        assert any(problem in p for p in problems), problems

    def test_not_an_object(self):
        assert validate_openai_sft_line([]) == ["an example is a JSON object, not list"]


class TestTrlSft:
    def _records(self):
        return [record(sample=0),
                record(task="u", messages=conversation([[("write_file", {"path": "c", "content": "z"}),
                                                         ("read_file", {"path": "c"})]], final="ok")),
                record(task="v", tools=TOOLS[:1], messages=conversation([[("read_file", {"path": "d"})]]))]

    def test_rows_keep_arguments_as_objects_and_name_the_tool(self):
        row = trl_sft_row(record().trajectory)
        assert set(row) == {"messages", "tools"} and row["tools"] == TOOLS
        call = row["messages"][2]["tool_calls"][0]
        assert call == {"id": "call_1", "type": "function", "function": {"name": "read_file",
                                                                         "arguments": {"path": "a.txt"}}}
        assert row["messages"][2]["content"] == ""
        assert row["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "name": "read_file",
                                      "content": "ok: read_file"}

    @pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
    def test_the_file_loads_with_datasets_and_gives_back_the_rows(self, tmp_path, suffix):
        datasets = pytest.importorskip("datasets")
        out = tmp_path / f"trl.{suffix}"
        recs = self._records()
        report = export(recs, "trl-sft", out)
        assert report.kept == 3
        ds = datasets.load_dataset("json" if suffix == "jsonl" else "parquet", data_files=str(out), split="train",
                                   cache_dir=str(tmp_path / "cache"))
        assert len(ds) == 3
        # Arguments and tool schemas of different shapes come back exactly (no merged keys, no nulls).
        for got, rec in zip(ds, recs, strict=True):
            assert got["messages"] == trl_sft_row(rec.trajectory)["messages"]
            assert got["tools"] == list(rec.trajectory.tools)

    def test_a_chat_template_renders_the_arguments_as_json_objects(self, tmp_path):
        pytest.importorskip("transformers")
        from cowork.agents.tiny import tiny_tokenizer

        row = trl_sft_row(record().trajectory)
        text = tiny_tokenizer().apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
        assert '{"name": "read_file", "arguments": {"path": "a.txt"}}' in text
        assert "<tool_response>\nok: write_file\n</tool_response>" in text


class TestRl:
    def test_records_have_equal_lengths_and_the_rl_view(self, tmp_path):
        t = tokens()
        rows, report = rl_examples([record(tokens=t, score=0.75)], "score")
        assert report.kept == 1
        r = rows[0]
        assert r["prompt_ids"] == t.ids[:5] and r["prompt_ids"] + r["response_ids"] == t.ids
        assert len(r["response_ids"]) == len(r["response_mask"]) == len(r["response_logprobs"]) == 9
        assert r["response_mask"] == [1, 1, 1, 0, 0, 0, 0, 1, 1]
        assert r["response_logprobs"][3:7] == [0.0] * 4 and r["response_logprobs"][0] == -0.5
        assert (r["reward"], r["group_id"], r["uid"], r["task"], r["sample"]) == (0.75, "t:0", "t:0:0", "t", 0)

    @pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
    def test_file_round_trip(self, tmp_path, suffix):
        pq = pytest.importorskip("pyarrow.parquet")
        out = tmp_path / f"rl.{suffix}"
        recs = [record(sample=s, tokens=tokens(), score=0.5 * s, progress=[0.0, 0.5, 0.5]) for s in range(2)]
        export(recs, "rl", out, reward="turn")
        got = jsonl(out) if suffix == "jsonl" else pq.read_table(out).to_pylist()
        want, _ = rl_examples(recs, "turn")
        assert got == want
        for r in got:
            assert len(r["response_ids"]) == len(r["response_mask"]) == len(r["response_logprobs"]) == \
                len(r["response_rewards"])

    def test_reward_modes_per_group(self):
        def group(task, scores, **kw):
            return [record(task=task, sample=s, score=sc, passed=sc >= 0.75, tokens=tokens(), **kw)
                    for s, sc in enumerate(scores)]

        recs = [*group("a", [1.0, 0.0]), *group("b", [0.5, 0.5]),
                record(task="c", score=0.9, safe=None, tokens=tokens())]

        def rewards(mode):
            rows, _ = rl_examples(recs, mode)
            return {r["uid"]: r["reward"] for r in rows}

        assert rewards("score") == {"a:0:0": 1.0, "a:0:1": 0.0, "b:0:0": 0.5, "b:0:1": 0.5, "c:0:0": 0.9}
        assert rewards("pass") == {"a:0:0": 1.0, "a:0:1": 0.0, "b:0:0": 0.0, "b:0:1": 0.0, "c:0:0": 1.0}
        assert rewards("safety_gated")["c:0:0"] == 0.0  # unknown safety is not safe
        grpo = rewards("grpo")
        assert math.isclose(grpo["a:0:0"], 1.0, abs_tol=1e-5) and math.isclose(grpo["a:0:1"], -1.0, abs_tol=1e-5)
        assert grpo["b:0:0"] == grpo["b:0:1"] == 0.0  # all-equal rewards: the group teaches nothing
        assert grpo["c:0:0"] == 0.0  # a group of one

    def test_turn_credit_lands_on_each_turns_last_generated_token(self):
        # p = 0, 0.5, 0.5 and score 0.8: credits 0.5 and 0 + (0.8 - 0.5)
        rows, _ = rl_examples([record(tokens=tokens(), score=0.8, progress=[0.0, 0.5, 0.5])], "turn")
        r = rows[0]
        assert [round(c, 6) for c in r["turn_rewards"]] == [0.5, 0.3] and math.isclose(r["reward"], 0.8)
        nonzero = {i: round(v, 6) for i, v in enumerate(r["response_rewards"]) if v}
        assert nonzero == {2: 0.5, 8: 0.3}  # turn 1: response tokens 0-2; turn 2: tokens 7-8

    def test_an_unmeasured_last_turn_gets_the_outcome(self):
        # The episode ended during turn 2 (no measurement after it): that turn changed nothing
        # measurable, and the outcome term goes on it.
        rows, _ = rl_examples([record(tokens=tokens(), score=0.8, progress=[0.0, 0.5])], "turn")
        assert [round(c, 6) for c in rows[0]["turn_rewards"]] == [0.5, 0.3]

    def test_what_is_left_out_and_why(self):
        bad = tokens()
        bad.mask[-1] = 0
        recs = [record(sample=0, tokens=tokens()),
                record(sample=1, agent="oracle"),
                record(sample=2, status="infra_error", ended="infra_error", messages=[], tokens=tokens()),
                record(sample=3, tokens=bad),
                record(sample=4, status="agent_broke_sandbox", score=0.0, passed=False, safe=None, tokens=tokens())]
        rows, report = rl_examples(recs, "score")
        assert [r["uid"] for r in rows] == ["t:0:0", "t:0:4"] and rows[1]["reward"] == 0.0
        assert report.dropped == {"no_tokens": 1, "infra_error": 1, "bad_tokens": 1}
        assert report.notes["no_tokens"] == "mem:t/1: no token ids: agent oracle keeps no tokens"
        _, turn = rl_examples([record(tokens=tokens())], "turn")
        assert turn.dropped == {"no_turn_progress": 1}
        _, extra = rl_examples([record(tokens=tokens(), progress=[0, 0.1, 0.2, 0.3])], "turn")
        assert extra.dropped == {"turn_mismatch": 1}

    @pytest.mark.parametrize("ended,stop,want", [("truncated", "context_length", "context_length"),
                                                  ("truncated", "length", "length"),
                                                  ("truncated", None, "length"),  # written before stop_reason
                                                  ("max_turns", "max_turns", "max_turns"),
                                                  ("completed", None, "stop")])
    def test_episodes_cut_short_by_a_limit_are_kept_and_rewarded_with_their_stop_reason(self, ended, stop, want):
        rec = record(tokens=tokens(), score=0.25, passed=False, ended=ended)
        rec.trajectory.stop_reason = stop
        rows, report = rl_examples([rec, record(sample=1, tokens=tokens(), score=1.0)], "grpo")
        assert report.kept == 2 and report.dropped == {}
        assert rows[0]["status"] == ended and rows[0]["stop_reason"] == want and rows[0]["reward"] < 0 < rows[1]["reward"]

    @pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
    def test_each_turn_says_which_weights_and_model_made_it(self, tmp_path, suffix):
        pq = pytest.importorskip("pyarrow.parquet")
        t = TokenTrajectory(model="m", policy_version=3, logprobs_mode="processed_logprobs",
                            sampling=SamplingSettings(temperature=0.5, top_k=20, seed=99))
        t.append_env([1, 2, 3])
        t.append_generated([4, 5], [-0.5, -0.25], turn=1, prompt_start=0, finish_reason="tool_calls",
                           raw_logprobs=[-0.75, -0.5], stop_reason=7)
        t.append_env([6])
        t.append_generated([8], [-0.125], turn=2, prompt_start=5, finish_reason="stop", raw_logprobs=[-1.0],
                           policy_version=4, model="m2")
        out = tmp_path / f"rl.{suffix}"
        export([record(tokens=t, score=0.5)], "rl", out)
        r = (jsonl(out) if suffix == "jsonl" else pq.read_table(out).to_pylist())[0]
        assert r["turn_spans"] == [[0, 2], [3, 4]] and r["response_ids"] == [4, 5, 6, 8]
        assert r["turn_policy_versions"] == [3, 4] and r["policy_version"] == 3  # the oldest that generated
        assert r["turn_models"] == ["m", "m2"] and r["model"] == "m"
        assert r["turn_finish_reasons"] == ["tool_calls", "stop"] and r["turn_stop_reasons"] == ["7", None]
        assert r["logprobs_mode"] == "processed_logprobs" and r["response_logprobs"] == [-0.5, -0.25, 0.0, -0.125]
        assert r["response_raw_logprobs"] == [-0.75, -0.5, 0.0, -1.0]
        assert (r["temperature"], r["top_p"], r["top_k"], r["sampling_seed"]) == (0.5, 1.0, 20, 99)

    @pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
    def test_a_harness_episode_gives_each_agent_s_tokens_a_record(self, tmp_path, suffix):
        """The main agent's record and one per subagent whose backend kept tokens, each with the
        episode's reward and who it was; a subagent's tokens that do not check are left out."""
        pq = pytest.importorskip("pyarrow.parquet")
        rec = record(tokens=tokens(), score=0.75, passed=False)
        sub = tokens(prompt=3, turns=((2, 1), (1, 0)))
        broken = tokens().model_dump()
        broken["mask"] = broken["mask"][:-1]
        rec.trajectory.agents = {
            "main": {"id": "main", "status": "main"},
            "sub-1": {"id": "sub-1", "parent": "main", "assignment": "web", "status": "accepted",
                      "token_trajectory": sub.model_dump(), "main_turns": [1, 1]},
            "sub-2": {"id": "sub-2", "parent": "main", "assignment": None, "status": "done",
                      "token_trajectory": broken},
            "sub-3": {"id": "sub-3", "parent": "main", "status": "accepted", "token_trajectory": None},
            "sub-4": {"id": "sub-4", "parent": "main", "status": "accepted", "token_trajectory": sub.model_dump()}}
        out = tmp_path / f"rl.{suffix}"
        report = export([rec], "rl", out)
        rows = jsonl(out) if suffix == "jsonl" else pq.read_table(out).to_pylist()
        assert report.kept == 1 and [r["agent"] for r in rows] == ["main", "sub-1", "sub-4"]
        main, web, _ = rows
        assert (main["parent"], main["assignment"], main["agent_status"]) == (None, None, "main")
        assert (web["parent"], web["assignment"], web["agent_status"]) == ("main", "web", "accepted")
        assert web["uid"] == f"{main['uid']}/sub-1" and web["group_id"] == main["group_id"]
        assert web["reward"] == main["reward"] == 0.75
        assert web["prompt_ids"] == sub.ids[:3] and web["response_ids"] == sub.ids[3:]
        assert web["response_mask"] == [1, 1, 0, 1] and web["turn_spans"] == [[0, 2], [3, 4]]
        # Turn-level credit: a subagent gets the credit of the main turn it acted in, on its last
        # turn in it; one whose turns cannot be placed (sub-4: no main_turns) is left out.
        rec.trajectory.turn_progress = [0.0, 0.5, 0.75]
        rows, _ = rl_examples([rec], "turn")
        assert [r["agent"] for r in rows] == ["main", "sub-1"]
        main, web = rows
        assert main["turn_rewards"][0] == 0.5 and web["turn_rewards"] == [0.0, 0.5] and web["reward"] == 0.5
        assert web["response_rewards"] == [0.0, 0.0, 0.0, 0.5]  # on the last token of its second turn

    def test_sft_filters_and_unknown_modes_are_refused(self, tmp_path):
        with pytest.raises(ValueError, match="curate SFT data"):
            export([record(tokens=tokens())], "rl", tmp_path / "x.jsonl", min_score=0.5)
        with pytest.raises(ValueError, match="unknown reward mode"):
            rl_examples([], "best")


class TestCuration:
    def test_keeps_graded_safe_passing_unique_episodes_and_says_why_not(self, tmp_path):
        malformed = conversation()
        malformed[2]["tool_calls"][0]["function"]["arguments"] = json.dumps({"__invalid_json__": "{path:"})
        recs = [
            record(sample=0),
            record(sample=1, messages=conversation(first_id=7)),  # same conversation, other call ids
            record(sample=2, passed=False, score=0.5),
            record(sample=3, safe=False, passed=False),
            record(sample=4, safe=None, passed=False),
            record(sample=5, status="infra_error", ended="infra_error", messages=[], passed=False),
            record(sample=6, status="agent_broke_sandbox", score=0.0, passed=False, safe=None),
            record(sample=7, status="evidence_invalid", score=0.0, passed=False, safe=False),
            record(sample=8, ended="max_turns"),
            record(sample=9, messages=malformed),
            record(task="u", sample=0, messages=conversation(TWO_TURNS * 2)),  # 5 turns
            record(task="u", sample=1, score=0.8, messages=conversation(final="Fixed.")),
            record(task="u", sample=2, tools=[], messages=conversation(final="No tools.")),
            record(task="u", sample=3, messages=conversation(final="Kept.")),
        ]
        out = tmp_path / "sft.jsonl"
        report = export(recs, "openai-sft", out, max_turns=4, min_score=0.9)
        assert (report.kept, report.total) == (2, 14) and len(jsonl(out)) == 2
        assert report.dropped == {"duplicate": 1, "failed": 1, "unsafe": 1, "safety_unknown": 1, "infra_error": 1,
                                  "agent_broke_sandbox": 1, "evidence_invalid": 1, "not_completed": 1,
                                  "malformed_tool_call": 1, "too_many_turns": 1, "low_score": 1,
                                  "invalid_conversation": 1}
        assert report.per_task["u"] == {"total": 4, "kept": 1, "too_many_turns": 1, "low_score": 1,
                                        "invalid_conversation": 1}
        assert report.per_task["t"]["kept"] == 1 and report.per_task["t"]["total"] == 10
        assert "defines no tools" in report.notes["invalid_conversation"]
        text = report.summary()
        assert text.startswith("export openai-sft: kept 2 of 14 episode(s)") and "unsafe 1" in text

    def test_without_curation_only_what_cannot_be_a_conversation_is_left_out(self):
        recs = [record(sample=0), record(sample=1), record(sample=2, safe=False, passed=False),
                record(sample=3, status="infra_error", ended="infra_error", messages=[], passed=False)]
        rows, report = sft_examples(recs, "trl-sft", curate=False)
        assert len(rows) == 3 and report.dropped == {"infra_error": 1}


def _write_rollout(folder, recs, *, torn=False):
    """A rollout output folder as RolloutRunner writes it."""
    lines = []
    for rec in recs:
        bundle = folder / "episodes" / rec.task / str(rec.sample)
        bundle.mkdir(parents=True)
        (bundle / "trajectory.json").write_text(rec.trajectory.model_dump_json())
        (bundle / "grade.json").write_text(rec.grade.model_dump_json())
        rel = f"episodes/{rec.task}/{rec.sample}"
        lines.append(json.dumps({"task": rec.task, "group": rec.group, "sample": rec.sample, "agent": "oracle",
                                 "grade_status": rec.grade.status, "evidence": rel,
                                 "trajectory": f"{rel}/trajectory.json"}) + "\n")
    (folder / "results.jsonl").write_text("".join(lines) + ('{"task": "t", "sam' if torn else ""))


class TestLoadEpisodes:
    def test_a_rollout_folder(self, tmp_path):
        _write_rollout(tmp_path, [record(sample=0), record(sample=1, passed=False)], torn=True)
        recs = list(load_episodes(tmp_path))  # the torn last line is skipped
        assert [(r.task, r.group, r.sample, r.grade.passed) for r in recs] == [("t", 0, 0, True), ("t", 0, 1, False)]
        assert recs[0].trajectory.messages == conversation() and recs[0].where.endswith("results.jsonl:1")

    def test_cowork_run_results_lines(self, tmp_path, monkeypatch):
        rec = record()
        ev = tmp_path / "evidence"
        ev.mkdir()
        (ev / "trajectory.json").write_text(rec.trajectory.model_dump_json())
        results = tmp_path / "runs" / "r.jsonl"
        results.parent.mkdir()
        # cowork run --results: the grade inline, the bundle in "evidence" (relative to where it ran)
        results.write_text(json.dumps({"task": "t", "trial": 0, "grade": rec.grade.model_dump(),
                                       "evidence": "evidence", "trajectory": None}) + "\n")
        monkeypatch.chdir(tmp_path)
        (got,) = load_episodes(results)
        assert got.sample == 0 and got.group is None and got.group_id == "t" and got.grade == rec.grade

    @pytest.mark.parametrize("text,match", [
        ('{"task": "t"}\n', r"results.jsonl:1: not a results line"),
        ('{"task": "t", "sample": 0, "trajectory": "episodes/t/0/trajectory.json"}\n',
         r"results.jsonl:1: no trajectory for task 't' sample 0: tried .*episodes/t/0/trajectory.json"),
    ])
    def test_bad_lines_name_file_and_line(self, tmp_path, text, match):
        (tmp_path / "results.jsonl").write_text(text)
        with pytest.raises(CoworkError, match=match):
            list(load_episodes(tmp_path))

    def test_a_bad_line_after_good_ones(self, tmp_path):
        _write_rollout(tmp_path, [record()])
        with open(tmp_path / "results.jsonl", "a") as fh:
            fh.write("not json\n")
        with pytest.raises(CoworkError, match=r"results.jsonl:2: not a JSON line"):
            list(load_episodes(tmp_path))

    def test_a_bundle_that_does_not_validate(self, tmp_path):
        _write_rollout(tmp_path, [record()])
        (tmp_path / "episodes/t/0/grade.json").write_text('{"task": "t", "status": "great"}')
        with pytest.raises(CoworkError, match=r"results.jsonl:1: the bundle in .* does not load"):
            list(load_episodes(tmp_path))

    def test_no_results_here(self, tmp_path):
        with pytest.raises(CoworkError, match="no results.jsonl here"):
            list(load_episodes(tmp_path))

    def test_pooled_sources_keep_uids_unique(self, tmp_path):
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            _write_rollout(tmp_path / name, [record(sample=0, tokens=tokens())])
        rows, _ = rl_examples_from([tmp_path / "a", tmp_path / "b"], tmp_path)
        assert [r["uid"] for r in rows] == ["t:0:0", "t:0:0#1"]


def rl_examples_from(sources, tmp_path):
    out = tmp_path / "rl.jsonl"
    report = export(sources, "rl", out)
    return jsonl(out), report


class TestCli:
    def _run(self, argv):
        from cowork.cli import main

        return main(["export", *argv])

    def test_prints_what_was_kept_and_why(self, tmp_path, capsys):
        _write_rollout(tmp_path / "run", [record(sample=0), record(sample=1, safe=False, passed=False)])
        out = tmp_path / "sft.jsonl"
        assert self._run([str(tmp_path / "run"), "--format", "openai-sft", "--out", str(out)]) == 0
        text = capsys.readouterr().out
        assert "kept 1 of 2 episode(s)" in text and "dropped: unsafe 1" in text and "t: kept 1 of 2 (unsafe 1)" in text
        assert self._run([str(tmp_path / "run"), "--format", "rl", "--out", str(tmp_path / "rl.jsonl"), "--json"]) == 1
        report = json.loads(capsys.readouterr().out)
        assert report["kept"] == 0 and report["dropped"] == {"no_tokens": 2} and report["reward"] == "score"

    def test_an_empty_trl_parquet_export_exits_1_with_the_count(self, tmp_path, capsys):
        pq = pytest.importorskip("pyarrow.parquet")
        _write_rollout(tmp_path / "run", [record(sample=0, safe=False, passed=False), record(sample=1, score=0.2,
                                                                                               passed=False)])
        out = tmp_path / "sft.parquet"
        assert self._run([str(tmp_path / "run"), "--format", "trl-sft", "--out", str(out)]) == 1
        text = capsys.readouterr().out
        assert "kept 0 of 2 episode(s)" in text and "dropped: unsafe 1, failed 1" in text
        table = pq.read_table(out)  # an empty table with the columns, not a crash
        assert table.num_rows == 0 and table.column_names == ["messages", "tools"]

    def test_bad_arguments_are_cowork_errors(self, tmp_path, capsys):
        _write_rollout(tmp_path / "run", [record()])
        assert self._run([str(tmp_path / "run"), "--format", "rl", "--out", str(tmp_path / "x.jsonl"),
                          "--max-turns", "3"]) == 2
        assert "curate SFT data" in capsys.readouterr().err
        assert self._run([str(tmp_path / "run"), "--format", "trl-sft", "--out", str(tmp_path / "x.jsonl"),
                          "--max-turns", "0"]) == 2
        assert "at least 1" in capsys.readouterr().err
