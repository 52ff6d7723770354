"""The companion container that runs a task's own HTTP services, off the agent's network.

A sandbox container has one network namespace, and every process in it, the agent's too, can
connect to any loopback port there; without CAP_SYS_ADMIN nothing inside can make another.
So a task's HTTP services (spec ``http_services``) run in a companion container started beside
the sandbox from the same image: network ``none`` (a loopback of its own), every capability
dropped, ``no-new-privileges``, read-only root, a small tmpfs ``/tmp``, memory and pids limits,
an init process, the owner labels of its sandbox (so ``cowork gc`` and the reaper remove it
with it). Its supervisor (server.http_supervisor) starts the services as root from the task
layer, where their code and fixtures are root's alone, and forwards each to a unix socket in
``<run dir>/http``: the one folder the two containers share, inside the sandbox's root-only
run dir, where only the sandbox's server reaches it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from pathlib import Path
from typing import Any

import docker.errors
from docker.types import Mount

from ..errors import SandboxError
from ..formats import TASK_DIR
from . import labels as L
from .client import get_client

log = logging.getLogger(__name__)

#: Label marking a companion container, and the one naming the sandbox it serves.
COMPANION = L.PREFIX + "companion"
COMPANION_OF = L.PREFIX + "companion_of"
#: The shared folder, under the sandbox's run dir, and where the companion sees it.
HTTP_DIR = "http"
MOUNT = "/run/cowork-http"
#: The companion's own memory beside its services (the supervisor, and its /tmp).
RESERVE_MB = 64
TMP_MB = 64
#: Seconds the companion's container and Python may take to start, beside the services' own.
START_GRACE_S = 30.0


def companion_name(sandbox_name: str) -> str:
    """The companion container's name: its sandbox's, with ``-http``."""
    return f"{sandbox_name}-http"


def start_companion(image: str, sandbox_name: str, run_dir: Path, spec: Any, *, keep: bool = False,
                    runtime: str | None = None, task_bundle: str | Path | None = None) -> str:
    """Start the companion of the sandbox ``sandbox_name`` (run dir ``run_dir``) for ``spec``'s
    HTTP services; returns its container id.

    Raises:
        SandboxError: Docker refused to create or start it.
    """
    folder = Path(run_dir) / HTTP_DIR
    folder.mkdir(mode=0o700, exist_ok=True)
    memory = f"{sum(s.memory_mb for s in spec.http_services) + RESERVE_MB + TMP_MB}m"
    client = get_client()
    name = companion_name(sandbox_name)
    cid = None
    try:
        host_config = client.api.create_host_config(
            network_mode="none", cap_drop=["ALL"], security_opt=["no-new-privileges:true"], read_only=True,
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={TMP_MB}m,mode=1777"},
            mounts=[Mount(target=MOUNT, source=str(folder), type="bind", read_only=False),
                    *([Mount(target=TASK_DIR, source=str(task_bundle), type="bind", read_only=True)]
                      if task_bundle is not None else [])],
            mem_limit=memory, memswap_limit=memory, pids_limit=256 + 64 * len(spec.http_services),
            nano_cpus=int(spec.limits.cpus * 1e9), init=True, runtime=runtime, ipc_mode="none",
        )
        labels = {**L.owner_labels(spec.id, str(run_dir), keep=keep), COMPANION: "http", COMPANION_OF: sandbox_name}
        cid = client.api.create_container(
            image, name=name, detach=True, user="0:0", host_config=host_config, labels=labels,
            command=["/opt/cowork/venv/bin/python", "-m", "cowork.server.http_supervisor"],
            environment={"COWORK_HTTP_DIR": MOUNT},
        )["Id"]
        client.api.start(cid)
    except docker.errors.DockerException as exc:
        if cid is not None:
            with contextlib.suppress(docker.errors.DockerException):
                client.api.remove_container(cid, force=True, v=True)
        raise SandboxError(f"could not start the HTTP services' container for {sandbox_name}: {exc}") from exc
    log.info("started %s (%s)", cid[:12], name)
    return cid


def read_status(run_dir: Path) -> dict[str, Any] | None:
    """The companion's ``status.json``, or None before it wrote one."""
    try:
        return json.loads((Path(run_dir) / HTTP_DIR / "status.json").read_text())
    except (OSError, ValueError):
        return None


def describe_failure(status: dict[str, Any]) -> str:
    """Each failed service with why, and the end of its output."""
    lines = []
    for name, entry in sorted((status.get("services") or {}).items()):
        if entry.get("state") == "ready":
            continue
        lines.append(f"http service {name!r}: {entry.get('state')}: {entry.get('detail', '')}")
        out = (entry.get("output") or "").strip()
        if out:
            lines.append("  its output ends:\n    " + "\n    ".join(out.splitlines()[-15:]))
    return "\n".join(lines) or str(status.get("error") or "not ready")


def wait_ready(run_dir: Path, spec: Any, container: str, timeout: float | None = None) -> dict[str, Any]:
    """Wait (blocking) until every service is ready; returns the status.

    Raises:
        SandboxError: a service failed (its reason and output in the message), the companion
            exited, or it was not ready in time.
    """
    limit = timeout if timeout is not None else max(s.ready_timeout_s for s in spec.http_services) + START_GRACE_S
    deadline = time.monotonic() + limit
    checked = time.monotonic()
    while True:
        status = read_status(run_dir)
        if status is not None and status.get("ready"):
            return status
        if status is not None and status.get("error"):
            raise SandboxError(f"task {spec.id}: the HTTP services did not start:\n{describe_failure(status)}")
        if time.monotonic() - checked > 1.0:  # a companion that died writes no status: ask Docker
            checked = time.monotonic()
            try:
                c = get_client().containers.get(container)
                if c.status not in ("created", "running"):
                    logs = c.logs(tail=30).decode(errors="replace")
                    raise SandboxError(f"task {spec.id}: the HTTP services' container stopped ({c.status}):\n{logs}")
            except docker.errors.NotFound:
                raise SandboxError(f"task {spec.id}: the HTTP services' container disappeared") from None
        if time.monotonic() > deadline:
            detail = describe_failure(status) if status else "no status written"
            raise SandboxError(f"task {spec.id}: the HTTP services were not ready within {limit:g}s:\n{detail}")
        time.sleep(0.05)


def remove_companion(sandbox_name: str) -> None:
    """Remove the companion of ``sandbox_name`` (missing is fine)."""
    try:
        get_client().containers.get(companion_name(sandbox_name)).remove(force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: removal already in progress
            raise SandboxError(f"could not remove the HTTP services' container of {sandbox_name}: {exc}") from exc
