"""The one OpenAI-compatible client: endpoint resolution, a JSON POST with retries, and chat
completions, shared by the OpenAI policy, the user simulator, the judge, LLM synthesis and the
CLI's preflight."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from typing import Any

from .errors import ContextLengthExceeded, EndpointUnavailable, PolicyError

#: Where a client goes when neither its caller nor ``$OPENAI_BASE_URL`` says.
DEFAULT_BASE_URL = "https://api.openai.com/v1"


def resolve_base_url(*candidates: str | None) -> str:
    """The first non-empty of ``candidates``, else ``$OPENAI_BASE_URL``, else OpenAI's API;
    without a trailing slash."""
    for url in (*candidates, os.environ.get("OPENAI_BASE_URL"), DEFAULT_BASE_URL):
        if url:
            return url.rstrip("/")
    return DEFAULT_BASE_URL


def resolve_api_key(explicit: str | None = None, *fallbacks: str | None) -> str:
    """``explicit`` when given (even empty: a local server needs none), else the first
    non-empty of ``fallbacks``, else ``$OPENAI_API_KEY``, else empty."""
    if explicit is not None:
        return explicit
    for key in fallbacks:
        if key:
            return key
    return os.environ.get("OPENAI_API_KEY", "")


#: What servers say when a prompt outgrows the model's context: OpenAI's error code and
#: message, vLLM's ("This model's maximum context length is N tokens", "... is longer than
#: the maximum model length of N"), SGLang's ("longer than the model's context length"),
#: TGI's ("must be <= N" of the input tokens), llama.cpp's ("exceeds the available context
#: size"). Only a client error whose text says so counts: any other 400 stays a policy error.
_CONTEXT_OVERFLOW = re.compile(
    r"context_length_exceeded|maximum context length|context length|context window|max(imum)?[ _]model[ _]len"
    r"|exceeds? the (available )?context|prompt is too long|input is too long|too many (input )?tokens"
    r"|`inputs` tokens \+ `max_new_tokens` must be",
    re.IGNORECASE)


def is_context_overflow(text: str) -> bool:
    """True when an error text says the prompt no longer fits the model's context window."""
    return bool(_CONTEXT_OVERFLOW.search(text))


async def post_json(url: str, body: dict[str, Any], *, api_key: str = "", timeout: float = 120.0,
                    retries: int = 3, what: str = "POST", client: Any = None) -> dict[str, Any]:
    """POST ``body`` as JSON to ``url``; the decoded JSON object it answers.

    Retries network errors, 408, 409, 429 and 5xx with exponential back-off (0.5 s doubling,
    at most 8 s); any other client error is final.

    ``client``: an open ``httpx2.AsyncClient`` to send with (kept open; its own timeout
    applies). Without one a client is made and closed for this request, which costs a
    new connection and an SSL context each time (~29 ms, up to ~100 ms on a busy machine):
    callers that post per model turn keep one per endpoint (``VLLMServerClient.http``).

    Raises:
        EndpointUnavailable: the endpoint cannot be reached, refuses the key (401, 403), or
            still fails (408, 409, 429, 5xx, network) once the retries are spent.
        ContextLengthExceeded: a 400, 413 or 422 whose text says the prompt is longer than
            the model's context (:func:`is_context_overflow`).
        PolicyError: any other client error, or an answer that is not a JSON object. Each
            message names ``what``, the URL and the last error.
    """
    import httpx2

    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    # ASCII-escaped: a lone surrogate the model once wrote (kept in the conversation) would
    # make a UTF-8 body unencodable. NaN cannot occur: tool arguments travel as text.
    content = json.dumps(body, ensure_ascii=True, default=str).encode("ascii")
    last, unavailable = "", False
    opened = httpx2.AsyncClient(timeout=timeout) if client is None else contextlib.nullcontext(client)
    async with opened as client:
        for attempt in range(retries + 1):
            try:
                resp = await client.post(url, content=content, headers=headers)
            except httpx2.HTTPError as exc:
                last, unavailable = f"{type(exc).__name__}: {exc}", True
            else:
                if resp.status_code == 200:
                    try:
                        data = resp.json()
                    except ValueError as exc:
                        raise PolicyError(f"{what} at {url} answered with invalid JSON: {resp.text[:300]!r}") from exc
                    if not isinstance(data, dict):
                        raise PolicyError(f"{what} at {url} answered with {type(data).__name__}, not an object")
                    return data
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code in (400, 413, 422) and is_context_overflow(resp.text):
                    raise ContextLengthExceeded(f"{what} at {url}: the prompt no longer fits the model's context: "
                                                f"{last}")
                retried = resp.status_code in (408, 409, 429) or resp.status_code >= 500
                unavailable = retried or resp.status_code in (401, 403)
                if not retried:
                    break
            if attempt < retries:
                await asyncio.sleep(min(0.5 * 2 ** attempt, 8))
    raise (EndpointUnavailable if unavailable else PolicyError)(f"{what} at {url} failed: {last}")


def first_message(data: dict[str, Any], what: str = "chat completion") -> dict[str, Any]:
    """``choices[0].message`` of a chat-completions answer.

    Raises:
        PolicyError: the answer has no such object.
    """
    try:
        msg = data["choices"][0]["message"]
        if not isinstance(msg, dict):
            raise TypeError("message is not an object")
    except (KeyError, IndexError, TypeError) as exc:
        raise PolicyError(f"{what} response has no choices[0].message: {str(data)[:300]}") from exc
    return msg


class ChatClient:
    """``POST {base_url}/chat/completions`` with retries.

    Args:
        model: Model name sent to the endpoint.
        base_url: Endpoint root (default: ``$OPENAI_BASE_URL``, then OpenAI's API).
        api_key: Key (default ``$OPENAI_API_KEY``; may be empty for local servers).
        temperature: Sampling temperature.
        max_tokens: Most tokens per answer.
        timeout: Seconds per request.
        retries: Retries on 429 / 5xx / network errors, with exponential back-off.
    """

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 temperature: float = 0.0, max_tokens: int = 2048, timeout: float = 120.0, retries: int = 3):
        self.model = model
        self.base_url = resolve_base_url(base_url)
        self.api_key = resolve_api_key(api_key)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.retries = retries

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                       **extra: Any) -> dict[str, Any]:
        """The endpoint's whole answer to ``messages`` (and ``tools``, when any).

        Raises:
            PolicyError: the endpoint failed after its retries.
        """
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature,
                                "max_tokens": self.max_tokens, **extra}
        if tools:
            body["tools"] = tools
        return await post_json(f"{self.base_url}/chat/completions", body, api_key=self.api_key,
                               timeout=self.timeout, retries=self.retries, what="chat completion")
