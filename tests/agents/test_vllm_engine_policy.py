"""The in-process vLLM backend. Its logic (token buffer, finish reasons, weight loading through
the worker extension) runs against stand-ins for vLLM's AsyncLLM with the same calls and
output shapes, one of them generating with the tiny transformers model; the real engine is
tested where vllm and a GPU are present."""

from __future__ import annotations

import asyncio
import glob
from types import SimpleNamespace

import pytest

from cowork.agents.chat_tokens import ChatTokens
from cowork.agents.tokens import SamplingSettings
from cowork.agents.vllm_engine import (
    LOAD_METHOD,
    VLLMEngine,
    WeightLoaderExtension,
)
from cowork.errors import PolicyError
from cowork.formats import INVALID_ARGUMENTS_KEY

torch = pytest.importorskip("torch", reason="the hf extra (torch, transformers) is not installed")

CALL = '<tool_call>\n{{"name": "read_file", "arguments": {{"path": "{path}"}}}}\n</tool_call>'
USER = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Read notes.txt"}]
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}}}}]


def params(**kw):
    """Stands in for vllm.SamplingParams."""
    return SimpleNamespace(**kw)


def output(ids, lps, finish, stop_reason=None):
    """A RequestOutput-like object: outputs[0] with token_ids, per-token logprob dicts, finish."""
    logprobs = [{tok: SimpleNamespace(logprob=lp), tok + 1: SimpleNamespace(logprob=lp - 5)}
                for tok, lp in zip(ids, lps)]
    return SimpleNamespace(outputs=[SimpleNamespace(token_ids=list(ids), logprobs=logprobs, finish_reason=finish,
                                                    stop_reason=stop_reason)], finished=finish is not None)


class Worker(WeightLoaderExtension):
    """A vLLM worker with the extension mixed in, over a transformers model."""

    def __init__(self, model):
        def load_weights(weights):
            own = model.state_dict(keep_vars=True)
            with torch.no_grad():
                for name, tensor in weights:
                    own[name].copy_(tensor)

        self.model_runner = SimpleNamespace(model=SimpleNamespace(load_weights=load_weights))


class FakeAsyncLLM:
    """AsyncLLM's calls: generate (cumulative outputs, then the final one), collective_rpc,
    reset_prefix_cache, shutdown. Generates with ``generator(ids, params)``."""

    def __init__(self, generator, workers=()):
        self.generator, self.workers = generator, list(workers)
        self.prompts, self.params, self.rpcs, self.events = [], [], [], []
        self.resets = 0
        self.closed = False

    async def generate(self, prompt, sampling_params, request_id):
        assert set(prompt) == {"prompt_token_ids"} and request_id.startswith("cowork-")
        self.prompts.append(list(prompt["prompt_token_ids"]))
        self.params.append(sampling_params)
        self.events.append("generate")
        ids, lps, finish, stop_reason = await self.generator(prompt["prompt_token_ids"], sampling_params)
        if len(ids) > 1:
            yield output(ids[:1], lps[:1], None)
        yield output(ids, lps, finish, stop_reason)

    async def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        self.rpcs.append((method, args))
        self.events.append("rpc")
        return [getattr(w, method)(*args, **(kwargs or {})) for w in self.workers]

    async def reset_prefix_cache(self):
        self.resets += 1

    def shutdown(self):
        self.closed = True


@pytest.fixture(scope="module")
def tok():
    from cowork.agents.tiny import tiny_tokenizer

    return tiny_tokenizer()


def scripted(tok, texts):
    """A generator playing ``texts`` as vLLM would: end token included when the turn ends by
    itself, cut at max_tokens (``length``)."""
    chat = ChatTokens(tok)
    texts = list(texts)

    async def generate(ids, p):
        out = chat.encode(texts.pop(0)) + [chat.end_id]
        if len(out) > p.max_tokens:
            return out[:p.max_tokens], [-0.5] * p.max_tokens, "length", None
        return out, [-0.1 * (i % 5 + 1) for i in range(len(out))], "stop", chat.end_id

    return generate


def engine_on(llm, tok, **kw):
    return VLLMEngine(llm, tok, name="tiny", sampling_params=params, **kw)


async def play(policy, tool_output="quarterly numbers: 42", turns=3):
    """What run_episode does, without a sandbox: answer every tool call with ``tool_output``."""
    messages, out = list(USER), []
    for _ in range(turns):
        turn = await policy.act(messages, TOOLS)
        out.append(turn)
        msg = {"role": "assistant", "content": turn.content}
        if turn.tool_calls:
            msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": "{}"}}
                                 for c in turn.tool_calls]
        messages.append(msg)
        if not turn.tool_calls:
            break
        messages += [{"role": "tool", "tool_call_id": c.id, "content": tool_output} for c in turn.tool_calls]
    return out


class TestTokenBookkeeping:
    async def test_turns_are_append_only_and_the_mask_covers_exactly_what_vllm_generated(self, tok):
        llm = FakeAsyncLLM(scripted(tok, [CALL.format(path="notes.txt"), CALL.format(path="b.txt"), "It is 42."]))
        policy = engine_on(llm, tok).policy(SamplingSettings(temperature=0.6, top_p=0.95, max_tokens=300, seed=9))
        turns = await play(policy)
        assert [t.extra["finish_reason"] for t in turns] == ["tool_calls", "tool_calls", "stop"]
        assert turns[0].tool_calls[0].arguments == {"path": "notes.txt"} and policy.name == "vllm:tiny"
        t = policy.token_trajectory()
        t.check()
        generated = [t.ids[s.gen_start:s.gen_end] for s in t.turns]
        for (p0, g0), p1 in zip(zip(llm.prompts, generated), llm.prompts[1:]):
            assert p1[:len(p0) + len(g0)] == p0 + g0
        assert t.ids == llm.prompts[-1] + generated[-1] and sum(t.mask) == sum(map(len, generated))
        assert [lp for lp in t.logprobs if lp is not None] == [-0.1 * (i % 5 + 1) for g in generated
                                                              for i in range(len(g))]
        assert all("quarterly numbers: 42" in tok.decode(t.ids[a:b]) for a, b in t.env_spans())
        # vLLM's settings per request: raw logprobs of the sampled token, the end token ends the turn.
        p = llm.params[1]
        assert (p.temperature, p.top_p, p.max_tokens, p.seed, p.logprobs) == (0.6, 0.95, 300, 11, 0)
        assert p.stop_token_ids == [ChatTokens(tok).end_id] and p.stop is None

    async def test_length_and_malformed_calls_end_cleanly(self, tok):
        llm = FakeAsyncLLM(scripted(tok, ['<tool_call>\n{"name": "read_file", "arguments": "[1]"}\n</tool_call>',
                                          "a long answer that will not fit in four tokens"]))
        policy = engine_on(llm, tok).policy(SamplingSettings(max_tokens=40))
        first = await policy.act(USER, TOOLS)
        assert first.extra["finish_reason"] == "tool_calls"
        assert INVALID_ARGUMENTS_KEY in first.tool_calls[0].arguments
        policy.sampling = SamplingSettings(max_tokens=4)
        msgs = USER + [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "ERROR: bad arguments"}]
        second = await policy.act(msgs, TOOLS)
        assert second.extra["finish_reason"] == "length" and not second.tool_calls
        t = policy.token_trajectory()
        t.check()
        assert t.turns[1].finish_reason == "length" and t.turns[1].gen_end - t.turns[1].gen_start == 4

    async def test_an_aborted_or_failed_generation_is_a_policy_error(self, tok):
        async def aborted(ids, p):
            return [5], [-1.0], "abort", None

        with pytest.raises(PolicyError, match="aborted"):
            await engine_on(FakeAsyncLLM(aborted), tok).policy().act(USER, TOOLS)

        async def too_long(ids, p):
            raise ValueError("The decoder prompt (length 99999) is longer than the maximum model length")

        with pytest.raises(PolicyError, match="maximum model length"):
            await engine_on(FakeAsyncLLM(too_long), tok).policy().act(USER, TOOLS)

    async def test_missing_logprobs_are_a_policy_error(self, tok):
        class NoLogprobs(FakeAsyncLLM):
            async def generate(self, prompt, sampling_params, request_id):
                out = output([5, 6], [-1.0, -1.0], "stop")
                out.outputs[0].logprobs = None
                yield out

        with pytest.raises(PolicyError, match="log-probability"):
            await engine_on(NoLogprobs(None), tok).policy().act(USER, TOOLS)

    def test_close_shuts_the_engine_down(self, tok):
        llm = FakeAsyncLLM(None)
        engine_on(llm, tok).close()
        assert llm.closed


@pytest.fixture
def tiny(tok):
    """A fake AsyncLLM generating with the tiny transformers model, with one worker over it."""
    from cowork.agents.tiny import tiny_engine

    hf = tiny_engine(seed=2)

    async def generate(ids, p):
        s = SamplingSettings(temperature=p.temperature, top_p=p.top_p, max_tokens=p.max_tokens, seed=p.seed)
        gen, lps, reason = await asyncio.to_thread(hf.generate, list(ids), s)
        return gen, lps, "length" if reason == "length" else "stop", None

    return hf, FakeAsyncLLM(generate, [Worker(hf.model)])


class TestWeights:
    async def test_load_weights_changes_the_outputs_and_counts_versions(self, tok, tiny):
        hf, llm = tiny
        engine = engine_on(llm, tok, sampling=SamplingSettings(temperature=0, max_tokens=12))
        before = await engine.policy().act(USER, TOOLS)
        t0 = hf.token_logprobs(engine.policy().engine.chat.prompt(USER, TOOLS))
        original = {k: v.clone() for k, v in hf.model.state_dict().items()}
        torch.manual_seed(0)
        perturbed = {k: v + 0.5 * torch.randn_like(v) for k, v in original.items()}

        assert await engine.load_weights(perturbed) == 1
        assert llm.rpcs[0][0] == LOAD_METHOD and llm.resets == 1 and engine.version == 1
        assert not glob.glob(llm.rpcs[0][1][0])  # the transfer file is gone
        policy = engine.policy()
        after = await policy.act(USER, TOOLS)
        assert policy.token_trajectory().policy_version == 1 and after.extra["policy_version"] == 1
        assert before.extra["policy_version"] == 0
        assert not torch.allclose(hf.token_logprobs(engine.chat.prompt(USER, TOOLS)), t0)
        # The logprobs the policy kept are those of the new weights.
        t = policy.token_trajectory()
        full = hf.token_logprobs(t.ids).tolist()
        assert all(abs(lp - full[i - 1]) < 1e-4 for i, lp in enumerate(t.logprobs) if lp is not None)

        # Back to the original weights (as (name, tensor) pairs, in small chunks): the same greedy turn.
        assert await engine.load_weights(list(original.items()), chunk_bytes=4096) == 2
        assert len(llm.rpcs) > 2 and llm.resets == 2
        again = await engine.policy().act(USER, TOOLS)
        assert (again.content, again.extra["tokens"]) == (before.content, before.extra["tokens"])

    async def test_tied_weights_sharing_storage_are_sent(self, tok, tiny):
        hf, llm = tiny
        engine = engine_on(llm, tok)
        emb = hf.model.get_input_embeddings().weight
        assert emb.data_ptr() == hf.model.lm_head.weight.data_ptr()  # tied in the tiny model
        await engine.load_weights([("model.embed_tokens.weight", emb), ("lm_head.weight", hf.model.lm_head.weight)])
        assert engine.version == 1

    async def test_a_load_waits_for_generations_in_flight_and_holds_new_ones(self, tok):
        release = asyncio.Event()
        chat = ChatTokens(tok)

        async def slow(ids, p):
            await release.wait()
            return [chat.end_id], [-0.1], "stop", None

        class NoopWorker(WeightLoaderExtension):
            def cowork_load_weights_file(self, path):
                return 1

        llm = FakeAsyncLLM(slow, [NoopWorker()])
        engine = engine_on(llm, tok)
        first = asyncio.create_task(engine.policy().act(USER, TOOLS))
        while not llm.prompts:
            await asyncio.sleep(0.01)
        load = asyncio.create_task(engine.load_weights({"w": torch.zeros(2)}))
        await asyncio.sleep(0.05)
        second = asyncio.create_task(engine.policy().act(USER, TOOLS))
        await asyncio.sleep(0.05)
        assert not load.done() and llm.rpcs == [] and len(llm.prompts) == 1
        release.set()
        await asyncio.gather(first, load, second)
        assert llm.events == ["generate", "rpc", "generate"]
        assert (await second).extra["policy_version"] == 1

    async def test_a_failed_load_is_a_policy_error_and_releases_the_engine(self, tok):
        class Broken(WeightLoaderExtension):
            def cowork_load_weights_file(self, path):
                raise KeyError("model.layers.99.mlp.up_proj.weight")

        llm = FakeAsyncLLM(scripted(tok, ["fine"]), [Broken()])
        engine = engine_on(llm, tok)
        with pytest.raises(PolicyError, match="worker_extension_cls"):
            await engine.load_weights({"model.layers.99.mlp.up_proj.weight": torch.zeros(1)})
        assert engine.version == 0 and llm.resets == 0
        turn = await asyncio.wait_for(engine.policy().act(USER, TOOLS), 5)
        assert turn.content == "fine"

    async def test_a_load_failing_halfway_resets_the_cache_and_keeps_the_version(self, tok):
        class HalfBroken(WeightLoaderExtension):
            calls = 0

            def cowork_load_weights_file(self, path):
                HalfBroken.calls += 1
                if HalfBroken.calls == 2:
                    raise RuntimeError("CUDA error: out of memory")
                return 1

        class Reluctant(FakeAsyncLLM):
            async def reset_prefix_cache(self):
                self.resets += 1
                return self.resets > 1  # vLLM refuses while requests still run

        llm = Reluctant(None, [HalfBroken()])
        engine = engine_on(llm, tok)
        with pytest.raises(PolicyError, match="out of memory"):
            await engine.load_weights({"a": torch.zeros(4), "b": torch.zeros(4)}, chunk_bytes=16)
        assert HalfBroken.calls == 2 and llm.resets == 2 and engine.version == 0

    async def test_nothing_to_load(self, tok):
        with pytest.raises(ValueError, match="no tensors"):
            await engine_on(FakeAsyncLLM(None), tok).load_weights({})


# ------------------------------------------------------------------------------ the real engine
@pytest.fixture(scope="module")
def real_engine(tmp_path_factory, tok):
    pytest.importorskip("vllm", reason="vllm is not installed (it needs a GPU: pip install 'cowork-runtime[vllm]')")
    if not torch.cuda.is_available():
        pytest.skip("vLLM needs a CUDA GPU")
    from cowork.agents.tiny import tiny_model

    folder = tmp_path_factory.mktemp("tiny-vllm")
    tiny_model(len(tok), hidden=256, seed=3).save_pretrained(folder)  # head size 64: vLLM's kernels take it
    tok.save_pretrained(folder)
    engine = VLLMEngine.start(str(folder), gpu_memory_utilization=0.2, max_model_len=4096, enforce_eager=True,
                              sampling=SamplingSettings(temperature=0, max_tokens=24))
    yield engine, folder
    engine.close()


def forward_logprobs(model, ids):
    """log p(ids[i] | ids[:i]) for i >= 1, from one forward pass."""
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, :-1].float(), -1)
    return lp.gather(1, torch.tensor(ids[1:]).unsqueeze(1)).squeeze(1).tolist()


def mean_gap(t, ref):
    gaps = [abs(x - ref[i - 1]) for i, x in enumerate(t.logprobs) if x is not None]
    return sum(gaps) / len(gaps)


class TestRealVLLM:
    async def test_two_turns_append_only_and_weights_load(self, real_engine):
        engine, folder = real_engine
        from transformers import AutoModelForCausalLM

        policy = engine.policy()
        first = await policy.act(USER, TOOLS)
        messages = USER + [{"role": "assistant", "content": first.content or ""}, {"role": "user", "content": "Go on."}]
        await policy.act(messages, TOOLS)
        t = policy.token_trajectory()
        t.check()
        assert len(t.turns) == 2 and t.turns[1].prompt_start == t.turns[0].gen_end
        hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        assert mean_gap(t, forward_logprobs(hf, t.ids)) < 0.05

        torch.manual_seed(0)
        state = {k: v + 0.05 * torch.randn_like(v) for k, v in hf.state_dict().items() if k != "lm_head.weight"}
        hf.load_state_dict(state, strict=False)
        assert await engine.load_weights(state) == 1
        again = engine.policy()
        await again.act(USER, TOOLS)  # the same prompt, cached under the old weights before the reset
        t2 = again.token_trajectory()
        assert t2.policy_version == 1 and mean_gap(t2, forward_logprobs(hf, t2.ids)) < 0.05
        g1 = t.ids[t.turns[0].gen_start:t.turns[0].gen_end]
        assert t2.ids[t2.turns[0].gen_start:t2.turns[0].gen_end] != g1 or \
            t2.logprobs[t2.turns[0].gen_start:] != t.logprobs[t.turns[0].gen_start:t.turns[0].gen_end]
