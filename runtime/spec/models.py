"""Task spec v1: pydantic models for ``specs/<task-id>/task.yaml``."""

from __future__ import annotations

import posixpath
import re
from datetime import datetime, timezone
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..formats import WORKSPACE_TOOLS

_ID = r"^[a-z0-9][a-z0-9._-]{0,63}$"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def workspace_path(value: str) -> str:
    """Normalise a workspace-relative path; reject absolute paths and ``..`` escapes."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a non-empty relative path")
    if value.startswith("/"):
        raise ValueError(f"path {value!r} is absolute; give it relative to the workspace")
    norm = posixpath.normpath(value)
    if norm == ".." or norm.startswith("../"):
        raise ValueError(f"path {value!r} escapes the workspace")
    return norm


WsPath = Annotated[str, Field(description="Path relative to /workspace.")]


# --------------------------------------------------------------------------- workspace
class WorkspaceFile(_Frozen):
    """One file of the initial workspace, or the permissions of one copied from ``dir``."""

    path: WsPath
    """Where the file lands, relative to /workspace."""
    content: str | None = None
    """Inline text content. Omit to take the file from ``dir`` under the same path."""
    source: str | None = None
    """A file beside task.yaml to copy, instead of inline content."""
    mode: str = "0644"
    """Octal permission bits, e.g. "0644" or "0400"."""
    owner: Literal["agent", "root"] = "agent"
    """Who owns the file: the agent user, or root (the agent cannot change a root-owned file)."""

    _check_path = field_validator("path")(lambda cls, v: workspace_path(v))

    @field_validator("mode")
    @classmethod
    def _mode(cls, v: str) -> str:
        if not re.fullmatch(r"0?[0-7]{3}", v):
            raise ValueError(f"mode {v!r} is not octal permission bits like '0644'")
        return v.zfill(4)

    @model_validator(mode="after")
    def _one_source(self) -> "WorkspaceFile":
        if self.content is not None and self.source is not None:
            raise ValueError("give either content or source, not both")
        return self


class Workspace(_Frozen):
    """The initial /workspace of the sandbox."""

    dir: str | None = "workspace"
    """A folder beside task.yaml whose files are all copied into /workspace (agent-owned, 0644)."""
    files: list[WorkspaceFile] = []
    """Inline files, and owner/mode overrides for files copied from ``dir``."""


# --------------------------------------------------------------------------- limits
class Limits(_Frozen):
    """Resource and time limits of one episode."""

    max_turns: int = Field(30, ge=1, le=1000)
    """Most assistant turns before the episode is stopped."""
    episode_timeout_s: float = Field(600, gt=0)
    """Wall-clock limit for the whole episode."""
    tool_timeout_s: float = Field(30, gt=0)
    """Limit for one tool call; a call past it is cut and reported as a tool error."""
    output_limit_bytes: int = Field(16384, ge=256)
    """Largest tool output returned to the agent; longer output is truncated and says so."""
    cpus: float = Field(1.0, gt=0, le=64)
    """CPU share of the container."""
    memory_mb: int = Field(512, ge=32)
    """Memory limit of the container, workspace and tmp included."""
    pids: int = Field(256, ge=16)
    """Most processes and threads in the container."""
    disk_mb: int = Field(64, ge=1)
    """Size of the writable /workspace; /tmp gets the same."""


# --------------------------------------------------------------------------- matchers
class Matcher(_Frozen):
    """How to match one value: exactly one of the fields is set."""

    equals: Any = None
    contains: str | None = None
    regex: str | None = None
    glob: str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> "Matcher":
        if len(self.model_fields_set & {"equals", "contains", "regex", "glob"}) != 1:
            raise ValueError("a matcher needs exactly one of equals, contains, regex, glob")
        if self.regex is not None:
            _compile(self.regex)
        return self


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from exc


def _as_matcher(v: Any) -> Any:
    return v if isinstance(v, dict) else {"equals": v}


ArgMatchers = dict[str, Annotated[Matcher, Field()]]


# --------------------------------------------------------------------------- checks
class _Check(_Frozen):
    id: str | None = None
    """Stable name of the check in grades; defaults to ``<type>-<n>``."""
    description: str | None = None
    """What the check means, for people reading the grade."""
    weight: float = Field(1.0, ge=0)
    """Weight in the completion score."""


class FileExists(_Check):
    """The file exists in the final workspace."""
    type: Literal["file_exists"]
    path: WsPath
    _p = field_validator("path")(lambda cls, v: workspace_path(v))


class FileAbsent(_Check):
    """The path does not exist in the final workspace."""
    type: Literal["file_absent"]
    path: WsPath
    _p = field_validator("path")(lambda cls, v: workspace_path(v))


class FileContains(_Check):
    """The file's text contains ``text``."""
    type: Literal["file_contains"]
    path: WsPath
    text: str
    _p = field_validator("path")(lambda cls, v: workspace_path(v))


class FileRegex(_Check):
    """A regular expression finds a match in the file's text (multiline mode)."""
    type: Literal["file_regex"]
    path: WsPath
    pattern: str
    _p = field_validator("path")(lambda cls, v: workspace_path(v))

    @field_validator("pattern")
    @classmethod
    def _re(cls, v: str) -> str:
        _compile(v)
        return v


class JsonEquals(_Check):
    """The JSON file's value at a dotted field path equals ``value``."""
    type: Literal["json_equals"]
    path: WsPath
    field: str
    """Dotted path into the document, list indexes as numbers: ``servers.0.port``."""
    value: Any
    _p = field_validator("path")(lambda cls, v: workspace_path(v))


class PathUnchanged(_Check):
    """The files at these paths (globs allowed) are byte-for-byte as seeded, and none was added or removed."""
    type: Literal["path_unchanged"]
    paths: list[str] = Field(min_length=1)

    @field_validator("paths")
    @classmethod
    def _ps(cls, v: list[str]) -> list[str]:
        return [workspace_path(p) for p in v]


class ToolCalled(_Check):
    """Some audited call of ``tool`` matched every argument matcher."""
    type: Literal["tool_called"]
    tool: str
    args: dict[str, Matcher] = {}
    min_count: int = Field(1, ge=1)

    _m = field_validator("args", mode="before")(lambda cls, v: {k: _as_matcher(x) for k, x in (v or {}).items()} if isinstance(v, dict) else v)


class ToolNotCalled(_Check):
    """No audited call of ``tool`` matched every argument matcher."""
    type: Literal["tool_not_called"]
    tool: str
    args: dict[str, Matcher] = {}

    _m = field_validator("args", mode="before")(lambda cls, v: {k: _as_matcher(x) for k, x in (v or {}).items()} if isinstance(v, dict) else v)


class ShellMatches(_Check):
    """Some shell command the agent ran matches ``pattern``."""
    type: Literal["shell_matches"]
    pattern: str

    @field_validator("pattern")
    @classmethod
    def _re(cls, v: str) -> str:
        _compile(v)
        return v


class ShellForbidden(_Check):
    """No shell command the agent ran matches ``pattern`` (a forbidden operation)."""
    type: Literal["shell_forbidden"]
    pattern: str

    @field_validator("pattern")
    @classmethod
    def _re(cls, v: str) -> str:
        _compile(v)
        return v


Check = Annotated[
    Union[FileExists, FileAbsent, FileContains, FileRegex, JsonEquals, PathUnchanged,
          ToolCalled, ToolNotCalled, ShellMatches, ShellForbidden],
    Field(discriminator="type"),
]


# --------------------------------------------------------------------------- scripts
class Step(_Frozen):
    """One scripted tool call."""

    tool: str
    """Tool name, as listed by the sandbox."""
    args: dict[str, Any] = {}
    """Arguments of the call."""


# --------------------------------------------------------------------------- task
class TaskSpec(_Frozen):
    """A task: the request, the initial workspace, the tools, the checks and the limits."""

    version: Literal[1] = 1
    """Spec format version."""
    id: str = Field(pattern=_ID)
    """Unique task id: lowercase letters, digits, '.', '_' and '-'."""
    title: str = Field(min_length=1)
    """One line for people."""
    tags: list[str] = []
    """Capabilities the task exercises (files, csv, safety, ...)."""
    prompt: str = Field(min_length=1)
    """The user's request, given to the agent as its first user message."""
    system_prompt: str | None = None
    """Optional system message for model policies."""
    clock: datetime = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
    """The fixed 'now' of the task, for time-dependent tools."""
    workspace: Workspace = Workspace()
    """The initial /workspace."""
    tools: list[str] = list(WORKSPACE_TOOLS)
    """Allow-list of tools the episode exposes."""
    limits: Limits = Limits()
    """Time and resource limits."""
    checks: list[Check] = Field(min_length=1)
    """Completion checks; the weighted share that pass is the completion score."""
    safety: list[Check] = []
    """Safety rules: each must hold; one that fails is a violation and gates the score."""
    pass_threshold: float = Field(1.0, ge=0, le=1)
    """Least score that counts as passed."""
    oracle: list[Step] = Field(min_length=1)
    """Scripted reference solution (kept out of the image)."""
    violation: list[Step] = Field(min_length=1)
    """Scripted unsafe run that must trip a safety rule (kept out of the image)."""

    @field_validator("tools")
    @classmethod
    def _tools(cls, v: list[str]) -> list[str]:
        for name in v:
            if name not in WORKSPACE_TOOLS:
                raise ValueError(f"unknown tool {name!r}; known tools: {', '.join(WORKSPACE_TOOLS)}")
        if len(set(v)) != len(v):
            raise ValueError("tools lists a name twice")
        return v

    @model_validator(mode="after")
    def _ids(self) -> "TaskSpec":
        seen: set[str] = set()
        for group in (self.checks, self.safety):
            for n, c in enumerate(group):
                cid = c.id or f"{c.type}-{n}"
                if cid in seen:
                    raise ValueError(f"duplicate check id {cid!r}")
                seen.add(cid)
        paths = [f.path for f in self.workspace.files]
        dup = {p for p in paths if paths.count(p) > 1}
        if dup:
            raise ValueError(f"workspace.files lists {sorted(dup)[0]!r} twice")
        return self

    def check_id(self, group: str, index: int) -> str:
        """The id a check is reported under."""
        c = (self.checks if group == "checks" else self.safety)[index]
        return c.id or f"{c.type}-{index}"
