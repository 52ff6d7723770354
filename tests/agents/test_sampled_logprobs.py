"""The hf backend records the log-probabilities of the distribution it sampled from (temperature,
top-k, top-p applied), checked against transformers' own logits warpers on a separate forward
pass; the model's own ones beside them on request; the vLLM backends ask for and record the
same kind; the context limit of the hf model."""

from __future__ import annotations

import math

import pytest

from cowork.agents.tokens import SamplingSettings
from cowork.errors import ContextLengthExceeded

torch = pytest.importorskip("torch", reason="the hf extra (torch, transformers) is not installed")


@pytest.fixture(scope="module")
def engine():
    from cowork.agents.tiny import tiny_engine

    return tiny_engine(seed=3)


def _warped_logprobs(engine, ids, gen, s: SamplingSettings):
    """log softmax of the warped logits at each generated position, from one forward pass,
    by transformers' warpers (temperature, then top-k, then top-p), not by cowork's code."""
    from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    warpers = LogitsProcessorList([TemperatureLogitsWarper(s.temperature)]
                                  + ([TopKLogitsWarper(s.top_k)] if s.top_k else [])
                                  + ([TopPLogitsWarper(s.top_p)] if s.top_p < 1 else []))
    full = ids + gen
    with torch.no_grad():
        logits = engine.model(input_ids=torch.tensor([full])).logits[0].float()
    out, raw = [], []
    for k, tok in enumerate(gen):
        pos = len(ids) + k - 1
        prefix = torch.tensor([full[:pos + 1]])
        warped = warpers(prefix, logits[pos].unsqueeze(0).clone())[0]
        out.append(float(torch.log_softmax(warped, -1)[tok]))
        raw.append(float(torch.log_softmax(logits[pos], -1)[tok]))
    return out, raw


class TestHFLogprobs:
    SAMPLING = SamplingSettings(temperature=0.5, top_k=40, top_p=0.9, max_tokens=24, seed=11, raw_logprobs=True)

    def test_the_sampled_distributions_logprobs_and_the_raw_ones_beside(self, engine):
        ids = engine.chat.prompt([{"role": "user", "content": "Read notes.txt"}], None)
        raw: list[float] = []
        gen, lps, reason = engine.generate(ids, self.SAMPLING, raw=raw)
        assert len(gen) == len(lps) == len(raw) and gen
        want, want_raw = _warped_logprobs(engine, ids, gen, self.SAMPLING)
        for got, w in zip(lps, want):
            assert math.isfinite(got) and abs(got - w) < 1e-4, (got, w)
        assert max(abs(a - b) for a, b in zip(raw, want_raw)) < 1e-4
        # At temperature 0.5 the two differ by far more than rounding: recording the raw ones
        # as the sampler's (main's behaviour) would bias an importance-sampling ratio.
        assert sum(abs(a - b) for a, b in zip(lps, raw)) / len(gen) > 0.05

    def test_every_sampled_token_lies_in_the_nucleus(self, engine):
        ids = engine.chat.prompt([{"role": "user", "content": "Fix the CSV report"}], None)
        tight = SamplingSettings(temperature=0.7, top_k=3, max_tokens=20, seed=5)
        gen, lps, _ = engine.generate(ids, tight)
        want, _ = _warped_logprobs(engine, ids, gen, tight)
        assert all(math.isfinite(w) for w in want)  # each token was one of the top 3
        assert max(abs(a - b) for a, b in zip(lps, want)) < 1e-4

    async def test_an_episodes_trajectory_says_what_it_holds(self, engine):
        policy = engine.policy(self.SAMPLING)
        await policy.act([{"role": "user", "content": "hello"}], [])
        t = policy.token_trajectory()
        t.check()
        assert t.logprobs_mode == "processed_logprobs" and t.raw_logprobs is not None
        span = t.turns[0]
        assert t.raw_logprobs[:span.gen_start] == [None] * span.gen_start
        assert all(isinstance(x, float) for x in t.raw_logprobs[span.gen_start:span.gen_end])
        assert t.raw_logprobs[span.gen_start:span.gen_end] != t.logprobs[span.gen_start:span.gen_end]
        assert (span.policy_version, span.model) == (engine.version, engine.name)

    async def test_a_prompt_past_the_models_length_is_a_context_overflow(self, engine):
        ids = engine.chat.prompt([{"role": "user", "content": "hello"}], None)
        engine.max_length, saved = len(ids) + 3, engine.max_length
        try:
            gen, _, reason = engine.generate(ids, SamplingSettings(max_tokens=50, seed=1, temperature=1.0))
            assert len(gen) <= 3 and (reason == "length" or gen[-1] == engine.chat.end_id)
            with pytest.raises(ContextLengthExceeded, match="leaves no room"):
                engine.generate(ids + [5, 6, 7], SamplingSettings())
            # The policy takes the prompt it could not generate from back out of its trajectory.
            policy = engine.policy(SamplingSettings(max_tokens=2, seed=1))
            engine.max_length = len(ids) - 1
            with pytest.raises(ContextLengthExceeded):
                await policy.act([{"role": "user", "content": "hello"}], [])
            assert policy.token_trajectory().ids == []
        finally:
            engine.max_length = saved


class TestVLLMEngineLogprobs:
    def test_started_for_the_sampled_distribution_and_top_k_passed_on(self, monkeypatch):
        from cowork.agents import vllm_engine
        from cowork.agents.tiny import tiny_tokenizer

        seen = {}

        class FakeArgs:
            def __init__(self, **kw):
                seen.update(kw)

        class FakeAsyncLLM:
            @staticmethod
            def from_engine_args(args):
                return FakeAsyncLLM()

        import sys
        import types

        fake = types.SimpleNamespace(AsyncEngineArgs=FakeArgs, SamplingParams=lambda **kw: kw)
        monkeypatch.setattr(vllm_engine, "_vllm", lambda: fake)
        mod = types.ModuleType("vllm.v1.engine.async_llm")
        mod.AsyncLLM = FakeAsyncLLM  # type: ignore[attr-defined]
        for name in ("vllm", "vllm.v1", "vllm.v1.engine"):
            monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
        monkeypatch.setitem(sys.modules, "vllm.v1.engine.async_llm", mod)
        eng = vllm_engine.VLLMEngine.start("tiny", tokenizer=tiny_tokenizer())
        assert seen["logprobs_mode"] == "processed_logprobs" and eng.logprobs_mode == "processed_logprobs"
        params = eng.params(SamplingSettings(temperature=0.5, top_k=20, top_p=0.9))
        assert (params["top_k"], params["temperature"], params["top_p"]) == (20, 0.5, 0.9)
        assert "top_k" not in eng.params(SamplingSettings())  # 0 = all tokens: vLLM's own default
        assert eng.policy().token_trajectory().logprobs_mode == "processed_logprobs"

    async def test_a_too_long_prompt_is_a_context_overflow(self):
        from cowork.agents.tiny import tiny_tokenizer
        from cowork.agents.vllm_engine import VLLMEngine

        class LLM:
            async def generate(self, prompt, params, request_id):
                raise ValueError("The decoder prompt (length 5000) is longer than the maximum model length of 4096.")
                yield  # an async generator

        eng = VLLMEngine(LLM(), tiny_tokenizer(), name="tiny", sampling_params=lambda **kw: kw)
        policy = eng.policy()
        with pytest.raises(ContextLengthExceeded, match="no longer fits"):
            await policy.act([{"role": "user", "content": "hi"}], [])
        assert policy.token_trajectory().ids == []  # the prompt it never generated from is taken back

    async def test_each_turn_records_the_engines_weights_version_and_stop(self):
        from types import SimpleNamespace

        from cowork.agents.tiny import tiny_tokenizer
        from cowork.agents.vllm_engine import VLLMEngine

        tok = tiny_tokenizer()

        class LLM:
            model_config = SimpleNamespace(logprobs_mode="processed_logprobs")

            async def generate(self, prompt, params, request_id):
                ids = tok.encode("Done.") + [tok.convert_tokens_to_ids("<|im_end|>")]
                yield SimpleNamespace(outputs=[SimpleNamespace(
                    token_ids=ids, logprobs=[{t: SimpleNamespace(logprob=-0.5)} for t in ids],
                    finish_reason="stop", stop_reason=None)])

        eng = VLLMEngine(LLM(), tok, name="tiny", sampling_params=lambda **kw: kw)
        eng.version = 5  # as after five weight loads
        policy = eng.policy()
        await policy.act([{"role": "user", "content": "hi"}], [])
        t = policy.token_trajectory()
        assert t.logprobs_mode == "processed_logprobs"  # read from the engine's model config
        assert [(s.policy_version, s.model, s.finish_reason) for s in t.turns] == [(5, "tiny", "stop")]
