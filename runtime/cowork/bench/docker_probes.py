"""Docker-side probes of the benchmark: cgroup memory and CPU, exec and run baselines, leftover sweep.

Every function here blocks (docker-py, file reads); callers run them with ``in_thread``.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from ..engine import labels as L
from ..engine.client import get_client
from ..engine.container import remove_container

log = logging.getLogger(__name__)

MIB = 1024 * 1024
_CGROUP_V1 = Path("/sys/fs/cgroup/memory/docker")
_CPUACCT_V1 = Path("/sys/fs/cgroup/cpuacct/docker")


def memory(container_id: str) -> dict[str, Any]:
    """Memory of one container, in bytes: usage, working set (usage - inactive file), rss, cache.

    Read from the cgroup v1 files when this process can see them (cheap), else from the
    Docker stats API (one call, about a second each).
    """
    base = _CGROUP_V1 / container_id
    if (base / "memory.usage_in_bytes").exists():
        usage = int((base / "memory.usage_in_bytes").read_text())
        raw = dict(line.split() for line in (base / "memory.stat").read_text().splitlines())
        stat = {k: int(v) for k, v in raw.items()}
        source = f"cgroup v1 {_CGROUP_V1}/<id>/memory.usage_in_bytes and memory.stat"
    else:
        ms = get_client().containers.get(container_id).stats(stream=False).get("memory_stats", {})
        usage, stat = int(ms.get("usage", 0)), {k: int(v) for k, v in (ms.get("stats") or {}).items()}
        source = "docker stats API (container.stats(stream=False)) memory_stats"
    inactive = stat.get("total_inactive_file", stat.get("inactive_file", 0))
    return {"usage": usage, "working_set": usage - inactive, "inactive_file": inactive,
            "rss": stat.get("total_rss", stat.get("anon", 0)), "cache": stat.get("total_cache", stat.get("file", 0)),
            "source": source}


def cpu_seconds(container_ids: list[str]) -> float | None:
    """CPU time the containers used so far (cgroup v1 ``cpuacct.usage``), in seconds; None when
    those files are not visible to this process."""
    total = 0
    for cid in container_ids:
        try:
            total += int((_CPUACCT_V1 / cid / "cpuacct.usage").read_text())
        except (OSError, ValueError):
            return None
    return total / 1e9


def exec_true(container_id: str, n: int) -> list[float]:
    """``n`` docker exec round trips of ``true`` (docker SDK exec_run), in ms."""
    c = get_client().containers.get(container_id)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        res = c.exec_run(["true"])
        out.append((time.perf_counter() - t0) * 1000)
        if res.exit_code != 0:
            raise RuntimeError(f"docker exec true exited {res.exit_code}: {res.output!r}")
    return out


def run_true(image: str, n: int) -> tuple[list[float], str]:
    """``n`` runs of ``docker run --rm IMAGE true`` (the CLI when present, else the SDK), in s.

    Each run carries this process's owner labels, so the reaper knows it as ours.
    """
    labels = L.owner_labels("bench-docker-run", "")
    cli = shutil.which("docker")
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        if cli:
            args = [cli, "run", "--rm", "--network", "none"]
            for k, v in labels.items():
                args += ["--label", f"{k}={v}"]
            proc = subprocess.run(args + [image, "true"], capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"docker run --rm {image} true failed: {proc.stderr.strip()}")
        else:
            get_client().containers.run(image, ["true"], remove=True, network_mode="none", labels=labels)
        out.append(time.perf_counter() - t0)
    return out, ("docker CLI" if cli else "docker SDK containers.run(remove=True)")


def session_containers() -> dict[str, Any]:
    """Containers (running or not) labelled with this process's session, by id."""
    flt = {"label": [f"{L.MANAGED}=true", f"{L.SESSION}={L.SESSION_ID}"]}
    return {c.id: c for c in get_client().containers.list(all=True, filters=flt)}


def sweep(before: set[str], settle_s: float = 0.0) -> list[str]:
    """Remove this session's containers that were not there at ``before``; returns their names.

    With ``settle_s`` (after an interrupt) it keeps sweeping until nothing new has shown up
    for that long: a start cancelled on the host may still finish in a Docker thread.
    """
    removed: list[str] = []
    quiet_since = time.monotonic()
    while True:
        found = [c for cid, c in session_containers().items() if cid not in before]
        for c in found:
            try:
                remove_container(c.id, (c.labels or {}).get(L.RUN_DIR))
                removed.append(c.name)
            except Exception as exc:  # keep sweeping the others
                log.warning("could not remove %s: %s", c.name, exc)
        if found:
            quiet_since = time.monotonic()
        if time.monotonic() - quiet_since >= settle_s:
            return removed
        time.sleep(0.5)
