"""Checkpoints: snapshot the whole task state mid-episode, and restore it as a new audited branch.

Runs inside the container as root; control ops ``checkpoint``, ``restore`` and
``checkpoint_discard``. Everything lives in the root-only run dir (0700), out of the agent's
reach:

- ``checkpoints/<id>/``: ``workspace.json`` + ``workspace.data`` and ``tmp.json`` + ``tmp.data``
  (server.snaptree: every name with owner, mode, xattrs, link target, times, content),
  ``services.db`` (an SQLite backup of the services), ``audit.jsonl`` (the audit log up to
  and including the ``checkpoint`` record) and ``meta.json`` (state hash, audit position,
  clock, fault counters).
- ``branches/branch-<n>/``: what a restore abandoned: the live audit log as it stood
  (``audit.jsonl``), the workspace export (``workspace.tar``), the services' dump
  (``state.json``) and ``meta.json``.

A checkpoint, like an export, pauses new calls, drains running ones and then kills every
agent process (background jobs end) and removes the agent's IPC objects: none of them can be
saved, and the state hash covers them. The hash of the state is taken then, and a restore
must reach the same hash or it fails loudly.

Audit: a restore never rewrites evidence. The live log is archived whole as a branch first;
then the live log becomes the snapshot's copy of its prefix (byte-identical, the same chain)
followed by a ``restore`` record naming the snapshot, the branch number and the abandoned
branch's record count and last hash. So the live chain verifies and holds the records before
the checkpoint, the restore, and only the current branch's calls; every abandoned branch
stays readable, with its own valid chain, from the run dir. A restore is therefore not
refused when the branch was not exported (a harness recovering from a failure must not need
the broken branch exported first): nothing is lost.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shutil
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ... import formats as F
from .reset import quiesce, wipe
from .snaptree import TreeError, restore_tree, save_tree
from .workspace_export import ExportLimits, export_workspace

CHECKPOINT_DIR = "checkpoints"
BRANCH_DIR = "branches"
#: Snapshot ids: made here, checked before any path is built from one.
SNAPSHOT_ID = re.compile(r"^cp-[0-9a-f]{16}$")
#: The run dir may hold this many times the task's ``disk_mb`` of snapshots and branches.
STORE_FACTOR = 8


def _du(path: str) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    return total


class Checkpoints:
    """The checkpoint control operations of one sandbox.

    Args:
        run_dir: The root-only run dir.
        workspace: The workspace root.
        audit: The audit log.
        episodes: The reset machinery (drain, episode number, the state hash's /tmp).
        services: The services (None for a workspace-only task).
        fs: The agent's file-access pool (its names get their modes as the agent).
        disk_mb: The task's ``limits.disk_mb``: one snapshot's contents may take that much.
    """

    def __init__(self, *, run_dir: str, workspace: str, audit: Any, episodes: Any, services: Any, fs: Any,
                 disk_mb: int):
        self.run_dir = run_dir
        self.workspace = workspace
        self.audit = audit
        self.episodes = episodes
        self.services = services
        self.fs = fs
        self.disk_mb = disk_mb
        self.agent_uid = episodes.agent_uid
        #: The snapshot the live branch was restored from (None: the episode's own start).
        self.current: str | None = None

    # ------------------------------------------------------------------ helpers
    def _dir(self, *parts: str) -> str:
        return os.path.join(self.run_dir, *parts)

    def _check_store(self) -> None:
        budget = STORE_FACTOR * self.disk_mb << 20
        used = _du(self._dir(CHECKPOINT_DIR)) + _du(self._dir(BRANCH_DIR))
        if used >= budget:
            raise RuntimeError(f"checkpoint store full: snapshots and archived branches take {used} bytes, the limit "
                               f"is {STORE_FACTOR} x disk_mb = {budget} bytes; discard snapshots you no longer need "
                               "(checkpoint_discard)")

    def _quiesce(self) -> None:
        quiesce(self.agent_uid)

    async def _pause(self) -> None:
        self.audit.paused = True
        await self.episodes.drain()
        if self.audit.in_flight:
            raise RuntimeError(f"{self.audit.in_flight} tool call(s) still running after "
                               f"{self.episodes.drain_timeout_s:g}s")
        await asyncio.to_thread(self._quiesce)

    def _state(self) -> dict[str, Any]:
        return self.episodes._state()

    # ------------------------------------------------------------------ checkpoint
    async def checkpoint(self, req: dict) -> dict:
        """Control op ``checkpoint``: save the whole task state; answers the snapshot's meta.

        Raises:
            RuntimeError: the store is full, a call would not end, or the state does not fit
                in the task's disk_mb (nothing is kept then).
        """
        t0 = time.perf_counter()
        self._check_store()
        snap = "cp-" + secrets.token_hex(8)
        os.makedirs(self._dir(CHECKPOINT_DIR), mode=0o700, exist_ok=True)
        part = self._dir(CHECKPOINT_DIR, f".part-{snap}")
        os.mkdir(part, 0o700)
        try:
            try:
                await self._pause()
                meta = await asyncio.to_thread(self._save, part)
                meta["state"] = await asyncio.to_thread(self._state)
                # The checkpoint's own record closes the prefix the snapshot keeps; alone it
                # is no episode evidence (an export just before still covers the episode).
                exported_at = self.audit.exported_at
                exported = exported_at >= self.audit.count
                self.audit.append({"kind": "checkpoint", "snapshot": snap, "state_hash": meta["state"]["hash"]})
                if exported:
                    self.audit.exported_at = self.audit.count
                pos = self.audit.copy_to(os.path.join(part, "audit.jsonl"))
            finally:
                self.audit.paused = False
            meta.update(id=snap, time=time.time(), episode=self.episodes.episode, from_snapshot=self.current,
                        audit_count=pos["count"], audit_last_hash=pos["last_hash"], audit_bytes=pos["size"],
                        exported=exported, exported_at=exported_at)
            await asyncio.to_thread(_write_json, os.path.join(part, "meta.json"), meta)
            os.rename(part, self._dir(CHECKPOINT_DIR, snap))
        except BaseException:
            shutil.rmtree(part, ignore_errors=True)
            raise
        return {**_public(meta), "checkpoint_ms": round((time.perf_counter() - t0) * 1000, 3)}

    def _save(self, part: str) -> dict[str, Any]:
        budget = [self.disk_mb << 20]
        meta: dict[str, Any] = {"limit_bytes": budget[0]}
        try:
            for name, root in (("workspace", self.workspace), ("tmp", self.episodes.tmp)):
                with open(os.path.join(part, f"{name}.data"), "wb") as data:
                    manifest = save_tree(root, data, budget)
                with open(os.path.join(part, f"{name}.json"), "w") as fh:
                    json.dump(manifest, fh)
                meta[f"{name}_bytes"] = manifest["bytes"]
                meta[f"{name}_entries"] = len(manifest["nodes"])
        except TreeError as exc:
            raise RuntimeError(f"checkpoint refused: {exc} (the limit is the task's disk_mb, {self.disk_mb} MiB, "
                               "for the workspace and /tmp together)") from None
        if self.services is not None:
            ctx = self.services.ctx
            with ctx.lock:
                dest = sqlite3.connect(os.path.join(part, "services.db"))
                try:
                    ctx.db.backup(dest)
                finally:
                    dest.close()
                meta["clock"] = ctx.clock.isoformat()
                if ctx.faults is not None:
                    with ctx.faults._lock:
                        meta["faults"] = {"seed": ctx.faults.seed, "calls": dict(ctx.faults._calls)}
        return meta

    # ------------------------------------------------------------------ restore
    def _load(self, snap: Any) -> tuple[str, dict[str, Any]]:
        if not isinstance(snap, str) or not SNAPSHOT_ID.match(snap):
            raise ValueError(f"not a snapshot id: {snap!r} (ids look like cp-0123456789abcdef)")
        path = self._dir(CHECKPOINT_DIR, snap)
        try:
            with open(os.path.join(path, "meta.json")) as fh:
                return path, json.load(fh)
        except FileNotFoundError:
            raise ValueError(f"no snapshot {snap!r} in this sandbox (discarded, or made by another one)") from None

    async def restore(self, req: dict) -> dict:
        """Control op ``restore``: archive the live branch, put the snapshot back, verify its hash.

        Raises:
            ValueError: an unknown snapshot id (nothing changed).
            RuntimeError: the snapshot's audit prefix does not verify (nothing changed).
            RuntimeError: the store is full or a call would not end (nothing changed); or the
                state after the restore differs from the snapshot's (the sandbox must not be
                used further: the restore record says ``verified: false``).
        """
        t0 = time.perf_counter()
        path, meta = self._load(req.get("snapshot"))
        prefix = os.path.join(path, "audit.jsonl")
        await asyncio.to_thread(_verify_prefix, prefix, meta)
        self._check_store()
        try:
            await self._pause()
            branch = await self._archive(meta["id"])
            await self._put_back(path, meta)
            self.audit.rewind(prefix, meta["audit_count"], meta["audit_last_hash"])
            self.episodes.episode = meta["episode"]
            self.current = meta["id"]
            state = await asyncio.to_thread(self._state)
            verified = state["hash"] == meta["state"]["hash"]
            self.audit.append({"kind": "restore", "snapshot": meta["id"], "snapshot_audit_count": meta["audit_count"],
                               "snapshot_audit_hash": meta["audit_last_hash"], "state_hash": state["hash"],
                               "verified": verified, "branch": branch["branch"],
                               "abandoned": {k: branch[k] for k in ("count", "last_hash", "sha256")}})
            # The restore record is bookkeeping; what the prefix left unexported stays so.
            self.audit.exported_at = self.audit.count if meta["exported"] else meta["exported_at"]
        finally:
            self.audit.paused = False
        if not verified:
            differs = [k for k in ("workspace", "tmp", "services", "processes", "ipc", "mqueue", "sockets")
                       if state.get(k) != meta["state"].get(k)]
            raise RuntimeError(f"restore of {meta['id']} did not reach the snapshot's state: differs in "
                               f"{', '.join(differs) or 'the hash'} (hash {state['hash']}, snapshot "
                               f"{meta['state']['hash']}); do not use this sandbox further")
        return {"snapshot": meta["id"], "hash": state["hash"], "state": state, "verified": True,
                "branch": branch["branch"], "abandoned": branch, "audit_count": self.audit.count,
                "audit_last_hash": self.audit.last_hash,
                "unexported": self.audit.count > self.audit.exported_at, "clock": meta.get("clock"),
                "restore_ms": round((time.perf_counter() - t0) * 1000, 3)}

    async def _archive(self, restored_to: str) -> dict[str, Any]:
        """Keep the live branch whole (audit log, workspace export, services dump) before it is left."""
        os.makedirs(self._dir(BRANCH_DIR), mode=0o700, exist_ok=True)
        numbers = [int(n.split("-")[1]) for n in os.listdir(self._dir(BRANCH_DIR)) if re.match(r"^branch-\d+$", n)]
        n = max(numbers, default=0) + 1
        where = self._dir(BRANCH_DIR, f"branch-{n}")
        os.mkdir(where, 0o700)
        pos = self.audit.copy_to(os.path.join(where, "audit.jsonl"))
        export = await asyncio.to_thread(export_workspace, self.workspace, os.path.join(where, "workspace.tar"),
                                         ExportLimits.for_disk(self.disk_mb))
        if self.services is not None:
            from ...services.registry import dump_state

            with self.services.ctx.lock:
                dump = dump_state(self.services.ctx.db)
            await asyncio.to_thread(_write_json, os.path.join(where, "state.json"), dump)
        info = {"branch": n, "count": pos["count"], "last_hash": pos["last_hash"],
                "sha256": await asyncio.to_thread(_sha256, os.path.join(where, "audit.jsonl")),
                "from_snapshot": self.current, "restored_to": restored_to, "episode": self.episodes.episode,
                "time": time.time(), "export_complete": export.get("complete"),
                "path": os.path.join(BRANCH_DIR, f"branch-{n}")}
        await asyncio.to_thread(_write_json, os.path.join(where, "meta.json"), info)
        return info

    async def _put_back(self, path: str, meta: dict[str, Any]) -> None:
        me = (os.geteuid(), os.getegid())
        for name, root, mode in (("workspace", self.workspace, 0o755), ("tmp", self.episodes.tmp, 0o755)):
            if name == "tmp" and os.geteuid() != 0:
                continue  # a server that is not root (tests) does not own /tmp
            manifest = await asyncio.to_thread(_read_json, os.path.join(path, f"{name}.json"))
            await asyncio.to_thread(wipe, root, owner=me, mode=mode)
            await restore_tree(root, manifest, os.path.join(path, f"{name}.data"), agent_uid=self.agent_uid,
                               as_agent=self.fs.run, in_thread=asyncio.to_thread)
        if self.services is not None:
            from datetime import datetime

            ctx = self.services.ctx
            with ctx.lock:
                src = sqlite3.connect(os.path.join(path, "services.db"))
                try:
                    src.backup(ctx.db)
                finally:
                    src.close()
                ctx.clock = datetime.fromisoformat(meta["clock"])
                if ctx.faults is not None and meta.get("faults"):
                    with ctx.faults._lock:
                        ctx.faults.seed = meta["faults"]["seed"]
                        ctx.faults._calls = dict(meta["faults"]["calls"])

    # ------------------------------------------------------------------ discard
    async def discard(self, req: dict) -> dict:
        """Control op ``checkpoint_discard``: delete a snapshot (archived branches are never deleted)."""
        path, meta = self._load(req.get("snapshot"))
        await asyncio.to_thread(shutil.rmtree, path)
        return {"snapshot": meta["id"], "discarded": True}

    def handlers(self) -> dict[str, Callable[[dict], Awaitable[dict]]]:
        """Control operations: ``checkpoint``, ``restore`` and ``checkpoint_discard``."""
        return {"checkpoint": self.checkpoint, "restore": self.restore, "checkpoint_discard": self.discard}


def _public(meta: dict[str, Any]) -> dict[str, Any]:
    """What the host is told about a snapshot."""
    keys = ("id", "time", "episode", "from_snapshot", "audit_count", "audit_last_hash", "clock", "workspace_bytes",
            "workspace_entries", "tmp_bytes", "tmp_entries", "limit_bytes")
    return {"hash": meta["state"]["hash"], **{k: meta.get(k) for k in keys}}


def _write_json(path: str, obj: Any) -> None:
    with open(path, "w") as fh:
        json.dump(obj, fh, sort_keys=True)


def _read_json(path: str) -> Any:
    with open(path) as fh:
        return json.load(fh)


def _sha256(path: str) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _verify_prefix(path: str, meta: dict[str, Any]) -> None:
    """The snapshot's audit prefix must be the chain it says (count and last hash)."""
    with open(path, "rb") as fh:
        report = F.verify_chain(fh.read().decode("ascii"), expected_count=meta["audit_count"])
    if not report.valid or (report.records and report.records[-1]["hash"] != meta["audit_last_hash"]):
        raise RuntimeError(f"snapshot {meta['id']}: its audit prefix does not verify ({report.error or 'last hash'})")
