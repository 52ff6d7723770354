"""Background jobs for the evidence: the agent's processes that outlived their shell call.

With ``limits.background_jobs`` a job the agent starts (``nohup make > build.log 2>&1 &``)
runs on across turns and days; the agent polls its log with the workspace tools. Graders see
what ran: every export lists the jobs still alive (read from /proc, as root, inside the
container), each with its command, start time and the tail of the file its output goes
to. Runs inside the container; reads no log the agent could not read itself.
"""

from __future__ import annotations

import os
import stat
from datetime import datetime, timezone
from typing import Any

#: Most jobs listed, bytes of each log's tail, characters of each command line.
MAX_JOBS = 50
TAIL_BYTES = 2048
MAX_COMMAND = 500
#: Where a log may be read from: the agent's own folders (never a file it only holds open).
LOG_ROOTS = ("/workspace/", "/tmp/")


def _boot_time() -> float:
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return float(line.split()[1])
    return 0.0


def _proc(pid: str) -> tuple[int, str, int, int] | None:
    """(real uid, state, parent pid, start in clock ticks since boot) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/status") as f:
            ruid = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
    except (OSError, StopIteration, IndexError, ValueError):
        return None  # gone meanwhile
    return ruid, fields[0], int(fields[1]), int(fields[19])


def job_logs(pids: list[int]) -> list[list[str | None]]:
    """For each job, where its output goes (its fd 1) and that file's last TAIL_BYTES when it is a
    regular file in /workspace or /tmp: ``[path or None, tail or None]``.

    Run with the agent's ids (AgentFS.run): the kernel shows another user's /proc/PID/fd only to
    that user (the server holds no CAP_SYS_PTRACE), and the agent's ids read nothing the agent
    could not read itself. Answers in JSON types (ForkFS sends it through a pipe).
    """
    return [list(_log(pid)) for pid in pids]


def _log(pid: int) -> tuple[str | None, str | None]:
    try:
        target = os.readlink(f"/proc/{pid}/fd/1")
    except OSError:
        return None, None
    if not target.startswith(LOG_ROOTS):
        return target, None
    try:
        fd = os.open(f"/proc/{pid}/fd/1", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return target, None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return target, None  # a FIFO or a device: never read
        os.lseek(fd, max(0, st.st_size - TAIL_BYTES), os.SEEK_SET)
        return target, os.read(fd, TAIL_BYTES).decode("utf-8", "replace")
    except OSError:
        return target, None
    finally:
        os.close(fd)


def list_jobs(uid: int) -> list[dict[str, Any]]:
    """The agent's background jobs: its live processes whose parent is not one of its own (the
    shell call that started them has ended), oldest first, at most MAX_JOBS.

    Each is ``{"pid", "command", "started" (UTC ISO)}`` (no run state: it is listed while held
    stopped); job_logs adds
    ``log`` (the path its output goes to) and ``log_tail``.
    """
    procs: dict[int, tuple[str, int, int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = _proc(name)
            if info is not None and info[0] == uid and info[1] != "Z":
                procs[int(name)] = info[1:]
    boot, hz = _boot_time(), os.sysconf("SC_CLK_TCK")
    jobs = []
    for pid, (_, ppid, start) in sorted(procs.items(), key=lambda p: (p[1][2], p[0])):
        if ppid in procs:
            continue  # a child of a job: its job stands for it
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                raw = f.read(4 * MAX_COMMAND)  # bounded: an agent's argv may be megabytes long
            command = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")[:MAX_COMMAND]
        except OSError:
            continue
        started = datetime.fromtimestamp(boot + start / hz, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        jobs.append({"pid": pid, "command": command, "started": started})
        if len(jobs) == MAX_JOBS:
            break
    return jobs
