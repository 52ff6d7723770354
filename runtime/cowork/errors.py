"""The exception hierarchy: everything the runtime raises derives from CoworkError."""

from __future__ import annotations


class CoworkError(Exception):
    """Root of every error the runtime raises on purpose."""


class SpecError(CoworkError, ValueError):
    """A task spec is malformed; the message names file, line and field."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        #: One line per problem, each ``file:line: field: what was expected``.
        self.problems = problems or [message]


class DockerUnavailable(CoworkError, RuntimeError):
    """No Docker daemon answers."""


class ImageError(CoworkError, RuntimeError):
    """An image could not be found or built."""


class SandboxError(CoworkError, RuntimeError):
    """A sandbox failed to start, answer or stop."""


class SandboxStartTimeout(SandboxError, TimeoutError):
    """A sandbox did not become ready in time; the message carries its logs."""


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


class GradingError(CoworkError, RuntimeError):
    """A check could not be judged (a plugin without a verdict, a result missing); never a pass."""
