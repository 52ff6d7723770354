"""Images: the offline base, the sandbox image, and thin per-task layers tagged by content hash."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import docker.errors

from .. import settings
from ..errors import ImageError
from ..formats import TASK_DIR
from ..spec.loader import LoadedSpec
from .client import get_client

log = logging.getLogger(__name__)

BASE_IMAGE = settings.get().base_image
PUBLIC_BASE = "python:3.11-slim-bookworm"
SANDBOX_REPO = "cowork-sandbox"
TASK_REPO_PREFIX = "cowork-task-"
#: Packages the in-container server needs, and those a task's own HTTP services run with
#: (fastapi and uvicorn: Claw-Eval's mock services are FastAPI apps); pinned to the host's versions.
SERVER_PACKAGES = ("fastmcp", "google-re2", "fastapi", "uvicorn")
#: Office-file readers and writers (read_document, services/office_text.py), pinned to the
#: host's versions. The image installs them apart (/opt/cowork/office) and puts them on the
#: path of the server's Python and of the system python3 the agent runs, so the agent's own
#: code can read and write xlsx, docx and pdf files as well.
OFFICE_PACKAGES = ("openpyxl", "python-docx", "pypdf")

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # runtime/cowork/
PROJECT_DIR = PACKAGE_DIR.parent.parent
#: Parts of the package that run inside the container (hashed into the sandbox tag).
IN_CONTAINER = ("__init__.py", "formats.py", "toolhost", "server", "services")


def cache_dir() -> Path:
    """Where wheelhouses and other build inputs are cached."""
    root = settings.get().cache
    root.mkdir(parents=True, exist_ok=True)
    return root


def _project_file(name: str) -> Path:
    for base in (settings.get().home, PROJECT_DIR):
        if (base / name).exists():
            return base / name
    raise ImageError(f"{name} not found next to the cowork package; set COWORK_HOME to the cowork source checkout")


def _image_exists(ref: str) -> bool:
    try:
        get_client().images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


# --------------------------------------------------------------------------- base
def ensure_base(offline_only: bool = False) -> str:
    """Return a base image reference that is present locally, making one if needed.

    Order: ``$COWORK_BASE_IMAGE`` / cowork-base:bookworm if present; the public
    python:3.11-slim-bookworm if it can be pulled; else the offline debootstrap bootstrap.

    Raises:
        ImageError: when no base could be found or made.
    """
    if _image_exists(BASE_IMAGE):
        return BASE_IMAGE
    if _image_exists(PUBLIC_BASE):
        return PUBLIC_BASE
    if not offline_only:
        try:
            log.info("pulling %s", PUBLIC_BASE)
            get_client().images.pull(PUBLIC_BASE)
            return PUBLIC_BASE
        except docker.errors.DockerException as exc:
            log.info("no registry answered (%s); bootstrapping %s offline", str(exc)[:120], BASE_IMAGE)
    script = _project_file("images/bootstrap-base.sh")
    t0 = time.monotonic()
    proc = subprocess.run(["bash", str(script), BASE_IMAGE], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ImageError(f"offline base bootstrap failed ({script}):\n{proc.stdout}\n{proc.stderr}")
    log.info("bootstrapped %s in %.1fs", BASE_IMAGE, time.monotonic() - t0)
    return BASE_IMAGE


# --------------------------------------------------------------------------- wheelhouse
def _requirements(names: tuple[str, ...] = SERVER_PACKAGES + OFFICE_PACKAGES) -> list[str]:
    reqs = []
    for name in names:
        try:
            reqs.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError as exc:
            raise ImageError(f"{name} is not installed on the host; `pip install -e .` first") from exc
    return reqs


def ensure_wheelhouse() -> Path:
    """Download (once) the wheels the in-container server needs, for Python 3.11 on this arch.

    Raises:
        ImageError: when pip cannot fetch them.
    """
    reqs = _requirements()
    arch = platform.machine()
    key = hashlib.sha256(("\n".join(reqs) + arch + "\noffice.txt").encode()).hexdigest()[:12]
    dest = cache_dir() / f"wheelhouse-{key}"
    if (dest / "requirements.txt").exists() and (dest / "office.txt").exists():
        return dest
    tmp = Path(tempfile.mkdtemp(dir=cache_dir(), prefix="wheelhouse-tmp-"))
    plats = [f"manylinux_2_{v}_{arch}" for v in (17, 28, 34)] + [f"manylinux2014_{arch}", f"linux_{arch}"]
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(tmp), "--only-binary=:all:",
           "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311"]
    for p in plats:
        cmd += ["--platform", p]
    # Wheels of earlier wheelhouses count too: a package pinned to the host's version that the
    # index no longer offers (or an offline host) is then still found.
    for earlier in sorted(cache_dir().glob("wheelhouse-*")):
        if earlier.is_dir() and (earlier / "requirements.txt").exists():
            cmd += ["--find-links", str(earlier)]
    proc = subprocess.run(cmd + reqs, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ImageError(f"building the wheelhouse failed: {' '.join(cmd + reqs)}\n{proc.stderr[-2000:]}")
    (tmp / "requirements.txt").write_text("\n".join(_requirements(SERVER_PACKAGES)) + "\n")
    (tmp / "office.txt").write_text("\n".join(_requirements(OFFICE_PACKAGES)) + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)
    return dest


# --------------------------------------------------------------------------- sandbox image
def _hash_tree(h: "hashlib._Hash", path: Path, rel: str) -> None:
    if path.is_dir():
        for p in sorted(path.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                h.update(f"{rel}/{p.relative_to(path).as_posix()}\0".encode())
                h.update(p.read_bytes())
    elif path.is_file():
        h.update(f"{rel}\0".encode())
        h.update(path.read_bytes())


def sandbox_tag(base: str) -> str:
    """Tag of the sandbox image for the current sources, requirements and base."""
    h = hashlib.sha256()
    h.update(_project_file("Dockerfile").read_bytes())
    h.update("\n".join(_requirements()).encode())
    h.update(get_client().images.get(base).id.encode())
    for name in IN_CONTAINER:
        _hash_tree(h, PACKAGE_DIR / name, name)
    h.update(b"asagent:" + (b"cc" if shutil.which("cc") else b"none"))  # built, or setpriv's path
    return f"{SANDBOX_REPO}:{h.hexdigest()[:16]}"


def _build_asagent(dest: Path) -> None:
    """The static helper agent commands start through (server/asagent.c), when this host
    has a C compiler and a static libc; without it the server uses setpriv (~1 ms slower)."""
    dest.mkdir()
    (dest / "README").write_text("cowork-asagent: built on the host from cowork/server/asagent.c when a C compiler is there\n")
    cc = shutil.which("cc")
    if cc is None:
        log.info("no C compiler: agent commands will start through setpriv")
        return
    out = dest / "cowork-asagent"
    proc = subprocess.run([cc, "-O2", "-static", "-s", "-o", str(out), str(PACKAGE_DIR / "server" / "asagent.c")],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        out.unlink(missing_ok=True)
        log.warning("building cowork-asagent failed; agent commands will start through setpriv:\n%s",
                    proc.stderr[-2000:])


#: Steps ensure_sandbox_image reports through ``done``.
BUILD_STEPS = 3


def ensure_sandbox_image(offline_only: bool = False, done: Any = None) -> str:
    """Build the sandbox image unless an identical one exists; returns its tag.

    Args:
        offline_only: Never pull the public base image (build the offline one if none is present).
        done: Called with a short description as each of the BUILD_STEPS steps ends (the
            base image, the wheelhouse, the sandbox image), for progress displays.

    Raises:
        ImageError: when the build fails (the build log is in the message).
    """
    say = done or (lambda _msg: None)
    base = ensure_base(offline_only)
    say(f"base image {base}")
    tag = sandbox_tag(base)
    if _image_exists(tag):
        say("wheelhouse (not needed)")
        say(f"sandbox image {tag} (already built)")
        return tag
    wheels = ensure_wheelhouse()
    say(f"wheelhouse {wheels}")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cowork-ctx-") as ctx:
        shutil.copy(_project_file("Dockerfile"), Path(ctx) / "Dockerfile")
        shutil.copytree(wheels, Path(ctx) / "wheelhouse")
        _build_asagent(Path(ctx) / "bin")
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        (Path(ctx) / "cowork").mkdir()
        for name in IN_CONTAINER:
            src = PACKAGE_DIR / name
            if src.is_dir():
                shutil.copytree(src, Path(ctx) / "cowork" / name, ignore=ignore)
            elif src.is_file():
                shutil.copy(src, Path(ctx) / "cowork" / name)
        _build(path=ctx, tag=tag, buildargs={"BASE": base})
    get_client().images.get(tag).tag(SANDBOX_REPO, "latest")
    log.info("built %s in %.1fs", tag, time.monotonic() - t0)
    say(f"sandbox image {tag} (built in {time.monotonic() - t0:.0f}s)")
    return tag


def _build(**kwargs) -> None:
    try:
        get_client().images.build(rm=True, forcerm=True, **kwargs)
    except docker.errors.BuildError as exc:
        logs = "".join(str(c.get("stream", c.get("error", ""))) for c in exc.build_log)
        raise ImageError(f"docker build of {kwargs.get('tag')} failed: {exc.msg}\n{logs[-4000:]}") from exc
    except docker.errors.APIError as exc:
        raise ImageError(f"docker build of {kwargs.get('tag')} failed: {exc}") from exc


# --------------------------------------------------------------------------- task images
def task_config(loaded: LoadedSpec) -> dict:
    """The public part of a spec that goes into the image: no checks, no oracle, no violation."""
    spec = loaded.spec
    config = {
        "id": spec.id,
        "tools": list(spec.tools),
        "limits": spec.limits.model_dump(),
        "clock": spec.clock.isoformat(),
        "services": spec.services.model_dump(mode="json", exclude_none=True, by_alias=True),
        "faults": spec.faults.model_dump(mode="json") if spec.faults else None,
        "files": [{"path": p, "mode": f"{mode:04o}", "owner": owner}
                  for p, _, mode, owner in loaded.workspace_files()],
    }
    if spec.tool_options:  # only when set: every other task's config, and so its image tag, stays as it was
        config["tool_options"] = {tool: opts.model_dump(mode="json") for tool, opts in spec.tool_options.items()}
    if spec.http_services:  # likewise; the services' files go into the task layer (_task_context)
        config["http_services"] = [s.model_dump(mode="json") for s in spec.http_services]
        config["http_tools"] = [{**t.model_dump(mode="json"), "annotations": t.annotations.wire()}
                                for t in spec.http_tools]
    return config


def _task_context(loaded: LoadedSpec, base: str) -> tuple[bytes, str]:
    files = loaded.workspace_files()
    config = json.dumps(task_config(loaded), sort_keys=True, indent=1).encode()
    dockerfile = (f"FROM {base}\nCOPY task/ {TASK_DIR}/\n").encode()
    h = hashlib.sha256(get_client().images.get(base).id.encode() + dockerfile + config)
    h.update(b"layout 2: root-only task layer")  # a change of modes alone must make a new tag
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        made: set[str] = set()

        def add(name: str, data: bytes, mode: int) -> None:
            # The task layer is root's alone (0700 folders, 0600 files): it holds the seed of
            # every file, root-only secrets included, and the whole service and fault seed,
            # which the agent may see only through its tools. The builder copies modes from
            # this tar; COPY makes everything root-owned.
            parts = name.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                folder = "/".join(parts[:i])
                if folder not in made:
                    made.add(folder)
                    info = tarfile.TarInfo(folder)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o700, 0
                    tar.addfile(info)
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
        add("Dockerfile", dockerfile, 0o644)
        add("task/task.json", config, 0o600)
        for path, data, _, _ in files:
            h.update(path.encode() + b"\0" + hashlib.sha256(data).digest())
            add(f"task/seed/{path}", data, 0o600)
        if loaded.spec.http_services:  # each service's code and fixtures, root's alone like the seed
            from ..spec.http_services import service_files

            for path, data, mode in service_files(loaded.spec, loaded.root):
                h.update(path.encode() + b"\0" + hashlib.sha256(data).digest() + bytes([mode & 0o100]))
                add(f"task/{path}", data, mode)
    return buf.getvalue(), h.hexdigest()[:16]


def write_task_bundle(loaded: LoadedSpec, root: Path, sandbox_image: str | None = None) -> tuple[str, Path]:
    """Write the task layer as a folder to bind-mount, read-only, at ``TASK_DIR``: no image build.

    Specs that differ only in data (a generator's 1,000 specs) then all run on the sandbox
    image. The folder holds what the task image would (``task.json`` and ``seed/``), root's
    alone as there (folders 0700, files 0600), so the agent's uid cannot read the seed of a
    root-only file or the service records; the mount is read-only, so the server cannot change
    it either. Written once per content hash under ``root`` (a folder of the caller's).

    Returns:
        The sandbox image to start and the bundle folder.

    Raises:
        ImageError: when this process is not root: the files would belong to a uid that may be
            the agent's in the container (an image build is the way then).
    """
    if os.geteuid() != 0:
        raise ImageError("task bundles need the host process to run as root (the seed must be root's inside "
                         "the sandbox); use task images instead (the default)")
    base = sandbox_image or ensure_sandbox_image()
    context, digest = _task_context(loaded, base)
    dest = root / digest
    if dest.is_dir():
        return base, dest
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{digest}.", dir=root))  # 0700, then renamed into place whole
    try:
        with tarfile.open(fileobj=io.BytesIO(context)) as tar:
            for member in tar.getmembers():
                if not member.name.startswith("task/"):
                    continue
                rel = member.name[len("task/"):]
                target = tmp / rel
                if ".." in Path(rel).parts or not target.resolve().is_relative_to(tmp.resolve()):
                    raise ImageError(f"task {loaded.spec.id}: a seed path leaves the bundle: {rel!r}")
                if member.isdir():
                    target.mkdir(mode=0o700, exist_ok=True)
                    continue
                target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                data = tar.extractfile(member)
                assert data is not None
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    shutil.copyfileobj(data, fh)
        for folder, dirs, _ in os.walk(tmp):  # mkdir's mode passes through the umask: set it
            os.chmod(folder, 0o700)
        try:
            tmp.rename(dest)
        except OSError:  # another writer put the same content there first
            if not dest.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return base, dest


def spec_hash(loaded: LoadedSpec, base: str) -> str:
    """Content hash of everything that goes into the task image."""
    return _task_context(loaded, base)[1]


def ensure_task_image(loaded: LoadedSpec, sandbox_image: str | None = None) -> str:
    """Build the thin per-task image unless one with the same content hash exists.

    Returns:
        The image tag, ``cowork-task-<id>:<content hash>``.

    Raises:
        ImageError: when the build fails.
    """
    base = sandbox_image or ensure_sandbox_image()
    context, digest = _task_context(loaded, base)
    tag = f"{TASK_REPO_PREFIX}{loaded.spec.id}:{digest}"
    if _image_exists(tag):
        return tag
    t0 = time.monotonic()
    _build(fileobj=io.BytesIO(context), custom_context=True, tag=tag,
           labels={"cowork.task": loaded.spec.id, "cowork.spec_hash": digest, "cowork.sandbox": base})
    log.info("built %s in %.2fs", tag, time.monotonic() - t0)
    return tag


def prune_images() -> list[str]:
    """Remove sandbox images of older sources and task images not built on the current one.

    Images in use by a container are kept (Docker refuses to remove them).

    Returns:
        The tags removed.
    """
    client = get_client()
    base = next((b for b in (BASE_IMAGE, PUBLIC_BASE) if _image_exists(b)), None)
    current = sandbox_tag(base) if base else None
    removed = []
    for image in client.images.list():
        for tag in image.tags:
            repo = tag.rsplit(":", 1)[0]
            stale = (repo == SANDBOX_REPO and tag not in (current, f"{SANDBOX_REPO}:latest")) or (
                repo.startswith(TASK_REPO_PREFIX) and (image.labels or {}).get("cowork.sandbox") != current)
            if not stale:
                continue
            try:
                client.images.remove(tag)
                removed.append(tag)
            except docker.errors.APIError as exc:
                log.info("kept %s: %s", tag, exc)
    return removed
