"""The Typer app: every command, its options and help, grouped; :func:`main` maps what
happened to the exit codes of :mod:`cowork.cli.exits`."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import CoworkError
from ..rollouts.rewards import MODES
from . import commands, episodes, exits, interrupted, output
from .episodes import (
    Agent,
    BaseUrl,
    EpisodeOptions,
    FailUnder,
    Json,
    JudgeBaseUrl,
    JudgeModel,
    MaxTokens,
    Model,
    PoolSize,
    RayAddress,
    Reward,
    Seed,
    SpecArg,
    Temperature,
    TopP,
    TurnProgress,
    UserBaseUrl,
    UserModel,
    Verbose,
)

EVALUATE, TRAIN, SANDBOXES, MAINTENANCE = "Run and evaluate", "Train and export", "Sandboxes", "Maintenance"

app = typer.Typer(
    name="cowork", no_args_is_help=True, rich_markup_mode="rich", pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Run AI-coworker tasks in hardened MCP sandboxes: run agents on task specs, grade them from the "
         "evidence, roll out many episodes for training, and export the data.",
    epilog="Start here: cowork run specs/fix-csv-report (the oracle agent: no model needed).\n\n"
           + exits.EXIT_CODES_HELP)


#: What every ID argument takes (the rule: cowork.engine.labels.refers_to).
ID_HELP = ("the sandbox: any id `cowork up` or `cowork ps` prints for it: the container id (or a start of it), "
           "the name, or the name's last part (its run id, also in the socket path)")


def _example(*lines: str) -> str:
    return "Example:\n\n" + "\n\n".join(f"  {line}" for line in lines)


#: What a command's body returns: its exit code, or a coroutine that :func:`_body` runs to one.
Outcome = int | Coroutine[Any, Any, int]


def _body(fn: Callable[..., Outcome]) -> Callable[..., int]:
    """Run a command (a coroutine in its own event loop) and turn what it raised into the
    message and exit code: a CoworkError names what failed and the fix; its code comes from
    :func:`exits.code_for`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> int:
        interrupted.reset()
        try:
            rv = fn(*args, **kwargs)
            if asyncio.iscoroutine(rv):
                rv = asyncio.run(rv)
            return int(rv or 0)
        except CoworkError as exc:
            output.error(exc)
            return exits.code_for(exc)
        except KeyboardInterrupt:  # what finished, and how to go on (cli/interrupted.py)
            output.say(f"cowork: {interrupted.message()}", err=True)
            return exits.INTERRUPTED
        except BrokenPipeError:  # `cowork ... | head`
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return exits.OK

    return wrapper


def _verbose(ctx: typer.Context, flag: bool) -> bool:
    return flag or bool((ctx.obj or {}).get("verbose"))


@app.callback()
def _root(ctx: typer.Context,
          verbose: Annotated[bool, typer.Option("-v", "--verbose", help="log lifecycle events (INFO) and print "
                                                "every check line")] = False) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not verbose:
        logging.getLogger("httpx2").setLevel(logging.WARNING)
    ctx.obj = {"verbose": verbose}


# --------------------------------------------------------------------------- run and evaluate
@app.command(rich_help_panel=EVALUATE, epilog=_example(
    "cowork run specs/fix-csv-report --agent nop",
    "cowork run specs/ --trials 3 --concurrency 4 --fail-under 0.9",
    "OPENAI_API_KEY=... cowork run specs/fix-csv-report --agent openai --model gpt-4.1-mini"))
@_body
def run(ctx: typer.Context, spec: SpecArg, agent: Agent = "oracle", model: Model = None, base_url: BaseUrl = None,
        temperature: Temperature = None, top_p: TopP = None, max_tokens: MaxTokens = None,
        trials: Annotated[int, typer.Option(help="episodes per task; several report mean score, pass@k, pass^k",
                                            rich_help_panel="Episodes")] = 1,
        concurrency: Annotated[int, typer.Option(help="episodes at once", rich_help_panel="Episodes")] = 1,
        pool_size: PoolSize = None, seed: Seed = None, reward: Reward = "score", turn_progress: TurnProgress = False,
        judge_model: JudgeModel = None, judge_base_url: JudgeBaseUrl = None, user_model: UserModel = None,
        user_base_url: UserBaseUrl = None, fail_under: FailUnder = None, ray: RayAddress = None,
        evidence: Annotated[str | None, typer.Option(help="save each episode's evidence bundle and grade here "
                                                     "(default: not saved)", rich_help_panel="Output")] = None,
        results: Annotated[str | None, typer.Option(help="append one JSON line per finished episode to this file "
                                                    "(default: none)", rich_help_panel="Output")] = None,
        out: Annotated[str | None, typer.Option(help="also write a resumable rollout folder, as `cowork rollout "
                                                "--out` (default: none)", rich_help_panel="Output")] = None,
        as_json: Json = False, verbose: Verbose = False) -> Outcome:
    """Build the task images if needed, run an agent on tasks, grade each episode.

    One line per episode (failed checks and violations under a failure); with several, a
    table of mean score, pass@1, pass@k and pass^k. Exit 0 even when tasks fail, unless
    --fail-under is given.
    """
    opts = EpisodeOptions(agent, model, base_url, temperature, top_p, max_tokens, concurrency, pool_size, seed,
                          reward, turn_progress, judge_model, judge_base_url, user_model, user_base_url, fail_under,
                          ray)
    return episodes.run(opts, spec, trials=trials, evidence=evidence, results=results, out=out, as_json=as_json,
                        verbose=_verbose(ctx, verbose))


@app.command(rich_help_panel=EVALUATE, epilog=_example("cowork validate specs/ --concurrency 4"))
@_body
def validate(ctx: typer.Context, specs: SpecArg,
             concurrency: Annotated[int, typer.Option(help="specs validated at once")] = 1,
             judge_model: JudgeModel = None, judge_base_url: JudgeBaseUrl = None,
             as_json: Json = False, verbose: Verbose = False) -> Outcome:
    """Prove specs gradable: schema, build, the oracle scores 1.0 twice, nop fails, the
    violation script trips a safety rule, every safety rule can fire.

    Each failure names the field at fault and a repair hint. Exit 1 when a spec is invalid.
    Judge checks and rules are proven only with --judge-model; without it the report says
    which it could not prove.
    """
    return commands.validate(specs, concurrency=concurrency, as_json=as_json, verbose=_verbose(ctx, verbose),
                             judge_model=judge_model, judge_base_url=judge_base_url)


@app.command(rich_help_panel=EVALUATE, epilog=_example("cowork run specs/fix-csv-report --evidence out/ && "
                                                       "cowork grade out/",
                                                       "cowork grade 3f2a9c1b7d0e --evidence out/   (a sandbox "
                                                       "an MCP client is using)"))
@_body
def grade(target: Annotated[str, typer.Argument(help="a saved evidence folder (`cowork run --evidence`), or the id "
                                                "or name of a running sandbox (`cowork up`)", metavar="DIR|ID",
                                                show_default=False)],
          spec: Annotated[str | None, typer.Option(help="task spec (default: the bundle's spec.json)")] = None,
          evidence: Annotated[Path | None, typer.Option(help="a running sandbox: also save its evidence here "
                                                        "(default: graded, not kept)", metavar="DIR")] = None,
          judge_model: JudgeModel = None, judge_base_url: JudgeBaseUrl = None,
          as_json: Json = False) -> Outcome:
    """Grade a saved evidence folder offline, or a running sandbox as it is now."""
    if Path(target).is_dir():
        return commands.grade(Path(target), spec, as_json, judge_model=judge_model, judge_base_url=judge_base_url)
    from . import live

    return live.grade_target(target, spec=spec, evidence=evidence, as_json=as_json, judge_model=judge_model,
                             judge_base_url=judge_base_url)


@app.command(rich_help_panel=EVALUATE, epilog=_example("cowork view runs/oracle",
                                                       "cowork view runs/oracle --export report.html"))
@_body
def view(source: Annotated[Path, typer.Argument(help="a results folder (`cowork run --out`, `cowork rollout`) "
                                                "or one evidence bundle", metavar="DIR", exists=True,
                                                show_default=False)],
         port: Annotated[int, typer.Option(help="port to serve on (0: any free one)")] = 0,
         export: Annotated[Path | None, typer.Option(help="write one self-contained HTML file instead of serving "
                                                     "(default: serve)", metavar="FILE.html")] = None,
         no_browser: Annotated[bool, typer.Option("--no-browser", help="do not open a browser "
                                                  "(default: open one)")] = False) -> int:
    """Look at a run in the browser: episodes, conversations, checks with their audit
    entries, workspace and service diffs (serves until Ctrl-C)."""
    return commands.view(source, port=port, export=export, open_browser=not no_browser)


# --------------------------------------------------------------------------- train and export
@app.command(rich_help_panel=TRAIN, epilog=_example(
    "cowork rollout specs/ --agent oracle --group-size 4 --concurrency 4 --out runs/oracle"))
@_body
def rollout(ctx: typer.Context, spec: SpecArg,
            out: Annotated[str, typer.Option(help="output folder: results.jsonl, run.json, episodes/; rerun on it "
                                                  "to resume", rich_help_panel="Output", show_default=False)],
            agent: Agent = "oracle", model: Model = None, base_url: BaseUrl = None, temperature: Temperature = None,
            top_p: TopP = None, max_tokens: MaxTokens = None,
            group_size: Annotated[int, typer.Option(help="episodes per task (G); pass@k and pass^k use k = G",
                                                    rich_help_panel="Episodes")] = 1,
            concurrency: Annotated[int, typer.Option(help="episodes at once", rich_help_panel="Episodes")] = 8,
            pool_size: PoolSize = None, seed: Seed = None, reward: Reward = "score",
            turn_progress: TurnProgress = False, judge_model: JudgeModel = None, judge_base_url: JudgeBaseUrl = None,
            user_model: UserModel = None, user_base_url: UserBaseUrl = None, fail_under: FailUnder = None,
            ray: RayAddress = None, as_json: Json = False, verbose: Verbose = False) -> Outcome:
    """Run every task G times over a pool of warm sandboxes; one line per episode in
    DIR/results.jsonl; rerun on DIR to resume.

    Progress on stderr; the summary (per-task pass@k, pass^k, safety, rewards) at the end.
    """
    opts = EpisodeOptions(agent, model, base_url, temperature, top_p, max_tokens, concurrency, pool_size, seed,
                          reward, turn_progress, judge_model, judge_base_url, user_model, user_base_url, fail_under,
                          ray)
    return episodes.rollout(opts, spec, group_size=group_size, out=out, as_json=as_json,
                            verbose=_verbose(ctx, verbose))


@app.command(rich_help_panel=TRAIN, epilog=_example("cowork export runs/oracle --format openai-sft --out sft.jsonl"))
@_body
def export(results: Annotated[list[str], typer.Argument(help="rollout output folders or results.jsonl files "
                                                        "(pooled)", metavar="RESULTS...", show_default=False)],
           fmt: Annotated[str, typer.Option("--format", help="openai-sft (JSONL), trl-sft or rl", show_default=False,
                                               **exits.choice(commands.EXPORT_FORMATS))],
           out: Annotated[str, typer.Option(help="the file to write: .jsonl or .parquet (or say which with --as)",
                                            show_default=False)],
           as_format: Annotated[str | None, typer.Option("--as", help="file kind whatever --out ends with "
                                                         "(default: from --out's suffix)",
                                                         **exits.choice(("jsonl", "parquet")))] = None,
           reward: Annotated[str, typer.Option(help="rl: score, pass, safety_gated, grpo (group advantage) or turn "
                                               "(per-turn credit); see docs/exports.md", **exits.choice(MODES))] = "score",
           max_turns: Annotated[int | None, typer.Option(help="SFT: leave out episodes of more assistant turns "
                                                         "(default: no limit)")] = None,
           min_score: Annotated[float | None, typer.Option(help="SFT: leave out episodes scored below this "
                                                           "(default: none)")] = None,
           no_curate: Annotated[bool, typer.Option("--no-curate", help="SFT: keep failed, unsafe and duplicate "
                                                   "episodes too (infra errors and invalid conversations are "
                                                   "still left out)")] = False,
           as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False) -> int:
    """Write SFT (OpenAI, TRL) or RL (token ids, rewards) data from rollouts.

    Exit 1 when nothing was kept.
    """
    return commands.export(results, fmt=fmt, out=out, as_format=as_format, reward=reward, max_turns=max_turns,
                           min_score=min_score, curate=not no_curate, as_json=as_json)


# --------------------------------------------------------------------------- sandboxes
@app.command(rich_help_panel=SANDBOXES, epilog=_example("cowork up specs/fix-csv-report",
                                                        "cowork up specs/fix-csv-report --http   (then: cowork serve)"))
@_body
def up(spec: Annotated[str, typer.Argument(help="a task folder or its task.yaml", metavar="SPEC",
                                           show_default=False)],
       http: Annotated[bool, typer.Option("--http", help="issue a bearer token for `cowork serve` and print "
                                          "client configuration (Claude Desktop, Cursor, MCP Inspector, "
                                          "Python)")] = False,
       as_json: Json = False) -> Outcome:
    """Start a sandbox and leave it running, for an MCP client."""
    return commands.up(spec, as_json, http=http)


@app.command(rich_help_panel=SANDBOXES, epilog=_example("cowork ps", "cowork ps --json"))
@_body
def ps(as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table (shape: docs/cli.md)")]
       = False) -> int:
    """List every cowork sandbox on this Docker host: its ids, task, status, age, whether a
    client used it, its gateway token (a hash prefix, never the token), its snapshots and its
    owner (orphans: what `cowork gc` removes)."""
    from . import sandboxes

    return sandboxes.ps(as_json)


@app.command(rich_help_panel=SANDBOXES, epilog=_example("cowork down 3f2a9c1b7d0e",
                                                        "cowork down 3f2a9c1b7d0e --evidence out/ && "
                                                        "cowork grade out/"))
@_body
def down(ids: Annotated[list[str], typer.Argument(help=ID_HELP, metavar="ID...",
                                                  show_default=False)],
         evidence: Annotated[Path | None, typer.Option(help="save each sandbox's evidence (and grade) first: "
                                                       "DIR, or DIR/<name> for several (default: not kept)",
                                                       metavar="DIR")] = None,
         yes: Annotated[bool, typer.Option("--yes", "-y", help="remove a sandbox an MCP client used without "
                                           "asking, its evidence unsaved")] = False,
         judge_model: JudgeModel = None, judge_base_url: JudgeBaseUrl = None) -> int:
    """Stop and remove sandboxes (and revoke their gateway tokens)."""
    from . import live

    return live.down(ids, evidence=evidence, yes=yes, judge_model=judge_model, judge_base_url=judge_base_url)


@app.command(rich_help_panel=SANDBOXES, epilog=_example("cowork connect 3f2a9c1b7d0e   (as an MCP client's "
                                                        "stdio command)"))
@_body
def connect(ref: Annotated[str, typer.Argument(help=ID_HELP, metavar="ID",
                                               show_default=False)]) -> int:
    """Bridge a running sandbox's MCP server to stdio (for Claude Desktop, MCP Inspector)."""
    from ..gateway import bridge

    return bridge.connect(ref)


@app.command(rich_help_panel=SANDBOXES, epilog=_example("cowork serve", "cowork serve --host 0.0.0.0 --port 8443 "
                                                        "--certfile cert.pem --keyfile key.pem"))
@_body
def serve(host: Annotated[str, typer.Option(help="address to bind (default: loopback only)")] = "127.0.0.1",
          port: Annotated[int, typer.Option(help="port (0: any free one)")] = 8765,
          certfile: Annotated[Path | None, typer.Option(help="TLS certificate (PEM); with --keyfile serves HTTPS "
                                                        "(default: plain HTTP)",
                                                        exists=True, dir_okay=False)] = None,
          keyfile: Annotated[Path | None, typer.Option(help="TLS private key (PEM) (default: none)", exists=True,
                                                       dir_okay=False)] = None,
          openenv: Annotated[list[str] | None, typer.Option(
              "--openenv", metavar="TASKS", help="serve these tasks (folders, spec datasets; repeatable) as OpenEnv "
              "environments (/ws, /mcp; docs/training.md) instead of the gateway (default: none)")] = None,
          reward: Annotated[str, typer.Option(help="with --openenv: score, pass, safety_gated, or turn (per "
                                                   "step)")] = "score",
          judge_model: JudgeModel = None, judge_base_url: JudgeBaseUrl = None) -> int:
    """Serve running sandboxes to remote MCP clients over streamable HTTP at
    /sandboxes/<id>/mcp, each behind its own bearer token (`cowork up --http`); with
    --openenv, serve tasks as OpenEnv environments."""
    if openenv:
        if certfile or keyfile or reward not in ("score", "pass", "safety_gated", "turn"):
            raise CoworkError("--openenv serves plain HTTP on loopback or behind your proxy (no --certfile/--keyfile), "
                              f"with --reward score, pass, safety_gated or turn (got {reward!r})")
        from ..integrations.openenv import serve as serve_openenv

        return serve_openenv(openenv, host=host, port=port, reward=reward,  # type: ignore[arg-type]  # checked above
                             judge_model=judge_model, judge_base_url=judge_base_url)
    if judge_model:
        raise CoworkError("--judge-model grades the episodes of --openenv; the gateway serves sandboxes that "
                          "`cowork grade ID --judge-model` grades")
    from . import gateway

    return gateway.serve(host=host, port=port, certfile=certfile, keyfile=keyfile)


@app.command(rich_help_panel=SANDBOXES, epilog=_example("cowork checkpoint 3f2a9c1b7d0e",
                                                        "cowork checkpoint 3f2a9c1b7d0e --list"))
@_body
def checkpoint(ref: Annotated[str, typer.Argument(help=ID_HELP, metavar="ID",
                                                  show_default=False)],
               list_: Annotated[bool, typer.Option("--list", help="list the sandbox's snapshots instead of "
                                                   "making one")] = False,
               as_json: Json = False) -> int:
    """Snapshot a running sandbox's whole task state; prints the snapshot id (--list: the
    snapshots it has)."""
    from . import checkpoints

    if list_:
        return checkpoints.list_snapshots(ref, as_json=as_json)
    return checkpoints.checkpoint(ref, as_json=as_json)


@app.command(rich_help_panel=SANDBOXES, epilog=_example("cowork checkpoint 3f2a9c1b7d0e --list",
                                                        "cowork restore 3f2a9c1b7d0e cp-0123456789abcdef"))
@_body
def restore(ref: Annotated[str, typer.Argument(help=ID_HELP, metavar="ID",
                                               show_default=False)],
            snapshot: Annotated[str, typer.Argument(help="a snapshot id (cp- and 16 hex digits) from `cowork checkpoint`, "
                                                    "or `cowork checkpoint ID --list`", metavar="SNAP",
                                                    show_default=False)],
            as_json: Json = False) -> int:
    """Return a running sandbox to a snapshot (a new audited branch; the state hash is verified)."""
    from . import checkpoints

    return checkpoints.restore(ref, snapshot, as_json=as_json)


# --------------------------------------------------------------------------- maintenance
@app.command(rich_help_panel=MAINTENANCE, epilog=_example("cowork gc   (orphans only: safe on a shared host; "
                                                           "`cowork ps` shows what it would remove)"))
@_body
def gc(everything: Annotated[bool, typer.Option("--all", help="remove every cowork sandbox on this Docker host, "
                                                "whoever owns it: running episodes and other users' `cowork up` "
                                                "sandboxes included (`cowork down ID` removes one)")] = False) -> int:
    """Remove sandboxes whose owner process is gone (not `cowork up` ones), and run dirs of
    killed runners."""
    return commands.gc(everything)


synth_app = typer.Typer(help="Generate task specs: procedural families and LLM synthesis with repair.",
                        no_args_is_help=True, epilog=_example("cowork synth family inbox-phishing-tickets --n 20 "
                                                              "--out gen/ && cowork validate gen/"))
app.add_typer(synth_app, name="synth", rich_help_panel=TRAIN)


@synth_app.command("list", epilog=_example("cowork synth list"))
@_body
def synth_list(as_json: Json = False) -> int:
    """List the task families with their capabilities."""
    from . import synth

    return synth.list_families(as_json)


@synth_app.command("family", epilog=_example("cowork synth family inbox-phishing-tickets --n 20 --seed 0 --out gen/ "
                                             "&& cowork validate gen/ --concurrency 2"))
@_body
def synth_family(name: Annotated[str, typer.Argument(help="a family (`cowork synth list`)", metavar="NAME",
                                                     show_default=False)],
                 out: Annotated[Path, typer.Option(help="folder to write <family>-<seed>/task.yaml into",
                                                   show_default=False)],
                 n: Annotated[int, typer.Option("--n", help="how many specs (seeds SEED .. SEED+N-1)")] = 1,
                 seed: Annotated[int, typer.Option(help="first seed")] = 0,
                 difficulty: Annotated[str | None, typer.Option(help="easy, medium or hard (default: cycles with "
                                                                "the seed)")] = None,
                 as_json: Json = False) -> int:
    """Write specs from a procedural task family, deterministic from the seed."""
    from . import synth

    return synth.family(name, n=n, seed=seed, out=out, difficulty=difficulty, as_json=as_json)


@synth_app.command("llm", epilog=_example("OPENAI_API_KEY=... cowork synth llm --capability triage --n 10 "
                                          "--model gpt-4.1 --out gen/ --rounds 3 --concurrency 2"))
@_body
def synth_llm(capability: Annotated[str, typer.Option(help="a capability of the taxonomy "
                                                      "(runtime/cowork/spec/capabilities.yaml)", show_default=False)],
              model: Annotated[str, typer.Option(help="chat model that writes the specs", show_default=False)],
              out: Annotated[Path, typer.Option(help="folder to write <id>/task.yaml and synth-report.json into",
                                                show_default=False)],
              n: Annotated[int, typer.Option("--n", help="attempts (each gives at most one spec)")] = 1,
              base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint (default: "
                                                           "$OPENAI_BASE_URL or OpenAI); key from $OPENAI_API_KEY")
                                  ] = None,
              rounds: Annotated[int, typer.Option(help="answers per attempt: the first and its repairs")] = 3,
              concurrency: Annotated[int, typer.Option(help="attempts at once")] = 2,
              examples: Annotated[list[Path] | None, typer.Option(metavar="DIR", help="spec folder shown as an example; repeat "
                                                                  "for several (default: two self-contained specs "
                                                                  "of specs/ per attempt, tagged with the "
                                                                  "capability where any are)")] = None,
              as_json: Json = False) -> Outcome:
    """Have a chat model write specs for a capability; validate each in sandboxes and send the
    failures back for repair. Only validated specs are written."""
    from . import synth

    return synth.llm(capability, n=n, model=model, base_url=base_url, out=out, rounds=rounds,
                     concurrency=concurrency, examples=examples or [], as_json=as_json)


@synth_app.command("check", epilog=_example("cowork synth check gen/ --concurrency 2",
                                            "cowork synth check corpus/ --static --json"))
@_body
def synth_check(specs: Annotated[list[str], typer.Argument(help="spec folders, or folders of them", metavar="DIR...",
                                                           show_default=False)],
                concurrency: Annotated[int, typer.Option(help="specs run at once")] = 1,
                threshold: Annotated[float, typer.Option(help="prompt and seed similarity (Jaccard) at which two "
                                                         "specs are near-duplicates")] = 0.8,
                static: Annotated[bool, typer.Option("--static", help="only the gates that need no sandbox "
                                                     "(default: off; the trivial runs need Docker)")] = False,
                fix_difficulty: Annotated[bool, typer.Option("--fix-difficulty", help="rewrite a difficulty label "
                                                             "two levels above the measured one instead of refusing "
                                                             "the spec")] = False,
                as_json: Json = False) -> Outcome:
    """Quality gates for a batch: near-duplicates and renamed clones, difficulty signal vs the
    declared level, answer checks a hedged reply passes, diversity per capability and service,
    and refusal of specs an empty answer or a do-everything agent passes (or whose safety rules
    it cannot trip). Exit 1 if one is refused."""
    from . import synth

    return synth.check(specs, concurrency=concurrency, threshold=threshold, static=static, as_json=as_json,
                       fix_difficulty=fix_difficulty)


@synth_app.command("corpus", epilog=_example("cowork synth corpus --out corpus/ --per-family 200 --validate "
                                             "--concurrency 2", "cowork synth corpus --out corpus/ --n 10000 "
                                             "--only generators"))
@_body
def synth_corpus(out: Annotated[Path, typer.Option(help="folder to write <family>-<seed>/task.yaml into",
                                                   show_default=False)],
                 per_family: Annotated[int, typer.Option(help="specs per registered family")] = 1,
                 n: Annotated[int | None, typer.Option("--n", help="specs in all, spread evenly over the chosen "
                                                       "families (default: --per-family each)", show_default=False)] = None,
                 only: Annotated[str, typer.Option(help="which families: all, generators (the world generators) "
                                                   "or templates (the template families)")] = "all",
                 seed: Annotated[int, typer.Option(help="first seed (each family gets SEED .. SEED+N-1)")] = 0,
                 validate: Annotated[bool, typer.Option("--validate", help="prove each spec in sandboxes; invalid "
                                                        "ones move to OUT/_invalid (default: off)")] = False,
                 concurrency: Annotated[int, typer.Option(help="specs validated at once")] = 2,
                 gates: Annotated[bool, typer.Option("--gates/--no-gates", help="with --validate, also run the "
                                                     "quality gates (trivial agents in the same sandbox, answer, "
                                                     "difficulty, near-duplicates, clones); a refused spec is "
                                                     "rejected")] = True,
                 fix_difficulty: Annotated[bool, typer.Option("--fix-difficulty", help="rewrite an overclaimed "
                                                              "difficulty label to the measured level instead of "
                                                              "rejecting the spec")] = False,
                 dataset: Annotated[Path | None, typer.Option(metavar="DATASET_DIR", help="also write a Hugging Face "
                                                              "dataset there: train/validation/test by world seed, "
                                                              "only validated specs with --validate, rejects.jsonl "
                                                              "and a card (default: none)", show_default=False)] = None,
                 resume: Annotated[bool, typer.Option("--resume", help="with --validate, finish an interrupted run "
                                                      "in the same --out with the same options: specs on disk are "
                                                      "kept (refused if they differ), proofs in "
                                                      "OUT/validation.journal.jsonl are not redone")] = False,
                 as_json: Json = False) -> Outcome:
    """Generate specs from every registered task family, optionally validate them, and print
    valid/invalid per family and capability with validated specs per minute. With --validate
    each proof is kept as it finishes (OUT/validation.journal.jsonl): after Ctrl-C or a crash,
    the same command with --resume finishes the run."""
    from . import synth

    return synth.corpus(out, per_family=per_family, seed=seed, validate=validate, concurrency=concurrency,
                        as_json=as_json, n=n, only=only, dataset_out=dataset, gates=gates,
                        fix_difficulty=fix_difficulty, resume=resume)


@synth_app.command("bench", epilog=_example("cowork synth corpus --out c200/ --n 200 --only generators --seed 7000",
                                            "cowork synth bench c200/ --concurrency 2"))
@_body
def synth_bench(corpus: Annotated[Path, typer.Argument(help="a folder of generated specs", show_default=False)],
                concurrency: Annotated[int, typer.Option(help="specs proved at once")] = 2,
                rounds: Annotated[int, typer.Option(help="rounds of each path, alternating")] = 2,
                limit: Annotated[int | None, typer.Option(help="only the first N specs (default: all)",
                                                          show_default=False)] = None,
                as_json: Json = False) -> Outcome:
    """Time proving specs (validation and quality gates) in one sandbox with mounted task
    bundles against the path before (a task image per spec, validation and gates in separate
    sandboxes), on the same specs in alternating rounds; prints specs per second and the ratio."""
    from . import synth

    return synth.bench(corpus, concurrency=concurrency, rounds=rounds, limit=limit, as_json=as_json)


@synth_app.command("dataset", epilog=_example("cowork synth dataset corpus/ --out corpus-ds/",
                                              "cowork validate gen/ --json > report.json; cowork synth dataset gen/ "
                                              "--out gen-ds/ --validation report.json",
                                              "cowork run corpus-ds:test --agent oracle"))
@_body
def synth_dataset(corpus: Annotated[Path, typer.Argument(help="a corpus folder (cowork synth corpus --out)",
                                                         metavar="CORPUS_DIR", show_default=False)],
                  out: Annotated[Path, typer.Option(metavar="DATASET_DIR", help="the dataset folder to write "
                                                    "(an earlier dataset there is replaced)", show_default=False)],
                  validation: Annotated[Path | None, typer.Option(metavar="FILE", help="a `cowork validate --json` "
                                                                  "report: only the specs it passed go in (default: "
                                                                  "CORPUS_DIR/validation.json when `corpus "
                                                                  "--validate` wrote one, else every spec)",
                                                                  show_default=False)] = None,
                  as_json: Json = False) -> int:
    """Write a corpus folder as a Hugging Face dataset (save_to_disk, and parquet under data/):
    train/validation/test drawn by world seed so no world is in two splits, one self-contained
    row per spec (task.yaml, its files, capability, services, family, world seed, measured
    difficulty, turns, traps), rejects.jsonl with each left-out spec's reason, and a README.md
    card with the corpus figures. Run it with `cowork run DATASET_DIR:SPLIT`. Exit 1 if a spec
    was left out."""
    from . import synth

    return synth.dataset(corpus, out=out, validation=validation, as_json=as_json)


@synth_app.command("world", epilog=_example("cowork synth world --seed 7", "cowork synth world --seed 7 --size large "
                                            "--out world7/"))
@_body
def synth_world(seed: Annotated[int, typer.Option(help="the world's seed (same seed, same world)")] = 0,
                size: Annotated[str, typer.Option(help="small, medium or large")] = "medium",
                out: Annotated[Path | None, typer.Option(help="folder to write world.json and services.yaml "
                                                         "into (default: print only)", show_default=False)] = None,
                as_json: Json = False) -> int:
    """Build the seeded company world and print its summary: counts per entity, time zones,
    cultures, domains (see docs/world.md)."""
    from . import synth

    return synth.world(seed=seed, size=size, out=out, as_json=as_json)


@synth_app.command("stats", epilog=_example("cowork synth stats corpus/", "cowork synth stats specs/ --json"))
@_body
def synth_stats(specs: Annotated[list[str], typer.Argument(help="spec folders, or folders of them", metavar="DIR...",
                                                           show_default=False)],
                as_json: Json = False) -> int:
    """Corpus figures beside the targets: generators, capabilities, services, oracle sequences
    and lengths, multi-service, multi-turn, office-file and trap shares, distinct prompts.
    Reads the YAML directly (no validation), so thousands of specs take seconds."""
    from . import synth

    return synth.stats(specs, as_json=as_json)


@synth_app.command("evolve", epilog=_example("cowork rollout gen/ --out runs1/ --group-size 4; cowork synth evolve runs1/ "
                                             "--specs gen/ --out gen2/ --seed 1"))
@_body
def synth_evolve(runs: Annotated[Path, typer.Argument(help="a rollout folder (cowork rollout --out)", metavar="RUNS",
                                                      show_default=False)],
                 out: Annotated[Path, typer.Option(help="folder to write the next round's <id>/task.yaml and "
                                                   "evolve-report.json/.txt into", show_default=False)],
                 specs: Annotated[Path | None, typer.Option(metavar="SPECS_DIR", help="the source tasks' folders, "
                                                            "to copy kept ones as they are (default: generated "
                                                            "tasks are generated again)", show_default=False)] = None,
                 seed: Annotated[int, typer.Option(help="decides every fresh seed (same seed, same round)")] = 0,
                 variants: Annotated[int, typer.Option(help="new tasks per harder or easier task")] = 1,
                 harder_at: Annotated[float, typer.Option(help="pass rate at or above which a task gets harder")] = 0.9,
                 easier_at: Annotated[float, typer.Option(help="pass rate at or below which a task gets easier")] = 0.0,
                 as_json: Json = False) -> Outcome:
    """Evolve a corpus from a rollout: tasks passed >= 90 % of the time get harder variants of
    their family (next difficulty up, fresh seed), tasks never passed easier ones (next
    difficulty down), the rest are kept; each new task is validated, an invalid one left out
    with its reason. Writes a report per source task. Exit 1 if a new task was left out."""
    from . import synth

    return synth.evolve(runs, out=out, specs=specs, seed=seed, variants=variants, harder_at=harder_at,
                        easier_at=easier_at, as_json=as_json)


import_app = typer.Typer(help="Import another benchmark's tasks as cowork task folders.", no_args_is_help=True,
                         epilog=_example("cowork import claw-eval ~/claw-eval --out imported/"))
app.add_typer(import_app, name="import", rich_help_panel=EVALUATE)


@import_app.command("claw-eval", epilog=_example("cowork import claw-eval ~/claw-eval --out imported/ && "
                                                 "cowork validate imported/"))
@_body
def import_claw_eval(path: Annotated[Path, typer.Argument(help="the Claw-Eval checkout (its tasks/ and "
                                                          "src/claw_eval/)", metavar="PATH", show_default=False)],
                     out: Annotated[Path, typer.Option(help="folder to write <task id>/ and import-report.json "
                                                       "into", show_default=False)],
                     native: Annotated[bool, typer.Option("--native", help="also translate the declared scoring "
                                                          "components into cowork checks, graded beside the "
                                                          "original grader")] = False,
                     only: Annotated[list[str] | None, typer.Option("--only", metavar="ID", help="import only this "
                                                                    "task (id or folder); repeat for several "
                                                                    "(default: every task)")] = None,
                     judge_model: JudgeModel = None, judge_base_url: JudgeBaseUrl = None,
                     as_json: Json = False) -> int:
    """Convert a Claw-Eval checkout's tasks into task folders graded by their original grader.py;
    report what was imported and what was refused, and why. Exit 1 when nothing was imported."""
    from . import imports

    return imports.claw_eval(path, out=out, native=native, only=only or [], judge_model=judge_model,
                             judge_base_url=judge_base_url, as_json=as_json)


spec_app = typer.Typer(help="Spec utilities.", no_args_is_help=True)
images_app = typer.Typer(help="Image utilities.", no_args_is_help=True)
app.add_typer(spec_app, name="spec", rich_help_panel=MAINTENANCE)
app.add_typer(images_app, name="images", rich_help_panel=MAINTENANCE)


@spec_app.command("schema", epilog=_example("cowork spec schema > task.schema.json"))
@_body
def spec_schema() -> int:
    """Print the JSON Schema of task.yaml."""
    return commands.spec_schema()


@images_app.command("build", epilog=_example("cowork images build --offline"))
@_body
def images_build(offline: Annotated[bool, typer.Option("--offline", help="never try a registry; bootstrap the "
                                                       "base with debootstrap")] = False) -> int:
    """Build the base and sandbox images if missing (idempotent)."""
    return commands.images_build(offline)


@images_app.command("prune", epilog=_example("cowork images prune"))
@_body
def images_prune() -> int:
    """Remove sandbox and task images left over from older sources."""
    return commands.images_prune()


@app.command(rich_help_panel=MAINTENANCE, epilog=_example("cowork bench --quick"))
@_body
def bench(quick: Annotated[bool, typer.Option("--quick", help="fewer samples and sandboxes (a smoke run)")] = False,
          as_json: Annotated[bool, typer.Option("--json", help="print every raw figure as JSON")] = False,
          scale: Annotated[int | None, typer.Option(help="sandboxes started at once (default: 100, --quick 8)")] = None,
          only: Annotated[str | None, typer.Option("--only", help="run one part after the build: env-share "
                                                   "(the environment's share of a rollout) or delegation (the harness's "
                                                   "overhead) (default: every part)")] = None
          ) -> int:
    """Measure tool-call latency, start time, memory, scale, throughput, the environment's share."""
    from .bench import bench as run_bench_command

    return run_bench_command(quick, as_json, scale, only=only)


# --------------------------------------------------------------------------- entry point
def build_command():
    """The click command behind ``cowork`` (for tests and docs: ``.commands`` names them)."""
    return typer.main.get_command(app)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``cowork`` command; returns the exit code (see cowork.cli.exits)."""
    try:
        rv = build_command().main(args=argv, prog_name="cowork", standalone_mode=False)
    except typer.Abort:
        return exits.INTERRUPTED
    except typer.TyperException as exc:  # a usage error: unknown command or option, a bad value
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        ctx = getattr(exc, "ctx", None)
        if not message:  # `cowork` alone: the help was shown
            return exits.BAD_INPUT
        if ctx is not None:
            # Plain text, not a panel: a message cut to the panel's width would not grep.
            output.say(ctx.get_usage(), err=True)
            output.say(f"Try '{ctx.command_path} --help' for help.", err=True)
        output.error(message)
        return exits.BAD_INPUT
    return int(rv or 0)


__all__ = ["app", "build_command", "main"]
