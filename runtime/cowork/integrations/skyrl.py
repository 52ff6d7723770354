"""Cowork tasks in SkyRL: a skyrl-gym text environment, its dataset, and GeneratorOutput from RL exports.

The environment is what SkyRL's ``SkyRLGymGenerator`` drives (checked against skyrl-gym 0.4.0
and NovaSky-AI/SkyRL a956457, ``skyrl/train/generators/skyrl_gym_generator.py``): for each
dataset row it calls ``skyrl_gym.make(row["env_class"], env_config=..., extras=row's other
columns + max_turns)``, then ``env.init(prompt)`` (the returned messages are tokenized as the
prompt), then ``env.step(model_text)`` per turn until ``done``, putting each step's reward on
the last token of that turn's response, then ``env.close()``. Those calls come from an executor
thread; the episode runs on the process's cowork loop (:mod:`cowork.integrations.stepped`)::

    from cowork.integrations import skyrl as cs
    cs.register(reward="turn", max_sandboxes=16)   # in the process that runs the generator
    cs.write_dataset(["specs/fix-csv-report"], "train.parquet")
    # SkyRL config: environment.env_class=cowork, data.train_data=[train.parquet], generator.max_turns=30

The model's text is read with cowork's hermes tool-call parser (:mod:`cowork.agents.toolparse`);
each call runs in the task's sandbox and comes back as a ``tool`` message, a reply without a
call ends the episode (or, in a conversation, brings the user's answer), and the grade of the
episode is the last step's reward. ``reward: turn`` pays cowork's turn-level credit on every
step instead (``--reward turn``). :func:`generator_output` builds SkyRL's ``GeneratorOutput``
from cowork's own RL export, for trainers that roll out with cowork's runner.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import CoworkError, require_extra
from ..grading.judge import shared_judge
from ..spec.loader import LoadedSpec, load_specs
from .stepped import PoolOptions, Step, SteppedEpisode, StepReward, step_runtime

log = logging.getLogger(__name__)

#: The ``env_class`` of cowork rows (what :func:`register` registers by default).
ENV_ID = "cowork"
#: End-of-turn tokens an engine may leave on the text it returns (decoded with special tokens).
_END_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>", "</s>")

_skyrl_gym = require_extra("skyrl_gym", "skyrl", "cowork.integrations.skyrl needs skyrl-gym")
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput  # noqa: E402 - after the check


def tools_prompt(tools: Sequence[dict[str, Any]]) -> str:
    """The text that tells a model the tools and the hermes call format (added to the system
    message by :meth:`CoworkSkyRLEnv.init`: SkyRL renders the prompt without ``tools=``)."""
    lines = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return ("\n\n# Tools\n\nThese functions can be called; their signatures are in <tools></tools>:\n"
            f"<tools>\n{lines}\n</tools>\n\nTo call one, write a JSON object with its name and arguments inside "
            "<tool_call></tool_call> tags, one block per call:\n<tool_call>\n"
            '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n'
            "Reply without a tool call when you are done.")


def _config(env_config: Any) -> dict[str, Any]:
    """SkyRL's ``environment.skyrl_gym.<env_class>`` section (an OmegaConf node or a dict) as a dict."""
    if env_config is None:
        return {}
    if hasattr(env_config, "items"):
        return {str(k): v for k, v in env_config.items()}
    raise CoworkError(f"env_config must be a mapping, got {type(env_config).__name__}")


class CoworkSkyRLEnv(BaseTextEnv):
    """One cowork episode as a skyrl-gym text environment.

    Args:
        env_config: Settings: ``reward`` (``score``, ``pass``, ``safety_gated`` or ``turn``;
            default ``score``), ``max_sandboxes`` (the process's pool; default 8),
            ``max_per_task``, ``backend``, ``describe_tools`` (add the tools to the system
            message; default True), ``judge_model`` and ``judge_base_url`` (the LLM judge of
            ``judge`` checks; none: they are not graded). SkyRL passes its ``environment.skyrl_gym.<env_class>``
            section, which its config class (a956457) has no field for: give them to
            :func:`register` instead (``defaults``); these override them.
        extras: The dataset row's other columns: ``task_dir`` (required; also read from
            ``extra_info``), ``seed`` (the fault seed), and ``max_turns`` (the generator's).
        defaults: The settings given to :func:`register`.

    Raises:
        CoworkError: the row names no task folder, or a setting is unknown.
    """

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None,
                 defaults: dict[str, Any] | None = None):
        super().__init__()
        conf, extras = {**(defaults or {}), **_config(env_config)}, dict(extras or {})
        info = extras.get("extra_info")
        task_dir = extras.get("task_dir") or (info.get("task_dir") if isinstance(info, dict) else None)
        if not task_dir:
            raise CoworkError("a cowork row needs a task_dir column (the task folder); make the dataset with "
                              "cowork.integrations.skyrl.write_dataset")
        self.task_dir = str(task_dir)
        known = {"reward", "max_sandboxes", "max_per_task", "backend", "describe_tools", "judge_model", "judge_base_url"}
        unknown = set(conf) - known
        if unknown:
            raise CoworkError(f"unknown cowork env_config keys {sorted(unknown)}; known: {', '.join(sorted(known))}")
        self.judge_model, self.judge_base_url = conf.get("judge_model"), conf.get("judge_base_url")
        self.reward: StepReward = conf.get("reward", "score")
        if self.reward not in ("score", "pass", "safety_gated", "turn"):
            raise CoworkError(f"unknown reward {self.reward!r}; choose score, pass, safety_gated or turn")
        self.describe_tools = bool(conf.get("describe_tools", True))
        self.options = PoolOptions(max_sandboxes=int(conf.get("max_sandboxes", 8)),
                                   max_per_task=conf.get("max_per_task"), backend=conf.get("backend"))
        self.seed = extras.get("seed")
        self.max_turns = int(extras["max_turns"]) if extras.get("max_turns") else None
        self.episode: SteppedEpisode | None = None
        self.rewards: list[float] = []

    # ------------------------------------------------------------------ skyrl-gym's contract
    def init(self, prompt: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Start the episode (a sandbox from the pool) and give the prompt the model sees.

        Args:
            prompt: The row's prompt (chat messages); empty for the task's own.

        Returns:
            ``(messages, metadata)``: the prompt with the tools described at the end of its
            system message (one is added when it has none), and ``{"task", "tools"}``.

        Raises:
            SandboxError: no sandbox of the task could be had.
            SpecError: the task does not load.
        """
        rt = step_runtime(self.options)
        loaded = rt.spec(self.task_dir)
        self.episode = SteppedEpisode(rt, loaded, reward=self.reward, seed=self.seed, max_turns=self.max_turns,
                                      judge=shared_judge(self.judge_model, self.judge_base_url))
        first = rt.run(self.episode.start())
        messages = [dict(m) for m in (prompt or first)]
        if self.describe_tools:
            if not messages or messages[0].get("role") != "system":
                messages.insert(0, dict(first[0]))
            messages[0]["content"] = (messages[0].get("content") or "") + tools_prompt(self.episode.tools)
        self.max_turns = self.max_turns or loaded.spec.limits.max_turns
        return messages, {"task": loaded.spec.id, "tools": len(self.episode.tools)}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Run the model's turn: its tool calls in the sandbox, or its reply.

        Returns:
            ``observations``: one ``tool`` message per call (then the user's next message in
            a conversation), empty when done; ``reward``: this step's (0.0 for an unscorable
            episode, which ``metadata["reward_none"]`` flags); ``done``; ``metadata``: the
            grade when done.

        Raises:
            CoworkError: step() before init(), or after the episode ended.
        """
        from ..agents.base import AssistantTurn
        from ..agents.toolparse import parse_tool_calls

        if self.episode is None:
            raise CoworkError("step() before init(): SkyRL calls init(prompt) first")
        self.turns += 1
        text = action
        for end in _END_TOKENS:
            if text.endswith(end):
                text = text[: -len(end)]
                break
        content, calls = parse_tool_calls(text, id_prefix=f"call_{self.turns}")
        turn = AssistantTurn(content=content or None, tool_calls=calls,
                             extra={"finish_reason": "tool_calls" if calls else "stop"})
        out: Step = self.episode.runtime.run(self.episode.act(turn))
        self.rewards.append(0.0 if out.reward is None else float(out.reward))
        return BaseTextEnvStepOutput(observations=out.messages, reward=self.rewards[-1], done=out.done,
                                     metadata=self._metadata(out))

    def close(self) -> None:
        """End an episode SkyRL stopped early (its prompt outgrew ``max_input_length``): graded
        ``truncated``, its sandbox given back. A finished episode has nothing left to do."""
        if self.episode is not None and not self.episode.done:
            try:
                self.episode.runtime.run(self.episode.abandon())
            except Exception as exc:  # noqa: BLE001 - closing must not fail the batch
                log.warning("task %s: ending the episode failed: %s", self.episode.loaded.spec.id, exc)

    def get_metrics(self) -> dict[str, Any]:
        """Per episode, averaged by SkyRL: score, passed, turns, the summed step rewards."""
        result = self.episode.result if self.episode is not None else None
        if result is None:
            return {"turns": self.turns}
        g = result.grade
        return {"score": float(g.score), "passed": float(bool(g.passed)), "turns": self.turns,
                "reward_sum": float(sum(self.rewards)), "truncated": float(result.trajectory.status == "truncated")}

    def _metadata(self, out: Step) -> dict[str, Any]:
        if not out.done:
            return {}
        g, t = out.result.grade, out.result.trajectory
        return {"task": g.task, "status": t.status, "grade_status": g.status, "score": float(g.score),
                "passed": bool(g.passed), "safe": g.safe, "reward_none": out.reward is None}


def register(env_id: str = ENV_ID, **settings: Any) -> None:
    """Register :class:`CoworkSkyRLEnv` with skyrl-gym under ``env_id``, with default settings
    (``reward="turn"``, ``max_sandboxes=16``: see the class); again with other settings
    replaces the registration.

    Raises:
        CoworkError: an unknown setting.
    """
    from skyrl_gym.envs.registration import deregister, registry
    from skyrl_gym.envs.registration import register as gym_register

    CoworkSkyRLEnv(settings, {"task_dir": "."})  # checks the settings; starts nothing
    kwargs = {"defaults": dict(settings)}
    if env_id in registry:
        if registry[env_id].kwargs == kwargs:
            return
        deregister(env_id)
    gym_register(id=env_id, entry_point=f"{__name__}:CoworkSkyRLEnv", kwargs=kwargs)


register()


# --------------------------------------------------------------------------- the dataset
def dataset_rows(tasks: Iterable[str | Path | LoadedSpec], env_class: str = ENV_ID) -> list[dict[str, Any]]:
    """One row per task, as SkyRL's ``PromptDataset`` reads them: ``prompt`` (the task's system
    prompt and its prompt), ``env_class``, and the extras ``task_dir``, ``task``, ``data_source``.

    Raises:
        SpecError: a task does not load.
    """
    from ..episode.run import DEFAULT_SYSTEM
    from ..synth.dataset import resolve_tasks

    items = list(tasks)
    loaded = [t for t in items if isinstance(t, LoadedSpec)]
    paths = [t for t in items if not isinstance(t, LoadedSpec)]
    loaded += load_specs(resolve_tasks(paths)) if paths else []
    return [{"prompt": [{"role": "system", "content": ld.spec.system_prompt or DEFAULT_SYSTEM},
                        {"role": "user", "content": ld.spec.prompt}],
             "env_class": env_class, "task_dir": str(ld.root.resolve()), "task": ld.spec.id, "data_source": "cowork"}
            for ld in loaded]


def write_dataset(tasks: Iterable[str | Path | LoadedSpec], path: str | Path, env_class: str = ENV_ID) -> Path:
    """Write :func:`dataset_rows` as Parquet (``.parquet``) or JSON lines (anything else),
    the two formats SkyRL's ``data.train_data`` takes.

    Raises:
        CoworkError: Parquet without the hf extra (datasets).
        SpecError: a task does not load.
    """
    rows, path = dataset_rows(tasks, env_class), Path(path)
    if path.suffix == ".parquet":
        datasets = require_extra("datasets", "hf", "a Parquet dataset needs the hf extra (datasets)")
        datasets.Dataset.from_list(rows).to_parquet(str(path))
    else:
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


# --------------------------------------------------------------------------- GeneratorOutput
def _skyrl_stop(reason: str | None) -> str:
    """SkyRL's word for how an episode ended: ``stop`` for one the agent ended; ``length``
    for a token or context limit; else cowork's own (``max_turns``, ``timeout``), which SkyRL's
    overlong filtering, like ``length``, masks out."""
    if reason in (None, "stop"):
        return "stop"
    return "length" if reason in ("length", "context_length") else str(reason)


def generator_output(records: Sequence[dict[str, Any]], *, per_token: bool | None = None) -> dict[str, Any]:
    """SkyRL's ``GeneratorOutput`` (a dict of its fields) from cowork's RL export records
    (:func:`cowork.export.rl.rl_examples`, or the rows of ``cowork export --format rl``), in order.

    Field by field: ``prompt_token_ids`` = ``prompt_ids``; ``response_ids``; ``loss_masks`` =
    ``response_mask``; ``rollout_logprobs`` = ``response_logprobs`` (0.0 on environment
    tokens, which the mask excludes); ``rewards`` = ``response_rewards`` (per token: each
    turn's credit on its last generated token) where the records have them (``--reward turn``)
    or else the scalar ``reward``; ``stop_reasons`` from ``stop_reason`` (see
    :func:`_skyrl_stop`); ``rollout_metrics`` the mean score and pass rate. The fields SkyRL
    fills itself (trajectory ids, timings, expert indices, VLM tensors) are None.

    Args:
        records: RL export records.
        per_token: Force per-token rewards (True) or scalar ones (False); None: per token
            when every record has ``response_rewards``.

    Raises:
        CoworkError: no records, per-token rewards asked of records without them, or a
            record whose lengths disagree.
    """
    if not records:
        raise CoworkError("no RL records to build a GeneratorOutput from")
    has_turn = all(r.get("response_rewards") is not None for r in records)
    if per_token is None:
        per_token = has_turn
    if per_token and not has_turn:
        raise CoworkError("per-token rewards need records exported with --reward turn (response_rewards)")
    for r in records:
        n = {len(r["response_ids"]), len(r["response_mask"]), len(r["response_logprobs"])}
        if per_token:
            n.add(len(r["response_rewards"]))
        if len(n) != 1:
            raise CoworkError(f"record {r.get('uid')}: response lengths disagree ({sorted(n)})")
    return {
        "prompt_token_ids": [list(r["prompt_ids"]) for r in records],
        "response_ids": [list(r["response_ids"]) for r in records],
        "rewards": [[float(x) for x in r["response_rewards"]] if per_token else float(r["reward"]) for r in records],
        "loss_masks": [[int(m) for m in r["response_mask"]] for r in records],
        "stop_reasons": [_skyrl_stop(r.get("stop_reason")) for r in records],
        "rollout_metrics": {"cowork_score": sum(float(r.get("score", 0.0)) for r in records) / len(records),
                            "cowork_pass_rate": sum(bool(r.get("passed")) for r in records) / len(records)},
        "rollout_logprobs": [[float(x) for x in r["response_logprobs"]] for r in records],
        "trajectory_ids": None, "trajectory_generation_times": None, "trajectory_time_splits": None,
        "rollout_expert_indices": None, "is_last_step": None, "env_metrics": None,
        "pixel_values": None, "image_grid_thw": None,
    }


__all__ = ["ENV_ID", "CoworkSkyRLEnv", "dataset_rows", "generator_output", "register", "tools_prompt",
           "write_dataset"]
