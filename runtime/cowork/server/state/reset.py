"""Between episodes: return a sandbox to its pristine state, and the state hash that proves it.

Runs inside the container as root (a pooled sandbox serves one episode after another).
A reset kills every agent process, empties ``/workspace`` and ``/tmp``, seeds the workspace
again exactly as at start, restores the services' seed, applies the next episode's fault
seed and starts a fresh audit chain. The host then compares :func:`sandbox_state` with the
hash it recorded when the sandbox first started; a sandbox whose hash differs is replaced.

What the hash covers: every entry under the workspace (path, type, mode, owner, group,
extended attributes, content or link target) and its root, the entries of ``/tmp`` and its root, the services'
canonical state hash, every process that is not root's (an agent process that survived the
kill, or any other user's), the System V IPC objects and POSIX message queues of the
sandbox's IPC namespace, and the TCP, UDP and raw sockets of its network namespace.
What it does not: timestamps (the seed is written again, so they differ by design; the
roots' times are set to the reset's), and kernel counters the agent can move but nothing
in a namespace can rewind (the next PID, inode numbers, IPC ids, loopback byte counts): a
residual channel between episodes on one container (``max_uses=1`` closes it).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import stat
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from ... import formats as F
from ..tools.procs import kill_agent_processes

log = logging.getLogger(__name__)

#: Bytes read at a time when hashing a file.
_CHUNK = 1 << 20


def _entry(path: str, rel: str, st: os.stat_result) -> bytes:
    kind = ("d" if stat.S_ISDIR(st.st_mode) else "f" if stat.S_ISREG(st.st_mode)
            else "l" if stat.S_ISLNK(st.st_mode) else f"x{stat.S_IFMT(st.st_mode):o}")
    line = f"{kind} {stat.S_IMODE(st.st_mode):05o} {st.st_uid}:{st.st_gid} {rel!r}"
    attrs = _xattrs(path)
    if attrs:
        line += f" xattrs={attrs!r}"
    if kind == "l":
        line += f" -> {os.readlink(path)!r}"
    elif kind == "f":
        digest = hashlib.sha256()
        # O_NONBLOCK|O_NOFOLLOW: nothing here can block or lead elsewhere, even if the tree
        # changed since the lstat. Root reads any file (DAC_READ_SEARCH).
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            while chunk := os.read(fd, _CHUNK):
                digest.update(chunk)
        finally:
            os.close(fd)
        line += f" {st.st_size} {digest.hexdigest()}"
    return line.encode("utf-8", "surrogateescape") + b"\n"


def _xattrs(path: str) -> list[tuple[str, bytes]]:
    """Extended attributes of ``path`` itself (tmpfs keeps ``user.*`` ones since Linux 6.6)."""
    try:
        return sorted((n, os.getxattr(path, n, follow_symlinks=False))
                      for n in os.listxattr(path, follow_symlinks=False))
    except OSError:  # no xattr support here
        return []


def tree_digest(root: str) -> tuple[str, int]:
    """SHA-256 over every entry under ``root`` and root itself, in sorted order; and the count.

    Iterative (a tree as deep as the inode limit allows cannot overflow the stack); symlinks
    are hashed as links, never followed.
    """
    digest = hashlib.sha256(_entry(root, ".", os.lstat(root)))
    count = 0
    stack = [(root, "")]
    while stack:
        path, rel = stack.pop()
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name, reverse=True)
        for e in entries:
            sub = f"{rel}/{e.name}" if rel else e.name
            st = e.stat(follow_symlinks=False)
            digest.update(_entry(e.path, sub, st))
            count += 1
            if stat.S_ISDIR(st.st_mode):
                stack.append((e.path, sub))
    return digest.hexdigest(), count


def foreign_processes() -> list[str]:
    """Processes in this PID namespace that do not belong to root, as ``pid uid comm``."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except OSError:  # gone meanwhile
            continue
        uids = fields.get("Uid", "0").split()
        # A zombie runs nothing; its parent (init) reaps it.
        if fields.get("State", "").strip().startswith("Z") or all(u == "0" for u in uids):
            continue
        out.append(f"{name} {uids[0]} {fields.get('Name', '?').strip()}")
    return sorted(out)


def ipc_objects() -> list[str]:
    """System V shared memory segments, message queues and semaphore sets of this IPC namespace."""
    out = []
    for kind in ("shm", "msg", "sem"):
        try:
            with open(f"/proc/sysvipc/{kind}") as fh:
                out += [f"{kind} {' '.join(line.split()[:3])}" for line in fh.readlines()[1:] if line.strip()]
        except OSError:  # a runtime without /proc/sysvipc (counted as none)
            continue
    return sorted(out)


#: Where POSIX message queues live (Docker mounts the IPC namespace's mqueue fs there, mode 1777).
MQUEUE_DIR = "/dev/mqueue"
#: Socket tables of the sandbox's network namespace that must be empty between episodes (the
#: server uses unix sockets only; unix sockets are left out, the server's own are there).
SOCKET_TABLES = ("tcp", "tcp6", "udp", "udp6", "raw", "raw6")


def message_queues() -> list[str]:
    """Names of the POSIX message queues of this IPC namespace."""
    try:
        return sorted(os.listdir(MQUEUE_DIR))
    except OSError:  # not mounted (another runtime): none can be listed, none made through it
        return []


#: The counters of /proc/net/sockstat{,6} that together count every entry of SOCKET_TABLES:
#: the sockets in a hash table of this network namespace (listening, bound, connected and
#: orphaned ones; a raw socket from its creation) and its TIME_WAIT sockets.
_SOCKSTAT = {("TCP", "inuse"), ("TCP", "tw"), ("UDP", "inuse"), ("RAW", "inuse"), ("TCP6", "inuse"),
             ("UDP6", "inuse"), ("RAW6", "inuse")}


def _no_inet_sockets(proc_net: str) -> bool:
    """Whether this namespace's socket counters say every table is empty. False when a counter
    is missing or unreadable (another kernel, gVisor): the tables are then read."""
    seen: dict[tuple[str, str], int] = {}
    try:
        for name in ("sockstat", "sockstat6"):
            with open(os.path.join(proc_net, name)) as fh:
                for line in fh:
                    proto, _, rest = line.partition(":")
                    words = rest.split()
                    for key, value in zip(words[::2], words[1::2]):
                        if (proto, key) in _SOCKSTAT:
                            seen[(proto, key)] = int(value)
    except (OSError, ValueError):
        return False
    return set(seen) == _SOCKSTAT and not any(seen.values())


def inet_sockets(proc_net: str = "/proc/net") -> list[str]:
    """TCP, UDP and raw sockets of this network namespace (any state, TIME_WAIT included).

    The namespace's own counters are read first: when they count no socket, the tables are
    not read (reading /proc/net/tcp walks the kernel's hash table of every namespace on the
    host, about 5 ms per table here, most of a reset's cost).
    """
    if _no_inet_sockets(proc_net):
        return []
    out = []
    for table in SOCKET_TABLES:
        try:
            with open(os.path.join(proc_net, table)) as fh:
                out += [f"{table} {' '.join(line.split()[1:4])}" for line in fh.readlines()[1:] if line.strip()]
        except OSError:
            continue
    return sorted(out)


def sandbox_state(workspace: str, tmp: str, services_hash: str | None) -> dict[str, Any]:
    """The state a reset must restore, with one hash over all of it."""
    ws, ws_entries = tree_digest(workspace)
    tmp_digest, tmp_entries = tree_digest(tmp)
    procs = foreign_processes()
    ipc = ipc_objects()
    mq = message_queues()
    sockets = inet_sockets()
    whole = hashlib.sha256("\n".join([ws, tmp_digest, services_hash or "-", *procs, "--", *ipc, "--", *mq, "--",
                                      *sockets]).encode())
    return {"hash": whole.hexdigest(), "workspace": ws, "workspace_entries": ws_entries, "tmp": tmp_digest,
            "tmp_entries": tmp_entries, "services": services_hash, "processes": procs, "ipc": ipc,
            "mqueue": mq, "sockets": sockets}


def wipe(root: str, *, owner: tuple[int, int], mode: int) -> None:
    """Remove everything under ``root`` (not root itself), then give root ``owner`` and ``mode``.

    The server holds no CAP_DAC_OVERRIDE or CAP_FOWNER, so it takes each folder first
    (CAP_CHOWN, then chmod as its owner) before emptying it: a folder the agent made
    unwritable, or mode 0000, empties all the same. Symlinks are removed, never followed.
    Must run with no agent process alive (nothing may add entries meanwhile).
    """
    stack = [root]
    order = []
    while stack:
        path = stack.pop()
        os.chown(path, 0, 0, follow_symlinks=False)
        os.chmod(path, 0o700)
        order.append(path)
        with os.scandir(path) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                else:
                    os.unlink(e.path)
    for path in reversed(order[1:]):  # deepest first: each is empty by now
        os.rmdir(path)
    for name, _ in _xattrs(root):  # root itself stays: its attributes must not
        os.removexattr(root, name)
    os.utime(root)  # nor the times the agent set or left on it (as owner, root may set them)
    os.chmod(root, mode)
    os.chown(root, *owner, follow_symlinks=False)


def remove_agent_ipc(uid: int) -> None:
    """Remove every System V IPC object by its id, as ``uid`` (their creator: the agent).

    By id, not ``ipcrm --all``: that lists objects with a stat that needs read permission, so
    an object the agent handed to root with mode 000 would be skipped (and every later reset
    would fail). Its creator may still remove it.
    """
    flags = {"shm": "-m", "msg": "-q", "sem": "-s"}
    args: list[str] = []
    for kind, flag in flags.items():
        try:
            with open(f"/proc/sysvipc/{kind}") as fh:
                args += [a for line in fh.readlines()[1:] if line.split() for a in (flag, line.split()[1])]
        except OSError:
            continue
    if not args:
        return
    subprocess.run(["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
                    "/usr/bin/ipcrm", *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=10, check=False, env={"PATH": "/usr/bin:/bin"})


def remove_message_queues() -> None:
    """Unlink every POSIX message queue (root owns the sticky mqueue folder, so it may)."""
    for name in message_queues():
        try:
            os.unlink(os.path.join(MQUEUE_DIR, name))
        except FileNotFoundError:
            pass


def quiesce(agent_uid: int | None) -> None:
    """Every agent process dead (detached, setsid and nohup ones included: all share the uid)
    and its IPC objects and message queues gone: nothing changes files or state meanwhile."""
    if agent_uid is not None:
        for _ in range(200):
            kill_agent_processes(agent_uid)
            if not any(p.split()[1] == str(agent_uid) for p in foreign_processes()):
                break
            time.sleep(0.005)
        if ipc_objects():
            remove_agent_ipc(agent_uid)
    if os.geteuid() == 0:
        remove_message_queues()


@dataclass
class Episodes:
    """The control operations that hash and reset a sandbox between episodes.

    Args:
        workspace: The workspace root.
        agent_uid: The agent's uid (None when the server does not run as root: tests).
        audit: The audit log (a fresh chain per episode).
        reseed: Seeds the workspace again (the same coroutine that seeded it at start).
        services: The services (None for a workspace-only task).
        drain_timeout_s: How long a reset waits for running tool calls to end.
    """

    workspace: str
    agent_uid: int | None
    audit: Any
    reseed: Callable[[], Awaitable[None]]
    services: Any = None
    drain_timeout_s: float = 10.0
    tmp: str = "/tmp"
    episode: int = 0

    def _state(self) -> dict[str, Any]:
        return sandbox_state(self.workspace, self.tmp,
                             self.services.current_hash() if self.services is not None else None)

    async def state(self, _: dict) -> dict:
        """Control op ``state_hash``: the hash of the sandbox's state now."""
        return await asyncio.to_thread(self._state)

    async def begin(self, req: dict) -> dict:
        """Control op ``begin_episode``: apply the episode's fault seed; answers like a ping."""
        if self.services is not None:
            self.services.set_fault_seed(req.get("seed"))
        return {"episode": self.episode, "audit_count": self.audit.count}

    async def reset(self, req: dict) -> dict:
        """Control op ``reset``: back to the pristine state, then hash it.

        Refused (nothing changed) when records were appended since the last workspace
        export and ``discard_evidence`` is not set: a reset never loses unexported evidence.
        """
        t0 = time.perf_counter()
        unexported = self.audit.count - self.audit.exported_at
        if unexported > 0 and not req.get("discard_evidence"):
            raise RuntimeError(f"reset refused: {unexported} audit record(s) of the episode were not exported "
                               "(export the evidence first, or pass discard_evidence)")
        self.audit.paused = True
        try:
            await self.drain()
            if self.audit.in_flight:
                raise RuntimeError(f"reset failed: {self.audit.in_flight} tool call(s) still running "
                                   f"after {self.drain_timeout_s:g}s")
            late = self.audit.count - self.audit.exported_at
            if late > 0 and not req.get("discard_evidence"):
                # A call that outlived the export wrote its result (and its effect) after it.
                raise RuntimeError(f"reset refused: {late} audit record(s) were written after the export "
                                   "(a tool call still ran); export the evidence again, or pass discard_evidence")
            await asyncio.to_thread(self._clean)
            await self.reseed()
            services_hash = None
            if self.services is not None:
                services_hash = (await self.services.reset({"seed": req.get("seed")}))["hash"]
            self.episode += 1
            self.audit.restart()
            # Hashed while calls are still refused, so the services' hash the reset just took
            # is the state's (hashing them again cost as much as the restore itself).
            state = await asyncio.to_thread(sandbox_state, self.workspace, self.tmp, services_hash)
        finally:
            self.audit.paused = False
        self.audit.append({"kind": "session_start", "task": req.get("task", ""), "episode": self.episode,
                           "reset": True})
        self.audit.exported_at = self.audit.count  # the chain's opening record is no episode's evidence
        return {**state, "episode": self.episode, "reset_ms": round((time.perf_counter() - t0) * 1000, 3)}

    async def drain(self) -> None:
        """Wait until no tool call runs (at most ``drain_timeout_s``), killing agent processes
        meanwhile so that running shell calls end. Callers pause new calls first."""
        deadline = time.monotonic() + self.drain_timeout_s
        while self.audit.in_flight and time.monotonic() < deadline:
            if self.agent_uid is not None:
                kill_agent_processes(self.agent_uid)  # ends shell calls still running
            await asyncio.sleep(0.005)

    def _clean(self) -> None:
        quiesce(self.agent_uid)
        if os.geteuid() == 0:
            assert self.agent_uid is not None  # given whenever the server runs as root
            wipe(self.workspace, owner=(self.agent_uid, F.AGENT_GID), mode=0o755)
            wipe(self.tmp, owner=(0, 0), mode=0o1777)
        else:
            wipe(self.workspace, owner=(os.getuid(), os.getgid()), mode=0o755)

    def handlers(self) -> dict[str, Callable[[dict], Awaitable[dict]]]:
        """Control operations: ``state_hash``, ``begin_episode`` and ``reset``."""
        return {"state_hash": self.state, "begin_episode": self.begin, "reset": self.reset}
