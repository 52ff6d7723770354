"""scripts/gpu_vllm_check.py without a GPU: its arguments, its dry run (what would run, and the
`vllm serve` command line of the weight-sync checks), and its refusal without vLLM."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_vllm_check.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("gpu_vllm_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


class TestArguments:
    def test_groups_run_in_their_order_whatever_the_order_given(self, script):
        assert script.parse(["--only", "server,partial"]).only == ["partial", "server"]
        assert script.parse([]).only == ["engine", "partial", "async", "server"]

    def test_an_unknown_group_is_refused_with_the_choices(self):
        proc = run("--only", "partial,weights")
        assert proc.returncode == 2 and "unknown check group(s) ['weights']" in proc.stderr
        assert "engine, partial, async, server" in proc.stderr

    def test_the_server_command_has_dev_mode_and_the_worker_extension(self, script):
        cmd, env = script.server_command("/models/m", script.parse(["--gpu-memory-utilization", "0.2"]), 8123)
        assert cmd[cmd.index("serve") + 1] == "/models/m" and cmd[cmd.index("--port") + 1] == "8123"
        assert cmd[cmd.index("--worker-extension-cls") + 1] == "cowork.agents.vllm_engine.WeightLoaderExtension"
        assert "--enforce-eager" in cmd and cmd[cmd.index("--gpu-memory-utilization") + 1] == "0.2"
        assert env["VLLM_SERVER_DEV_MODE"] == "1" and env["PYTHONPATH"].split(":")[0] == str(ROOT / "runtime")
        cmd, _ = script.server_command("/models/m", script.parse(["--cuda-graphs"]), 8123)
        assert "--enforce-eager" not in cmd


class TestRun:
    def test_a_dry_run_says_what_would_run_without_a_gpu(self):
        proc = run("--dry-run", "--model", "tiny", "--only", "async,partial,server")
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert lines[0] == "model tiny; groups partial, async, server"
        assert [ln.split(":")[0].strip() for ln in lines[1:4]] == ["partial", "async", "server"]
        assert "VLLM_SERVER_DEV_MODE=1" in lines[4] and "--worker-extension-cls" in lines[4]
        assert lines[-1] == "0 passed, 0 failed (dry run)"

    def test_without_vllm_it_stops_on_the_prerequisites(self):
        if importlib.util.find_spec("vllm") is not None:
            pytest.skip("vllm is installed here")
        proc = run("--model", "tiny", "--only", "partial")
        assert proc.returncode == 2 and proc.stdout.startswith("FAIL prerequisites")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def on_cpu(script):
    """The script's reference on the CPU, and a tiny model folder (the script's own) loaded in
    the hf backend, which the stand-ins below generate with."""
    pytest.importorskip("torch", reason="the hf extra (torch, transformers) is not installed")
    from cowork.agents.hf import HFEngine

    script.DEVICE = "cpu"
    folder = script.tiny_folder()
    yield folder, HFEngine.from_pretrained(folder, dtype="float32")
    script.DEVICE = "cuda"
    shutil.rmtree(folder, ignore_errors=True)


def _raw(hf, prompt, max_tokens):
    """A greedy turn of the hf model with the model's own (raw) logprobs, as vLLM returns them."""
    from cowork.agents.tokens import SamplingSettings

    gen, _, reason = hf.generate(list(prompt), SamplingSettings(temperature=0, max_tokens=max_tokens))
    own = hf.token_logprobs(list(prompt) + gen).tolist()[len(prompt) - 1:]
    return gen, own, "length" if reason == "length" else "stop"


class TestChecksOnStandIns:
    """The partial, async and server checks run as written against stand-ins that generate with
    a real model (the engine's AsyncLLM, the server's routes): each check must pass."""

    async def test_partial_and_async(self, script, on_cpu, monkeypatch):
        import asyncio
        from types import SimpleNamespace

        from cowork.agents.vllm_engine import VLLMEngine

        folder, hf = on_cpu
        engine_tests = _load(ROOT / "tests" / "agents" / "test_vllm_engine_policy.py", "engine_stand_ins")

        async def generate(ids, p):
            await asyncio.sleep(0.02)  # a turn takes a while: the loads below find one in flight
            gen, lps, finish = await asyncio.to_thread(_raw, hf, ids, p.max_tokens)
            return gen, lps, finish, None

        llm = engine_tests.FakeAsyncLLM(generate, [engine_tests.Worker(hf.model)])
        engine = VLLMEngine(llm, hf.tokenizer, name="tiny", sampling_params=lambda **kw: SimpleNamespace(**kw))
        monkeypatch.setattr(script, "docker_ok", lambda: False)  # stand-in episodes: no sandboxes
        monkeypatch.setattr(script, "RESULTS", [])
        args = script.parse(["--model", folder, "--max-tokens", "8", "--noise", "0.3"])
        await script.partial_checks(engine, folder, args)
        await script.stream_checks(engine, folder, args)
        assert script.RESULTS == [True] * 5

    async def test_server(self, script, on_cpu, monkeypatch):
        folder, hf = on_cpu
        weights_tests = _load(ROOT / "tests" / "agents" / "test_vllm_weights.py", "server_stand_in")

        class ModelServer(weights_tests.FakeVLLMServer):
            def answer(self, method, raw_path, body):
                return (200, {}) if raw_path == "/health" else super().answer(method, raw_path, body)

            def complete(self, body):
                if self.paused:
                    return 503, {"object": "error", "message": "the engine is paused"}
                gen, lps, finish = _raw(hf, body["prompt"], body["max_tokens"])
                return 200, {"choices": [{"index": 0, "text": "", "token_ids": gen, "finish_reason": finish,
                                          "stop_reason": None, "logprobs": {"token_logprobs": lps}}]}

        class Process:
            """`vllm serve` already running: the stand-in."""

            def __init__(self, cmd, **kw):
                self.cmd = cmd

            def poll(self):
                return None

            def terminate(self):
                pass

            def wait(self, timeout=None):
                return 0

        srv = ModelServer(hf.tokenizer, hf.model)
        try:
            monkeypatch.setattr(script, "free_port", lambda: srv.httpd.server_port)
            monkeypatch.setattr(script.subprocess, "Popen", Process)
            monkeypatch.setattr(script, "RESULTS", [])
            await script.server_checks(folder, script.parse(["--model", folder, "--max-tokens", "8", "--noise", "0.3"]))
        finally:
            srv.close()
        assert script.RESULTS == [True] * 5
        assert srv.log.count("/pause") == 1 and srv.weight_version == "1"
