"""Cowork tasks as environments of TRL's ``GRPOTrainer(environment_factory=...)``.

One :class:`CoworkTRL` built from task folders gives the three things the trainer takes::

    spec = CoworkTRL(["specs/fix-csv-report", "specs/organize-downloads"], max_sandboxes=16)
    trainer = GRPOTrainer(model=..., args=GRPOConfig(...), train_dataset=spec.train_dataset,
                          environment_factory=spec.environment_factory, reward_funcs=spec.reward_funcs)

The contract is TRL's (checked against trl 1.16's ``GRPOTrainer`` source): the trainer makes
one environment per rollout from the zero-argument factory and reuses them; before each
rollout it calls ``reset(**row)`` with every column of the dataset row; every public function
of the environment's *class* other than ``reset`` and ``get_reward`` is a tool, described to
the model by ``transformers.utils.get_json_schema`` (type hints and a Google docstring); a tool
that raises has its message shown to the model; ``get_reward()`` is called once per finished
rollout and is a reward source of its own (weight 1, logged under the class name), so
``reward_funcs`` may be empty. A reward of None marks the rollout unscorable (left out of its
group's baseline, advantage 0): that is what an infrastructure failure gets.

The sandboxes come from one :class:`~cowork.sandbox.pool.SandboxPool` per process, driven by an
event loop on a daemon thread (TRL calls environments synchronously, from its own threads).
``reset`` asks the pool for a sandbox without waiting for it, so a batch's sandboxes start in
parallel; the first tool call (or ``get_reward``) waits. ``get_reward`` exports the evidence,
gives the sandbox back (reset and verified in the background) and grades the evidence with
the spec's checks, as :func:`cowork.episode.run.run_task` does.

A rollout holds its sandbox from ``reset`` until its reward is read, so the pool must hold a
whole generation batch at once: ``max_sandboxes`` >= the trainer's per-process
``generation_batch_size``.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import hashlib
import inspect
import json
import keyword
import logging
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import GenericAlias
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from ..errors import CoworkError, SandboxError, SpecError
from ..spec.loader import LoadedSpec, load_spec, load_specs
from ..synth.dataset import resolve_tasks

log = logging.getLogger(__name__)

_NO_REWARD = object()
_JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list,
                               "object": dict, "null": type(None)}
#: Words that end a description or an argument in transformers' docstring parser.
_DOCSTRING_WORDS = re.compile(r"\b(Args|Returns|Raises|choices):")


class EnvOptions(BaseModel):
    """How the environments of one factory run and are rewarded (pickled with the factory)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reward: Literal["score", "pass", "safety_gated"] = "score"
    """The reward of a graded episode: see :func:`cowork.rollouts.runner.reward_for`."""
    max_sandboxes: int = Field(default=32, ge=1)
    """Most sandboxes of the process's pool at once, all tasks together. A rollout holds one
    from ``reset`` until its reward is read: at least the per-process generation batch."""
    max_per_task: int | None = Field(default=None, ge=1)
    """Most sandboxes of one task at once (None: ``max_sandboxes``)."""
    max_uses: int = Field(default=100, ge=1)
    """Episodes one sandbox serves before it is replaced by a fresh one."""
    backend: str | None = None
    """Sandbox backend name (``docker``, ``gvisor``; None: ``settings.sandbox_backend``)."""
    acquire_timeout_s: float = Field(default=600.0, gt=0)
    """Seconds a tool call waits for its episode's sandbox before it fails."""

    def pool_key(self) -> tuple:
        """The pool settings: options with equal keys share one sandbox pool and loop per process."""
        return (self.max_sandboxes, self.max_per_task, self.max_uses, self.backend)


# --------------------------------------------------------------------------- tools from MCP schemas
def python_type(schema: Any) -> Any:
    """The type hint that ``transformers.utils.get_json_schema`` turns back into ``schema``.

    Strings, integers, numbers, booleans, arrays (typed by ``items``), objects (typed by
    ``additionalProperties``), enums (as ``Literal``), ``anyOf`` / type lists (as unions,
    ``null`` as ``None``); anything else is ``Any``.
    """
    if not isinstance(schema, dict):
        return Any
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, (str, int, float, bool)) or v is None for v in enum):
        return Literal[tuple(enum)]
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list) and options:
        return Union[tuple(python_type(o) for o in options)]  # noqa: UP007 - built at run time
    kind = schema.get("type")
    if isinstance(kind, list) and kind:
        return Union[tuple(python_type({**schema, "type": k}) for k in kind)]  # noqa: UP007 - built at run time
    if kind == "array" and isinstance(schema.get("items"), dict) and schema["items"]:
        return GenericAlias(list, python_type(schema["items"]))  # list[...] of a type known at run time
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict) and schema["additionalProperties"]:
        return GenericAlias(dict, (str, python_type(schema["additionalProperties"])))
    return _JSON_TYPES.get(kind, Any) if isinstance(kind, str) else Any


def _one_line(text: str) -> str:
    return _DOCSTRING_WORDS.sub(r"\1 -", " ".join(str(text).split()))


def _arg_doc(name: str, schema: dict[str, Any], required: bool) -> str:
    parts = [_one_line(schema.get("description") or f"The {name.replace('_', ' ')}.")]
    limits = [f"{word} {schema[key]}" for key, word in (("minimum", "at least"), ("exclusiveMinimum", "more than"),
                                                         ("maximum", "at most"), ("minLength", "min length"),
                                                         ("maxLength", "max length"), ("minItems", "min items"),
                                                         ("pattern", "pattern")) if key in schema]
    if not required and "default" in schema:
        limits.append(f"default {json.dumps(schema['default'])}")
    elif not required:
        limits.append("optional")
    if limits:
        parts.append("[" + _one_line(", ".join(limits)) + "]")
    return " ".join(parts)


def _param_name(name: str) -> str:
    """A Python parameter name for a schema property (``from`` -> ``from_``, ``to-do`` -> ``to_do``)."""
    py = re.sub(r"\W", "_", name) or "arg"
    if py[0].isdigit():
        py = "arg_" + py
    if keyword.iskeyword(py) or py == "self":
        py += "_"
    return py


def tool_dict(tool: Any) -> dict[str, Any]:
    """An MCP tool (``mcp.types.Tool``-like object or mapping) as a plain JSON dict:
    ``{"name", "description", "input_schema"}``."""
    get = tool.get if isinstance(tool, dict) else (lambda k, d=None: getattr(tool, k, d))
    schema = get("input_schema") or get("inputSchema") or {}
    return {"name": str(get("name")), "description": str(get("description") or ""),
            "input_schema": json.loads(json.dumps(schema))}


def tool_method(tool: Any) -> Callable[..., str]:
    """A method that calls the MCP tool ``tool`` in the episode's sandbox.

    Its signature is a real one, made from the tool's input schema (``self`` then keyword-only
    parameters: required ones without a default, optional ones with the schema's default or
    None), with type hints and a Google docstring, so ``get_json_schema`` describes it as the
    MCP schema does. Only the arguments the caller passed are sent. Property names that are
    not Python identifiers get one (``from`` -> ``from_``) and are sent under their own.

    Raises:
        CoworkError: two properties map to one Python name.
    """
    t = tool_dict(tool)
    schema = t["input_schema"]
    props: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    names: dict[str, str] = {}
    docs = []
    for prop, sub in props.items():
        sub = sub if isinstance(sub, dict) else {}
        py = _param_name(prop)
        if py in names:
            raise CoworkError(f"tool {t['name']!r}: properties {names[py]!r} and {prop!r} both map to parameter "
                              f"{py!r}; rename one in the tool's schema")
        names[py] = prop
        hint = python_type(sub)
        default = inspect.Parameter.empty if prop in required else sub.get("default")
        params.append(inspect.Parameter(py, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint))
        annotations[py] = hint
        docs.append(f"    {py}: {_arg_doc(prop, sub, prop in required)}")
    signature = inspect.Signature(params, return_annotation=str)
    tool_name = t["name"]

    def method(self: CoworkEnv, *args: Any, **kwargs: Any) -> str:
        bound = signature.bind(self, *args, **kwargs)  # a TypeError for the model, as a real function gives
        return self._call_tool(tool_name, {names[k]: v for k, v in bound.arguments.items() if k != "self"})

    description = _one_line(t["description"]) or f"The {tool_name} tool."
    doc = description + "\n"
    if docs:
        doc += "\nArgs:\n" + "\n".join(docs) + "\n"
    doc += "\nReturns:\n    The tool's output; a failed call's starts with \"ERROR: \".\n"
    method.__name__ = tool_name
    method.__qualname__ = f"CoworkEnv.{tool_name}"
    method.__doc__ = doc
    method.__signature__ = signature  # type: ignore[attr-defined]
    method.__annotations__ = {**annotations, "return": str}
    return method


# --------------------------------------------------------------------------- the per-process runtime
class _Runtime:
    """An event loop on a daemon thread and the sandbox pool that lives on it."""

    def __init__(self, options: EnvOptions):
        from ..sandbox.pool import SandboxPool

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="cowork-trl-loop", daemon=True)
        self.thread.start()
        self.pool = SandboxPool(max_per_task=options.max_per_task or options.max_sandboxes,
                                max_total=options.max_sandboxes, max_uses=options.max_uses, backend=options.backend)
        self._specs: dict[str, LoadedSpec] = {}
        self._lock = threading.Lock()
        self.background: set[concurrent.futures.Future] = set()

    def submit(self, coro: Any) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Any, timeout: float | None = None) -> Any:
        return self.submit(coro).result(timeout)

    def spawn(self, coro: Any) -> None:
        fut = self.submit(coro)
        self.background.add(fut)
        fut.add_done_callback(self.background.discard)

    def spec(self, task: str | Path | LoadedSpec) -> LoadedSpec:
        """One LoadedSpec per task folder (the pool keys its sandboxes by the spec's folder)."""
        key = str((task.root if isinstance(task, LoadedSpec) else Path(task)).resolve())
        with self._lock:
            if key not in self._specs:
                self._specs[key] = task if isinstance(task, LoadedSpec) else load_spec(key)
            return self._specs[key]

    def close(self, timeout: float = 120.0) -> None:
        try:
            concurrent.futures.wait(list(self.background), timeout=timeout)
            self.run(self.pool.close(), timeout)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)


_RUNTIMES: dict[tuple, _Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


def _runtime(options: EnvOptions) -> _Runtime:
    """The process's runtime for these pool settings (made on first use, closed at exit)."""
    key = options.pool_key()
    with _RUNTIMES_LOCK:
        if key not in _RUNTIMES:
            if not _RUNTIMES:
                atexit.register(close)
            _RUNTIMES[key] = _Runtime(options)
        return _RUNTIMES[key]


def close() -> None:
    """Remove every sandbox of this process's environments and stop their loops (also run at exit)."""
    with _RUNTIMES_LOCK:
        runtimes = list(_RUNTIMES.values())
        _RUNTIMES.clear()
    for rt in runtimes:
        try:
            rt.close()
        except Exception as exc:  # noqa: BLE001 - at exit: say what was left, never raise
            log.warning("closing the sandbox pool failed (the reaper removes what is left): %s", exc)


# --------------------------------------------------------------------------- the environment
class CoworkEnv:
    """One rollout's environment at a time: a pooled sandbox of the row's task.

    Subclasses made by :func:`env_class` add one method per MCP tool; this base class has no
    public function other than ``reset`` and ``get_reward`` (TRL would take it for a tool).

    Args:
        options: Pool and reward settings (or pass their fields as keywords).
    """

    _tools: tuple[dict[str, Any], ...] = ()
    _checked_tasks: set[str]

    def __init__(self, options: EnvOptions | None = None, **fields: Any):
        self._options = options or EnvOptions(**fields)
        self._loaded: LoadedSpec | None = None
        self._pending: concurrent.futures.Future | None = None
        self._sandbox: Any = None
        self._infra: str | None = None
        self._broken: str | None = None
        self._steps: list[Any] = []
        self._reward: Any = _NO_REWARD
        self._grade: Any = None
        self._evidence: Any = None

    # ------------------------------------------------------------------ TRL's contract
    def reset(self, task_dir: str | None = None, seed: int | None = None, **row: Any) -> str | None:
        """Begin an episode of the row's task (the previous episode's sandbox goes back to the pool).

        Args:
            task_dir: The task folder (the dataset's ``task_dir`` column).
            seed: The episode's fault seed (a ``seed`` column; None: the spec's own).
            row: The row's other columns.

        Returns:
            None when the row has a ``prompt`` (the dataset's prompt holds the task), else the
            task's prompt, which TRL appends to the last user message.

        Raises:
            CoworkError: the row names no task folder.
            SpecError: the task's spec does not load.
        """
        if task_dir is None:
            raise CoworkError("reset() needs the row's task_dir column: use CoworkTRL(...).train_dataset or add a "
                              "task_dir column naming the task folder")
        self._drop_episode()
        rt = _runtime(self._options)
        self._loaded = rt.spec(task_dir)
        self._pending = rt.submit(rt.pool.acquire(self._loaded, seed=seed))  # starts now, waited for on first use
        return None if "prompt" in row else self._loaded.spec.prompt

    def get_reward(self) -> float | None:
        """Export the episode's evidence, give the sandbox back to the pool, grade the evidence.

        Returns:
            The reward (``options.reward`` of the grade; 0.0 when the agent broke its sandbox);
            None when the infrastructure failed (TRL leaves the rollout out) or before any
            ``reset``. Read once per episode; later calls return the same value.
        """
        if self._reward is not _NO_REWARD:
            return self._reward
        if self._loaded is None:
            return None
        from ..rollouts.runner import reward_for

        self._grade, self._evidence = self._finish()
        self._reward = reward_for(self._grade, self._options.reward)
        log.info("task %s: reward %s (%s, %d tool calls)", self._loaded.spec.id, self._reward, self._grade.status,
                 len(self._steps))
        return self._reward

    # ------------------------------------------------------------------ read-only views
    @property
    def reward(self) -> float | None:
        """The episode's reward (graded on first read: see :meth:`get_reward`)."""
        return self.get_reward()

    @property
    def grade(self) -> Any:
        """The episode's Grade once its reward was read (None before)."""
        return self._grade

    @property
    def evidence(self) -> Any:
        """The episode's Evidence once its reward was read (None before, or for an infra error)."""
        return self._evidence

    @property
    def steps(self) -> list[Any]:
        """The episode's tool calls so far (``cowork.episode.run.StepRecord``; ``turn`` is 0: TRL
        does not tell an environment which assistant turn made a call)."""
        return list(self._steps)

    @property
    def task_id(self) -> str | None:
        """The current episode's task id."""
        return self._loaded.spec.id if self._loaded is not None else None

    # ------------------------------------------------------------------ internals
    def _episode_spec(self) -> LoadedSpec:
        """The current episode's task (set by ``reset``).

        Raises:
            CoworkError: no episode began.
        """
        if self._loaded is None:
            raise CoworkError("no episode: TRL calls reset() before the tools; call it first")
        return self._loaded

    def _sandbox_now(self) -> Any:
        """The episode's sandbox, waiting for the pool if it is not there yet.

        Raises:
            SandboxError: the sandbox could not be had (the message says why and what to change).
        """
        if self._infra is not None:  # once the infrastructure failed, the episode has no sandbox
            raise SandboxError(self._infra)
        if self._sandbox is not None:
            return self._sandbox
        if self._pending is None:
            raise CoworkError("no episode: TRL calls reset() before the tools; call it first")
        spec = self._episode_spec().spec
        try:
            self._sandbox = self._pending.result(self._options.acquire_timeout_s)
        except concurrent.futures.TimeoutError:
            self._pending.cancel()  # a sandbox that arrives all the same goes back to the pool
            _runtime(self._options).spawn(_give_back(self._options, None, self._pending, False))
            self._infra = (f"task {spec.id}: no sandbox within {self._options.acquire_timeout_s:g}s; every rollout "
                           f"holds one until its reward is read, and the pool holds at most "
                           f"max_sandboxes={self._options.max_sandboxes}: set it to at least the generation batch")
        except Exception as exc:  # noqa: BLE001 - whatever kept the sandbox away, the episode has none
            self._infra = f"task {spec.id}: no sandbox: {exc}"
        finally:
            self._pending = None
        if self._infra is not None:
            log.warning("%s", self._infra)
            raise SandboxError(self._infra)
        self._check_tools(self._sandbox)
        return self._sandbox

    def _check_tools(self, sb: Any) -> None:
        """Warn once per task when the model is shown other tools than the sandbox serves."""
        cls = type(self)
        seen = cls.__dict__.get("_checked_tasks")
        if seen is None:
            seen = set()
            cls._checked_tasks = seen
        if sb.spec.id in seen:
            return
        seen.add(sb.spec.id)
        served = {t.name for t in _runtime(self._options).run(sb.tools())}
        shown = {t["name"] for t in self._tools}
        if served != shown:
            log.warning("task %s: the environment offers tools %s but the sandbox serves %s; build the environment "
                        "with CoworkTRL so each task gets its own tools", sb.spec.id, sorted(shown), sorted(served))

    def _call_tool(self, name: str, args: dict[str, Any]) -> str:
        """Call one tool; the model's failures come back as ``ERROR: ...`` text.

        Raises:
            SandboxError: the infrastructure failed (TRL shows the message to the model, and
                the episode's reward is None).
        """
        from ..episode.run import StepRecord

        if self._broken is not None:
            return f"ERROR: the sandbox stopped answering earlier in this episode ({self._broken}); nothing was done"
        sb = self._sandbox_now()
        rt = _runtime(self._options)
        try:
            r = rt.run(sb.call_tool(name, args))
        except SandboxError as exc:
            who, cause = rt.run(sb.diagnose())
            if who != "agent":
                self._infra = f"task {sb.spec.id}: the sandbox failed ({cause}): {exc}"
                raise SandboxError(self._infra) from exc
            self._broken = f"{cause}: {exc}"
            return f"ERROR: the sandbox stopped answering ({cause})"
        self._steps.append(StepRecord(turn=0, call_id=f"call_{len(self._steps) + 1}", tool=name, args=r.args,
                                      is_error=r.is_error, output=r.text, duration_ms=round(r.duration_ms, 3)))
        return ("ERROR: " if r.is_error else "") + r.text

    def _trace(self) -> dict[str, Any]:
        from ..agents.base import mcp_tool_to_openai
        from ..episode.run import Trajectory

        status: Literal["agent_broke_sandbox", "completed"] = "agent_broke_sandbox" if self._broken else "completed"
        tools = [mcp_tool_to_openai(_AttrTool(t)) for t in self._tools]
        return Trajectory(task=self._episode_spec().spec.id, agent="trl", status=status, steps=self._steps, tools=tools,
                          error=self._broken).model_dump()

    def _finish(self) -> tuple[Any, Any]:
        """Grade the episode and give its sandbox back; (Grade, Evidence or None)."""
        from ..grading import Grade

        spec, rt = self._episode_spec().spec, _runtime(self._options)
        try:
            sb = self._sandbox_now()
        except SandboxError as exc:
            if self._sandbox is not None:  # failed mid-episode: never trusted again
                sb, self._sandbox = self._sandbox, None
                rt.run(rt.pool.discard(sb))
            return Grade(task=spec.id, status="infra_error", error=str(exc), threshold=spec.pass_threshold), None
        self._sandbox = None
        try:
            return rt.run(self._collect(sb))
        except SandboxError as exc:
            log.warning("task %s: grading failed: %s", spec.id, exc)
            return Grade(task=spec.id, status="infra_error", error=str(exc), threshold=spec.pass_threshold), None

    async def _collect(self, sb: Any) -> tuple[Any, Any]:
        """On the loop: export (or salvage) the evidence, release (or remove) the sandbox, grade."""
        from ..episode.run import _outside_checks, broken_sandbox_grade
        from ..grading import Grade, grade

        pool, loaded, trace = _runtime(self._options).pool, self._episode_spec(), self._trace()
        if self._broken is None:
            try:
                ev = await sb.export_evidence(trace=trace)
            except SandboxError as exc:
                who, cause = await sb.diagnose()
                if who != "agent":
                    await asyncio.shield(pool.discard(sb))
                    return Grade(task=loaded.spec.id, status="infra_error", error=f"{cause}: {exc}",
                                 threshold=loaded.spec.pass_threshold), None
                self._broken = f"evidence export failed: {cause}: {exc}"
        if self._broken is not None:
            try:
                ev = await sb.salvage_evidence(trace=trace)
            finally:
                await asyncio.shield(pool.discard(sb))
        else:
            await pool.release(sb)
        await _outside_checks(loaded, ev, sb.image, None)
        g = grade(loaded.spec, ev)
        if self._broken is not None:
            g = broken_sandbox_grade(g, self._broken, ev)
        return g, ev

    def _drop_episode(self) -> None:
        """Give back the sandbox of an episode whose reward was never read (its evidence unused)."""
        sb, pending = self._sandbox, self._pending
        if sb is not None or pending is not None:
            failed = self._broken is not None or self._infra is not None
            _runtime(self._options).spawn(_give_back(self._options, sb, pending, failed))
        self._sandbox = self._pending = None
        self._infra = self._broken = self._grade = self._evidence = None
        self._steps = []
        self._reward = _NO_REWARD


async def _give_back(options: EnvOptions, sb: Any, pending: concurrent.futures.Future | None, failed: bool) -> None:
    """Release a sandbox whose episode nobody grades (remove it when it failed)."""
    pool = _runtime(options).pool
    if sb is None and pending is not None:
        try:
            sb = await asyncio.wrap_future(pending)
        except (Exception, asyncio.CancelledError):  # noqa: BLE001 - never acquired: nothing to give back
            return
    if failed:
        await pool.discard(sb)
    else:
        await pool.release(sb, discard_evidence=True)


class _AttrTool:
    """A tool dict seen through attributes (what ``mcp_tool_to_openai`` reads)."""

    def __init__(self, t: dict[str, Any]):
        self.name, self.description, self.input_schema = t["name"], t["description"], t["input_schema"]


_CLASSES: dict[tuple[str, str], type] = {}


def env_class(tools: Sequence[Any], name: str = "CoworkEnv") -> type[CoworkEnv]:
    """The environment class whose tools are ``tools`` (MCP tools or their dicts); one class
    per name and tool set in a process (TRL matches rewards to environments by class).

    Raises:
        CoworkError: a tool name is not a Python identifier, starts with ``_``, or is taken by
            :class:`CoworkEnv` itself (``reset``, ``get_reward``, ``reward``, ``grade`` ...).
    """
    dicts = tuple(tool_dict(t) for t in tools)
    key = (name, _tools_key(dicts))
    if key not in _CLASSES:
        members: dict[str, Any] = {"__module__": __name__, "_tools": dicts}
        for t in dicts:
            n = t["name"]
            if not n.isidentifier() or keyword.iskeyword(n) or n.startswith("_") or hasattr(CoworkEnv, n):
                raise CoworkError(f"tool name {n!r} cannot be a method of a TRL environment (not an identifier, "
                                  "private, or taken by CoworkEnv); rename the tool")
            members[n] = tool_method(t)
            members[n].__qualname__ = f"{name}.{n}"
        _CLASSES[key] = type(name, (CoworkEnv,), members)
    return _CLASSES[key]


def _tools_key(dicts: Iterable[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(sorted(dicts, key=lambda t: t["name"]), sort_keys=True).encode()).hexdigest()


def make_environment(tools: Sequence[dict[str, Any]], name: str = "CoworkEnv",
                     options: EnvOptions | None = None) -> CoworkEnv:
    """A new environment with these tools (what the factories of :class:`CoworkTRL` call)."""
    return env_class(tools, name)(options or EnvOptions())


# --------------------------------------------------------------------------- the spec object
class CoworkTRL:
    """Cowork tasks wired into TRL: ``.train_dataset``, ``.environment_factory``, ``.reward_funcs``.

    Each task's tools are read from a sandbox of it (started through the process's pool, so
    it serves the first episode afterwards) unless ``tools`` gives them. Tasks that serve the
    same tools share one environment class; several tool sets make ``environment_factory`` a
    dict and give the dataset an ``environment`` column (TRL then shows each row only its
    environment's tools).

    Args:
        tasks: Task folders, ``task.yaml`` files, folders of tasks, loaded specs, or a spec
            dataset (``DIR`` for all its splits, ``DIR:SPLIT`` for one; see
            :func:`cowork.synth.dataset.resolve_tasks`).
        reward: ``score``, ``pass`` or ``safety_gated`` (see :func:`cowork.rollouts.runner.reward_for`).
        max_sandboxes: Most sandboxes at once per process: at least the per-process generation
            batch (``per_device_train_batch_size * steps_per_generation``).
        max_per_task: Most sandboxes of one task at once (default ``max_sandboxes``).
        backend: Sandbox backend name.
        acquire_timeout_s: Seconds a tool call waits for its sandbox.
        tools: Task id -> its MCP tools (dicts with ``name``, ``description``,
            ``input_schema``), to skip reading them from sandboxes.

    Raises:
        SpecError: a task does not load, or two share an id.
    """

    def __init__(self, tasks: str | Path | LoadedSpec | Iterable[str | Path | LoadedSpec], *,
                 reward: Literal["score", "pass", "safety_gated"] = "score", max_sandboxes: int = 32,
                 max_per_task: int | None = None, backend: str | None = None, acquire_timeout_s: float = 600.0,
                 tools: dict[str, Sequence[Any]] | None = None):
        if isinstance(tasks, (str, Path, LoadedSpec)):
            tasks = [tasks]
        items = list(tasks)
        paths = [t for t in items if not isinstance(t, LoadedSpec)]
        self.tasks: list[LoadedSpec] = [t for t in items if isinstance(t, LoadedSpec)]
        self.tasks += load_specs(resolve_tasks(paths)) if paths else []
        ids = [ld.spec.id for ld in self.tasks]
        if not ids or len(set(ids)) < len(ids):
            raise SpecError("no tasks given" if not ids else
                            f"duplicate task ids {sorted({i for i in ids if ids.count(i) > 1})}; give each task once")
        self.options = EnvOptions(reward=reward, max_sandboxes=max_sandboxes, max_per_task=max_per_task,
                                  backend=backend, acquire_timeout_s=acquire_timeout_s)
        self._tools = {k: [tool_dict(t) for t in v] for k, v in tools.items()} if tools is not None else None

    @functools.cached_property
    def tools(self) -> dict[str, list[dict[str, Any]]]:
        """Task id -> the MCP tools its sandboxes serve."""
        if self._tools is not None:
            missing = [ld.spec.id for ld in self.tasks if ld.spec.id not in self._tools]
            if missing:
                raise CoworkError(f"tools= lacks tasks {missing}; give every task's tools or none")
            return self._tools
        rt = _runtime(self.options)

        async def read(ld: LoadedSpec) -> list[dict[str, Any]]:
            sb = await rt.pool.acquire(ld)
            try:
                return [tool_dict(t) for t in await sb.tools()]
            finally:
                await rt.pool.release(sb)

        async def read_all() -> list[list[dict[str, Any]]]:
            return list(await asyncio.gather(*(read(rt.spec(ld)) for ld in self.tasks)))

        found = rt.run(read_all())
        return {ld.spec.id: t for ld, t in zip(self.tasks, found)}

    @functools.cached_property
    def groups(self) -> dict[str, list[LoadedSpec]]:
        """Environment name -> the tasks that share its tool set (named after its first task)."""
        by_key: dict[str, list[LoadedSpec]] = {}
        for ld in self.tasks:
            by_key.setdefault(_tools_key(self.tools[ld.spec.id]), []).append(ld)
        return {tasks[0].spec.id: tasks for tasks in by_key.values()}

    @property
    def environment_factory(self) -> Callable[[], CoworkEnv] | dict[str, Callable[[], CoworkEnv]]:
        """For ``GRPOTrainer(environment_factory=...)``: a zero-argument factory (a picklable
        ``functools.partial``), or one per environment name when tasks differ in tools."""
        _check_trl()
        factories: dict[str, Callable[[], CoworkEnv]] = {name: functools.partial(make_environment, tuple(self.tools[tasks[0].spec.id]),
                                             _class_name(name if len(self.groups) > 1 else None), self.options)
                     for name, tasks in self.groups.items()}
        return next(iter(factories.values())) if len(factories) == 1 else factories

    @property
    def reward_funcs(self) -> list[Callable[..., list[float]]]:
        """For ``GRPOTrainer(reward_funcs=...)``: empty. The environments own the reward
        (``get_reward``, which TRL adds as a reward source by itself); a reward function
        reading it again would count it twice. Add shaping functions of your own here."""
        return []

    @functools.cached_property
    def train_dataset(self) -> Any:
        """A ``datasets.Dataset``, one row per task: ``prompt`` (conversational: the task's
        system prompt and its prompt as the user message), ``task_dir``, ``task`` (its id) and,
        with several tool sets, ``environment``."""
        from datasets import Dataset

        from ..episode.run import DEFAULT_SYSTEM

        env_of = {ld.spec.id: name for name, tasks in self.groups.items() for ld in tasks}
        rows: dict[str, list[Any]] = {
            "prompt": [[{"role": "system", "content": ld.spec.system_prompt or DEFAULT_SYSTEM},
                        {"role": "user", "content": ld.spec.prompt}] for ld in self.tasks],
            "task_dir": [str(ld.root.resolve()) for ld in self.tasks],
            "task": [ld.spec.id for ld in self.tasks],
        }
        if len(self.groups) > 1:
            rows["environment"] = [env_of[ld.spec.id] for ld in self.tasks]
        return Dataset.from_dict(rows)


#: The TRL release whose contract this module follows (get_reward as a reward source, dict
#: factories); in older ones ``get_reward`` would be shown to the model as a tool.
MIN_TRL = (1, 16)


def _check_trl() -> None:
    """Refuse an installed TRL older than :data:`MIN_TRL` (no TRL installed: nothing to check).

    Raises:
        CoworkError: naming the version found and the fix.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("trl")
    except PackageNotFoundError:
        return
    parts = tuple(int(p) for p in re.findall(r"\d+", found)[:2])
    if parts < MIN_TRL:
        raise CoworkError(f"cowork.integrations.trl requires trl >= {'.'.join(map(str, MIN_TRL))}, found {found}; "
                          "pip install 'cowork-runtime[trl]'")


def _class_name(group: str | None) -> str:
    return "CoworkEnv" if group is None else "CoworkEnv_" + re.sub(r"\W", "_", group)


__all__ = ["MIN_TRL", "CoworkEnv", "CoworkTRL", "EnvOptions", "close", "env_class", "make_environment", "python_type",
           "tool_dict", "tool_method"]
