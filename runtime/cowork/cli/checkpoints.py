"""``cowork checkpoint ID`` / ``cowork restore ID SNAP``: snapshots of a sandbox left running by ``cowork up``.

The work is the in-container server's (cowork.server.state.checkpoint); these commands find the
container, reach its control socket through the run dir its label names, and report.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ..errors import CoworkError, SandboxError
from . import exits, output

#: Draining a call, saving or rebuilding a full workspace: generous, the server bounds each step.
TIMEOUT_S = 300.0


def _run_dir(ref: str) -> Path:
    from ..engine import labels as L
    from .commands import _find

    container = _find(ref)
    run_dir = (container.labels or {}).get(L.RUN_DIR)
    if not run_dir or container.status != "running":
        raise SandboxError(f"sandbox {container.name} is {container.status} or has no run dir; "
                           "checkpoints need a running sandbox (`cowork up`)")
    return Path(run_dir)


def _request(ref: str, op: str, **fields: Any) -> dict[str, Any]:
    from ..sandbox.control import control_request

    resp = asyncio.run(control_request(_run_dir(ref), op, timeout=TIMEOUT_S, **fields))
    return {k: v for k, v in resp.items() if k != "ok"}


def checkpoint(ref: str, *, as_json: bool) -> int:
    """Snapshot the sandbox ``ref``; prints the snapshot id (or the whole snapshot as JSON)."""
    snap = _request(ref, "checkpoint")
    if as_json:
        output.print_json(snap)
    else:
        output.say(f"{snap['id']}  state {snap['hash'][:16]}  audit {snap['audit_count']} records  "
                   f"workspace {snap['workspace_entries']} names, {snap['workspace_bytes']} bytes")
    return exits.OK


def restore(ref: str, snapshot: str, *, as_json: bool) -> int:
    """Return the sandbox ``ref`` to ``snapshot``; the branch left is archived, never deleted."""
    if not snapshot.startswith("cp-"):
        raise CoworkError(f"{snapshot!r} is not a snapshot id (ids look like cp-0123456789abcdef; "
                          "`cowork checkpoint ID` prints one)")
    done = _request(ref, "restore", snapshot=snapshot)
    if as_json:
        output.print_json(done)
    else:
        ab = done["abandoned"]
        output.say(f"restored {done['snapshot']}  state {done['hash'][:16]} (verified)  "
                   f"branch left archived as {ab['path']} ({ab['count']} records)")
    return exits.OK
