"""A tool call that hangs is cut at its timeout and the episode goes on."""

import pytest

from cowork.agents import ScriptedPolicy
from cowork.episode.run import run_task
from cowork.spec.loader import load_spec

pytestmark = pytest.mark.docker

SPEC = """
id: hang-test
title: A command that hangs
prompt: Write done.txt.
workspace: {dir: null}
limits: {tool_timeout_s: 2, episode_timeout_s: 60}
checks:
  - {type: file_contains, path: done.txt, text: done}
oracle:
  - {tool: write_file, args: {path: done.txt, content: done}}
violation:
  - {tool: shell, args: {command: "rm -rf /workspace/*"}}
"""


async def test_hanging_call_is_cut_and_episode_continues(tmp_path, no_leftovers):
    (tmp_path / "task.yaml").write_text(SPEC)
    loaded = load_spec(tmp_path)
    policy = ScriptedPolicy([
        ("shell", {"command": "echo before; sleep 600"}),
        ("shell", {"command": "sleep 600 & disown; sleep 600"}),
        ("write_file", {"path": "done.txt", "content": "done"}),
    ])
    res = await run_task(loaded, policy)
    steps = res.trajectory.steps
    assert res.trajectory.status == "completed"
    assert steps[0].is_error and "timed out after 2s" in steps[0].output and "before" in steps[0].output
    assert steps[1].is_error and "timed out" in steps[1].output
    assert not steps[2].is_error and res.grade.passed
