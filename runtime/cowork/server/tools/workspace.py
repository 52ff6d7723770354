"""Workspace tools: shell, read_file, write_file, edit_file, list_files, grep.

Shell commands run as the agent user in their own process group; file tools run in the
AgentFS pool, so both see exactly the agent's permissions. Nothing an agent passes can hold
the server: file tools open without blocking and only regular files or folders, loops check
a per-call deadline, patterns are matched by RE2 (linear time, no backtracking), and after a
shell call every agent process is killed unless the task allows background jobs.
"""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

import re2
from pydantic import Field

from ...toolhost.errors import ToolError
from ..fs.agentfs import AgentFS
from ..fs.fsaccess import Deadline, FileRefused, fd_path, is_forbidden, open_checked
from ..fs.fswalk import Glob, Walk, name_matcher
from .procs import AGENT_BASH_ENV, kill_agent_processes

if TYPE_CHECKING:
    from ...toolhost.host import ToolApp
    from ..fs.forkfs import ForkFS

#: Drops to the agent's ids after exec: the image's static helper (server/asagent.c, built on the
#: host when it has a C compiler; ~1 ms less per command than setpriv), else util-linux setpriv.
_ASAGENT = "/opt/cowork/bin/cowork-asagent" if os.access("/opt/cowork/bin/cowork-asagent", os.X_OK) else None
_SETPRIV = next((p for p in ("/usr/bin/setpriv", "/bin/setpriv") if os.access(p, os.X_OK)), None)

#: Largest file edit_file loads (it holds old and new text in memory).
EDIT_MAX_BYTES = 16 << 20
#: Most names list_files and grep visit per call, and bytes grep reads per call.
VISIT_MAX = 100_000
GREP_MAX_BYTES = 256 << 20
#: grep reads lines in pieces of at most this many characters (a match across a cut is missed).
LINE_PIECE = 64 << 10
RE2_SYNTAX = "RE2 syntax: Python's re without backreferences or lookaround"

#: What each tool tells the agent. Passed to ``mcp.tool`` rather than written as docstrings:
#: fastmcp parses a docstring with griffe, whose import costs ~0.1 s of sandbox start-up.
TOOL_DESCRIPTIONS = {
    "shell": "Run a bash command in /workspace as the agent user; returns exit code and combined output.",
    "read_file": "Read a text file.",
    "write_file": "Create or overwrite a text file, making parent folders as needed.",
    "edit_file": "Replace an exact string in a file; fails if it is absent, or ambiguous without replace_all.",
    "list_files": "List files under a folder matching a glob (folders end with '/').",
    "grep": "Search file contents by regular expression; returns 'file:line: text' entries.",
}


@dataclass
class WorkspaceConfig:
    """What the workspace tools need to know."""

    root: str = "/workspace"
    tool_timeout_s: float = 30.0
    output_limit: int = 16384
    agent_uid: int | None = None
    agent_gid: int | None = None
    #: Let processes a shell call started outlive it (the spec's ``limits.background_jobs``).
    background_jobs: bool = False


def _cap(text: str, limit: int, total: int | None = None) -> tuple[str, bool]:
    """Keep at most ``limit`` bytes; say plainly how much there was (``total``: bytes produced)."""
    data = text.encode("utf-8", "replace")
    total = max(total or 0, len(data))
    if total <= limit:
        return text, False
    kept = data[:limit].decode("utf-8", "ignore")
    return kept + f"\n[output truncated: showed {limit} of {total} bytes]", True


def _universal(text: str) -> str:
    """Newlines as text-mode Python reads them (what read_file shows and edit_file matches)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


class WorkspaceTools:
    """Registers the workspace tools on a FastMCP server."""

    def __init__(self, cfg: WorkspaceConfig, fs: AgentFS | ForkFS):
        self.cfg = cfg
        self.fs = fs
        self._shells = 0  # shell calls in flight
        self._reap_owed = False  # a call ended while another ran: kill when the last one ends
        # Only root inside the sandbox can (and may) kill the agent's processes wholesale.
        self._reaps = cfg.agent_uid is not None and os.geteuid() == 0

    # ------------------------------------------------------------------ helpers
    def _abs(self, path: str) -> str:
        if not isinstance(path, str) or not path:
            raise ToolError("path must be a non-empty string")
        if "\0" in path:
            raise ToolError(f"path must not contain NUL: {path!r}")
        return path if path.startswith("/") else os.path.join(self.cfg.root, path)

    def _open(self, path: str, flags: int, kind: str = "file") -> tuple[int, os.stat_result]:
        """Open an agent-named path, mapping every refusal to a clear tool error."""
        try:
            return open_checked(self._abs(path), path, flags, kind)
        except FileRefused as exc:
            raise ToolError(str(exc)) from None
        except FileNotFoundError:
            raise ToolError(f"File not found: {path!r}") from None
        except IsADirectoryError:
            raise ToolError(f"{path!r} is a directory; use list_files") from None
        except NotADirectoryError:
            raise ToolError(f"Not a directory: {path!r}") from None
        except PermissionError:
            raise ToolError(f"Permission denied: {path!r}") from None
        except OSError as exc:
            raise ToolError(f"Cannot open {path!r}: {exc.strerror}") from None

    def _rel(self, real: str) -> str:
        root = self.cfg.root.rstrip("/")
        if real == root:
            return "."
        return real[len(root) + 1:] if real.startswith(root + "/") else real

    # ------------------------------------------------------------------ shell
    def _reap(self) -> None:
        """Kill every agent process, now or, while another shell call runs, when it ends."""
        if not self._reaps:
            return
        if self._shells > 1:
            self._reap_owed = True
            return
        self._reap_owed = False
        assert self.cfg.agent_uid is not None  # _reaps needs it
        kill_agent_processes(self.cfg.agent_uid)

    async def shell(self, command: str, timeout_s: float | None = None) -> dict:
        """Run ``command`` with ``bash -c`` as the agent in /workspace (see :meth:`run_as_agent`)."""
        return await self.run_as_agent(["/bin/bash", "-c", command], timeout_s)

    async def run_as_agent(self, argv: list[str], timeout_s: float | None = None, *,
                           env: dict[str, str] | None = None, pass_fds: tuple[int, ...] = ()) -> dict:
        """Run ``argv`` as the agent in /workspace, as ``shell`` runs its commands.

        The ``shell`` and ``python`` tools share it, so both get the same ids, environment,
        time limit, output cap and killing of what the call left behind, and each counts as
        a call in flight for the other (a shell call the python tool's code makes does not
        kill the python process when it ends).

        Args:
            argv: The program and its arguments.
            timeout_s: Seconds before the process group is killed (capped by the task's limit).
            env: Variables added to the agent's environment.
            pass_fds: Descriptors the process inherits (the python tool's channel).

        Returns:
            ``exit_code``, ``output`` (stdout and stderr together, cut at the task's
            output limit) and ``truncated``.

        Raises:
            ToolError: the process ran past the time limit (it was killed; the error holds
                the output so far).
        """
        limit = self.cfg.tool_timeout_s if timeout_s is None else min(timeout_s, self.cfg.tool_timeout_s)
        full_env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
            "USER": "agent", "PWD": self.cfg.root, "TMPDIR": "/tmp",
        }
        if self._reaps and os.path.exists(AGENT_BASH_ENV):
            full_env["BASH_ENV"] = AGENT_BASH_ENV  # oom_score_adj 1000 before the command runs
        full_env.update(env or {})
        kwargs: dict = {"pass_fds": pass_fds} if pass_fds else {}
        if self.cfg.agent_uid is not None and os.geteuid() == 0:
            if _ASAGENT:
                # The same as setpriv below (all three ids, no groups, no capabilities), without a
                # dynamic loader: the server never holds the agent's ids itself, so the agent can
                # never signal it.
                argv = [_ASAGENT, str(self.cfg.agent_uid), str(self.cfg.agent_gid), *argv]
            elif _SETPRIV:
                # Same ids and empty groups as user=/group=/extra_groups=, set by setpriv
                # after exec: CPython only spawns with vfork when it has no ids to change,
                # and a full fork of the server costs ~5 ms per command.
                argv = [_SETPRIV, f"--reuid={self.cfg.agent_uid}", f"--regid={self.cfg.agent_gid}",
                        "--clear-groups", "--", *argv]
            else:
                kwargs.update(user=self.cfg.agent_uid, group=self.cfg.agent_gid, extra_groups=[])
        self._shells += 1
        try:
            return await self._run(argv, full_env, kwargs, limit)
        finally:
            self._shells -= 1
            if self._shells == 0 and self._reap_owed:
                self._reap()

    async def _run(self, argv: list[str], env: dict, kwargs: dict, limit: float) -> dict:
        ends = time.monotonic() + limit
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.subprocess_exec(
            lambda: _ShellProtocol(limit=2 ** 16, loop=loop), *argv, cwd=self.cfg.root, env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True, **kwargs,
        )
        proc = asyncio.subprocess.Process(transport, protocol, loop)
        stdout = proc.stdout
        assert stdout is not None  # stdout=PIPE
        exited = protocol.exited
        chunks: list[bytes] = []
        size = 0

        async def drain() -> None:
            nonlocal size
            while chunk := await stdout.read(65536):
                size += len(chunk)
                if sum(map(len, chunks)) < self.cfg.output_limit:
                    chunks.append(chunk)

        # Without background jobs the call ends when bash exits: then everything it left
        # (``cmd &``, setsid, nohup, a fork bomb) is killed at once, its pipe closes and the
        # output is complete. With them, the call ends when the output pipe closes.
        reaping = self._reaps and not self.cfg.background_jobs
        reader = asyncio.ensure_future(drain())
        try:
            await asyncio.wait_for(asyncio.shield(exited) if reaping else asyncio.shield(reader), limit)
            if reaping:
                self._reap()
                if self._shells > 1:
                    _kill_group(proc.pid)
                try:
                    await asyncio.wait_for(asyncio.shield(reader), max(ends - time.monotonic(), 0.1))
                except TimeoutError:  # a leftover of a concurrent call holds the pipe
                    reader.cancel()
            await proc.wait()
        except TimeoutError:
            if reaping:
                self._reap()
            _kill_group(proc.pid)
            try:
                await asyncio.wait_for(reader, 1.0)
            except TimeoutError:
                reader.cancel()
            await proc.wait()
            text = b"".join(chunks).decode("utf-8", "replace")
            shown, _ = _cap(text, self.cfg.output_limit, size)
            raise ToolError(f"command timed out after {limit:g}s and was killed; output so far:\n{shown}")
        finally:
            if proc.returncode is None:
                _kill_group(proc.pid)
                await proc.wait()
        text = b"".join(chunks).decode("utf-8", "replace")
        shown, truncated = _cap(text, self.cfg.output_limit, size)
        return {"exit_code": proc.returncode, "output": shown, "truncated": truncated}

    # ------------------------------------------------------------------ files
    def _read(self, path: str, offset: int, limit: int | None, deadline: Deadline) -> str:
        fd, st = self._open(path, os.O_RDONLY)
        cap = self.cfg.output_limit
        # Reads only what the answer needs: a 2 GB file costs no more than a small one.
        with open(fd, encoding="utf-8", errors="replace", closefd=True) as fh:
            if not offset and limit is None:
                text = fh.read(cap + 1)
                total = st.st_size if len(text) > cap else None
                return _cap(text, cap, total)[0]
            skipped = 0
            while skipped < offset:
                piece = fh.readline(1 << 20)
                if not piece:
                    break
                skipped += piece.endswith("\n")
                if deadline.expired:
                    raise ToolError(f"read_file gave up after {deadline.seconds:g}s skipping to line {offset}")
            out, size, lines = [], 0, 0
            while limit is None or lines < limit:
                piece = fh.readline(cap + 1)
                if not piece:
                    break
                out.append(piece)
                lines += piece.endswith("\n")
                size += len(piece.encode("utf-8", "replace"))
                if size > cap or deadline.expired:
                    break
        return _cap("".join(out), cap)[0]

    def _write(self, path: str, content: str, deadline: Deadline) -> dict:
        full = self._abs(path)
        if is_forbidden(os.path.realpath(full)):
            raise ToolError(f"Permission denied: {path!r}")
        try:
            os.makedirs(os.path.dirname(full), exist_ok=True)
        except PermissionError:
            raise ToolError(f"Permission denied: {path!r}") from None
        except OSError as exc:
            raise ToolError(f"Cannot write {path!r}: {exc.strerror}") from None
        data = content.encode("utf-8")
        self._overwrite(path, os.O_WRONLY | os.O_CREAT, data)
        return {"path": self._rel(os.path.realpath(full)), "bytes": len(data)}

    def _overwrite(self, path: str, flags: int, data: bytes) -> None:
        fd, _ = self._open(path, flags)
        try:
            # Truncated only now that the opened file is known to be a regular, allowed one.
            os.ftruncate(fd, 0)
            _write_all(fd, data)
        except OSError as exc:
            raise ToolError(f"Cannot write {path!r}: {exc.strerror}") from None
        finally:
            os.close(fd)

    def _edit(self, path: str, old: str, new: str, replace_all: bool, deadline: Deadline) -> dict:
        if not old:
            raise ToolError("old_string must not be empty")
        fd, st = self._open(path, os.O_RDONLY)
        try:
            if st.st_size > EDIT_MAX_BYTES:
                raise ToolError(f"{path!r} has {st.st_size} bytes, more than edit_file takes "
                                f"({EDIT_MAX_BYTES}); use shell")
            raw = _read_all(fd, EDIT_MAX_BYTES + 1)
            real = fd_path(fd)
        finally:
            os.close(fd)
        try:
            text = _universal(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise ToolError(f"{path!r} is not UTF-8 text; use shell") from None
        count = text.count(old)
        if count == 0:
            raise ToolError(f"old_string not found in {path!r}")
        if count > 1 and not replace_all:
            raise ToolError(f"old_string occurs {count} times in {path!r}; give more context or set replace_all")
        data = (text.replace(old, new) if replace_all else text.replace(old, new, 1)).encode("utf-8")
        self._overwrite(path, os.O_WRONLY, data)
        return {"path": self._rel(real), "replacements": count if replace_all else 1}

    def _list(self, pattern: str, path: str, deadline: Deadline) -> dict:
        try:
            glob = Glob(pattern)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        except re2.error as exc:
            raise ToolError(f"Invalid glob {pattern!r}: {_re2_message(exc)}") from None
        fd, _ = self._open(path, os.O_RDONLY, kind="dir")
        out: list[str] = []
        full = False
        try:
            walk = Walk(fd, max_entries=VISIT_MAX, deadline=deadline,
                        descend=lambda rel, depth: glob.max_depth is None or depth < glob.max_depth)
            for e in walk:
                if glob.match(e.rel):
                    if len(out) >= 1000:
                        full = True
                        break
                    out.append(e.rel + ("/" if stat.S_ISDIR(e.st.st_mode) else ""))
        finally:
            os.close(fd)
        result: dict = {"files": out, "truncated": full or walk.stopped is not None}
        if walk.stopped and not full:
            result["note"] = f"search stopped early: {walk.stopped}"
        return result

    def _grep(self, pattern: str, path: str, glob: str, ignore_case: bool, deadline: Deadline) -> dict:
        opts = re2.Options()
        opts.log_errors = False
        opts.case_sensitive = not ignore_case
        try:
            rx = re2.compile(pattern, opts)
        except re2.error as exc:
            raise ToolError(f"Invalid regular expression {pattern!r}: {_re2_message(exc)} ({RE2_SYNTAX})") from None
        try:
            names = name_matcher(glob)
        except re2.error as exc:
            raise ToolError(f"Invalid glob {glob!r}: {_re2_message(exc)}") from None
        fd, st = self._open(path, os.O_RDONLY, kind="any")
        state = _GrepState(self.cfg.output_limit, deadline)
        try:
            base = self._rel(fd_path(fd))
            if stat.S_ISREG(st.st_mode):
                if names.search(os.path.basename(base)):
                    _grep_file(os.dup(fd), base, rx, state)
            else:
                walk = Walk(fd, max_entries=VISIT_MAX, deadline=deadline)
                for e in walk:
                    if state.stopped:
                        break
                    if not stat.S_ISREG(e.st.st_mode) or not names.search(e.name):
                        continue  # symlinks are not followed, FIFOs and devices never opened
                    try:
                        ffd = os.open(e.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                                      dir_fd=e.dir_fd)
                        if not stat.S_ISREG(os.fstat(ffd).st_mode):
                            os.close(ffd)
                            continue
                    except OSError:
                        continue
                    _grep_file(ffd, e.rel if base in (".", "") else f"{base}/{e.rel}", rx, state)
                if walk.stopped and not state.stopped:
                    state.stopped = walk.stopped
        finally:
            os.close(fd)
        result: dict = {"matches": state.matches, "truncated": state.stopped is not None}
        if state.stopped and state.stopped != "output limit":
            result["note"] = f"search stopped early: {state.stopped}"
        return result

    async def _timed(self, fn, *args):
        deadline = Deadline(self.cfg.tool_timeout_s)
        try:
            # The inner deadline ends the work in the thread; the outer one ends the wait even
            # if the thread is stuck in a system call (the pool then gives the next call a new thread).
            return await asyncio.wait_for(self.fs.run(fn, *args, deadline), self.cfg.tool_timeout_s + 1)
        except TimeoutError:
            raise ToolError(f"tool timed out after {self.cfg.tool_timeout_s:g}s") from None

    # ------------------------------------------------------------------ registration
    def register(self, mcp: ToolApp, allowed: set[str]) -> None:
        """Add the allowed workspace tools to ``mcp``."""
        ro = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}

        if "shell" in allowed:
            @mcp.tool(name="shell", description=TOOL_DESCRIPTIONS["shell"],
                      annotations={"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": False})
            async def shell(
                command: Annotated[str, Field(description="Bash command, run in /workspace.")],
                timeout_s: Annotated[float | None, Field(description="Seconds before the command is killed (capped by the task's limit).")] = None,
            ) -> dict:
                return await self.shell(command, timeout_s)

        if "read_file" in allowed:
            @mcp.tool(name="read_file", description=TOOL_DESCRIPTIONS["read_file"], annotations=ro)
            async def read_file(
                path: Annotated[str, Field(description="File path, relative to /workspace or absolute.")],
                offset: Annotated[int, Field(ge=0, description="First line to return (0-based).")] = 0,
                limit: Annotated[int | None, Field(ge=1, description="Most lines to return.")] = None,
            ) -> str:
                return await self._timed(self._read, path, offset, limit)

        if "write_file" in allowed:
            @mcp.tool(name="write_file", description=TOOL_DESCRIPTIONS["write_file"],
                      annotations={"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False})
            async def write_file(
                path: Annotated[str, Field(description="File path, relative to /workspace or absolute.")],
                content: Annotated[str, Field(description="The whole new content.")],
            ) -> dict:
                return await self._timed(self._write, path, content)

        if "edit_file" in allowed:
            @mcp.tool(name="edit_file", description=TOOL_DESCRIPTIONS["edit_file"],
                      annotations={"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": False})
            async def edit_file(
                path: Annotated[str, Field(description="File path, relative to /workspace or absolute.")],
                old_string: Annotated[str, Field(description="Exact text to replace.")],
                new_string: Annotated[str, Field(description="Replacement text.")],
                replace_all: Annotated[bool, Field(description="Replace every occurrence instead of exactly one.")] = False,
            ) -> dict:
                return await self._timed(self._edit, path, old_string, new_string, replace_all)

        if "list_files" in allowed:
            @mcp.tool(name="list_files", description=TOOL_DESCRIPTIONS["list_files"], annotations=ro)
            async def list_files(
                pattern: Annotated[str, Field(description="Glob, e.g. '**/*.csv'.")] = "**/*",
                path: Annotated[str, Field(description="Folder to search from.")] = ".",
            ) -> dict:
                return await self._timed(self._list, pattern, path)

        if "grep" in allowed:
            @mcp.tool(name="grep", description=TOOL_DESCRIPTIONS["grep"], annotations=ro)
            async def grep(
                pattern: Annotated[str, Field(description=f"Regular expression ({RE2_SYNTAX}).")],
                path: Annotated[str, Field(description="File or folder to search.")] = ".",
                glob: Annotated[str, Field(description="Only files whose name matches this glob.")] = "*",
                ignore_case: bool = False,
            ) -> dict:
                return await self._timed(self._grep, pattern, path, glob, ignore_case)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _ShellProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """Says when bash itself has exited: Process.wait() also waits for the output pipe to
    close (Python 3.11), which a process the command left behind can hold open."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop):
        super().__init__(limit=limit, loop=loop)
        self.exited: asyncio.Future = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


@dataclass
class _GrepState:
    limit: int
    deadline: Deadline
    matches: list = field(default_factory=list)
    size: int = 0
    scanned: int = 0
    stopped: str | None = None


def _grep_file(fd: int, rel: str, rx, state: _GrepState) -> None:
    """Search one open regular file (closed here) line by line, within the state's budgets."""
    with open(fd, encoding="utf-8", errors="replace", closefd=True) as fh:
        n = 1
        while piece := fh.readline(LINE_PIECE):
            state.scanned += len(piece)
            line = piece.rstrip("\n")
            if rx.search(line):
                entry = f"{rel}:{n}: {line.rstrip()}"
                state.size += len(entry)
                if state.size > state.limit:
                    state.stopped = "output limit"
                    return
                state.matches.append(entry)
            n += piece.endswith("\n")
            if state.scanned > GREP_MAX_BYTES:
                state.stopped = f"read {GREP_MAX_BYTES >> 20} MiB"
                return
            if state.deadline.expired:
                state.stopped = f"time limit of {state.deadline.seconds:g}s reached"
                return


def _re2_message(exc: Exception) -> str:
    msg = exc.args[0] if exc.args else str(exc)
    return msg.decode("utf-8", "replace") if isinstance(msg, bytes) else str(msg)


def _read_all(fd: int, limit: int) -> bytes:
    parts, got = [], 0
    while got < limit and (chunk := os.read(fd, min(limit - got, 1 << 20))):
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
