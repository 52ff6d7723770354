"""Cowork tasks as OpenEnv environments: ``cowork serve --openenv TASKS``.

Checked against ``openenv`` 0.10.0 (huggingface/OpenEnv, the project that began as
meta-pytorch/OpenEnv's ``openenv-core``). The app is OpenEnv's own
(``openenv.core.env_server.create_fastapi_app``), so OpenEnv's clients work unchanged on both
of its boundaries:

- the simulation control boundary, for trainers: ``reset`` / ``step`` / ``state`` over the
  ``/ws`` WebSocket (one environment per connection; the stateless HTTP ``/reset`` and
  ``/step`` routes make a fresh environment per request, as OpenEnv does for every env);
- the agent boundary, MCP tools: ``tools/list`` and ``tools/call`` over ``/mcp`` (JSON-RPC),
  served through ``step`` with OpenEnv's ``ListToolsAction`` / ``CallToolAction``, so an
  ``MCPToolClient`` lists and calls the sandbox's tools and its ``step`` sees the rewards.

Each episode is a real cowork episode (:mod:`cowork.integrations.stepped`): ``reset`` takes a
sandbox of the task from the process's pool (fresh or reset and verified) and returns the
task's prompt; each ``CallToolAction`` is one assistant turn with one tool call, run in the
sandbox; the extra tool ``final_answer`` is the reply without a tool call, which ends the
episode (or, in a conversation, brings the user's next message). The reward is the grade's
(``score`` by default) on the step that ends the episode, or cowork's turn-level credit on
every step with ``reward="turn"``.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from ..errors import CoworkError, SpecError, require_extra
from ..grading.judge import shared_judge
from ..spec.loader import LoadedSpec, load_specs
from .stepped import PoolOptions, Step, SteppedEpisode, StepReward, step_runtime

log = logging.getLogger(__name__)

require_extra("openenv.core", "openenv", "cowork.integrations.openenv needs OpenEnv",
              note="and: pip install --no-deps 'openenv>=0.10'")
from openenv.core.env_server import (  # noqa: E402 - after the check
    CallToolAction,
    CallToolObservation,
    Environment,
    ListToolsAction,
    ListToolsObservation,
    Observation,
    State,
    Tool,
    create_fastapi_app,
)

#: The tool that stands for a reply without a tool call (the answer, or the end of a turn).
FINAL_ANSWER = "final_answer"
FINAL_ANSWER_TOOL = Tool(name=FINAL_ANSWER, description=(
    "Reply to the user without calling a tool: your answer or a summary of what you did. It ends your turn: "
    "the episode is over unless the user answers (their message is then in the observation)."),
    input_schema={"type": "object", "additionalProperties": False, "required": ["answer"],
                  "properties": {"answer": {"type": "string", "description": "What you say to the user."}}})


class CoworkObservation(Observation):
    """What ``reset`` returns: the task and the messages that open its conversation."""

    task: str = Field(description="The task's id")
    prompt: str = Field(description="The user's request (the last message)")
    messages: list[dict[str, Any]] = Field(description="The opening chat messages: the system prompt, the request")


class CoworkToolObservation(CallToolObservation):
    """What a tool call (or ``final_answer``) leads to: the call's output and what followed it."""

    messages: list[dict[str, Any]] = Field(default_factory=list, description=(
        "What the environment said, as chat messages: the tool's output (a `tool` message), then the user's "
        "next message in a conversation; empty when the episode ended"))


class CoworkState(State):
    """The episode's state (``GET /state``, the WebSocket's ``state``)."""

    task: str | None = Field(default=None, description="The task of the current episode")
    done: bool = Field(default=False, description="Whether the episode is over")
    status: str | None = Field(default=None, description="How it ended (the trajectory's status)")
    score: float | None = Field(default=None, description="The grade's score, once done")
    passed: bool | None = Field(default=None, description="Whether it passed, once done")


_COUNTERS: dict[tuple[str, ...], itertools.count] = {}
_COUNTERS_LOCK = threading.Lock()


class CoworkOpenEnv(Environment):
    """An OpenEnv environment over cowork tasks: one episode at a time, any of ``tasks``.

    Construction is cheap (OpenEnv makes one per HTTP request); the sandbox comes with ``reset``.

    Args:
        tasks: Loaded specs (one environment serves any of them: ``reset(task=ID)``).
        reward: ``score``, ``pass``, ``safety_gated`` or ``turn``.
        options: The process's sandbox pool.
        judge: The LLM judge of the tasks' ``judge`` checks (None: they are not graded).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, tasks: Sequence[LoadedSpec], reward: StepReward = "score",
                 options: PoolOptions | None = None, judge: Any = None):
        super().__init__()
        self.tasks = list(tasks)
        self.reward = reward
        self.options = options or PoolOptions()
        self.judge = judge
        self.episode: SteppedEpisode | None = None
        self.last: Step | None = None
        self._state = CoworkState()

    # ------------------------------------------------------------------ OpenEnv's contract
    def reset(self, seed: int | None = None, episode_id: str | None = None, task: str | int | None = None,
              split: str | None = None, index: int | None = None, **kwargs: Any) -> CoworkObservation:
        """Start an episode (one still running is ended first: graded ``truncated``).

        Args:
            seed: The episode's fault seed (None: the spec's own).
            episode_id: The episode's id (default: a new uuid).
            task: The task's id or index; default ``index``, else the tasks in turn.
            split: Ignored beyond ``train`` (the Task API's only split).
            index: The task's index (the Task API's ``reset(split, index)``).
            kwargs: Other fields of the reset request (ignored).

        Raises:
            SpecError: no such task.
            SandboxError: no sandbox could be had.
        """
        self.close()
        loaded = self._pick(task if task is not None else index)
        rt = step_runtime(self.options)
        self.episode = SteppedEpisode(rt, rt.spec(loaded), reward=self.reward, seed=seed, judge=self.judge)
        messages = rt.run(self.episode.start())
        self.last = None
        self._state = CoworkState(episode_id=episode_id or str(uuid.uuid4()), step_count=0, task=loaded.spec.id)
        return CoworkObservation(task=loaded.spec.id, prompt=str(messages[-1].get("content") or ""),
                                 messages=messages, done=False, reward=None)

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        """List the tools, or take one turn: a tool call, or ``final_answer``.

        Raises:
            CoworkError: a call before ``reset``, after the episode ended, or not a tool action.
        """
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=self._tools())
        if not isinstance(action, CallToolAction):
            raise CoworkError(f"cowork takes OpenEnv's CallToolAction or ListToolsAction, not {type(action).__name__}")
        from ..agents.base import AssistantTurn, ToolCall

        ep = self.episode
        if ep is None:
            raise CoworkError("step() before reset(): over /ws, send reset first (a stateless HTTP /step has no "
                              "episode)")
        if ep.done:
            raise CoworkError(f"the episode of {ep.loaded.spec.id} is over; reset for a new one")
        if action.tool_name == FINAL_ANSWER:
            turn = AssistantTurn(content=str(action.arguments.get("answer") or "") or None, tool_calls=[],
                                 extra={"finish_reason": "stop"})
        else:
            call = ToolCall(id=f"call_{ep.turns + 1}", name=action.tool_name, arguments=dict(action.arguments))
            turn = AssistantTurn(content=None, tool_calls=[call], extra={"finish_reason": "tool_calls"})
        out: Step = ep.runtime.run(ep.act(turn))
        self.last = out
        self._state.step_count += 1
        said = [m for m in out.messages if m.get("role") == "tool"]
        text = str(said[0].get("content") or "") if said else \
            next((str(m.get("content") or "") for m in out.messages if m.get("role") == "user"), "")
        metadata: dict[str, Any] = {}
        if out.done:
            g, t = out.result.grade, out.result.trajectory
            self._state.done, self._state.status = True, t.status
            self._state.score, self._state.passed = float(g.score), bool(g.passed)
            metadata = {"task": g.task, "status": t.status, "grade_status": g.status, "score": float(g.score),
                        "passed": bool(g.passed), "safe": g.safe}
        return CoworkToolObservation(
            tool_name=action.tool_name, messages=out.messages, done=out.done, reward=out.reward, metadata=metadata,
            result={"content": [{"type": "text", "text": text}], "data": text,
                    "is_error": text.startswith("ERROR: ")})

    @property
    def state(self) -> CoworkState:
        """The episode's id, step count, task, and its outcome once done."""
        return self._state

    def close(self) -> None:
        """End a running episode (graded ``truncated``, its sandbox given back)."""
        ep, self.episode = self.episode, None
        if ep is not None and not ep.done:
            try:
                ep.runtime.run(ep.abandon())
            except Exception as exc:  # noqa: BLE001 - closing must not fail the server
                log.warning("task %s: ending the episode failed: %s", ep.loaded.spec.id, exc)

    # ------------------------------------------------------------------ the Task API
    def list_splits(self) -> list[str]:
        """One split, ``train``: every task served."""
        return ["train"]

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        """The tasks served, in order: id, index, title."""
        return [{"id": ld.spec.id, "index": i, "title": ld.spec.title} for i, ld in enumerate(self.tasks)]

    def num_tasks(self, split: str) -> int:
        """How many tasks are served."""
        return len(self.tasks)

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        """One task by index (IndexError past the end, which OpenEnv answers with 400)."""
        return self.list_tasks(split)[index]

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict[str, Any]]:
        """Tasks ``[start, stop)``."""
        return self.list_tasks(split)[start:stop]

    # ------------------------------------------------------------------ internals
    def _pick(self, which: str | int | None) -> LoadedSpec:
        if which is None:
            key = tuple(str(ld.root) for ld in self.tasks)
            with _COUNTERS_LOCK:
                n = next(_COUNTERS.setdefault(key, itertools.count()))
            return self.tasks[n % len(self.tasks)]
        if isinstance(which, int) or (isinstance(which, str) and which.isdigit()):
            i = int(which)
            if not 0 <= i < len(self.tasks):
                raise SpecError(f"task index {i} out of range: {len(self.tasks)} tasks are served")
            return self.tasks[i]
        for ld in self.tasks:
            if ld.spec.id == which:
                return ld
        raise SpecError(f"unknown task {which!r}; served: {', '.join(ld.spec.id for ld in self.tasks)}")

    def _tools(self) -> list[Any]:
        """The tools of the current episode's task (before any episode: the first task's), and final_answer."""
        ep = self.episode
        rt = ep.runtime if ep is not None else step_runtime(self.options)
        loaded = ep.loaded if ep is not None else rt.spec(self.tasks[0])
        tools = rt.run(rt.tools(loaded))
        return [Tool(name=t.name, description=t.description or "",
                     input_schema=dict(getattr(t, "input_schema", None) or getattr(t, "inputSchema", None) or {}))
                for t in tools] + [FINAL_ANSWER_TOOL]


def make_app(tasks: str | Path | LoadedSpec | Iterable[str | Path | LoadedSpec], *, reward: StepReward = "score",
             max_sandboxes: int = 8, max_concurrent: int | None = None, backend: str | None = None,
             prepare: bool = True, judge_model: str | None = None, judge_base_url: str | None = None) -> Any:
    """The OpenEnv FastAPI app serving ``tasks`` (folders, ``task.yaml`` files, spec datasets).

    Args:
        tasks: What to serve.
        reward: ``score``, ``pass``, ``safety_gated`` or ``turn`` (per step).
        max_sandboxes: The pool's size, all tasks together.
        max_concurrent: Most WebSocket sessions at once (default ``max_sandboxes``: each
            running episode holds a sandbox).
        backend: Sandbox backend name.
        prepare: Build the tasks' images now, so that the first ``reset`` or ``tools/list``
            does not wait minutes for a build (an MCP client gives up after 60 s).
        judge_model: The LLM judge of ``judge`` checks (OpenAI-compatible; key from
            ``$OPENAI_API_KEY``); None: they are not graded.
        judge_base_url: Its endpoint (None: ``$OPENAI_BASE_URL``).

    Raises:
        SpecError: no task given, a task does not load, or two share an id.
        ImageError: with ``prepare``, a task's image cannot be built.
    """
    from ..synth.dataset import resolve_tasks

    items = [tasks] if isinstance(tasks, (str, Path, LoadedSpec)) else list(tasks)
    loaded = [t for t in items if isinstance(t, LoadedSpec)]
    paths = [t for t in items if not isinstance(t, LoadedSpec)]
    loaded += load_specs(resolve_tasks(paths)) if paths else []
    ids = [ld.spec.id for ld in loaded]
    if not ids or len(set(ids)) < len(ids):
        raise SpecError("no tasks given" if not ids else
                        f"duplicate task ids {sorted({i for i in ids if ids.count(i) > 1})}; give each task once")
    options = PoolOptions(max_sandboxes=max_sandboxes, backend=backend)
    if prepare:
        rt = step_runtime(options)
        for ld in loaded:
            rt.run(rt.pool.prepare(rt.spec(ld)))
    factory = functools.partial(CoworkOpenEnv, tuple(loaded), reward, options, shared_judge(judge_model, judge_base_url))
    return create_fastapi_app(factory, CallToolAction, CoworkToolObservation, max_concurrent or max_sandboxes,
                              env_name="cowork", state_cls=CoworkState, reset_observation_cls=CoworkObservation)


def serve(tasks: Sequence[str], *, host: str = "127.0.0.1", port: int = 8000, reward: StepReward = "score",
          max_sandboxes: int = 8, judge_model: str | None = None, judge_base_url: str | None = None) -> int:
    """Serve ``tasks`` as OpenEnv environments until interrupted (``cowork serve --openenv``).

    Raises:
        SpecError: a task does not load.
    """
    import uvicorn

    from .stepped import close_runtimes

    app = make_app(tasks, reward=reward, max_sandboxes=max_sandboxes, judge_model=judge_model,
                   judge_base_url=judge_base_url)
    log.info("serving %d task(s) as OpenEnv environments on http://%s:%d (/ws, /mcp)", len(tasks), host, port)
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        close_runtimes()
    return 0


__all__ = ["FINAL_ANSWER", "CoworkObservation", "CoworkOpenEnv", "CoworkState", "CoworkToolObservation", "make_app",
           "serve"]
