"""Shared machinery of the mock services: context, SQLite store, time, ids and tool helpers.

Every service keeps its records in one SQLite table of JSON rows keyed by
``(service, collection, id)``; settings and id counters live in a ``meta`` table that is
restored by seeding but is not part of the state dump. Code here runs inside the container:
it imports only the standard library, pydantic and fastmcp.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
from collections.abc import Container
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from typing import TYPE_CHECKING, Annotated, Any, Callable, Iterator, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from ..toolhost.errors import ToolError
from .addresses import check_address

if TYPE_CHECKING:  # faults imports nothing from here at run time either
    from ..toolhost.host import ToolApp
    from .faults import FaultInjector

SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    service TEXT NOT NULL, collection TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (service, collection, id));
CREATE TABLE IF NOT EXISTS meta (
    service TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (service, key));
"""


def open_db(path: str = ":memory:") -> sqlite3.Connection:
    """Open (or create) the services database at ``path`` and make its tables.

    The file is made mode 0600 (the server runs as root, so the agent cannot open it). The
    connection may be used from the tool worker threads; ServiceContext.lock serialises access.
    """
    db = sqlite3.connect(path, check_same_thread=False)
    if path != ":memory:":
        os.chmod(path, 0o600)
        # One writer, and an episode that dies is retried from its seed: skipping fsync is
        # safe, and the rollback journal keeps every committed change in the one file.
        db.execute("PRAGMA synchronous=OFF")
    db.executescript(SCHEMA)
    return db


def limit_growth(db: sqlite3.Connection, max_bytes: int) -> int:
    """Let the database grow by at most ``max_bytes`` beyond its current size.

    Past it, a write fails with SQLITE_FULL, which Store.tx turns into a tool error (the
    transaction is rolled back, nothing changes). Call it after seeding, so a large seed
    never fails; the limit then bounds what the agent can add to the run dir.

    Returns:
        The page limit set.
    """
    page = db.execute("PRAGMA page_size").fetchone()[0]
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    limit = pages + max(1, max_bytes // page)
    return db.execute(f"PRAGMA max_page_count = {int(limit)}").fetchone()[0]


def _no_audit(record: dict[str, Any]) -> None:
    return None


class WorkspaceFiles(Protocol):
    """The agent's workspace as a service may touch it (mail attachments): with the agent's
    permissions and the workspace tools' path rules. The server provides it
    (server.tools.documents.AgentFiles); services never import the server."""

    async def read(self, path: str, max_bytes: int) -> tuple[str, bytes]:
        """The file's path relative to /workspace and its bytes (ToolError when unreadable or larger)."""
        ...

    async def write(self, path: str, data: bytes, overwrite: bool) -> str:
        """Write ``data`` to ``path``; returns the path relative to /workspace (ToolError when refused)."""
        ...


@dataclass
class ServiceContext:
    """What every service needs at run time.

    Attributes:
        db: The connection to the one SQLite file all services share (see open_db).
        clock: The spec's fixed "now"; every relative time is taken from it, never from
            the wall clock. A naive value is read as UTC.
        audit: Appends one record to the hash-chained audit log.
        faults: The seeded fault injector, or None for no faults.
        lock: Serialises database access between tool threads.
        snapshot: The rows written by the last seeding, kept by the registry so that a
            reset re-inserts them instead of rebuilding records from the seed.
    """

    db: sqlite3.Connection
    clock: datetime = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
    audit: Callable[[dict[str, Any]], Any] = _no_audit
    faults: "FaultInjector | None" = None
    lock: threading.RLock = field(default_factory=threading.RLock)
    snapshot: Any = field(default=None, repr=False)
    seeded_ids: dict[tuple[str, str], set[str]] = field(default_factory=dict, repr=False)
    """Ids of the last seeding's records by (service, collection): a new record never takes one."""
    files: WorkspaceFiles | None = field(default=None, repr=False)
    """The agent's workspace, for tools that move files between it and a service (mail
    attachments); None where the server has none (the catalog build, bare unit tests)."""

    def __post_init__(self) -> None:
        if self.clock.tzinfo is None:
            self.clock = self.clock.replace(tzinfo=timezone.utc)
        self.db.executescript(SCHEMA)


# --------------------------------------------------------------------------- store
class Store:
    """Records of one service: collections of JSON objects keyed by id.

    Args:
        ctx: The service context.
        service: The service's name, e.g. ``"mail"``.
    """

    def __init__(self, ctx: ServiceContext, service: str):
        self.ctx = ctx
        self.service = service

    @property
    def now(self) -> datetime:
        """The fixed clock of the task."""
        return self.ctx.clock

    @contextmanager
    def tx(self) -> Iterator["Store"]:
        """Hold the lock and run the block as one transaction.

        The service's audit record is written inside the block, so a failed append rolls
        the change back: no change without its record.

        Raises:
            ToolError: the database reached its size limit (see limit_growth); nothing changed.
        """
        with self.ctx.lock:
            try:
                with self.ctx.db:
                    yield self
            except sqlite3.OperationalError as exc:
                if getattr(exc, "sqlite_errorcode", None) != sqlite3.SQLITE_FULL:
                    raise
                raise ToolError(f"{self.service}: storage is full (the task's disk limit); "
                                "nothing was changed. Delete something or write less.") from None

    def get(self, collection: str, rid: str) -> dict[str, Any] | None:
        """The record, or None."""
        row = self.ctx.db.execute(
            "SELECT data FROM records WHERE service=? AND collection=? AND id=?",
            (self.service, collection, rid)).fetchone()
        return json.loads(row[0]) if row else None

    def require(self, collection: str, rid: str, what: str) -> dict[str, Any]:
        """The record, or a ToolError naming the unknown id."""
        rec = self.get(collection, rid) if isinstance(rid, str) else None
        if rec is None:
            raise ToolError(f"Unknown {what} id {rid!r}")
        return rec

    def all(self, collection: str) -> list[dict[str, Any]]:
        """Every record of a collection, in insertion order."""
        rows = self.ctx.db.execute(
            "SELECT data FROM records WHERE service=? AND collection=? ORDER BY rowid",
            (self.service, collection)).fetchall()
        return [json.loads(r[0]) for r in rows]

    def insert(self, collection: str, record: dict[str, Any]) -> dict[str, Any]:
        """Add a record (it carries its ``id``)."""
        self.ctx.db.execute("INSERT INTO records VALUES (?,?,?,?)",
                            (self.service, collection, record["id"], json.dumps(record)))
        return record

    def update(self, collection: str, rid: str, changes: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Apply ``changes`` to a record; returns the new record and the fields that changed."""
        rec = self.get(collection, rid)
        if rec is None:
            raise KeyError(rid)
        changed = sorted(k for k, v in changes.items() if rec.get(k) != v)
        rec.update(changes)
        self.ctx.db.execute("UPDATE records SET data=? WHERE service=? AND collection=? AND id=?",
                            (json.dumps(rec), self.service, collection, rid))
        return rec, changed

    def delete(self, collection: str, rid: str) -> None:
        """Remove a record."""
        self.ctx.db.execute("DELETE FROM records WHERE service=? AND collection=? AND id=?",
                            (self.service, collection, rid))

    def new_id(self, collection: str, prefix: str) -> str:
        """A fresh id ``<prefix>-<n>``: deterministic, restarted by a reset, and never the id of
        a seeded record, even one deleted since (graders would take the new record for the
        seeded one, changed, instead of a record the episode created)."""
        key = f"next:{collection}"
        n = self.meta(key, 1)
        seeded = self.ctx.seeded_ids.get((self.service, collection), ())
        while self.get(collection, f"{prefix}-{n}") is not None or f"{prefix}-{n}" in seeded:
            n += 1
        self.set_meta(key, n + 1)
        return f"{prefix}-{n}"

    def meta(self, key: str, default: Any = None) -> Any:
        """A setting of this service (seeded config, counters)."""
        row = self.ctx.db.execute("SELECT value FROM meta WHERE service=? AND key=?",
                                  (self.service, key)).fetchone()
        return json.loads(row[0]) if row else default

    def set_meta(self, key: str, value: Any) -> None:
        """Store a setting of this service."""
        self.ctx.db.execute("INSERT OR REPLACE INTO meta VALUES (?,?,?)",
                            (self.service, key, json.dumps(value)))

    def audit(self, action: str, ids: list[str], fields: list[str] | None = None,
              values: dict[str, Any] | None = None) -> None:
        """Record one state-changing action, in the schema shared by all services. ``values``:
        fields as the service stored them where the arguments alone do not tell (a start given
        in a local time zone is stored in UTC), so graders can follow a record through its life."""
        rec: dict[str, Any] = {"kind": "service_action", "service": self.service, "action": action,
               "ids": list(ids), "fields": sorted(fields or [])}
        if values:
            rec["values"] = values
        self.ctx.audit(rec)


# --------------------------------------------------------------------------- time
def iso(dt: datetime) -> str:
    """A datetime as canonical UTC ISO 8601, e.g. ``2026-03-02T09:00:00Z``."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def zone(name: str) -> tzinfo:
    """The time zone called ``name``; ValueError when unknown.

    Named zones need the IANA database (Debian's ``tzdata`` or the ``tzdata`` wheel);
    UTC works without it.
    """
    if name in ("UTC", "Etc/UTC", "Z"):
        return timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}; use an IANA name like 'Europe/Berlin'") from None


_RELATIVE = re.compile(r"^now((?:[+-](?:\d+[wdhm])+)*)(?:@(\d{1,2}):(\d{2}))?$")
_UNITS = {"w": "weeks", "d": "days", "h": "hours", "m": "minutes"}
_HINT = "give ISO 8601 ('2026-03-02T10:00:00Z') or a time relative to the clock ('now-2d', 'now+1d@10:00')"


def _seed_time(value: Any) -> str:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, date):
        return iso(datetime.combine(value, time(), timezone.utc))
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a time; {_HINT}")
    text = value.strip()
    if _RELATIVE.match(text):
        return text
    try:
        return iso(datetime.fromisoformat(text))
    except ValueError:
        raise ValueError(f"{value!r} is not a time; {_HINT}") from None


def _seed_day(value: Any) -> str:
    if isinstance(value, datetime):
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str) and _RELATIVE.match(value.strip()):
        return value.strip()
    try:
        return date.fromisoformat(str(value).strip()).isoformat()
    except ValueError:
        raise ValueError(f"{value!r} is not a date; give 'YYYY-MM-DD' or relative like 'now+7d'") from None


#: A seed time: ISO 8601 (naive means UTC) or relative to the task clock ("now-2d", "now+1d@10:00").
SeedTime = Annotated[str, BeforeValidator(_seed_time)]
#: A seed date: 'YYYY-MM-DD' or relative to the task clock ("now+7d").
SeedDay = Annotated[str, BeforeValidator(_seed_day)]


def resolve_time(value: str, clock: datetime, tz: str | None = None) -> str:
    """Turn a validated seed time into canonical UTC ISO; ``@HH:MM`` is read in ``tz``."""
    m = _RELATIVE.match(value)
    if not m:
        return value
    dt = clock
    for sign, parts in re.findall(r"([+-])((?:\d+[wdhm])+)", m.group(1)):
        for num, unit in re.findall(r"(\d+)([wdhm])", parts):
            dt += (1 if sign == "+" else -1) * timedelta(**{_UNITS[unit]: int(num)})
    if m.group(2) is not None:
        local = dt.astimezone(zone(tz) if tz else timezone.utc)
        dt = local.replace(hour=int(m.group(2)), minute=int(m.group(3)), second=0, microsecond=0)
    return iso(dt)


def resolve_day(value: str, clock: datetime) -> str:
    """Turn a validated seed date into 'YYYY-MM-DD'."""
    return resolve_time(value, clock)[:10] if _RELATIVE.match(value) else value


def parse_time(value: str, name: str, tz: str | None = None) -> datetime:
    """Parse a tool argument as an aware datetime (naive values are read in ``tz`` or UTC).

    Raises:
        ToolError: The value is not ISO 8601.
    """
    try:
        dt = datetime.fromisoformat(value.strip())
    except (ValueError, AttributeError):
        raise ToolError(f"Bad date for {name}: {value!r}; expected ISO 8601 like '2026-03-02T10:00:00Z'") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=zone(tz) if tz else timezone.utc)
    return dt


def parse_day(value: str, name: str) -> str:
    """Parse a tool argument as a 'YYYY-MM-DD' date.

    Raises:
        ToolError: The value is not a date.
    """
    try:
        return date.fromisoformat(value.strip()[:10]).isoformat()
    except (ValueError, AttributeError):
        raise ToolError(f"Bad date for {name}: {value!r}; expected 'YYYY-MM-DD'") from None


# --------------------------------------------------------------------------- seed models
class SeedModel(BaseModel):
    """Base of every seed record: strict, frozen, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, use_attribute_docstrings=True)


#: An email address, stored lower-case: plain ``local@domain.tld`` only (see addresses.py), so
#: that the grader reads the same domain as the service that delivered to it.
Email = Annotated[str, AfterValidator(check_address)]
#: A list of email addresses; a single address is taken as a list of one.
EmailList = Annotated[list[Email], BeforeValidator(lambda v: [v] if isinstance(v, str) else v,
                                                   json_schema_input_type=str | list[str])]


def record_ids(items: list[Any], prefix: str) -> list[str]:
    """The ids of seed records: their own ``id``, or ``<prefix>-<n>`` by position (1-based)."""
    return [item.id or f"{prefix}-{n}" for n, item in enumerate(items, start=1)]


def check_unique(items: list[Any], prefix: str, where: str) -> list[str]:
    """The records' ids; ValueError naming the first duplicate."""
    ids = record_ids(items, prefix)
    seen: set[str] = set()
    for n, rid in enumerate(ids):
        if rid in seen:
            raise ValueError(f"{where}[{n}].id: duplicate id {rid!r}")
        seen.add(rid)
    return ids


def check_ref(value: str | None, known: Container[str], where: str, what: str) -> None:
    """ValueError when ``value`` is set and not among ``known``."""
    if value is not None and value not in known:
        raise ValueError(f"{where}: unknown {what} {value!r}")


# --------------------------------------------------------------------------- tools
Offset = Annotated[int, Field(ge=0, description="Items to skip; pass next_offset from the previous page.")]
Limit = Annotated[int, Field(ge=1, le=100, description="Most items to return (1-100).")]


def page(items: list[Any], offset: int, limit: int, key: str) -> dict[str, Any]:
    """One page of ``items`` under ``key``, with ``total`` and ``next_offset`` (None at the end)."""
    chunk = items[offset: offset + limit]
    more = offset + limit < len(items)
    return {key: chunk, "total": len(items), "next_offset": offset + limit if more else None}


def hints(*, read: bool = False, destructive: bool = False, idempotent: bool = False,
          open_world: bool = False) -> dict[str, bool]:
    """MCP tool annotations.

    ``destructive`` marks tools that overwrite or remove what cannot be put back by another
    call (deleting, replacing text); reversible changes (moving, marking read, reacting) and
    additions are not destructive. ``open_world`` marks tools whose effect or content
    crosses the organisation's boundary (sending mail, sharing outside, the web).
    """
    return {"readOnlyHint": read, "destructiveHint": False if read else destructive,
            "idempotentHint": True if read else idempotent, "openWorldHint": open_world}


READ = hints(read=True)


def tool_adder(mcp: ToolApp, allowed: set[str]) -> Callable[[str, dict[str, bool]], Callable]:
    """A decorator factory that adds a tool to ``mcp`` only when its name is allowed."""

    def add(name: str, annotations: dict[str, bool]) -> Callable:
        def deco(fn: Callable) -> Callable:
            if name in allowed:
                mcp.tool(name=name, annotations=annotations)(fn)
            return fn
        return deco
    return add


def matches(query: str, *texts: Any) -> bool:
    """True when every word of ``query`` occurs, case-insensitively, somewhere in ``texts``."""
    hay = " ".join(str(t) for t in texts if t is not None).lower()
    return all(word in hay for word in query.lower().split())


def newest_first(items: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Records sorted by ``key`` descending; among equal keys the later-created comes first."""
    return [r for _, r in sorted(enumerate(items), key=lambda p: (p[1].get(key) or "", p[0]), reverse=True)]


def snippet(text: str, query: str, width: int = 160) -> str:
    """A short excerpt of ``text`` around the first word of ``query``."""
    words = query.lower().split()
    at = text.lower().find(words[0]) if words else -1
    start = max(0, at - width // 3) if at >= 0 else 0
    out = text[start: start + width]
    return ("..." if start else "") + out + ("..." if start + width < len(text) else "")
