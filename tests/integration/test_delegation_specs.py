"""The delegation specs (specs/deleg-*) solved by the harness in real sandboxes: a scripted main
agent hands each spec's parallel reading to scripted subagents, accepts their reports, and does
the writing (and every day's replies) itself. Each episode passes and is safe, and the audit
names the agent of every call exactly: the subagents' reads, the main agent's writes."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import ROOT
from cowork.agents.harness import HarnessPolicy
from cowork.agents.scripted import ScriptedPolicy
from cowork.episode.run import run_task
from cowork.spec.loader import load_spec

pytestmark = pytest.mark.docker

# No pool: each spec is its own task, so a pool would reuse nothing; the six episodes take
# about 4 s together (0.5-1.2 s each, measured with the task images built; a cold cache adds
# one small task-image build per spec).

#: Per spec, the oracle steps each subagent takes over (by index into the spec's oracle), in one
#: wave delegated where the first of them would run; every other step stays the main agent's.
PLANS: dict[str, dict[str, list[int]]] = {
    "deleg-esign-vendor-pricing": {"signly": [1, 2], "inkwell": [3, 4], "paperplane": [5, 6]},
    "deleg-board-report-from-parts": {"sales": [2], "support": [3], "engineering": [4], "finance": [5]},
    "deleg-carrier-rates-memory-day2": {"kraftcargo": [0, 1], "donau": [2], "fastfreight": [3]},
    "deleg-account-health-memory": {"fischer": [1], "elbe": [2], "spree": [3]},
    "deleg-incident-postmortem-logs": {"api": [1], "db": [2], "worker": [3]},
    "deleg-renewal-risk-review": {"globex": [2, 3], "initech": [4, 5], "hooli": [6, 7]},
}

Step = tuple[str, dict[str, Any]] | str


def _step(s) -> Step:
    return (s.tool, dict(s.args or {})) if s.tool else s.reply


def _scripts(oracle: list, plan: dict[str, list[int]]) -> tuple[list[Step], dict[str, list[Step]]]:
    """The main agent's script and each subagent's (by label) for one spec."""
    first = min(i for steps in plan.values() for i in steps)
    taken = {i for steps in plan.values() for i in steps}
    subs = {label: [*(_step(oracle[i]) for i in steps), f"{label}: read, notes above."] for label, steps in plan.items()}
    main: list[Step] = []
    for i, s in enumerate(oracle):
        if i == first:
            for label, steps in plan.items():
                tools = sorted({oracle[j].tool for j in steps})
                main.append(("delegate", {"task": f"Research {label}", "tools": tools, "label": label, "max_turns": 6}))
            for n in range(1, len(plan) + 1):
                main += [("await_result", {"id": f"sub-{n}"}), ("accept", {"id": f"sub-{n}"})]
        if i not in taken:
            main.append(_step(s))
    return main, subs


@pytest.mark.parametrize("name", sorted(PLANS))
async def test_harness_solves_delegation_spec(name, no_leftovers):
    loaded = load_spec(ROOT / "specs" / name)
    plan = PLANS[name]
    main_steps, subs = _scripts(list(loaded.spec.oracle), plan)
    policy = HarnessPolicy(ScriptedPolicy(main_steps, name="main-script"),
                           lambda a: ScriptedPolicy(subs[a.label or ""], name=a.label or ""))
    res = await run_task(loaded, policy)
    g, traj, ev = res.grade, res.trajectory, res.evidence
    assert traj.status == "completed", traj.error
    assert g.passed and g.safe, [(c.id, c.status, c.detail) for c in g.checks if c.status != "pass"]

    # Attribution, exact: each subagent made its reads, the main agent everything else.
    assert ev is not None
    ids = {label: f"sub-{n}" for n, label in enumerate(plan, 1)}
    expected = [(loaded.spec.oracle[i].tool, ids[label], label) for label, steps in plan.items() for i in steps]
    taken = {i for steps in plan.values() for i in steps}
    expected += [(s.tool, "main", None) for i, s in enumerate(loaded.spec.oracle) if s.tool and i not in taken]
    made = [(r["tool"], r["agent"]["id"], r["agent"]["assignment"]) for r in ev.tool_calls]
    assert sorted(made, key=str) == sorted(expected, key=str)
    assert all(r.get("kind") == "tool_call" for r in ev.tool_calls)
    assert all(r["agent"]["parent"] == (None if r["agent"]["id"] == "main" else "main") for r in ev.tool_calls)
    assert {k: a["status"] for k, a in traj.agents.items()} == {"main": "main", **{i: "accepted" for i in ids.values()}}
    for label, sid in ids.items():
        assert [s["tool"] for s in traj.agents[sid]["steps"]] == [loaded.spec.oracle[i].tool for i in plan[label]]
