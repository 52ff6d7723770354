"""``cowork checkpoint ID`` / ``cowork restore ID SNAP``: snapshots of a sandbox left running by ``cowork up``.

The work is the in-container server's (cowork.server.state.checkpoint), asked through
cowork.sandbox.checkpoints as ``Sandbox.checkpoint()`` asks it; these commands find the container,
hand over the run dir its label names, and report.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
from pathlib import Path
from typing import Any

from ..errors import CoworkError, SandboxError
from . import exits, output

#: Draining a call, saving or rebuilding a full workspace: generous, the server bounds each step.
TIMEOUT_S = 300.0
#: A snapshot id, as the server makes them (cowork.server.state.checkpoint.SNAPSHOT_ID).
SNAPSHOT_ID = re.compile(r"cp-[0-9a-f]{16}")


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


def _listed(snaps: list[dict[str, Any]]) -> str:
    if not snaps:
        return "it has none; `cowork checkpoint ID` makes one"
    ids = [s["id"] for s in snaps]
    return "its snapshots: " + ", ".join(ids[-5:]) + (f" and {len(ids) - 5} older" if len(ids) > 5 else "")


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


def _snapshots(run_dir: Path) -> list[dict[str, Any]] | None:
    """The snapshots kept in the run dir, oldest first; None when they cannot be read here."""
    from ..sandbox.checkpoints import snapshots

    try:
        return snapshots(run_dir)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def list_snapshots(ref: str, *, as_json: bool) -> int:
    """``cowork checkpoint ID --list``: the sandbox's snapshots, oldest first."""
    from ..engine.reaper import find_container

    container = find_container(ref)
    run_dir = _run_dir(container)
    snaps = _snapshots(run_dir)
    if snaps is None:
        raise CoworkError(f"the snapshots of {container.name} cannot be read from {run_dir} (another user's "
                          "sandbox?); list them as the user who started it")
    if as_json:
        output.print_json({"sandbox": container.name, "snapshots": snaps})
        return exits.OK
    if not snaps:
        output.say(f"{container.name} has no snapshots (make one with `cowork checkpoint {container.id[:12]}`)")
    for snap in snaps:
        when = dt.datetime.fromtimestamp(snap["time"], dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") \
            if isinstance(snap.get("time"), (int, float)) else "?"
        output.say(f"{snap['id']}  {when}  state {str(snap['hash'])[:16]}  audit {snap['audit_count']} records"
                   + (f"  (from {snap['from_snapshot']})" if snap.get("from_snapshot") else ""))
    return exits.OK


def _run_dir(container: Any) -> Path:
    from ..engine import labels

    run_dir = (container.labels or {}).get(labels.RUN_DIR)
    if not run_dir:
        raise SandboxError(f"sandbox {container.name} has no run dir; checkpoints need a sandbox `cowork up` started")
    return Path(run_dir)


def restore(ref: str, snapshot: str, *, as_json: bool) -> int:
    """Return the sandbox ``ref`` to ``snapshot``; the branch left is archived, never deleted,
    and graded with the live state from then on (its violations stay in the grade).

    Raises:
        CoworkError: ``snapshot`` is no snapshot id, or not one of this sandbox's (bad input:
            nothing changed).
        CheckpointError: the restore itself failed.
    """
    if not SNAPSHOT_ID.fullmatch(snapshot):
        raise CoworkError(f"{snapshot!r} is not a snapshot id (ids look like cp-0123456789abcdef; "
                          "`cowork checkpoint ID` makes one, `cowork checkpoint ID --list` lists them)")
    from ..sandbox.checkpoints import restore_run_dir

    name, run_dir = _running(ref)
    known = _snapshots(run_dir)
    if known is not None and snapshot not in {s["id"] for s in known}:
        raise CoworkError(f"{name} has no snapshot {snapshot!r} ({_listed(known)}); nothing was changed")
    try:
        done = asyncio.run(restore_run_dir(run_dir, snapshot, timeout=TIMEOUT_S, what=name))
    except SandboxError as exc:
        if "no snapshot" in str(exc) or "not a snapshot id" in str(exc):  # the server's own check
            raise CoworkError(f"{name} has no snapshot {snapshot!r} (`cowork checkpoint {ref} --list` lists "
                              "its snapshots); nothing was changed") from None
        raise
    if as_json:
        output.print_json(done)
    else:
        ab = done["abandoned"]
        output.say(f"restored {done['snapshot']}  state {done['hash'][:16]} (verified)  "
                   f"branch left archived as {ab['path']} ({ab['count']} records; `cowork grade` and "
                   "`cowork down --evidence` grade and keep it with the live state)")
    return exits.OK
