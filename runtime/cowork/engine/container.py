"""Hardened container start and removal."""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import docker.errors
from docker.types import Mount

from .. import settings
from ..errors import SandboxError
from ..formats import AGENT_GID, AGENT_UID, RUN_DIR
from ..spec.models import Limits
from . import labels as L
from .client import get_client

log = logging.getLogger(__name__)

#: Capabilities the in-container server keeps: switch to the agent user (SETUID/SETGID),
#: hand seeded files to root or the agent (CHOWN), stop the agent's runaway commands
#: (KILL), and read any workspace file when exporting it (DAC_READ_SEARCH). Agent
#: processes run as uid 1000 and hold none of them.
SERVER_CAPS = ["SETUID", "SETGID", "CHOWN", "KILL", "DAC_READ_SEARCH"]


def run_root() -> Path:
    """Host folder holding one bind-mounted run dir per sandbox (kept short: socket paths max 108 bytes)."""
    root = settings.get().run_root
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    return root


@dataclass(frozen=True)
class Started:
    """A started container and its host-side run dir."""

    container_id: str
    name: str
    run_dir: Path


def start_container(image: str, task_id: str, limits: Limits, *, keep: bool = False,
                    runtime: str | None = None, environment: dict[str, str] | None = None) -> Started:
    """Start a hardened sandbox container.

    Network none, all capabilities dropped but SERVER_CAPS, no-new-privileges,
    read-only root filesystem with tmpfs /workspace and /tmp, memory/pids/cpu limits,
    an init process, owner labels, and the run dir bind-mounted at /run/cowork.

    Raises:
        SandboxError: when Docker refuses to create or start it.
    """
    short = uuid.uuid4().hex[:12]
    name = f"cowork-{task_id[:40]}-{short}"
    run_dir = run_root() / short
    run_dir.mkdir(mode=0o700)
    disk = f"{limits.disk_mb}m"
    try:
        c = get_client().containers.run(
            image,
            name=name,
            detach=True,
            network_mode="none",
            cap_drop=["ALL"],
            cap_add=SERVER_CAPS,
            security_opt=["no-new-privileges:true"],
            read_only=True,
            tmpfs={
                "/workspace": f"rw,exec,nosuid,nodev,size={disk},mode=0755,uid={AGENT_UID},gid={AGENT_GID}",
                "/tmp": f"rw,exec,nosuid,nodev,size={disk},mode=1777",
            },
            mounts=[Mount(target=RUN_DIR, source=str(run_dir), type="bind", read_only=False)],
            mem_limit=f"{limits.memory_mb}m",
            memswap_limit=f"{limits.memory_mb}m",
            pids_limit=limits.pids,
            nano_cpus=int(limits.cpus * 1e9),
            init=True,
            user="0:0",
            labels=L.owner_labels(task_id, str(run_dir), keep=keep),
            runtime=runtime,
            environment=environment,
            ipc_mode="none",  # no /dev/shm: nothing writable outside /workspace and /tmp
        )
    except docker.errors.DockerException as exc:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise SandboxError(f"could not start a sandbox from {image}: {exc}") from exc
    log.info("started %s (%s)", c.short_id, name)
    return Started(c.id, name, run_dir)


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
