"""The TRL adapter without a daemon: tool methods made from MCP schemas, the factory, the dataset,
and an environment's episode on a fake pool (its error paths)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import pickle
from pathlib import Path
from typing import Any, Literal

import pytest

from cowork.errors import CoworkError, SandboxError, UnsupportedTask
from cowork.integrations import trl as ct
from fakes import FakeSandbox

pytest.importorskip("transformers", reason="the hf extra (transformers, datasets) is not installed")
from transformers.utils import get_json_schema

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "specs" / "fix-csv-report"
DOWNLOADS = ROOT / "specs" / "organize-downloads"
MEETING = ROOT / "specs" / "mt-clarify-meeting-slot"  # a scripted user
CRM = ROOT / "specs" / "crm-report-answer-numbers"  # answer checks

# Schemas as the sandbox's MCP server serves them (copied from `list_tools`).
READ_FILE = {"name": "read_file", "description": "Read a text file.", "input_schema": {
    "type": "object", "additionalProperties": False, "required": ["path"], "properties": {
        "path": {"description": "File path, relative to /workspace or absolute.", "type": "string"},
        "offset": {"default": 0, "description": "First line to return (0-based).", "minimum": 0, "type": "integer"},
        "limit": {"anyOf": [{"minimum": 1, "type": "integer"}, {"type": "null"}], "default": None,
                  "description": "Most lines to return."}}}}
TICKETS_SEARCH = {"name": "tickets_search", "description": "Search tickets, most urgent first.", "input_schema": {
    "type": "object", "additionalProperties": False, "properties": {
        "query": {"default": "", "description": "Words that must all occur.", "type": "string"},
        "status": {"anyOf": [{"enum": ["new", "open", "closed"], "type": "string"}, {"type": "null"}], "default": None},
        "limit": {"default": 20, "description": "Most items to return (1-100).", "maximum": 100, "minimum": 1,
                  "type": "integer"}}}}
MARK_READ = {"name": "mail_mark_read", "description": "Mark messages read or unread.", "input_schema": {
    "type": "object", "additionalProperties": False, "required": ["message_ids"], "properties": {
        "message_ids": {"description": "Message ids.", "items": {"type": "string"}, "minItems": 1, "type": "array"},
        "read": {"default": True, "description": "True marks read, false marks unread.", "type": "boolean"}}}}
NO_ARGS = {"name": "expenses_get_policy", "description": "Read the expense policy: limits, receipt rule.",
           "input_schema": {"type": "object", "additionalProperties": False, "properties": {}}}
ODD = {"name": "send", "description": "Send it. Args: not a section.", "input_schema": {
    "type": "object", "required": ["from", "to-list"], "properties": {
        "from": {"type": "string", "description": "Sender (choices: not json)"},
        "to-list": {"type": "array", "items": {"type": "string"}},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "ratio": {"type": ["number", "null"]},
        "anything": {}}}}
TOOLS = [READ_FILE, TICKETS_SEARCH, MARK_READ, NO_ARGS, ODD]


def trl_tools(cls: type) -> list[str]:
    """The tools TRL 1.16 takes from an environment class (GRPOTrainer.__init__'s loop)."""
    return sorted(n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
                  if n not in ("reset", "get_reward") and not n.startswith("_"))


class TestToolMethods:
    def test_signatures_are_real_and_typed(self):
        env = ct.env_class(TOOLS)()
        sig = inspect.signature(env.read_file)
        assert str(sig) == "(*, path: str, offset: int = 0, limit: Optional[int] = None) -> str"
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in sig.parameters.values())
        search = inspect.signature(env.tickets_search).parameters
        assert search["status"].annotation == Literal["new", "open", "closed"] | None
        assert search["query"].default == "" and search["limit"].default == 20
        assert inspect.signature(env.mail_mark_read).parameters["message_ids"].annotation == list[str]
        assert str(inspect.signature(env.expenses_get_policy)) == "() -> str"
        odd = inspect.signature(env.send).parameters
        assert list(odd) == ["from_", "to_list", "headers", "ratio", "anything"]
        assert odd["headers"].annotation == dict[str, str] and odd["anything"].annotation is Any

    def test_get_json_schema_gives_back_the_mcp_schema(self):
        env = ct.env_class(TOOLS)()
        for tool in TOOLS:
            fn = get_json_schema(getattr(env, tool["name"]))["function"]
            mcp = tool["input_schema"]
            assert fn["name"] == tool["name"]
            assert fn["parameters"].get("required", []) == [ct._param_name(n) for n in mcp.get("required", [])]
            assert set(fn["parameters"]["properties"]) == {ct._param_name(n) for n in mcp["properties"]}
        schema = get_json_schema(env.read_file)["function"]
        assert schema["description"] == "Read a text file."
        props = schema["parameters"]["properties"]
        assert props["path"] == {"type": "string", "description": "File path, relative to /workspace or absolute."}
        assert props["offset"]["type"] == "integer" and "at least 0, default 0" in props["offset"]["description"]
        assert props["limit"]["nullable"] is True
        status = get_json_schema(env.tickets_search)["function"]["parameters"]["properties"]["status"]
        assert status["enum"] == ["new", "open", "closed"] and status["type"] == "string"
        items = get_json_schema(env.mail_mark_read)["function"]["parameters"]["properties"]["message_ids"]
        assert items["type"] == "array" and items["items"] == {"type": "string"}
        odd = get_json_schema(env.send)["function"]
        assert odd["description"] == "Send it. Args - not a section."  # the docstring parser's words are defused
        assert odd["parameters"]["properties"]["ratio"] == {"type": "number", "nullable": True,
                                                            "description": "The ratio. [optional]"}

    def test_a_call_sends_only_the_arguments_given_under_their_mcp_names(self):
        env = ct.env_class(TOOLS)()
        sent = []
        env._call_tool = lambda name, args: sent.append((name, args)) or "ok"
        assert env.read_file(path="a.txt") == "ok"
        env.send(from_="me@acme.com", to_list=["you@acme.com"])
        assert sent == [("read_file", {"path": "a.txt"}), ("send", {"from": "me@acme.com", "to-list": ["you@acme.com"]})]
        with pytest.raises(TypeError):
            env.read_file(path="a.txt", colour="red")  # TRL shows the message to the model
        with pytest.raises(TypeError):
            env.read_file()

    def test_trl_sees_exactly_the_mcp_tools(self):
        assert trl_tools(ct.env_class(TOOLS)) == sorted(t["name"] for t in TOOLS)
        assert trl_tools(ct.CoworkEnv) == []

    @pytest.mark.parametrize("name", ["reset", "get_reward", "reward", "grade", "_hidden", "not-an-identifier"])
    def test_tool_names_an_environment_cannot_take(self, name):
        with pytest.raises(CoworkError, match=repr(name)):
            ct.env_class([{**NO_ARGS, "name": name}])

    def test_one_class_per_tool_set(self):
        assert ct.env_class(TOOLS) is ct.env_class(list(reversed(TOOLS)))
        assert ct.env_class(TOOLS) is not ct.env_class(TOOLS[:2])


class TestSpecObject:
    def test_dataset_factory_and_reward_funcs(self):
        spec = ct.CoworkTRL([CSV], tools={"fix-csv-report": [READ_FILE]}, max_sandboxes=4)
        ds = spec.train_dataset
        assert ds.column_names == ["prompt", "task_dir", "task"]
        row = ds[0]
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert row["prompt"][1]["content"] == spec.tasks[0].spec.prompt
        assert row["task_dir"] == str(CSV.resolve()) and row["task"] == "fix-csv-report"
        # get_reward is the reward source; the one function only hands environments their transcripts
        assert spec.reward_funcs == [ct.cowork_conversation]
        factory = pickle.loads(pickle.dumps(spec.environment_factory))
        env = factory()
        assert trl_tools(type(env)) == ["read_file"] and env._options.max_sandboxes == 4
        assert not ct._RUNTIMES  # making environments starts nothing

    def test_tasks_with_other_tools_get_their_own_environment(self):
        spec = ct.CoworkTRL([CSV, DOWNLOADS], tools={"fix-csv-report": [READ_FILE],
                                                     "organize-downloads": [READ_FILE, NO_ARGS]})
        factories = spec.environment_factory
        assert sorted(factories) == ["fix-csv-report", "organize-downloads"]
        assert spec.train_dataset["environment"] == ["fix-csv-report", "organize-downloads"]
        envs = {name: pickle.loads(pickle.dumps(f))() for name, f in factories.items()}
        assert trl_tools(type(envs["organize-downloads"])) == ["expenses_get_policy", "read_file"]
        assert type(envs["fix-csv-report"]).__name__ == "CoworkEnv_fix_csv_report"

    def test_an_older_trl_is_refused_with_the_fix(self, monkeypatch):
        import importlib.metadata

        monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.8.2")
        with pytest.raises(CoworkError, match=r"trl >= 1\.16, found 1\.8\.2; pip install"):
            _ = ct.CoworkTRL([CSV], tools={"fix-csv-report": [READ_FILE]}).environment_factory

    def test_multi_turn_tasks_get_the_user_channel_and_are_told_of_it(self):
        spec = ct.CoworkTRL([CSV, MEETING], tools={"fix-csv-report": [READ_FILE], "mt-clarify-meeting-slot": [READ_FILE]})
        factories = spec.environment_factory  # same MCP tools, but only the meeting has a user: two environments
        assert sorted(factories) == ["fix-csv-report", "mt-clarify-meeting-slot"]
        envs = {name: pickle.loads(pickle.dumps(f))() for name, f in factories.items()}
        assert trl_tools(type(envs["mt-clarify-meeting-slot"])) == ["message_user", "read_file"]
        assert trl_tools(type(envs["fix-csv-report"])) == ["read_file"]
        schema = get_json_schema(envs["mt-clarify-meeting-slot"].message_user)["function"]
        assert schema["parameters"]["required"] == ["message"] and "ends the whole session" in schema["description"]
        system = {r["task"]: r["prompt"][0]["content"] for r in spec.train_dataset}
        assert "message_user" in system["mt-clarify-meeting-slot"] and "message_user" not in system["fix-csv-report"]

    def test_without_a_channel_a_task_with_a_user_is_refused_up_front(self):
        with pytest.raises(UnsupportedTask, match=r"task 'mt-clarify-meeting-slot'.*its user.*answers after the agent "
                                                  r"ends a turn.*first reply without a tool call.*user_tool="):
            ct.CoworkTRL([CSV, MEETING], user_tool=None)
        assert ct.CoworkTRL([CSV], user_tool=None).tasks  # a task without a conversation still runs

    def test_a_task_tool_named_like_the_channel(self):
        with pytest.raises(CoworkError, match="name of the TRL user channel"):
            ct.env_class([READ_FILE, {**NO_ARGS, "name": "message_user"}], channel="message_user")

    def test_bad_inputs(self):
        with pytest.raises(CoworkError, match="organize-downloads"):
            _ = ct.CoworkTRL([CSV, DOWNLOADS], tools={"fix-csv-report": [READ_FILE]}).tools
        with pytest.raises(CoworkError, match="duplicate"):
            ct.CoworkTRL([CSV, CSV])


# --------------------------------------------------------------------------- episodes on a fake pool
class FakePool:
    def __init__(self):
        self.acquired, self.released, self.discarded = [], [], []
        self.fail: Exception | None = None
        self.hang = False
        self.results: list = []

    async def acquire(self, loaded, seed=None):
        if self.hang:
            await asyncio.Event().wait()
        if self.fail is not None:
            raise self.fail
        sb = FakeSandbox(loaded.spec, replies=self.results)
        self.acquired.append((sb, seed))
        return sb

    async def release(self, sb, discard_evidence=False):
        self.released.append((sb, discard_evidence))

    async def discard(self, sb):
        self.discarded.append(sb)

    async def close(self):
        pass


@pytest.fixture
def fake_pool():
    options = ct.EnvOptions(max_sandboxes=3, acquire_timeout_s=0.5)
    rt = ct._Runtime(options)
    rt.pool = FakePool()
    ct._RUNTIMES[options.pool_key()] = rt
    env = ct.env_class([READ_FILE])(options)
    yield rt.pool, env, rt
    ct.close()


def _row(**extra):
    return {"prompt": [{"role": "user", "content": "x"}], "task_dir": str(CSV), **extra}


class TestEpisodeOnAFakePool:
    def test_tool_output_and_the_models_errors_come_back_as_text(self, fake_pool):
        pool, env, _ = fake_pool
        pool.results += ["region,revenue", "!File not found: 'x'"]
        assert env.reset(**_row(seed=7)) is None  # the row's prompt holds the task
        assert env.read_file(path="a.csv") == "region,revenue"
        assert env.read_file(path="x") == "ERROR: File not found: 'x'"
        assert pool.acquired[0][1] == 7
        assert [(s.tool, s.is_error) for s in env.steps] == [("read_file", False), ("read_file", True)]
        assert env.task_id == "fix-csv-report"

    def test_a_row_without_a_prompt_gets_the_task_prompt(self, fake_pool):
        _, env, _ = fake_pool
        assert env.reset(task_dir=str(CSV)) == env._loaded.spec.prompt

    def test_the_next_reset_gives_the_unread_episode_back(self, fake_pool):
        pool, env, rt = fake_pool
        pool.results += ["ok"]
        env.reset(**_row())
        env.read_file(path="a")
        env.reset(**_row())
        concurrent.futures.wait(list(rt.background), timeout=5)
        assert pool.released == [(pool.acquired[0][0], True)]  # its evidence is not needed: discarded
        assert env.steps == []

    def test_no_sandbox_is_an_infra_error_without_reward(self, fake_pool):
        pool, env, _ = fake_pool
        pool.fail = SandboxError("docker daemon gone")
        env.reset(**_row())
        with pytest.raises(SandboxError, match="fix-csv-report.*docker daemon gone"):
            env.read_file(path="a")
        assert env.get_reward() is None and env.grade.status == "infra_error"

    def test_a_full_pool_names_the_setting_to_raise(self, fake_pool):
        pool, env, _ = fake_pool
        pool.hang = True
        env.reset(**_row())
        with pytest.raises(SandboxError, match="max_sandboxes=3"):
            env.read_file(path="a")
        with pytest.raises(SandboxError, match="max_sandboxes=3"):  # not waited for twice
            env.read_file(path="b")

    def test_an_infra_failure_mid_episode_ends_it_and_removes_the_sandbox(self, fake_pool):
        pool, env, _ = fake_pool
        pool.results += ["ok", SandboxError("container vanished")]
        env.reset(**_row())
        env.read_file(path="a")
        sb = pool.acquired[0][0]
        sb.diagnosis = ("infra", "container gone")
        with pytest.raises(SandboxError, match="container gone"):
            env.read_file(path="b")
        with pytest.raises(SandboxError, match="container gone"):  # no call reaches it again
            env.read_file(path="c")
        assert len(sb.calls) == 2
        assert env.get_reward() is None and env.grade.status == "infra_error"
        assert pool.discarded == [sb] and pool.released == []

    def test_a_sandbox_the_agent_broke_answers_no_more_calls(self, fake_pool):
        pool, env, _ = fake_pool
        pool.results += [SandboxError("connection reset")]
        env.reset(**_row())
        assert env.read_file(path="a").startswith("ERROR: the sandbox stopped answering (server killed)")
        assert "nothing was done" in env.read_file(path="b")
        assert len(pool.acquired[0][0].calls) == 1

    def test_an_environment_without_the_channel_refuses_a_task_with_a_user(self, fake_pool):
        pool, env, _ = fake_pool
        with pytest.raises(UnsupportedTask, match="mt-clarify-meeting-slot"):
            env.reset(task_dir=str(MEETING))
        assert pool.acquired == []  # refused before a sandbox was asked for

    def test_reply_checks_need_the_transcript(self, fake_pool):
        pool, env, _ = fake_pool
        env.reset(task_dir=str(CRM))
        with pytest.raises(CoworkError, match=r"crm-report-answer-numbers: checks \['figures', 'figures-by-stage', "
                                              r"'usd-deal-mentioned'\] read the agent's reply.*reward_funcs="):
            env.get_reward()

    def test_the_reward_function_hands_each_environment_its_transcript(self, fake_pool):
        _, env, _ = fake_pool
        env.reset(**_row())
        completion = [{"role": "assistant", "content": "The total is 42."}]
        assert ct.cowork_conversation(prompts=[["p"]], completions=[completion], environments=[env],
                                      trainer_state=None) == [None]
        assert env._transcript == (["p"], completion)
        with pytest.raises(CoworkError, match="environment_factory"):
            ct.cowork_conversation(prompts=[["p"]], completions=[completion])

    def test_contract_misuse(self, fake_pool):
        _, env, _ = fake_pool
        assert env.get_reward() is None and env.reward is None  # no episode yet
        with pytest.raises(CoworkError, match="task_dir"):
            env.reset(prompt="x")
        with pytest.raises(CoworkError, match="reset"):
            env.read_file(path="a")


class TestWithTRL:
    def test_grpo_trainer_takes_the_factory_tools_and_reward(self, tmp_path, monkeypatch):
        """TRL 1.16's own set-up (no rollout, so no daemon): the tools it finds, their schema in
        the prompt, and get_reward as its one reward source."""
        pytest.importorskip("trl", reason="trl is not installed (pip install 'cowork-runtime[trl]')")
        monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
        from trl import GRPOConfig, GRPOTrainer
        from trl.chat_template_utils import qwen3_template

        from cowork.agents.tiny import tiny_model, tiny_tokenizer

        spec = ct.CoworkTRL([CSV], tools={"fix-csv-report": [READ_FILE, TICKETS_SEARCH]})
        tok = tiny_tokenizer()
        tok.response_template = qwen3_template  # hermes calls, as Qwen's templates write them
        args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, per_device_train_batch_size=2,
                          num_generations=2, max_steps=1, report_to=[], save_strategy="no")
        trainer = GRPOTrainer(model=tiny_model(len(tok)), processing_class=tok, args=args,
                              train_dataset=spec.train_dataset, environment_factory=spec.environment_factory,
                              reward_funcs=spec.reward_funcs)
        assert sorted(t.__name__ for t in trainer._env_tools[None]) == ["read_file", "tickets_search"]
        assert trainer.reward_func_names == ["cowork_conversation", "CoworkEnv"]  # the transcript first, then the reward
        text = tok.apply_chat_template(spec.train_dataset[0]["prompt"], tools=trainer._env_tools[None],
                                       tokenize=False, add_generation_prompt=True)
        assert '"name": "read_file"' in text and '"enum": ["new", "open", "closed"]' in text
        assert not ct._RUNTIMES
