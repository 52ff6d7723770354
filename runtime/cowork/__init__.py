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
    "Sandbox": "sandbox.sandbox", "ToolResult": "sandbox.sandbox", "SandboxPool": "sandbox.pool",
    "SandboxBackend": "sandbox.backend", "get_backend": "sandbox.backend",
    "register_backend": "sandbox.backend", "available_backends": "sandbox.backend",
    "DockerBackend": "engine.docker_backend", "GVisorBackend": "engine.docker_backend",
    "RolloutRunner": "rollouts.runner", "RolloutResult": "rollouts.runner", "rollout": "rollouts.runner",
    "load_spec": "spec.loader", "LoadedSpec": "spec.loader", "TaskSpec": "spec.models",
    "run_task": "episode.run", "run_episode": "episode.run", "EpisodeResult": "episode.run",
    "Trajectory": "episode.trajectory", "Policy": "agents.base", "make_policy": "agents", "grade": "grading",
    "Grade": "grading", "CheckResult": "grading.grade", "Evidence": "evidence", "Settings": "settings",
    "CoworkError": "errors", "SpecError": "errors", "DockerUnavailable": "errors", "ImageError": "errors",
    "SandboxError": "errors", "SandboxNotReady": "errors", "SandboxStartTimeout": "errors", "McpError": "errors",
    "ResetMismatch": "errors", "CheckpointError": "errors", "EvidenceError": "errors",
    "PolicyError": "errors", "EndpointUnavailable": "errors", "ContextLengthExceeded": "errors", "GradingError": "errors",
    "ClusterUnavailable": "errors", "NoSuchSandbox": "errors", "UnsupportedTask": "errors",
}

#: Kept equal to _EXPORTS' keys (a test checks).
__all__ = ["CheckResult", "CheckpointError", "ClusterUnavailable", "ContextLengthExceeded", "CoworkError", "DockerBackend", "DockerUnavailable",
           "EndpointUnavailable", "EpisodeResult", "Evidence", "EvidenceError", "GVisorBackend", "Grade",
           "GradingError", "ImageError", "LoadedSpec", "McpError", "NoSuchSandbox", "Policy", "PolicyError", "ResetMismatch",
           "RolloutResult", "RolloutRunner", "Sandbox", "SandboxBackend", "SandboxError", "SandboxNotReady",
           "SandboxPool", "SandboxStartTimeout", "Settings", "SpecError", "TaskSpec", "ToolResult", "Trajectory",
           "UnsupportedTask", "available_backends", "get_backend", "grade", "load_spec", "make_policy", "register_backend",
           "rollout", "run_episode", "run_task"]


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
    from .agents import make_policy
    from .agents.base import Policy
    from .engine.docker_backend import DockerBackend, GVisorBackend
    from .episode.run import EpisodeResult, run_episode, run_task
    from .episode.trajectory import Trajectory
    from .errors import (
        CheckpointError,
        ClusterUnavailable,
        ContextLengthExceeded,
        CoworkError,
        DockerUnavailable,
        EndpointUnavailable,
        EvidenceError,
        GradingError,
        ImageError,
        McpError,
        NoSuchSandbox,
        PolicyError,
        ResetMismatch,
        SandboxError,
        SandboxNotReady,
        SandboxStartTimeout,
        SpecError,
        UnsupportedTask,
    )
    from .evidence import Evidence
    from .grading import Grade, grade
    from .grading.grade import CheckResult
    from .rollouts.runner import RolloutResult, RolloutRunner, rollout
    from .sandbox.backend import (
        SandboxBackend,
        available_backends,
        get_backend,
        register_backend,
    )
    from .sandbox.pool import SandboxPool
    from .sandbox.sandbox import Sandbox, ToolResult
    from .settings import Settings
    from .spec.loader import LoadedSpec, load_spec
    from .spec.models import TaskSpec
