"""Office files in the workspace: the ``read_document`` tool, and workspace access for mail attachments.

``read_document`` returns the text and tables of an xlsx, docx, pdf, md or txt file. The
parsing runs in a child process as the agent (WorkspaceTools.run_as_agent: the agent's ids,
the task's time limit and output cap, leftovers killed), started with the server's own
interpreter in isolated mode on services/office_text.py, which imports nothing of cowork.
So a damaged or hostile file (a zip bomb, a PDF built to loop the parser) costs the agent's
own limits at most: it can exhaust only the child's memory ceiling and time, and the answer
is a tool error naming the file, never a server crash.

:class:`AgentFiles` lets a service read and write workspace files as the agent, with the
workspace tools' path rules (mail_save_attachment, attachments on mail_send).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections import OrderedDict
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from ...formats import DOCUMENT_TOOL
from ...services import office_text
from ...toolhost.errors import ToolError
from ..fs.fsaccess import Deadline, fd_path, is_forbidden
from .workspace import WorkspaceTools, _read_all

if TYPE_CHECKING:
    from ...toolhost.host import ToolApp

#: The reader script the child runs (a file path: the child gets no path to the package).
READER = office_text.__file__
#: Memory ceiling of the reader child (address space; lxml and openpyxl map ~200 MiB at import).
READER_MEMORY_BYTES = 1 << 30
#: Answers kept, keyed by the file's content (see DocumentTool.read): at most this many, and
#: this many characters in all.
CACHE_ENTRIES, CACHE_CHARS = 64, 16 << 20

DESCRIPTION = (
    "Read a document in the workspace as text: xlsx workbooks (every sheet as a table of cell "
    "values, formulas listed with their values), docx (headings, paragraphs, tables), pdf (the "
    "text of each page), md and txt as they are."
)


class DocumentTool:
    """Registers ``read_document``.

    Args:
        workspace: Runs the reader as the agent.
    """

    def __init__(self, workspace: WorkspaceTools):
        self.workspace = workspace
        self._answers: OrderedDict[tuple, str] = OrderedDict()
        self._chars = 0

    def register(self, mcp: ToolApp) -> None:
        """Add the ``read_document`` tool to ``mcp``."""

        @mcp.tool(name=DOCUMENT_TOOL, description=DESCRIPTION,
                  annotations={"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
                               "openWorldHint": False})
        async def read_document(
            path: Annotated[str, Field(description="File path, relative to /workspace or absolute.")],
            sheet: Annotated[str | None, Field(description="xlsx: only this sheet (default every sheet).")] = None,
            pages: Annotated[str | None, Field(description="pdf: only these pages, e.g. '2' or '1-3,5' (1-based).")] = None,
            max_chars: Annotated[int | None, Field(ge=100, description="Most characters to return (capped by the task's output limit).")] = None,
        ) -> str:
            return await self.read(path, sheet, pages, max_chars)

    async def read(self, path: str, sheet: str | None = None, pages: str | None = None,
                   max_chars: int | None = None) -> str:
        """The document's text, read by a child process running as the agent.

        A file read before with the same bytes (hashed as the agent reads them now, so a file
        the agent may no longer read is refused as before) and the same arguments gets the
        same answer without a new child: the reader costs ~0.1 s of interpreter start, and
        episodes in one sandbox read the same documents after each reset.

        Raises:
            ToolError: the file is missing, refused, unreadable as a document, or the reader
                ran past the time limit or its memory.
        """
        full = self.workspace._abs(path)
        if is_forbidden(os.path.realpath(full)):
            raise ToolError(f"Permission denied: {path!r}")
        limit = self.workspace.cfg.output_limit
        chars = min(max_chars or limit, limit)
        digest = await self._digest(path)
        key = (full, digest, sheet, pages, chars)
        if digest is not None and key in self._answers:
            self._answers.move_to_end(key)
            answer = self._answers[key]
        else:
            answer = await self._run_reader(path, full, sheet, pages, chars)
            if digest is not None and await self._digest(path) == digest:  # unchanged while it was read
                self._keep(key, answer)
        return answer.replace(f"# {full}:", f"# {path}:", 1)

    async def _digest(self, path: str) -> str | None:
        """The SHA-256 of the file as the agent reads it now; None when it cannot (the reader
        then says why)."""
        try:
            return await self.workspace._timed(self._hash, path)
        except ToolError:
            return None

    def _hash(self, path: str, deadline: Deadline) -> str:
        fd, _ = self.workspace._open(path, os.O_RDONLY)
        try:
            h = hashlib.sha256()
            while chunk := os.read(fd, 1 << 20):
                if deadline.expired:
                    raise ToolError(f"tool timed out reading {path!r}")
                h.update(chunk)
            return h.hexdigest()
        finally:
            os.close(fd)

    def _keep(self, key: tuple, answer: str) -> None:
        if len(answer) > CACHE_CHARS // 4:
            return
        self._answers[key] = answer
        self._chars += len(answer)
        while len(self._answers) > CACHE_ENTRIES or self._chars > CACHE_CHARS:
            _, old = self._answers.popitem(last=False)
            self._chars -= len(old)

    async def _run_reader(self, path: str, full: str, sheet: str | None, pages: str | None, chars: int) -> str:
        argv = [sys.executable, "-I", READER, full, str(chars), str(READER_MEMORY_BYTES)]
        if sheet is not None:
            argv += ["--sheet", sheet]
        if pages is not None:
            argv += ["--pages", pages]
        result = await self.workspace.run_as_agent(argv)
        output = result["output"]
        if result["exit_code"] == office_text.EXIT_UNREADABLE:
            raise ToolError(output.replace(full, path))
        if result["exit_code"] != 0:
            tail = output.strip().splitlines()[-1:] or ["no output"]
            raise ToolError(f"could not read {path!r}: the reader stopped (exit {result['exit_code']}): {tail[0][:300]}")
        return output


class AgentFiles:
    """Workspace files read and written as the agent (services.base.WorkspaceFiles).

    Args:
        workspace: Gives the path rules and the agent's file-access pool.
    """

    def __init__(self, workspace: WorkspaceTools):
        self.workspace = workspace

    async def read(self, path: str, max_bytes: int) -> tuple[str, bytes]:
        """The file's path relative to /workspace and its bytes.

        Raises:
            ToolError: missing, refused, not a regular file, or larger than ``max_bytes``.
        """
        return await self.workspace._timed(self._read, path, max_bytes)

    async def write(self, path: str, data: bytes, overwrite: bool) -> str:
        """Write ``data`` at ``path`` (folders made as needed); returns the path relative to /workspace.

        Raises:
            ToolError: refused, or a file is there already and ``overwrite`` is off.
        """
        return await self.workspace._timed(self._write, path, data, overwrite)

    def _read(self, path: str, max_bytes: int, deadline: Deadline) -> tuple[str, bytes]:
        fd, st = self.workspace._open(path, os.O_RDONLY)
        try:
            if st.st_size > max_bytes:
                raise ToolError(f"{path!r} has {st.st_size} bytes, more than an attachment may have ({max_bytes})")
            data = _read_all(fd, max_bytes + 1)
            if len(data) > max_bytes:
                raise ToolError(f"{path!r} has more than {max_bytes} bytes, more than an attachment may have")
            return self.workspace._rel(fd_path(fd)), data
        finally:
            os.close(fd)

    def _write(self, path: str, data: bytes, overwrite: bool, deadline: Deadline) -> str:
        ws = self.workspace
        full = ws._abs(path)
        if is_forbidden(os.path.realpath(full)):
            raise ToolError(f"Permission denied: {path!r}")
        if not overwrite and os.path.lexists(full):
            raise ToolError(f"{path!r} exists already; choose another path or set overwrite")
        try:
            os.makedirs(os.path.dirname(full), exist_ok=True)
        except PermissionError:
            raise ToolError(f"Permission denied: {path!r}") from None
        except OSError as exc:
            raise ToolError(f"Cannot write {path!r}: {exc.strerror}") from None
        ws._overwrite(path, os.O_WRONLY | os.O_CREAT | (0 if overwrite else os.O_EXCL), data)
        return ws._rel(os.path.realpath(full))
