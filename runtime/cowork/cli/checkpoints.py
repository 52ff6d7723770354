"""``cowork checkpoint`` / ``cowork restore`` (to be written, issue 11)."""

from __future__ import annotations

from ..errors import CoworkError


def checkpoint(ref: str, *, as_json: bool) -> int:
    raise CoworkError("cowork checkpoint is not available yet")


def restore(ref: str, snapshot: str, *, as_json: bool) -> int:
    raise CoworkError("cowork restore is not available yet")
