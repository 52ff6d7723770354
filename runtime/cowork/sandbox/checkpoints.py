"""Checkpoints of a running sandbox: snapshot the whole task state, restore it as a new branch.

``Sandbox.checkpoint()`` and ``Sandbox.restore(snapshot)`` land here, and so do ``cowork
checkpoint`` / ``cowork restore`` (through :func:`checkpoint_run_dir` and :func:`restore_run_dir`,
which need only the run dir of a sandbox left running by ``cowork up``); the work is done by the
in-container server (cowork.server.state.checkpoint), which keeps snapshots and abandoned branches
in the root-only run dir. Two uses: a harness recovering after a failure, and several
rollouts branched from one mid-episode state (credit assignment). See docs/checkpoints.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from ..errors import CheckpointError, SandboxError
from ..evidence import Evidence
from ..formats import EXPORT_DIR, verify_chain
from .control import control_request
from .mcp import tool_annotations


class Checkpointable(Protocol):
    """What checkpoints use of a sandbox handle (a :class:`~cowork.sandbox.sandbox.Sandbox`)."""

    name: str
    image: str
    run_dir: Path
    spec: Any
    unexported: bool

    @property
    def uses_services(self) -> bool:
        """The task has mock services (their state is part of the evidence)."""

    async def tools(self) -> list:
        """The MCP tools the sandbox serves."""

    def _initial_hashes(self) -> dict[str, str]: ...


#: Folders of the run dir (server.checkpoint writes them).
CHECKPOINT_DIR = "checkpoints"
BRANCH_DIR = "branches"


def _timeout(sb: Checkpointable) -> float:
    # Draining waits out the tool timeout; saving or rebuilding a full disk_mb takes seconds.
    return sb.spec.limits.tool_timeout_s + 120


# --------------------------------------------------------------------------- by run dir
async def checkpoint_run_dir(run_dir: Path, *, timeout: float, what: str) -> dict[str, Any]:
    """Ask the server behind ``run_dir``'s control socket for a snapshot (see :func:`checkpoint`).

    Args:
        run_dir: The sandbox's host run dir.
        timeout: Seconds to wait for the answer.
        what: The sandbox as error messages name it.

    Raises:
        CheckpointError: the server refused or failed, or its socket did not answer.
    """
    try:
        resp = await control_request(Path(run_dir), "checkpoint", timeout=timeout)
    except SandboxError as exc:
        raise CheckpointError(f"checkpoint of {what} failed: {exc}") from exc
    return {k: v for k, v in resp.items() if k != "ok"}


async def restore_run_dir(run_dir: Path, snapshot_id: str, *, timeout: float, what: str) -> dict[str, Any]:
    """Ask the server behind ``run_dir``'s control socket to restore ``snapshot_id`` (see
    :func:`restore`); the server checks the state hash against the snapshot's itself.

    Args:
        run_dir: The sandbox's host run dir.
        snapshot_id: The snapshot's id (``cp-...``).
        timeout: Seconds to wait for the answer.
        what: The sandbox as error messages name it.

    Raises:
        CheckpointError: an unknown snapshot (nothing changed), a failed restore, or a socket
            that did not answer.
    """
    try:
        resp = await control_request(Path(run_dir), "restore", timeout=timeout, snapshot=snapshot_id)
    except SandboxError as exc:
        raise CheckpointError(f"restore of {what} to {snapshot_id!r} failed: {exc}") from exc
    return {k: v for k, v in resp.items() if k != "ok"}


# --------------------------------------------------------------------------- by handle
async def checkpoint(sb: Checkpointable) -> dict[str, Any]:
    """Snapshot the sandbox's whole task state.

    New calls wait and running ones are drained; every agent process is then killed (a
    checkpoint, like an export, ends the agent's background jobs).

    Returns:
        The snapshot: ``id``, ``hash`` (the state hash restores are verified against),
        ``audit_count`` and ``audit_last_hash`` (the chain up to and including the
        ``checkpoint`` record), ``time``, ``clock``, and the sizes saved.

    Raises:
        CheckpointError: the state does not fit in the task's ``disk_mb``, the run dir's
            checkpoint store is full, or the server failed.
    """
    return await checkpoint_run_dir(sb.run_dir, timeout=_timeout(sb), what=f"{sb.name} (task {sb.spec.id})")


async def restore(sb: Checkpointable, snapshot: dict[str, Any] | str) -> dict[str, Any]:
    """Return the sandbox to ``snapshot`` (the dict from :func:`checkpoint`, or its id).

    The live branch is archived first (see :func:`branches`), never deleted; the live audit
    log becomes the snapshot's prefix plus a ``restore`` record. ``sb.unexported`` follows
    the server: True when records of the restored prefix were never exported.

    Returns:
        ``hash`` (equal to the snapshot's), ``branch`` (the number the abandoned branch was
        archived under), ``abandoned`` (its record count, last hash, path), ``audit_count``.

    Raises:
        CheckpointError: an unknown snapshot (nothing changed); or the state after the
            restore differs from the snapshot's.
    """
    snap_id = snapshot.get("id") if isinstance(snapshot, dict) else snapshot
    if not isinstance(snap_id, str):  # the server would refuse it as an unknown snapshot
        raise CheckpointError(f"restore of {sb.name}: snapshot id {snap_id!r} is not a string; pass the dict "
                              "checkpoint() returned, or its id")
    out = await restore_run_dir(sb.run_dir, snap_id, timeout=_timeout(sb), what=f"{sb.name} (task {sb.spec.id})")
    if isinstance(snapshot, dict) and snapshot.get("hash") and out["hash"] != snapshot["hash"]:
        raise CheckpointError(f"restore of {sb.name} to {snap_id}: state hash {out['hash']} differs from the "
                              f"snapshot's {snapshot['hash']}; do not use this sandbox further")
    sb.unexported = bool(out.get("unexported"))
    return out


async def discard(sb: Checkpointable, snapshot: dict[str, Any] | str) -> None:
    """Delete a snapshot to free the run dir's checkpoint store (archived branches stay).

    Raises:
        CheckpointError: no such snapshot.
    """
    snap_id = snapshot.get("id") if isinstance(snapshot, dict) else snapshot
    try:
        await control_request(sb.run_dir, "checkpoint_discard", snapshot=snap_id)
    except SandboxError as exc:
        raise CheckpointError(f"discard of {snap_id!r} in {sb.name} failed: {exc}") from exc


def snapshots(run_dir: Path) -> list[dict[str, Any]]:
    """The snapshots kept in a sandbox's run dir, oldest first (read from the host side)."""
    out = []
    for meta in sorted((Path(run_dir) / CHECKPOINT_DIR).glob("cp-*/meta.json")):
        data = json.loads(meta.read_text())
        out.append({"hash": data["state"]["hash"], **{k: data.get(k) for k in (
            "id", "time", "episode", "from_snapshot", "audit_count", "audit_last_hash", "clock")}})
    return sorted(out, key=lambda s: s["time"])


def branches(run_dir: Path) -> list[dict[str, Any]]:
    """The branches restores abandoned, by number: ``count``, ``last_hash``, ``sha256`` of the
    archived log, the snapshot it had started from and the one restored to."""
    found = [json.loads(p.read_text()) for p in (Path(run_dir) / BRANCH_DIR).glob("branch-*/meta.json")]
    return sorted(found, key=lambda b: b["branch"])


async def branch_evidence(sb: Checkpointable, branch: int) -> Evidence:
    """The evidence of an abandoned branch, as it stood when a restore left it: its audit log
    (whole chain, verified here), workspace export and services state. Grade it with
    ``cowork.grading.grade`` like any bundle: a violation made on a branch later abandoned
    stays gradable.

    Raises:
        CheckpointError: no such branch, or its archived log does not verify.
    """
    where = Path(sb.run_dir) / BRANCH_DIR / f"branch-{int(branch)}"
    if not (where / "meta.json").exists():
        raise CheckpointError(f"sandbox {sb.name} has no archived branch {branch}; see checkpoints.branches()")
    meta = json.loads((where / "meta.json").read_text())
    audit = (where / "audit.jsonl").read_text()
    report = verify_chain(audit, expected_count=meta["count"])
    if not report.valid or (report.records and report.records[-1]["hash"] != meta["last_hash"]):
        raise CheckpointError(f"archived branch {branch} of {sb.name}: its audit log does not verify: {report.error}")
    seed_state = final_state = None
    if sb.uses_services:
        await control_request(sb.run_dir, "dump_state")  # writes the seed's dump (it never changes)
        seed_state = json.loads((Path(sb.run_dir) / EXPORT_DIR / "state_seed.json").read_text())
        final_state = json.loads((where / "state.json").read_text())
    return Evidence(
        audit_text=audit, audit_count=meta["count"], workspace_tar=(where / "workspace.tar").read_bytes(),
        initial=sb._initial_hashes(), trace={},
        meta={"task": sb.spec.id, "image": sb.image, "container": sb.name,
              "tool_annotations": tool_annotations(await sb.tools()), "branch": meta},
        state_seed=seed_state, state_final=final_state,
    )
