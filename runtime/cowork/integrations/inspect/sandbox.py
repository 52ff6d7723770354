"""``sandbox="cowork"``: one cowork sandbox per Inspect sample; exec, read_file and write_file
act as the agent through the sandbox's audited tools."""

from __future__ import annotations

import base64
import logging
import secrets
import shlex
import sys
from typing import Any, Literal, overload

from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    SandboxUserUnsupportedError,
    sandboxenv,
)

from ...errors import CoworkError, SpecError
from ...formats import AGENT_UID, AGENT_USER
from ...sandbox.sandbox import Sandbox, ToolResult

log = logging.getLogger(__name__)

#: The sample metadata key naming a sample's spec (a task folder or task.yaml).
SPEC_KEY = "cowork_spec"
#: Room kept under the output limit for the size line and the cut marker.
_OUTPUT_MARGIN = 128
#: Base64 characters sent in one write command: the command is one argument of bash, and
#: Linux takes at most 128 KiB in one argument (MAX_ARG_STRLEN).
_WRITE_CHUNK = 96 * 1024


def _spec_path(config: SandboxEnvironmentConfigType | None, metadata: dict[str, Any]) -> str:
    """The spec a sample's sandbox starts from: the sandbox config, else the sample metadata.

    Raises:
        SpecError: neither names a spec.
    """
    if isinstance(config, str) and config:
        return config
    named = metadata.get(SPEC_KEY)
    if isinstance(named, str) and named:
        return named
    raise SpecError(f"sandbox 'cowork' needs a spec: give it as the config (sandbox=('cowork', 'specs/my-task')) "
                    f"or as the sample's metadata[{SPEC_KEY!r}]; got config {config!r}")


@sandboxenv(name="cowork")
class CoworkSandboxEnvironment(SandboxEnvironment):
    """One cowork sandbox (a hardened container serving the spec's tools) per sample."""

    def __init__(self, box: Sandbox):
        super().__init__()
        #: The cowork sandbox of this sample (its tools, evidence and spec).
        self.cowork = box
        self._tool_names: set[str] | None = None

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    async def sample_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                          metadata: dict[str, str]) -> dict[str, SandboxEnvironment]:
        """Start the sample's sandbox from its spec.

        Raises:
            SpecError: no spec named, or the spec is invalid.
            SandboxError: the sandbox did not start (its container is removed).
        """
        box = await Sandbox.start(_spec_path(config, metadata))
        log.info("inspect sample of %s: sandbox %s started", task_name, box.name)
        return {"default": cls(box)}

    @classmethod
    async def sample_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                             environments: dict[str, SandboxEnvironment], interrupted: bool) -> None:
        """Remove the sample's container and run dir, interrupted or not (none is kept)."""
        for env in environments.values():
            if isinstance(env, CoworkSandboxEnvironment):
                await env.cowork.stop()

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        """``inspect sandbox cleanup cowork``: remove the cowork sandboxes whose owning process
        is gone and the run dirs of killed runners (what ``cowork gc`` removes; sandboxes of
        running evals and ``cowork up`` are left alone), and say what was removed. With an
        ``id`` (an id or name, as ``cowork down`` takes it): remove that one sandbox, owner alive or not.

        Raises:
            SystemExit: (2) no sandbox or more than one matches ``id``; the message says so.
        """
        from ...engine.client import in_thread

        try:
            lines = await in_thread(_cleanup, id)
        except CoworkError as exc:
            print(f"inspect sandbox cleanup cowork: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        print("\n".join(lines))

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> Any:
        """Configs are spec paths (plain strings); a dict config is a mistake.

        Raises:
            SpecError: always.
        """
        raise SpecError(f"sandbox 'cowork' takes a spec path as its config, not {config!r}")

    # ------------------------------------------------------------------ helpers
    async def tool_names(self) -> set[str]:
        """Names of the tools this sandbox serves (asked once)."""
        if self._tool_names is None:
            self._tool_names = {t.name for t in await self.cowork.tools()}
        return self._tool_names

    async def _shell(self, command: str, timeout: float | None = None) -> ToolResult:
        """Run ``command`` with the shell tool (as the agent).

        Raises:
            PermissionError: the task has no shell tool.
            TimeoutError: the command ran past ``timeout`` (or the task's tool limit).
            SandboxError: the sandbox stopped answering.
        """
        if "shell" not in await self.tool_names():
            raise PermissionError(f"task {self.cowork.spec.id!r} gives the agent no shell tool, so the cowork "
                                  "sandbox cannot run commands; add 'shell' to the spec's tools")
        args: dict[str, Any] = {"command": command}
        if timeout is not None:
            args["timeout_s"] = float(timeout)
        limit = (timeout or self.cowork.spec.limits.tool_timeout_s) + 5
        r = await self.cowork.call_tool("shell", args, timeout=limit)
        if r.is_error and "timed out" in r.text:
            raise TimeoutError(f"command timed out in sandbox {self.cowork.name}: {r.text[:500]}")
        return r

    @staticmethod
    def _check_user(user: str | None) -> None:
        if user not in (None, AGENT_USER, str(AGENT_UID)):
            raise SandboxUserUnsupportedError(
                f"a cowork sandbox runs everything as the unprivileged agent user ({AGENT_USER!r}, uid "
                f"{AGENT_UID}); user {user!r} is not available")

    # ------------------------------------------------------------------ exec
    async def exec(self, cmd: list[str], input: str | bytes | None = None, cwd: str | None = None,
                   env: dict[str, str] | None = None, user: str | None = None, timeout: int | None = None,
                   timeout_retry: bool = True, concurrency: bool = True) -> ExecResult[str]:
        """Run ``cmd`` in the sandbox as the agent, through the audited ``shell`` tool.

        The shell tool captures stdout and stderr together; stderr lines are marked on the
        way (a per-call marker) and split out again, so ``stdout`` and ``stderr`` hold their
        own lines (order between the two is not kept). Output past the task's output limit
        is cut by the tool. A timed-out command is killed, not retried.

        Raises:
            SandboxUserUnsupportedError: ``user`` is not the agent.
            PermissionError: the task has no shell tool, or the command could not be
                executed (exit code 126, permission denied).
            TimeoutError: the command ran past ``timeout`` or the task's tool time limit.
            SandboxError: the sandbox stopped answering.
        """
        self._check_user(user)
        mark = f"<<cowork-stderr-{secrets.token_hex(6)}>>"
        script = []
        if cwd:
            script.append(f"cd -- {shlex.quote(cwd)} || exit 1")
        script += [f"export {k}={shlex.quote(v)}" for k, v in (env or {}).items() if k.isidentifier()]
        run = shlex.join(cmd)
        if input is not None:
            data = input.encode() if isinstance(input, str) else input
            run = f"printf %s {shlex.quote(base64.b64encode(data).decode())} | base64 -d | {{ {run}; }}"
        # stderr goes through sed, which marks each line; `wait $!` lets it flush before exit.
        script.append(f"{{ {run}; }} 2> >(sed -u 's/^/{mark}/'); rc=$?; wait $! 2>/dev/null; exit $rc")
        r = await self._shell("\n".join(script), timeout)
        if r.is_error or not isinstance(r.structured, dict):
            return ExecResult(success=False, returncode=1, stdout="", stderr=r.text)
        stdout, stderr = _split_marked(str(r.structured.get("output", "")), mark)
        code = int(r.structured.get("exit_code", 1))
        if code == 126 and "permission denied" in stderr.lower():
            raise PermissionError(f"{cmd[0] if cmd else ''}: {stderr.strip()}")
        return ExecResult(success=code == 0, returncode=code, stdout=stdout, stderr=stderr)

    # ------------------------------------------------------------------ files
    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        """Read a file as the agent (exact bytes through the shell when the task has one).

        Raises:
            FileNotFoundError: no such file.
            IsADirectoryError: it is a folder.
            PermissionError: the agent may not read it (or the task has no tool to read with).
            OutputLimitExceededError: it is larger than INSPECT_SANDBOX_MAX_READ_FILE_SIZE.
            UnicodeDecodeError: ``text`` and the bytes are not UTF-8.
            TimeoutError: a read ran past the task's tool time limit.
        """
        names = await self.tool_names()
        if "shell" in names:
            data = await self._read_via_shell(file)
            return data.decode("utf-8") if text else data
        if "read_file" not in names:
            raise PermissionError(f"task {self.cowork.spec.id!r} gives the agent no shell or read_file tool")
        r = await self.cowork.call_tool("read_file", {"path": file})
        if r.is_error:
            raise _file_error(r.text, file)
        return r.text if text else r.text.encode()

    async def _read_via_shell(self, file: str) -> bytes:
        limit = SandboxEnvironmentLimits.MAX_READ_FILE_SIZE
        chunk = max((self.cowork.spec.limits.output_limit_bytes - _OUTPUT_MARGIN) // 4 * 3, 3)
        q = shlex.quote(file)
        parts: list[bytes] = []
        offset, size = 0, None
        while size is None or offset < size:
            r = await self._shell(
                f"f={q}; if ! [ -e \"$f\" ]; then case $(stat -- \"$f\" 2>&1) in *ermission*) exit 68;; esac; exit 66; fi\n"
                f"[ -d \"$f\" ] && exit 67; [ -r \"$f\" ] || exit 68\n"
                f"stat -c %s -- \"$f\" && tail -c +{offset + 1} -- \"$f\" | head -c {chunk} | base64 -w0")
            out = r.structured if isinstance(r.structured, dict) else {}
            code = out.get("exit_code")
            if r.is_error or code != 0:
                raise _file_error(_READ_ERRORS.get(code, r.text), file)
            head, _, body = str(out.get("output", "")).partition("\n")
            size = int(head)
            if size > limit:
                raise OutputLimitExceededError(limit_str=SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR,
                                               truncated_output=None)
            piece = base64.b64decode(body.strip())
            parts.append(piece)
            offset += len(piece)
            if not piece:
                break  # the file shrank while being read
        return b"".join(parts)

    async def write_file(self, file: str, contents: str | bytes) -> None:
        """Write a file as the agent, creating its folders (``write_file`` tool for text when
        the task has it, else exact bytes through the shell).

        Raises:
            PermissionError: the agent may not write there (or the task has no tool to write with).
            IsADirectoryError: a folder is in the way.
            TimeoutError: a write ran past the task's tool time limit.
        """
        names = await self.tool_names()
        if isinstance(contents, str) and "write_file" in names:
            r = await self.cowork.call_tool("write_file", {"path": file, "content": contents})
            if r.is_error:
                raise _file_error(r.text, file)
            return
        if "shell" not in names:
            raise PermissionError(f"task {self.cowork.spec.id!r} gives the agent no shell tool to write bytes with")
        data = contents.encode() if isinstance(contents, str) else contents
        encoded = base64.b64encode(data).decode()
        q = shlex.quote(file)
        pieces = [encoded[i:i + _WRITE_CHUNK] for i in range(0, len(encoded), _WRITE_CHUNK)] or [""]
        for n, piece in enumerate(pieces):
            prep = f"[ -d {q} ] && exit 67; mkdir -p -- \"$(dirname -- {q})\" || exit 68\n" if n == 0 else ""
            r = await self._shell(f"{prep}printf %s {shlex.quote(piece)} | base64 -d {'>' if n == 0 else '>>'} {q} "
                                  f"|| exit 68")
            code = r.structured.get("exit_code") if isinstance(r.structured, dict) else None
            if r.is_error or code != 0:
                raise _file_error(_WRITE_ERRORS.get(code, r.text), file)


#: What the exit codes of the read and write scripts mean (any other: the tool's own text).
_READ_ERRORS: dict[object, str] = {66: "File not found", 67: "is a directory", 68: "Permission denied"}
_WRITE_ERRORS: dict[object, str] = {67: "is a directory", 68: "Permission denied"}


def _split_marked(output: str, mark: str) -> tuple[str, str]:
    r"""Split the shell tool's combined output into (stdout, stderr) by the stderr marker.

    A marked line is stderr from the marker to its newline; what comes before the marker is
    stdout the stderr line cut into (it goes on after the stderr line). Lines are split on
    "\n" only: ``str.splitlines`` also breaks at \r, \x1c-\x1e and others a command prints.
    """
    out: list[str] = []
    err: list[str] = []
    pieces = output.split("\n")
    for n, piece in enumerate(pieces):
        ending = "\n" if n < len(pieces) - 1 else ""
        before, found, after = piece.partition(mark)
        if found:
            out.append(before)
            err.append(after.replace(mark, "") + ending)
        else:
            out.append(piece + ending)
    return "".join(out), "".join(err)


def _file_error(text: str, file: str) -> Exception:
    """The builtin error Inspect expects for a failed file operation."""
    low = text.lower()
    if "not found" in low or "no such file" in low:
        return FileNotFoundError(f"{file}: {text}")
    if "directory" in low:
        return IsADirectoryError(f"{file}: {text}")
    if "timed out" in low:
        return TimeoutError(f"{file}: {text}")
    return PermissionError(f"{file}: {text}")


def _cleanup(ref: str | None) -> list[str]:
    """Remove one sandbox (``ref``) or every orphan; the lines that say what was removed.

    Raises:
        CoworkError: ``ref`` matches no cowork sandbox, or several.
    """
    from ...engine import labels as L
    from ...engine.container import remove_container
    from ...engine.reaper import find_container, managed_containers, sweep

    if ref:
        c = find_container(ref)
        remove_container(c.id, (c.labels or {}).get(L.RUN_DIR))
        return [f"removed 1 cowork sandbox: {c.name} (container {c.id[:12]})"]
    done = sweep()
    kept = len(managed_containers())
    note = f"{kept} cowork sandbox(es) still owned by a running process or `cowork up` left alone" if kept else ""
    if not done.containers and not done.run_dirs:
        return ["nothing to remove: no orphaned cowork sandbox or run dir" + (f" ({note})" if note else "")]
    lines = [f"removed {len(done.containers)} orphaned cowork sandbox(es)"
             + (": " + ", ".join(done.containers) if done.containers else "")]
    if done.run_dirs:
        lines.append(f"removed {len(done.run_dirs)} run dir(s) of killed runners:")
        lines += [f"  {d}" for d in done.run_dirs]
    if note:
        lines.append(note)
    return lines
