"""``cowork serve`` and ``cowork up --http`` (to be written, issue 11)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import CoworkError


def issue_token(sb: Any) -> dict[str, Any]:
    raise CoworkError("cowork up --http is not available yet")


def describe(info: dict[str, Any]) -> str:
    return ""


def serve(*, host: str, port: int, certfile: Path | None, keyfile: Path | None) -> int:
    raise CoworkError("cowork serve is not available yet")
