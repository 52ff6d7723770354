"""The Docker and gVisor sandbox backends: hardened containers under runc or ``runsc``."""

from __future__ import annotations

from pathlib import Path

import docker.errors

from ..errors import CoworkError, SandboxError
from ..sandbox.backend import ContainerState, Started
from ..spec.models import Limits
from .client import get_client
from .container import container_logs, remove_container, start_container


class DockerBackend:
    """Sandboxes as hardened Docker containers, optionally under another OCI runtime.

    Args:
        runtime: The Docker runtime name (None: the daemon's default, runc).
    """

    name = "docker"

    def __init__(self, runtime: str | None = None):
        self.runtime = runtime

    def start(self, image: str, task_id: str, limits: Limits, *, keep: bool = False,
              environment: dict[str, str] | None = None, task_bundle: str | Path | None = None) -> Started:
        """Start a hardened container from ``image`` under this runtime (the task layer mounted from
        ``task_bundle`` when given); returns its id, name and run dir."""
        return start_container(image, task_id, limits, keep=keep, runtime=self.runtime, environment=environment,
                               task_bundle=task_bundle)

    def inspect(self, container_id: str) -> ContainerState:
        """The container's state (``exists=False`` once it is gone).

        Raises:
            SandboxError: Docker did not answer.
        """
        try:
            c = get_client().containers.get(container_id)
        except docker.errors.NotFound:
            return ContainerState(exists=False, detail="the container no longer exists")
        except (docker.errors.DockerException, CoworkError, OSError) as exc:
            raise SandboxError(f"Docker did not answer while inspecting {container_id[:12]}: {exc}") from exc
        st = c.attrs.get("State", {})
        return ContainerState(exists=True, running=bool(st.get("Running")), oom_killed=bool(st.get("OOMKilled")),
                              exit_code=st.get("ExitCode"), detail=str(st.get("Status", "")))

    def logs(self, container_id: str, tail: int = 50) -> str:
        """The container's last ``tail`` output lines (for error messages)."""
        return container_logs(container_id, tail)

    def remove(self, container_id: str, run_dir: str | Path | None = None) -> None:
        """Remove the container and its run dir; missing ones are fine."""
        remove_container(container_id, run_dir)

    def exec_archive(self, container_id: str, path: str, limit_bytes: int) -> bytes | None:
        """A tar of ``path`` read by root inside the running container (hard links stored as
        files), at most ``limit_bytes``; None when the container is not running, the tar
        would be larger, or Docker fails."""
        try:
            c = get_client().containers.get(container_id)
            if c.status != "running":
                return None
            # Root reads everything; `--hard-dereference` stores every name of a hard link as
            # a regular file, and the limit keeps a sparse or huge file from reaching the host.
            res = c.exec_run(["tar", "-C", path, "--hard-dereference", "-cf", "-", "."], user="0:0",
                             stream=True, demux=False)
            out, size = [], 0
            for chunk in res.output:
                size += len(chunk)
                if size > limit_bytes:
                    return None
                out.append(chunk)
            return b"".join(out)
        except (docker.errors.DockerException, CoworkError, OSError):
            return None


class GVisorBackend(DockerBackend):
    """Docker with gVisor's ``runsc`` runtime: the agent's system calls meet a user-space
    kernel, not the host's. The daemon must know the runtime (``/etc/docker/daemon.json``:
    ``{"runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none",
    "--host-uds=create"]}}}``, the last so that the server can create its MCP and control
    sockets in the bind-mounted run dir;
    ``scripts/setup.sh`` writes it when ``runsc`` is installed)."""

    name = "gvisor"

    def __init__(self, runtime: str = "runsc"):
        super().__init__(runtime=runtime)
