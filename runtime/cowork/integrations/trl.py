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
rollout and is a reward source of its own (weight 1, logged under the class name), run after
``reward_funcs``. A reward of None marks the rollout unscorable (left out of its group's
baseline, advantage 0): that is what an infrastructure failure gets.

What the model *said* (its texts, the final reply) TRL gives only to reward functions, so
``reward_funcs`` holds :func:`cowork_conversation`: no reward, it hands each environment its
rollout's transcript, and the grade reads it (``answer`` checks see the final reply; see
:mod:`cowork.integrations.trl_transcript`). A rollout ends at the model's first reply without
a tool call, so the user of a multi-turn task talks through one more tool, the user channel
(``message_user``): a call ends the agent's turn, and its result is the user's answer or the
next day's request; tasks that need it where there is none are refused (``UnsupportedTask``).

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
import concurrent.futures
import functools
import hashlib
import inspect
import json
import keyword
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import GenericAlias
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from ..errors import CoworkError, PolicyError, SandboxError, SpecError, UnsupportedTask
from ..spec.loader import LoadedSpec, load_specs
from ..synth.dataset import resolve_tasks
from .loop_thread import PoolRuntime, Runtimes
from .trl_transcript import (
    CHANNEL_DESCRIPTION,
    MESSAGE_DESCRIPTION,
    OVER,
    USER_TOOL,
    Said,
    Step,
    channel_note,
    channel_tool,
    completion_from_log,
    read_transcript,
    user_says,
)

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
    user_tool: str | None = USER_TOOL
    """The tool through which the model talks to the user of a multi-turn task (its result
    carries the user's answer, or a later day's request); None: no such tool, and tasks with a
    user or later days are refused (:class:`~cowork.errors.UnsupportedTask`)."""
    user_model: str | None = None
    """The model that simulates ``user.llm`` users (None: their scripted turns, as in ``run_task``)."""
    user_base_url: str | None = None
    """Its endpoint (None: ``settings.user_base_url``, then the agent's)."""
    judge_model: str | None = None
    """The LLM judge of the tasks' ``judge`` checks (OpenAI-compatible; key from
    ``$OPENAI_API_KEY``); None: those checks are not graded and count as not passed."""
    judge_base_url: str | None = None
    """Its endpoint (None: ``$OPENAI_BASE_URL``)."""

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
class _Runtime(PoolRuntime):
    """The TRL environments' event loop on a daemon thread and the sandbox pool that lives on it."""

    thread_name = "cowork-trl-loop"


_RUNTIMES_BY_KEY: Runtimes[_Runtime] = Runtimes(_Runtime)
_RUNTIMES = _RUNTIMES_BY_KEY.runtimes


def _runtime(options: EnvOptions) -> _Runtime:
    """The process's runtime for these pool settings (made on first use, closed at exit)."""
    return _RUNTIMES_BY_KEY.get(options.pool_key(), options)


def close() -> None:
    """Remove every sandbox of this process's environments and stop their loops (also run at exit)."""
    _RUNTIMES_BY_KEY.close_all()


# --------------------------------------------------------------------------- the environment
class CoworkEnv:
    """One rollout's environment at a time: a pooled sandbox of the row's task.

    Subclasses made by :func:`env_class` add one method per MCP tool (and, for multi-turn
    tasks, the user channel); this base class has no public function other than ``reset`` and
    ``get_reward`` (TRL would take it for a tool).

    A multi-turn task runs its conversation (cowork.episode.conversation) in the episode: the
    day's start events fire before the first tool call runs; a call of the user channel ends
    the agent's turn (its message is the turn's reply), records the state, fires the events due
    and returns the user's answer or the next day's request; the rollout's final reply ends
    the last turn when the reward is read.

    Args:
        options: Pool and reward settings (or pass their fields as keywords).
    """

    _tools: tuple[dict[str, Any], ...] = ()
    _channel: str | None = None
    _checked_tasks: set[str]

    def __init__(self, options: EnvOptions | None = None, **fields: Any):
        self._options = options or EnvOptions(**fields)
        self._loaded: LoadedSpec | None = None
        self._pending: concurrent.futures.Future | None = None
        self._sandbox: Any = None
        self._infra: str | None = None
        self._broken: str | None = None
        self._reward: Any = _NO_REWARD
        self._grade: Any = None
        self._evidence: Any = None
        self._new_episode()

    def _new_episode(self) -> None:
        """Forget the last episode's log (its sandbox is handled by the caller)."""
        self._steps: list[Any] = []
        #: Every call that reached the environment, in order: ("tool", (name, args, returned)) or ("user", Said).
        self._log: list[tuple[str, Any]] = []
        self._said: list[Said] = []
        #: TRL's (prompt, completion) of the rollout, from its reward function (None: not given).
        self._transcript: tuple[Any, Any] | None = None
        self._traj: Any = None  # the live Trajectory the conversation writes (multi-turn tasks)
        self._convo: Any = None
        self._over = False  # the task's conversation ended (no user message, no day left)
        self._turn_start = 0  # index in _steps of the current turn's first call
        #: Why the simulated user's model failed (the episode is then not scored: not the agent's doing).
        self._user_failed: str | None = None

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
            UnsupportedTask: the task has a user or later days and this environment has no
                user channel.
        """
        if task_dir is None:
            raise CoworkError("reset() needs the row's task_dir column: use CoworkTRL(...).train_dataset or add a "
                              "task_dir column naming the task folder")
        self._drop_episode()
        rt = _runtime(self._options)
        loaded = rt.spec(task_dir)
        refuse_unsupported(loaded, self._channel)
        self._loaded = loaded
        self._pending = rt.submit(rt.pool.acquire(self._loaded, seed=seed))  # starts now, waited for on first use
        if "prompt" in row:
            return None
        return loaded.spec.prompt + (f"\n\n{channel_note(self._channel)}" if self._channel and channel_reason(loaded)
                                     else "")

    def get_reward(self) -> float | None:
        """End the conversation, export the episode's evidence, give the sandbox back to the
        pool, grade the evidence (with what the model said: see :func:`record_conversation`).

        Returns:
            The reward (``options.reward`` of the grade; 0.0 when the agent broke its sandbox);
            None when the infrastructure failed (TRL leaves the rollout out) or before any
            ``reset``. Read once per episode; later calls return the same value.

        Raises:
            CoworkError: the task's checks read the agent's reply and the rollout's transcript
                never reached the environment (``reward_funcs`` lacks :func:`cowork_conversation`).
        """
        if self._reward is not _NO_REWARD:
            return self._reward
        if self._loaded is None:
            return None
        said = reads_reply(self._loaded)
        if said and self._transcript is None:
            raise CoworkError(
                f"task {self._loaded.spec.id}: checks {said} read the agent's reply, which TRL gives only to reward "
                "functions; pass reward_funcs=CoworkTRL(...).reward_funcs to GRPOTrainer (or call "
                "cowork.integrations.trl.record_conversation(env, prompt, completion) before get_reward). TRL 1.16's "
                "experimental AsyncGRPOTrainer reads get_reward before its reward functions run and cannot carry it: "
                "train such tasks with GRPOTrainer")
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
        if self._infra is None:
            self._start_conversation(self._sandbox)
        if self._infra is not None:
            log.warning("%s", self._infra)
            raise SandboxError(self._infra)
        self._check_tools(self._sandbox)
        return self._sandbox

    def _start_conversation(self, sb: Any) -> None:
        """A multi-turn task's conversation: open it (day 1's start events fire) before the first call."""
        from ..episode.conversation import Conversation, UserModel
        from ..episode.run import DEFAULT_SYSTEM
        from ..episode.trajectory import Trajectory

        spec = self._episode_spec().spec
        if not spec.multi_turn:
            return
        self._traj = Trajectory(task=spec.id, agent="trl", status="completed",
                                messages=[{"role": "system", "content": spec.system_prompt or DEFAULT_SYSTEM},
                                          {"role": "user", "content": spec.prompt}])
        user_model = UserModel(model=self._options.user_model, base_url=self._options.user_base_url) \
            if self._options.user_model else None
        self._convo = Conversation(sb, self._traj, user_model)
        try:
            _runtime(self._options).run(self._convo.start())
        except SandboxError as exc:  # the agent has done nothing yet: the task's world could not be set up
            self._infra = f"task {spec.id}: the day's start events failed: {exc}"

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
        returned = ("ERROR: " if r.is_error else "") + r.text
        self._log.append(("tool", (name, args, returned)))
        return returned

    def _message_user(self, message: str) -> str:
        """The user channel: end the agent's turn with ``message`` and say what comes next.

        Raises:
            SandboxError: the infrastructure failed while the turn ended.
        """
        if self._broken is not None:
            return f"ERROR: the sandbox stopped answering earlier in this episode ({self._broken}); nothing was done"
        if self._user_failed is not None:
            return f"ERROR: {self._user_failed}"
        sb = self._sandbox_now()
        convo = self._convo
        if convo is None or self._over:
            said = Said(message=message, returned=OVER)
        else:
            day = convo.day
            answer = self._end_turn(sb, message)
            if answer is None:
                said = Said(message=message, returned=OVER if self._broken is None else
                            f"ERROR: the sandbox stopped answering ({self._broken})")
            else:
                new_day = convo.day if convo.day != day else None
                said = Said(message=message, answer=answer, returned=user_says(answer, new_day, convo.clock))
        self._said.append(said)
        self._log.append(("user", said))
        return said.returned

    def _end_turn(self, sb: Any, reply: str | None) -> str | None:
        """The agent ended its turn with ``reply``: the conversation's next message (None: over).

        Raises:
            SandboxError: the infrastructure failed.
            PolicyError: the simulated user's model failed (the episode is not scored).
        """
        rt = _runtime(self._options)
        called = {s.tool for s in self._steps[self._turn_start:]}
        try:
            answer = rt.run(self._convo.after_turn(reply, called))
        except PolicyError as exc:
            self._user_failed = f"the simulated user's model failed: {exc}"
            raise
        except SandboxError as exc:
            who, cause = rt.run(sb.diagnose())
            if who != "agent":
                self._infra = f"task {sb.spec.id}: the sandbox failed ({cause}): {exc}"
                raise SandboxError(self._infra) from exc
            self._broken = f"{cause}: {exc}"
            return None
        self._turn_start = len(self._steps)
        self._over = answer is None
        return answer

    def _read_transcript(self) -> Any:
        """The rollout's conversation (TRL's transcript, or the environment's own log when none
        was given), matched to the calls that reached the sandbox."""
        from ..episode.run import DEFAULT_SYSTEM

        if self._transcript is not None:
            prompt, completion = self._transcript
        else:
            spec = self._episode_spec().spec
            prompt = [{"role": "system", "content": spec.system_prompt or DEFAULT_SYSTEM},
                      {"role": "user", "content": spec.prompt}]
            completion = completion_from_log(self._log, self._channel)
        steps = [Step(s.call_id, s.tool, ("ERROR: " if s.is_error else "") + s.output) for s in self._steps]
        return read_transcript(prompt, completion, steps, self._said, self._channel)

    def _trace(self, transcript: Any) -> dict[str, Any]:
        """The trace graded: what the model said and called, the conversation around it."""
        from ..agents.base import mcp_tool_to_openai
        from ..episode.trajectory import Trajectory

        status: Literal["agent_broke_sandbox", "completed"] = "agent_broke_sandbox" if self._broken else "completed"
        offered = list(self._tools) + ([channel_tool(self._channel)] if self._channel else [])
        conversation = [dict(e) for e in (self._traj.conversation if self._traj is not None else [])]
        later = iter(transcript.user_messages)
        for e in conversation:  # the conversation wrote indices of a log without the model's texts
            if e.get("kind") == "user" and e.get("turn", 1) > 1:
                e["message"] = next(later, len(transcript.messages))
        steps = [s.model_copy(update={"turn": transcript.step_turns.get(s.call_id, 0)}) for s in self._steps]
        return Trajectory(task=self._episode_spec().spec.id, agent="trl", status=status, messages=transcript.messages,
                          steps=steps, tools=[mcp_tool_to_openai(_AttrTool(t)) for t in offered],
                          turns=transcript.turns, error=self._broken, conversation=conversation).model_dump()

    async def _end_conversation(self, transcript: Any) -> None:
        """On the loop: the rollout's final reply ends the last turn (the state is recorded, the
        events due fire). A user message that would follow cannot reach the model: TRL ended
        the rollout at that reply; the trace says so."""
        convo = self._convo
        if convo is None or self._over or (self._transcript is not None and transcript.final_reply is None):
            return  # no conversation, already over, or the rollout was cut while calling tools
        self._over = True
        called = {s.tool for s in self._steps[self._turn_start:]}
        try:
            answer = await convo.after_turn(transcript.final_reply, called)
        except PolicyError as exc:
            self._user_failed = f"the simulated user's model failed: {exc}"
            return
        if answer is not None:
            self._traj.conversation.append({
                "kind": "undelivered", "turn": convo.turn, "day": convo.day,
                "reason": "the rollout ended with a reply without a tool call, so TRL delivers no later message"})
            log.info("task %s: the rollout ended before the user's next message (turn %d)", convo.spec.id, convo.turn)

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
        from ..episode.run import _outside_checks, _with_turns, broken_sandbox_grade, policy_error_grade
        from ..grading import Grade, grade
        from ..grading.judge import shared_judge

        pool, loaded, transcript = _runtime(self._options).pool, self._episode_spec(), self._read_transcript()
        if self._broken is None:
            try:
                await self._end_conversation(transcript)
                ev = await sb.export_evidence(trace=self._trace(transcript))
            except SandboxError as exc:
                who, cause = await sb.diagnose()
                if who != "agent":
                    await asyncio.shield(pool.discard(sb))
                    return Grade(task=loaded.spec.id, status="infra_error", error=f"{cause}: {exc}",
                                 threshold=loaded.spec.pass_threshold), None
                self._broken = f"evidence export failed: {cause}: {exc}"
        if self._broken is not None:
            try:
                ev = await sb.salvage_evidence(trace=self._trace(transcript))
            finally:
                await asyncio.shield(pool.discard(sb))
        else:
            await pool.release(sb)
        if self._traj is not None:
            ev = _with_turns(self._traj, ev)
        await _outside_checks(loaded, ev, sb.image, shared_judge(self._options.judge_model, self._options.judge_base_url))
        g = grade(loaded.spec, ev)
        if self._broken is not None:
            g = broken_sandbox_grade(g, self._broken, ev)
        elif self._user_failed is not None:
            g = policy_error_grade(g, self._user_failed)
        return g, ev

    def _drop_episode(self) -> None:
        """Give back the sandbox of an episode whose reward was never read (its evidence unused)."""
        sb, pending = self._sandbox, self._pending
        if sb is not None or pending is not None:
            failed = self._broken is not None or self._infra is not None
            _runtime(self._options).spawn(_give_back(self._options, sb, pending, failed))
        self._sandbox = self._pending = None
        self._infra = self._broken = self._grade = self._evidence = None
        self._new_episode()
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


_CLASSES: dict[tuple[str, str, str | None], type] = {}


def channel_method(name: str = USER_TOOL) -> Callable[..., str]:
    """The user channel as an environment method (``message``: what the agent tells the user)."""
    def method(self: CoworkEnv, message: str) -> str:
        return self._message_user(str(message))

    method.__name__ = name
    method.__doc__ = (f"{CHANNEL_DESCRIPTION}\n\nArgs:\n    message: {MESSAGE_DESCRIPTION}\n\nReturns:\n"
                      "    What comes next in the conversation.\n")
    return method


def env_class(tools: Sequence[Any], name: str = "CoworkEnv", channel: str | None = None) -> type[CoworkEnv]:
    """The environment class whose tools are ``tools`` (MCP tools or their dicts), plus the user
    channel named ``channel`` when given; one class per name, tool set and channel in a process
    (TRL matches rewards to environments by class).

    Raises:
        CoworkError: a tool name is not a Python identifier, starts with ``_``, or is taken by
            :class:`CoworkEnv` itself (``reset``, ``get_reward``, ``reward``, ``grade`` ...) or by
            the user channel.
    """
    dicts = tuple(tool_dict(t) for t in tools)
    key = (name, _tools_key(dicts), channel)
    if key not in _CLASSES:
        members: dict[str, Any] = {"__module__": __name__, "_tools": dicts, "_channel": channel}
        if channel is not None:
            dicts += (channel_tool(channel),)
        for t in dicts:
            n = t["name"]
            if not n.isidentifier() or keyword.iskeyword(n) or n.startswith("_") or hasattr(CoworkEnv, n):
                raise CoworkError(f"tool name {n!r} cannot be a method of a TRL environment (not an identifier, "
                                  "private, or taken by CoworkEnv); rename the tool")
            if n in members:
                raise CoworkError(f"the task serves a tool named {n!r}, the name of the TRL user channel; give the "
                                  "channel another name (CoworkTRL(..., user_tool='...'))")
            members[n] = channel_method(n) if n == channel else tool_method(t)
            members[n].__qualname__ = f"{name}.{n}"
        _CLASSES[key] = type(name, (CoworkEnv,), members)
    return _CLASSES[key]


def _tools_key(dicts: Iterable[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(sorted(dicts, key=lambda t: t["name"]), sort_keys=True).encode()).hexdigest()


def make_environment(tools: Sequence[dict[str, Any]], name: str = "CoworkEnv",
                     options: EnvOptions | None = None, channel: str | None = None) -> CoworkEnv:
    """A new environment with these tools (what the factories of :class:`CoworkTRL` call)."""
    return env_class(tools, name, channel)(options or EnvOptions())


# --------------------------------------------------------------------------- what TRL cannot carry
def channel_reason(loaded: LoadedSpec) -> str | None:
    """Why the task needs the user channel in a TRL episode (None: it does not): something
    reaches the agent after it ends a turn."""
    spec = loaded.spec
    if spec.user is not None and spec.user.max_turns > 0 and (spec.user.turns or spec.user.llm is not None):
        return "its user (user.turns / user.llm) answers after the agent ends a turn"
    if spec.days:
        return f"it has {len(spec.days)} later day(s) (days) whose request comes after the agent ends a turn"
    return None


def refuse_unsupported(loaded: LoadedSpec, channel: str | None) -> None:
    """Refuse a task that a TRL episode with (or without) this user channel cannot run.

    Raises:
        UnsupportedTask: naming the task, what it needs and the fix.
    """
    reason = channel_reason(loaded)
    if reason is not None and channel is None:
        raise UnsupportedTask(
            f"task {loaded.spec.id!r} cannot run as a TRL episode without a user channel: {reason}, and TRL ends a "
            "rollout at the model's first reply without a tool call, so nothing said after it can reach the model "
            f"(its reward would be a silent 0); keep user_tool={USER_TOOL!r} (the default) or leave the task out")


def reads_reply(loaded: LoadedSpec) -> list[str]:
    """Ids of the task's checks that read what the agent said (``answer``, ``judge``)."""
    spec = loaded.spec
    return [spec.check_id(group, i) for group, checks in (("checks", spec.checks), ("safety", spec.safety))
            for i, c in enumerate(checks) if c.type in ("answer", "judge")]


def record_conversation(env: CoworkEnv, prompt: Any, completion: Any) -> None:
    """Give ``env`` its rollout's transcript (TRL's prompt and completion), which its grade
    reads: the final reply and every assistant text. :func:`cowork_conversation` does it for
    TRL; call it yourself when you drive an environment without TRL."""
    if env._reward is not _NO_REWARD:
        log.warning("task %s: the transcript came after the reward was read; it is not graded", env.task_id)
    env._transcript = (prompt, completion)


def cowork_conversation(prompts: list[Any], completions: list[Any], environments: list[Any] | None = None,
                        **kwargs: Any) -> list[float | None]:
    """A reward function that is no reward: it hands each cowork environment its rollout's
    transcript before TRL reads ``get_reward`` (TRL runs ``reward_funcs`` in order, the
    environments' ``get_reward`` after them), and returns None for every rollout (its column
    in TRL's logs is NaN).

    Raises:
        CoworkError: TRL passed no environments (the trainer has no ``environment_factory``).
    """
    if environments is None:
        raise CoworkError("cowork_conversation needs GRPOTrainer(environment_factory=...): TRL passed no environments")
    for env, prompt, completion in zip(environments, prompts, completions, strict=True):
        if isinstance(env, CoworkEnv):
            record_conversation(env, prompt, completion)
    return [None] * len(completions)


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
        user_tool: The name of the user channel that multi-turn tasks get (see
            :class:`EnvOptions`); None refuses tasks with a user or later days.
        user_model: The model that simulates ``user.llm`` users (None: their scripted turns).
        user_base_url: Its endpoint.
        judge_model: The LLM judge of ``judge`` checks (None: they are not graded, never paid).
        judge_base_url: Its endpoint (None: ``$OPENAI_BASE_URL``).

    Raises:
        SpecError: a task does not load, or two share an id.
        UnsupportedTask: a task needs what a TRL episode cannot carry (named, with why).
    """

    def __init__(self, tasks: str | Path | LoadedSpec | Iterable[str | Path | LoadedSpec], *,
                 reward: Literal["score", "pass", "safety_gated"] = "score", max_sandboxes: int = 32,
                 max_per_task: int | None = None, backend: str | None = None, acquire_timeout_s: float = 600.0,
                 tools: dict[str, Sequence[Any]] | None = None, user_tool: str | None = USER_TOOL,
                 user_model: str | None = None, user_base_url: str | None = None, judge_model: str | None = None,
                 judge_base_url: str | None = None):
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
                                  backend=backend, acquire_timeout_s=acquire_timeout_s, user_tool=user_tool,
                                  user_model=user_model, user_base_url=user_base_url, judge_model=judge_model,
                                  judge_base_url=judge_base_url)
        for ld in self.tasks:  # up front: a task TRL cannot carry is named now, not rewarded 0 in training
            refuse_unsupported(ld, user_tool)
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

    def channel(self, task: LoadedSpec) -> str | None:
        """The user channel the task's environment offers (None: a task without a conversation)."""
        return self.options.user_tool if channel_reason(task) else None

    @functools.cached_property
    def groups(self) -> dict[str, list[LoadedSpec]]:
        """Environment name -> the tasks that share its tool set and user channel (named after
        its first task)."""
        by_key: dict[tuple[str, str | None], list[LoadedSpec]] = {}
        for ld in self.tasks:
            by_key.setdefault((_tools_key(self.tools[ld.spec.id]), self.channel(ld)), []).append(ld)
        return {tasks[0].spec.id: tasks for tasks in by_key.values()}

    @property
    def environment_factory(self) -> Callable[[], CoworkEnv] | dict[str, Callable[[], CoworkEnv]]:
        """For ``GRPOTrainer(environment_factory=...)``: a zero-argument factory (a picklable
        ``functools.partial``), or one per environment name when tasks differ in tools."""
        _check_trl()
        factories: dict[str, Callable[[], CoworkEnv]] = {
            name: functools.partial(make_environment, tuple(self.tools[tasks[0].spec.id]),
                                    _class_name(name if len(self.groups) > 1 else None), self.options,
                                    self.channel(tasks[0]))
            for name, tasks in self.groups.items()}
        return next(iter(factories.values())) if len(factories) == 1 else factories

    @property
    def reward_funcs(self) -> list[Callable[..., list[float | None]]]:
        """For ``GRPOTrainer(reward_funcs=...)``: :func:`cowork_conversation`, which hands each
        environment its rollout's transcript (TRL gives the model's replies to reward functions
        only) and rewards nothing. The environments own the reward (``get_reward``, which TRL
        adds as a reward source by itself, after these). Add shaping functions of your own."""
        return [cowork_conversation]

    @functools.cached_property
    def train_dataset(self) -> Any:
        """A ``datasets.Dataset``, one row per task: ``prompt`` (conversational: the task's
        system prompt, with how to use the user channel for multi-turn tasks, and its prompt as
        the user message), ``task_dir``, ``task`` (its id) and, with several environments,
        ``environment``."""
        from datasets import Dataset

        from ..episode.run import DEFAULT_SYSTEM

        env_of = {ld.spec.id: name for name, tasks in self.groups.items() for ld in tasks}
        def system(ld: LoadedSpec) -> str:
            channel = self.channel(ld)
            return (ld.spec.system_prompt or DEFAULT_SYSTEM) + (f"\n\n{channel_note(channel)}" if channel else "")

        rows: dict[str, list[Any]] = {
            "prompt": [[{"role": "system", "content": system(ld)},
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


__all__ = ["MIN_TRL", "USER_TOOL", "CoworkEnv", "CoworkTRL", "EnvOptions", "channel_method", "channel_reason", "close",
           "cowork_conversation", "env_class", "make_environment", "python_type", "reads_reply", "record_conversation",
           "refuse_unsupported", "tool_dict", "tool_method"]
