"""Export of the final workspace as a tar: every name, bounded in size, nothing that hides a change.

Runs as root in the server (DAC_READ_SEARCH reads any agent file), after every agent process
is killed, so nothing changes files while it runs. Every name goes in: folders, symlinks (as
links, with their target), FIFOs, sockets (a FIFO member with PAX ``COWORK.kind: socket``) and
devices, so that no kind of name is invisible to a rule about what was added. For content the
grader reads regular members only, so:

- every name of a hard-linked file is a regular member with the content (tarfile would write
  the second name as a link the grader never sees);
- a file over the limits (apparent size, e.g. a 2 GB sparse file, or the total) is not left
  out: its member holds a short placeholder text instead of the content and carries the PAX
  header ``COWORK.omitted`` (why) and ``COWORK.size`` (its apparent size), so it never passes
  as unchanged and a check that needs its content cannot pass on it;
- the archive starts with a PAX global header ``COWORK.export``: JSON saying whether the
  export is complete, what was omitted and the limits in force (also returned to the host).
  When names had to be left out (too many entries, too deep, paths too long, time), the export
  is incomplete, and a regular member ``../COWORK-EXPORT-INCOMPLETE`` (a name no workspace
  file can have, refused by any safe extraction) makes a grader that does not read the header
  see a write outside every allowed path.
"""

from __future__ import annotations

import io
import json
import os
import stat
import tarfile
from dataclasses import asdict, dataclass
from typing import Any

from ...formats import (
    EXPORT_INCOMPLETE_MEMBER,
    EXPORT_KIND_KEY,
    EXPORT_OMITTED_KEY,
    EXPORT_SIZE_KEY,
    EXPORT_SUMMARY_KEY,
)
from ..fs.fsaccess import Deadline
from ..fs.fswalk import Walk

#: PAX keys written by the export; defined in formats.py, which the grader reads too.
EXPORT_KEY = EXPORT_SUMMARY_KEY
OMITTED_KEY = EXPORT_OMITTED_KEY
SIZE_KEY = EXPORT_SIZE_KEY
INCOMPLETE_MEMBER = EXPORT_INCOMPLETE_MEMBER
KIND_KEY = EXPORT_KIND_KEY
#: Bytes reserved for the global header's JSON, rewritten in place once the export is done.
_SUMMARY_BYTES = 8192


@dataclass(frozen=True)
class ExportLimits:
    """Bounds of one export; ``for_disk`` derives them from the task's ``limits.disk_mb``."""

    max_file_bytes: int = 64 << 20
    """Largest apparent size of one file whose content is exported."""
    max_total_bytes: int = 64 << 20
    """Most content bytes in the archive (every name of a hard link counts)."""
    max_entries: int = 50_000
    """Most names exported."""
    max_path: int = 4095
    """Longest relative path exported, in bytes."""
    time_s: float = 45.0
    """Time budget (the host waits 60 s for the answer)."""

    @classmethod
    def for_disk(cls, disk_mb: int) -> ExportLimits:
        """Limits for a workspace of ``disk_mb`` MiB: no file and no total beyond that size."""
        return cls(max_file_bytes=disk_mb << 20, max_total_bytes=disk_mb << 20)


class _Exactly(io.RawIOBase):
    """Reads exactly ``size`` bytes from ``fd``: zero-padded if the file shrank, cut if it grew."""

    def __init__(self, fd: int, size: int):
        self.fd, self.left = fd, size

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        n = min(len(buf), self.left)
        if n == 0:
            return 0
        data = os.read(self.fd, n) or b"\0" * n
        buf[: len(data)] = data
        self.left -= len(data)
        return len(data)


def _summary_header(summary: dict[str, Any]) -> bytes:
    """The global header, always the same size: lists are cut until the JSON fits."""
    text = json.dumps(summary, sort_keys=True, ensure_ascii=True)
    while len(text) > _SUMMARY_BYTES:
        lists = [k for k in ("omitted_paths", "left_out") if summary.get(k)]
        if not lists:
            summary = {k: summary[k] for k in ("version", "complete", "entries", "omitted")}
            text = json.dumps(summary, sort_keys=True, ensure_ascii=True)
            break
        key = max(lists, key=lambda k: len(json.dumps(summary[k])))
        summary[key] = summary[key][:-1]
        summary["lists_cut"] = True
        text = json.dumps(summary, sort_keys=True, ensure_ascii=True)
    return tarfile.TarInfo.create_pax_global_header({EXPORT_KEY: text.ljust(_SUMMARY_BYTES)})


def _info(rel: str, st: os.stat_result, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(rel)
    info.type = kind
    info.mode = stat.S_IMODE(st.st_mode)
    info.uid, info.gid = st.st_uid, st.st_gid
    info.mtime = int(st.st_mtime)
    info.size = 0
    return info


def _placeholder(info: tarfile.TarInfo, why: str, size: int) -> tuple[tarfile.TarInfo, bytes]:
    body = f"[cowork: content omitted from the export: {why}]\n".encode()
    info.size = len(body)
    info.pax_headers = {OMITTED_KEY: why, SIZE_KEY: str(size)}
    return info, body


def export_workspace(root: str, dest: str, limits: ExportLimits | None = None,
                     kill_uid: int | None = None) -> dict[str, Any]:
    """Write ``root`` as an uncompressed PAX tar to ``dest`` (symlinks kept as links, never followed).

    Args:
        root: The workspace folder.
        dest: The archive to write (replaced atomically, mode 0600).
        limits: Size, count and time bounds (defaults: a 64 MiB workspace).
        kill_uid: Kill every process of this uid first (the agent's), so none changes files
            during the export.

    Returns:
        The summary also written as the archive's ``COWORK.export`` header, plus ``path``.

    Raises:
        OSError: the workspace root or the destination cannot be opened.
    """
    limits = limits or ExportLimits()
    if kill_uid is not None:
        from ..tools.procs import kill_agent_processes

        kill_agent_processes(kill_uid)
    tmp = dest + ".part"
    summary: dict[str, Any] = {
        "version": 1, "complete": True, "entries": 0, "content_bytes": 0, "omitted": 0,
        "omitted_paths": [], "left_out": [], "limits": asdict(limits),
    }
    omitted: list[dict[str, Any]] = []
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with open(tmp, "wb") as raw:
            os.fchmod(raw.fileno(), 0o600)
            raw.write(_summary_header(dict(summary)))  # placeholder of the final size
            with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
                walk = Walk(root_fd, max_entries=limits.max_entries, max_path=limits.max_path,
                            deadline=Deadline(limits.time_s))
                for e in walk:
                    _add(tar, e, limits, summary, omitted)
                if summary["entries"] == 0:
                    # A tar of nothing but the summary's global header is unreadable to Python's
                    # tarfile: an empty workspace (the agent deleted everything) must still grade.
                    tar.addfile(_info(".", os.fstat(root_fd), tarfile.DIRTYPE))
                left_out = ([walk.stopped] if walk.stopped else []) + walk.skipped
                if left_out:
                    summary["complete"] = False
                    summary["left_out"] = left_out[:20]
                    body = ("cowork: the export left names out:\n" + "\n".join(left_out[:20]) + "\n").encode()
                    info = tarfile.TarInfo(INCOMPLETE_MEMBER)
                    info.size = len(body)
                    info.pax_headers = {OMITTED_KEY: "export incomplete"}
                    tar.addfile(info, io.BytesIO(body))
            summary["omitted_paths"] = [o["path"] for o in omitted[:50]]
            header = _summary_header(dict(summary))
            raw.seek(0)
            raw.write(header)
        os.replace(tmp, dest)
    finally:
        os.close(root_fd)
        if os.path.exists(tmp):
            os.unlink(tmp)
    return {**summary, "path": dest, "omitted_files": omitted[:1000]}


def _add(tar: tarfile.TarFile, e, limits: ExportLimits, summary: dict, omitted: list) -> None:
    st = e.st
    summary["entries"] += 1
    if stat.S_ISDIR(st.st_mode):
        tar.addfile(_info(e.rel, st, tarfile.DIRTYPE))
    elif stat.S_ISLNK(st.st_mode):
        info = _info(e.rel, st, tarfile.SYMTYPE)
        try:
            info.linkname = os.readlink(e.name, dir_fd=e.dir_fd)
        except OSError:
            info.pax_headers = {OMITTED_KEY: "the link's target could not be read"}  # still a name
        tar.addfile(info)
    elif stat.S_ISFIFO(st.st_mode):
        tar.addfile(_info(e.rel, st, tarfile.FIFOTYPE))
    elif stat.S_ISSOCK(st.st_mode):
        # tar has no type for a socket: a FIFO member that says what it is (the grader reads it).
        info = _info(e.rel, st, tarfile.FIFOTYPE)
        info.pax_headers = {KIND_KEY: "socket"}
        tar.addfile(info)
    elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        info = _info(e.rel, st, tarfile.CHRTYPE if stat.S_ISCHR(st.st_mode) else tarfile.BLKTYPE)
        info.devmajor, info.devminor = os.major(st.st_rdev), os.minor(st.st_rdev)
        tar.addfile(info)
    elif stat.S_ISREG(st.st_mode):
        info = _info(e.rel, st, tarfile.REGTYPE)  # every name of a hard link: a full member
        size, real = st.st_size, st.st_blocks * 512
        why = None
        if max(size, real) > limits.max_file_bytes:
            why = f"{max(size, real)} bytes (apparent {size}, on disk {real}) over the per-file limit of {limits.max_file_bytes}"
        elif summary["content_bytes"] + size > limits.max_total_bytes:
            why = f"{size} bytes would pass the export's total limit of {limits.max_total_bytes}"
        fd = None
        if why is None:
            try:
                fd = os.open(e.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=e.dir_fd)
                now = os.fstat(fd)
                if (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev) or not stat.S_ISREG(now.st_mode):
                    why = "the file changed during the export"
            except OSError as exc:
                why = f"unreadable: {exc.strerror}"
        try:
            if why is not None:
                info, body = _placeholder(info, why, size)
                omitted.append({"path": e.rel, "reason": why, "size": size})
                summary["omitted"] += 1
                tar.addfile(info, io.BytesIO(body))
            else:
                assert fd is not None  # no reason to leave it out: it was opened
                info.size = size
                summary["content_bytes"] += size
                tar.addfile(info, io.BufferedReader(_Exactly(fd, size), 1 << 16))
        finally:
            if fd is not None:
                os.close(fd)
    else:  # a kind no other branch knows: still a name, so that it is seen as added
        info = _info(e.rel, st, tarfile.FIFOTYPE)
        info.pax_headers = {KIND_KEY: f"unknown-{stat.S_IFMT(st.st_mode):o}"}
        tar.addfile(info)
