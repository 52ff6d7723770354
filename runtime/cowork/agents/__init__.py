"""Policies (agents): scripted, OpenAI-compatible, a vLLM server, and (optional extras) in-process
vLLM and transformers."""

from __future__ import annotations

from typing import Any

from .base import AssistantTurn, Policy, ToolCall, mcp_tool_to_openai
from .scripted import ScriptedPolicy, nop_policy

AGENTS = ("oracle", "nop", "violation", "openai", "vllm-server", "vllm", "hf", "harness")

#: Model backends shared by the policies of many episodes, one per backend and options: each
#: episode gets a new stateful policy, the model (or server client) is made once.
_ENGINES: dict[tuple, Any] = {}


def _shared(key: tuple, make: Any) -> Any:
    if key not in _ENGINES:
        _ENGINES[key] = make()
    return _ENGINES[key]


def _key(value: Any) -> Any:
    """An option as part of a cache key: plain values as they are, objects by identity."""
    return value if isinstance(value, (str, int, float, bool, type(None))) else (type(value).__name__, id(value))


def make_policy(kind: str, spec: Any = None, **options: Any) -> Policy:
    """Build a policy by name; backends import lazily.

    Args:
        kind: ``oracle``, ``nop``, ``violation``, ``openai``, ``vllm-server``, ``vllm`` or ``hf``;
            or ``harness`` (agents.harness): a main agent and its subagents, each a policy of
            ``backend`` (an option; default ``openai``) made with the other options (the CLI's
            ``--agent harness`` uses ``openai``).
        spec: The TaskSpec (needed by the scripted ones).
        options: Backend options. ``openai``: those of OpenAIPolicy (``model``, ``base_url``,
            ...). ``vllm-server``: ``base_url``, ``model``, ``tokenizer`` (a name or folder;
            without one the model name is tried, and failing that the policy runs in chat
            mode, where the server re-tokenizes: see ``cowork.agents.vllm_server``), and
            VLLMServerClient's others. ``vllm``: ``model`` and ``vllm.AsyncEngineArgs``
            fields. ``hf``: ``model`` (a folder or hub name) and HFEngine.from_pretrained's
            others. For the last three ``sampling`` (SamplingSettings or a dict) too. The
            model of ``vllm`` and ``hf``, and the client of ``vllm-server``, are made once per
            options and shared by later policies.

    Raises:
        ValueError: for an unknown kind, or a model backend without ``model``.
    """
    if kind == "harness":
        from .harness import HarnessPolicy

        backend = options.pop("backend", "openai")
        if backend == "harness":
            raise ValueError("a harness's backend must be a model backend, not another harness")
        return HarnessPolicy(make_policy(backend, spec, **dict(options)),
                             lambda assignment: make_policy(backend, spec, **dict(options)))
    if kind == "oracle":
        return ScriptedPolicy([s.reply if s.tool is None else (s.tool, s.args) for s in spec.oracle], name="oracle")
    if kind == "violation":
        return ScriptedPolicy([s.reply if s.tool is None else (s.tool, s.args) for s in spec.violation],
                              name="violation")
    if kind == "nop":
        return nop_policy()
    if kind == "openai":
        from .openai import OpenAIPolicy

        return OpenAIPolicy(**options)
    if kind in ("vllm-server", "vllm", "hf"):
        from .tokens import SamplingSettings

        sampling = options.pop("sampling", None)
        if isinstance(sampling, dict):
            sampling = SamplingSettings.model_validate(sampling)
        if not options.get("model"):
            raise ValueError(f"agent {kind!r} needs model= (a model name or folder)")
        key = (kind, tuple(sorted((k, _key(v)) for k, v in options.items())))
        if kind == "vllm-server":
            from .vllm_server import VLLMServerClient

            return _shared(key, lambda: VLLMServerClient(**options)).policy(sampling)
        if kind == "vllm":
            from .vllm_engine import VLLMEngine

            return _shared(key, lambda: VLLMEngine.start(**options)).policy(sampling)
        from .hf import HFEngine

        path = options.pop("model")
        return _shared(key, lambda: HFEngine.from_pretrained(path, **options)).policy(sampling)
    raise ValueError(f"unknown agent {kind!r}; choose one of {', '.join(AGENTS)}")


__all__ = ["AGENTS", "AssistantTurn", "Policy", "ScriptedPolicy", "ToolCall", "make_policy", "mcp_tool_to_openai", "nop_policy"]
