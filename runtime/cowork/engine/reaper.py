"""The reaper: removes labelled containers whose owner process is gone, and run dirs that
no container uses any more; and the listing both it and the commands read (every cowork
container, or the one a reference names)."""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CoworkError, NoSuchSandbox  # noqa: F401 - NoSuchSandbox raised here, imported from here
from . import labels as L
from .client import get_client
from .container import remove_container, run_root

log = logging.getLogger(__name__)

#: The name start_container gives a run dir (``uuid4().hex[:12]``); nothing else is touched.
RUN_DIR_NAME = re.compile(r"[0-9a-f]{12}")
#: A pool's folder of task bundles under ``<run root>/bundles``: the owner's pid and a tag.
BUNDLE_SET_NAME = re.compile(r"(\d+)-[0-9a-f]{8}")
#: A run dir younger than this may belong to a container being created right now by another
#: process (the dir is made first, the container a moment later), so it is left alone. Above
#: the Docker client's 120 s timeout, so no creation still under way can be older.
MIN_ORPHAN_AGE_S = 300.0


@dataclass
class Reaped:
    """What one sweep removed."""

    containers: list[str] = field(default_factory=list)
    """Names of the removed containers."""
    run_dirs: list[str] = field(default_factory=list)
    """Paths of the removed orphaned run dirs (and task bundle folders of dead pools)."""


def managed_containers() -> list:
    """Every container (running or not) that carries the cowork label."""
    # ignore_removed: a container removed between the list and its inspect is simply gone.
    return get_client().containers.list(all=True, filters={"label": f"{L.MANAGED}=true"}, ignore_removed=True)


def find_container(ref: str) -> Any:
    """The one cowork container (running or not) that ``ref`` names: a start of its id, its
    exact name, or its run id (the rule is :func:`cowork.engine.labels.refers_to`).

    Raises:
        NoSuchSandbox: no container matches.
        CoworkError: more than one does.
    """
    hits = [c for c in managed_containers() if L.refers_to(ref, c.id, c.name)]
    if not hits:
        raise NoSuchSandbox(f"no cowork sandbox matches {ref!r}; `cowork ps` lists every sandbox with its ids")
    if len(hits) > 1:
        raise CoworkError(f"more than one cowork sandbox matches {ref!r} ({', '.join(c.name for c in hits)}); "
                          "give more of its id, or its name (`cowork ps`)")
    return hits[0]


def reap(include_kept: bool = False, everything: bool = False) -> list[str]:
    """Remove orphaned sandboxes and orphaned run dirs.

    Args:
        include_kept: Also remove sandboxes started with ``cowork up`` (labelled keep)
            whose owner is gone.
        everything: Remove every cowork container, owner alive or not.

    Returns:
        Names of the removed containers (see :func:`sweep` for the run dirs too).
    """
    return sweep(include_kept=include_kept, everything=everything).containers


def sweep(include_kept: bool = False, everything: bool = False,
          min_age_s: float = MIN_ORPHAN_AGE_S) -> Reaped:
    """Remove orphaned sandboxes, then the run dirs under the run root that no container uses.

    A runner killed between removing its container and its run dir (or before its container
    was created) leaves a run dir that no label points to any more; those are found by
    listing the run root.

    Args:
        include_kept: Also remove ``cowork up`` sandboxes whose owner is gone.
        everything: Remove every cowork container, owner alive or not.
        min_age_s: Leave run dirs modified more recently than this alone.

    Returns:
        The containers and run dirs removed.
    """
    done = Reaped()
    for c in managed_containers():
        labels = c.labels or {}
        if not everything and ((labels.get(L.KEEP) == "true" and not include_kept) or L.owner_alive(labels)):
            continue
        remove_container(c.id, labels.get(L.RUN_DIR))
        done.containers.append(c.name)
    if done.containers:
        log.info("reaped %d orphaned sandbox(es): %s", len(done.containers), ", ".join(done.containers))
    # Listed again after the removals: every container that exists now keeps its run dir,
    # and one created after this listing has a run dir younger than min_age_s.
    in_use = {Path((c.labels or {}).get(L.RUN_DIR, "")).name for c in managed_containers()}
    done.run_dirs = _orphaned_run_dirs(in_use, min_age_s) + _orphaned_bundles(min_age_s)
    return done


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _orphaned_bundles(min_age_s: float) -> list[str]:
    """Task bundle folders (``SandboxPool(bundles=True)``) whose process is gone."""
    root = run_root() / "bundles"
    removed: list[str] = []
    if not root.is_dir():
        return removed
    now = time.time()
    for entry in os.scandir(root):
        m = BUNDLE_SET_NAME.fullmatch(entry.name)
        if m is None or _pid_alive(int(m.group(1))):
            continue
        try:
            st = os.lstat(entry.path)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(st.st_mode) or now - st.st_mtime < min_age_s:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        if not os.path.lexists(entry.path):
            removed.append(entry.path)
    return removed


def _orphaned_run_dirs(in_use: set[str], min_age_s: float) -> list[str]:
    root = run_root()
    removed = []
    now = time.time()
    with os.scandir(root) as entries:
        for entry in entries:
            path = os.path.join(root, entry.name)
            if not RUN_DIR_NAME.fullmatch(entry.name) or entry.name in in_use:
                continue
            try:
                st = os.lstat(path)  # never follow a symlink someone put here
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(st.st_mode) or now - st.st_mtime < min_age_s:
                continue
            shutil.rmtree(path, ignore_errors=True)  # fd-based on Linux: symlinks inside are not followed
            if not os.path.lexists(path):
                removed.append(path)
    if removed:
        log.info("removed %d orphaned run dir(s) under %s", len(removed), root)
    return removed
