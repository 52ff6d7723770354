"""Save a folder tree exactly (owners, modes, xattrs, links, times, content) and put it back.

Used by checkpoints (server.checkpoint) for ``/workspace`` and ``/tmp``. A saved tree is a
JSON manifest (one entry per name, in the sorted pre-order of fswalk.Walk) and one data file
holding the regular files' contents end to end. Both live in the root-only run dir.

Restoring runs as root with every agent process dead, into a root that was just emptied
(reset.wipe). It never follows a symlink: every name is created relative to its parent's
descriptor (``O_EXCL | O_NOFOLLOW``, ``mkdirat``, ``symlinkat``), so a link saved from the
agent's tree is put back as a link, and nothing is written through it.

The server holds CAP_CHOWN and CAP_DAC_READ_SEARCH but no CAP_FOWNER: it may give a file away
but not change the mode of a file it no longer owns. So the tree is built root-owned and
searchable, then every owner is set, then each name's mode and times are set by its owner
(the agent's names through the agent's file-access pool), children before their folder.
"""

from __future__ import annotations

import base64
import os
import socket
import stat
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..fs.fswalk import Walk

#: Most names one saved tree may hold (a tmpfs of the default 64 MiB has ~16k inodes).
MAX_ENTRIES = 200_000
_CHUNK = 1 << 20
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class TreeError(RuntimeError):
    """A tree cannot be saved (too big, a name of a kind that cannot be kept) or put back."""


@dataclass
class Node:
    """One saved name. ``kind``: d(irectory), f(ile), l(ink), h(ard link to ``target``), p(ipe), s(ocket)."""

    rel: str
    kind: str
    mode: int
    uid: int
    gid: int
    atime_ns: int
    mtime_ns: int
    xattrs: list[list[str]] = field(default_factory=list)
    size: int = 0
    offset: int = 0
    target: str = ""


def _xattrs(path: str | int) -> list[list[str]]:
    try:
        names = os.listxattr(path, follow_symlinks=False) if isinstance(path, str) else os.listxattr(path)
        get = (lambda n: os.getxattr(path, n, follow_symlinks=False)) if isinstance(path, str) \
            else (lambda n: os.getxattr(path, n))
        return sorted([n, base64.b64encode(get(n)).decode()] for n in names)
    except OSError:  # no xattr support here (hashed as none too, see reset._xattrs)
        return []


def _node(rel: str, st: os.stat_result, kind: str) -> Node:
    return Node(rel=rel, kind=kind, mode=stat.S_IMODE(st.st_mode), uid=st.st_uid, gid=st.st_gid,
                atime_ns=st.st_atime_ns, mtime_ns=st.st_mtime_ns)


def save_tree(root: str, data, budget: list[int]) -> dict[str, Any]:
    """Write every name under ``root`` (and root's own attributes) to a manifest, contents to ``data``.

    Args:
        root: The folder (no agent process may run meanwhile).
        data: A binary file open for writing; contents are appended at its current position.
        budget: ``[bytes left]`` for contents, shared between trees; decreased here.

    Returns:
        The manifest: ``{"root": Node, "nodes": [Node, ...], "bytes": int}`` as JSON-able dicts.

    Raises:
        TreeError: the contents pass the budget, the tree is too large, or holds a device.
    """
    root_fd = os.open(root, _DIR)
    try:
        top = _node(".", os.fstat(root_fd), "d")
        top.xattrs = _xattrs(root_fd)
        nodes: list[Node] = []
        links: dict[tuple[int, int], str] = {}
        total = 0
        walk = Walk(root_fd, max_entries=MAX_ENTRIES)
        for e in walk:
            st, full = e.st, os.path.join(root, e.rel)
            fmt = stat.S_IFMT(st.st_mode)
            if stat.S_ISDIR(fmt):
                node = _node(e.rel, st, "d")
            elif stat.S_ISLNK(fmt):
                node = _node(e.rel, st, "l")
                node.target = os.readlink(e.name, dir_fd=e.dir_fd)
            elif stat.S_ISFIFO(fmt):
                node = _node(e.rel, st, "p")
            elif stat.S_ISSOCK(fmt):
                node = _node(e.rel, st, "s")
            elif stat.S_ISREG(fmt):
                first = links.get((st.st_dev, st.st_ino)) if st.st_nlink > 1 else None
                if first is not None:
                    nodes.append(Node(rel=e.rel, kind="h", mode=0, uid=0, gid=0, atime_ns=0, mtime_ns=0,
                                      target=first))
                    continue
                if st.st_nlink > 1:
                    links[(st.st_dev, st.st_ino)] = e.rel
                node = _node(e.rel, st, "f")
                if st.st_size > budget[0]:
                    raise TreeError(f"{full}: {st.st_size} bytes do not fit in what is left of the snapshot's "
                                    f"limit ({budget[0]} bytes)")
                node.size, node.offset = st.st_size, data.tell()
                _copy_out(e.name, e.dir_fd, st, data, full)
                budget[0] -= st.st_size
                total += st.st_size
            else:
                raise TreeError(f"{full}: a device or other special file (mode {st.st_mode:o}) cannot be saved")
            node.xattrs = _xattrs(full)
            nodes.append(node)
        if walk.stopped or walk.skipped:
            raise TreeError(f"{root}: the tree could not be saved whole: {walk.stopped or walk.skipped[0]}")
    finally:
        os.close(root_fd)
    return {"root": asdict(top), "nodes": [asdict(n) for n in nodes], "bytes": total}


def _copy_out(name: str, dir_fd: int, st: os.stat_result, data, full: str) -> None:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        now = os.fstat(fd)
        if (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev):
            raise TreeError(f"{full} changed while it was saved")
        left = st.st_size
        while left:
            chunk = os.read(fd, min(_CHUNK, left))
            if not chunk:
                raise TreeError(f"{full} shrank while it was saved")
            data.write(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- restore
def _parent_fd(root_fd: int, rel: str) -> tuple[int, str]:
    """A new descriptor of ``rel``'s folder, opened one name at a time without following links."""
    *dirs, name = rel.split("/")
    fd = os.dup(root_fd)
    try:
        for part in dirs:
            sub = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd, name


def _set_xattrs(target: str | int, xattrs: list[list[str]]) -> None:
    for name, value in xattrs:
        if isinstance(target, int):
            os.setxattr(target, name, base64.b64decode(value))
        else:
            os.setxattr(target, name, base64.b64decode(value), follow_symlinks=False)


def build(root: str, manifest: dict[str, Any], data_path: str) -> None:
    """Create every saved name under the (empty) ``root``, root-owned; content and xattrs included.

    Folders are made 0755 so that each owner can reach its names afterwards (see finish);
    files 0600 (the xattrs of ``user.*`` need write access, which root has as their owner now).
    """
    root_fd = os.open(root, _DIR)
    data = os.open(data_path, os.O_RDONLY | os.O_CLOEXEC)
    stack: list[tuple[str, int]] = [("", os.dup(root_fd))]
    try:
        for n in manifest["nodes"]:
            rel, kind = n["rel"], n["kind"]
            parent, _, name = rel.rpartition("/")
            while stack[-1][0] != parent:
                os.close(stack.pop()[1])
            pfd = stack[-1][1]
            if kind == "d":
                os.mkdir(name, 0o755, dir_fd=pfd)
                fd = os.open(name, _DIR, dir_fd=pfd)
                _set_xattrs(fd, n["xattrs"])
                stack.append((rel, fd))
            elif kind == "f":
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                             dir_fd=pfd)
                try:
                    _copy_in(data, fd, n["offset"], n["size"])
                    _set_xattrs(fd, n["xattrs"])
                finally:
                    os.close(fd)
            elif kind == "h":
                os.link(n["target"], name, src_dir_fd=root_fd, dst_dir_fd=pfd, follow_symlinks=False)
            elif kind == "l":
                os.symlink(n["target"], name, dir_fd=pfd)
            elif kind == "p":
                os.mkfifo(name, 0o600, dir_fd=pfd)
            elif kind == "s":
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:  # bind takes no dir_fd: reach the folder through its descriptor's magic link
                    sock.bind(f"/proc/self/fd/{pfd}/{name}")
                finally:
                    sock.close()
            else:
                raise TreeError(f"{rel}: unknown kind {kind!r} in the snapshot")
    finally:
        for _, fd in stack:
            os.close(fd)
        os.close(data)
        os.close(root_fd)


def _copy_in(data: int, fd: int, offset: int, size: int) -> None:
    done = 0
    while done < size:
        # sendfile, not copy_file_range: the run dir and the tmpfs are different filesystems.
        n = os.sendfile(fd, data, offset + done, min(_CHUNK, size - done))
        if n == 0:
            raise TreeError("the snapshot's data file is shorter than its manifest says")
        done += n


def chown_all(root: str, manifest: dict[str, Any]) -> None:
    """Give every name its saved owner and group (as root, CAP_CHOWN), links themselves only."""
    root_fd = os.open(root, _DIR)
    try:
        for n in manifest["nodes"]:
            if n["kind"] == "h" or (n["uid"], n["gid"]) == (os.geteuid(), os.getegid()):
                continue
            pfd, name = _parent_fd(root_fd, n["rel"])
            try:
                os.chown(name, n["uid"], n["gid"], dir_fd=pfd, follow_symlinks=False)
            finally:
                os.close(pfd)
    finally:
        os.close(root_fd)


def finish(root: str, nodes: list[dict[str, Any]]) -> int:
    """Set the mode and times of ``nodes`` (listed children first), as their owner; returns how many."""
    root_fd = os.open(root, _DIR)
    try:
        for n in nodes:
            pfd, name = _parent_fd(root_fd, n["rel"])
            try:
                if n["kind"] != "l":  # a link's mode is always 0777; it is never followed here
                    os.chmod(name, n["mode"], dir_fd=pfd)
                os.utime(name, ns=(n["atime_ns"], n["mtime_ns"]), dir_fd=pfd, follow_symlinks=False)
            finally:
                os.close(pfd)
    finally:
        os.close(root_fd)
    return len(nodes)


def finish_root(root: str, top: dict[str, Any]) -> None:
    """Mode and times of the root itself (run by its owner, after chown)."""
    os.chmod(root, top["mode"])
    os.utime(root, ns=(top["atime_ns"], top["mtime_ns"]), follow_symlinks=False)


async def restore_tree(root: str, manifest: dict[str, Any], data_path: str, *, agent_uid: int | None,
                       as_agent: Callable[..., Awaitable[Any]], in_thread: Callable[..., Awaitable[Any]]) -> None:
    """Put a saved tree back into ``root``, which reset.wipe just emptied (root-owned, 0755).

    Args:
        root: The folder.
        manifest: From save_tree.
        data_path: Its data file.
        agent_uid: The agent's uid (None when the server does not run as root).
        as_agent: Runs a function with the agent's file permissions (the AgentFS pool).
        in_thread: Runs a function in a worker thread as root.

    Raises:
        TreeError, OSError: a name could not be made or given its attributes.
    """
    await in_thread(build, root, manifest, data_path)
    await in_thread(chown_all, root, manifest)
    ordered = [n for n in reversed(manifest["nodes"]) if n["kind"] != "h"]  # children before their folder
    agents = [n for n in ordered if agent_uid is not None and n["uid"] == agent_uid and os.geteuid() == 0]
    others = [n for n in ordered if not (agent_uid is not None and n["uid"] == agent_uid and os.geteuid() == 0)]
    # The agent's names first: once a folder of root's has its final mode (0700, say), the
    # agent could no longer reach the names in it; root reaches anything (DAC_READ_SEARCH).
    if agents:
        await as_agent(finish, root, agents)
    if others:
        await in_thread(finish, root, others)
    top = manifest["root"]
    _set_xattrs(root, top["xattrs"])
    if (top["uid"], top["gid"]) != (os.geteuid(), os.getegid()):
        os.chown(root, top["uid"], top["gid"], follow_symlinks=False)
    if agent_uid is not None and top["uid"] == agent_uid and os.geteuid() == 0:
        await as_agent(finish_root, root, top)
    else:
        finish_root(root, top)
