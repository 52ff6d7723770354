"""Exit codes of ``cowork`` (one table, also in the README and ``cowork --help``), and the
"did you mean" of option values.

| code | meaning |
|---|---|
| 0 | everything ran and the command's question was answered, even if tasks failed |
| 1 | a requested gate failed: ``--fail-under`` not met, a spec invalid, nothing exported |
| 2 | bad input: a spec error, a bad argument, a missing file or folder |
| 3 | infrastructure: Docker, an image build, an episode ending ``infra_error``, a model, judge or user endpoint unreachable or refusing the key, a Ray cluster (``--ray``) unreachable |
| 130 | interrupted (Ctrl-C) |
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

import typer

from ..errors import (
    ClusterUnavailable,
    CoworkError,
    DockerUnavailable,
    EndpointUnavailable,
    ImageError,
    PolicyError,
    SandboxError,
)

OK = 0
GATE_FAILED = 1
BAD_INPUT = 2
INFRASTRUCTURE = 3
INTERRUPTED = 130

#: ``cowork --help``'s epilog: the same table as the README's.
EXIT_CODES_HELP = (
    "Exit codes: 0 all ran and the question was answered (even if tasks failed); "
    "1 a requested gate failed (--fail-under, an invalid spec, nothing exported); "
    "2 bad input (spec errors, bad arguments, missing files); "
    "3 infrastructure (Docker, image builds, infra_error episodes, a model, judge or user "
    "endpoint unreachable or refusing the key, a --ray cluster unreachable); 130 interrupted.")

#: Failures outside the task and the arguments: the machine, Docker, a model endpoint.
_INFRASTRUCTURE = (DockerUnavailable, ImageError, SandboxError, EndpointUnavailable, PolicyError, ClusterUnavailable)


def code_for(exc: CoworkError) -> int:
    """The exit code of an error that ended a command."""
    return INFRASTRUCTURE if isinstance(exc, _INFRASTRUCTURE) else BAD_INPUT


def did_you_mean(value: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest choice, or ``""`` when none is close."""
    close = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else ""


def choice(choices: Iterable[str]) -> dict[str, Any]:
    """``typer.Option`` keywords for a value from ``choices``: checked with a "did you mean"
    on a miss, completed in the shell, listed in ``--help`` (as the metavar)."""
    names = tuple(choices)

    def check(value: str | None) -> str | None:
        if value is None or value in names:
            return value
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(map(repr, names))}{did_you_mean(value, names)}")

    def complete(incomplete: str) -> list[str]:
        return [n for n in names if n.startswith(incomplete)]

    return {"callback": check, "autocompletion": complete, "metavar": "|".join(names)}
