"""A cowork policy whose turns come from verl's LLM server client (token in, token out).

verl's agent loops talk to the rollout servers through ``LLMServerClient.generate(request_id,
*, prompt_ids, sampling_params, ...)``, which returns a ``TokenOutput`` (``token_ids``,
``log_probs``, ``stop_reason``, ``num_preempted``, ``extra_fields`` with the weights'
``min_global_steps`` / ``max_global_steps``). This policy keeps the episode's append-only token
buffer (:class:`~cowork.agents.vllm_server.TokenBuffer`, shared with the vLLM backends) and
sends the whole buffer as each turn's prompt, so what verl trains on is exactly what its
server conditioned on and sampled. It needs nothing of verl itself: the client is duck-typed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable
from typing import Any

from ...agents.base import AssistantTurn
from ...agents.chat_tokens import ChatTokens
from ...agents.tokens import LogprobsMode, SamplingSettings, TokenTrajectory
from ...agents.vllm_server import Generation, TokenBuffer
from ...errors import ContextLengthExceeded, PolicyError

#: The server's word for a generation it dropped (weights being synced, engine shut down).
_ABORTED = ("aborted", "abort")


def sampling_settings(params: dict[str, Any], max_tokens: int) -> SamplingSettings:
    """The per-request sampling parameters of verl as the trajectory records them (verl's
    ``top_k=-1`` is cowork's 0: no limit; a temperature of 0 is greedy in both)."""
    top_k = int(params.get("top_k") or 0)
    return SamplingSettings(temperature=float(params.get("temperature", 1.0)),
                            top_p=float(params.get("top_p", 1.0) or 1.0), top_k=max(top_k, 0),
                            max_tokens=max(max_tokens, 1), seed=params.get("seed"))


class ServerPolicy:
    """One episode's policy on verl's LLM server client; keeps the episode's token trajectory.

    Every turn of the episode goes out with the same ``request_id`` (verl's sticky session:
    the same server serves it from its prefix cache). A turn may generate at most what is
    left of the episode's response budget (verl's ``rollout.response_length``, which counts
    the generated and the environment tokens after the first prompt); once the budget is
    spent the next turn raises ContextLengthExceeded and the episode ends ``truncated``,
    graded on what was done. A first prompt longer than ``prompt_length`` is refused rather
    than cut (verl's own loops cut it from the left, which would drop the system prompt).

    Args:
        server: verl's ``LLMServerClient`` (or anything with its ``generate``).
        chat: The model's chat template and tokenizer.
        sampling_params: The sampling parameters verl hands the agent loop (``temperature``,
            ``top_p``, ``top_k``, ``logprobs``, ...); sent with every turn, plus ``max_tokens``
            and the end token in ``stop_token_ids``.
        prompt_length: verl's ``rollout.prompt_length``.
        response_length: verl's ``rollout.response_length``.
        max_tokens_per_turn: Most tokens one turn may generate (None: the budget left).
        model: The model name recorded in the trajectory.
        logprobs_mode: What the server's log-probabilities are (verl's ``rollout.logprobs_mode``).
        server_loop: The event loop ``server`` lives on; calls are sent there when the
            episode runs on another loop (None: the loop the policy is called on).
    """

    def __init__(self, server: Any, chat: ChatTokens, *, sampling_params: dict[str, Any], prompt_length: int,
                 response_length: int, max_tokens_per_turn: int | None = None, model: str = "",
                 logprobs_mode: LogprobsMode | None = None, server_loop: asyncio.AbstractEventLoop | None = None):
        self.server = server
        self.chat = chat
        self.params = dict(sampling_params)
        self.prompt_length = prompt_length
        self.response_length = response_length
        self.max_tokens_per_turn = max_tokens_per_turn
        self.model = model
        self.logprobs_mode = logprobs_mode
        self.server_loop = server_loop
        self.name = f"verl:{model or 'server'}"
        self.sampling = sampling_settings(self.params, max_tokens_per_turn or response_length)
        stops = set(self.params.get("stop_token_ids") or []) | {chat.end_id}
        eos = getattr(chat.tok, "eos_token_id", None)
        self._ends = stops | ({eos} if isinstance(eos, int) else set())
        self._stop_ids = sorted(stops)
        self.reset()

    def reset(self) -> None:
        """Forget the episode (it is retried on a fresh sandbox)."""
        self.tokens = TokenTrajectory(model=self.model, logprobs_mode=self.logprobs_mode)
        self._buffer = TokenBuffer(self.chat, self.tokens)
        self.request_id = uuid.uuid4().hex
        #: Whether every turn came with log-probabilities (verl's ``calculate_log_probs``).
        self.has_logprobs = True
        #: Seconds spent waiting for the server, all turns together.
        self.generate_s = 0.0
        #: The weights versions (verl's ``global_steps``) of the first and the last turn.
        self.min_version: int | None = None
        self.max_version: int | None = None
        self.num_preempted: int | None = None

    def token_trajectory(self) -> TokenTrajectory:
        """The episode's tokens so far."""
        return self.tokens

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        """Generate the next turn on verl's server, extending the token trajectory.

        Raises:
            ContextLengthExceeded: the first prompt is longer than ``prompt_length``, or the
                episode's response budget is spent.
            PolicyError: the chat template or the server failed, the server aborted the
                generation, or its tokens and log-probabilities do not fit together.
        """
        buf = self._buffer
        ids = await asyncio.to_thread(buf.prompt, messages, tools)
        prompt_len = self.tokens.prompt_len
        if not self.tokens.turns and len(ids) > self.prompt_length:
            buf.take_back()
            raise ContextLengthExceeded(f"the task's first prompt has {len(ids)} tokens, more than verl's "
                                        f"rollout.prompt_length={self.prompt_length}: raise data.max_prompt_length")
        room = self.response_length - (len(ids) - prompt_len)
        if room <= 0:
            buf.take_back()
            raise ContextLengthExceeded(f"the episode's response reached verl's rollout.response_length="
                                        f"{self.response_length} tokens")
        max_tokens = min(room, self.max_tokens_per_turn or room)
        params = {**self.params, "max_tokens": max_tokens, "stop_token_ids": self._stop_ids}
        t0 = time.monotonic()
        try:
            out = await self._on_server_loop(self.server.generate(request_id=self.request_id, prompt_ids=ids,
                                                                  sampling_params=params))
        except Exception as exc:  # the server or its client failed: not the agent's doing
            buf.take_back()
            raise PolicyError(f"verl's LLM server failed to generate: {type(exc).__name__}: {exc}") from exc
        finally:
            self.generate_s += time.monotonic() - t0
        return await asyncio.to_thread(buf.add_turn, messages, self._generation(out), "verl's LLM server")

    def _generation(self, out: Any) -> Generation:
        """A ``TokenOutput`` as a turn of the trajectory: its finish reason read from its tokens
        (verl's vLLM server says ``completed`` both for an end token and for the token limit)."""
        gen = [int(t) for t in out.token_ids]
        lps = out.log_probs
        if lps is None:
            self.has_logprobs = False
            lps = [0.0] * len(gen)
        raw = out.stop_reason
        if raw in _ABORTED:
            finish = "abort"
        elif gen and gen[-1] in self._ends and raw != "length":
            finish = "stop"
        else:  # no end token: the turn's token limit, or the model's context
            finish = "length"
        extra = dict(getattr(out, "extra_fields", None) or {})
        low = extra.get("min_global_steps", extra.get("global_steps"))
        high = extra.get("max_global_steps", extra.get("global_steps"))
        if self.min_version is None:
            self.min_version = low
        self.max_version = high if high is not None else self.max_version
        if out.num_preempted is not None:
            self.num_preempted = (self.num_preempted or 0) + out.num_preempted
        stop = gen[-1] if finish == "stop" and gen[-1] != self.chat.end_id else None
        return Generation(gen, [float(x) for x in lps], finish, stop, extra={"policy_version": high})

    async def _on_server_loop(self, coro: Awaitable[Any]) -> Any:
        loop = self.server_loop
        if loop is None or loop is asyncio.get_running_loop():
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))  # type: ignore[arg-type]


__all__ = ["ServerPolicy", "sampling_settings"]
