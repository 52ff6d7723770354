"""The companion container's supervisor: runs a task's own HTTP services off the agent's network.

The host (engine.http_sidecar) starts it as ``python -m cowork.server.http_supervisor`` in a
container of its own beside the sandbox: network none (a loopback of its own, which nothing in
the sandbox can reach), every capability dropped, read-only root, the task layer (root's alone:
each service's code and fixtures under ``/opt/cowork/task/http/<name>``) and one folder shared
with the sandbox's root-only run dir (``COWORK_HTTP_DIR``). For each service it:

1. runs its command as root in its folder (``python`` / ``python3`` are the image's Python, which
   has fastapi and uvicorn), with ``PORT`` and the task's ``env``, output kept (the last 8 KiB);
2. probes its health endpoint (header ``X-Health-Check: 1``) until it answers below 500 or its
   ``ready_timeout_s`` passes, then calls its reset endpoint once, so every episode (the first
   too) starts from what a reset gives, health probes undone;
3. forwards ``<name>.sock`` in the shared folder to its loopback port, byte for byte: the
   sandbox's server reaches it there, and only there.

``status.json`` in the shared folder says where each service stands (``starting``, ``ready``,
``failed``, ``exited``, with the reason and its output), and ``ready`` once all are up; the
host waits for it, the server quotes it when a service stops answering. The services are never
restarted: a service that dies fails its tools' calls, and the sandbox's next reset.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import logging
import os
import shlex
import signal
import sys
import time
from typing import Any

from .. import formats

log = logging.getLogger("cowork.http_supervisor")

#: Output kept per service (bytes), for the status when it fails.
LOG_TAIL = 8192
#: Where the image's Python is (fastapi and uvicorn come with it).
PYTHON = sys.executable


class Service:
    """One service: its process, its output, its state."""

    def __init__(self, spec: dict[str, Any], task_dir: str):
        self.spec = spec
        self.name: str = spec["name"]
        self.port = int(spec["port"])
        folder = os.path.join(task_dir, "http", self.name)
        self.cwd = folder if os.path.isdir(folder) else "/tmp"
        self.proc: asyncio.subprocess.Process | None = None
        self.output = bytearray()
        self.state = "starting"
        self.detail = ""

    def argv(self) -> list[str]:
        """The command as words, ``python`` being the image's."""
        command = self.spec["command"]
        words = shlex.split(command) if isinstance(command, str) else list(command)
        if words and words[0] in ("python", "python3"):
            words[0] = PYTHON
        return words

    def env(self) -> dict[str, str]:
        """The command's environment: PATH with the image's Python first, HOME, PORT, the task's env."""
        base = {"PATH": f"{os.path.dirname(PYTHON)}:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp",
                "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "PORT": str(self.port)}
        return {**base, **{str(k): str(v) for k, v in (self.spec.get("env") or {}).items()}}

    def tail(self) -> str:
        """The end of the service's output."""
        return bytes(self.output[-LOG_TAIL:]).decode("utf-8", "replace")

    def status(self) -> dict[str, Any]:
        """The service's entry in status.json."""
        out: dict[str, Any] = {"state": self.state, "detail": self.detail, "port": self.port}
        if self.state in ("failed", "exited"):
            out["output"] = self.tail()
        return out

    async def start(self) -> None:
        """Run the command (its own session, so it and its children are stopped together)."""
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv(), cwd=self.cwd, env=self.env(), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        asyncio.get_running_loop().create_task(self._read_output())

    async def _read_output(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while chunk := await self.proc.stdout.read(4096):
            self.output += chunk
            if len(self.output) > 2 * LOG_TAIL:
                del self.output[:-LOG_TAIL]

    def probe(self, endpoint: dict[str, Any], timeout: float = 2.0) -> int:
        """One request to the service's loopback port (blocking); its status."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(endpoint["method"], endpoint["path"], body=b"" if endpoint["method"] != "GET" else None,
                         headers={"X-Health-Check": "1", "Connection": "close", "Host": f"localhost:{self.port}"})
            resp = conn.getresponse()
            resp.read(1 << 20)
            return resp.status
        finally:
            conn.close()

    async def wait_ready(self) -> None:
        """Probe the health endpoint until it answers below 500; then reset once."""
        deadline = time.monotonic() + float(self.spec.get("ready_timeout_s", 20))
        health = self.spec["health"]
        last = "no answer yet"
        while True:
            assert self.proc is not None
            if self.proc.returncode is not None:
                self.state, self.detail = "failed", f"exited with code {self.proc.returncode} before it was ready"
                return
            try:
                code = await asyncio.to_thread(self.probe, health)
                if code < 500:
                    break
                last = f"{health['method']} {health['path']} answered {code}"
            except (OSError, http.client.HTTPException) as exc:
                last = f"{health['method']} {health['path']}: {exc}"
            if time.monotonic() > deadline:
                self.state = "failed"
                self.detail = f"not ready within {self.spec.get('ready_timeout_s', 20)} s ({last})"
                return
            await asyncio.sleep(0.05)
        reset = self.spec.get("reset")
        if reset:
            try:
                code = await asyncio.to_thread(self.probe, reset, 15.0)
            except (OSError, http.client.HTTPException) as exc:
                self.state, self.detail = "failed", f"its first reset failed: {exc}"
                return
            if code >= 300:
                self.state, self.detail = "failed", f"its first reset ({reset['method']} {reset['path']}) answered {code}"
                return
        self.state, self.detail = "ready", ""

    async def forward(self, folder: str) -> asyncio.AbstractServer:
        """Serve ``<name>.sock`` in ``folder``, each connection piped to the loopback port."""
        path = os.path.join(folder, f"{self.name}.sock")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        server = await asyncio.start_unix_server(self._connection, path=path)
        os.chmod(path, 0o600)
        return server

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            if self.proc is not None and self.proc.returncode is None:
                with contextlib.suppress(asyncio.TimeoutError):  # dying now: say so before the caller asks
                    await asyncio.wait_for(self.proc.wait(), 0.2)
            self.watch()
            writer.close()
            return
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                w.close()

    def watch(self) -> None:
        """Mark a ready service whose process ended as ``exited``, and report it."""
        if self.state == "ready" and self.proc is not None and self.proc.returncode is not None:
            self.state, self.detail = "exited", f"exited with code {self.proc.returncode}"
            self.report()

    def report(self) -> None:
        """Write the status (set by main)."""

    def stop(self) -> None:
        """Kill the service's process group."""
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


def _write_status(folder: str, services: list[Service], ready: bool, error: str | None) -> None:
    doc = {"ready": ready, "error": error, "services": {s.name: s.status() for s in services}, "time": time.time()}
    tmp = os.path.join(folder, ".status.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(doc, fh, sort_keys=True)
    os.chmod(tmp, 0o600)
    os.replace(tmp, os.path.join(folder, "status.json"))


async def main() -> int:
    """Start every service, forward its socket, report, then watch until SIGTERM."""
    logging.basicConfig(level=os.environ.get("COWORK_LOG_LEVEL", "WARNING"), stream=sys.stderr)
    folder = os.environ.get("COWORK_HTTP_DIR", "/run/cowork-http")
    task_dir = os.environ.get("COWORK_TASK_DIR", formats.TASK_DIR)
    with open(os.environ.get("COWORK_TASK_CONFIG", formats.TASK_CONFIG)) as fh:
        raw = json.load(fh)
    os.makedirs(folder, exist_ok=True)
    with contextlib.suppress(PermissionError):
        os.chmod(folder, 0o700)
    services = [Service(s, task_dir) for s in raw.get("http_services") or []]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    _write_status(folder, services, False, None)
    servers: list[asyncio.AbstractServer] = []
    try:
        for s in services:
            try:
                await s.start()
            except OSError as exc:
                s.state, s.detail = "failed", f"could not run {s.argv()!r}: {exc}"
        await asyncio.gather(*(s.wait_ready() for s in services if s.state == "starting"))
        failed = [s for s in services if s.state != "ready"]
        if not failed:
            servers = [await s.forward(folder) for s in services]
        error = "; ".join(f"{s.name}: {s.detail}" for s in failed) or None
        _write_status(folder, services, not failed, error)

        def report() -> None:
            _write_status(folder, services, False, "; ".join(f"{s.name}: {s.detail}" for s in services
                                                             if s.state != "ready"))
        for s in services:
            s.report = report  # type: ignore[method-assign]
        while not stop.is_set():  # watch: a service that dies says so in the status
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)
            for s in services:
                s.watch()
    finally:
        for server in servers:
            server.close()
        for s in services:
            s.stop()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
