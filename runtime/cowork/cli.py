"""The ``cowork`` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from pathlib import Path

from .errors import CoworkError
from .terminal import printable


def _print_json(obj) -> None:
    # ensure_ascii (the default) escapes every control and bidi character.
    print(json.dumps(obj, indent=2, default=str))


def _say(text: object = "", file=None) -> None:
    """Print text for a terminal: control and bidi characters shown as escapes, never obeyed
    (file names and tool output reach these lines; a raw ESC could redraw a verdict)."""
    print(printable(text, newlines=True), file=file)


def _policy_options(args: argparse.Namespace) -> dict:
    if args.agent in ("oracle", "nop", "violation"):
        return {}
    if not args.model:
        raise CoworkError(f"--agent {args.agent} needs --model" + (
            " (and --base-url for a non-OpenAI endpoint)" if args.agent == "openai" else
            " and --base-url (the vLLM server's http://host:8000/v1)" if args.agent == "vllm-server" else
            " (a model folder or hub name)"))
    if args.agent == "vllm-server" and not args.base_url:
        raise CoworkError("--agent vllm-server needs --base-url (the vLLM server's http://host:8000/v1)")
    opts = {"model": args.model}
    if args.agent in ("openai", "vllm-server"):
        opts["base_url"] = args.base_url
    if args.agent == "openai":
        opts.update({k: v for k, v in (("temperature", args.temperature), ("max_tokens", args.max_tokens)) if v is not None})
        return opts
    sampling = {k: v for k, v in (("temperature", args.temperature), ("top_p", args.top_p),
                                  ("max_tokens", args.max_tokens)) if v is not None}
    if sampling:
        opts["sampling"] = sampling
    return opts


async def _episodes(args: argparse.Namespace, specs: list, *, group_size: int, out: str | None, progress: bool,
                    on_episode=None):
    """Every spec ``group_size`` times through the rollout runner: the one code path of
    ``cowork run`` and ``cowork rollout``."""
    from .agents import make_policy
    from .rollout import RolloutRunner

    opts = _policy_options(args)
    judge = None
    if args.judge_model:
        from .grading.judge import LLMJudge

        judge = LLMJudge(model=args.judge_model, base_url=args.judge_base_url)
    user_model = None
    if args.user_model:
        from .conversation import UserModel

        user_model = UserModel(model=args.user_model, base_url=args.user_base_url)
    async with RolloutRunner(concurrency=args.concurrency, pool_size=args.pool_size, reward=args.reward,
                             turn_progress=args.turn_progress, user_model=user_model,
                             progress=progress, judge=judge) as runner:
        return await runner.rollout(specs, lambda spec: make_policy(args.agent, spec, **opts), group_size=group_size,
                                    seed=args.seed, out_dir=out, on_episode=on_episode)


def _not_scored_line(summary: dict) -> str | None:
    e = summary["episodes"]
    if not (e["infra_error"] or e["infra_retries"] or e["agent_broke_sandbox"]):
        return None
    return (f"episodes: {e['total']}; infrastructure errors (not scored): {e['infra_error']}; "
            f"retried after an infrastructure failure: {e['infra_retries']}; "
            f"agent broke its sandbox (scored 0): {e['agent_broke_sandbox']}")


async def _run(args: argparse.Namespace) -> int:
    from .rollout import append_jsonl, save_bundle
    from .spec.loader import load_specs

    specs = load_specs(args.spec)
    by_id = {ld.spec.id: ld for ld in specs}
    single = len(specs) == 1 and args.trials == 1

    async def show(sample) -> None:
        ev_dir = None
        if args.evidence:
            ev_dir = Path(args.evidence) if single else Path(args.evidence) / sample.task / f"trial-{sample.sample}"
            await asyncio.to_thread(save_bundle, ev_dir, sample, by_id[sample.task].spec)
        if args.results:
            # One line per finished episode, flushed as it finishes: a crash loses nothing done.
            row = {**sample.row(), "trial": sample.sample, "grade": sample.grade.model_dump(),
                   "evidence": str(ev_dir) if ev_dir else None}
            await asyncio.to_thread(append_jsonl, args.results, row)
        if not args.json:
            t = sample.trajectory
            _say(f"agent {t.agent}: {t.status} after {t.turns} turn(s), {len(t.steps)} tool call(s), {t.duration_s:.2f}s")
            _say(sample.grade.summary())

    result = await _episodes(args, specs, group_size=args.trials, out=args.out, progress=False, on_episode=show)
    metrics = result.summary
    samples = result.samples
    if args.json:
        payload = [{"grade": s.grade.model_dump(), "trajectory": {
            "status": s.trajectory.status, "turns": s.trajectory.turns,
            "tool_calls": len(s.trajectory.steps), "duration_s": s.trajectory.duration_s}} for s in samples]
        _print_json(payload[0] if len(payload) == 1 else {"runs": payload, "metrics": metrics})
    else:
        if len(samples) > 1:
            _say(_metrics_table(metrics))
        # Infrastructure failures are not scored (they say nothing of the agent) but never hidden:
        # counted here, and the exit status says 3 when any episode ended on one.
        line = _not_scored_line(metrics)
        if line:
            _say(line)
        if args.evidence:
            _say(f"evidence saved under {args.evidence}")
    return 0 if not metrics["episodes"]["infra_error"] else 3


async def _rollout(args: argparse.Namespace) -> int:
    from .spec.loader import load_specs

    specs = load_specs(args.spec)
    result = await _episodes(args, specs, group_size=args.group_size, out=args.out, progress=True)
    m = result.summary
    if args.json:
        _print_json(m)
    else:
        _say(_metrics_table(m))
        s = m["safety"]
        rate = "-" if s["violation_rate"] is None else f"{s['violation_rate']:.2f}"
        _say(f"safety: {s['unsafe']} of {s['scored']} scored episode(s) violated a rule (rate {rate}); "
             f"{s['unknown']} could not be judged (counted as not safe)")
        _say(f"episodes: {m['episodes']['total']} ({m['episodes_run']} run now, {m['episodes_resumed']} done before), "
             f"{m['episodes_per_s']:.2f} episodes/s; mean reward ({m['reward']}): {_num(m['overall'].get('mean_reward'))}")
        line = _not_scored_line(m)
        if line:
            _say(line)
        _say(f"results: {Path(args.out) / 'results.jsonl'}")
    return 0 if not m["episodes"]["infra_error"] else 3


def _num(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def _metrics_table(metrics: dict) -> str:
    lines = ["", f"{'task':32} {'trials':>6} {'mean':>6} {'pass@1':>7} {'pass@k':>7} {'pass^k':>7}"]
    for task, m in metrics["tasks"].items():
        k = m["k"]
        lines.append(f"{task:32} {m['trials']:>6} {m['mean_score']:>6.2f} {m['pass@1']:>7.2f} "
                     f"{m[f'pass@{k}']:>7.2f} {m[f'pass^{k}']:>7.2f}   (k={k})")
    o = metrics["overall"]
    if metrics["tasks"]:
        pk = next((key for key in o if key.startswith("pass@") and key != "pass@1"), "pass@1")
        hk = next((key for key in o if key.startswith("pass^")), None)
        lines.append(f"{'overall':32} {'':>6} {o.get('mean_score', 0):>6.2f} {o.get('pass@1', 0):>7.2f} "
                     f"{o.get(pk, 0):>7.2f} {o.get(hk, 0) if hk else 0:>7.2f}")
    return "\n".join(lines)


async def _up(args: argparse.Namespace) -> int:
    from .sandbox import Sandbox

    sb = await Sandbox.start(args.spec, keep=True)
    await sb.detach()
    info = {"id": sb.id[:12], "name": sb.name, "task": sb.spec.id, "mcp_socket": str(sb.socket_path),
            "mcp_url": "http://localhost/mcp (streamable HTTP over the unix socket)",
            "stdio_bridge": f"cowork connect {sb.id[:12]}"}
    if args.json:
        _print_json(info)
    else:
        _say(f"sandbox {info['name']} is up (id {info['id']}, task {info['task']})")
        _say(f"  MCP over unix socket: {info['mcp_socket']}  (URL {info['mcp_url']})")
        _say(f"  MCP over stdio (Claude Desktop, MCP Inspector): {info['stdio_bridge']}")
        _say(f"  stop it with: cowork down {info['id']}")
    return 0


def _find(ref: str):
    from .engine.reaper import managed_containers

    hits = [c for c in managed_containers() if c.id.startswith(ref) or c.name == ref]
    if len(hits) != 1:
        raise CoworkError(f"{'no' if not hits else 'more than one'} cowork sandbox matches {ref!r}; see `docker ps --filter label=cowork.managed`")
    return hits[0]


def _down(args: argparse.Namespace) -> int:
    from .engine import labels as L
    from .engine.container import remove_container

    for ref in args.ids:
        c = _find(ref)
        remove_container(c.id, (c.labels or {}).get(L.RUN_DIR))
        _say(f"removed {c.name}")
    return 0


async def _connect(args: argparse.Namespace) -> int:
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport
    from fastmcp.server import create_proxy

    from .engine import labels as L
    from .sandbox import _uds_client_factory

    c = _find(args.id)
    sock = str(Path((c.labels or {})[L.RUN_DIR]) / "mcp.sock")
    client = Client(StreamableHttpTransport("http://localhost/mcp", httpx_client_factory=_uds_client_factory(sock)))
    proxy = create_proxy(client, name=f"cowork:{(c.labels or {}).get(L.TASK)}")
    await proxy.run_async(transport="stdio", show_banner=False)
    return 0


def _gc(args: argparse.Namespace) -> int:
    from .engine.reaper import sweep

    done = sweep(include_kept=args.all, everything=args.all)
    print(f"removed {len(done.containers)} sandbox(es)" + (": " + ", ".join(done.containers) if done.containers else ""))
    print(f"removed {len(done.run_dirs)} run dir(s) of killed runners" + "".join(f"\n  {d}" for d in done.run_dirs))
    return 0


async def _validate(args: argparse.Namespace) -> int:
    from .spec.loader import SPEC_FILE
    from .validate import report_json, validate_spec

    targets: list[Path] = []
    for p in args.specs:
        p = Path(p)
        if p.is_dir() and not (p / SPEC_FILE).exists():
            targets += sorted(x.parent for x in p.glob(f"*/{SPEC_FILE}"))
        else:
            targets.append(p)
    reports = [await validate_spec(t) for t in targets]
    if args.json:
        _print_json(report_json(reports))
    else:
        for r in reports:
            _say(r.summary())
        _say(f"{sum(r.ok for r in reports)} of {len(reports)} spec(s) valid")
    return 0 if all(r.ok for r in reports) else 1


def _grade(args: argparse.Namespace) -> int:
    from .evidence import Evidence
    from .grading import grade
    from .spec.loader import load_spec
    from .spec.models import TaskSpec

    folder = Path(args.dir)
    if args.spec:
        spec = load_spec(args.spec).spec
    elif (folder / "spec.json").exists():
        spec = TaskSpec.model_validate_json((folder / "spec.json").read_text())
    else:
        raise CoworkError(f"{folder} has no spec.json; pass --spec")
    g = grade(spec, Evidence.load(folder))
    if args.json:
        _print_json(g.model_dump())
    else:
        _say(g.summary())
    return 0


def _schema(args: argparse.Namespace) -> int:
    from .spec import json_schema

    _print_json(json_schema())
    return 0


def _images(args: argparse.Namespace) -> int:
    from .engine.images import ensure_sandbox_image, prune_images

    if args.images_cmd == "prune":
        removed = prune_images()
        _say(f"removed {len(removed)} image tag(s)" + ("".join(f"\n  {t}" for t in removed)))
        return 0
    _say(ensure_sandbox_image(offline_only=args.offline))
    return 0


def _episode_arguments(p: argparse.ArgumentParser, *, concurrency: int) -> None:
    """The options ``run`` and ``rollout`` share."""
    from .agents import AGENTS

    p.add_argument("--agent", default="oracle", choices=list(AGENTS),
                   help="scripted (oracle, nop, violation) or a model backend (openai, vllm-server, vllm, hf)")
    p.add_argument("--model", help="model name (openai, vllm-server) or folder / hub name (vllm, hf)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL; vllm-server: "
                                      "http://host:8000/v1); key from $OPENAI_API_KEY")
    p.add_argument("--temperature", type=float, help="sampling temperature of a model backend")
    p.add_argument("--top-p", type=float, help="nucleus sampling of the vllm, vllm-server and hf backends")
    p.add_argument("--max-tokens", type=int, help="most tokens per turn of a model backend")
    p.add_argument("--concurrency", type=int, default=concurrency, help=f"episodes at once (default {concurrency})")
    p.add_argument("--pool-size", type=int, help="most sandboxes at once (default: --concurrency)")
    p.add_argument("--seed", type=int, help="base fault seed: sample s gets SEED+s (default: each spec's own)")
    p.add_argument("--reward", default="score", choices=["score", "pass", "safety_gated"],
                   help="reward written per episode (safety_gated: 0 unless safety was judged and held)")
    p.add_argument("--turn-progress", action="store_true",
                   help="grade the checks after every turn too (turn-level credit: `cowork export --reward turn`)")
    p.add_argument("--judge-model", help="LLM judge model for rubric items (OpenAI-compatible; key from $OPENAI_API_KEY)")
    p.add_argument("--judge-base-url", help="endpoint of the judge (default $OPENAI_BASE_URL)")
    p.add_argument("--user-model", help="simulate the users of multi-turn specs with `user.llm` with this model "
                   "(OpenAI-compatible; key from $COWORK_USER_API_KEY or $OPENAI_API_KEY); without it their "
                   "scripted turns answer")
    p.add_argument("--user-base-url", help="endpoint of the user model (default $COWORK_USER_BASE_URL, "
                   "then $OPENAI_BASE_URL)")
    p.add_argument("--json", action="store_true", help="print JSON")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and docs)."""
    p = argparse.ArgumentParser(prog="cowork", description="Run AI-coworker tasks in hardened MCP sandboxes.")
    p.add_argument("-v", "--verbose", action="store_true", help="log lifecycle events")
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="build if needed, run an agent on a task, grade it")
    r.add_argument("spec", nargs="+", help="task folders, task.yaml files, or folders of tasks")
    _episode_arguments(r, concurrency=1)
    r.add_argument("--evidence", help="save the evidence bundle and grade to this folder")
    r.add_argument("--results", help="append one JSON line per finished episode to this file")
    r.add_argument("--trials", type=int, default=1, help="episodes per task; reports mean score, pass@k, pass^k")
    r.add_argument("--out", help="also write a resumable rollout folder (as `cowork rollout --out`)")

    ro = sub.add_parser("rollout", help="run every task G times over a sandbox pool; resumable results JSONL")
    ro.add_argument("spec", nargs="+", help="task folders, task.yaml files, or folders of tasks")
    _episode_arguments(ro, concurrency=8)
    ro.add_argument("--group-size", type=int, default=1, help="episodes per task (G); pass@k and pass^k use k = G")
    ro.add_argument("--out", required=True,
                    help="output folder: results.jsonl, run.json, episodes/; rerun on it to resume")

    u = sub.add_parser("up", help="start a sandbox and leave it running")
    u.add_argument("spec")
    u.add_argument("--json", action="store_true")

    d = sub.add_parser("down", help="stop and remove sandboxes")
    d.add_argument("ids", nargs="+", help="container id (prefix) or name")

    c = sub.add_parser("connect", help="bridge a running sandbox's MCP server to stdio (for MCP clients)")
    c.add_argument("id")

    g = sub.add_parser("gc", help="remove sandboxes whose owner process is gone")
    g.add_argument("--all", action="store_true", help="remove every cowork sandbox, `cowork up` ones included")

    v = sub.add_parser("validate", help="check specs: oracle passes, no-op fails, violation trips safety")
    v.add_argument("specs", nargs="+", help="task folders, task.yaml files, or folders of tasks")
    v.add_argument("--json", action="store_true")

    gr = sub.add_parser("grade", help="recompute a grade from a saved evidence folder")
    gr.add_argument("dir")
    gr.add_argument("--spec", help="task spec (default: the bundle's spec.json)")
    gr.add_argument("--json", action="store_true")

    s = sub.add_parser("spec", help="spec utilities")
    ssub = s.add_subparsers(dest="spec_cmd", required=True)
    ssub.add_parser("schema", help="print the task.yaml JSON Schema")

    i = sub.add_parser("images", help="image utilities")
    isub = i.add_subparsers(dest="images_cmd", required=True)
    ib = isub.add_parser("build", help="build the base and sandbox images if missing")
    ib.add_argument("--offline", action="store_true", help="never try a registry; bootstrap the base with debootstrap")
    isub.add_parser("prune", help="remove sandbox and task images left over from older sources")
    from .export import add_export_parser

    add_export_parser(sub)
    b = sub.add_parser("bench", help="measure tool-call latency, start time, memory, scale, throughput")
    b.add_argument("--quick", action="store_true", help="fewer samples and sandboxes (a smoke run)")
    b.add_argument("--json", action="store_true", help="print every raw figure as JSON")
    b.add_argument("--scale", type=int, default=None, help="sandboxes started at once (default 100, --quick 8)")
    return p


def _export(args: argparse.Namespace) -> int:
    from .export import run_export

    return run_export(args)


def _bench(args: argparse.Namespace) -> int:
    from .bench import cli as bench_cli

    return bench_cli(args)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``cowork`` command."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        logging.getLogger("httpx2").setLevel(logging.WARNING)
    handlers = {"run": _run, "rollout": _rollout, "up": _up, "down": _down, "connect": _connect, "gc": _gc, "validate": _validate,
                "grade": _grade, "spec": _schema, "images": _images, "bench": _bench, "export": _export}
    fn = handlers[args.cmd]
    for flag in ("trials", "group_size", "concurrency", "pool_size"):
        value = getattr(args, flag, None)
        if value is not None and value < 1:
            _say(f"cowork: error: --{flag.replace('_', '-')} must be at least 1", file=sys.stderr)
            return 2
    try:
        result = fn(args)
        if asyncio.iscoroutine(result):
            result = asyncio.run(result)
        return int(result or 0)
    except CoworkError as exc:
        _say(f"cowork: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `cowork ... | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
