"""Long-running jobs in real sandboxes (issue 30): with ``limits.background_jobs`` a job started
in one turn runs on through the turn boundaries and into day 2, the agent polls its log, and
every export lists the jobs alive with their command, start and log tail for the evidence."""

from __future__ import annotations

import json
import textwrap

import pytest

from cowork.agents.scripted import ScriptedPolicy
from cowork.episode.run import run_task
from cowork.spec.loader import load_spec

pytestmark = pytest.mark.docker

SPEC = """\
id: jobs-days
title: A long build polled across turns and days
prompt: Start the build in the background.
clock: 2026-03-02T09:00:00Z
tools: [shell, read_file]
limits: {background_jobs: %s, tool_timeout_s: 10}
user:
  turns:
    - {say: "How is the build going?"}
days:
  - {clock: "now+1d@09:00", prompt: "Is the build done?"}
checks:
  - {id: built, type: file_contains, path: build.log, text: "build done"}
"""

#: Each step of the job waits for a sign from a later turn: only a job still alive can write it.
BUILD = ("nohup bash -c 'echo started; until [ -e /tmp/next ]; do sleep 0.05; done; echo step 2; "
         "until [ -e /tmp/finish ]; do sleep 0.05; done; echo build done' > build.log 2>&1 &")
STUCK = "nohup bash -c 'echo waiting for ever; exec sleep 1000' > /tmp/stuck.log 2>&1 &"
#: A job whose output is a FIFO no one reads: the export must neither read it nor hang on it.
PIPE = "mkfifo /tmp/pipe; nohup bash -c 'exec 3<>/tmp/pipe; exec sleep 1000 >&3' > /dev/null 2>&1 &"

SCRIPT = [
    ("shell", {"command": BUILD + " until [ -s build.log ]; do sleep 0.05; done"}), "Started.",  # day 1, turn 1
    ("shell", {"command": "touch /tmp/next; sleep 1"}), ("read_file", {"path": "build.log"}),
    "Still running.",                                                                      # day 1, turn 2
    ("shell", {"command": "touch /tmp/finish; sleep 1"}), ("read_file", {"path": "build.log"}),
    ("shell", {"command": STUCK + " until [ -s /tmp/stuck.log ]; do sleep 0.05; done; " + PIPE + " sleep 0.5"}),
    "Done.",                                                                               # day 2, turn 3
]


def _spec(tmp_path, jobs: bool):
    d = tmp_path / "task"
    (d / "workspace").mkdir(parents=True)
    oracle = [{"reply": s} if isinstance(s, str) else {"tool": s[0], "args": s[1]} for s in SCRIPT]
    (d / "task.yaml").write_text(textwrap.dedent(SPEC % ("true" if jobs else "false"))
                                 + f"oracle: {json.dumps(oracle)}\nviolation: [{{reply: No.}}]\n")
    return load_spec(d)


def _read_results(traj) -> list[str]:
    calls = {}
    for m in traj.messages:
        for c in m.get("tool_calls") or []:
            calls[c["id"]] = c["function"]["name"]
    return [m["content"] for m in traj.messages if m["role"] == "tool" and calls.get(m.get("tool_call_id")) == "read_file"]


async def test_a_job_runs_on_across_turns_and_days_and_the_evidence_lists_it(tmp_path, no_leftovers):
    res = await run_task(_spec(tmp_path, jobs=True), ScriptedPolicy(SCRIPT))
    traj = res.trajectory
    assert traj.status == "completed", traj.error
    turn2, day2 = _read_results(traj)
    assert "step 2" in turn2 and "build done" not in turn2  # alive after turn 1's boundary
    assert "build done" in day2  # alive after day 1's last boundary and the clock's move to day 2
    assert res.grade.passed, res.grade.summary()

    boundaries = [e for e in traj.conversation if e["kind"] == "boundary"]
    assert [(b["turn"], b["day"]) for b in boundaries] == [(1, 1), (2, 1), (3, 2)]
    job = boundaries[0]["jobs"][0]
    assert len(boundaries[0]["jobs"]) == 1 and "echo started" in job["command"]
    assert job["log"] == "/workspace/build.log" and job["log_tail"] == "started\n"
    assert job["started"].endswith("Z") and isinstance(job["pid"], int)
    assert set(job) == {"pid", "command", "started", "log", "log_tail"}
    assert boundaries[1]["jobs"][0]["pid"] == job["pid"] and boundaries[1]["jobs"][0]["log_tail"] == "started\nstep 2\n"
    # the final export lists the jobs still running (the build had finished), then ends them;
    # a FIFO as a job's output is named, never read
    final = res.evidence.meta["export"]["jobs"]
    assert [(j["log"], j["log_tail"]) for j in final] == [("/tmp/stuck.log", "waiting for ever\n"), ("/tmp/pipe", None)]
    assert all("sleep 1000" in j["command"] for j in final)


async def test_without_background_jobs_the_job_dies_with_its_shell_call(tmp_path, no_leftovers):
    res = await run_task(_spec(tmp_path, jobs=False), ScriptedPolicy(SCRIPT))
    turn2, day2 = _read_results(res.trajectory)
    assert "step 2" not in turn2 and "build done" not in day2 and not res.grade.passed
    assert "jobs" not in res.evidence.meta["export"]


BUSY = """\
id: jobs-busy
title: A job writing while the user acts
prompt: Start the writer.
tools: [shell]
limits: {background_jobs: true, tool_timeout_s: 10}
user:
  turns:
    - say: I added my notes.
      actions: [{tool: write_file, args: {path: from-user.txt, content: "user\\n"}}]
checks:
  - {id: busy, type: file_exists, path: busy.txt}
oracle: [{reply: Done.}]
violation: [{reply: No.}]
"""


async def test_a_job_is_held_still_while_the_user_acts_so_its_writes_never_pass_as_the_users(tmp_path, no_leftovers):
    """The attack: a job that keeps writing during the user's action, so that its change would be
    measured as the user's (folded into the baseline, no longer the agent's). Held stopped, it
    changes nothing meanwhile; it runs on afterwards."""
    d = tmp_path / "busy"
    (d / "workspace").mkdir(parents=True)
    (d / "task.yaml").write_text(BUSY)
    writer = "nohup bash -c 'while :; do echo x >> busy.txt; sleep 0.002; done' > /dev/null 2>&1 & sleep 0.3"
    res = await run_task(load_spec(d), ScriptedPolicy([("shell", {"command": writer}), "Started.",
                                                       ("shell", {"command": "wc -l < busy.txt; sleep 0.3; "
                                                                             "wc -l < busy.txt"}), "Done."]))
    assert res.trajectory.status == "completed", res.trajectory.error
    user = [w for w in res.evidence.meta["world"] if w["actor"] == "user"]
    assert len(user) == 1 and set(user[0]["files"]) == {"from-user.txt"}, user
    counts = [m["content"] for m in res.trajectory.messages if m["role"] == "tool"][-1]
    first, second = (int(n) for n in json.loads(counts)["output"].split())
    assert second > first > 0  # still writing in turn 2
