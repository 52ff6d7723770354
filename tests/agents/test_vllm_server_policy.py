"""The vllm-server backend against a loopback server that answers as vLLM does (token ids,
log-probabilities, hermes tool calls, finish reasons), with real ids from the tiny tokenizer."""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cowork.agents import make_policy, mcp_tool_to_openai
from cowork.agents.chat_tokens import ChatTokens, template_messages
from cowork.agents.tokens import SamplingSettings
from cowork.agents.toolparse import parse_tool_calls
from cowork.agents.vllm_server import VLLMServerClient
from cowork.episode.run import run_episode
from cowork.errors import PolicyError
from cowork.formats import INVALID_ARGUMENTS_KEY
from cowork.spec.models import TaskSpec
from fakes import FakeSandbox

pytest.importorskip("transformers", reason="the tiny tokenizer needs transformers and tokenizers")

CALL = '<tool_call>\n{{"name": "read_file", "arguments": {{"path": "{path}"}}}}\n</tool_call>'


@pytest.fixture(scope="module")
def tok():
    from cowork.agents.tiny import tiny_tokenizer

    return tiny_tokenizer()


class FakeVLLM:
    """``/v1/completions`` and ``/v1/chat/completions`` as vLLM answers them, playing scripted
    texts; records every request body and every answer."""

    def __init__(self, tok, texts, *, fail=(), token_ids=True, server_info=None):
        self.tok, self.chat = tok, ChatTokens(tok)
        self.texts, self.fail, self.token_ids = list(texts), list(fail), token_ids
        self.server_info, self.gets = server_info, []
        self.requests, self.answers = [], []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body})
                status, payload = outer.answer(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                outer.gets.append(self.path)
                found = outer.server_info is not None and self.path.startswith("/server_info")
                data = json.dumps(outer.server_info if found else {"detail": "Not Found"}).encode()
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def generate(self, body):
        """The next scripted text as vLLM would return it: ids (end token included when the
        turn ends by itself), raw logprobs, and why it stopped."""
        text = self.texts.pop(0)
        ids = self.chat.encode(text) + [self.chat.end_id]
        finish = "stop"
        if len(ids) > body["max_tokens"]:
            ids, finish = ids[:body["max_tokens"]], "length"
        lps = [-0.01 * (i % 7 + 1) - 0.001 * len(self.answers) for i in range(len(ids))]
        return ids, lps, finish

    def answer(self, path, body):
        if self.fail:
            status = self.fail.pop(0)
            if isinstance(status, tuple):  # (status, message)
                return status[0], {"object": "error", "message": status[1], "type": "BadRequestError"}
            if status is not None:  # None: answer this request
                return status, {"object": "error", "message": "engine overloaded"}
        if path == "/v1/completions":
            ids, lps, finish = self.generate(body)
            choice = {"index": 0, "text": self.tok.decode(ids, skip_special_tokens=True),
                      "logprobs": {"token_logprobs": lps, "tokens": [str(i) for i in ids]},
                      "finish_reason": finish, "stop_reason": None}
            if self.token_ids:
                choice.update(token_ids=ids, prompt_token_ids=body["prompt"])
            self.answers.append({"prompt": body["prompt"], "ids": ids, "logprobs": lps})
            return 200, {"object": "text_completion", "model": body["model"], "choices": [choice]}
        if path == "/v1/chat/completions":
            # vLLM decodes tool-call arguments before the template renders them, as template_messages does.
            prompt = self.chat.encode(self.tok.apply_chat_template(
                template_messages(body["messages"]), tools=body.get("tools"), tokenize=False,
                add_generation_prompt=True))
            ids, lps, finish = self.generate(body)
            text = self.tok.decode(ids[:-1] if ids[-1] == self.chat.end_id else ids)
            content, calls = parse_tool_calls(text)
            message = {"role": "assistant", "content": content or None, "tool_calls": []}
            if any(INVALID_ARGUMENTS_KEY in c.arguments for c in calls):
                message["content"] = text  # vLLM's hermes parser: one bad call, no calls, raw text kept
            else:
                message["tool_calls"] = [{"id": f"chatcmpl-tool-{n}", "type": "function", "function": {
                    "name": c.name, "arguments": json.dumps(c.arguments)}} for n, c in enumerate(calls)]
                if calls and finish == "stop":
                    finish = "tool_calls"
            self.answers.append({"prompt": prompt, "ids": ids, "logprobs": lps})
            return 200, {"object": "chat.completion", "model": body["model"], "prompt_token_ids": prompt,
                         "choices": [{"index": 0, "message": message, "finish_reason": finish, "token_ids": ids,
                                      "logprobs": {"content": [{"token": str(i), "logprob": lp, "top_logprobs": []}
                                                               for i, lp in zip(ids, lps)]}}]}
        return 404, {"object": "error", "message": f"no route {path}"}


@pytest.fixture
def server(tok):
    made = []

    def make(texts, **kw):
        made.append(FakeVLLM(tok, texts, **kw))
        return made[-1]

    yield make
    for s in made:
        s.close()


SPEC = TaskSpec.model_validate({
    "id": "notes", "title": "notes", "prompt": "Read notes.txt and b.txt and tell me the number.",
    "limits": {"max_turns": 6}, "checks": [{"type": "tool_called", "tool": "read_file"}],
    "oracle": [{"tool": "read_file", "args": {"path": "notes.txt"}}],
    "violation": [{"tool": "shell", "args": {"command": "rm notes.txt"}}],
})


FILES = {"notes.txt": "quarterly numbers: 42", "b.txt": "and 7 more"}


def notes_sandbox():
    """SPEC's sandbox: read_file over notes.txt and b.txt."""
    return FakeSandbox(SPEC, files=FILES)


def recording(policy):
    """Keep every AssistantTurn the policy returns."""
    turns, act = [], policy.act

    async def wrapped(messages, tools):
        turns.append(await act(messages, tools))
        return turns[-1]

    policy.act = wrapped
    return turns


def assert_generated_exactly(t, answers):
    """The mask covers exactly the server's generated ids, with the server's logprobs."""
    t.check()
    assert len(t.turns) == len(answers)
    for span, a in zip(t.turns, answers):
        assert t.ids[span.gen_start:span.gen_end] == a["ids"]
        assert t.logprobs[span.gen_start:span.gen_end] == a["logprobs"]
    assert sum(t.mask) == sum(len(a["ids"]) for a in answers)
    assert all(lp is None for lp, m in zip(t.logprobs, t.mask) if m == 0)


class TestTokensMode:
    async def test_multi_turn_episode_is_append_only_with_the_servers_tokens(self, tok, server):
        srv = server([CALL.format(path="notes.txt"), CALL.format(path="b.txt"), "The number is 42."])
        sampling = SamplingSettings(temperature=0.7, top_p=0.9, max_tokens=200, stop=["###"], seed=11)
        client = VLLMServerClient(srv.url, "tiny", tokenizer=tok, sampling=sampling)
        policy = client.policy()
        traj = await run_episode(notes_sandbox(), policy)

        assert traj.status == "completed" and traj.turns == 3, traj.error
        assert [s.args for s in traj.steps] == [{"path": "notes.txt"}, {"path": "b.txt"}]
        assert not any(s.is_error for s in traj.steps)
        assert client.mode == "tokens" and policy.name == "vllm-server:tiny"
        t = traj.tokens
        assert_generated_exactly(t, srv.answers)
        # Append-only: each prompt is the previous prompt and generation, then the environment.
        for a0, a1 in zip(srv.answers, srv.answers[1:]):
            assert a1["prompt"][:len(a0["prompt"]) + len(a0["ids"])] == a0["prompt"] + a0["ids"]
        assert t.ids == srv.answers[-1]["prompt"] + srv.answers[-1]["ids"]
        # The first prompt is the chat template's, and the environment's spans hold the tool outputs.
        tools = [mcp_tool_to_openai(x) for x in await notes_sandbox().list_tools()]
        assert srv.answers[0]["prompt"] == ChatTokens(tok).prompt(traj.messages[:2], tools) == t.ids[:t.prompt_len]
        decoded = [tok.decode(t.ids[a:b]) for a, b in t.env_spans()]
        assert "quarterly numbers: 42" in decoded[0] and "and 7 more" in decoded[1]
        assert [s.finish_reason for s in t.turns] == ["tool_calls", "tool_calls", "stop"]

    async def test_requests_carry_token_ids_logprobs_and_the_sampling_settings(self, tok, server):
        srv = server([CALL.format(path="notes.txt"), "done"])
        sampling = SamplingSettings(temperature=0.3, top_p=0.8, max_tokens=77, stop=["END"], seed=5)
        await run_episode(notes_sandbox(), VLLMServerClient(srv.url, "tiny", tokenizer=tok, sampling=sampling).policy())
        assert [r["path"] for r in srv.requests] == ["/v1/completions"] * 2
        for turn, r in enumerate(srv.requests, 1):
            b = r["body"]
            assert b["model"] == "tiny" and b["return_token_ids"] is True and b["logprobs"] == 0
            assert (b["temperature"], b["top_p"], b["max_tokens"], b["stop"]) == (0.3, 0.8, 77, ["END"])
            assert b["seed"] == 5 + turn  # a set seed moves on per turn, as in the hf backend
            assert b["skip_special_tokens"] is False and b["stop_token_ids"] == [ChatTokens(tok).end_id]
            assert all(isinstance(i, int) for i in b["prompt"])

    async def test_a_turn_cut_by_max_tokens_is_a_truncated_episode(self, tok, server):
        srv = server(["I will now explain at great length what the quarterly numbers say about sales"])
        policy = VLLMServerClient(srv.url, "tiny", tokenizer=tok, sampling=SamplingSettings(max_tokens=6)).policy()
        turns = recording(policy)
        traj = await run_episode(notes_sandbox(), policy)
        assert traj.status == "truncated" and turns[0].extra["finish_reason"] == "length"
        assert traj.tokens.turns[0].finish_reason == "length" and traj.tokens.turns[0].gen_end - \
            traj.tokens.turns[0].gen_start == 6
        assert_generated_exactly(traj.tokens, srv.answers)

    async def test_a_truncated_tool_call_continues_with_the_end_token_as_environment(self, tok, server):
        srv = server([CALL.format(path="notes.txt"), "ok"])
        policy = VLLMServerClient(srv.url, "tiny", tokenizer=tok, sampling=SamplingSettings(max_tokens=12)).policy()
        traj = await run_episode(notes_sandbox(), policy)
        # The cut call is a tool error; the next prompt closes the cut turn with the end token.
        assert traj.steps[0].is_error and traj.turns == 2
        end = ChatTokens(tok).end_id
        second = srv.answers[1]["prompt"]
        assert second[len(srv.answers[0]["prompt"]) + 12] == end
        assert_generated_exactly(traj.tokens, srv.answers)

    async def test_malformed_tool_calls_are_tool_errors_not_crashes(self, tok, server):
        srv = server(['<tool_call>\n{"name": "read_file", "arguments": "[1]"}\n</tool_call>',
                      '<tool_call>\n{"name": "read_file", "argu\n</tool_call>',
                      '<tool_call>\nnot json at all\n</tool_call>', "I give up."])
        traj = await run_episode(notes_sandbox(), VLLMServerClient(srv.url, "tiny", tokenizer=tok).policy())
        assert traj.status == "completed" and traj.turns == 4
        assert [s.is_error for s in traj.steps] == [True, True, True]
        assert all(INVALID_ARGUMENTS_KEY in s.args for s in traj.steps)
        assert_generated_exactly(traj.tokens, srv.answers)

    async def test_server_errors_are_retried_then_succeed(self, tok, server):
        srv = server(["hello"], fail=[500, 503])
        client = VLLMServerClient(srv.url, "tiny", tokenizer=tok, retries=2)
        traj = await run_episode(notes_sandbox(), client.policy())
        assert traj.status == "completed" and len(srv.requests) == 3

    async def test_server_errors_past_the_retries_are_a_policy_error(self, tok, server):
        srv = server(["hello"], fail=[500, 500, 500])
        policy = VLLMServerClient(srv.url, "tiny", tokenizer=tok, retries=1).policy()
        with pytest.raises(PolicyError, match="HTTP 500"):
            await policy.act([{"role": "user", "content": "hi"}], [])
        traj = await run_episode(notes_sandbox(), VLLMServerClient(srv.url, "tiny", tokenizer=tok, retries=0).policy())
        assert traj.status == "policy_error" and "HTTP 500" in traj.error

    async def test_a_client_error_is_not_retried(self, tok, server):
        srv = server(["hello"], fail=[400])
        with pytest.raises(PolicyError, match="HTTP 400"):
            await VLLMServerClient(srv.url, "tiny", tokenizer=tok, retries=3).policy().act(
                [{"role": "user", "content": "hi"}], [])
        assert len(srv.requests) == 1

    async def test_a_server_without_token_ids_says_which_vllm_it_needs(self, tok, server):
        srv = server(["hello"], token_ids=False)
        with pytest.raises(PolicyError, match="0.10.2"):
            await VLLMServerClient(srv.url, "tiny", tokenizer=tok).policy().act([{"role": "user", "content": "x"}], [])

    async def test_reset_forgets_the_episode(self, tok, server):
        srv = server(["one", "two"])
        policy = VLLMServerClient(srv.url, "tiny", tokenizer=tok).policy()
        msgs = [{"role": "user", "content": "hi"}]
        await policy.act(msgs, [])
        policy.reset()
        await policy.act(msgs, [])
        assert srv.answers[0]["prompt"] == srv.answers[1]["prompt"]
        assert policy.token_trajectory().ids == srv.answers[1]["prompt"] + srv.answers[1]["ids"]


#: vLLM's answer to a prompt past the model's context (its serving_engine's wording).
OVERFLOW = (400, "This model's maximum context length is 2048 tokens. However, you requested 2100 tokens "
                 "(1100 in the messages, 1000 in the completion). Please reduce the length of the messages or "
                 "completion.")


class TestTrainingData:
    """Issue 26: over-long episodes are truncated and kept, each turn says which weights and
    model made it, and the trajectory says what its log-probabilities are."""

    @pytest.mark.parametrize("mode", ["tokens", "chat"])
    async def test_a_context_overflow_after_the_first_turn_truncates_the_episode(self, tok, server, mode):
        srv = server([CALL.format(path="notes.txt")], fail=[None, OVERFLOW])
        client = VLLMServerClient(srv.url, "tiny", tokenizer=tok if mode == "tokens" else None, mode=mode)
        traj = await run_episode(notes_sandbox(), client.policy())
        assert (traj.status, traj.stop_reason, traj.turns) == ("truncated", "context_length", 1), traj.error
        assert "maximum context length" in traj.error and len(srv.requests) == 2  # a 400 is not retried
        # The trajectory ends with the last generated turn: the prompt that did not fit is not in it.
        t = traj.tokens
        t.check()
        assert len(t.turns) == 1 and t.turns[0].gen_end == len(t.ids)
        assert t.ids[t.turns[0].gen_start:t.turns[0].gen_end] == srv.answers[0]["ids"]

    async def test_other_client_errors_and_a_first_prompt_too_long_stay_policy_errors(self, tok, server):
        srv = server(["hello"], fail=[(400, "tool_choice 'required' is not supported")])
        traj = await run_episode(notes_sandbox(), VLLMServerClient(srv.url, "tiny", tokenizer=tok).policy())
        assert traj.status == "policy_error" and traj.stop_reason is None
        srv = server(["hello"], fail=[OVERFLOW])
        traj = await run_episode(notes_sandbox(), VLLMServerClient(srv.url, "tiny", tokenizer=tok).policy())
        assert traj.status == "policy_error" and "first prompt does not fit" in traj.error

    async def test_each_turn_records_the_weights_version_model_and_stop(self, tok, server):
        srv = server([CALL.format(path="notes.txt"), "The number is 42."])
        client = VLLMServerClient(srv.url, "tiny", tokenizer=tok, logprobs_mode="processed_logprobs")
        policy = client.policy()
        act = policy.act

        async def act_then_update(messages, tools):
            turn = await act(messages, tools)
            client.version += 1  # a weight update between the two turns
            return turn

        policy.act = act_then_update
        traj = await run_episode(notes_sandbox(), policy)
        t = traj.tokens
        assert t.policy_version == 0 and [s.policy_version for s in t.turns] == [0, 1]
        assert [s.model for s in t.turns] == ["tiny", "tiny"]
        assert [s.finish_reason for s in t.turns] == ["tool_calls", "stop"]
        assert t.logprobs_mode == "processed_logprobs" and srv.gets == []  # told: the server is not asked

    async def test_the_logprobs_mode_comes_from_the_server_else_vllms_default(self, tok, server, caplog):
        info = {"vllm_config": {"model_config": {"logprobs_mode": "processed_logprobs"}}}
        srv = server(["hi", "again"], server_info=info)
        client = VLLMServerClient(srv.url, "tiny", tokenizer=tok, sampling=SamplingSettings(top_k=20))
        traj = await run_episode(notes_sandbox(), client.policy())
        assert traj.tokens.logprobs_mode == "processed_logprobs" and srv.gets == ["/server_info?config_format=json"]
        assert srv.requests[0]["body"]["top_k"] == 20
        await run_episode(notes_sandbox(), client.policy())
        assert len(srv.gets) == 1  # asked once per client
        bare = server(["hi"])
        traj = await run_episode(notes_sandbox(), VLLMServerClient(bare.url, "tiny", tokenizer=tok).policy())
        assert traj.tokens.logprobs_mode == "raw_logprobs" and "--logprobs-mode processed_logprobs" in caplog.text
        logits = server(["hi"], server_info={"vllm_config": {"model_config": {"logprobs_mode": "raw_logits"}}})
        traj = await run_episode(notes_sandbox(), VLLMServerClient(logits.url, "tiny", tokenizer=tok).policy())
        assert traj.status == "policy_error" and "returns logits" in traj.error


class TestChatMode:
    async def test_per_turn_ids_and_an_append_only_trajectory_without_drift(self, server):
        srv = server([CALL.format(path="notes.txt"), "The number is 42."])
        policy = VLLMServerClient(srv.url, "tiny", mode="chat", sampling=SamplingSettings(seed=1)).policy()
        turns = recording(policy)
        traj = await run_episode(notes_sandbox(), policy)
        assert traj.status == "completed" and traj.turns == 2 and not traj.steps[0].is_error
        b = srv.requests[0]["body"]
        assert srv.requests[0]["path"] == "/v1/chat/completions"
        assert b["logprobs"] is True and b["top_logprobs"] == 0 and b["return_token_ids"] is True
        assert b["tools"][0]["function"]["name"] == "read_file" and b["seed"] == 2
        for turn, a in zip(turns, srv.answers):
            assert turn.extra["prompt_token_ids"] == a["prompt"] and turn.extra["token_ids"] == a["ids"]
            assert turn.extra["logprobs"] == a["logprobs"] and turn.extra["drift"] is None
        assert turns[0].extra["finish_reason"] == "tool_calls" and turns[1].extra["finish_reason"] == "stop"
        assert policy.drift_count == 0
        assert_generated_exactly(traj.tokens, srv.answers)
        assert traj.tokens.ids == srv.answers[-1]["prompt"] + srv.answers[-1]["ids"]

    async def test_re_tokenization_drift_is_detected_and_the_trajectory_stays_honest(self, tok, server):
        # The model writes compact JSON; the template re-renders the call with spaces, so the
        # next prompt does not extend the previous prompt and generation.
        compact = '<tool_call>\n{{"name":"read_file","arguments":{{"path":"{path}"}}}}\n</tool_call>'
        srv = server([compact.format(path="notes.txt"), compact.format(path="b.txt"), "The number is 42."])
        policy = VLLMServerClient(srv.url, "tiny", mode="chat").policy()
        turns = recording(policy)
        traj = await run_episode(notes_sandbox(), policy)
        assert traj.status == "completed" and not any(s.is_error for s in traj.steps)
        first, second, third = srv.answers
        assert second["prompt"][:len(first["prompt"]) + len(first["ids"])] != first["prompt"] + first["ids"]
        drift = turns[1].extra["drift"]
        assert drift["dropped_turns"] == [1] and drift["expected"] == len(first["prompt"]) + len(first["ids"])
        assert len(first["prompt"]) <= drift["at"] < drift["expected"]
        assert turns[2].extra["drift"]["dropped_turns"] == [2] and policy.drift_count == 2
        t = traj.tokens
        t.check()
        # What remains is the sequence the server really saw, and only its last turn counts as generated.
        assert t.ids == third["prompt"] + third["ids"]
        assert [s.turn for s in t.turns] == [3] and sum(t.mask) == len(third["ids"])
        assert t.logprobs[t.turns[0].gen_start:] == third["logprobs"]

    async def test_a_call_vllm_could_not_parse_is_read_from_the_text(self, server):
        srv = server(['<tool_call>\n{"name": "read_file", "arguments": {"path": \n</tool_call>', "sorry"])
        policy = VLLMServerClient(srv.url, "tiny", mode="chat").policy()
        turns = recording(policy)
        traj = await run_episode(notes_sandbox(), policy)
        assert traj.status == "completed" and traj.steps[0].is_error
        assert traj.steps[0].tool == "read_file" and INVALID_ARGUMENTS_KEY in traj.steps[0].args
        assert turns[0].extra["finish_reason"] == "tool_calls"

    async def test_length_in_chat_mode(self, server):
        srv = server(["a long answer that goes on and on and on"])
        policy = VLLMServerClient(srv.url, "tiny", mode="chat", sampling=SamplingSettings(max_tokens=4)).policy()
        traj = await run_episode(notes_sandbox(), policy)
        assert traj.status == "truncated" and traj.tokens.turns[0].finish_reason == "length"

    async def test_auto_mode_without_a_tokenizer_falls_back_to_chat(self, server, monkeypatch, caplog):
        import cowork.agents.vllm_server as vs

        def missing(path):
            raise OSError(f"{path} is not a local folder and the hub cannot be reached")

        monkeypatch.setattr(vs, "_load_tokenizer", missing)
        srv = server(["hi"])
        client = VLLMServerClient(srv.url, "org/unknown-model")
        traj = await run_episode(notes_sandbox(), client.policy())
        assert traj.status == "completed" and client.mode == "chat"
        assert srv.requests[0]["path"] == "/v1/chat/completions" and "chat mode" in caplog.text
        with pytest.raises(PolicyError, match="tokenizer="):
            await VLLMServerClient(srv.url, "org/unknown-model", mode="tokens").policy().act(
                [{"role": "user", "content": "x"}], [])


class TestMakePolicy:
    async def test_vllm_server_policies_share_one_client_and_load_a_tokenizer_folder(self, tok, server, tmp_path):
        tok.save_pretrained(tmp_path / "tok")
        srv = server(["one", "two"])
        opts = {"base_url": srv.url, "model": "tiny", "tokenizer": str(tmp_path / "tok"),
                "sampling": {"max_tokens": 50, "seed": 3}}
        p1, p2 = make_policy("vllm-server", **dict(opts)), make_policy("vllm-server", **dict(opts))
        assert p1 is not p2 and p1.client is p2.client and p1.sampling.max_tokens == 50
        await p1.act([{"role": "user", "content": "x"}], [])
        assert p1.client.mode == "tokens" and srv.requests[0]["body"]["seed"] == 4

    def test_model_backends_need_a_model(self):
        with pytest.raises(ValueError, match="model="):
            make_policy("vllm-server", base_url="http://127.0.0.1:1/v1")

    def test_hf_policies_share_one_engine(self, tok, tmp_path):
        pytest.importorskip("torch")
        from cowork.agents.tiny import tiny_model

        tiny_model(len(tok)).save_pretrained(tmp_path / "m")
        tok.save_pretrained(tmp_path / "m")
        p1, p2 = make_policy("hf", model=str(tmp_path / "m")), make_policy("hf", model=str(tmp_path / "m"))
        assert p1 is not p2 and p1.engine is p2.engine and p1.name == f"hf:{tmp_path / 'm'}"

    def test_vllm_without_vllm_says_how_to_install_it(self):
        if importlib.util.find_spec("vllm") is not None:
            pytest.skip("vllm is installed: tests/agents/test_vllm_engine_policy.py covers it")
        with pytest.raises(PolicyError, match=r"cowork-runtime\[vllm\]"):
            make_policy("vllm", model="Qwen/Qwen2.5-0.5B-Instruct")


@pytest.mark.docker
async def test_an_episode_in_a_real_sandbox(tok, server, no_leftovers):
    from cowork.sandbox.sandbox import Sandbox
    from cowork.spec.loader import load_spec

    srv = server([CALL.format(path="reports/q3_sales.csv"), "The north-09 and south-08 revenue cells are wrong."])
    policy = VLLMServerClient(srv.url, "tiny", tokenizer=tok, sampling=SamplingSettings(seed=0)).policy()
    async with await Sandbox.start(load_spec(Path(__file__).resolve().parents[2] / "specs" / "fix-csv-report")) as sb:
        traj = await run_episode(sb, policy)
    assert traj.status == "completed" and traj.turns == 2, traj.error
    assert traj.steps[0].tool == "read_file" and not traj.steps[0].is_error
    t = traj.tokens
    assert_generated_exactly(t, srv.answers)
    (a, b), = t.env_spans()
    assert "region,month,units,unit_price,revenue" in tok.decode(t.ids[a:b])
    assert t.ids == srv.answers[-1]["prompt"] + srv.answers[-1]["ids"]


REAL_SERVER = os.environ.get("COWORK_VLLM_SERVER", "")


@pytest.mark.skipif(not REAL_SERVER, reason="set COWORK_VLLM_SERVER='http://host:8000/v1 MODEL' to test a real server")
@pytest.mark.parametrize("mode", ["tokens", "chat"])
async def test_a_real_vllm_server(mode):
    url, model = REAL_SERVER.split()
    policy = VLLMServerClient(url, model, mode=mode, sampling=SamplingSettings(max_tokens=64, seed=0)).policy()
    tools = [mcp_tool_to_openai(x) for x in await notes_sandbox().list_tools()]
    messages = [{"role": "user", "content": "Read notes.txt with the read_file tool."}]
    first = await policy.act(messages, tools)
    messages += [{"role": "assistant", "content": first.content or ""}, {"role": "user", "content": "Go on."}]
    await policy.act(messages, tools)
    t = policy.token_trajectory()
    t.check()
    assert len(t.turns) == 2 or (mode == "chat" and policy.drift_count == 1)
    assert all(lp is not None and lp <= 0 for lp, m in zip(t.logprobs, t.mask) if m)
