"""Seeded, deterministic fault injection for service tools: 429, 500 and added latency.

The decision for the n-th call of a tool is a pure function of (seed, tool, n), so the
same seed and the same sequence of calls give the same faults in every run. The
middleware touches service tools only (names in the catalog); workspace tools and the
control channel never pass through it.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from dataclasses import dataclass
from typing import Any, Callable, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..toolhost.errors import FastmcpMiddleware, ToolError
from .names import SERVICE_TOOLS, TOOL_SERVICE

FaultKind = Literal["429", "500", "latency"]
#: Every fault kind, in the fixed order weighted draws walk.
FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)


class FaultRule(BaseModel):
    """How often one service or tool fails, and how."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    rate: float = Field(ge=0, le=1)
    """Share of calls that get a fault, 0 (never) to 1 (always)."""
    kinds: list[FaultKind] = Field(default=["429", "500"], min_length=1)
    """Faults to draw from, evenly: "429" (rate limited), "500" (server error), "latency"."""
    weights: dict[FaultKind, float] | None = None
    """Instead of ``kinds``: the mix, a weight per kind (``{"429": 35, "500": 35, latency: 30}``);
    weights are relative (they need not sum to 1 or 100), none negative, not all zero. A kind
    weighted 0 is never drawn."""
    retry_after_s: int = Field(2, ge=0, le=3600)
    """Retry-After seconds reported with a 429."""
    latency_ms: int = Field(500, ge=0, le=60000)
    """Delay added by a "latency" fault; the call then runs normally."""

    @model_validator(mode="before")
    @classmethod
    def _kinds_of_weights(cls, data: Any) -> Any:
        # YAML reads an unquoted 429 as a number; the kinds are the weights' keys (so a dumped
        # rule, kinds and all, loads again unchanged).
        if isinstance(data, dict) and isinstance(data.get("weights"), dict):
            weights = {str(k): v for k, v in data["weights"].items()}
            data = {**data, "weights": weights}
            if weights:
                data.setdefault("kinds", list(weights))
        return data

    @model_validator(mode="after")
    def _mix(self) -> "FaultRule":
        if self.weights is None:
            return self
        for kind, weight in self.weights.items():
            if not weight >= 0 or weight == float("inf"):  # NaN and infinity fail too
                raise ValueError(f"weights.{kind}: {weight!r} is not a weight; give a number >= 0")
        if not self.weights or sum(self.weights.values()) <= 0:
            raise ValueError("weights: all zero; give at least one kind a weight above 0")
        if set(self.kinds) != set(self.weights):
            raise ValueError(f"kinds {self.kinds} and weights {sorted(self.weights)} disagree; "
                             "give weights alone (its keys are the kinds)")
        return self

    def draw(self, u: float) -> FaultKind:
        """The kind for a uniform draw ``u`` in [0, 1): by ``weights`` when set, else evenly
        over ``kinds`` (the same index as before weights existed, so old seeds keep their faults)."""
        if self.weights is None:
            return self.kinds[int(u * len(self.kinds))]
        # A fixed order (the FaultKind order), so that the draw depends on the weights only,
        # never on how the spec happened to list them.
        mix = [(k, self.weights[k]) for k in FAULT_KINDS if self.weights.get(k, 0) > 0]
        target, acc = u * sum(w for _, w in mix), 0.0
        for kind, weight in mix:
            acc += weight
            if target < acc:
                return kind
        return mix[-1][0]  # u * total rounded up to the total


class FaultConfig(BaseModel):
    """Fault injection of one episode; the most specific rule wins (tool, then service, then default)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    seed: int = 0
    """Seed of the injector; the run may override it with the episode's seed."""
    default: FaultRule | None = None
    """Rule for every service tool without a more specific one."""
    services: dict[str, FaultRule] = {}
    """Rules per service name, e.g. ``mail``."""
    tools: dict[str, FaultRule] = {}
    """Rules per tool name, e.g. ``mail_send``."""

    @model_validator(mode="after")
    def _names(self) -> "FaultConfig":
        from .http_names import DECLARED  # the task's own HTTP tools and services count too

        http_tools, http_services = DECLARED.get()
        for name in self.services:
            if name not in SERVICE_TOOLS and name not in http_services:
                raise ValueError(f"services: unknown service {name!r}; known: {', '.join([*SERVICE_TOOLS, *http_services])}")
        for name in self.tools:
            if name not in TOOL_SERVICE and name not in http_tools:
                raise ValueError(f"tools: {name!r} is not a service tool")
        return self

    def rule_for(self, tool: str, service: str | None = None) -> FaultRule | None:
        """The rule that applies to ``tool`` (of ``service``: an HTTP tool's; default the
        built-in service the tool belongs to), or None."""
        if tool in self.tools:
            return self.tools[tool]
        return self.services.get(service if service is not None else TOOL_SERVICE.get(tool, ""), self.default)


@dataclass(frozen=True)
class Fault:
    """One injected fault."""

    kind: FaultKind
    tool: str
    call: int
    """0-based index of the call among this tool's calls."""
    retry_after_s: int | None = None
    latency_ms: int | None = None

    def record(self) -> dict[str, Any]:
        """The audit record of this fault."""
        rec: dict[str, Any] = {"kind": "fault", "tool": self.tool, "fault": self.kind, "call": self.call}
        if self.retry_after_s is not None:
            rec["retry_after_s"] = self.retry_after_s
        if self.latency_ms is not None:
            rec["latency_ms"] = self.latency_ms
        return rec

    def error(self) -> ToolError:
        """The tool error the agent sees (latency faults raise none)."""
        if self.kind == "429":
            return ToolError(f"429 Too Many Requests: {self.tool} is rate limited; "
                             f"Retry-After: {self.retry_after_s} s. Nothing was changed.")
        return ToolError(f"500 Internal Server Error: {self.tool} failed; nothing was changed, try again.")


def _uniform(seed: int, tool: str, n: int, salt: str) -> float:
    digest = hashlib.sha256(f"{seed}|{tool}|{n}|{salt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class FaultInjector:
    """Decides, deterministically, which service tool calls fail.

    Args:
        config: The rules.
        seed: Overrides ``config.seed`` (e.g. the episode's seed).
    """

    def __init__(self, config: FaultConfig, seed: int | None = None):
        self.config = config
        self.seed = config.seed if seed is None else seed
        self._initial_seed = self.seed
        self._calls: dict[str, int] = {}
        self._lock = threading.Lock()
        #: Tools whose faults are decided elsewhere (a task's HTTP tools, which may carry a
        #: built-in tool's name): the middleware leaves them alone.
        self.foreign: frozenset[str] = frozenset()

    def reset(self, seed: int | None = None) -> None:
        """Forget the call counts (between episodes) and take ``seed`` (None: the seed it was
        built with), exactly as a fresh injector built with that seed would."""
        with self._lock:
            self._calls.clear()
            self.seed = self._initial_seed if seed is None else seed

    def decide(self, tool: str, service: str | None = None) -> Fault | None:
        """Count one call of ``tool`` (of ``service``, for an HTTP tool) and return its fault, if any."""
        rule = self.config.rule_for(tool, service)
        with self._lock:
            n = self._calls.get(tool, 0)
            self._calls[tool] = n + 1
        if rule is None or rule.rate <= 0 or _uniform(self.seed, tool, n, "hit") >= rule.rate:
            return None
        kind = rule.draw(_uniform(self.seed, tool, n, "kind"))
        return Fault(kind=kind, tool=tool, call=n,
                     retry_after_s=rule.retry_after_s if kind == "429" else None,
                     latency_ms=rule.latency_ms if kind == "latency" else None)


class FaultMiddleware(FastmcpMiddleware):
    """Applies a FaultInjector to service tool calls and audits every injected fault.

    Add it after the audit middleware, so the audit log also shows the failed call.

    Args:
        injector: The injector deciding faults.
        audit: Appends one record to the audit log.
    """

    def __init__(self, injector: FaultInjector, audit: Callable[[dict[str, Any]], Any]):
        self.injector = injector
        self.audit = audit

    async def on_call_tool(self, context: Any, call_next: Any) -> Any:
        """Run the call, unless the injector decides a fault for it: then audit the fault and
        delay the call (latency) or fail it (the fault's error: a 429 or a 500)."""
        name = context.message.name
        if name in TOOL_SERVICE and name not in self.injector.foreign:
            fault = self.injector.decide(name)
            if fault is not None:
                self.audit(fault.record())
                if fault.kind == "latency":
                    assert fault.latency_ms is not None  # decide() sets it on every latency fault
                    await asyncio.sleep(fault.latency_ms / 1000)
                else:
                    raise fault.error()
        return await call_next(context)
