"""Opening paths an agent names: never a forbidden filesystem, never a special file, never blocking.

Checking a path and then opening it races: a symlink swapped in between reaches ``/proc`` (where
a file-tool thread could read or write the server's own memory) or ``/run/cowork``. So the
file tools open first, with ``O_NONBLOCK`` (a FIFO or a device cannot hang the open), and then
judge what they actually opened: its real path (``/proc/self/fd/N``), its device, its type.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass

#: Trees no file tool may touch, whatever path or symlink leads there.
FORBIDDEN_ROOTS = ("/proc", "/run/cowork", "/sys")

_OPEN_FLAGS = os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_forbidden_devs: set[int] | None = None


class FileRefused(OSError):
    """The opened file is forbidden or not of the kind the tool handles (message says which)."""


@dataclass
class Deadline:
    """A per-call time budget, checked inside loops so that no call can hold its thread for good."""

    seconds: float
    end: float = 0.0

    def __post_init__(self) -> None:
        self.end = time.monotonic() + self.seconds

    @property
    def expired(self) -> bool:
        """True once the budget is spent."""
        return time.monotonic() > self.end


def is_forbidden(real: str) -> bool:
    """True when the absolute, resolved ``real`` lies in one of FORBIDDEN_ROOTS."""
    return any(real == r or real.startswith(r + "/") for r in FORBIDDEN_ROOTS)


def _devices() -> set[int]:
    global _forbidden_devs
    if _forbidden_devs is None:
        # By device only the kernel's pseudo-filesystems: /run/cowork is a bind mount whose
        # device other bind mounts (/etc/hosts) may share, and root-only besides.
        devs = set()
        for root in ("/proc", "/sys", "/sys/fs/cgroup"):
            try:
                devs.add(os.stat(root).st_dev)
            except OSError:
                pass
        try:  # "/" itself must stay reachable even if a forbidden root shares its device
            devs.discard(os.stat("/").st_dev)
            devs.discard(os.stat("/tmp").st_dev)
        except OSError:
            pass
        _forbidden_devs = devs
    return _forbidden_devs


def fd_path(fd: int) -> str:
    """The path the kernel has for an open descriptor."""
    return os.readlink(f"/proc/self/fd/{fd}")


def check_fd(fd: int, shown: str, kind: str = "file") -> os.stat_result:
    """Judge an opened descriptor; returns its stat.

    Args:
        fd: The descriptor.
        shown: The path as the agent wrote it (for messages).
        kind: "file" (a regular file), "dir" (a folder) or "any" (either).

    Raises:
        FileRefused: it lies in a forbidden tree or is not of ``kind``.
    """
    st = os.fstat(fd)
    try:
        real = fd_path(fd)
    except OSError:
        real = ""
    if st.st_dev in _devices() or is_forbidden(real.removesuffix(" (deleted)")):
        raise FileRefused(f"Permission denied: {shown!r}")
    if kind == "file" and not stat.S_ISREG(st.st_mode):
        what = "a directory; use list_files" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise FileRefused(f"{shown!r} is {what}")
    if kind == "dir" and not stat.S_ISDIR(st.st_mode):
        raise FileRefused(f"Not a directory: {shown!r}")
    if kind == "any" and not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise FileRefused(f"{shown!r} is not a regular file or folder")
    return st


def open_checked(path: str, shown: str, flags: int, kind: str = "file", mode: int = 0o666,
                 dir_fd: int | None = None) -> tuple[int, os.stat_result]:
    """Open ``path`` without blocking, then verify what was opened (see check_fd).

    Returns:
        The descriptor (the caller closes it) and its stat.

    Raises:
        FileRefused: forbidden or of the wrong kind.
        OSError: the open itself failed (FileNotFoundError, PermissionError, ...).
    """
    if dir_fd is None and is_forbidden(os.path.realpath(path)):  # early, clearer refusal
        raise FileRefused(f"Permission denied: {shown!r}")
    if kind == "dir":
        flags |= os.O_DIRECTORY
    fd = os.open(path, flags | _OPEN_FLAGS, mode, dir_fd=dir_fd)
    try:
        return fd, check_fd(fd, shown, kind)
    except BaseException:
        os.close(fd)
        raise
