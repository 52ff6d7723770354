"""A transformers policy (extra ``hf``): chat template with tools, sampling, hermes tool calls,
and the token ids, log-probabilities and loss mask of every turn.

One :class:`HFEngine` holds the model and tokenizer; each episode gets its own
:class:`HFPolicy` (``engine.policy()``), which keeps the episode's append-only token buffer.
Training code updates ``engine.model`` in place (or calls :meth:`HFEngine.load_weights`);
the next episode's policy generates with the new weights.

Log-probabilities are those of the distribution each token was sampled from (temperature,
top-k and top-p applied: ``logprobs_mode = "processed_logprobs"``, see cowork.agents.sampling);
``SamplingSettings.raw_logprobs`` also records the model's own (``TokenTrajectory.raw_logprobs``).
Teacher-forced turns were not sampled: they carry the model's own log-probabilities.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from ..errors import ContextLengthExceeded, PolicyError, require_extra
from .base import AssistantTurn
from .chat_tokens import ChatTokens
from .gate import TurnGate
from .tokens import FinishReason, SamplingSettings, TokenTrajectory
from .toolparse import parse_tool_calls

log = logging.getLogger(__name__)


def _torch():
    return require_extra("torch", "hf", "the hf backend needs the 'hf' extra", "torch and transformers",
                         error=PolicyError)


class HFEngine:
    """A causal language model and its tokenizer, shared by the policies of many episodes.

    Args:
        model: A transformers causal LM (``model(input_ids, past_key_values=..., use_cache=True)``).
        tokenizer: Its tokenizer, with a chat template that renders ``tools``.
        sampling: Default sampling settings of its policies.
        end_token: The token that ends an assistant turn (default: the tokenizer's eos).
        template_kwargs: Extra arguments for the chat template.
        name: Model name recorded in trajectories.
        max_length: Most tokens of prompt and generation together (default: the model's
            ``max_position_embeddings``); a longer prompt raises ContextLengthExceeded.
    """

    def __init__(self, model: Any, tokenizer: Any, *, sampling: SamplingSettings | None = None,
                 end_token: str | None = None, template_kwargs: dict | None = None, name: str | None = None,
                 max_length: int | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.chat = ChatTokens(tokenizer, end_token=end_token, template_kwargs=template_kwargs)
        self.sampling = sampling or SamplingSettings()
        self.name = name or getattr(getattr(model, "config", None), "_name_or_path", "") or "hf-model"
        self.version = 0
        self.max_length = max_length or getattr(getattr(model, "config", None), "max_position_embeddings", None)
        self._lock = threading.Lock()
        self.gate = TurnGate()
        """Pauses the engine's episodes at a turn boundary (:meth:`pause`)."""
        self._turn = threading.local()  # the version each thread's last turn generated with

    @classmethod
    def from_pretrained(cls, path: str, *, device: str | None = None, dtype: str = "auto", **kw: Any) -> "HFEngine":
        """Load a model and tokenizer from a folder or the hub."""
        _torch()
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(path)
        # Any: transformers types .to() through a wrapper that misreads the device argument.
        model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        if device:
            model.to(device)
        return cls(model.eval(), tok, name=path, **kw)

    def policy(self, sampling: SamplingSettings | None = None, *, forced: list[str] | None = None) -> "HFPolicy":
        """A policy for one episode.

        Args:
            sampling: Settings for this episode (default: the engine's).
            forced: Teacher-forced turns: turn n's tokens are those of ``forced[n]`` (then the
                end token) instead of samples, with the model's log-probabilities of them;
                after the list, the policy samples. For tests and for scripted demonstrations.
        """
        return HFPolicy(self, sampling or self.sampling, forced=forced)

    def load_weights(self, state_dict: dict[str, Any]) -> int:
        """Load new weights (e.g. after an optimizer step elsewhere); returns the new version."""
        with self._lock:
            self.model.load_state_dict(state_dict)
            self.version += 1
        return self.version

    def mark_updated(self) -> int:
        """Count a weight update made in place on ``model``; returns the new version.

        An update in place while episodes run could land inside a turn: make it between
        :meth:`pause` and :meth:`resume` (or while no rollout runs).
        """
        with self._lock:
            self.version += 1
        return self.version

    async def pause(self) -> None:
        """Stop the engine's episodes at their next turn boundary (partial rollouts).

        Returns once no turn is being generated; turns that would start wait until
        :meth:`resume`. Update the weights in between (:meth:`load_weights`, or an optimizer
        step in place and :meth:`mark_updated`): each episode's later turns are generated,
        and recorded (``TurnSpan.policy_version``), with the new version. Pauses nest.
        """
        await self.gate.pause()

    def resume(self) -> None:
        """Let the paused episodes go on (undoes one :meth:`pause`).

        Raises:
            RuntimeError: when the engine is not paused.
        """
        self.gate.resume()

    def turn_version(self) -> int:
        """The weights version of this thread's last generated turn (read under the model's lock)."""
        return getattr(self._turn, "version", self.version)

    @property
    def device(self) -> Any:
        """The torch device the model's (first) parameters are on."""
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------ model calls
    def token_logprobs(self, ids: list[int], *, grad: bool = False) -> Any:
        """Log-probability of each token given the ones before it, from one forward pass.

        Returns:
            A tensor of ``len(ids) - 1`` values: entry i is log p(ids[i+1] | ids[:i+1]).
            With ``grad`` it carries gradients (for a loss).
        """
        torch = _torch()
        ctx = torch.enable_grad() if grad else torch.no_grad()
        with ctx:
            x = torch.tensor([ids], device=self.device)
            logits = self.model(input_ids=x).logits[0, :-1].float()
            lp = torch.log_softmax(logits, dim=-1)
            return lp.gather(1, x[0, 1:].unsqueeze(1)).squeeze(1)

    def generate(self, ids: list[int], sampling: SamplingSettings, forced: list[int] | None = None,
                 raw: list[float] | None = None) -> tuple[list[int], list[float], FinishReason]:
        """Generate one turn after ``ids`` (KV-cached); returns ids, logprobs and why it stopped.

        The logprobs are those of the sampled distribution (cowork.agents.sampling), the
        model's own for forced tokens; ``raw``, when given, receives the model's own of each
        token. A turn that reaches ``max_length`` stops with ``length``.

        Raises:
            ContextLengthExceeded: ``ids`` leave no room under ``max_length``.
        """
        torch = _torch()
        from .sampling import draw, processed_logprobs

        room = sampling.max_tokens if self.max_length is None else self.max_length - len(ids)
        if room <= 0:
            raise ContextLengthExceeded(f"{self.name}: a prompt of {len(ids)} tokens leaves no room under the "
                                        f"model's length of {self.max_length}")
        gen: list[int] = []
        lps: list[float] = []
        rng = torch.Generator(device="cpu")
        rng.manual_seed(sampling.seed if sampling.seed is not None else torch.seed() % (2**63))
        with self._lock, torch.no_grad():
            self._turn.version = self.version  # versions change only under the lock: exact for the turn
            out = self.model(input_ids=torch.tensor([ids], device=self.device), use_cache=True)
            # A forced turn is as long as its text: the token limit is for what the model samples.
            for step in range(min(len(forced) if forced is not None else sampling.max_tokens, room)):
                logits = out.logits[0, -1].float()
                own = torch.log_softmax(logits, dim=-1)
                if forced is not None:
                    tok, lp = forced[step], own
                else:
                    lp = processed_logprobs(logits, sampling)
                    tok = draw(lp, sampling, rng)
                gen.append(tok)
                lps.append(float(lp[tok]))
                if raw is not None:
                    raw.append(float(own[tok]))
                if tok == self.chat.end_id or tok == self.tokenizer.eos_token_id:
                    return gen, lps, "forced" if forced is not None else "stop"
                if sampling.stop and forced is None:
                    text = self.tokenizer.decode(gen[-32:])
                    if any(s in text for s in sampling.stop):
                        return gen, lps, "stop"
                out = self.model(input_ids=torch.tensor([[tok]], device=self.device), use_cache=True,
                                 **self._cache_kwarg(out))
        return gen, lps, "forced" if forced is not None and len(gen) == len(forced) else "length"

    def _cache_kwarg(self, out: Any) -> dict[str, Any]:
        """The KV cache of ``out`` as the next call takes it (``cache`` in transformers 5.x,
        ``past_key_values`` before)."""
        if getattr(out, "cache", None) is not None:
            return {"cache": out.cache}
        return {"past_key_values": out.past_key_values}

    # ------------------------------------------------------------------ teacher forcing
    def score(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> TokenTrajectory:
        """The token view of a finished conversation (a teacher's run, say), with this
        model's log-probabilities of every assistant token.

        Assistant turns are tokenized as the chat template renders them (their text and
        tool calls), up to and including the end token; everything else is environment.

        Raises:
            ValueError: when the conversation has no assistant message.
        """
        firsts = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        if not firsts:
            raise ValueError("the conversation has no assistant message to score")
        traj = TokenTrajectory(model=self.name, policy_version=self.version, logprobs_mode="raw_logprobs")
        traj.append_env(self.chat.prompt(messages[:firsts[0]], tools))
        prev = None
        for turn, a in enumerate(firsts, 1):
            start = len(traj.ids)
            if prev is not None:
                traj.append_env(self.chat.continuation(messages[:prev + 1], messages[prev + 1:a], tools, ended=True))
            text, _ = self.chat.assistant_section(messages[:a], messages[a], tools)
            ids = self.chat.encode(text)
            traj.append_generated(ids, [0.0] * len(ids), turn=turn, prompt_start=start, finish_reason="forced")
            prev = a
        values = self.token_logprobs(traj.ids).tolist()
        traj.logprobs = [None if m == 0 else values[i - 1] for i, m in enumerate(traj.mask)]
        return traj


class HFPolicy:
    """One episode's policy on an :class:`HFEngine`; keeps the episode's token trajectory."""

    def __init__(self, engine: HFEngine, sampling: SamplingSettings, forced: list[str] | None = None):
        self.engine = engine
        self.sampling = sampling
        self.name = f"hf:{engine.name}"
        self.forced = list(forced or [])
        self.reset()

    def reset(self) -> None:
        """Forget the episode (it is retried on a fresh sandbox)."""
        self.tokens = TokenTrajectory(model=self.engine.name, policy_version=self.engine.version,
                                      logprobs_mode="processed_logprobs")
        self._seen = 0
        self._ended = True

    def token_trajectory(self) -> TokenTrajectory:
        """The episode's tokens so far."""
        return self.tokens

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        """Generate the next turn with the engine, in a thread, extending the token trajectory.

        Raises:
            PolicyError: the chat template cannot render the conversation.
        """
        async with self.engine.gate.turn():  # waits here while the engine is paused
            return await asyncio.to_thread(self._act, messages, tools)

    def _act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        chat, t = self.engine.chat, self.tokens
        start = len(t.ids)
        try:
            if not t.ids:
                t.append_env(chat.prompt(messages, tools))
            else:
                t.append_env(chat.continuation(messages[:self._seen], messages[self._seen:], tools, ended=self._ended))
        except Exception as exc:  # a template that cannot render this conversation
            raise PolicyError(f"the chat template of {self.engine.name} failed: {exc}") from exc
        turn = len(t.turns) + 1
        forced = None
        if turn <= len(self.forced):
            forced = chat.encode(self.forced[turn - 1]) + [chat.end_id]
        sampling = self.sampling
        if sampling.seed is not None:
            sampling = sampling.model_copy(update={"seed": sampling.seed + turn})
        raw: list[float] | None = [] if sampling.raw_logprobs else None
        try:
            gen, lps, reason = self.engine.generate(t.ids, sampling, forced, raw=raw)
        except ContextLengthExceeded:
            t.cut(start)  # the trajectory ends with what the model generated, not a prompt it never saw
            raise
        version = self.engine.turn_version()
        text = self.engine.tokenizer.decode(gen, skip_special_tokens=False)
        self._ended = bool(gen) and gen[-1] == chat.end_id
        if self._ended and text.endswith(chat.end_token):
            text = text[: -len(chat.end_token)]
        content, calls = parse_tool_calls(text, id_prefix=f"call_{turn}")
        if calls and reason == "stop":
            reason = "tool_calls"
        t.append_generated(gen, lps, turn=turn, prompt_start=start, finish_reason=reason, raw_logprobs=raw,
                           policy_version=version, model=self.engine.name)
        self._seen = len(messages) + 1  # run_episode appends this turn's assistant message
        return AssistantTurn(content=content or None, tool_calls=calls,
                             extra={"finish_reason": reason, "tokens": len(gen)})


__all__ = ["HFEngine", "HFPolicy"]
