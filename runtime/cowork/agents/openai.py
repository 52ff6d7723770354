"""A policy backed by any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, ...)."""

from __future__ import annotations

import logging
import os
from typing import Any

from ..errors import PolicyError
from .base import AssistantTurn, ToolCall, parse_arguments
from .http import post_json

log = logging.getLogger(__name__)


class OpenAIPolicy:
    """Calls ``POST {base_url}/chat/completions`` with the conversation and the tools.

    Args:
        model: Model name sent to the endpoint.
        base_url: Endpoint root, e.g. ``https://api.openai.com/v1`` or a vLLM server's ``http://host:8000/v1``.
            Defaults to ``$OPENAI_BASE_URL`` or the OpenAI API.
        api_key: Key; defaults to ``$OPENAI_API_KEY`` (may be empty for local servers).
        temperature: Sampling temperature.
        max_tokens: Most tokens per turn.
        timeout: Seconds per request.
        retries: Retries on 429 / 5xx / network errors, with exponential back-off.
    """

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 temperature: float = 0.0, max_tokens: int = 2048, timeout: float = 120.0, retries: int = 3):
        self.name = f"openai:{model}"
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.retries = retries

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature,
                                "max_tokens": self.max_tokens}
        if tools:
            body["tools"] = tools
        data = await post_json(f"{self.base_url}/chat/completions", body, api_key=self.api_key,
                               timeout=self.timeout, retries=self.retries, what="chat completion")
        return self._parse(data)

    def _parse(self, data: dict[str, Any]) -> AssistantTurn:
        try:
            msg = data["choices"][0]["message"]
            if not isinstance(msg, dict):
                raise TypeError("message is not an object")
        except (KeyError, IndexError, TypeError) as exc:
            raise PolicyError(f"chat completion response has no choices[0].message: {str(data)[:300]}") from exc
        calls = []
        for n, tc in enumerate(msg.get("tool_calls") or []):
            tc = tc if isinstance(tc, dict) else {}
            fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
            # Unreadable or non-object arguments are passed on marked: the sandbox answers
            # with a tool error the model can learn from.
            args = parse_arguments(fn.get("arguments"))
            calls.append(ToolCall(id=tc.get("id") or f"call_{n}", name=str(fn.get("name") or ""), arguments=args))
        content = msg.get("content")
        return AssistantTurn(content=content if content is None or isinstance(content, str) else str(content),
                             tool_calls=calls, extra={"usage": data.get("usage")})
