"""``cowork checkpoint ID`` / ``cowork restore ID SNAP``: snapshots of a sandbox left running by ``cowork up``.

The work is the in-container server's (cowork.server.state.checkpoint), asked through
cowork.sandbox.checkpoints as ``Sandbox.checkpoint()`` asks it; these commands find the container,
hand over the run dir its label names, and report.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from ..errors import CoworkError, SandboxError
from . import exits, output

#: Draining a call, saving or rebuilding a full workspace: generous, the server bounds each step.
TIMEOUT_S = 300.0


def _running(ref: str) -> tuple[str, Path]:
    """The name and run dir of the running sandbox ``ref`` names.

    Raises:
        CoworkError: no sandbox, or several, match ``ref``.
        SandboxError: it is not running, or has no run dir.
    """
    from ..engine import labels
    from ..engine.reaper import find_container

    container = find_container(ref)
    run_dir = (container.labels or {}).get(labels.RUN_DIR)
    if not run_dir or container.status != "running":
        raise SandboxError(f"sandbox {container.name} is {container.status} or has no run dir; "
                           "checkpoints need a running sandbox (`cowork up`)")
    return container.name, Path(run_dir)


def checkpoint(ref: str, *, as_json: bool) -> int:
    """Snapshot the sandbox ``ref``; prints the snapshot id (or the whole snapshot as JSON)."""
    from ..sandbox.checkpoints import checkpoint_run_dir

    name, run_dir = _running(ref)
    snap = asyncio.run(checkpoint_run_dir(run_dir, timeout=TIMEOUT_S, what=name))
    if as_json:
        output.print_json(snap)
    else:
        output.say(f"{snap['id']}  state {snap['hash'][:16]}  audit {snap['audit_count']} records  "
                   f"workspace {snap['workspace_entries']} names, {snap['workspace_bytes']} bytes")
    return exits.OK


def restore(ref: str, snapshot: str, *, as_json: bool) -> int:
    """Return the sandbox ``ref`` to ``snapshot``; the branch left is archived, never deleted,
    and graded with the live state from then on (its violations stay in the grade)."""
    if not snapshot.startswith("cp-"):
        raise CoworkError(f"{snapshot!r} is not a snapshot id (ids look like cp-0123456789abcdef; "
                          "`cowork checkpoint ID` prints one)")
    from ..sandbox.checkpoints import restore_run_dir

    name, run_dir = _running(ref)
    done = asyncio.run(restore_run_dir(run_dir, snapshot, timeout=TIMEOUT_S, what=name))
    if as_json:
        output.print_json(done)
    else:
        ab = done["abandoned"]
        output.say(f"restored {done['snapshot']}  state {done['hash'][:16]} (verified)  "
                   f"branch left archived as {ab['path']} ({ab['count']} records; `cowork grade` and "
                   "`cowork down --evidence` grade and keep it with the live state)")
    return exits.OK
