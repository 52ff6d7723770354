"""``cowork ps``: every cowork sandbox on this Docker host, with its ids, task, age, whether a
client used it, its gateway token (a hash prefix only), its snapshots and its owner; and the
JSON shapes of ``cowork ps --json`` and ``cowork up --json`` (documented in docs/cli.md,
checked by tests/cli/test_sandbox_commands.py).

Every id a row shows names the sandbox in every command that takes an ID
(:func:`cowork.engine.labels.refers_to`): the container id (or a start of it), the name, and
the run id (the name's last part, also the run dir's name in the socket path).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import time
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field

from ..terminal import printable
from . import exits, output

# --------------------------------------------------------------------------- JSON shapes
# Pydantic models as in cowork.cli.shapes: they forbid fields they do not name, so a new field
# is a change of the documented shape (docs/cli.md), made here and there together.
_HEX12 = r"^[0-9a-f]{12}$"


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Owner(_Shape):
    """Who started a sandbox (its owner labels)."""

    user: str | None = Field(description="the user (null: a sandbox of an older cowork)")
    host: str | None
    pid: int | None = Field(description="the process that started it")
    alive: bool = Field(description="that process still runs (always true for another host's)")
    session: str | None


class SandboxRow(_Shape):
    """One sandbox of ``cowork ps --json``."""

    id: str = Field(pattern=_HEX12, description="the container id's first 12 hex digits")
    container_id: str = Field(pattern=r"^[0-9a-f]{64}$")
    name: str = Field(description="cowork-<task>-<run id>")
    run_id: str | None = Field(pattern=_HEX12, description="the name's last part, also its run dir's name")
    task: str | None
    status: str = Field(description="Docker's: running, exited, created, ...")
    created: str | None = Field(description="UTC, ISO 8601")
    age_s: float | None
    kept: bool = Field(description="started by `cowork up` (outlives its process)")
    orphan: bool = Field(description="not kept and its owner is gone: `cowork gc` removes it")
    client_calls: int | None = Field(ge=0, description="tool calls made in it (null: run dir unreadable)")
    used: bool | None
    gateway_token: str | None = Field(pattern=_HEX12, description="start of the SHA-256 of its `cowork up --http` "
                                                                  "token, never the token")
    snapshots: list[Annotated[str, Field(pattern=r"^cp-[0-9a-f]{16}$")]] | None = Field(
        description="its `cowork checkpoint` ids, oldest first (null: run dir unreadable)")
    owner: Owner
    run_dir: str | None
    mcp_socket: str | None


class PsOutput(_Shape):
    """``cowork ps --json``."""

    sandboxes: list[SandboxRow] = Field(description="every cowork sandbox on the Docker host, newest first")


class HttpAccess(_Shape):
    """``cowork up --http``'s gateway access (cowork.cli.gateway.issue_token)."""

    url: str = Field(pattern=r"^https?://")
    token: str = Field(description="the bearer token, shown this once (only its hash is kept)")
    serve: str
    clients: dict[str, Any]


class UpOutput(_Shape):
    """``cowork up --json``: the same fields with and without ``--http``."""

    id: str = Field(pattern=_HEX12)
    name: str
    run_id: str = Field(pattern=_HEX12)
    task: str
    mcp_socket: str = Field(description="the unix socket of the sandbox's MCP server")
    mcp_url: str = Field(pattern=r"^http\+unix://%2F[^/]*/mcp$",
                         description="that server as one URL: http+unix://<socket path, percent-encoded>/mcp")
    stdio_bridge: str
    http: HttpAccess | None = Field(description="null without --http")


#: The JSON Schemas of ``cowork ps --json`` and ``cowork up --json``.
PS_SCHEMA: dict[str, Any] = PsOutput.model_json_schema()
UP_SCHEMA: dict[str, Any] = UpOutput.model_json_schema()


def mcp_url(socket_path: str | Path) -> str:
    """The MCP endpoint behind a unix socket as one URL: ``http+unix://<path, percent-encoded>/mcp``
    (the form requests-unixsocket and others read; for httpx, give the socket as ``uds=`` and
    ``http://localhost/mcp`` as the URL)."""
    return f"http+unix://{quote(str(socket_path), safe='')}/mcp"


# --------------------------------------------------------------------------- ps
_NANOS = re.compile(r"(\.\d{1,6})\d*")


def _created(attrs: dict[str, Any]) -> dt.datetime | None:
    """Docker's ``Created`` (``2026-01-02T03:04:05.123456789Z``) as an aware datetime."""
    raw = attrs.get("Created")
    if not isinstance(raw, str):
        return None
    try:
        return dt.datetime.fromisoformat(_NANOS.sub(r"\1", raw, count=1).replace("Z", "+00:00"))
    except ValueError:
        return None


def _read(fn: Any, *args: Any) -> Any:
    """What ``fn`` reads from a run dir, or None when it cannot (another user's, removed)."""
    try:
        return fn(*args)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def describe(container: Any, now: float | None = None) -> dict[str, Any]:
    """One sandbox as ``cowork ps --json`` gives it (:data:`SANDBOX_SCHEMA`)."""
    from ..engine import labels as L
    from ..formats import MCP_SOCKET
    from ..gateway.auth import fingerprint
    from ..sandbox.checkpoints import snapshots
    from .live import client_calls

    lab = container.labels or {}
    run_dir = Path(lab[L.RUN_DIR]) if lab.get(L.RUN_DIR) else None
    created = _created(container.attrs or {})
    now = time.time() if now is None else now
    kept = lab.get(L.KEEP) == "true"
    alive = L.owner_alive(lab)
    try:
        pid: int | None = int(lab.get(L.OWNER_PID, ""))
    except ValueError:
        pid = None
    calls = snaps = token = None
    if run_dir is not None and _read(lambda: run_dir.is_dir() and os.access(run_dir, os.R_OK | os.X_OK)):
        calls = _read(client_calls, run_dir)
        snaps = _read(lambda: [s["id"] for s in snapshots(run_dir)])
        token = _read(fingerprint, run_dir)
    return {
        "id": container.id[:12], "container_id": container.id, "name": container.name,
        "run_id": L.run_id(container.name), "task": lab.get(L.TASK), "status": container.status,
        "created": created.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z") if created else None,
        "age_s": round(max(0.0, now - created.timestamp()), 1) if created else None,
        "kept": kept, "orphan": not kept and not alive,
        "client_calls": calls, "used": None if calls is None else calls > 0,
        "gateway_token": token, "snapshots": snaps,
        "owner": {"user": lab.get(L.OWNER_USER), "host": lab.get(L.OWNER_HOST), "pid": pid, "alive": alive,
                  "session": lab.get(L.SESSION)},
        "run_dir": str(run_dir) if run_dir else None,
        "mcp_socket": str(run_dir / MCP_SOCKET) if run_dir else None,
    }


def listing() -> list[dict[str, Any]]:
    """Every cowork sandbox on this Docker host, newest first."""
    from ..engine import labels as L
    from ..engine.reaper import managed_containers

    now = time.time()
    # A task's HTTP services' container belongs to its sandbox's row (it goes with it).
    rows = [describe(c, now) for c in managed_containers() if not (c.labels or {}).get(L.PREFIX + "companion")]
    return sorted(rows, key=lambda r: r["created"] or "", reverse=True)


def age(seconds: float | None) -> str:
    """``45s``, ``12m``, ``3h05m``, ``2d04h``."""
    if seconds is None:
        return "?"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def _owner_text(row: dict[str, Any]) -> str:
    import socket

    o = row["owner"]
    who = (o["user"] or "?") + ("" if o["host"] in (None, socket.gethostname()) else f"@{o['host']}")
    if row["kept"]:
        return f"{who}, cowork up (kept)"
    state = "running" if o["alive"] else "gone: orphan"
    return f"{who}, pid {o['pid'] if o['pid'] is not None else '?'} {state}"


def _table(rows: list[dict[str, Any]]) -> str:
    head = ("ID", "NAME", "TASK", "STATUS", "AGE", "CLIENT", "TOKEN", "SNAPSHOTS", "OWNER")
    body = []
    for r in rows:
        client = "?" if r["client_calls"] is None else (f"{r['client_calls']} call(s)" if r["used"] else "unused")
        snaps = "?" if r["snapshots"] is None else (", ".join(r["snapshots"]) if r["snapshots"] else "-")
        body.append((r["id"], r["name"], r["task"] or "?", r["status"], age(r["age_s"]), client,
                     r["gateway_token"] or "-", snaps, _owner_text(r)))
    cells = [tuple(printable(c) for c in row) for row in [head, *body]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def ps(as_json: bool) -> int:
    """``cowork ps``: a table (or ``{"sandboxes": [...]}``) of every cowork sandbox."""
    rows = listing()
    if as_json:
        output.print_json({"sandboxes": rows})
        return exits.OK
    if not rows:
        output.say("no cowork sandboxes on this Docker host (`cowork up SPEC` starts one)")
        return exits.OK
    output.say(_table(rows))
    orphans = sum(r["orphan"] for r in rows)
    notes = ["ID, NAME or NAME's last part (its run id) names a sandbox in every command; TOKEN: start of the "
             "SHA-256 of its gateway token"]
    if orphans:
        notes.append(f"{orphans} orphan(s), whose owner process is gone: `cowork gc` removes them "
                     "(and leaves `cowork up` sandboxes and running owners' alone)")
    output.say("\n".join(notes), err=True)
    return exits.OK
