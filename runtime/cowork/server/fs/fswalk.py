"""Bounded, iterative walks of a folder tree, and glob patterns compiled to linear-time regexes.

One walker serves list_files, grep and the export. It holds a descriptor per level and opens
each subfolder relative to its parent with ``O_NOFOLLOW``, so it never leaves the tree through
a symlink (even one swapped in during the walk), never recurses in Python (1,100 nested
folders crashed ``os.walk``), and needs no path shorter than PATH_MAX. It stops at a limit on
entries, depth, path length or time and says why.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import re2

from .fsaccess import Deadline

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


@dataclass
class Entry:
    """One name met by a walk; ``dir_fd`` (its folder) is valid only until the walk moves on."""

    rel: str
    name: str
    dir_fd: int
    st: os.stat_result
    depth: int


@dataclass
class Walk:
    """Depth-first, sorted, pre-order walk of the tree below an open folder.

    Args:
        root_fd: Descriptor of the folder to walk (not closed by the walk).
        max_entries: Most names to visit.
        max_depth: Deepest level entered (top-level names are depth 0).
        max_path: Longest relative path, in bytes, yielded; longer ones are skipped.
        deadline: Time budget; the walk stops when it is spent.
        descend: Called with a folder's relative path and depth; False skips its contents.

    Iterating raises OSError only when the root folder itself cannot be listed; a subfolder
    that cannot be opened is skipped and named in ``skipped``.
    """

    root_fd: int
    max_entries: int = 100_000
    max_depth: int = 4096
    max_path: int = 4095
    deadline: Deadline | None = None
    descend: Callable[[str, int], bool] | None = None
    #: Why the walk did not cover the whole tree (None: it did).
    stopped: str | None = None
    #: Names left out for a reason (unreadable folder, too deep, path too long), a few shown.
    skipped: list[str] = field(default_factory=list)
    visited: int = 0

    skipped_count: int = 0

    def _skip(self, rel: str, why: str) -> None:
        self.skipped_count += 1
        if len(self.skipped) < 20:
            self.skipped.append(f"{rel}: {why}")

    def _list(self, fd: int) -> list[tuple[str, os.stat_result]]:
        names: list[tuple[str, os.stat_result]] = []
        with os.scandir(fd) as it:
            for e in it:
                if self.visited + len(names) >= self.max_entries:
                    self.stopped = f"more than {self.max_entries} entries"
                    break
                try:
                    names.append((e.name, e.stat(follow_symlinks=False)))
                except OSError:  # gone meanwhile
                    continue
        names.sort()
        return names

    def __iter__(self) -> Iterator[Entry]:
        stack: list[tuple[int, str, Iterator[tuple[str, os.stat_result]], int]] = []
        try:
            fd = os.dup(self.root_fd)
            stack.append((fd, "", iter(self._list(fd)), 0))
            while stack:
                fd, prefix, names, depth = stack[-1]
                item = next(names, None)
                if item is None:
                    os.close(fd)
                    stack.pop()
                    continue
                if self.deadline is not None and self.deadline.expired:
                    self.stopped = f"time limit of {self.deadline.seconds:g}s reached"
                    return
                name, st = item
                rel = prefix + name
                if len(rel.encode("utf-8", "surrogateescape")) > self.max_path:
                    self._skip(rel[:200] + "...", f"path longer than {self.max_path} bytes")
                    continue
                self.visited += 1
                yield Entry(rel, name, fd, st, depth)
                if not stat.S_ISDIR(st.st_mode) or (self.descend and not self.descend(rel, depth)):
                    continue
                if depth + 1 > self.max_depth:
                    self._skip(rel, f"deeper than {self.max_depth} levels")
                    continue
                if self.stopped and self.stopped.startswith("more than"):
                    continue
                try:
                    sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    self._skip(rel, exc.strerror or "cannot open")
                    continue
                try:
                    listing = self._list(sub)
                except OSError as exc:
                    os.close(sub)
                    self._skip(rel, exc.strerror or "cannot list")
                    continue
                stack.append((sub, rel + "/", iter(listing), depth + 1))
        finally:
            for fd, *_ in stack:
                os.close(fd)


# --------------------------------------------------------------------------- globs
def _regex_options(case_sensitive: bool = True) -> re2.Options:
    opts = re2.Options()
    opts.log_errors = False
    opts.case_sensitive = case_sensitive
    return opts


def _literal(ch: str) -> str:
    return ch if ch.isalnum() and ch.isascii() else "\\x{%x}" % ord(ch)


def _component(part: str) -> str:
    """Regex for one path component: ``*``, ``?`` and ``[...]`` never cross a ``/``."""
    out, i = [], 0
    while i < len(part):
        ch = part[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[" and (end := part.find("]", i + 2 if part[i + 1: i + 2] in ("!", "]") else i + 1)) != -1:
            body = part[i + 1: end]
            neg = body.startswith("!")
            body = body[1:] if neg else body
            chars: list[str] = []
            j = 0
            while j < len(body):
                if body[j] == "-" and chars and j + 1 < len(body):
                    chars.append("-")
                else:
                    chars.append(_literal(body[j]))
                j += 1
            out.append("[" + ("^/" if neg else "") + "".join(chars) + "]")
            i = end
        else:
            out.append(_literal(ch))
        i += 1
    return "".join(out)


@dataclass
class Glob:
    """A glob over '/'-separated relative paths (``**`` spans folders), matched by RE2.

    Raises:
        ValueError: the pattern is absolute or climbs out with ``..``.
    """

    pattern: str
    regex: re2._Regexp = field(init=False)
    #: Deepest level that can match (None: unbounded, the pattern has ``**``).
    max_depth: int | None = field(init=False)

    def __post_init__(self) -> None:
        if self.pattern.startswith("/"):
            raise ValueError(f"pattern {self.pattern!r} must be relative to the folder searched")
        parts = [p for p in self.pattern.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise ValueError(f"pattern {self.pattern!r} must not climb out with '..'")
        if not parts:
            parts = ["*"]
        rx = []
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if part == "**":
                rx.append(".*" if last else "(?:[^/]+/)*")
            else:
                rx.append(_component(part) + ("" if last else "/"))
        self.regex = re2.compile("^" + "".join(rx) + "$", _regex_options())
        self.max_depth = None if "**" in parts else len(parts) - 1

    def match(self, rel: str) -> bool:
        """True when ``rel`` matches."""
        return self.regex.search(rel) is not None


def name_matcher(glob: str) -> re2._Regexp:
    """RE2 regex for a glob over a single file name (grep's ``glob``)."""
    return re2.compile("^" + _component(glob) + "$", _regex_options())
