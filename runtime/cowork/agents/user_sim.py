"""The user after the first request, played by a language model (tau2-bench style)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from ..errors import PolicyError
from ..llm import post_json, resolve_api_key, resolve_base_url
from ..spec.conversation import LLMUser

log = logging.getLogger(__name__)

_WHAT = "simulated user"


@dataclass
class UserReply:
    """One answer of the simulated user."""

    text: str
    """What the user says to the agent, stripped; when ``stop`` is set, the text before the
    marker (recorded, not delivered)."""
    stop: bool
    """The user wrote the stop marker, or nothing at all: the conversation ends."""
    record: dict[str, Any]
    """For the trace: ``source`` ("llm"), ``model``, ``base_url``, ``temperature``,
    ``max_tokens``, ``seed``, ``raw`` (the model's full text), ``usage`` and ``duration_ms``."""


class SimulatedUser:
    """A user simulated by a chat model at an OpenAI-compatible endpoint.

    The simulator keeps its own chat, with the roles turned around: the user's words are the
    ``assistant`` messages (the task's first request, then each earlier answer) and the
    agent's replies are the ``user`` messages. It sees only the agent's replies, never its
    tool calls or their results.

    Args:
        llm: The spec's persona, goal, hidden facts, stop marker and temperature.
        first_request: The task's first request, as the user wrote it.
        model: Model name sent to the endpoint.
        base_url: Endpoint root; defaults to ``$COWORK_USER_BASE_URL``, then
            ``$OPENAI_BASE_URL``, then the OpenAI API.
        api_key: Key; defaults to ``$COWORK_USER_API_KEY``, then ``$OPENAI_API_KEY``, then
            none (local servers).
        max_tokens: Most tokens per answer.
        seed: Sampling seed sent to the endpoint; omitted when None.
        timeout: Seconds per request.
        retries: Retries on 429 / 5xx / network errors, with exponential back-off.
    """

    def __init__(self, llm: LLMUser, first_request: str, *, model: str, base_url: str | None = None,
                 api_key: str | None = None, max_tokens: int = 512, seed: int | None = None,
                 timeout: float = 60.0, retries: int = 3) -> None:
        self.llm = llm
        self.first_request = first_request
        self.model = model
        from .. import settings

        conf = settings.get()
        self.base_url = resolve_base_url(base_url, conf.user_base_url)
        self.api_key = resolve_api_key(api_key, conf.user_api_key)
        self.max_tokens = max_tokens
        self.seed = seed
        self.timeout = timeout
        self.retries = retries
        self.messages: list[dict[str, str]] = []
        self.reset()

    def system_prompt(self) -> str:
        """The instructions that put the model in the user's place."""
        llm = self.llm
        if llm.facts:
            facts = "\n".join(f"- {fact}" for fact in llm.facts)
        else:
            facts = "(none: you know nothing beyond your goal)"
        return (
            "You are playing a human user who is talking with an AI assistant, a coworker who can "
            "work on your files, mail and other tools. You are the user, not the assistant.\n\n"
            f"Who you are and how you talk:\n{llm.persona}\n\n"
            f"What you want from the assistant:\n{llm.goal}\n\n"
            f"Facts only you know:\n{facts}\n\n"
            "Rules:\n"
            "- Give a fact only when the assistant asks for it, or when it is plainly needed to "
            "answer the assistant's question. Never volunteer them all at once.\n"
            "- Never invent facts, names, numbers or preferences beyond those above; if asked for "
            "something you were not given, say you don't know or that the assistant should decide.\n"
            "- Stay in character. Write short, natural messages, as a busy person would.\n"
            "- Never act as the assistant: do not do its work, write its answers or describe tool use.\n"
            f"- When your goal has been met, or the assistant cannot make any more progress, write "
            f"{llm.stop} on its own, with nothing after it."
        )

    def reset(self) -> None:
        """Forget the conversation, back to the first request (an episode retried afresh)."""
        self.messages = [{"role": "system", "content": self.system_prompt()},
                         {"role": "assistant", "content": self.first_request}]

    async def reply(self, agent_reply: str) -> UserReply:
        """The user's answer to the agent's latest reply.

        The conversation only moves on when an answer comes back, so a call that raised can
        be tried again with the same ``agent_reply``.

        Raises:
            PolicyError: if the endpoint fails after its retries or answers without
                ``choices[0].message.content`` text.
        """
        messages = [*self.messages, {"role": "user", "content": agent_reply}]
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.llm.temperature,
                                "max_tokens": self.max_tokens}
        if self.seed is not None:
            body["seed"] = self.seed
        url = f"{self.base_url}/chat/completions"
        started = time.perf_counter()
        data = await post_json(url, body, api_key=self.api_key, timeout=self.timeout, retries=self.retries,
                               what=_WHAT)
        duration_ms = (time.perf_counter() - started) * 1000
        raw = _content(data, url)
        self.messages = [*messages, {"role": "assistant", "content": raw}]
        index = raw.find(self.llm.stop)
        text = (raw if index < 0 else raw[:index]).strip()
        # An empty answer ends it too: there is nothing to deliver.
        stop = index >= 0 or not text
        usage = data.get("usage")
        record = {"source": "llm", "model": self.model, "base_url": self.base_url,
                  "temperature": self.llm.temperature, "max_tokens": self.max_tokens, "seed": self.seed,
                  "raw": raw, "usage": usage if isinstance(usage, dict) else None,
                  "duration_ms": round(duration_ms, 1)}
        log.debug("simulated user answered in %.0f ms (stop=%s)", duration_ms, stop)
        return UserReply(text=text, stop=stop, record=record)


def _content(data: dict[str, Any], url: str) -> str:
    """The text of ``choices[0].message.content``.

    Raises:
        PolicyError: if it is missing or not a string.
    """
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise PolicyError(f"{_WHAT} at {url} answered without choices[0].message.content: "
                          f"{str(data)[:300]}; check that the user model is a chat model") from exc
    if not isinstance(content, str):
        raise PolicyError(f"{_WHAT} at {url} answered with content of type {type(content).__name__}, "
                          f"not text: {str(data)[:300]}")
    return content
