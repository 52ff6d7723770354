"""Where a sandbox runs: the backend interface and its registry.

A backend starts, inspects and removes one sandbox container for a task image; everything
above it (the MCP session, evidence, grading) is the same whatever runs the container. Two
ship with cowork: ``docker`` (runc, the default) and ``gvisor`` (Docker with the ``runsc``
runtime, a user-space kernel between the agent and the host). Others (a remote Docker host,
a cluster scheduler) register a factory under a name, in code with :func:`register_backend`
or from an installed package through the ``cowork.backends`` entry-point group; they are
imported only when first asked for.

Backend calls are blocking (the Docker SDK is synchronous); :class:`~cowork.sandbox.Sandbox`
runs them in the engine's bounded thread pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from .errors import CoworkError, SandboxError
from .spec.models import Limits


@dataclass(frozen=True)
class Started:
    """A started sandbox container and its host-side run dir."""

    container_id: str
    name: str
    run_dir: Path


@dataclass(frozen=True)
class ContainerState:
    """What the backend knows of a sandbox container after something went wrong.

    ``exists`` False means the container is gone: nothing inside a sandbox can remove its
    own container, so that is an infrastructure failure. A container that still exists
    (running, or exited because the server inside died) failed from the inside.
    """

    exists: bool
    running: bool = False
    oom_killed: bool = False
    exit_code: int | None = None
    detail: str = ""


@runtime_checkable
class SandboxBackend(Protocol):
    """Runs sandbox containers. Every method blocks; errors are SandboxError."""

    name: str

    def start(self, image: str, task_id: str, limits: Limits, *, keep: bool = False,
              environment: dict[str, str] | None = None) -> Started:
        """Start a hardened container from ``image``; returns its id, name and run dir."""
        ...

    def inspect(self, container_id: str) -> ContainerState:
        """The container's state; raises SandboxError when the backend itself does not answer."""
        ...

    def logs(self, container_id: str, tail: int = 50) -> str:
        """The container's last output lines (for error messages)."""
        ...

    def remove(self, container_id: str, run_dir: str | Path | None = None) -> None:
        """Remove the container and its run dir; missing ones are fine."""
        ...

    def exec_archive(self, container_id: str, path: str, limit_bytes: int) -> bytes | None:
        """A tar of ``path`` read by root inside the running container, at most
        ``limit_bytes``; None when it cannot be had (container stopped, too big)."""
        ...


class DockerBackend:
    """Sandboxes as hardened Docker containers, optionally under another OCI runtime.

    Args:
        runtime: The Docker runtime name (None: the daemon's default, runc).
    """

    name = "docker"

    def __init__(self, runtime: str | None = None):
        self.runtime = runtime

    def start(self, image: str, task_id: str, limits: Limits, *, keep: bool = False,
              environment: dict[str, str] | None = None) -> Started:
        from .engine.container import start_container

        return start_container(image, task_id, limits, keep=keep, runtime=self.runtime, environment=environment)

    def inspect(self, container_id: str) -> ContainerState:
        import docker.errors

        from .engine.client import get_client

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
        from .engine.container import container_logs

        return container_logs(container_id, tail)

    def remove(self, container_id: str, run_dir: str | Path | None = None) -> None:
        from .engine.container import remove_container

        remove_container(container_id, run_dir)

    def exec_archive(self, container_id: str, path: str, limit_bytes: int) -> bytes | None:
        import docker.errors

        from .engine.client import get_client

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


_FACTORIES: dict[str, Callable[[], SandboxBackend]] = {"docker": DockerBackend, "gvisor": GVisorBackend}
ENTRY_POINT_GROUP = "cowork.backends"


def register_backend(name: str, factory: Callable[[], SandboxBackend]) -> None:
    """Make ``factory`` the backend called ``name`` (replacing any of that name)."""
    _FACTORIES[name] = factory


def available_backends() -> list[str]:
    """Names of the registered backends, installed entry points included."""
    names = set(_FACTORIES)
    names.update(ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP))
    return sorted(names)


def get_backend(backend: str | SandboxBackend | None = None) -> SandboxBackend:
    """Resolve a backend name (None: ``settings.sandbox_backend``) or pass an instance through.

    Raises:
        SandboxError: the name is unknown (the message lists the known ones).
    """
    if backend is not None and not isinstance(backend, str):
        return backend
    if backend is None:
        from . import settings

        backend = settings.get().sandbox_backend
    factory: Any = _FACTORIES.get(backend)
    if factory is None:
        eps = [ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == backend]
        if not eps:
            raise SandboxError(f"unknown sandbox backend {backend!r}; known: {', '.join(available_backends())}")
        factory = eps[0].load()
        _FACTORIES[backend] = factory
    return factory()
