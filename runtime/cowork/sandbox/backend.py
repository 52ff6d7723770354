"""Where a sandbox runs: the backend interface and its registry.

A backend starts, inspects and removes one sandbox container for a task image; everything
above it (the MCP session, evidence, grading) is the same whatever runs the container. Two
ship with cowork: ``docker`` (runc, the default) and ``gvisor`` (Docker with the ``runsc``
runtime, a user-space kernel between the agent and the host). Others (a remote Docker host,
a cluster scheduler) register a factory under a name, in code with :func:`register_backend`
or from an installed package through the ``cowork.backends`` entry-point group; they are
imported only when first asked for.

Backend calls are blocking (the Docker SDK is synchronous); :class:`~cowork.sandbox.sandbox.Sandbox`
runs them in the engine's bounded thread pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module, metadata
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from ..errors import SandboxError
from ..spec.models import Limits


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
              environment: dict[str, str] | None = None, task_bundle: str | Path | None = None) -> Started:
        """Start a hardened container from ``image``; returns its id, name and run dir. With
        ``task_bundle`` (a folder from ``engine.images.write_task_bundle``) the task layer is
        mounted read-only at ``formats.TASK_DIR`` instead of being in the image; a backend that
        cannot mount one raises SandboxError."""
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


#: Backend name -> factory, or ``"module:attr"`` naming one (imported on first use, so this
#: interface module never loads Docker).
_FACTORIES: dict[str, Callable[[], SandboxBackend] | str] = {
    "docker": "cowork.engine.docker_backend:DockerBackend",
    "gvisor": "cowork.engine.docker_backend:GVisorBackend",
}
ENTRY_POINT_GROUP = "cowork.backends"


def register_backend(name: str, factory: Callable[[], SandboxBackend] | str) -> None:
    """Make ``factory`` (a callable, or ``"module:attr"`` naming one) the backend called ``name``."""
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
        from .. import settings

        backend = settings.get().sandbox_backend
    factory: Any = _FACTORIES.get(backend)
    if factory is None:
        eps = [ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == backend]
        if not eps:
            raise SandboxError(f"unknown sandbox backend {backend!r}; known: {', '.join(available_backends())}")
        factory = eps[0].load()
        _FACTORIES[backend] = factory
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = getattr(import_module(module), attr)
        _FACTORIES[backend] = factory
    return factory()
