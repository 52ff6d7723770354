"""The harness coordinator's overhead per delegation (issue 30: under 5 ms beyond the tool calls).

On one real sandbox of the bench's spec, three variants alternate, ``n`` rounds each:

- **direct**: the main agent makes one read-only tool call itself (through the coordinator,
  attributed to ``main``), as a single agent would;
- **delegated**: the main agent delegates the same call: ``delegate`` (a scripted subagent
  that makes the call and replies), ``await_result``, ``accept``;
- **bare**: a delegation whose subagent replies at once, with no tool call.

The overhead per delegation is delegated minus direct (what delegating adds to the work
itself: the assignment's task, its policy's turns, the report and the acceptance), medians;
bare is the coordinator alone. The subagents are scripted, so no model time is counted.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

from ..agents.base import ToolCall, mcp_tool_to_openai
from ..agents.harness import Coordinator
from ..agents.scripted import ScriptedPolicy
from .phases import AGENT_STEPS

#: The target of issue 30, milliseconds per delegation beyond its tool calls.
TARGET_MS = 5.0


async def _round(coord: Coordinator, step: tuple[str, dict[str, Any]] | None) -> float:
    delegate = ToolCall(id="d", name="delegate", arguments={"task": "read it", "tools": [step[0]] if step else []})
    t0 = time.perf_counter()
    made = await coord.call(delegate)
    sid = json.loads(made.text)["id"] if not made.is_error else None
    got = await coord.call(ToolCall(id="w", name="await_result", arguments={"id": sid}))
    done = await coord.call(ToolCall(id="a", name="accept", arguments={"id": sid}))
    ms = (time.perf_counter() - t0) * 1000
    if made.is_error or got.is_error or done.is_error:
        raise RuntimeError(f"delegation failed: {made.text} / {got.text} / {done.text}")
    return ms


async def delegation_overhead(bench: Any, say: Any, n: int = 40) -> dict[str, Any]:
    """The figures above, on one sandbox the bench starts and stops."""
    say("harness delegation overhead")
    sb = await bench.start()
    try:
        tools = [mcp_tool_to_openai(t) for t in await sb.list_tools()]
        name, args = next(s for s in AGENT_STEPS if not isinstance(s, str))
        step = (name, dict(args))

        def factory(assignment: Any) -> ScriptedPolicy:
            script: list = [step, "done"] if assignment.tools else ["done"]
            return ScriptedPolicy(script, name="bench-sub")

        direct, delegated, bare = [], [], []
        for _ in range(n):
            coord = Coordinator(sb, factory, tools, max_subagents=4)
            t0 = time.perf_counter()
            r = await coord.call(ToolCall(id="c", name=name, arguments=dict(args)))
            direct.append((time.perf_counter() - t0) * 1000)
            if r.is_error:
                raise RuntimeError(f"{name} failed: {r.text}")
            delegated.append(await _round(coord, step))
            bare.append(await _round(coord, None))
        med = statistics.median
        return {"rounds": n, "tool": name, "direct_ms": round(med(direct), 2), "delegated_ms": round(med(delegated), 2),
                "bare_ms": round(med(bare), 2), "overhead_ms": round(med(delegated) - med(direct), 2),
                "target_ms": TARGET_MS}
    finally:
        await bench.stop(sb)
