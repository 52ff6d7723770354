"""Claw-Eval in cowork: import a checkout's tasks (``cowork import claw-eval``) and grade them
with their original ``grader.py``.

``import_checkout`` converts ``tasks/<id>/`` folders into cowork task folders; the other
modules here translate cowork's evidence into Claw-Eval's trace format for the original grader.
Imports are lazy, so the grader container's script can live in this package without pulling
cowork's dependencies in.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ImportReport", "import_checkout"]


def __getattr__(name: str) -> Any:
    if name == "import_checkout":
        from .importer import import_checkout

        return import_checkout
    if name == "ImportReport":
        from .report import ImportReport

        return ImportReport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
