"""Cowork sandboxes and tasks inside Inspect AI: ``sandbox="cowork"``, the cowork tools, and
:func:`cowork_task` (a folder of specs as an Inspect ``Task`` graded by cowork).

Loaded by Inspect through the ``inspect_ai`` entry point in ``pyproject.toml``, so once the
extra is installed (``pip install 'cowork-runtime[inspect]'``) any task can name the provider::

    Task(dataset=[Sample(input="...", sandbox=("cowork", "specs/fix-csv-report"))], ...)

and ``inspect eval`` finds it with no import in the task file. Checked against inspect-ai
0.3.285 (its ``SandboxEnvironment`` contract in ``inspect_ai/util/_sandbox/environment.py``).

What maps onto what:

- ``exec`` runs through the sandbox's ``shell`` tool, as the unprivileged agent user, audited
  like any agent call: Inspect's own tools (``bash()``, ``python()``) act for the agent, so what
  they do is the agent's and the grader sees it. A task without the ``shell`` tool refuses
  ``exec`` (PermissionError). Only the agent user exists (``user="root"`` raises
  ``SandboxUserUnsupportedError``, which is also how Inspect's root probe learns it).
- ``read_file`` / ``write_file`` move exact bytes through the shell (base64 in chunks under
  the task's output limit), or through the ``read_file`` / ``write_file`` tools when the task
  has no shell (text only; ``read_file`` then returns what the tool shows: newlines
  normalised, cut at the output limit).
- The MCP tools of the task are offered to the model by :func:`cowork_tools`, a tool source
  that lists the current sample's sandbox tools and calls them there.
- :func:`cowork_scorer` exports the evidence (audit log, workspace, service state) with a trace
  rebuilt from Inspect's messages and grades it with the spec's checks, as ``cowork run`` does.

Multi-turn specs (``user``, ``days``, ``events``) need cowork's episode driver for their later
turns; :func:`cowork_task` leaves them out with a warning.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import secrets
import shlex
from collections.abc import Iterable, Sequence
from typing import Any, Literal, overload

try:
    from inspect_ai import Task
    from inspect_ai.agent import react
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser
    from inspect_ai.scorer import (
        Metric,
        SampleScore,
        Score,
        Scorer,
        Target,
        metric,
        scorer,
    )
    from inspect_ai.solver import Solver, TaskState
    from inspect_ai.tool import Tool, ToolDef, ToolError, ToolParams
    from inspect_ai.util import (
        ExecResult,
        OutputLimitExceededError,
        SandboxEnvironment,
        SandboxEnvironmentConfigType,
        SandboxEnvironmentLimits,
        SandboxEnvironmentSpec,
        SandboxUserUnsupportedError,
        sandbox,
        sandboxenv,
    )
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "cowork.integrations.inspect needs Inspect AI, which is not installed: "
        "pip install 'cowork-runtime[inspect]' (checked against inspect-ai 0.3.285)"
    ) from exc

from ..errors import SandboxError, SpecError
from ..formats import AGENT_UID, AGENT_USER
from ..sandbox import Sandbox, ToolResult
from ..spec.loader import LoadedSpec, load_spec, load_specs

log = logging.getLogger(__name__)

#: The sample metadata key naming a sample's spec (a task folder or task.yaml).
SPEC_KEY = "cowork_spec"
#: Where the shell tool runs commands; relative paths are taken from here.
WORKSPACE = "/workspace"
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
                raise _file_error({66: "File not found", 67: "is a directory", 68: "Permission denied"}.get(
                    code, r.text), file)
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
                raise _file_error({67: "is a directory", 68: "Permission denied"}.get(code, r.text), file)


def _split_marked(output: str, mark: str) -> tuple[str, str]:
    """Split the shell tool's combined output into (stdout, stderr) by the stderr marker.

    A marked line is stderr from the marker to its newline; what comes before the marker is
    stdout the stderr line cut into (it goes on after the stderr line). Lines are split on
    "\\n" only: ``str.splitlines`` also breaks at \\r, \\x1c-\\x1e and others a command prints.
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


# ---------------------------------------------------------------------------- tools
class CoworkTools:
    """Inspect tool source: the current sample's cowork tools, read from its sandbox.

    A tool error (bad arguments, a refusal, a failed command) goes back to the model as
    Inspect's ToolError, as it would to any cowork agent.
    """

    def __init__(self, sandbox_name: str | None = None):
        self.sandbox_name = sandbox_name

    def _env(self) -> CoworkSandboxEnvironment:
        return sandbox(self.sandbox_name).as_type(CoworkSandboxEnvironment)

    async def tools(self) -> list[Tool]:
        """One Inspect tool per MCP tool of the sample's sandbox, with its own schema."""
        return [self._tool(t) for t in await self._env().cowork.tools()]

    def _tool(self, mcp_tool: Any) -> Tool:
        name = mcp_tool.name

        async def execute(**kwargs: Any) -> str:
            r = await self._env().cowork.call_tool(name, kwargs)
            if r.is_error:
                raise ToolError(r.text)
            return r.text

        schema = dict(getattr(mcp_tool, "input_schema", None) or {})
        schema.pop("$schema", None)
        schema.pop("title", None)
        params = ToolParams.model_validate({"type": "object", **schema, "additionalProperties": False})
        for pname, param in params.properties.items():
            param.description = param.description or pname
        return ToolDef(execute, name=name, description=mcp_tool.description or name, parameters=params).as_tool()


def cowork_tools(sandbox_name: str | None = None) -> CoworkTools:
    """The cowork tools of the current sample, for Inspect agents (``react(tools=[cowork_tools()])``).

    Args:
        sandbox_name: The sample's sandbox to use (None: the default one).
    """
    return CoworkTools(sandbox_name)


# ---------------------------------------------------------------------------- scoring
def inspect_trace(task: str, messages: Sequence[ChatMessage], model: str) -> dict[str, Any]:
    """A trace in the shape of a cowork episode's (``Trajectory.model_dump()``) from Inspect's
    messages: what answer checks and the judge read (the agent's text), with its tool calls."""
    from ..episode import Trajectory

    out: list[dict[str, Any]] = []
    for m in messages:
        item: dict[str, Any] = {"role": m.role, "content": m.text}
        if m.role == "assistant" and getattr(m, "tool_calls", None):
            item["tool_calls"] = [{"id": c.id, "type": "function",
                                   "function": {"name": c.function, "arguments": json.dumps(c.arguments)}}
                                  for c in m.tool_calls]
        if m.role == "tool":
            item["tool_call_id"] = m.tool_call_id
        out.append(item)
    turns = sum(1 for m in out if m["role"] == "assistant")
    traj = Trajectory(task=task, agent=f"inspect:{model}", status="completed", messages=out, turns=turns)
    return {**traj.model_dump(), "source": "inspect"}


def _values(scores: list[SampleScore], key: str) -> list[float]:
    vals = []
    for s in scores:
        v = s.score.value.get(key) if isinstance(s.score.value, dict) else None
        if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)):
            vals.append(float(v))
    return vals


def _mean(vals: list[float]) -> float:
    return sum(vals) / len(vals) if vals else float("nan")


def _mean_of(key: str) -> Metric:
    """A metric: the mean of one field of the cowork score over the samples that have it."""

    def compute(scores: list[SampleScore]) -> float:
        return _mean(_values(scores, key))

    return compute


@metric
def completion() -> Metric:
    """Mean completion (weighted share of the completion checks passed)."""
    return _mean_of("completion")


@metric
def safety() -> Metric:
    """Share of samples known to be safe (a violation or an unjudged rule counts as unsafe)."""
    return _mean_of("safety")


@metric
def robustness() -> Metric:
    """Mean robustness over the samples where failures were injected (NaN when none was)."""
    return _mean_of("robustness")


@metric
def mean_score() -> Metric:
    """Mean cowork score (gated, weighted completion and robustness)."""
    return _mean_of("score")


@metric
def pass_rate() -> Metric:
    """Share of samples that passed (score reached the spec's threshold, safe)."""
    return _mean_of("passed")


@scorer(metrics=[completion(), safety(), robustness(), mean_score(), pass_rate()])
def cowork_scorer() -> Scorer:
    """The cowork grade of a sample: evidence exported from its sandbox, graded by the spec.

    The value is a dict: ``completion``, ``safety`` (1 safe, 0 violated or unknown),
    ``robustness`` (NaN when no failure was injected), ``score`` and ``passed`` (1/0); the
    explanation is the grade's summary and the metadata holds the whole grade. A sandbox the
    agent broke is graded on the evidence salvaged (score 0), as ``cowork run`` does.
    """
    from ..episode import _outside_checks, broken_sandbox_grade
    from ..grading import grade

    async def score(state: TaskState, target: Target) -> Score:
        env = sandbox().as_type(CoworkSandboxEnvironment)
        box = env.cowork
        trace = inspect_trace(box.spec.id, state.messages, str(state.model))
        broke: str | None = None
        try:
            ev = await box.export_evidence(trace=trace)
        except SandboxError as exc:
            who, cause = await box.diagnose()
            if who != "agent":
                raise
            broke = f"evidence export failed: {cause}: {exc}"
            ev = await box.salvage_evidence(trace=trace)
        await _outside_checks(box.loaded, ev, box.image, None)
        g = grade(box.spec, ev)
        if broke:
            g = broken_sandbox_grade(g, broke, ev)
        # NaN, not None, for "no failure injected": Inspect's reducers and metrics skip NaN.
        value = {"completion": g.completion, "safety": 1.0 if g.safe is True else 0.0,
                 "robustness": float("nan") if g.robustness is None else g.robustness, "score": g.score, "passed": 1.0 if g.passed else 0.0}
        return Score(value=value, answer=state.output.completion or None, explanation=g.summary(),
                     metadata={"grade": g.model_dump(mode="json")})

    return score


# ---------------------------------------------------------------------------- task
def cowork_task(specs: str | os.PathLike | Iterable[str | os.PathLike], *, solver: Solver | Any = None,
                name: str | None = None, **task_args: Any) -> Task:
    """An Inspect task from cowork specs: one sample per spec, each in its own cowork sandbox,
    graded by :func:`cowork_scorer`.

    Args:
        specs: A task folder, a task.yaml, a folder of task folders, or several of these.
        solver: Inspect solver or agent (default: ``react`` with :func:`cowork_tools`, ending
            when the model stops calling tools). Each sample's input is the spec's system
            prompt (or cowork's default) and its prompt.
        name: The task's name (default ``cowork``).
        **task_args: More ``Task`` arguments (``epochs``, ``message_limit``, ...).

    Raises:
        SpecError: a spec is invalid, two share an id, or no single-turn spec was given.
    """
    paths = [specs] if isinstance(specs, (str, os.PathLike)) else list(specs)
    loaded: list[LoadedSpec] = []
    for item in load_specs(paths):
        if item.spec.user is not None or item.spec.days or item.spec.events:
            log.warning("cowork_task: %s is multi-turn (user, days or events), which needs cowork's own "
                        "episode driver; left out", item.spec.id)
            continue
        loaded.append(item)
    if not loaded:
        raise SpecError(f"cowork_task: no single-turn cowork spec found in {[str(p) for p in paths]}")
    from ..episode import DEFAULT_SYSTEM

    # The spec's system prompt (or cowork's default) travels with each sample, since specs differ.
    samples = [Sample(id=item.spec.id,
                      input=[ChatMessageSystem(content=item.spec.system_prompt or DEFAULT_SYSTEM),
                             ChatMessageUser(content=item.spec.prompt)],
                      metadata={SPEC_KEY: str(item.root.resolve()), "title": item.spec.title},
                      sandbox=SandboxEnvironmentSpec("cowork", str(item.root.resolve())))
               for item in loaded]
    if "message_limit" not in task_args:
        # The spec's turn limit, in messages: each turn is an assistant message and its tool results.
        task_args["message_limit"] = 2 + 2 * max(item.spec.limits.max_turns for item in loaded)
    return Task(dataset=samples, solver=solver if solver is not None else _default_agent(),
                scorer=cowork_scorer(), name=name or "cowork", **task_args)


def _default_agent() -> Any:
    """``react`` with the cowork tools and no submit tool (the model's last reply is its
    answer, as in a cowork episode); the system prompt is the sample's own."""
    return react(prompt=None, tools=[cowork_tools()], submit=False)


def load_spec_for_sample(metadata: dict[str, Any]) -> LoadedSpec:
    """The spec a sample of :func:`cowork_task` was made from (e.g. in a custom scorer).

    Raises:
        SpecError: the metadata names no spec, or it is invalid.
    """
    return load_spec(_spec_path(None, metadata))


__all__ = [
    "SPEC_KEY",
    "CoworkSandboxEnvironment",
    "CoworkTools",
    "completion",
    "cowork_scorer",
    "cowork_task",
    "cowork_tools",
    "inspect_trace",
    "load_spec_for_sample",
    "mean_score",
    "pass_rate",
    "robustness",
    "safety",
]
