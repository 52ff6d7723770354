"""Sandboxes that outlive the process that started them (``cowork up``): what ``up`` keeps for
later, attaching a handle to one, and the trace of a session an outside MCP client drove.

``cowork up`` starts a sandbox and exits; an MCP client (Claude Desktop, MCP Inspector, a
harness) then works in it. To grade that session later, another process needs what only the
starting process knew: the spec as it was loaded, where it came from, the image, and the
hashes of the seeded workspace (the baseline of every "what changed" rule). :func:`record_up`
writes them to ``live.json`` in the sandbox's host run dir (root-only inside the container,
mode 0600 on the host); :func:`attach` reads them back.

The host saw none of the conversation, so :func:`audit_trace` rebuilds a trace from the
audit log: every call the client made, in the order it made them, with its arguments and
what it got back. It holds no system prompt, no user message and no assistant text.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any, Protocol

from ..errors import CoworkError
from ..spec.loader import LoadedSpec, load_spec


class Attachable(Protocol):
    """What :func:`record_up` reads of a sandbox handle (a :class:`~cowork.sandbox.sandbox.Sandbox`)."""

    spec: Any
    loaded: LoadedSpec
    image: str
    run_dir: Path

    def _initial_hashes(self) -> dict[str, str] | None: ...

#: The record ``cowork up`` leaves in the run dir.
LIVE_FILE = "live.json"
LIVE_FORMAT = 1


# --------------------------------------------------------------------------- the record
def record_up(sb: Attachable) -> Path:
    """Write what grading this sandbox later needs into its run dir (``live.json``, 0600).

    Returns:
        The file written.
    """
    data = {"format": LIVE_FORMAT, "task": sb.spec.id, "spec": json.loads(spec_json(sb.spec)),
            "spec_path": str(sb.loaded.path.resolve()), "image": sb.image, "initial": sb._initial_hashes()}
    path = Path(sb.run_dir) / LIVE_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)  # a reader never sees half a record
    return path


def spec_json(spec: Any) -> str:
    """A TaskSpec as JSON that loads back as the same spec: only the fields the spec set.

    A full dump does not load back: every argument matcher then holds all of its fields,
    and a matcher must set exactly one (measured: 31 of the 36 specs in specs/ fail so).
    """
    return spec.model_dump_json(indent=1, exclude_unset=True)


def read_record(run_dir: str | Path) -> dict[str, Any] | None:
    """The record :func:`record_up` wrote, or None for a sandbox it never saw (started by
    ``Sandbox.start(keep=True)``, ``cowork run``, or before this record existed).

    Raises:
        CoworkError: the record exists but cannot be read.
    """
    path = Path(run_dir) / LIVE_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CoworkError(f"{path} is unreadable ({exc}); grade with --spec SPEC instead") from exc
    if not isinstance(data, dict) or data.get("format") != LIVE_FORMAT:
        raise CoworkError(f"{path} is not a record this cowork writes (format {data.get('format')!r}); "
                          "grade with --spec SPEC instead")
    return data


# --------------------------------------------------------------------------- what a container holds
def run_dir_of(container: Any) -> Path:
    """The host run dir of a cowork container (its RUN_DIR label)."""
    from ..engine import labels

    return Path((container.labels or {})[labels.RUN_DIR])


def loaded_spec(container: Any, saved: dict[str, Any] | None, spec: "LoadedSpec | str | os.PathLike | None") -> LoadedSpec:
    """The spec of a running sandbox: ``spec`` when given, else the one ``cowork up`` kept.

    Args:
        container: The sandbox's container (its labels name the task).
        saved: The record ``cowork up`` kept in the run dir (None: none).
        spec: A spec given by the caller: a loaded one, or a task folder / task.yaml.

    Raises:
        CoworkError: ``spec`` is another task's, or none was given and none was kept.
        SpecError: ``spec`` does not load.
    """
    from ..engine import labels
    from ..spec.models import TaskSpec

    task = (container.labels or {}).get(labels.TASK)
    if spec is not None:
        loaded = spec if isinstance(spec, LoadedSpec) else load_spec(spec)
        if task and loaded.spec.id != task:
            raise CoworkError(f"sandbox {container.name} runs task {task!r}, not {loaded.spec.id!r}; give its own spec")
        return loaded
    if saved is None:
        raise CoworkError(f"sandbox {container.name} was not started by `cowork up`, so no spec was kept with it; "
                          "give it: --spec SPEC")
    # The spec as it was when the sandbox started (the folder may have changed since); the
    # path is the folder's, for hidden verifier files.
    return LoadedSpec(TaskSpec.model_validate(saved["spec"]), Path(saved["spec_path"]))


def seed_hashes(backend: Any, container_id: str) -> dict[str, str] | None:
    """SHA-256 of each seeded workspace file, read from the task layer inside the container
    (what the sandbox really started from), or None when it cannot be read."""
    from ..formats import SEED_DIR

    data = backend.exec_archive(container_id, SEED_DIR, 256 << 20)
    if data is None:
        return None
    out: dict[str, str] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for m in tar.getmembers():
                fh = tar.extractfile(m) if m.isfile() else None
                if fh is not None:
                    out[m.name.removeprefix("./")] = hashlib.sha256(fh.read()).hexdigest()
    except tarfile.TarError:  # no seed folder (an empty workspace): tar's complaint, not an archive
        return None
    return out
