"""Labels that tie every container to the process and session that own it."""

from __future__ import annotations

import os
import re
import socket
import uuid

PREFIX = "cowork."
MANAGED = PREFIX + "managed"
OWNER_PID = PREFIX + "owner_pid"
OWNER_START = PREFIX + "owner_start"
OWNER_HOST = PREFIX + "owner_host"
OWNER_USER = PREFIX + "owner_user"
SESSION = PREFIX + "session"
TASK = PREFIX + "task"
RUN_DIR = PREFIX + "run_dir"
SPEC_HASH = PREFIX + "spec_hash"
KEEP = PREFIX + "keep"

#: One id per host process; every container this process starts carries it.
SESSION_ID = uuid.uuid4().hex[:12]
#: A sandbox's run id: the last part of its container name, which is also its run dir's name
#: (``cowork-<task>-<run id>``, ``<run root>/<run id>/mcp.sock``); see :func:`refers_to`.
RUN_ID = re.compile(r"[0-9a-f]{12}")


def user_name() -> str:
    """This process's user, as the owner label records it (the uid when it has no name)."""
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return str(os.getuid())


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), or None if it is gone.

    Together with the pid it names a process uniquely, so a recycled pid is not
    mistaken for the owner.
    """
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    # Field 22, counted after the command name, which may contain spaces.
    return stat.rsplit(")", 1)[1].split()[19]


def owner_labels(task: str, run_dir: str, keep: bool = False) -> dict[str, str]:
    """Labels for a container owned by this process."""
    pid = os.getpid()
    labels = {
        MANAGED: "true",
        OWNER_PID: str(pid),
        OWNER_START: process_start_time(pid) or "",
        OWNER_HOST: socket.gethostname(),
        OWNER_USER: user_name(),
        SESSION: SESSION_ID,
        TASK: task,
        RUN_DIR: run_dir,
    }
    if keep:
        labels[KEEP] = "true"
    return labels


def owner_alive(labels: dict[str, str]) -> bool:
    """True when the process named by the labels still runs on this host.

    Containers from another host are treated as alive: we cannot see that host's processes.
    """
    if labels.get(OWNER_HOST) != socket.gethostname():
        return True
    try:
        pid = int(labels.get(OWNER_PID, ""))
    except ValueError:
        return False
    start = process_start_time(pid)
    return start is not None and start == labels.get(OWNER_START)


def run_id(name: str) -> str | None:
    """The run id at the end of a sandbox's container name (``cowork-<task>-<run id>``), or None."""
    last = name.rsplit("-", 1)[-1]
    return last if name.startswith("cowork-") and RUN_ID.fullmatch(last) else None


def refers_to(ref: str, container_id: str, name: str) -> bool:
    """Whether ``ref`` names this container: the one rule for finding a sandbox by reference.

    A reference is any id the CLI prints for a sandbox: a start of its container id (the 12
    characters ``cowork up`` prints as ``id``, the full 64, or any shorter start, as
    ``docker`` itself takes them), its exact name (``cowork-<task>-<run id>``), or the run id
    alone (the name's last 12 characters, which also name its run dir and so appear in its
    socket path). Every place that finds a sandbox by reference applies it:
    :func:`cowork.engine.reaper.find_container` (the commands, ``Sandbox.attach``, the HTTP
    gateway) and the stdio bridge's fast path, which asks the Docker socket itself.
    """
    return bool(ref) and (container_id.startswith(ref) or name == ref or run_id(name) == ref)
