"""cowork: containerized sandboxes with MCP-served work environments for AI coworker agents.

The public API, importable from here::

    from cowork import Sandbox, SandboxPool, load_spec, run_task, rollout, grade, Evidence

Names are resolved lazily on first use: this package is also loaded inside the sandbox
container, where only ``cowork.formats``, ``cowork.server`` and ``cowork.services`` exist,
and where start-up time is measured in milliseconds.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> module that defines it.
_EXPORTS = {
    "Sandbox": "sandbox", "ToolResult": "sandbox", "ResetMismatch": "sandbox",
    "SandboxPool": "pool",
    "RolloutRunner": "rollout", "RolloutResult": "rollout", "rollout": "rollout",
    "SandboxBackend": "backends", "DockerBackend": "backends", "GVisorBackend": "backends",
    "get_backend": "backends", "register_backend": "backends", "available_backends": "backends",
    "load_spec": "spec.loader", "LoadedSpec": "spec.loader", "TaskSpec": "spec.models",
    "run_task": "episode", "run_episode": "episode", "EpisodeResult": "episode", "Trajectory": "episode",
    "grade": "grading", "Grade": "grading", "CheckResult": "grading.grade",
    "Evidence": "evidence",
    "Settings": "settings",
    "CoworkError": "errors", "SpecError": "errors", "SandboxError": "errors", "ImageError": "errors",
    "DockerUnavailable": "errors", "EvidenceError": "errors", "PolicyError": "errors",
}

#: Kept equal to _EXPORTS' keys (a test checks).
__all__ = ["CheckResult", "CoworkError", "DockerBackend", "DockerUnavailable", "EpisodeResult",
           "Evidence", "EvidenceError", "GVisorBackend", "Grade", "ImageError", "LoadedSpec",
           "PolicyError", "ResetMismatch", "RolloutResult", "RolloutRunner", "Sandbox", "SandboxBackend",
           "SandboxPool", "SandboxError", "Settings", "SpecError",
           "TaskSpec", "ToolResult", "Trajectory", "available_backends", "get_backend", "grade",
           "load_spec", "register_backend", "rollout", "run_episode", "run_task"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cowork' has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:  # for type checkers and IDEs; never executed
    from .backends import (DockerBackend, GVisorBackend, SandboxBackend, available_backends, get_backend,
                           register_backend)
    from .episode import EpisodeResult, Trajectory, run_episode, run_task
    from .errors import (CoworkError, DockerUnavailable, EvidenceError, ImageError, PolicyError, SandboxError,
                         SpecError)
    from .evidence import Evidence
    from .grading import Grade, grade
    from .grading.grade import CheckResult
    from .pool import SandboxPool
    from .rollout import RolloutResult, RolloutRunner, rollout
    from .sandbox import ResetMismatch, Sandbox, ToolResult
    from .settings import Settings
    from .spec.loader import LoadedSpec, load_spec
    from .spec.models import TaskSpec
