"""Host-side settings: one object, read from ``COWORK_*`` environment variables.

Every knob the host side reads from the environment lives here, with its default and what
it does; ``cowork.settings.get()`` returns the current values (read once, then cached;
``reload()`` re-reads them, for tests that change the environment). The in-container server
does not use this module: it gets its configuration from the task image and the run dir.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

_PROJECT_DIR = Path(__file__).resolve().parent.parent.parent


class Settings(BaseSettings):
    """The host's settings; each field is read from ``COWORK_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="COWORK_", extra="ignore", frozen=True)

    run_root: Path = Field(default_factory=lambda: Path(f"/tmp/cowork-{os.getuid()}"))
    """Folder holding one bind-mounted run dir per sandbox. Must be owned by this user with
    mode 0700 (checked); kept short because unix socket paths are limited to 108 bytes."""
    cache: Path = Field(default_factory=lambda: Path.home() / ".cache" / "cowork")
    """Wheelhouses and the LLM judge's answer cache."""
    home: Path = _PROJECT_DIR
    """The cowork source checkout (Dockerfile, images/): needed to build images."""
    base_image: str = "cowork-base:bookworm-2"
    """Local base image to build the sandbox image on (made offline when missing; the tag
    names the package list, so a new list makes machines bootstrap a new base)."""
    max_starting: int = 0
    """Sandboxes starting at once per event loop (0: twice the cores)."""
    sandbox_backend: str = "docker"
    """Default sandbox backend (``docker`` or ``gvisor``; see ``cowork.sandbox.backend``)."""
    user_base_url: str | None = None
    """Endpoint of the model that simulates users (``--user-base-url`` wins; then
    ``$OPENAI_BASE_URL``)."""
    user_api_key: str | None = None
    """Key of that endpoint (then ``$OPENAI_API_KEY``)."""
    inspect_evidence: Path | None = None
    """Inspect AI: folder where ``cowork_scorer`` saves each sample's evidence bundle, with a
    ``results.jsonl`` line per sample (``cowork view`` / ``cowork grade`` read them); the
    scorer's and ``cowork_task``'s ``evidence_dir`` win. Unset: nothing is saved."""
    require_docker: bool = False
    """Tests: fail instead of skipping Docker tests when no daemon answers (CI sets it)."""


@lru_cache(maxsize=1)
def get() -> Settings:
    """The current settings (read from the environment once)."""
    return Settings()


def reload() -> Settings:
    """Re-read the environment (tests that change ``COWORK_*`` variables call this)."""
    get.cache_clear()
    return get()
