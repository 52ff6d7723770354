"""The exception hierarchy: everything the runtime raises derives from CoworkError; and
:func:`require_extra`, the one guard in front of a package of an optional extra."""

from __future__ import annotations

import importlib
from types import ModuleType


class CoworkError(Exception):
    """Root of every error the runtime raises on purpose."""


class SpecError(CoworkError, ValueError):
    """A task spec is malformed; the message names file, line and field."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        #: One line per problem, each ``file:line: field: what was expected``.
        self.problems = problems or [message]


class NoSuchSandbox(CoworkError):
    """No cowork sandbox matches a reference (bad input: exit 2)."""


class DockerUnavailable(CoworkError, RuntimeError):
    """No Docker daemon answers."""


class ImageError(CoworkError, RuntimeError):
    """An image could not be found or built."""


class SandboxError(CoworkError, RuntimeError):
    """A sandbox failed to start, answer or stop."""


class SandboxStartTimeout(SandboxError, TimeoutError):
    """A sandbox did not become ready in time; the message carries its logs."""


class SandboxNotReady(SandboxError):
    """A sandbox's health check at the start of an episode failed (see ``Sandbox.begin_episode``
    with ``early``): an infrastructure failure, never the agent's (nothing of the episode ran)."""


class McpError(SandboxError):
    """A sandbox's MCP server failed a request: an HTTP error, or a JSON-RPC error (``rpc_code`` set)."""

    def __init__(self, message: str, rpc_code: int | None = None):
        super().__init__(message)
        #: The JSON-RPC error code; None when the transport itself failed.
        self.rpc_code = rpc_code


class ResetMismatch(SandboxError):
    """A reset did not bring the sandbox back to its pristine state; it must not be reused."""


class CheckpointError(SandboxError):
    """A checkpoint or restore failed; after a failed restore the sandbox must not be used."""


class EvidenceError(CoworkError, ValueError):
    """An evidence bundle is missing parts or cannot be read."""


class PolicyError(CoworkError, RuntimeError):
    """A policy (model backend or scripted agent) failed to produce an action."""


class EndpointUnavailable(PolicyError, ConnectionError):
    """A model endpoint (agent, judge, simulated user) cannot be reached, keeps failing
    (5xx, 429, timeouts) or refuses the key: the service's failure, not the model's answer."""


class ContextLengthExceeded(PolicyError):
    """The conversation no longer fits the model's context window (a server's 400 that says
    the prompt is too long, a prompt past the local model's length): the episode is
    ``truncated`` and graded on its evidence, not a failure of the endpoint."""


class ClusterUnavailable(CoworkError, ConnectionError):
    """A Ray cluster's address answers no connection (nothing listens there, or only where Ray
    does not connect): checked before ``ray.init``, which would retry for minutes."""


class GradingError(CoworkError, RuntimeError):
    """A check could not be judged (a plugin without a verdict, a result missing); never a pass."""


class UnsupportedTask(CoworkError, ValueError):
    """A trainer's episode contract cannot carry the task (a user who answers after the final
    reply, for one): refused up front, naming the task and why, instead of a silent 0."""


def require_extra(module: str, extra: str, needs: str, note: str = "",
                  error: type[Exception] = CoworkError) -> ModuleType:
    """Import ``module``, which comes with the optional extra ``extra``, or say how to install it.

    Args:
        module: The module to import (``"torch"``, ``"ray"``).
        extra: The extra of cowork-runtime that installs it.
        needs: What needs it, the start of the message (``"the hf backend needs the 'hf' extra"``).
        note: Said in brackets after the install command (what the extra holds, another way).
        error: The error to raise (a CoworkError subclass, or ImportError where a plugin
            loader expects one).

    Returns:
        The module.

    Raises:
        error: ``module`` cannot be imported; the message ends with the ``pip install`` line.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise error(f"{needs}: pip install 'cowork-runtime[{extra}]'" + (f" ({note})" if note else "")) from exc
