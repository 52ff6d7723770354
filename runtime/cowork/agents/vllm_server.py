"""A vLLM OpenAI-compatible server as a policy, with the token ids and log-probabilities of
every turn (``vllm serve MODEL --enable-auto-tool-choice --tool-call-parser hermes``).

Two modes:

``tokens`` (the default when a tokenizer is at hand)
    The policy keeps the episode's append-only token buffer itself (:class:`TokenBuffer`:
    the chat template renders only the environment's new text), sends the whole buffer as a
    token-id prompt to ``/v1/completions`` with ``return_token_ids`` and ``logprobs: 0``, and
    reads the tool calls from the generated text. The tokens a trainer gets are exactly the
    ones the server conditioned on and sampled: nothing is ever re-tokenized.

``chat`` (no tokenizer)
    ``/v1/chat/completions`` with ``return_token_ids`` and ``logprobs``: the server applies
    the chat template and parses the tool calls. The environment's tokens are the difference
    between consecutive prompts. The server renders the whole conversation anew each turn,
    so a prompt may not extend the previous prompt and generation (re-tokenization drift: a
    tool call the model wrote with its own spacing comes back re-serialized by the template,
    say). Then the trajectory is cut back to the last token both agree on: generated spans
    after that point no longer count as generated (their tokens are no longer the context
    the server sampled from), the server's prompt is taken from there on, and the drift is
    recorded (``extra["drift"]`` of the turn, ``VLLMServerPolicy.drift_count``). Every masked
    token of the trajectory thus keeps a log-probability computed on exactly the tokens
    before it; what drift costs is training signal, never correctness.

Both need vLLM >= 0.10.2 (``return_token_ids``). vLLM computes one kind of log-probability
per server, chosen at launch (``--logprobs-mode``; not per request): start it with
``--logprobs-mode processed_logprobs`` so they are those of the distribution sampled
(temperature, top-k, top-p applied), as the hf backend's and TRL's importance-sampling
correction need. Each trajectory records the mode in use (``TokenTrajectory.logprobs_mode``):
the client's ``logprobs_mode`` argument, else what the server's ``/server_info`` says (vLLM
serves it with ``VLLM_SERVER_DEV_MODE=1``), else vLLM's default ``raw_logprobs`` with a warning.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ContextLengthExceeded, PolicyError
from ..llm import post_json
from .base import AssistantTurn, ToolCall, parse_arguments
from .chat_tokens import ChatTokens
from .gate import TurnGate
from .tokens import FinishReason, LogprobsMode, SamplingSettings, TokenTrajectory
from .toolparse import OPEN, parse_tool_calls
from .vllm_weights import ServerWeights, WeightSender

log = logging.getLogger(__name__)

Mode = Literal["auto", "tokens", "chat"]


# ---------------------------------------------------------------------------- shared by token backends
@dataclass
class Generation:
    """One turn's output of a token-level backend."""

    ids: list[int]
    logprobs: list[float]
    finish_reason: str | None
    """The backend's own: ``stop``, ``length``, ``abort``, ... (see :func:`finish_reason`)."""
    stop_reason: int | str | None = None
    """The stop string or token id that ended the turn, where the backend says."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Backend facts kept in the turn's ``extra`` (weights version, ...)."""


def finish_reason(raw: str | None, has_calls: bool, where: str) -> FinishReason:
    """A backend's finish reason as the trajectory records it.

    Raises:
        PolicyError: for ``abort`` (the server dropped the request: nothing to learn from).
    """
    if raw == "length":
        return "length"
    if raw == "abort":
        raise PolicyError(f"{where} aborted the generation (engine shut down or request cancelled)")
    return "tool_calls" if has_calls else "stop"


class TokenBuffer:
    """One episode's append-only token buffer on a chat template, whatever generates.

    The tokens-mode server policy and the in-process vLLM policy share it: before a turn
    :meth:`prompt` appends the environment's new tokens and returns the whole buffer; after
    it :meth:`add_turn` appends the generated tokens and reads the text's tool calls.

    Args:
        chat: The model's chat template and tokenizer.
        tokens: The trajectory to grow (the policy's).
    """

    def __init__(self, chat: ChatTokens, tokens: TokenTrajectory):
        self.chat = chat
        self.tokens = tokens
        self._seen = 0
        self._ended = True
        self._start = 0

    @property
    def turn(self) -> int:
        """The number of the next assistant turn (1-based)."""
        return len(self.tokens.turns) + 1

    def prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
        """Append what the environment said since the last turn; return the next turn's prompt.

        Raises:
            PolicyError: when the chat template cannot render the conversation.
        """
        t = self.tokens
        self._start = len(t.ids)
        try:
            if not t.ids:
                t.append_env(self.chat.prompt(messages, tools))
            else:
                t.append_env(self.chat.continuation(messages[:self._seen], messages[self._seen:], tools,
                                                    ended=self._ended))
        except Exception as exc:  # a template that cannot render this conversation
            raise PolicyError(f"the chat template of {t.model or 'the model'} failed: {exc}") from exc
        return list(t.ids)

    def take_back(self) -> None:
        """Take back the environment tokens :meth:`prompt` appended last: the prompt no longer
        fit the model's context, and nothing was generated from it."""
        self.tokens.cut(self._start)

    def add_turn(self, messages: list[dict[str, Any]], gen: Generation, where: str) -> AssistantTurn:
        """Append one turn's generated tokens and read its text.

        Raises:
            PolicyError: when the backend's tokens and log-probabilities do not fit together.
        """
        chat, turn = self.chat, self.turn
        text = chat.tok.decode(gen.ids, skip_special_tokens=False)
        self._ended = bool(gen.ids) and gen.ids[-1] == chat.end_id
        if self._ended and text.endswith(chat.end_token):
            text = text[: -len(chat.end_token)]
        if isinstance(gen.stop_reason, str) and gen.stop_reason and gen.stop_reason in text:
            text = text[:text.index(gen.stop_reason)]  # the ids keep it; the text the policy returns does not
        content, calls = parse_tool_calls(text, id_prefix=f"call_{turn}")
        reason = finish_reason(gen.finish_reason, bool(calls), where)
        try:
            self.tokens.append_generated(gen.ids, gen.logprobs, turn=turn, prompt_start=self._start,
                                         finish_reason=reason, stop_reason=gen.stop_reason,
                                         policy_version=gen.extra.get("policy_version"))
        except ValueError as exc:
            raise PolicyError(f"{where} returned unusable tokens: {exc}") from exc
        self._seen = len(messages) + 1  # run_episode appends this turn's assistant message
        return AssistantTurn(content=content or None, tool_calls=calls,
                             extra={"finish_reason": reason, "tokens": len(gen.ids), **gen.extra})


def turn_sampling(sampling: SamplingSettings, turn: int) -> SamplingSettings:
    """Turn ``turn``'s settings: a set seed moves on by the turn number (as the hf backend's)."""
    if sampling.seed is None:
        return sampling
    return sampling.model_copy(update={"seed": sampling.seed + turn})


# ---------------------------------------------------------------------------- HTTP
def _load_tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


class VLLMServerClient:
    """One vLLM server and model; makes a stateful :class:`VLLMServerPolicy` per episode.

    Every request of its policies goes through one kept-alive HTTP client (:meth:`http`);
    ``await client.aclose()`` or ``async with client:`` closes it.

    Args:
        base_url: The server's OpenAI root, e.g. ``http://127.0.0.1:8000/v1``.
        model: The served model name (``--served-model-name``, else the model path).
        tokenizer: A tokenizer object, or a name or folder to load one from. None: try the
            model name (``AutoTokenizer.from_pretrained(model)``).
        sampling: Default sampling settings of its policies.
        mode: ``tokens`` (needs a tokenizer: fail without one), ``chat``, or ``auto``
            (tokens when a tokenizer loads, else chat with a warning).
        api_key: Bearer key (default ``$VLLM_API_KEY``; empty for none).
        timeout: Seconds per request.
        retries: Retries on 408/409/429, 5xx and network errors, with exponential back-off.
        end_token: The token that ends an assistant turn (default: the tokenizer's eos).
        template_kwargs: Extra chat-template arguments (``enable_thinking``, ...); in chat
            mode sent as ``chat_template_kwargs``.
        logprobs_mode: The server's ``--logprobs-mode`` (None: ask its ``/server_info``, else
            assume vLLM's default ``raw_logprobs``); recorded in every trajectory.
    """

    def __init__(self, base_url: str, model: str, tokenizer: Any = None, *, sampling: SamplingSettings | None = None,
                 mode: Mode = "auto", api_key: str | None = None, timeout: float = 300.0, retries: int = 3,
                 end_token: str | None = None, template_kwargs: dict | None = None,
                 logprobs_mode: LogprobsMode | None = None):
        if mode not in ("auto", "tokens", "chat"):
            raise ValueError(f"unknown mode {mode!r}; choose auto, tokens or chat")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.sampling = sampling or SamplingSettings()
        self.mode: Mode = mode
        self.api_key = api_key if api_key is not None else os.environ.get("VLLM_API_KEY", "")
        self.timeout = timeout
        self.retries = retries
        self.end_token = end_token
        self.template_kwargs = dict(template_kwargs or {})
        self._tokenizer = tokenizer
        self._chat: ChatTokens | None = None
        self._resolved = mode == "chat"
        self._lock = threading.Lock()
        # One HTTP client per event loop (an httpx client belongs to the loop it first ran
        # on; make_policy shares this object across asyncio.run calls): see http().
        self._http: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self.logprobs_mode: LogprobsMode | None = logprobs_mode
        #: The served weights' version: 0 as launched, raised by each weight update made through
        #: this client (recorded on every turn and trajectory).
        self.version = 0
        self.gate = TurnGate()
        """Holds this client's episodes at a turn boundary while the weights change."""
        self.weights = ServerWeights(self.base_url, api_key=self.api_key, timeout=max(timeout, 600.0))
        """The server's weight-update endpoints (see :mod:`cowork.agents.vllm_weights`)."""

    def policy(self, sampling: SamplingSettings | None = None) -> VLLMServerPolicy:
        """A policy for one episode (default settings: the client's)."""
        return VLLMServerPolicy(self, sampling or self.sampling)

    async def chat_tokens(self) -> ChatTokens | None:
        """The model's chat template in tokens mode; None in chat mode (resolved once).

        Raises:
            PolicyError: in ``tokens`` mode when no tokenizer loads.
        """
        if self._resolved:
            return self._chat
        return await asyncio.to_thread(self._resolve)

    def _resolve(self) -> ChatTokens | None:
        with self._lock:
            if self._resolved:
                return self._chat
            tok = self._tokenizer
            if tok is None or isinstance(tok, (str, os.PathLike)):
                source = str(tok or self.model)
                try:
                    tok = _load_tokenizer(source)
                except Exception as exc:  # no transformers, unknown name, no network
                    if self.mode == "tokens":
                        raise PolicyError(f"vllm-server tokens mode needs the tokenizer of {source!r}, which did "
                                          f"not load: {exc}; pass tokenizer= (a folder or hub name)") from exc
                    log.warning("no tokenizer for %s (%s): vllm-server falls back to chat mode, where the server "
                                "re-tokenizes the conversation each turn; pass tokenizer= for exact tokens",
                                source, exc)
                    tok = None
            if tok is not None:
                try:
                    self._chat = ChatTokens(tok, end_token=self.end_token, template_kwargs=self.template_kwargs)
                except Exception as exc:
                    raise PolicyError(f"the tokenizer for {self.model!r} cannot serve as a chat template: {exc}") from exc
            self.mode = "tokens" if self._chat is not None else "chat"
            self._resolved = True
            return self._chat

    async def logprobs_kind(self) -> LogprobsMode:
        """What the server's log-probabilities are (asked once; see the module's docstring).

        Raises:
            PolicyError: the server returns logits (``--logprobs-mode *_logits``), not log-probabilities.
        """
        if self.logprobs_mode is None:
            said = await _server_logprobs_mode(self.http(), self.base_url, self.api_key, min(self.timeout, 10.0))
            if said is None:
                log.warning("%s does not say its --logprobs-mode (no /server_info: VLLM_SERVER_DEV_MODE unset?); "
                            "recording vLLM's default raw_logprobs. Start it with --logprobs-mode "
                            "processed_logprobs and pass logprobs_mode= for the sampled distribution's", self.base_url)
                said = "raw_logprobs"
            elif said not in ("processed_logprobs", "raw_logprobs"):
                raise PolicyError(f"{self.base_url} runs with --logprobs-mode {said}: it returns logits, not "
                                  "log-probabilities; restart it with --logprobs-mode processed_logprobs")
            self.logprobs_mode = said  # type: ignore[assignment]  # one of the two, checked above
        assert self.logprobs_mode is not None
        return self.logprobs_mode

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to ``{base_url}{path}``; the decoded JSON answer.

        Raises:
            PolicyError: on a client error, on invalid JSON, or once the retries are spent.
        """
        return await post_json(f"{self.base_url}{path}", body, api_key=self.api_key, timeout=self.timeout,
                               retries=self.retries, client=self.http())

    def http(self) -> Any:
        """The ``httpx2.AsyncClient`` every request of this endpoint goes through (all its
        policies, all their turns), made on first use in the running event loop.

        A client per request cost a connection and an SSL context each (~29 ms a turn here;
        issue 26: 22.6 % of a 200 ms-per-turn rollout's wall time, 7.9 % with one client).
        Kept-alive connections are dropped after 4 s idle, before uvicorn's 5 s (vLLM's
        server) would close them under a request; there is no cap on connections, since each
        episode in flight has at most one request open.
        """
        import httpx2

        loop = asyncio.get_running_loop()
        http = self._http.get(loop)
        if http is None or http.is_closed:
            limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None, keepalive_expiry=4.0)
            http = self._http[loop] = httpx2.AsyncClient(timeout=self.timeout, limits=limits)
        return http

    async def aclose(self) -> None:
        """Close this event loop's HTTP client (a later request opens a new one)."""
        http = self._http.pop(asyncio.get_running_loop(), None)
        if http is not None:
            await http.aclose()

    async def __aenter__(self) -> "VLLMServerClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def update_weights(self, weights: Any = None, *, transfer: WeightSender | None = None,
                             chunk_bytes: int = 1 << 30) -> int:
        """Load new weights into the running server, episodes in flight paused at a turn boundary.

        This client's episodes stop before their next turn; the server finishes the requests in
        flight (``/pause?mode=wait``), loads the weights (``weights``: files through
        ``/collective_rpc`` and cowork's worker extension; or ``transfer``: vLLM's own transfer
        engine through ``/start_weight_update``, ``/update_weights``, ``/finish_weight_update``),
        drops its prefix cache, records the new ``weight_version`` and resumes; then the
        episodes go on, their later turns recorded with the new version (``TurnSpan.policy_version``).

        Args:
            weights: A state dict or ``(name, tensor)`` pairs (checkpoint names).
            transfer: vLLM's trainer-side transfer engine (``send_weights()``), made with a
                :class:`~cowork.agents.vllm_weights.WeightTransferControl` for this server.
            chunk_bytes: Most bytes per weight file.

        Returns:
            The new version.

        Raises:
            ValueError: neither or both of ``weights`` and ``transfer``, or no tensors.
            PolicyError: the server lacks the endpoints (start it with ``VLLM_SERVER_DEV_MODE=1``
                and ``--worker-extension-cls cowork.agents.vllm_engine.WeightLoaderExtension``),
                a load failed, or ``/dev/shm`` is too small (the message says what to set);
                the version stays.
        """
        async with self.gate.hold():
            await self.weights.update(weights, version=self.version + 1, transfer=transfer,
                                      chunk_bytes_limit=chunk_bytes)
            self.version += 1
        return self.version


async def _server_logprobs_mode(http: Any, base_url: str, api_key: str, timeout: float) -> str | None:
    """The ``logprobs_mode`` a vLLM server reports at ``/server_info`` (None: it does not say),
    asked through ``http`` (the client's ``httpx2.AsyncClient``)."""
    import httpx2

    root = base_url[:-3] if base_url.endswith("/v1") else base_url
    try:
        resp = await http.get(f"{root}/server_info", params={"config_format": "json"}, timeout=timeout,
                              headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
        config = resp.json().get("vllm_config") if resp.status_code == 200 else None
    except (httpx2.HTTPError, ValueError, AttributeError):
        return None
    if isinstance(config, dict):
        mode = _field(config.get("model_config"), "logprobs_mode")
        return mode if isinstance(mode, str) else None
    found = re.search(r"logprobs_mode=\W*(?:LogprobsMode\.)?(\w+)", config) if isinstance(config, str) else None
    return found.group(1).lower() if found else None


def _choice(data: dict[str, Any], url: str) -> dict[str, Any]:
    try:
        choice = data["choices"][0]
        if isinstance(choice, dict):
            return choice
    except (KeyError, IndexError, TypeError):
        pass
    raise PolicyError(f"{url}: the response has no choices[0]: {str(data)[:300]}")


def _field(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def _ints(value: Any, what: str, url: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise PolicyError(f"{url}: the response has no {what} (a list of token ids); the server needs "
                          f"vLLM >= 0.10.2 for return_token_ids")
    return value


def _floats(value: Any, n: int, url: str) -> list[float]:
    if not isinstance(value, list) or len(value) != n or \
            not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
        shown = len(value) if isinstance(value, list) else type(value).__name__
        raise PolicyError(f"{url}: expected {n} finite log-probabilities of the generated tokens, got {shown}")
    return [float(v) for v in value]


# ---------------------------------------------------------------------------- the policy
class VLLMServerPolicy:
    """One episode's policy on a vLLM server; keeps the episode's token trajectory.

    Make it with :meth:`VLLMServerClient.policy`. Per turn, ``AssistantTurn.extra`` holds
    ``finish_reason`` (``length`` for a turn cut by ``max_tokens``) and ``tokens``; in chat
    mode also the server's ``prompt_token_ids``, ``token_ids`` and ``logprobs``, and
    ``drift`` (None, or where the server's prompt left the trajectory).
    """

    def __init__(self, client: VLLMServerClient, sampling: SamplingSettings):
        self.client = client
        self.sampling = sampling
        self.name = f"vllm-server:{client.model}"
        self.drift_count = 0
        """Turns (chat mode) whose prompt did not extend the trajectory so far."""
        self.reset()

    def reset(self) -> None:
        """Forget the episode (it is retried on a fresh sandbox)."""
        self.tokens = TokenTrajectory(model=self.client.model, policy_version=self.client.version,
                                      logprobs_mode=self.client.logprobs_mode)
        self._buffer: TokenBuffer | None = None
        self._turns = 0  # chat mode: drift may drop spans, so turns are counted here

    def token_trajectory(self) -> TokenTrajectory:
        """The episode's tokens so far."""
        return self.tokens

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        """Ask the vLLM server for the next turn: as token ids when the tokenizer is known
        (``mode`` tokens or auto), else by chat completions with its token ids.

        Raises:
            PolicyError: the server failed after the client's retries, or its answer is unusable.
        """
        chat = await self.client.chat_tokens()
        self.tokens.logprobs_mode = await self.client.logprobs_kind()
        async with self.client.gate.turn():  # held here while the weights change (update_weights)
            if chat is None:
                return await self._act_chat(messages, tools)
            if self._buffer is None:
                self._buffer = TokenBuffer(chat, self.tokens)
            return await self._act_tokens(self._buffer, messages, tools)

    def _body(self, turn: int) -> dict[str, Any]:
        s = turn_sampling(self.sampling, turn)
        body: dict[str, Any] = {"model": self.client.model, "max_tokens": s.max_tokens, "temperature": s.temperature,
                                "top_p": s.top_p, "return_token_ids": True}
        if s.top_k:
            body["top_k"] = s.top_k
        if s.stop:
            body["stop"] = list(s.stop)
        if s.seed is not None:
            body["seed"] = s.seed
        return body

    async def _act_tokens(self, buf: TokenBuffer, messages: list[dict[str, Any]],
                          tools: list[dict[str, Any]]) -> AssistantTurn:
        ids = await asyncio.to_thread(buf.prompt, messages, tools)
        # Special tokens stay in the text (tool-call tags are special in some tokenizers), and
        # the end-of-turn token ends the turn whatever the model's generation config says.
        body = {**self._body(buf.turn), "prompt": ids, "logprobs": 0, "skip_special_tokens": False,
                "stop_token_ids": [buf.chat.end_id]}
        url = f"{self.client.base_url}/completions"
        version = self.client.version
        try:
            choice = _choice(await self.client.post("/completions", body), url)
        except ContextLengthExceeded:
            buf.take_back()
            raise
        gen_ids = _ints(choice.get("token_ids"), "choices[0].token_ids", url)
        lps = _floats(_field(choice.get("logprobs"), "token_logprobs"), len(gen_ids), url)
        gen = Generation(gen_ids, lps, choice.get("finish_reason"), choice.get("stop_reason"),
                         extra={"policy_version": version})
        return await asyncio.to_thread(buf.add_turn, messages, gen, url)

    async def _act_chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        t = self.tokens
        self._turns += 1
        turn = self._turns
        body = {**self._body(turn), "messages": messages, "logprobs": True, "top_logprobs": 0}
        if tools:
            body["tools"] = tools
        if self.client.template_kwargs:
            body["chat_template_kwargs"] = self.client.template_kwargs
        url = f"{self.client.base_url}/chat/completions"
        version = self.client.version
        data = await self.client.post("/chat/completions", body)
        choice = _choice(data, url)
        prompt = _ints(data.get("prompt_token_ids"), "prompt_token_ids", url)
        gen_ids = _ints(choice.get("token_ids"), "choices[0].token_ids", url)
        content_lps = _field(choice.get("logprobs"), "content")
        lps = _floats([c.get("logprob") if isinstance(c, dict) else None for c in content_lps]
                      if isinstance(content_lps, list) else None, len(gen_ids), url)
        msg = choice.get("message")
        if not isinstance(msg, dict):
            msg = {}
        content, calls = _chat_message(msg, turn)
        reason = finish_reason(choice.get("finish_reason"), bool(calls), url)

        start, drift = self._extend(prompt, turn)
        try:
            t.append_generated(gen_ids, lps, turn=turn, prompt_start=start, finish_reason=reason,
                               stop_reason=choice.get("stop_reason"), policy_version=version)
        except ValueError as exc:
            raise PolicyError(f"{url} returned unusable tokens: {exc}") from exc
        return AssistantTurn(content=content, tool_calls=calls,
                             extra={"finish_reason": reason, "tokens": len(gen_ids), "prompt_token_ids": prompt,
                                    "token_ids": gen_ids, "logprobs": lps, "drift": drift})

    def _extend(self, prompt: list[int], turn: int) -> tuple[int, dict[str, Any] | None]:
        """Append the part of the server's ``prompt`` past the trajectory; on drift, first cut
        the trajectory back to the last token both agree on.

        Returns:
            Where this turn's environment tokens start, and the drift (None without).
        """
        t = self.tokens
        n = len(t.ids)
        if prompt[:n] == t.ids:
            t.append_env(prompt[n:])
            return n, None
        at = next((i for i, (a, b) in enumerate(zip(prompt, t.ids)) if a != b), min(len(prompt), n))
        dropped = [s for s in t.turns if s.gen_end > at]
        for s in dropped:  # the part of a cut span before ``at`` is no longer what the model generated
            for i in range(s.gen_start, min(s.gen_end, at)):
                t.mask[i], t.logprobs[i] = 0, None
        t.ids, t.logprobs, t.mask = t.ids[:at], t.logprobs[:at], t.mask[:at]
        t.turns = [s for s in t.turns if s.gen_end <= at]
        t.append_env(prompt[at:])
        self.drift_count += 1
        log.warning("%s turn %d: the server's prompt leaves the trajectory at token %d of %d (re-tokenization "
                    "drift); turns %s no longer count as generated", self.name, turn, at, n, [s.turn for s in dropped])
        return at, {"at": at, "expected": n, "dropped_turns": [s.turn for s in dropped]}


def _chat_message(msg: dict[str, Any], turn: int) -> tuple[str | None, list[ToolCall]]:
    """Content and tool calls of a chat completion's message.

    vLLM's hermes parser returns no tool calls at all when any call fails to parse, and
    leaves the raw text in ``content``: then the calls are read from the text here, so a
    malformed one becomes a tool error for the model instead of a silent end of the episode.
    """
    content = msg.get("content")
    if content is not None and not isinstance(content, str):
        content = str(content)
    calls = []
    for n, tc in enumerate(msg.get("tool_calls") or []):
        tc = tc if isinstance(tc, dict) else {}
        fn = tc.get("function")
        if not isinstance(fn, dict):
            fn = {}
        calls.append(ToolCall(id=str(tc.get("id") or f"call_{turn}_{n}"), name=str(fn.get("name") or ""),
                              arguments=parse_arguments(fn.get("arguments"))))
    if not calls and content and OPEN in content:
        text, calls = parse_tool_calls(content, id_prefix=f"call_{turn}")
        content = text
    return content or None, calls


__all__ = ["Generation", "TokenBuffer", "VLLMServerClient", "VLLMServerPolicy", "finish_reason", "turn_sampling"]
