"""The task's own actors: the simulated user and the world, changing the sandbox between turns.

The host sends an ``act`` control request between the agent's turns (a user turn's actions,
a world event, the clock moving to the next day). Each action runs here, in the container,
through the same tool code the agent's calls use, but on a separate, unexposed tool host
that holds every tool (the user may do what the agent is not allowed to), behind the same
audit middleware. Every record written meanwhile carries ``actor: user`` or ``actor: world``
(audit.ACTOR), so graders tell the agent's actions from the task's.

Agent calls are held and the agent's processes killed for the duration, so the host's record
of what each actor changed (records, and every workspace name, whatever tool changed it,
``shell`` included) is exact. The answer lists the records and names the actions changed,
with their values afterwards: the host folds them into the grading baseline, so a rule
about what the agent changed never blames the agent for the user's edit or the world's mail.

The fold never launders the agent's own work. An actor's file tool never writes through a
link: a path that leads through a symlink, or names a file with other hard links, is refused.
What a ``shell`` action changes through a link cannot be refused, so each changed name says
whether it is ``clean``: no other hard link shares the file, no symlink in the workspace
reaches it, and its content was readable. The host folds a clean change only when the name,
before the action, was what its baseline says (Evidence.names_before): bytes an actor adds
to a file the agent had changed, or writes through a name the agent made, stay the agent's.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ...formats import WORKSPACE_TOOLS, name_identity
from .audit import ACTOR, AuditLog, AuditMiddleware

if TYPE_CHECKING:
    from ...toolhost.host import ToolHost

ACTORS = ("user", "world")


#: The identity of a regular file whose content could not be read with the agent's rights:
#: never equal to a baseline, so a change to it is never folded.
NOT_A_FILE = ""
#: Most names recorded before and after an action; past it no change is clean.
TREE_LIMIT = 20000
#: File tools that write: an actor's call of one is refused when its path leads through a link.
WRITING_FILE_TOOLS = ("write_file", "edit_file")

#: One recorded name: ``(identity, names of its inode (st_nlink) for a regular file else 1,
#: the workspace path a symlink resolves to, None when it is no symlink or leads outside)``.
Name = tuple[str, int, str | None]


def _sha_nofollow(path: str) -> str | None:
    """SHA-256 of a regular file (run as the agent: what it could read); None when nothing is
    there, NOT_A_FILE when something other than a regular file is."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError:
        return NOT_A_FILE
    if not stat.S_ISREG(st.st_mode):
        return NOT_A_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return NOT_A_FILE
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return NOT_A_FILE
        h = hashlib.sha256()
        for chunk in iter(lambda: fh.read(1 << 16), b""):
            h.update(chunk)
        return h.hexdigest()


def _tree(root: str, limit: int = TREE_LIMIT) -> tuple[dict[str, Name], bool]:
    """Every workspace name below ``root`` as ``{relative path: Name}`` (run as the agent;
    symlinks never followed), and whether the walk saw them all (at most ``limit`` names,
    every folder listable)."""
    out: dict[str, Name] = {}
    complete = True
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, rel)))
        except OSError:
            complete = False
            continue
        for e in entries:
            if len(out) >= limit:
                return out, False
            path = f"{rel}/{e.name}" if rel else e.name
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                complete = False
                continue
            out[path] = _name(root, path, st)
            if stat.S_ISDIR(st.st_mode):
                stack.append(path)
    return out, complete


def _name(root: str, path: str, st: os.stat_result) -> Name:
    """What one name is (see Name)."""
    full = os.path.join(root, path)
    if stat.S_ISREG(st.st_mode):
        return _sha_nofollow(full) or NOT_A_FILE, st.st_nlink, None
    if stat.S_ISDIR(st.st_mode):
        return name_identity("dir"), 1, None
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(full)
        except OSError:
            return NOT_A_FILE, 1, None
        real = os.path.realpath(full)
        reach = "" if real == root else real[len(root) + 1:] if real.startswith(root + "/") else None
        return name_identity("symlink", target), 1, reach
    kind = "fifo" if stat.S_ISFIFO(st.st_mode) else "socket" if stat.S_ISSOCK(st.st_mode) else "device"
    return name_identity(kind), 1, None


def _changes(tree0: dict[str, Name], tree1: dict[str, Name], complete: bool) -> dict[str, dict[str, Any]]:
    """Each name whose identity the actions changed: ``{"before", "after", "clean"}`` (None:
    no such name), with ``why`` when not clean (see the module's docstring)."""
    reaches = {n[2] for t in (tree0, tree1) for n in t.values() if n[2] is not None}
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(set(tree0) | set(tree1)):
        a, b = tree0.get(path), tree1.get(path)
        before, after = a[0] if a else None, b[0] if b else None
        if before == after:
            continue
        why = _unclean(path, a, b, reaches, complete)
        out[path] = {"before": before, "after": after, "clean": why is None, **({"why": why} if why else {})}
    return out


def _unclean(path: str, a: Name | None, b: Name | None, reaches: set[str], complete: bool) -> str | None:
    """Why a change of ``path`` may be the agent's doing rather than the actor's own (None: clean)."""
    if not complete:
        return "the workspace could not be listed whole"
    if any(n is not None and n[0] == NOT_A_FILE for n in (a, b)):
        return "its content could not be read with the agent's rights"
    links = max((n[1] for n in (a, b) if n is not None), default=1)
    if links > 1:
        return f"the file has {links} names (a hard link)"
    via = sorted(r for r in reaches if r == "" or path == r or path.startswith(r + "/"))
    if via:
        return f"a symlink in the workspace leads to {via[0] or 'the workspace root'!r}"
    return None


def _link_on_path(root: str, path: str) -> str | None:
    """Why writing ``path`` would go through a link (run as the agent): a symlink on the
    way, or a file with other hard links; None when it would not."""
    full = path if path.startswith("/") else os.path.join(root, path)
    cur = root if full.startswith(root + "/") else "/"
    parts = [p for p in full[len(cur):].split("/") if p not in ("", ".")]
    for i, part in enumerate(parts):
        cur = os.path.dirname(cur) if part == ".." else os.path.join(cur, part)
        if part == "..":
            continue
        shown = cur[len(root) + 1:] if cur.startswith(root + "/") else cur
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            return None  # made by the tool from here on
        except OSError:
            return None  # the tool reports it
        if stat.S_ISLNK(st.st_mode):
            return f"{shown!r} is a symlink (to {os.readlink(cur)!r})"
        if i == len(parts) - 1 and stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            return f"{shown!r} has {st.st_nlink} names (a hard link)"
    return None


class Actors:
    """Runs user and world actions (control op ``act``).

    Args:
        workspace_tools: Registers workspace tools on a FastMCP app (``register(mcp, names)``).
        fs: The agent file-access pool (hashes are read with the agent's rights).
        root: The workspace root.
        audit: The audit log.
        services: The services (None when the task has none).
        drain: Waits until no agent call runs.
        keep_jobs: The task allows background jobs: hold the agent's processes stopped while
            an actor acts, rather than kill them, so its jobs run on afterwards.
    """

    def __init__(self, workspace_tools: Any, fs: Any, root: str, audit: AuditLog, services: Any,
                 drain: Callable[[], Awaitable[None]], agent_uid: int | None = None, keep_jobs: bool = False):
        self.keep_jobs = keep_jobs
        self._register_ws = workspace_tools
        self.fs = fs
        self.root = root
        self.audit = audit
        self.services = services
        self.drain = drain
        self.agent_uid = agent_uid
        self._mcp: ToolHost | None = None

    def _app(self) -> ToolHost:
        """Every tool, built on first use (most tasks never need it)."""
        if self._mcp is None:
            from ...toolhost.host import ToolHost

            mcp = ToolHost(name="cowork-actors")
            mcp.add_middleware(AuditMiddleware(self.audit))
            self._register_ws.register(mcp, set(WORKSPACE_TOOLS))
            if self.services is not None:
                from ...services.names import SERVICE_TOOLS
                from ...services.registry import SERVICES

                for name, module in SERVICES.items():
                    module.register(mcp, self.services.ctx, set(SERVICE_TOOLS[name]))  # no fault middleware
            self._mcp = mcp
        return self._mcp

    async def act(self, req: dict[str, Any]) -> dict[str, Any]:
        """Run ``req["actions"]`` as ``req["actor"]``; answer what each did and what changed.

        An action is ``{"tool": NAME, "args": {...}}``, ``{"add": {SERVICE: {COLLECTION:
        [records]}}}`` or ``{"clock": ISO-8601}``. A failing action is reported (``ok``
        false, ``error``) and the rest still run: what the task's script meant to do is
        in the audit log either way.
        """
        actor = req.get("actor")
        if actor not in ACTORS:
            raise ValueError(f"actor must be one of {ACTORS}, not {actor!r}")
        actions = req.get("actions") or []
        self.audit.paused = True
        token = ACTOR.set(actor)
        held = contextlib.ExitStack()
        try:
            await self.drain()
            if self.audit.in_flight:
                # Its changes would be measured as the actor's: refuse rather than misattribute.
                raise RuntimeError("a tool call of the agent is still running; the user and the world "
                                   "cannot act until it ends")
            if self.agent_uid is not None:
                # Nothing of the agent's may change files while the actor's changes are measured:
                # its processes are killed, or held stopped where its jobs may outlive a turn.
                from ..tools.procs import agent_processes_stopped, kill_agent_processes

                if self.keep_jobs:
                    held.enter_context(agent_processes_stopped(self.agent_uid))
                else:
                    kill_agent_processes(self.agent_uid)
            before = self._dump()
            touches_files = any("tool" in a for a in actions)
            tree0, whole0 = await self.fs.run(_tree, self.root) if touches_files else ({}, True)
            results = [await self._one(action) for action in actions]
            after = self._dump()
            tree1, whole1 = await self.fs.run(_tree, self.root) if touches_files else ({}, True)
            files = _changes(tree0, tree1, whole0 and whole1)
        finally:
            held.close()
            ACTOR.reset(token)
            self.audit.paused = False
        return {"results": results, "records": _changed(before, after), "files": files,
                "clock": self.services.ctx.clock.isoformat() if self.services is not None else None,
                "audit_count": self.audit.count}

    def _dump(self) -> dict[str, Any]:
        if self.services is None:
            return {}
        from ...services.registry import dump_state

        with self.services.ctx.lock:
            return dump_state(self.services.ctx.db)

    async def _one(self, action: dict[str, Any]) -> dict[str, Any]:
        try:
            if "clock" in action:
                if self.services is None:
                    return {"ok": True, "clock": action["clock"]}
                to = datetime.fromisoformat(str(action["clock"]).replace("Z", "+00:00"))
                to = to if to.tzinfo else to.replace(tzinfo=timezone.utc)
                self.audit.append({"kind": "clock", "from": self.services.ctx.clock.isoformat(), "to": to.isoformat()})
                self.services.ctx.clock = to
                return {"ok": True, "clock": to.isoformat()}
            if "add" in action:
                if self.services is None:
                    raise ValueError("this task has no services to add records to")
                ids = {svc: self.services.add_records(svc, data) for svc, data in action["add"].items()}
                return {"ok": True, "added": ids}
            tool, args = action["tool"], dict(action.get("args") or {})
            if tool in WRITING_FILE_TOOLS and isinstance(args.get("path"), str):
                link = await self.fs.run(_link_on_path, self.root, args["path"])
                if link is not None:
                    raise PermissionError(f"{tool} of {args['path']!r} refused: {link}; the "
                                          f"{ACTOR.get()} never writes through a link in the workspace")
            if action.get("as") is not None:
                return await self._as(str(action["as"]), tool, args)
            result = await self._app().call_tool(tool, args)
            text = "".join(getattr(c, "text", "") for c in (result.content or []))
            return {"ok": True, "tool": tool, "text": text[:2000]}
        except Exception as exc:  # reported to the host, which decides what a failed action means
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}

    async def _as(self, who: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """Run a service tool as ``who`` instead of the service's user: the service's ``user``
        setting is swapped for the call (agent calls are held meanwhile) and put back."""
        from ...services.base import Store
        from ...services.names import SERVICE_TOOLS

        if self.services is None:
            raise ValueError("this task has no services")
        service = next((s for s, tools in SERVICE_TOOLS.items() if tool in tools), None)
        if service is None:
            raise ValueError(f"`as` needs a service tool, not {tool!r}")
        store = Store(self.services.ctx, service)
        with self.services.ctx.lock, self.services.ctx.db:
            own = store.meta("user")
            store.set_meta("user", who)
        try:
            result = await self._app().call_tool(tool, args)
        finally:
            with self.services.ctx.lock, self.services.ctx.db:
                store.set_meta("user", own)
        text = "".join(getattr(c, "text", "") for c in (result.content or []))
        return {"ok": True, "tool": tool, "as": who, "text": text[:2000]}

    def handlers(self) -> dict[str, Callable[[dict], Awaitable[dict]]]:
        """Control operation ``act``."""
        return {"act": self.act}


def _changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What the actions did to records: ``{service: {collection: {id: change}}}``, a change
    being ``{"created": record}``, ``{"deleted": true}`` or ``{"fields": {name: value after}}``
    (only the fields that changed, so an earlier change of the agent to another field of the
    same record stays the agent's)."""
    out: dict[str, Any] = {}
    for svc in set(before) | set(after):
        for coll in set(before.get(svc, {})) | set(after.get(svc, {})):
            b, a = before.get(svc, {}).get(coll, {}), after.get(svc, {}).get(coll, {})
            for rid in set(a) | set(b):
                old, new = b.get(rid), a.get(rid)
                if old == new:
                    continue
                if old is None:
                    change: dict[str, Any] = {"created": new}
                elif new is None:
                    change = {"deleted": True}
                else:
                    change = {"fields": {k: new.get(k) for k in set(old) | set(new) if old.get(k) != new.get(k)}}
                out.setdefault(svc, {}).setdefault(coll, {})[rid] = change
    return out
