"""cowork's workspace tools under the names Claw-Eval's sandbox gives its own.

Claw-Eval's sandbox mode offers the agent a shell and file tools (``Bash``, ``Read``,
``Write``, ``Edit``, ``Glob``, ``Grep``), and some of its graders and judge rubrics read
those names in the trace ("did the assistant use Bash for the calculation?"). An imported
task gives the agent cowork's workspace tools instead; when its trajectory is translated into
Claw-Eval's trace, each call is written under the name and argument names the original
would have recorded for the same action, so the original grader reads what it expects.
"""

from __future__ import annotations

from typing import Any

#: cowork tool -> (Claw-Eval sandbox tool, {cowork argument: Claw-Eval argument}).
SANDBOX_TOOLS: dict[str, tuple[str, dict[str, str]]] = {
    "shell": ("Bash", {"command": "command", "timeout_s": "timeout"}),
    "read_file": ("Read", {"path": "file_path", "offset": "offset", "limit": "limit"}),
    "write_file": ("Write", {"path": "file_path", "content": "content"}),
    "edit_file": ("Edit", {"path": "file_path", "old_string": "old_string", "new_string": "new_string",
                           "replace_all": "replace_all"}),
    "list_files": ("Glob", {"pattern": "pattern", "path": "path"}),
    "grep": ("Grep", {"pattern": "pattern", "path": "path", "glob": "glob", "ignore_case": "case_insensitive"}),
}

#: Where Claw-Eval's sandbox puts the task's files: paths the agent gives relative to the
#: workspace are written absolute, as the original's agent would see them.
WORKSPACE = "/workspace"


def claw_call(tool: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(name, input)`` of a cowork tool call as Claw-Eval's trace records it: a workspace tool
    under its sandbox name with its arguments renamed (a timeout in seconds stays seconds;
    unknown arguments keep their names); any other tool (an HTTP tool keeps the name it has in
    the original task) unchanged."""
    if tool not in SANDBOX_TOOLS:
        return tool, dict(args)
    name, renames = SANDBOX_TOOLS[tool]
    out: dict[str, Any] = {}
    for key, value in args.items():
        target = renames.get(key, key)
        if target == "file_path" and isinstance(value, str) and not value.startswith("/"):
            value = f"{WORKSPACE}/{value.removeprefix('./')}"
        out[target] = value
    return name, out
