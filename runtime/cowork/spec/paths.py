"""Workspace-relative paths in specs."""

from __future__ import annotations

import posixpath
from typing import Annotated

from pydantic import AfterValidator, Field


def workspace_path(value: str) -> str:
    """Normalise a workspace-relative path; reject absolute paths and ``..`` escapes."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a non-empty relative path")
    if value.startswith("/"):
        raise ValueError(f"path {value!r} is absolute; give it relative to the workspace")
    norm = posixpath.normpath(value)
    if norm == ".." or norm.startswith("../"):
        raise ValueError(f"path {value!r} escapes the workspace")
    return norm


#: A spec field holding a workspace-relative path, normalised (see :func:`workspace_path`).
WsPath = Annotated[str, AfterValidator(workspace_path), Field(description="Path relative to /workspace.")]
