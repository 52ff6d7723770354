"""A policy backed by any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, ...)."""

from __future__ import annotations

import logging
from typing import Any

from ..llm import ChatClient, first_message
from .base import AssistantTurn, ToolCall, parse_arguments

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
        self.client = ChatClient(model, base_url=base_url, api_key=api_key, temperature=temperature,
                                 max_tokens=max_tokens, timeout=timeout, retries=retries)
        self.model = model
        self.base_url = self.client.base_url
        self.api_key = self.client.api_key

    @property
    def temperature(self) -> float:
        """Sampling temperature (the client's)."""
        return self.client.temperature

    @property
    def max_tokens(self) -> int:
        """Most tokens per turn (the client's)."""
        return self.client.max_tokens

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        """Ask the chat-completions endpoint for the next turn; unreadable tool arguments come back marked.

        Raises:
            PolicyError: the endpoint failed after the client's retries, or answered no message.
        """
        return self._parse(await self.client.complete(messages, tools))

    def _parse(self, data: dict[str, Any]) -> AssistantTurn:
        msg = first_message(data)
        calls = []
        for n, tc in enumerate(msg.get("tool_calls") or []):
            tc = tc if isinstance(tc, dict) else {}
            fn = tc.get("function")
            if not isinstance(fn, dict):
                fn = {}
            # Unreadable or non-object arguments are passed on marked: the sandbox answers
            # with a tool error the model can learn from.
            args = parse_arguments(fn.get("arguments"))
            calls.append(ToolCall(id=tc.get("id") or f"call_{n}", name=str(fn.get("name") or ""), arguments=args))
        content = msg.get("content")
        return AssistantTurn(content=content if content is None or isinstance(content, str) else str(content),
                             tool_calls=calls, extra={"usage": data.get("usage")})
