"""One JSON POST with retries, for every backend that talks to a model over HTTP."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ..errors import PolicyError


async def post_json(url: str, body: dict[str, Any], *, api_key: str = "", timeout: float = 120.0,
                    retries: int = 3, what: str = "POST") -> dict[str, Any]:
    """POST ``body`` as JSON to ``url``; the decoded JSON object it answers.

    Retries network errors, 408, 409, 429 and 5xx with exponential back-off (0.5 s doubling,
    at most 8 s); any other client error is final.

    Raises:
        PolicyError: on a final client error, an answer that is not a JSON object, or once
            the retries are spent (the message names ``what``, the URL and the last error).
    """
    import httpx2

    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    # ASCII-escaped: a lone surrogate the model once wrote (kept in the conversation) would
    # make a UTF-8 body unencodable. NaN cannot occur: tool arguments travel as text.
    content = json.dumps(body, ensure_ascii=True, default=str).encode("ascii")
    last = ""
    async with httpx2.AsyncClient(timeout=timeout) as client:
        for attempt in range(retries + 1):
            try:
                resp = await client.post(url, content=content, headers=headers)
            except httpx2.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
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
                if resp.status_code not in (408, 409, 429) and resp.status_code < 500:
                    break
            if attempt < retries:
                await asyncio.sleep(min(0.5 * 2 ** attempt, 8))
    raise PolicyError(f"{what} at {url} failed: {last}")
