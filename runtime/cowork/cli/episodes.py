"""``cowork run`` and ``cowork rollout``: the same rollout runner behind both, the options
they share, their output and their exit codes."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from ..agents import AGENTS
from ..errors import CoworkError
from ..rollouts.progress import ProgressReport
from . import exits, interrupted, output

AGENT_HELP = ("who acts: the default, oracle, plays the spec's scripted reference solution (no model needed); "
              "nop does nothing and violation runs the spec's unsafe script; openai (any OpenAI-compatible "
              "endpoint) and vllm-server (a vLLM server, with token ids) call a model over HTTP; vllm and hf "
              "load one in this process (extras); harness runs a main agent that delegates to subagents "
              "(docs/harness.md), both on the openai backend")
#: cowork.rollouts.runner.REWARDS, written out: importing the runner takes a second (a test keeps them equal).
REWARDS = ("score", "pass", "safety_gated")
_A, _E, _G, _O = "Agent", "Episodes", "Grading", "Output"

# The options both commands take (Typer reads them from each command's signature).
SpecArg = Annotated[list[str], typer.Argument(help="task folders, task.yaml files, folders of tasks, or a spec "
                                                   "dataset (`cowork synth dataset`): DIR for all its splits, "
                                                   "DIR:SPLIT for one",
                                              metavar="SPEC", show_default=False)]
Agent = Annotated[str, typer.Option(help=AGENT_HELP, rich_help_panel=_A, **exits.choice(AGENTS))]
Model = Annotated[str | None, typer.Option(help="model name (openai, vllm-server) or folder / hub name "
                                                "(vllm, hf); needed by every model backend (default: none)", rich_help_panel=_A)]
BaseUrl = Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL, then "
                                                  "the OpenAI API; vllm-server: required, http://host:8000/v1); "
                                                  "key from $OPENAI_API_KEY ($VLLM_API_KEY for vllm-server)",
                                             rich_help_panel=_A)]
Temperature = Annotated[float | None, typer.Option(help="sampling temperature of a model backend "
                                                        "(default: the backend's, 0.0 for openai)",
                                                   rich_help_panel=_A)]
TopP = Annotated[float | None, typer.Option(help="nucleus sampling of the vllm, vllm-server and hf backends "
                                                 "(default: the backend's)", rich_help_panel=_A)]
MaxTokens = Annotated[int | None, typer.Option(help="most tokens per turn of a model backend (default: the "
                                                    "backend's, 2048 for openai)", rich_help_panel=_A)]
PoolSize = Annotated[int | None, typer.Option(help="most sandboxes at once (default: --concurrency)",
                                              rich_help_panel=_E)]
Seed = Annotated[int | None, typer.Option(help="base fault seed: sample s gets SEED+s (default: each spec's own)",
                                          rich_help_panel=_E)]
Reward = Annotated[str, typer.Option(help="reward written per episode (safety_gated: 0 unless safety was judged "
                                          "and held)", rich_help_panel=_G, **exits.choice(REWARDS))]
TurnProgress = Annotated[bool, typer.Option("--turn-progress", help="grade the checks after every turn too "
                                            "(turn-level credit: `cowork export --reward turn`)", rich_help_panel=_G)]
JudgeModel = Annotated[str | None, typer.Option(help="LLM judge model for rubric items (OpenAI-compatible; key "
                                                     "from $OPENAI_API_KEY; default: none, rubric items are "
                                                     "not graded)", rich_help_panel=_G)]
JudgeBaseUrl = Annotated[str | None, typer.Option(help="endpoint of the judge (default: $OPENAI_BASE_URL)",
                                                  rich_help_panel=_G)]
UserModel = Annotated[str | None, typer.Option(help="simulate the users of multi-turn specs with `user.llm` with "
                                                    "this model (OpenAI-compatible; key from $COWORK_USER_API_KEY "
                                                    "or $OPENAI_API_KEY; default: none, their scripted turns "
                                                    "answer)", rich_help_panel=_A)]
UserBaseUrl = Annotated[str | None, typer.Option(help="endpoint of the user model (default: $COWORK_USER_BASE_URL, "
                                                      "then $OPENAI_BASE_URL)", rich_help_panel=_A)]
FailUnder = Annotated[float | None, typer.Option(help="exit 1 when the mean score is below this (0..1; for CI; "
                                                      "default: no gate)", rich_help_panel=_G)]
RayAddress = Annotated[str | None, typer.Option("--ray", metavar="ADDRESS",
                                               help="run the episodes on a Ray cluster's Docker hosts (head "
                                                    "host:port, ray://..., or auto; each node's sandboxes: its "
                                                    "`cowork` resource, so --concurrency and --pool-size do not "
                                                    "apply; see docs/scale-out.md; default: this machine)", rich_help_panel=_E)]
Json = Annotated[bool, typer.Option("--json", help="print JSON instead of text", rich_help_panel=_O)]
Verbose = Annotated[bool, typer.Option("-v", "--verbose", help="print every check line of every episode "
                                       "(default: one line per episode, failed checks under a failure)",
                                       rich_help_panel=_O)]


@dataclass
class EpisodeOptions:
    """What ``run`` and ``rollout`` share, as given on the command line."""

    agent: str
    model: str | None
    base_url: str | None
    temperature: float | None
    top_p: float | None
    max_tokens: int | None
    concurrency: int
    pool_size: int | None
    seed: int | None
    reward: str
    turn_progress: bool
    judge_model: str | None
    judge_base_url: str | None
    user_model: str | None
    user_base_url: str | None
    fail_under: float | None
    ray: str | None = None
    """A Ray cluster's address: episodes run on its nodes (cowork.integrations.ray)."""

    def check(self, **counts: int | None) -> None:
        """Refuse limits below 1 and a gate outside 0..1 (bad input: exit 2)."""
        for flag, value in {"concurrency": self.concurrency, "pool_size": self.pool_size, **counts}.items():
            if value is not None and value < 1:
                raise CoworkError(f"--{flag.replace('_', '-')} must be at least 1, got {value}")
        if self.fail_under is not None and not 0.0 <= self.fail_under <= 1.0:
            raise CoworkError(f"--fail-under is a score between 0 and 1, got {self.fail_under}")

    def policy_options(self) -> dict[str, Any]:
        """make_policy's options for the agent; refuses a model backend without a model."""
        if self.agent in ("oracle", "nop", "violation"):
            return {}
        if not self.model:
            raise CoworkError(f"--agent {self.agent} needs --model" + (
                " (and --base-url for a non-OpenAI endpoint)" if self.agent in ("openai", "harness") else
                " and --base-url (the vLLM server's http://host:8000/v1)" if self.agent == "vllm-server" else
                " (a model folder or hub name)"))
        if self.agent == "vllm-server" and not self.base_url:
            raise CoworkError("--agent vllm-server needs --base-url (the vLLM server's http://host:8000/v1)")
        opts: dict[str, Any] = {"model": self.model}
        if self.agent in ("openai", "vllm-server", "harness"):
            opts["base_url"] = self.base_url
        if self.agent in ("openai", "harness"):
            opts.update({k: v for k, v in (("temperature", self.temperature), ("max_tokens", self.max_tokens))
                         if v is not None})
            return opts
        sampling = {k: v for k, v in (("temperature", self.temperature), ("top_p", self.top_p),
                                      ("max_tokens", self.max_tokens)) if v is not None}
        if sampling:
            opts["sampling"] = sampling
        return opts

    async def preflight(self) -> None:
        """One cheap request to each model endpoint the run will call (see cli.preflight)."""
        from .preflight import endpoints, preflight

        await preflight(endpoints(agent=self.agent, model=self.model, base_url=self.base_url,
                                  judge_model=self.judge_model, judge_base_url=self.judge_base_url,
                                  user_model=self.user_model, user_base_url=self.user_base_url))


async def run_episodes(opts: EpisodeOptions, specs: list, *, group_size: int, out: str | None, on_episode=None):
    """Every spec ``group_size`` times through the rollout runner: the one code path of
    ``cowork run`` and ``cowork rollout``."""
    from ..agents import make_policy
    from ..rollouts.runner import RolloutRunner

    policy_opts = opts.policy_options()
    await opts.preflight()
    judge = None
    if opts.judge_model:
        from ..grading.judge import LLMJudge

        judge = LLMJudge(model=opts.judge_model, base_url=opts.judge_base_url)
    user_model = None
    if opts.user_model:
        from ..episode.conversation import UserModel as UserModelConfig

        user_model = UserModelConfig(model=opts.user_model, base_url=opts.user_base_url)
    runner: RolloutRunner
    if opts.ray:
        from ..integrations.ray import RayRolloutRunner

        # In-process engines stay here, on the driver's GPUs; the nodes ask them for each turn.
        runner = RayRolloutRunner(opts.ray, policy_at="driver" if opts.agent in ("vllm", "hf") else "node",
                                  reward=opts.reward, turn_progress=opts.turn_progress, user_model=user_model,
                                  judge=judge)
    else:
        runner = RolloutRunner(concurrency=opts.concurrency, pool_size=opts.pool_size, reward=opts.reward,
                               turn_progress=opts.turn_progress, user_model=user_model, judge=judge)
    async with runner:
        return await runner.rollout(specs, lambda spec: make_policy(opts.agent, spec, **policy_opts),
                                    group_size=group_size, seed=opts.seed, out_dir=out, on_episode=on_episode)


def exit_code(result: Any, fail_under: float | None) -> int:
    """3 when an episode ended on an infrastructure or model endpoint failure (said on stderr);
    else 1 when the mean score is below ``fail_under``; else 0."""
    summary = result.summary
    endpoint = [s for s in result.samples if s.trajectory.status == "policy_error"]
    if endpoint:
        first = endpoint[0].trajectory.error or endpoint[0].grade.error or "no error recorded"
        output.error(f"{len(endpoint)} episode(s) ended because the model failed to answer (first: {first}); "
                     "check --base-url and the key ($OPENAI_API_KEY), then run again (a rollout folder resumes "
                     "them)")
    if endpoint or summary["episodes"]["infra_error"]:
        return exits.INFRASTRUCTURE
    if fail_under is not None:
        mean = summary["overall"].get("mean_score")
        if mean is None or mean < fail_under:
            output.error(f"mean score {output.num(mean)} is below --fail-under {fail_under}")
            return exits.GATE_FAILED
    return exits.OK


def _already_done(out: str | None, specs: list, group_size: int) -> int:
    """Episodes a resumed rollout folder holds (for the progress count; the runner decides)."""
    from ..rollouts.metrics import NOT_SCORED
    from ..rollouts.runner import RESULTS_FILE, read_results

    path = Path(out) / RESULTS_FILE if out else None
    if path is None or not path.is_file():
        return 0
    try:
        rows, _ = read_results(path)
    except CoworkError:
        return 0  # the runner reports it
    planned = {(ld.spec.id, s) for ld in specs for s in range(group_size)}
    return len({(r["task"], r["sample"]) for r in rows if r.get("grade_status") not in NOT_SCORED} & planned)


def _finished(out: str | None, specs: list, group_size: int, progress: ProgressReport) -> int:
    """Episodes finished, for the Ctrl-C note: those the folder holds (what a rerun skips), or
    those reported."""
    return _already_done(out, specs, group_size) if out else progress.figures.done


async def run(opts: EpisodeOptions, spec: list[str], *, trials: int, evidence: str | None, results: str | None,
              out: str | None, as_json: bool, verbose: bool) -> int:
    """``cowork run``: print each episode as it finishes, then the table of several."""
    from ..rollouts.runner import append_jsonl, save_bundle
    from ..spec.loader import load_specs
    from ..synth.dataset import resolve_tasks

    opts.check(trials=trials)
    specs = load_specs(resolve_tasks(spec))
    by_id = {ld.spec.id: ld for ld in specs}
    total = len(specs) * trials
    single = total == 1
    progress = ProgressReport("run", "episodes", total, done=_already_done(out, specs, trials), enabled=not single)
    interrupted.expect(lambda: interrupted.episodes(_finished(out, specs, trials, progress), total, out=out,
                                                    results=results, evidence=evidence))

    saved: dict[tuple[str, int], str] = {}

    async def show(sample) -> None:
        ev_dir = None
        if evidence:
            ev_dir = Path(evidence) if single else Path(evidence) / sample.task / f"trial-{sample.sample}"
            await asyncio.to_thread(save_bundle, ev_dir, sample, by_id[sample.task].spec)
            saved[(sample.task, sample.sample)] = str(ev_dir)
        if results:
            # One line per finished episode, flushed as it finishes: a crash loses nothing done.
            row = {**sample.row(), "trial": sample.sample, "grade": sample.grade.model_dump(),
                   "evidence": str(ev_dir) if ev_dir else None}
            await asyncio.to_thread(append_jsonl, results, row)
        if not as_json:
            output.print_episode(sample, trial=trials > 1, verbose=verbose)
        # The verdict is on stdout already: the progress line names the task only.
        progress.advance(sample.task + (f" (trial {sample.sample + 1})" if trials > 1 else ""))

    with progress:
        result = await run_episodes(opts, specs, group_size=trials, out=out, on_episode=show)
    metrics, samples = result.summary, result.samples
    if as_json:
        # One shape for one episode as for many (cowork.cli.shapes.RunOutput; docs/cli.md).
        output.print_json({"runs": [{
            "task": s.task, "trial": s.sample, "agent": s.trajectory.agent, "grade": s.grade.model_dump(),
            "trajectory": {"status": s.trajectory.status, "turns": s.trajectory.turns,
                           "tool_calls": len(s.trajectory.steps), "duration_s": s.trajectory.duration_s},
            "evidence": saved.get((s.task, s.sample))} for s in samples], "metrics": metrics})
    else:
        if len(samples) > 1:
            output.say(output.metrics_table(metrics))
            output.say(output.safety_line(metrics))
            if agents := output.agents_line(metrics):
                output.say(agents)
        # Infrastructure failures are not scored (they say nothing of the agent) but never hidden:
        # counted here, and the exit status says 3 when any episode ended on one.
        line = output.not_scored_line(metrics)
        if line:
            output.say(line)
        if evidence:
            output.say(f"evidence saved under {evidence}")
    return exit_code(result, opts.fail_under)


async def rollout(opts: EpisodeOptions, spec: list[str], *, group_size: int, out: str, as_json: bool,
                  verbose: bool) -> int:
    """``cowork rollout``: progress while it runs (episode lines with ``-v``), then the summary."""
    from ..spec.loader import load_specs
    from ..synth.dataset import resolve_tasks

    opts.check(group_size=group_size)
    specs = load_specs(resolve_tasks(spec))
    progress = ProgressReport("rollout", "episodes", len(specs) * group_size,
                              done=_already_done(out, specs, group_size))
    interrupted.expect(lambda: interrupted.episodes(_finished(out, specs, group_size, progress),
                                                    progress.figures.total, out=out))

    def show(sample) -> None:
        if verbose and not as_json:
            output.print_episode(sample, trial=True, verbose=True)
        progress.advance(output.episode_line(sample, trial=True).plain)

    with progress:
        result = await run_episodes(opts, specs, group_size=group_size, out=out, on_episode=show)
    m = result.summary
    if as_json:
        output.print_json(m)
    else:
        output.say(output.metrics_table(m))
        output.say(output.safety_line(m))
        if agents := output.agents_line(m):
            output.say(agents)
        output.say(f"episodes: {m['episodes']['total']} ({m['episodes_run']} run now, {m['episodes_resumed']} done "
                   f"before), {m['episodes_per_s']:.2f} episodes/s; mean reward ({m['reward']}): "
                   f"{output.num(m['overall'].get('mean_reward'))}")
        line = output.not_scored_line(m)
        if line:
            output.say(line)
        output.say(f"results: {Path(out) / 'results.jsonl'}")
    return exit_code(result, opts.fail_under)
