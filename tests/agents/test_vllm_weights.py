"""Weight sync for the vllm-server backend against a loopback stand-in of vLLM 0.34's server: its
dev endpoints (``/pause``, ``/resume``, ``/is_paused``, ``/collective_rpc``, ``/reset_prefix_cache``,
``/update_weight_version``, ``/weight_info``, the weight-transfer routes) answer as vLLM's
routers do, and ``/collective_rpc`` runs cowork's worker extension over a real torch model.
Also the ``/dev/shm`` capacity check, with a small simulated capacity."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from cowork.agents import vllm_weights
from cowork.agents.chat_tokens import ChatTokens
from cowork.agents.vllm_engine import WeightLoaderExtension
from cowork.agents.vllm_server import VLLMServerClient
from cowork.agents.vllm_weights import ServerWeights, WeightTransferControl, transfer_folder
from cowork.errors import PolicyError

torch = pytest.importorskip("torch", reason="the hf extra (torch, transformers) is not installed")

CALL = '<tool_call>\n{"name": "read_file", "arguments": {"path": "notes.txt"}}\n</tool_call>'
MESSAGES = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Read notes.txt"}]
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}}}}]


class Worker(WeightLoaderExtension):
    """A vLLM GPU worker with cowork's extension mixed in, over a transformers model."""

    def __init__(self, model):
        def load_weights(weights):
            own = model.state_dict(keep_vars=True)
            with torch.no_grad():
                for name, tensor in weights:
                    own[name].copy_(tensor)

        self.model_runner = type("Runner", (), {"model": type("Model", (), {"load_weights": staticmethod(
            load_weights)})()})()


class FakeVLLMServer:
    """vLLM 0.34's OpenAI server as far as weight sync goes, on loopback.

    Args:
        tok: The tokenizer whose ids ``/v1/completions`` answers with.
        dev_mode: ``VLLM_SERVER_DEV_MODE=1`` (without it every dev route is 404).
        extension: Started with cowork's ``--worker-extension-cls``.
        delay: Seconds each completion takes.
    """

    def __init__(self, tok, model, *, dev_mode=True, extension=True, delay=0.0):
        self.chat, self.model = ChatTokens(tok), model
        self.workers = [Worker(model)] if extension else [object()]
        self.dev_mode, self.delay = dev_mode, delay
        self.paused, self.weight_version = False, None
        self.log: list[str] = []
        self.bodies: dict[str, list] = {}
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status, payload):
                data = b"" if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n)) if n else None
                self._send(*outer.answer("POST", self.path, body))

            def do_GET(self):
                self._send(*outer.answer("GET", self.path, None))

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, method, raw_path, body):
        url = urlparse(raw_path)
        path, query = url.path, {k: v[-1] for k, v in parse_qs(url.query).items()}
        with self.lock:
            self.log.append(path)
            self.bodies.setdefault(path, []).append(body if method == "POST" else None)
        if path == "/v1/completions":
            return self.complete(body)
        if not self.dev_mode:
            return 404, {"detail": "Not Found"}
        if path == "/pause" and method == "POST":
            if query.get("mode", "abort") not in ("abort", "wait", "keep"):
                return 422, {"detail": "mode"}
            self.paused = True
            self.pause_mode = query.get("mode")
            return 200, {"status": "paused"}
        if path == "/resume" and method == "POST":
            self.paused = False
            return 200, {"status": "resumed"}
        if path == "/is_paused" and method == "GET":
            return 200, {"is_paused": self.paused}
        if path == "/collective_rpc" and method == "POST":
            results = []
            for w in self.workers:
                fn = getattr(w, body["method"], None)
                if fn is None:  # the worker raises: FastAPI's 500
                    return 500, None
                results.append(fn(*body.get("args", [])))
            # vLLM passes dicts, lists and None through and str()s everything else.
            return 200, {"results": [r if r is None or isinstance(r, (dict, list)) else str(r) for r in results]}
        if path == "/reset_prefix_cache" and method == "POST":
            return 200, {"success": True}
        if path == "/update_weight_version" and method == "POST":
            self.weight_version = body["new_version"]
            return 200, {"success": True, "new_version": body["new_version"]}
        if path == "/weight_info" and method == "GET":
            return 200, {"weight_version": self.weight_version}
        if path in ("/start_weight_update", "/update_weights", "/finish_weight_update") and method == "POST":
            if path == "/update_weights" and not (isinstance(body, dict) and "update_info" in body):
                return 422, {"detail": "update_info"}
            return 200, {"message": "ok"}
        return 404, {"detail": "Not Found"}

    def complete(self, body):
        if self.paused:  # abort and wait modes reject new requests until /resume
            return 503, {"object": "error", "message": "the engine is paused", "type": "ServiceUnavailable"}
        time.sleep(self.delay)
        ids = self.chat.encode(CALL) + [self.chat.end_id]
        with self.lock:
            self.log.append("/v1/completions done")
        return 200, {"object": "text_completion", "model": body["model"], "choices": [{
            "index": 0, "text": "", "token_ids": ids, "finish_reason": "stop", "stop_reason": None,
            "logprobs": {"token_logprobs": [-0.5] * len(ids), "tokens": [str(i) for i in ids]}}]}


@pytest.fixture(scope="module")
def tok():
    from cowork.agents.tiny import tiny_tokenizer

    return tiny_tokenizer()


@pytest.fixture
def server(tok):
    from cowork.agents.tiny import tiny_model

    made = []

    def make(**kw):
        made.append(FakeVLLMServer(tok, tiny_model(len(tok), seed=4), **kw))
        return made[-1]

    yield make
    for s in made:
        s.close()


def new_weights(model):
    """Random weights for every tensor (the output head is tied to the embedding: sent once)."""
    gen = torch.Generator().manual_seed(1)
    return {k: torch.randn(v.shape, generator=gen) for k, v in model.state_dict().items() if k != "lm_head.weight"}


def after_call(messages, turn):
    call = turn.tool_calls[0]
    return [*messages, {"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": '{"path": "notes.txt"}'}}]},
        {"role": "tool", "tool_call_id": call.id, "content": "42"}]


class TestProbe:
    async def test_what_each_server_offers(self, server):
        full = await ServerWeights(server().url).probe()
        assert full == {"pause": True, "weight_version": True, "collective_rpc": True, "cowork_loader": True}
        plain = await ServerWeights(server(dev_mode=False).url).probe()
        assert plain == {"pause": False, "weight_version": False, "collective_rpc": False, "cowork_loader": False}
        bare = await ServerWeights(server(extension=False).url).probe()
        assert bare["collective_rpc"] and not bare["cowork_loader"]


class TestUpdate:
    async def test_files_through_collective_rpc_between_pause_and_resume(self, server, tok):
        srv = server()
        client = VLLMServerClient(srv.url, "tiny", tokenizer=tok, logprobs_mode="processed_logprobs")
        weights = new_weights(srv.model)
        assert await client.update_weights(weights, chunk_bytes=64 << 10) == 1
        for name, tensor in weights.items():
            assert torch.equal(srv.model.state_dict()[name], tensor), name
        calls = [p for p in srv.log if p not in ("/v1/completions done",)]
        loads = calls.count("/collective_rpc")
        assert loads > 1  # several chunks of at most 64 KiB
        assert calls == ["/pause"] + ["/collective_rpc"] * loads + ["/reset_prefix_cache", "/update_weight_version",
                                                                    "/resume"]
        assert srv.pause_mode == "wait" and not srv.paused
        assert await client.weights.weight_version() == "1" and client.version == 1

    async def test_episodes_pause_at_a_turn_boundary_and_record_the_new_version(self, server, tok):
        srv = server(delay=0.3)
        client = VLLMServerClient(srv.url, "tiny", tokenizer=tok, logprobs_mode="processed_logprobs")
        policy = client.policy()
        first = await policy.act(MESSAGES, TOOLS)
        second = asyncio.ensure_future(policy.act(after_call(MESSAGES, first), TOOLS))
        await asyncio.sleep(0.1)  # turn 2 is being generated
        await client.update_weights(new_weights(srv.model))
        await second
        third = await policy.act(after_call(after_call(MESSAGES, first), second.result()), TOOLS)
        assert third.tool_calls
        t = policy.token_trajectory()
        t.check()
        # Turn 2 was in flight: the update waited for it (no request runs while the weights change).
        assert srv.log.index("/v1/completions done", srv.log.index("/v1/completions done") + 1) < srv.log.index("/pause")
        assert [s.policy_version for s in t.turns] == [0, 0, 1] and t.policy_version == 0

    async def test_a_turn_waits_while_the_weights_change(self, server, tok):
        srv = server()
        client = VLLMServerClient(srv.url, "tiny", tokenizer=tok, logprobs_mode="processed_logprobs")
        policy = client.policy()
        await client.gate.pause()  # as update_weights does while it loads
        turn = asyncio.ensure_future(policy.act(MESSAGES, TOOLS))
        await asyncio.sleep(0.2)
        assert not turn.done() and "/v1/completions" not in srv.log
        client.version = 5
        client.gate.resume()
        await turn
        assert policy.token_trajectory().turns[0].policy_version == 5

    async def test_vllms_own_transfer_routes(self, server, tok):
        srv = server()
        control = WeightTransferControl(srv.url)

        class Sender:
            """Stands in for vLLM's NCCLTrainerWeightTransferEngine.send_weights: the control plane
            in its order (the tensors would go by NCCL meanwhile)."""

            def send_weights(self):
                control.start_weight_update()
                control.update_weights({"names": ["w"], "dtype_names": ["bfloat16"], "shapes": [[2, 2]]})
                control.finish_weight_update()

        client = VLLMServerClient(srv.url, "tiny", tokenizer=tok, logprobs_mode="processed_logprobs")
        assert await client.update_weights(transfer=Sender()) == 1
        assert srv.log == ["/pause", "/start_weight_update", "/update_weights", "/finish_weight_update",
                           "/reset_prefix_cache", "/update_weight_version", "/resume"]
        assert srv.bodies["/update_weights"][0]["update_info"]["names"] == ["w"]

    async def test_a_server_without_dev_mode_is_a_clear_error_and_nothing_changes(self, server, tok):
        srv = server(dev_mode=False)
        client = VLLMServerClient(srv.url, "tiny", tokenizer=tok, logprobs_mode="processed_logprobs")
        with pytest.raises(PolicyError, match="VLLM_SERVER_DEV_MODE=1"):
            await client.update_weights(new_weights(srv.model))
        assert client.version == 0 and not client.gate.paused
        await client.policy().act(MESSAGES, TOOLS)  # episodes go on

    async def test_a_server_without_the_extension_names_it(self, server, tok):
        srv = server(extension=False)
        client = VLLMServerClient(srv.url, "tiny", tokenizer=tok, logprobs_mode="processed_logprobs")
        with pytest.raises(PolicyError, match="worker-extension-cls cowork.agents.vllm_engine.WeightLoaderExtension"):
            await client.update_weights(new_weights(srv.model))
        assert srv.log[-1] == "/resume" and not srv.paused and client.version == 0

    def test_neither_or_both_ways_is_refused(self, server):
        weights = ServerWeights(server().url)
        with pytest.raises(ValueError, match="weights= .* or transfer="):
            asyncio.run(weights.update(version=1))


class TestSharedMemory:
    async def test_too_small_for_the_server_path_says_what_to_set_before_pausing(self, server, tok, monkeypatch):
        monkeypatch.setattr(vllm_weights, "free_bytes", lambda path: 64 << 20)  # Docker's default
        srv = server()
        client = VLLMServerClient(srv.url, "tiny", tokenizer=tok, logprobs_mode="processed_logprobs")
        big = {"w": torch.zeros(40 << 20, dtype=torch.float32)}  # 160 MiB in one tensor
        with pytest.raises(PolicyError, match=r"64 MiB free .*--shm-size=1g or --ipc=host"):
            await client.update_weights(big)
        assert "/pause" not in srv.log and client.version == 0

    def test_the_in_process_engine_falls_back_to_disk_with_a_warning(self, monkeypatch, caplog):
        monkeypatch.setattr(vllm_weights, "free_bytes", lambda path: 64 << 20)
        with caplog.at_level(logging.WARNING, logger="cowork.agents.vllm_weights"):
            assert transfer_folder(1 << 30) is None  # tempfile's default folder
        assert "--shm-size=3g or --ipc=host" in caplog.text
        assert transfer_folder(1 << 20) == "/dev/shm"  # room enough: shared memory

    def test_a_chosen_folder_is_checked_not_replaced(self, tmp_path, monkeypatch):
        assert transfer_folder(1 << 20, folder=str(tmp_path)) == str(tmp_path)
        monkeypatch.setattr(vllm_weights, "free_bytes", lambda path: 1000)
        with pytest.raises(PolicyError, match="has 1000 B free"):
            transfer_folder(1 << 20, folder=str(tmp_path))


async def test_a_server_without_update_weight_version_still_counts_the_update(server, tok):
    srv = server()
    answer = srv.answer
    srv.answer = lambda method, path, body: (404, {"detail": "Not Found"}) if path == "/update_weight_version" \
        else answer(method, path, body)
    client = VLLMServerClient(srv.url, "tiny", tokenizer=tok, logprobs_mode="processed_logprobs")
    assert await client.update_weights(new_weights(srv.model)) == 1  # the weights did change: counted
    assert srv.log[-1] == "/resume" and not srv.paused
