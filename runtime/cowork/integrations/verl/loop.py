"""verl's agent loop for cowork tasks: one graded sandbox episode per dataset row.

verl's ``AgentLoopWorker`` (checked against verl 0.9.1, ``verl/experimental/agent_loop``)
makes one agent loop per sample, through ``hydra.utils.instantiate`` of the entry registered
under the row's ``agent_name``, with ``trainer_config``, ``server_manager`` (the
``LLMServerClient``), ``tokenizer``, ``processor``, ``dataset_cls``, ``data_config``,
``hf_model_type`` and ``tools``, plus every key of the entry's config, then awaits
``run(sampling_params, **row)`` with the row's columns (``raw_prompt``, ``extra_info``,
``index``, ``tools_kwargs``, ``agent_name``, ...). It pads the returned ``AgentLoopOutput``
to ``prompt_length`` / ``response_length``; a ``reward_score`` becomes the last response
token's ``rm_scores`` entry, which the trainer takes as the sequence reward, and
``extra_fields["reward_extra_info"]`` the reward's logged extras.

:class:`CoworkAgentLoop` runs the row's task (``extra_info.task_dir``, written by
:func:`~cowork.integrations.verl.dataset.verl_dataset`) as :func:`cowork.episode.run.run_task`
does, on a sandbox from this process's pool, with a policy that generates on verl's server
(:class:`~cowork.integrations.verl.policy.ServerPolicy`), and returns the episode's tokens,
mask, log-probabilities, reward and turn count.

The sandboxes come from one :class:`~cowork.sandbox.pool.SandboxPool` per process and pool
settings, driven by an event loop on a daemon thread
(:class:`~cowork.integrations.loop_thread.PoolRuntime`, as the TRL adapter's): it outlives any
one of verl's loops, and closes at exit (:func:`close`). The model calls go back to verl's
loop, where its server client lives.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ...agents.chat_tokens import ChatTokens
from ...errors import CoworkError, PolicyError, SandboxError, SpecError, require_extra
from ...grading.judge import shared_judge
from ...rollouts.rewards import reward_for
from ..loop_thread import PoolRuntime, Runtimes
from .dataset import AGENT_NAME, first_messages
from .policy import ServerPolicy

require_extra("verl.experimental.agent_loop", "verl", "cowork's verl agent loop needs verl",
              "verl itself installs with --no-deps: see docs/training.md")
from verl.experimental.agent_loop.agent_loop import (  # noqa: E402 - after the install hint
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    _agent_loop_registry,
    register,
)

log = logging.getLogger(__name__)


class LoopOptions(BaseModel):
    """How the cowork agent loop runs and rewards episodes: keys of its entry in verl's
    ``agent_loop_config_path`` file, beside ``name`` and ``_target_``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reward: Literal["score", "pass", "safety_gated"] = "score"
    """The reward of a graded episode: see :func:`cowork.rollouts.rewards.reward_for`."""
    max_sandboxes: int = Field(default=32, ge=1)
    """Most sandboxes of the process's pool at once, all tasks together: at least the
    episodes one agent loop worker runs at once (its share of the batch times ``rollout.n``),
    or episodes wait for a sandbox."""
    max_per_task: int | None = Field(default=None, ge=1)
    """Most sandboxes of one task at once (None: ``max_sandboxes``)."""
    max_uses: int = Field(default=100, ge=1)
    """Episodes one sandbox serves before it is replaced by a fresh one."""
    backend: str | None = None
    """Sandbox backend name (``docker``, ``gvisor``; None: ``settings.sandbox_backend``)."""
    infra_retries: int = Field(default=1, ge=0)
    """Fresh sandboxes to try after an infrastructure failure."""
    unscored: Literal["mask", "raise"] = "mask"
    """An episode still without a grade after its retries (``infra_error``): ``mask`` returns
    it with reward 0.0 and every response token masked 0 (nothing of it is trained on; it does
    count in its group's mean), ``raise`` fails the batch. A failure of verl's own server
    always raises, as it does in verl's loops."""
    max_tokens_per_turn: int | None = Field(default=None, ge=1)
    """Most tokens one assistant turn may generate (None: what is left of ``response_length``)."""
    end_token: str | None = None
    """The token that ends an assistant turn (None: the tokenizer's eos)."""
    keep_trajectory: bool = False
    """Also return the whole cowork trajectory (messages, steps, tokens) in
    ``extra_fields["cowork_trajectory"]``: for dumps and debugging, not for the trainer."""
    judge_model: str | None = None
    """The LLM judge of the tasks' ``judge`` checks (OpenAI-compatible; key from
    ``$OPENAI_API_KEY``); None: those checks are not graded and count as not passed."""
    judge_base_url: str | None = None
    """Its endpoint (None: ``$OPENAI_BASE_URL``)."""

    def pool_key(self) -> tuple:
        """The pool settings: options with equal keys share one sandbox pool per process."""
        return (self.max_sandboxes, self.max_per_task, self.max_uses, self.backend)


# --------------------------------------------------------------------------- the per-process runtime
class _Runtime(PoolRuntime):
    """The agent loops' event loop on a daemon thread and the sandbox pool that lives on it."""

    thread_name = "cowork-verl-loop"


_RUNTIMES_BY_KEY: Runtimes[_Runtime] = Runtimes(_Runtime)
_RUNTIMES = _RUNTIMES_BY_KEY.runtimes


def _runtime(options: LoopOptions) -> _Runtime:
    """The process's runtime for these pool settings (made on first use, closed at exit)."""
    return _RUNTIMES_BY_KEY.get(options.pool_key(), options)


def close() -> None:
    """Remove every sandbox of this process's agent loops and stop their loops (also run at exit)."""
    _RUNTIMES_BY_KEY.close_all()


# --------------------------------------------------------------------------- the agent loop
def task_dir(extra_info: Any) -> str:
    """The spec folder a dataset row names (``extra_info.task_dir``).

    Raises:
        SpecError: the row names none (it was not written by ``verl_dataset``).
    """
    folder = (extra_info or {}).get("task_dir") if hasattr(extra_info, "get") else None
    if not folder:
        raise SpecError(f"the row's extra_info names no cowork task (extra_info.task_dir): {extra_info!r}; "
                        "write the dataset with cowork.integrations.verl.verl_dataset")
    return str(folder)


class CoworkAgentLoop(AgentLoopBase):
    """Runs the row's cowork task in a pooled sandbox with the model on verl's server.

    Args:
        *args: What verl's worker passes every agent loop (see the module docstring).
        name: The entry's name in ``agent_loop_config_path`` (ignored).
        tools: verl's own tool list (ignored: a cowork task's tools are its sandbox's).
        **kwargs: verl's, and the :class:`LoopOptions` fields.

    Raises:
        pydantic.ValidationError: an option is unknown or out of range.
    """

    def __init__(self, *args: Any, name: str | None = None, tools: Any = None, **kwargs: Any):
        fields = {k: kwargs.pop(k) for k in list(kwargs) if k in LoopOptions.model_fields}
        super().__init__(*args, **kwargs)
        self.options = LoopOptions.model_validate(fields)
        self.chat = ChatTokens(self.tokenizer, end_token=self.options.end_token,
                               template_kwargs=dict(self.apply_chat_template_kwargs or {}))

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """One graded episode of the row's task.

        Raises:
            SpecError: the row names no task, or its spec does not load.
            PolicyError: verl's server failed (or the first prompt does not fit ``prompt_length``).
            SandboxError: no sandbox could be had after the retries, with ``unscored="raise"``.
        """
        from ...episode.run import run_task

        rt = _runtime(self.options)
        loaded = await asyncio.to_thread(rt.spec, task_dir(kwargs.get("extra_info")))
        rollout = self.rollout_config
        model = str(self.config.actor_rollout_ref.model.get("path", "") or "")
        policy = ServerPolicy(self.server_manager, self.chat, sampling_params=sampling_params,
                              prompt_length=int(rollout.prompt_length), response_length=int(rollout.response_length),
                              max_tokens_per_turn=self.options.max_tokens_per_turn, model=model,
                              logprobs_mode=_logprobs_mode(rollout.get("logprobs_mode", None)),
                              server_loop=asyncio.get_running_loop())
        t0 = time.monotonic()
        judge = shared_judge(self.options.judge_model, self.options.judge_base_url)
        result = await rt.arun(run_task(loaded, policy, pool=rt.pool, infra_retries=self.options.infra_retries,
                                        judge=judge))
        seconds = time.monotonic() - t0
        raw = kwargs.get("raw_prompt")  # a list, or a numpy array of messages: never tested for truth
        messages = [dict(m) for m in raw] if raw is not None else first_messages(loaded.spec)
        return episode_output(result, policy, self.options, seconds=seconds, first_messages=messages)


def _register(name: str, cls: type) -> None:
    """Register ``cls`` under ``name`` with verl, unless an entry of that name is there already:
    verl's worker loads the ``agent_loop_config_path`` entries (with their options) first and
    imports this module on the first instantiation, and verl's plain ``register`` would then
    replace the configured entry with an option-less one for every later sample."""
    if name not in _agent_loop_registry:
        register(name)(cls)


_register(AGENT_NAME, CoworkAgentLoop)


def _logprobs_mode(mode: Any) -> Any:
    """The ``rollout.logprobs_mode`` of verl where the trajectory has a name for it (verl may also
    run with ``processed_logits`` or ``raw_logits``, which are not log-probabilities)."""
    return mode if mode in ("processed_logprobs", "raw_logprobs") else None


def episode_output(result: Any, policy: ServerPolicy, options: LoopOptions, *, seconds: float = 0.0,
                   first_messages: list[dict[str, Any]] | None = None) -> AgentLoopOutput:
    """A graded cowork episode as verl's ``AgentLoopOutput``.

    ``prompt_ids`` is the first prompt (the chat template over the system prompt, the task's
    prompt and the tools); ``response_ids`` everything after it, the generated turns and the
    environment's tokens between them (tool results, the user's turns, the template's own
    tokens); ``response_mask`` 1 exactly on generated tokens; ``response_logprobs`` the
    server's log-probability of each generated token and 0.0 elsewhere (None when verl asked
    for none); ``num_turns`` counts, as verl's tool agent does, the first prompt, each
    assistant turn and each environment reply.

    Args:
        result: The :class:`~cowork.episode.run.EpisodeResult`.
        policy: The episode's policy (its tokens, timings, weights versions).
        options: The loop's options.
        seconds: The whole episode's wall time (sandbox, model, grading).
        first_messages: The row's prompt, tokenized for an episode that never got a sandbox.

    Raises:
        PolicyError: the episode ended ``policy_error``: verl's server failed.
        SandboxError: the episode has no grade (``infra_error``) and ``options.unscored`` is ``raise``.
    """
    traj, grade = result.trajectory, result.grade
    if traj.status == "policy_error":
        raise PolicyError(f"{grade.task}: {traj.error}")
    reward = reward_for(grade, options.reward)
    tokens = traj.tokens if traj.tokens is not None and traj.tokens.turns else None
    if tokens is not None:
        view = tokens.rl_view()
        prompt_ids, response_ids, mask = view["prompt_ids"], view["response_ids"], view["response_mask"]
        logprobs = view["response_logprobs"] if policy.has_logprobs else None
        num_turns = 1 + len(tokens.turns) + len(tokens.env_spans())
    else:  # no turn was generated: the episode never had a sandbox, or its first prompt failed
        prompt_ids = policy.chat.prompt(first_messages or [], None)
        response_ids, mask, logprobs, num_turns = [], [], None, 1
    if reward is None:
        if options.unscored == "raise":
            raise SandboxError(f"{grade.task}: no sandbox after the retries: {traj.error}")
        log.warning("%s: %s, returned masked with reward 0.0: %s", grade.task, grade.status, traj.error)
        reward, mask = 0.0, [0] * len(response_ids)
    env_s = max(traj.duration_s - policy.generate_s, 0.0)
    extra: dict[str, Any] = {
        "cowork_task": grade.task,
        "cowork_status": traj.status,
        "cowork_stop_reason": traj.stop_reason,
        "cowork_request_id": policy.request_id,
        "cowork_grade": {"status": grade.status, "score": grade.score, "passed": grade.passed, "safe": grade.safe,
                         "completion": grade.completion, "violations": list(grade.violations)},
        "reward_extra_info": {"cowork_score": float(grade.score), "cowork_passed": float(grade.passed),
                              "cowork_safe": 1.0 if grade.safe is True else 0.0,
                              "cowork_completion": float(grade.completion)},
        "min_global_steps": policy.min_version,
        "max_global_steps": policy.max_version,
    }
    if options.keep_trajectory:
        extra["cowork_trajectory"] = traj.model_dump(mode="json")
    metrics = AgentLoopMetrics(generate_sequences=policy.generate_s, tool_calls=env_s,
                               compute_score=max(seconds - traj.duration_s, 0.0),
                               num_preempted=policy.num_preempted if policy.num_preempted is not None else -1)
    return AgentLoopOutput(prompt_ids=prompt_ids, response_ids=response_ids, response_mask=mask,
                           response_logprobs=logprobs, reward_score=reward, num_turns=num_turns, metrics=metrics,
                           extra_fields=extra)


def record_output(record: dict[str, Any]) -> AgentLoopOutput:
    """One record of cowork's RL export (``cowork export --format rl``,
    :func:`cowork.export.rl.rl_examples`) as verl's ``AgentLoopOutput``: the same fields the
    live loop returns, for episodes rolled out apart from verl (docs/exports.md, "How verl
    consumes it"). verl groups samples by the batch's ``uid``: give it the record's ``group_id``.

    Raises:
        CoworkError: the record's ids, mask and logprobs differ in length.
    """
    n = {len(record["response_ids"]), len(record["response_mask"]), len(record["response_logprobs"])}
    if len(n) != 1:
        raise CoworkError(f"RL record {record.get('uid')!r}: response_ids, response_mask and response_logprobs "
                          f"differ in length")
    mask = list(record["response_mask"])
    env_runs = sum(1 for i, m in enumerate(mask) if m == 0 and (i == 0 or mask[i - 1] == 1))
    versions = [v for v in record.get("turn_policy_versions") or [] if v is not None]
    extra: dict[str, Any] = {
        "cowork_task": record.get("task"),
        "cowork_status": record.get("status"),
        "cowork_stop_reason": record.get("stop_reason"),
        "reward_extra_info": {"cowork_score": float(record.get("score") or 0.0),
                              "cowork_passed": float(bool(record.get("passed")))},
        "min_global_steps": record.get("policy_version"),
        "max_global_steps": max(versions) if versions else record.get("policy_version"),
    }
    return AgentLoopOutput(prompt_ids=list(record["prompt_ids"]), response_ids=list(record["response_ids"]),
                           response_mask=mask, response_logprobs=list(record["response_logprobs"]),
                           reward_score=float(record["reward"]),
                           num_turns=1 + len(record.get("turn_spans") or []) + env_runs,
                           metrics=AgentLoopMetrics(), extra_fields=extra)


__all__ = ["CoworkAgentLoop", "LoopOptions", "close", "episode_output", "record_output", "task_dir"]
