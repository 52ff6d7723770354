"""The ``cowork`` command, on Typer with Rich output.

``app`` (the commands and their help), ``exits`` (the exit codes), ``progress`` (bar or
plain lines), ``output`` (escaped text), ``preflight`` (model endpoints checked before the
first episode), ``episodes`` (run and rollout) and ``commands`` (the rest).
"""

from .app import app, build_command, main

__all__ = ["app", "build_command", "main"]
