"""Workspace tools: shell, read_file, write_file, edit_file, list_files, grep.

Shell commands run as the agent user in their own process group; file tools run in the
AgentFS pool, so both see exactly the agent's permissions.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from .agentfs import AgentFS

_FORBIDDEN_ROOTS = ("/proc", "/run/cowork", "/sys")
#: util-linux setpriv (in every Debian image): drops to the agent's ids after exec.
_SETPRIV = next((p for p in ("/usr/bin/setpriv", "/bin/setpriv") if os.access(p, os.X_OK)), None)

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


def _cap(text: str, limit: int, total: int | None = None) -> tuple[str, bool]:
    """Keep at most ``limit`` bytes; say plainly how much there was (``total``: bytes produced)."""
    data = text.encode("utf-8", "replace")
    total = max(total or 0, len(data))
    if total <= limit:
        return text, False
    kept = data[:limit].decode("utf-8", "ignore")
    return kept + f"\n[output truncated: showed {limit} of {total} bytes]", True


class WorkspaceTools:
    """Registers the workspace tools on a FastMCP server."""

    def __init__(self, cfg: WorkspaceConfig, fs: AgentFS):
        self.cfg = cfg
        self.fs = fs

    # ------------------------------------------------------------------ helpers
    def _path(self, path: str) -> Path:
        if not isinstance(path, str) or not path:
            raise ToolError("path must be a non-empty string")
        p = Path(path) if path.startswith("/") else Path(self.cfg.root) / path
        real = os.path.realpath(p)
        if any(real == r or real.startswith(r + "/") for r in _FORBIDDEN_ROOTS):
            raise ToolError(f"Permission denied: {path!r}")
        return Path(real)

    def _rel(self, p: Path) -> str:
        try:
            return p.relative_to(self.cfg.root).as_posix()
        except ValueError:
            return str(p)

    # ------------------------------------------------------------------ shell
    async def shell(self, command: str, timeout_s: float | None = None) -> dict:
        limit = self.cfg.tool_timeout_s if timeout_s is None else min(timeout_s, self.cfg.tool_timeout_s)
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
            "USER": "agent", "PWD": self.cfg.root, "TMPDIR": "/tmp",
        }
        argv: list[str] = ["/bin/bash", "-c", command]
        kwargs = {}
        if self.cfg.agent_uid is not None and os.geteuid() == 0:
            if _SETPRIV:
                # Same ids and empty groups as user=/group=/extra_groups=, set by setpriv
                # after exec: CPython only spawns with vfork when it has no ids to change,
                # and a full fork of the server costs ~5 ms per command.
                argv = [_SETPRIV, f"--reuid={self.cfg.agent_uid}", f"--regid={self.cfg.agent_gid}",
                        "--clear-groups", "--", *argv]
            else:
                kwargs = {"user": self.cfg.agent_uid, "group": self.cfg.agent_gid, "extra_groups": []}
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=self.cfg.root, env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True, **kwargs,
        )
        chunks: list[bytes] = []
        size = 0

        async def drain() -> None:
            nonlocal size
            while chunk := await proc.stdout.read(65536):
                size += len(chunk)
                if sum(map(len, chunks)) < self.cfg.output_limit:
                    chunks.append(chunk)

        reader = asyncio.ensure_future(drain())
        try:
            await asyncio.wait_for(asyncio.shield(reader), limit)
            await proc.wait()
        except asyncio.TimeoutError:
            _kill_group(proc.pid)
            try:
                await asyncio.wait_for(reader, 1.0)
            except asyncio.TimeoutError:
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
    def _read(self, path: str, offset: int, limit: int | None) -> str:
        p = self._path(path)
        try:
            text = p.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise ToolError(f"File not found: {path!r}") from None
        except IsADirectoryError:
            raise ToolError(f"{path!r} is a directory; use list_files") from None
        except PermissionError:
            raise ToolError(f"Permission denied: {path!r}") from None
        lines = text.splitlines(keepends=True)
        if offset or limit is not None:
            lines = lines[offset: None if limit is None else offset + limit]
            text = "".join(lines)
        return _cap(text, self.cfg.output_limit)[0]

    def _write(self, path: str, content: str) -> dict:
        p = self._path(path)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(content, encoding="utf-8")
        except PermissionError:
            raise ToolError(f"Permission denied: {path!r}") from None
        except (IsADirectoryError, NotADirectoryError) as exc:
            raise ToolError(f"Cannot write {path!r}: {exc.strerror}") from None
        return {"path": self._rel(p), "bytes": len(content.encode())}

    def _edit(self, path: str, old: str, new: str, replace_all: bool) -> dict:
        if not old:
            raise ToolError("old_string must not be empty")
        p = self._path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ToolError(f"File not found: {path!r}") from None
        except PermissionError:
            raise ToolError(f"Permission denied: {path!r}") from None
        count = text.count(old)
        if count == 0:
            raise ToolError(f"old_string not found in {path!r}")
        if count > 1 and not replace_all:
            raise ToolError(f"old_string occurs {count} times in {path!r}; give more context or set replace_all")
        try:
            p.write_text(text.replace(old, new) if replace_all else text.replace(old, new, 1), encoding="utf-8")
        except PermissionError:
            raise ToolError(f"Permission denied: {path!r}") from None
        return {"path": self._rel(p), "replacements": count if replace_all else 1}

    def _list(self, pattern: str, path: str) -> dict:
        base = self._path(path)
        if not base.is_dir():
            raise ToolError(f"Not a directory: {path!r}")
        out = []
        for p in sorted(base.glob(pattern)):
            rel = p.relative_to(base).as_posix()
            out.append(rel + ("/" if p.is_dir() else ""))
            if len(out) >= 1000:
                break
        return {"files": out, "truncated": len(out) >= 1000}

    def _grep(self, pattern: str, path: str, glob: str, ignore_case: bool) -> dict:
        try:
            rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise ToolError(f"Invalid regular expression {pattern!r}: {exc}") from None
        base = self._path(path)
        files = [base] if base.is_file() else sorted(q for q in base.rglob("*") if q.is_file())
        matches, size = [], 0
        for f in files:
            if not fnmatch.fnmatch(f.name, glob):
                continue
            try:
                with open(f, encoding="utf-8", errors="replace") as fh:
                    for n, line in enumerate(fh, start=1):
                        if rx.search(line):
                            entry = f"{self._rel(f)}:{n}: {line.rstrip()}"
                            size += len(entry)
                            if size > self.cfg.output_limit:
                                return {"matches": matches, "truncated": True}
                            matches.append(entry)
            except (PermissionError, IsADirectoryError):
                continue
        return {"matches": matches, "truncated": False}

    async def _timed(self, fn, *args):
        try:
            return await asyncio.wait_for(self.fs.run(fn, *args), self.cfg.tool_timeout_s)
        except asyncio.TimeoutError:
            raise ToolError(f"tool timed out after {self.cfg.tool_timeout_s:g}s") from None

    # ------------------------------------------------------------------ registration
    def register(self, mcp: FastMCP, allowed: set[str]) -> None:
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
                pattern: Annotated[str, Field(description="Python regular expression.")],
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
