"""Each spec's oracle through the TRL adapter and through run_task: the same reward?

Drives a ``CoworkTRL`` environment as GRPOTrainer does (reset with the dataset row, one tool call
per turn, the user channel for a reply that ends a turn, the transcript handed over by the
adapter's reward function) and compares its reward with ``run_task``'s for the same oracle.
By default it takes the specs under ``specs/`` whose grade reads the reply (``answer``,
``judge``) or that have a conversation (a user, events, later days).

    python scripts/trl_oracle_parity.py                     # those specs
    python scripts/trl_oracle_parity.py specs/mt-clarify-meeting-slot specs/crm-report-answer-numbers

Prints one JSON line per spec and a summary; exits 1 when a reward differs.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from cowork.agents import make_policy
from cowork.episode.run import run_task
from cowork.integrations import trl as ct
from cowork.rollouts.rewards import reward_for
from cowork.spec.loader import LoadedSpec, load_specs
from cowork.synth.dataset import resolve_tasks

ROOT = Path(__file__).resolve().parents[1]


def call(name: str, args: dict) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": name, "arguments": args}}]}


def through_trl(loaded: LoadedSpec) -> tuple[float | None, list[str]]:
    """The oracle's reward through the adapter, and the checks that failed."""
    spec = ct.CoworkTRL([loaded], max_sandboxes=1)
    try:
        env, row = spec.environment_factory(), spec.train_dataset[0]
        env.reset(**row)
        completion: list[dict] = []
        steps = list(loaded.spec.oracle)
        for n, step in enumerate(steps):
            if step.tool is not None:
                out = env._call_tool(step.tool, dict(step.args))  # MCP argument names, as the model sends them
                completion += [call(step.tool, dict(step.args)), {"role": "tool", "name": step.tool, "content": out}]
            elif n < len(steps) - 1 and ct.channel_reason(loaded):
                out = env.message_user(message=step.reply)
                completion += [call(ct.USER_TOOL, {"message": step.reply}),
                               {"role": "tool", "name": ct.USER_TOOL, "content": out}]
            else:
                completion.append({"role": "assistant", "content": step.reply})
        if steps and steps[-1].tool is not None:
            completion.append({"role": "assistant", "content": "Done."})
        ct.cowork_conversation(prompts=[row["prompt"]], completions=[completion], environments=[env])
        reward = env.get_reward()
        return reward, [c.id for c in env.grade.checks if not c.passed]
    finally:
        ct.close()


def main(argv: list[str]) -> int:
    if argv:
        specs = load_specs(resolve_tasks(argv))
    else:
        specs = [ld for ld in load_specs(resolve_tasks([str(ROOT / "specs")]))
                 if ld.spec.multi_turn or ct.reads_reply(ld)]
    same = 0
    for loaded in specs:
        t0 = time.monotonic()
        got, failed = through_trl(loaded)
        ref = asyncio.run(run_task(loaded, make_policy("oracle", loaded.spec))).grade
        want = reward_for(ref, "score")
        same += got == want
        print(json.dumps({"task": loaded.spec.id, "trl": got, "run_task": want, "failed": failed,
                          "seconds": round(time.monotonic() - t0, 1)}), flush=True)
    print(f"{same} of {len(specs)} specs: the same reward through the TRL adapter as through run_task")
    return 0 if same == len(specs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
