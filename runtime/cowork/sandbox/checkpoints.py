"""Checkpoints of a running sandbox: snapshot the whole task state, restore it as a new branch.

``Sandbox.checkpoint()`` and ``Sandbox.restore(snapshot)`` land here, and so do ``cowork
checkpoint`` / ``cowork restore`` (through :func:`checkpoint_run_dir` and :func:`restore_run_dir`,
which need only the run dir of a sandbox left running by ``cowork up``); the work is done by the
in-container server (cowork.server.state.checkpoint), which keeps snapshots and abandoned branches
in the root-only run dir. Two uses: a harness recovering after a failure, and several
rollouts branched from one mid-episode state (credit assignment). See docs/checkpoints.md.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Protocol

from ..episode.trajectory import audit_trace
from ..errors import CheckpointError, SandboxError
from ..evidence import Evidence
from ..formats import EXPORT_DIR, audit_lines, verify_chain
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
    (whole chain, verified here), workspace export and services state, with a trace rebuilt
    from its log. ``Sandbox.export_evidence()`` already carries every branch the live state
    came through (:func:`abandoned_evidence`) and ``grade`` judges them all; this reads one.

    Raises:
        CheckpointError: no such branch, or its archived files are missing or do not verify.
    """
    seed_state = None
    if sb.uses_services:
        await control_request(sb.run_dir, "dump_state")  # writes the seed's dump (it never changes)
        seed_state = json.loads((Path(sb.run_dir) / EXPORT_DIR / "state_seed.json").read_text())
    return read_branch(sb, int(branch), seed_state=seed_state, annotations=tool_annotations(await sb.tools()))


def read_branch(sb: Checkpointable, branch: int, *, seed_state: dict[str, Any] | None,
                annotations: dict[str, Any]) -> Evidence:
    """Branch ``branch`` from the run dir's archive, with ``seed_state`` as its services' seed.

    Raises:
        CheckpointError: no such branch; a part missing or unreadable; a log that does not
            verify; or a task with services and no seed to measure the branch's state against.
    """
    where = Path(sb.run_dir) / BRANCH_DIR / f"branch-{int(branch)}"
    if not (where / "meta.json").exists():
        raise CheckpointError(f"sandbox {sb.name} has no archived branch {branch}; see checkpoints.branches()")
    try:
        meta = json.loads((where / "meta.json").read_text())
        audit = (where / "audit.jsonl").read_text()
        report = verify_chain(audit, expected_count=meta["count"])
        if not report.valid or (report.records and report.records[-1]["hash"] != meta["last_hash"]):
            raise CheckpointError(f"archived branch {branch} of {sb.name}: its audit log does not verify: "
                                  f"{report.error or 'its last hash differs from the archive meta'}")
        final_state = None
        if sb.uses_services:
            if seed_state is None:
                raise CheckpointError(f"archived branch {branch} of {sb.name}: the services' seed state could not "
                                      "be read, so the branch's service state cannot be judged")
            final_state = json.loads((where / "state.json").read_text())
        tar = (where / "workspace.tar").read_bytes()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"archived branch {branch} of {sb.name} is unreadable: {exc!r}") from exc
    ev = Evidence(
        audit_text=audit, audit_count=meta["count"], workspace_tar=tar, initial=sb._initial_hashes(), trace={},
        meta={"task": sb.spec.id, "image": sb.image, "container": sb.name, "tool_annotations": annotations,
              "branch": meta, "trace_source": "rebuilt from the branch's audit log"},
        state_seed=copy.deepcopy(seed_state), state_final=final_state,
    )
    ev.trace = audit_trace(ev, sb.spec.id)
    return ev


def restored_branches(audit_text: str) -> list[int]:
    """The branch numbers the ``restore`` records of an audit log name, in order."""
    out: list[int] = []
    if '"restore"' not in audit_text:  # most logs have none: skip splitting them
        return out
    for line in audit_lines(audit_text):
        if '"restore"' not in line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # the grader verifies the chain and says so
        if isinstance(rec, dict) and rec.get("kind") == "restore" and isinstance(rec.get("branch"), int):
            out.append(rec["branch"])
    return out


def abandoned_evidence(sb: Checkpointable, audit_text: str, *, seed_state: dict[str, Any] | None,
                       annotations: dict[str, Any]) -> tuple[list[Evidence], dict[str, str]]:
    """Every branch a restore abandoned on the way to the state whose log is ``audit_text``:
    those its ``restore`` records name, and those theirs name, and so on (branches of earlier
    episodes of a pooled sandbox are not on the way: a reset starts a new log).

    Returns:
        The branches' evidence, by number, and, by number, why a named branch could not be
        read (its safety is then unknown to the grader). Never raises for a broken archive.
    """
    todo = restored_branches(audit_text)
    found: dict[int, Evidence] = {}
    errors: dict[str, str] = {}
    while todo:
        n = todo.pop()
        if n in found or str(n) in errors:
            continue
        try:
            found[n] = read_branch(sb, n, seed_state=seed_state, annotations=annotations)
        except CheckpointError as exc:
            errors[str(n)] = str(exc)
            continue
        todo += restored_branches(found[n].audit_text)
    return [found[n] for n in sorted(found)], errors
