"""Hardened container start and removal."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
import stat
import time
import uuid
from pathlib import Path

import docker.errors
from docker.types import Mount, Ulimit

from .. import settings
from ..errors import SandboxError
from ..formats import AGENT_GID, AGENT_UID, RUN_DIR, TASK_DIR
from ..sandbox.backend import Started
from ..spec.models import Limits
from . import labels as L
from .client import get_client

log = logging.getLogger(__name__)

#: Capabilities the in-container server keeps: switch to the agent user (SETUID/SETGID),
#: hand seeded files to root or the agent (CHOWN), stop the agent's runaway commands
#: (KILL), and read any workspace file when exporting it (DAC_READ_SEARCH). Agent
#: processes run as uid 1000 and hold none of them.
SERVER_CAPS = ["SETUID", "SETGID", "CHOWN", "KILL", "DAC_READ_SEARCH"]

#: Memory the container gets on top of the agent's ``memory_mb`` and the two tmpfs mounts,
#: for the server. Measured: the server's RSS is 79-89 MiB after an oracle run and an
#: export (the cgroup's peak 66-71 MiB), so 128 MiB leaves room for an export and large
#: tool outputs.
SERVER_RESERVE_MB = 128
# Why the server keeps oom_score_adj 0 rather than -1000: agent processes fork from the server
# and inherit its value. The shell tool raises them to +1000 (server/agent_env.sh), so the OOM
# killer picks them first whatever their size; but a process may lower its own value back to
# the floor it inherited (oom_score_adj_min) without privilege, and only a holder of
# CAP_SYS_RESOURCE can pin that floor. A server at -1000 would hand the agent a floor of -1000,
# and agent and server all at -1000 leave the OOM killer no victim: the cgroup stalls, server
# included. -1000 therefore needs CAP_SYS_RESOURCE for the server *and* agent commands raised by
# root before it drops to the agent (`choom -n 1000 -- setpriv ...`); Docker hosts whose daemon
# lacks the capability (this project's CI) refuse the first.
#: Inodes per MiB of each tmpfs. Inodes and dentries are kernel memory charged to the
#: container (~1 KiB each) and cannot be reclaimed while the files exist, so their number is
#: bounded too: 256 per MiB (one per 4 KiB page, the size of the smallest non-empty file).
INODES_PER_MB = 256
INODE_MB_PER_MB = 0.25  # 256 inodes x ~1 KiB of slab, per MiB of tmpfs

#: Docker's default masked paths (moby oci/defaults.go); setting MaskedPaths replaces them.
DOCKER_MASKED = ["/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys",
                 "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
                 "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap"]
#: Host facts a sandbox has no use for: the kernel command line (boot secrets, the host's
#: set-up), kernel symbols and modules, the host's disks and its memory layout.
#: /proc/meminfo is replaced instead (a file with the container's figures), because
#: free, ps and language runtimes read it. What stays visible (sysinfo(2), /proc/self/mountinfo,
#: /proc/cpuinfo, /proc/stat) is listed in the README's lock-down section.
EXTRA_MASKED = ["/proc/cmdline", "/proc/kallsyms", "/proc/modules", "/proc/vmallocinfo", "/proc/zoneinfo",
                "/proc/buddyinfo", "/proc/pagetypeinfo", "/proc/iomem", "/proc/ioports", "/proc/diskstats",
                "/proc/partitions", "/proc/swaps", "/proc/vmstat", "/proc/config.gz", "/proc/slabinfo"]
MASKED_PATHS = DOCKER_MASKED + EXTRA_MASKED
READONLY_PATHS = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]


def run_root() -> Path:
    """Host folder holding one bind-mounted run dir per sandbox (kept short: socket paths max 108 bytes).

    Made with mode 0700 when missing. An existing one must be a real folder (not a
    symlink), owned by this user and closed to group and others: the run dirs inside hold
    the evidence and the sockets that drive every sandbox, and their paths are predictable.

    Raises:
        SandboxError: when the folder is a symlink, not a folder, owned by someone else, or
            open to group or others (the message names the path and the fix).
    """
    root = settings.get().run_root
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        root.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise SandboxError(f"cannot create the run root {root}: {exc}; set COWORK_RUN_ROOT to a folder you own") from exc
    st = root.lstat()
    fix = (f"remove it (or set COWORK_RUN_ROOT to another path) and cowork makes it afresh with mode 0700 "
           f"owned by uid {os.getuid()}")
    if stat.S_ISLNK(st.st_mode):
        raise SandboxError(f"the run root {root} is a symlink; {fix}")
    if not stat.S_ISDIR(st.st_mode):
        raise SandboxError(f"the run root {root} is not a folder; {fix}")
    if st.st_uid != os.getuid():
        raise SandboxError(f"the run root {root} is owned by uid {st.st_uid}, not by this user "
                           f"(uid {os.getuid()}); {fix}")
    if st.st_mode & 0o077:
        raise SandboxError(f"the run root {root} has mode {stat.S_IMODE(st.st_mode):04o}, open to group or "
                           f"others; `chmod 0700 {root}`, or {fix}")
    return root


def container_memory_mb(limits: Limits) -> int:
    """The container's memory limit: the agent's processes, both tmpfs mounts with their
    inodes (tmpfs pages are charged to the container), and the server's reserve."""
    tmpfs = 2 * (limits.disk_mb + math.ceil(limits.disk_mb * INODE_MB_PER_MB))
    return limits.memory_mb + tmpfs + SERVER_RESERVE_MB


def _meminfo(limits: Limits) -> str:
    """A /proc/meminfo with the container's figures instead of the host's (static: a
    snapshot of an empty sandbox, for tools that size themselves by it)."""
    total = limits.memory_mb * 1024
    lines = [("MemTotal", total), ("MemFree", total), ("MemAvailable", total), ("Buffers", 0), ("Cached", 0),
             ("SwapCached", 0), ("Active", 0), ("Inactive", 0), ("Shmem", 0), ("SReclaimable", 0),
             ("SwapTotal", 0), ("SwapFree", 0)]
    return "".join(f"{k + ':':<16}{v:>8} kB\n" for k, v in lines)


def start_container(image: str, task_id: str, limits: Limits, *, keep: bool = False,
                    runtime: str | None = None, environment: dict[str, str] | None = None,
                    task_bundle: str | Path | None = None) -> Started:
    """Start a hardened sandbox container.

    Network none, all capabilities dropped but SERVER_CAPS, no-new-privileges,
    read-only root filesystem with tmpfs /workspace and /tmp, memory/pids/cpu limits
    (memory: see :func:`container_memory_mb`), bounded tmpfs inodes, host facts in /proc
    masked, an init process, owner labels, and the run dir bind-mounted at /run/cowork.
    ``task_bundle``: a task layer written as a folder (``images.write_task_bundle``), mounted
    read-only at the task folder instead of baked into ``image``.

    Raises:
        SandboxError: when Docker refuses to create or start it, or the run root is unsafe.
    """
    short = uuid.uuid4().hex[:12]
    name = f"cowork-{task_id[:40]}-{short}"
    run_dir = run_root() / short
    run_dir.mkdir(mode=0o700)
    meminfo = run_dir / "meminfo"
    meminfo.write_text(_meminfo(limits))
    meminfo.chmod(0o444)
    disk = f"{limits.disk_mb}m"
    inodes = max(4096, limits.disk_mb * INODES_PER_MB)
    memory = f"{container_memory_mb(limits)}m"
    client = get_client()
    cid = None
    try:
        host_config = client.api.create_host_config(
            network_mode="none",
            cap_drop=["ALL"],
            cap_add=SERVER_CAPS,
            security_opt=["no-new-privileges:true"],
            read_only=True,
            tmpfs={
                "/workspace": f"rw,exec,nosuid,nodev,size={disk},nr_inodes={inodes},mode=0755,"
                              f"uid={AGENT_UID},gid={AGENT_GID}",
                "/tmp": f"rw,exec,nosuid,nodev,size={disk},nr_inodes={inodes},mode=1777",
            },
            mounts=[Mount(target=RUN_DIR, source=str(run_dir), type="bind", read_only=False),
                    Mount(target="/proc/meminfo", source=str(meminfo), type="bind", read_only=True),
                    *([Mount(target=TASK_DIR, source=str(task_bundle), type="bind", read_only=True)]
                      if task_bundle is not None else [])],
            mem_limit=memory,
            memswap_limit=memory,
            pids_limit=limits.pids,
            nano_cpus=int(limits.cpus * 1e9),
            init=True,
            runtime=runtime,
            ipc_mode="none",  # no /dev/shm: nothing writable outside /workspace and /tmp
            # No POSIX message queues (a queue would outlive the agent's processes, and the
            # per-user byte quota is shared by every sandbox's uid 1000 on the host).
            ulimits=[Ulimit(name="msgqueue", soft=0, hard=0)],
            # No TIME_WAIT sockets: ports the agent chose would outlive its processes for a
            # minute (a channel to the next episode of a pooled sandbox). runc only: gVisor's
            # network stack takes no sysctls (there a leftover socket fails the reset's check).
            sysctls={"net.ipv4.tcp_max_tw_buckets": "0"} if runtime in (None, "runc") else None,
        )
        # Not among docker-py's keyword arguments; the Engine API takes them (API >= 1.31).
        host_config["MaskedPaths"] = MASKED_PATHS
        host_config["ReadonlyPaths"] = READONLY_PATHS
        cid = client.api.create_container(
            image, name=name, detach=True, user="0:0", host_config=host_config,
            labels=L.owner_labels(task_id, str(run_dir), keep=keep), environment=environment,
        )["Id"]
        client.api.start(cid)
    except docker.errors.DockerException as exc:
        if cid is not None:
            with contextlib.suppress(docker.errors.DockerException):
                client.api.remove_container(cid, force=True, v=True)
        shutil.rmtree(run_dir, ignore_errors=True)
        raise SandboxError(f"could not start a sandbox from {image}: {exc}") from exc
    log.info("started %s (%s)", cid[:12], name)
    return Started(cid, name, run_dir)


def container_logs(container_id: str, tail: int = 50) -> str:
    """The last lines of a container's output, or a note why there are none."""
    try:
        return get_client().containers.get(container_id).logs(tail=tail).decode(errors="replace")
    except docker.errors.DockerException as exc:
        return f"<no logs: {exc}>"


def remove_container(container_id: str, run_dir: str | Path | None = None) -> None:
    """Remove a container (forcefully) and its run dir; missing ones are fine."""
    t0 = time.monotonic()
    try:
        get_client().containers.get(container_id).remove(force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: removal already in progress
            raise SandboxError(f"could not remove container {container_id[:12]}: {exc}") from exc
    # Only folders this runtime made: a label is data, and data is not trusted with rm -rf.
    if run_dir and Path(run_dir).resolve().parent == run_root().resolve():
        shutil.rmtree(run_dir, ignore_errors=True)
    log.info("removed %s in %.2fs", container_id[:12], time.monotonic() - t0)
