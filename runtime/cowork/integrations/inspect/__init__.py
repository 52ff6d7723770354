"""Cowork sandboxes and tasks inside Inspect AI: ``sandbox="cowork"``, the cowork tools, and
:func:`cowork_task` (a folder of specs as an Inspect ``Task`` graded by cowork).

Loaded by Inspect through the ``inspect_ai`` entry point in ``pyproject.toml``, so once the
extra is installed (``pip install 'cowork-runtime[inspect]'``) any task can name the provider::

    Task(dataset=[Sample(input="...", sandbox=("cowork", "specs/fix-csv-report"))], ...)

and ``inspect eval`` finds it with no import in the task file. Checked against inspect-ai
0.3.285 (its ``SandboxEnvironment`` contract in ``inspect_ai/util/_sandbox/environment.py``).

What maps onto what:

- ``exec`` runs through the sandbox's ``shell`` tool, as the unprivileged agent user, audited
  like any agent call: Inspect's own tools (``bash()``, ``python()``) act for the agent, so what
  they do is the agent's and the grader sees it. A task without the ``shell`` tool refuses
  ``exec`` (PermissionError). Only the agent user exists (``user="root"`` raises
  ``SandboxUserUnsupportedError``, which is also how Inspect's root probe learns it).
- ``read_file`` / ``write_file`` move exact bytes through the shell (base64 in chunks under
  the task's output limit), or through the ``read_file`` / ``write_file`` tools when the task
  has no shell (text only; ``read_file`` then returns what the tool shows: newlines
  normalised, cut at the output limit).
- The MCP tools of the task are offered to the model by :func:`cowork_tools`, a tool source
  that lists the current sample's sandbox tools and calls them there.
- :func:`cowork_scorer` exports the evidence (audit log, workspace, service state) with a trace
  rebuilt from Inspect's messages and grades it with the spec's checks, as ``cowork run`` does;
  with ``evidence_dir`` (or ``$COWORK_INSPECT_EVIDENCE``) it saves each sample's bundle and
  results line there, for ``cowork view`` and ``cowork grade``.
- :func:`cowork_task` samples carry the user's request as their input; the spec's system prompt
  is put in a system message by Inspect's ``system_message`` solver, the task's first step.

Multi-turn specs (``user``, ``days``, ``events``) need cowork's episode driver for their later
turns; :func:`cowork_task` leaves them out with a warning.
"""

from __future__ import annotations

from ...errors import require_extra

# Only to say how to install it when it is missing (an ImportError, as any missing dependency).
require_extra("inspect_ai", "inspect", "cowork.integrations.inspect needs Inspect AI, which is not installed",
              "checked against inspect-ai 0.3.285", error=ImportError)

from .sandbox import SPEC_KEY, CoworkSandboxEnvironment
from .scoring import (
    completion,
    cowork_scorer,
    inspect_trace,
    inspect_trajectory,
    mean_score,
    pass_rate,
    robustness,
    safety,
    save_sample,
)
from .task import SYSTEM_KEY, CoworkTask, cowork_task, load_spec_for_sample
from .tools import CoworkTools, cowork_tools

__all__ = [
    "SPEC_KEY",
    "SYSTEM_KEY",
    "CoworkSandboxEnvironment",
    "CoworkTask",
    "CoworkTools",
    "completion",
    "cowork_scorer",
    "cowork_task",
    "cowork_tools",
    "inspect_trace",
    "inspect_trajectory",
    "load_spec_for_sample",
    "mean_score",
    "pass_rate",
    "robustness",
    "safety",
    "save_sample",
]
