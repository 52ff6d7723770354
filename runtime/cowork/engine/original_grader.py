"""The original grader: a benchmark's own ``grader.py`` run on cowork evidence, isolated.

After the episode a fresh container (network none, read-only root, no capabilities, user
``nobody``, Python in isolated mode) gets, read-only: the task's grader folder (the user's
``claw_eval`` package and the task's folder) at /claw, and at /cowork the translated trace
(integrations.claw_eval.trace) and the runner script (integrations.claw_eval.grader_main).
Nothing of the agent's workspace is mounted, and the runner's path holds only /claw/src, so a
``claw_eval/`` or ``sitecustomize.py`` the agent wrote changes nothing.

The grader's LLM judge reaches the configured cowork judge through a relay: a host thread
serving HTTP on a unix socket mounted into the container, forwarding chat completions to the
judge's endpoint (or answering 503 when none is configured). Every call and every failure is
counted: a grade that rests on a failed judge call is not trusted (grading.grade fails closed).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import secrets
import shutil
import socketserver
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Literal

from ..formats import canonical_json
from . import labels as L
from .verifiers import CLEAN_ENV, OUTPUT_LIMIT

log = logging.getLogger(__name__)

#: The image's Python (pydantic and PyYAML installed: what the claw_eval package needs).
PYTHON = "/opt/cowork/venv/bin/python"
RUNNER = Path(__file__).resolve().parents[1] / "integrations" / "claw_eval" / "grader_main.py"
#: Most bytes of a chat-completions request the relay accepts from the grader.
REQUEST_LIMIT = 8 * 1024 * 1024
#: Most judge failures kept in the result (all are counted).
ERRORS_KEPT = 20
MEMORY = "1g"
#: Back-off sleeps inside the grader are cut to this (graders retry failed judge calls).
SLEEP_CAP_S = 0.05


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class JudgeRelay:
    """Chat completions from the grader container, forwarded to a cowork judge.

    Use as a context manager: it serves on ``<folder>/judge.sock`` (world-connectable, so the
    container's ``nobody`` can reach it) until the block ends.

    Args:
        folder: An empty folder to put the socket in (mounted into the container).
        judge: A :class:`cowork.grading.judge.LLMJudge` (its endpoint, key, model and cache are
            used) or None: every request is then answered 503 and counted as a failure.
    """

    def __init__(self, folder: Path, judge: Any = None):
        self.folder = Path(folder)
        self.path = self.folder / "judge.sock"
        self.judge = judge
        self.calls = 0
        self.errors: list[str] = []
        self.failures = 0
        self._lock = threading.Lock()
        self._server: _UnixHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "JudgeRelay":
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def address_string(self) -> str:  # a unix peer has no address
                return "grader"

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("judge relay: " + format, *args)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"the judge relay serves POST .../chat/completions, "
                                                          f"not {self.path!r}"}})
                    return
                if length > REQUEST_LIMIT:
                    relay._failed(f"request of {length} bytes refused (limit {REQUEST_LIMIT})", counted=True)
                    self._send(413, {"error": {"message": "request too large for the judge relay"}})
                    return
                raw = self.rfile.read(length)
                status, body = relay.answer(raw)
                self._send(status, body)

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = _UnixHTTPServer(str(self.path), Handler)
        os.chmod(self.path, 0o666)
        self._thread = threading.Thread(target=self._server.serve_forever, name="cowork-judge-relay", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # ------------------------------------------------------------------ answers
    def _failed(self, why: str, counted: bool = True) -> None:
        with self._lock:
            if counted:
                self.calls += 1
            self.failures += 1
            if len(self.errors) < ERRORS_KEPT:
                self.errors.append(why[:500])

    def answer(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        """``(status, JSON body)`` for one chat-completions request (counted, failures kept)."""
        if self.judge is None:
            why = ("no LLM judge is configured for this run, so the original grader's judge calls cannot be "
                   "answered; give a judge (--judge-model, with --judge-base-url or $OPENAI_BASE_URL)")
            self._failed(why)
            return 503, {"error": {"message": why, "type": "judge_unavailable"}}
        try:
            body = json.loads(raw)
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                raise ValueError("the request is not a chat-completions object with messages")
        except ValueError as exc:
            self._failed(f"bad request from the grader: {exc}")
            return 400, {"error": {"message": f"bad request: {exc}"}}
        from ..llm import ChatClient

        client = getattr(self.judge, "client", None)  # grading.judge.LLMJudge's ChatClient
        if not isinstance(client, ChatClient):
            why = (f"the judge {type(self.judge).__name__} has no OpenAI-compatible endpoint to forward the "
                   "grader's requests to")
            self._failed(why)
            return 503, {"error": {"message": why}}
        body["model"] = getattr(self.judge, "model", None) or client.model  # the configured judge, always
        cached = self._cache_path(body)
        if cached is not None and cached.is_file():
            with self._lock:
                self.calls += 1
            return 200, json.loads(cached.read_text())
        try:
            from ..llm import post_json

            data = asyncio.run(post_json(f"{client.base_url}/chat/completions", body, api_key=client.api_key,
                                         timeout=client.timeout, retries=client.retries, what="judge (original grader)"))
        except Exception as exc:  # the endpoint failed after its retries
            why = f"{type(exc).__name__}: {exc}"
            self._failed(why)
            return 502, {"error": {"message": why}}
        with self._lock:
            self.calls += 1
        if cached is not None:
            try:
                cached.write_text(json.dumps(data))
            except OSError as exc:
                log.debug("judge relay cache not written: %s", exc)
        return 200, data

    def _cache_path(self, body: dict[str, Any]) -> Path | None:
        """Where an answer to ``body`` is kept (the judge's cache folder), so a regrade asks
        the same question once; None when the judge has no cache."""
        root = getattr(self.judge, "cache_dir", None)
        if root is None:
            return None
        try:
            key = hashlib.sha256(canonical_json(body).encode()).hexdigest()
        except (TypeError, ValueError):
            return None
        folder = Path(root) / "original-grader"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{key}.json"

    def report(self) -> dict[str, Any]:
        """``{"judge_calls", "judge_failures", "judge_errors"}``."""
        with self._lock:
            return {"judge_calls": self.calls, "judge_failures": self.failures, "judge_errors": list(self.errors)}


def unreadable(folder: Path) -> str | None:
    """The first file or folder under ``folder`` (itself included) that other users cannot
    read (folders: read and enter), or None."""
    import stat

    for path in (folder, *folder.rglob("*")):
        mode = path.stat().st_mode
        need = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
        if mode & need != need:
            return str(path)
    return None


def parse_output(output: str, marker: str) -> dict[str, Any] | None:
    """The result the runner printed after ``marker`` (the last such line), or None."""
    for line in reversed(output.splitlines()):
        if line.startswith(marker + " "):
            try:
                data = json.loads(line[len(marker) + 1:])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def grader_input(spec: Any, ev: Any, modes: tuple[str, ...], marker: str, judge: Any,
                 files: str = "/claw", socket_path: str = "/relay/judge.sock",
                 without_judge: Literal["relay", "none"] = "relay") -> dict[str, Any]:
    """What the runner reads: the layout, the task, the translated trace, the modes, the
    relay's socket and the marker of its result line."""
    from ..integrations.claw_eval.trace import claw_trace

    og = spec.original_grader
    return {"files": files, "task_id": og.task_id, "trace": claw_trace(spec, ev), "modes": list(modes),
            "marker": marker, "sleep_cap_s": SLEEP_CAP_S, "tmp": "/tmp",
            "judge": {"socket": socket_path, "model": getattr(judge, "model", None) or "judge",
                      "timeout_s": max(30.0, float(og.timeout_s)),
                      "none": judge is None and without_judge == "none"}}


def run_original_grader(spec: Any, spec_root: Path, ev: Any, image: str, judge: Any = None,
                        modes: tuple[str, ...] = ("cowork",),
                        without_judge: Literal["relay", "none"] = "relay") -> dict[str, Any]:
    """Run the spec's original grader on ``ev`` in a fresh grader container.

    Args:
        spec: The task spec (its ``original_grader`` says what runs).
        spec_root: The task folder (``original_grader.files`` is beside task.yaml there).
        ev: The episode's evidence.
        image: An image with cowork's Python (the task's or the sandbox image).
        judge: A :class:`cowork.grading.judge.LLMJudge` that answers the grader's judge calls.
        modes: ``cowork`` (the grader on objects built here) and/or ``harness`` (the original
            harness's path: a JSONL trace, its reader, its CLI's grading call).
        without_judge: With no ``judge``: ``relay`` gives the grader its judge anyway, every
            call of which fails (counted, so the grade fails closed); ``none`` gives it no judge
            (``judge=None``), as Claw-Eval's own ``grade`` does without a judge key, for
            comparisons with the original harness.

    Returns:
        The runner's result (``{"cowork": {"scores", "task_score", "passed", ...}, "harness":
        ...}`` by mode) with ``judge_calls``, ``judge_failures``, ``judge_errors`` (the relay's
        count), ``output`` (the container's stderr, cut) and ``duration_s``; or ``{"error":
        ...}`` (with what is known) when it could not run, ran out of time or printed no result.
        Never raises.
    """
    t0 = time.monotonic()
    try:
        return _run(spec, Path(spec_root), ev, image, judge, modes, without_judge, t0)
    except Exception as exc:  # Docker, the host's disk, a translation that failed: not graded
        log.warning("original grader of %s could not run: %s", getattr(spec, "id", "?"), exc)
        return {"error": f"the original grader could not run: {type(exc).__name__}: {exc}",
                "duration_s": round(time.monotonic() - t0, 3)}


def _run(spec: Any, spec_root: Path, ev: Any, image: str, judge: Any, modes: tuple[str, ...],
         without_judge: Literal["relay", "none"], t0: float) -> dict[str, Any]:
    import docker.errors
    from docker.types import Mount

    from .client import get_client

    og = spec.original_grader
    if og is None:
        return {"error": "the spec has no original_grader"}
    files = (spec_root / og.files).resolve()
    if not files.is_dir():
        return {"error": f"original_grader.files: folder {og.files!r} not found in {spec_root}"}
    hidden = unreadable(files)
    if hidden is not None:
        return {"error": f"original_grader.files: {hidden} cannot be read by other users, and the grader runs as "
                         f"nobody; make the folder readable: chmod -R a+rX {files}"}
    marker = f"@@cowork-original-grader-{secrets.token_hex(8)}@@"  # agent text cannot forge the result line
    with tempfile.TemporaryDirectory(prefix="cowork-original-") as tmp:
        # The container's nobody must pass through to the input and the socket, which any other
        # local user could then use too (the socket spends the judge's key): every folder is
        # 0711 and named at random, so only who is told the names (the container) finds them.
        root = Path(tmp)
        box, relay_dir = root / f"in-{secrets.token_hex(12)}", root / f"relay-{secrets.token_hex(12)}"
        for folder in (root, box, relay_dir):
            folder.mkdir(exist_ok=True)
            os.chmod(folder, 0o711)
        config = grader_input(spec, ev, modes, marker, judge, without_judge=without_judge)
        (box / "input.json").write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
        shutil.copyfile(RUNNER, box / "grader_main.py")
        for f in box.iterdir():
            os.chmod(f, 0o644)
        with JudgeRelay(relay_dir, judge) as relay:
            client = get_client()
            container = client.containers.run(
                image, [PYTHON, "-I", "/cowork/grader_main.py", "/cowork/input.json"], detach=True,
                network_mode="none", read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges:true"],
                user="65534:65534", working_dir="/claw", environment=CLEAN_ENV,
                mounts=[Mount("/claw", str(files), type="bind", read_only=True),
                        Mount("/cowork", str(box), type="bind", read_only=True),
                        Mount("/relay", str(relay_dir), type="bind", read_only=True)],
                tmpfs={"/tmp": "rw,nosuid,nodev,size=64m,mode=1777"},
                mem_limit=MEMORY, pids_limit=256, init=True, ipc_mode="none",
                labels={**L.owner_labels("original-grader", ""), L.TASK: "original-grader"},
            )
            timed_out = False
            try:
                try:
                    code = container.wait(timeout=og.timeout_s)["StatusCode"]
                except Exception:  # requests' read timeout: the grader ran too long
                    container.kill()
                    code, timed_out = 124, True
                stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
                stderr = container.logs(stdout=False, stderr=True).decode(errors="replace")
            finally:
                try:
                    container.remove(force=True)
                except docker.errors.DockerException as exc:
                    log.warning("could not remove original-grader container %s: %s", container.short_id, exc)
            counts = relay.report()
    output = stderr if len(stderr) <= OUTPUT_LIMIT else "[...]\n" + stderr[-OUTPUT_LIMIT:]
    done = {**counts, "exit_code": code, "output": output, "duration_s": round(time.monotonic() - t0, 3)}
    if timed_out:
        return {**done, "error": f"the original grader ran past its {og.timeout_s:g} s limit and was stopped"}
    result = parse_output(stdout, marker)
    if result is None:
        return {**done, "error": f"the original grader printed no result (exit code {code}); see output"}
    return {**result, **done}
