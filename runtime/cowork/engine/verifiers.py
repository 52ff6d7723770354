"""Hidden verifiers: run a spec's verifier command in a fresh grader container.

The verifier files never enter the task image. After the episode, a new container (network
none, read-only root, no capabilities, the unprivileged ``nobody`` user, a clean PATH) gets a
read-only copy of the final workspace at /workspace and the verifier folder at /verifier.
Anything the agent planted in the workspace (``conftest.py``, ``sitecustomize.py``, ``.pth``
files, PATH shims, fake result files) is inert there: the command runs from /verifier with
PATH=/usr/bin:/bin, and Python started with ``-I`` ignores the workspace entirely.
"""

from __future__ import annotations

import io
import logging
import os
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import docker.errors
from docker.types import Mount

from ..formats import EXPORT_INCOMPLETE_MEMBER
from ..spec.checks import Verifier
from . import labels as L
from .client import get_client

log = logging.getLogger(__name__)

OUTPUT_LIMIT = 8192
CLEAN_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONPATH": "",
             "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": "/tmp"}


def _extract(workspace_tar: bytes, dest: Path) -> list[str]:
    """Unpack the agent's workspace safely: no absolute paths, no links leaving ``dest``,
    no device files. Members the filter refuses, or the host cannot write (a path too long
    under ``dest``, say), are skipped, not fatal; their names are returned, so the check can
    say the verifier saw an incomplete workspace instead of judging it."""

    def keep(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        try:
            m = tarfile.data_filter(member, path)
        except tarfile.FilterError:
            return None
        return m.replace(mode=(m.mode or 0) | 0o444 | (0o111 if m.isdir() else 0), uid=0, gid=0, uname="", gname="",
                         deep=False)

    skipped: list[str] = []
    with tarfile.open(fileobj=io.BytesIO(workspace_tar), mode="r:") as tar:
        for member in tar:
            if member.name == EXPORT_INCOMPLETE_MEMBER:
                skipped.append(member.name)
                continue
            try:
                tar.extract(member, dest, filter=keep)
            except (OSError, tarfile.TarError) as exc:
                skipped.append(f"{member.name[:200]} ({type(exc).__name__}: {str(exc)[:200]})")
    return skipped


def run_verifier(check: Verifier, spec_root: Path, workspace_tar: bytes, image: str) -> dict[str, Any]:
    """Run one hidden verifier; returns ``{exit_code, output, duration_s, skipped}``.

    A verifier that runs past its timeout is killed and reported with exit code 124;
    ``skipped`` names workspace members that could not be given to it.
    """
    client = get_client()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cowork-verify-") as tmp:
        ws = Path(tmp) / "workspace"
        ws.mkdir()
        skipped = _extract(workspace_tar, ws)
        os.chmod(ws, 0o755)
        container = client.containers.run(
            image, ["/bin/bash", "-c", check.command], detach=True,
            network_mode="none", read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges:true"],
            user="65534:65534", working_dir="/verifier", environment=CLEAN_ENV,
            mounts=[Mount("/workspace", str(ws), type="bind", read_only=True),
                    Mount("/verifier", str((spec_root / check.files).resolve()), type="bind", read_only=True)],
            tmpfs={"/tmp": "rw,nosuid,nodev,size=64m,mode=1777"},
            mem_limit="512m", pids_limit=256, init=True, ipc_mode="none",
            labels={**L.owner_labels("verifier", ""), L.TASK: "verifier"},
        )
        try:
            try:
                code = container.wait(timeout=check.timeout_s)["StatusCode"]
            except Exception:  # requests' read timeout: the verifier ran too long
                container.kill()
                code = 124
            output = container.logs().decode(errors="replace")
        finally:
            try:
                container.remove(force=True)
            except docker.errors.DockerException as exc:
                log.warning("could not remove verifier container %s: %s", container.short_id, exc)
    if len(output) > OUTPUT_LIMIT:
        output = "[...]\n" + output[-OUTPUT_LIMIT:]
    return {"exit_code": code, "output": output, "duration_s": round(time.monotonic() - t0, 3), "skipped": skipped}


def run_verifiers(spec, spec_root: Path, workspace_tar: bytes, image: str) -> dict[str, dict[str, Any]]:
    """Run every verifier check of ``spec``; results by check id.

    Never raises: a verifier that could not run is recorded as ``{"error": ...}``, which
    grades as not graded (never passed), and the episode keeps its other results.
    """
    out = {}
    for key in ("checks", "safety"):
        for i, c in enumerate(getattr(spec, key)):
            if c.type == "verifier":
                try:
                    out[spec.check_id(key, i)] = run_verifier(c, spec_root, workspace_tar, image)
                except Exception as exc:  # Docker, the host's disk: recorded, judged as not graded
                    log.warning("verifier %s could not run: %s", spec.check_id(key, i), exc)
                    out[spec.check_id(key, i)] = {"error": f"the verifier could not run: {type(exc).__name__}: {exc}"}
    return out
