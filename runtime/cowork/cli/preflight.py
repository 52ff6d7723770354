"""Model endpoints checked before the first episode: one cheap request each.

Without it a wrong ``--base-url`` or a missing key shows up as every episode ending
``policy_error`` after its retries (minutes of backing off per episode), with the cause
only in the trajectory. ``GET {base_url}/models`` with the key answers in milliseconds:
a connection error, a timeout, 401 or 403 stop the command (exit 3) with the endpoint,
the error and the fix; 404 or 405 (a server that lists no models) and anything else go on,
since the episodes' own retries and errors then say more than this request can.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from typing import Any

from ..errors import EndpointUnavailable
from ..llm import resolve_api_key, resolve_base_url

log = logging.getLogger(__name__)

#: Seconds the whole check may take per endpoint (connect and answer).
TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible endpoint a command will call."""

    role: str
    """Who calls it, as the user asked for it: ``--agent openai``, ``--judge-model``, ..."""
    base_url: str
    api_key: str
    key_hint: str
    """Where the key comes from: ``$OPENAI_API_KEY``, ..."""
    url_hint: str
    """Where the URL comes from: ``--base-url or $OPENAI_BASE_URL``, ..."""


def endpoints(*, agent: str, model: str | None, base_url: str | None, judge_model: str | None,
              judge_base_url: str | None, user_model: str | None, user_base_url: str | None) -> list[Endpoint]:
    """The endpoints a run with these options calls, resolved as the clients resolve them."""
    found = []
    if agent in ("openai", "harness") and model:
        found.append(Endpoint(f"--agent {agent}", resolve_base_url(base_url), resolve_api_key(), "$OPENAI_API_KEY",
                              "--base-url or $OPENAI_BASE_URL"))
    if agent == "vllm-server" and base_url:
        # VLLMServerClient's own default key; its constructor would load a tokenizer.
        found.append(Endpoint("--agent vllm-server", base_url.rstrip("/"), os.environ.get("VLLM_API_KEY", ""),
                              "$VLLM_API_KEY", "--base-url"))
    if judge_model:
        found.append(Endpoint("--judge-model", resolve_base_url(judge_base_url), resolve_api_key(), "$OPENAI_API_KEY",
                              "--judge-base-url or $OPENAI_BASE_URL"))
    if user_model:
        from .. import settings

        conf = settings.get()  # as SimulatedUser resolves them
        url = resolve_base_url(user_base_url, conf.user_base_url)
        key = resolve_api_key(None, conf.user_api_key)
        found.append(Endpoint("--user-model", url, key, "$COWORK_USER_API_KEY or $OPENAI_API_KEY",
                              "--user-base-url, $COWORK_USER_BASE_URL or $OPENAI_BASE_URL"))
    return found


async def check_endpoint(ep: Endpoint, timeout: float = TIMEOUT_S) -> int | None:
    """One ``GET {base_url}/models`` with the key; the HTTP status it answered.

    Raises:
        EndpointUnavailable: no connection, no answer in ``timeout``, or 401 / 403 (the key).
    """
    import httpx2

    url = f"{ep.base_url}/models"
    headers = {"Authorization": f"Bearer {ep.api_key}"} if ep.api_key else {}
    try:
        async with httpx2.AsyncClient(timeout=timeout) as client:
            resp = await client.get(url, headers=headers)
    except httpx2.HTTPError as exc:
        raise EndpointUnavailable(
            f"the model endpoint of {ep.role} at {ep.base_url} cannot be reached ({type(exc).__name__}: "
            f"{exc or 'no answer'}); check {ep.url_hint} (is the server running, is the URL's /v1 right?)") from exc
    if resp.status_code in (401, 403):
        fix = (f"set {ep.key_hint}" if not ep.api_key
               else f"check {ep.key_hint}: the endpoint does not accept the key it holds")
        raise EndpointUnavailable(f"the model endpoint of {ep.role} at {ep.base_url} refused the key "
                                  f"(HTTP {resp.status_code} on GET /models); {fix}")
    if resp.status_code in (404, 405):
        log.info("%s: %s answers but lists no models (HTTP %d); going on", ep.role, url, resp.status_code)
    elif resp.status_code != 200:
        log.warning("%s: GET %s answered HTTP %d; going on (episodes retry and report their own errors)",
                    ep.role, url, resp.status_code)
    return resp.status_code


async def preflight(eps: list[Endpoint]) -> None:
    """Check every endpoint at once (each at most :data:`TIMEOUT_S`).

    Raises:
        EndpointUnavailable: the first one that failed.
    """
    await asyncio.gather(*(check_endpoint(ep) for ep in eps))


async def judge_for(model: str | None, base_url: str | None) -> "Any":
    """The LLM judge a command grades with (``--judge-model``, ``--judge-base-url``), its
    endpoint checked first; None without ``model`` (judge items then stay not graded).

    Raises:
        EndpointUnavailable: The judge's endpoint does not answer, or refuses the key.
    """
    if not model:
        return None
    from ..grading.judge import LLMJudge

    await preflight(endpoints(agent="oracle", model=None, base_url=None, judge_model=model,
                              judge_base_url=base_url, user_model=None, user_base_url=None))
    return LLMJudge(model=model, base_url=base_url)

