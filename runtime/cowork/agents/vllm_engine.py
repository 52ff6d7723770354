"""An in-process vLLM engine as a policy (extra ``vllm``, needs a GPU), with the token ids and
log-probabilities of every turn, and weight updates between training steps.

One :class:`VLLMEngine` holds a vLLM ``AsyncLLM`` and the model's tokenizer; each episode gets
its own :class:`VLLMPolicy` (``engine.policy()``), which keeps the episode's append-only token
buffer (:class:`~cowork.agents.vllm_server.TokenBuffer`) and sends it to the engine as a token
prompt: what the trainer gets is exactly what vLLM conditioned on and sampled. The buffer only
grows, so vLLM's prefix cache serves each turn's prompt from the previous turn's blocks.

Weight updates (:meth:`VLLMEngine.load_weights`) go through vLLM's documented extension point
for RL: a worker extension class (``worker_extension_cls``) whose method, reached with
``AsyncLLM.collective_rpc``, hands ``(name, tensor)`` pairs to the model's own
``load_weights`` (which maps checkpoint names, e.g. separate q/k/v onto vLLM's fused
projection, and shards under tensor parallelism). The tensors travel as safetensors files
in shared memory, so only a path crosses the RPC: that works whatever vLLM's RPC serializer
accepts, in one process or many. After the load the prefix cache is reset (its blocks hold
keys and values of the old weights) and the engine's ``version`` goes up.

Log-probabilities are those of the distribution sampled (temperature, top-k and top-p
applied): :meth:`VLLMEngine.start` starts vLLM with ``logprobs_mode="processed_logprobs"``,
as the hf backend computes them; an engine built elsewhere records the mode it runs with.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import ContextLengthExceeded, PolicyError, require_extra
from ..llm import is_context_overflow
from .base import AssistantTurn
from .chat_tokens import ChatTokens
from .gate import TurnGate
from .tokens import LogprobsMode, SamplingSettings, TokenTrajectory
from .vllm_server import Generation, TokenBuffer, turn_sampling
from .vllm_weights import LOAD_METHOD, PROBE_METHOD, chunks, save_chunk, transfer_folder
from .vllm_weights import chunk_bytes as cowork_chunk_bytes

log = logging.getLogger(__name__)

#: The worker extension vLLM mixes into its workers (found by this qualified name).
WORKER_EXTENSION = "cowork.agents.vllm_engine.WeightLoaderExtension"


def _vllm() -> Any:
    return require_extra("vllm", "vllm", "the vllm backend needs vLLM and a GPU",
                         "or use the vllm-server backend against a running server", error=PolicyError)


class WeightLoaderExtension:
    """Mixed into each vLLM GPU worker by ``worker_extension_cls``; never built by cowork.

    vLLM resolves it by name in its worker processes, so this module imports nothing of
    vLLM, torch or transformers at the top.
    """

    model_runner: Any

    def cowork_load_weights_file(self, path: str) -> int:
        """Load every tensor of the safetensors file ``path`` into the running model.

        Returns:
            How many tensors the file held.
        """
        from safetensors import safe_open

        runner = self.model_runner
        model = runner.get_model() if hasattr(runner, "get_model") else runner.model
        with safe_open(path, framework="pt", device="cpu") as f:
            names = list(f.keys())
            model.load_weights(weights=((name, f.get_tensor(name)) for name in names))
        return len(names)

    def cowork_weight_loader_ready(self) -> bool:
        """True: the extension is mixed in (``ServerWeights.probe`` asks through ``/collective_rpc``)."""
        return True


class VLLMEngine:
    """A running vLLM engine and its tokenizer, shared by the policies of many episodes.

    Args:
        llm: A vLLM ``AsyncLLM`` (``generate(prompt, sampling_params, request_id)``,
            ``collective_rpc``, ``reset_prefix_cache``, ``shutdown``), started with
            ``worker_extension_cls=WORKER_EXTENSION`` for :meth:`load_weights`.
        tokenizer: The model's tokenizer, with a chat template that renders ``tools``.
        name: Model name recorded in trajectories.
        sampling: Default sampling settings of its policies.
        end_token: The token that ends an assistant turn (default: the tokenizer's eos).
        template_kwargs: Extra arguments for the chat template.
        sampling_params: Makes vLLM's per-request settings from keyword arguments (default
            ``vllm.SamplingParams``).
        logprobs_mode: What the engine's log-probabilities are (default: its model config's
            ``logprobs_mode``, else vLLM's default ``raw_logprobs``).
    """

    def __init__(self, llm: Any, tokenizer: Any, *, name: str, sampling: SamplingSettings | None = None,
                 end_token: str | None = None, template_kwargs: dict | None = None,
                 sampling_params: Callable[..., Any] | None = None, logprobs_mode: LogprobsMode | None = None):
        self.llm = llm
        self.tokenizer = tokenizer
        self.chat = ChatTokens(tokenizer, end_token=end_token, template_kwargs=template_kwargs)
        self.sampling = sampling or SamplingSettings()
        self.name = name
        self.version = 0
        self._sampling_params = sampling_params
        said = getattr(getattr(llm, "model_config", None), "logprobs_mode", None)
        said = getattr(said, "value", said)  # an enum in some vLLM versions
        self.logprobs_mode: LogprobsMode = logprobs_mode or (
            said if said in ("processed_logprobs", "raw_logprobs") else "raw_logprobs")
        self._active = 0
        self._updating = False
        self._gate: asyncio.Condition | None = None
        self.gate = TurnGate()
        """Pauses the engine's episodes at a turn boundary (:meth:`pause`)."""

    @classmethod
    def start(cls, model: str, *, tokenizer: Any = None, sampling: SamplingSettings | None = None,
              end_token: str | None = None, template_kwargs: dict | None = None, **engine_args: Any) -> VLLMEngine:
        """Start vLLM on ``model`` (a folder or hub name) in this process.

        Args:
            model: A model folder or hub name.
            tokenizer: The tokenizer (default: loaded from ``model``).
            sampling: Default sampling settings of the engine's policies.
            end_token: The token that ends an assistant turn (default: the tokenizer's eos).
            template_kwargs: Extra arguments for the chat template.
            engine_args: ``vllm.AsyncEngineArgs`` fields (``gpu_memory_utilization``,
                ``max_model_len``, ``dtype``, ``enforce_eager``, ``tensor_parallel_size``, ...).

        Raises:
            PolicyError: when vLLM is not installed.
        """
        vllm = _vllm()
        from vllm.v1.engine.async_llm import AsyncLLM

        engine_args.setdefault("worker_extension_cls", WORKER_EXTENSION)
        # The sampled distribution's log-probabilities (vLLM >= 0.10.2): what importance
        # sampling between this sampler and the trainer needs.
        engine_args.setdefault("logprobs_mode", "processed_logprobs")
        llm = AsyncLLM.from_engine_args(vllm.AsyncEngineArgs(model=model, **engine_args))
        try:
            if tokenizer is None:
                from transformers import AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(model)
            return cls(llm, tokenizer, name=model, sampling=sampling, end_token=end_token,
                       template_kwargs=template_kwargs, sampling_params=vllm.SamplingParams,
                       logprobs_mode=engine_args["logprobs_mode"])
        except BaseException:
            llm.shutdown()
            raise

    async def pause(self) -> None:
        """Stop the engine's episodes at their next turn boundary, as ``HFEngine.pause`` does.

        :meth:`load_weights` needs no pause (it waits for the generations in flight and holds
        new ones itself); pause when the weights change some other way (vLLM's own weight
        transfer through ``llm``, say) or when several loads must land together. Pauses nest.
        """
        await self.gate.pause()

    def resume(self) -> None:
        """Let the paused episodes go on (undoes one :meth:`pause`).

        Raises:
            RuntimeError: when the engine is not paused.
        """
        self.gate.resume()

    def mark_updated(self) -> int:
        """Count a weight update made some other way (between :meth:`pause` and :meth:`resume`);
        returns the new version, which later turns record."""
        self.version += 1
        return self.version

    def policy(self, sampling: SamplingSettings | None = None) -> VLLMPolicy:
        """A policy for one episode (default settings: the engine's)."""
        return VLLMPolicy(self, sampling or self.sampling)

    def close(self) -> None:
        """Shut the engine down (its GPU memory and worker processes are released)."""
        shutdown = getattr(self.llm, "shutdown", None)
        if callable(shutdown):
            shutdown()

    # ------------------------------------------------------------------ generation
    def _condition(self) -> asyncio.Condition:
        if self._gate is None:
            self._gate = asyncio.Condition()
        return self._gate

    def params(self, s: SamplingSettings) -> Any:
        """The vLLM sampling parameters for one request of ``s``: the sampled tokens' log-probabilities, and
        the turn ended by the end-of-turn token whatever the model's generation config says."""
        make = self._sampling_params or _vllm().SamplingParams
        extra = {"top_k": s.top_k} if s.top_k else {}
        return make(temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_tokens, stop=list(s.stop) or None,
                    seed=s.seed, logprobs=0, stop_token_ids=[self.chat.end_id], skip_special_tokens=False, **extra)

    async def generate(self, ids: list[int], sampling: SamplingSettings) -> Generation:
        """Generate one turn after the prompt ``ids``; waits while weights are being loaded.

        Raises:
            PolicyError: when vLLM fails or returns no log-probabilities.
        """
        params = self.params(sampling)
        gate = self._condition()
        async with gate:
            await gate.wait_for(lambda: not self._updating)
            self._active += 1
            version = self.version
        final = None
        try:
            async for out in self.llm.generate({"prompt_token_ids": list(ids)}, params, f"cowork-{uuid.uuid4().hex}"):
                final = out
        except Exception as exc:  # engine dead, prompt longer than max_model_len, ...
            if is_context_overflow(str(exc)):
                raise ContextLengthExceeded(f"vLLM ({self.name}): the prompt of {len(ids)} tokens no longer fits "
                                            f"the model's context: {exc}") from exc
            raise PolicyError(f"vLLM generation with {self.name} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            async with gate:
                self._active -= 1
                gate.notify_all()
        if final is None or not getattr(final, "outputs", None):
            raise PolicyError(f"vLLM returned no output for {self.name}")
        out = final.outputs[0]
        gen = list(out.token_ids)
        if out.logprobs is None or len(out.logprobs) != len(gen):
            raise PolicyError(f"vLLM returned {0 if out.logprobs is None else len(out.logprobs)} log-probability "
                              f"entries for {len(gen)} tokens")
        try:
            lps = [float(out.logprobs[i][tok].logprob) for i, tok in enumerate(gen)]
        except (KeyError, TypeError, AttributeError) as exc:
            raise PolicyError(f"vLLM's log-probabilities lack a sampled token: {exc}") from exc
        return Generation(gen, lps, out.finish_reason, out.stop_reason, extra={"policy_version": version})

    # ------------------------------------------------------------------ weights
    async def load_weights(self, weights: Mapping[str, Any] | Iterable[tuple[str, Any]], *,
                           chunk_bytes: int = 1 << 30) -> int:
        """Load new weights into the running engine (after an optimizer step elsewhere).

        Waits for the generations in flight to finish and holds new ones until the load is
        done, so no turn mixes two versions. Checkpoint names as the model's transformers
        class has them (``model.layers.0.self_attn.q_proj.weight``, ...); any dtype and
        device (they are converted to the engine's).

        Args:
            weights: A state dict, or ``(name, tensor)`` pairs (a part of the model will do).
            chunk_bytes: Most bytes per transfer file.

        Returns:
            The new weights version (also the ``policy_version`` of later trajectories).

        Raises:
            ValueError: when there is nothing to load.
            PolicyError: when a worker fails to load them (if some chunks had loaded, the engine
                holds a mix of old and new weights until a load succeeds; the version stays).
        """
        items = list(weights.items()) if isinstance(weights, Mapping) else list(weights)
        if not items:
            raise ValueError("load_weights got no tensors")
        gate = self._condition()
        async with gate:
            await gate.wait_for(lambda: not self._updating)
            self._updating = True
        try:
            async with gate:
                await gate.wait_for(lambda: self._active == 0)
            parts = chunks(items, chunk_bytes)
            # /dev/shm when it has room for a chunk, else a folder on disk (with a warning that
            # says what to set): Docker's default 64 MiB would fail the write part-way.
            folder = tempfile.mkdtemp(prefix="cowork-weights-",
                                      dir=transfer_folder(max(map(cowork_chunk_bytes, parts))))
            done = 0
            try:
                for n, chunk in enumerate(parts):
                    await self._load_file(chunk, os.path.join(folder, f"chunk-{n}.safetensors"))
                    done += 1
            except BaseException:
                if done:
                    log.error("%s: a weight load failed after %d chunk(s): the engine holds old and new weights "
                              "until a load succeeds", self.name, done)
                    await self._reset_prefix_cache()
                raise
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            await self._reset_prefix_cache()
            self.version += 1
            log.info("%s: weights version %d loaded (%d tensors)", self.name, self.version, len(items))
            return self.version
        finally:
            async with gate:
                self._updating = False
                gate.notify_all()

    async def _reset_prefix_cache(self) -> None:
        """Drop the cached keys and values: they belong to the old weights.

        Raises:
            PolicyError: when vLLM keeps refusing (it refuses while requests run).
        """
        for attempt in range(5):
            if await self.llm.reset_prefix_cache() is not False:  # True, or None from older vLLM
                return
            await asyncio.sleep(0.05 * 2 ** attempt)
        raise PolicyError(f"vLLM ({self.name}) refused to reset its prefix cache after a weight load")

    async def _load_file(self, chunk: list[tuple[str, Any]], path: str) -> None:
        await asyncio.to_thread(save_chunk, chunk, path)
        try:
            loaded = await self.llm.collective_rpc(LOAD_METHOD, args=(path,))
        except Exception as exc:
            raise PolicyError(f"vLLM workers failed to load weights from {path}: {type(exc).__name__}: {exc}; "
                              f"was the engine started with worker_extension_cls={WORKER_EXTENSION!r}?") from exc
        wrong = [x for x in (loaded or []) if isinstance(x, int) and x != len(chunk)]
        if wrong:
            raise PolicyError(f"vLLM workers loaded {wrong} tensors of the {len(chunk)} in {path}")
        os.unlink(path)


class VLLMPolicy:
    """One episode's policy on a :class:`VLLMEngine`; keeps the episode's token trajectory.

    ``AssistantTurn.extra`` holds ``finish_reason`` (``length`` for a turn cut by
    ``max_tokens``), ``tokens`` and ``policy_version`` (the weights that generated the turn;
    the trajectory's ``policy_version`` is the engine's when the episode began).
    """

    def __init__(self, engine: VLLMEngine, sampling: SamplingSettings):
        self.engine = engine
        self.sampling = sampling
        self.name = f"vllm:{engine.name}"
        self.reset()

    def reset(self) -> None:
        """Forget the episode (it is retried on a fresh sandbox)."""
        self.tokens = TokenTrajectory(model=self.engine.name, policy_version=self.engine.version,
                                      logprobs_mode=self.engine.logprobs_mode)
        self._buffer = TokenBuffer(self.engine.chat, self.tokens)

    def token_trajectory(self) -> TokenTrajectory:
        """The episode's tokens so far."""
        return self.tokens

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        """Generate the next turn with the in-process engine, extending the token trajectory.

        Raises:
            PolicyError: the chat template or the engine failed, or the tokens do not fit the trajectory.
        """
        buf = self._buffer
        async with self.engine.gate.turn():  # waits here while the engine is paused
            ids = await asyncio.to_thread(buf.prompt, messages, tools)
            try:
                gen = await self.engine.generate(ids, turn_sampling(self.sampling, buf.turn))
            except ContextLengthExceeded:
                buf.take_back()
                raise
            return await asyncio.to_thread(buf.add_turn, messages, gen, f"vLLM ({self.engine.name})")


__all__ = ["LOAD_METHOD", "PROBE_METHOD", "WORKER_EXTENSION", "VLLMEngine", "VLLMPolicy", "WeightLoaderExtension"]
