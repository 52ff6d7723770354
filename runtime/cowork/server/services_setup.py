"""Wires the mock services into the in-container server: database, seed, tools, faults, control ops."""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ..formats import EXPORT_DIR
from ..services.base import ServiceContext, WorkspaceFiles, limit_growth, open_db
from ..services.faults import FaultConfig, FaultInjector
from ..services.names import ALL_SERVICE_TOOLS
from ..services.registry import (
    ServicesSeed,
    dump_state,
    register_all,
    reset,
    seed_all,
    state_hash,
)
from .state.audit import AuditLog, audit_budget

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

DB_FILE = "services.db"

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def db_budget(limits: dict[str, Any] | None) -> int:
    """Bytes the service database may grow beyond its seed: the audit log's share of the
    task's ``disk_mb`` (a quarter), so the run dir on the host (log, database, two dumps of
    about the database's size) stays within about ``disk_mb`` beside the workspace export."""
    return audit_budget((limits or {}).get("disk_mb"))


class Services:
    """The services of one sandbox and the control operations that reach them."""

    def __init__(self, ctx: ServiceContext, seed: ServicesSeed, run_dir: str, episode_seed: int | None = None):
        self.ctx = ctx
        #: The fault seed the sandbox started with (COWORK_EPISODE_SEED); a reset without a
        #: seed goes back to it.
        self.episode_seed = episode_seed
        self.seed = seed
        self.run_dir = run_dir
        self.seed_dump = dump_state(ctx.db)
        self.seed_hash = state_hash(self.seed_dump)
        #: The task clock at the start; world events may move ctx.clock, a reset moves it back.
        self.clock0 = ctx.clock
        self._seed_written = False

    def _write(self, name: str, obj: Any) -> str:
        path = os.path.join(self.run_dir, EXPORT_DIR, name)
        with open(path, "w") as fh:
            json.dump(obj, fh, sort_keys=True)
        os.chmod(path, 0o600)
        return path

    async def dump(self, _: dict) -> dict:
        """Write the seed and final state dumps to the export folder."""
        with self.ctx.lock:
            final = dump_state(self.ctx.db)
        # The seed never changes: written once per server (the export folder is root's alone).
        seed_path = os.path.join(self.run_dir, EXPORT_DIR, "state_seed.json")
        if not self._seed_written or not os.path.exists(seed_path):
            seed_path = self._write("state_seed.json", self.seed_dump)
            self._seed_written = True
        return {"seed_path": seed_path,
                "final_path": self._write("state_final.json", final),
                "seed_hash": self.seed_hash, "final_hash": state_hash(final)}

    async def reset(self, req: dict) -> dict:
        """Restore exactly the seeded state (and restart the fault sequence)."""
        with self.ctx.lock:
            self.ctx.clock = self.clock0
            reset(self.ctx, self.seed)
            if self.ctx.faults is not None:
                seed = req.get("seed")
                self.ctx.faults.reset(self.episode_seed if seed is None else int(seed))
            h = state_hash(dump_state(self.ctx.db))
        return {"hash": h, "matches_seed": h == self.seed_hash}

    def add_records(self, service: str, data: dict[str, Any]) -> list[str]:
        """Insert records that arrive during the episode (a world event: new mail, a new
        ticket), given as the service's seed collections (``{"messages": [...]}``).

        They are built by the service's own seeding, at the current clock, on a scratch
        database that holds the task's seed settings for that service (mailboxes, calendars),
        so they look exactly like seeded records; then inserted here with one
        ``service_action`` record (``action: "arrive"``). Every record needs its own ``id``.
        The scratch seed holds the seeded records too, with the new ones after them, so the
        seed's cross-references still hold (a seeded expense report names seeded
        transactions; a new run names a seeded job).

        Returns:
            The ids inserted.

        Raises:
            ValueError: an unknown service or collection, a record without an id, an id
                already in use; nothing is inserted.
        """
        import sqlite3

        from ..services.base import Store
        from ..services.registry import SERVICES

        module = SERVICES.get(service)
        if module is None:
            raise ValueError(f"unknown service {service!r}")
        base = getattr(self.seed, service)
        fields = base.model_dump(by_alias=True) if base is not None else {}
        for coll, items in data.items():
            if not isinstance(items, list) or not all(isinstance(r, dict) and r.get("id") for r in items):
                raise ValueError(f"{service}.{coll}: give a list of records, each with its own id")
        for coll, items in data.items():
            # Appended, not replacing: seeded records keep their ids (given or by position)
            # and what refers to them still validates.
            fields[coll] = [*fields[coll], *items] if isinstance(fields.get(coll), list) else items
        model = type(base) if base is not None else module.SEED
        seed = model.model_validate(fields)
        scratch = ServiceContext(db=sqlite3.connect(":memory:"), clock=self.ctx.clock)
        module.seed(Store(scratch, service), seed)
        new = {(coll, r["id"]) for coll, items in data.items() for r in items}
        rows = [row for row in scratch.db.execute("SELECT * FROM records ORDER BY rowid")
                if (row[1], row[2]) in new]
        store = Store(self.ctx, service)
        with store.tx():
            for _, coll, rid, _ in rows:
                if self.ctx.db.execute("SELECT 1 FROM records WHERE service=? AND collection=? AND id=?",
                                       (service, coll, rid)).fetchone():
                    raise ValueError(f"{service}.{coll}: id {rid!r} is already in use")
            self.ctx.db.executemany("INSERT INTO records VALUES (?,?,?,?)", rows)
            store.audit("arrive", [r[2] for r in rows])
        return [r[2] for r in rows]

    def set_fault_seed(self, seed: int | None) -> None:
        """Restart the fault sequence with ``seed`` (None: the seed the sandbox started with)."""
        if self.ctx.faults is not None:
            self.ctx.faults.reset(self.episode_seed if seed is None else int(seed))

    def current_hash(self) -> str:
        """The canonical hash of the services' state now."""
        with self.ctx.lock:
            return state_hash(dump_state(self.ctx.db))

    def handlers(self) -> dict[str, Handler]:
        """Control operations: ``dump_state`` and ``reset_services``."""
        return {"dump_state": self.dump, "reset_services": self.reset}


def setup_services(mcp: ToolApp, raw: dict[str, Any], run_dir: str, audit: AuditLog,
                   tools: list[str], files: WorkspaceFiles | None = None) -> Services | None:
    """Open the root-only database, seed it, register the allowed service tools.

    ``files`` is the agent's workspace as services may touch it (mail attachments).

    Returns:
        None when the task uses no service.
    """
    allowed = set(tools) & set(ALL_SERVICE_TOOLS)
    if not allowed and not raw.get("services"):
        return None
    db = open_db(os.path.join(run_dir, DB_FILE))
    clock = datetime.fromisoformat(raw["clock"]) if raw.get("clock") else None
    faults = None
    env_seed = os.environ.get("COWORK_EPISODE_SEED")
    episode_seed = int(env_seed) if env_seed else None
    if raw.get("faults"):
        faults = FaultInjector(FaultConfig.model_validate(raw["faults"]), seed=episode_seed)
    clock_arg: dict[str, Any] = {"clock": clock} if clock else {}  # else ServiceContext's default
    ctx = ServiceContext(db=db, audit=audit.append, faults=faults, files=files, **clock_arg)
    seed = ServicesSeed.model_validate(raw.get("services") or {})
    seed_all(ctx, seed)
    limit_growth(db, db_budget(raw.get("limits")))
    register_all(mcp, ctx, allowed)
    return Services(ctx, seed, run_dir, episode_seed)
