"""Check the vLLM backends on a GPU machine; prints one PASS/FAIL/SKIP line per check.

    python scripts/gpu_vllm_check.py --model Qwen/Qwen2.5-0.5B-Instruct
    python scripts/gpu_vllm_check.py --model tiny      # a tiny random model made here: no download
    python scripts/gpu_vllm_check.py --only partial,server --dry-run   # what would run, no GPU needed

Groups of checks (``--only``, default all):

engine
    vLLM starts with cowork's worker extension; a two-turn episode (a real sandbox when a
    Docker daemon answers, and always one with a stand-in tool) keeps an append-only token
    buffer whose mask covers exactly what vLLM generated; vLLM's log-probabilities agree with
    a transformers forward pass over the same ids; perturbed weights loaded into the running
    engine change its outputs and agree with transformers on the perturbed model (the same
    prompt, so a stale prefix cache would show); the original weights loaded back restore the
    outputs; concurrent episodes on one engine all keep valid trajectories.
partial
    Partial rollouts on the in-process engine: a turn in flight when a load starts finishes
    on the old weights; an episode whose weights change between its turns goes on, its turns
    recording versions v and v+1, and its second turn's log-probabilities are the new
    weights' (turn 1's prefix cache was dropped).
async
    A streaming rollout (``RolloutRunner.stream``) with ``max_staleness=0`` over three tasks:
    the first group is handed over while later groups run; the weights change under the
    running groups; every sample handed over afterwards started at the current version (the
    stale ones were run again), and so did each of its turns. Real sandboxes when a Docker
    daemon answers, else stand-in two-turn episodes on the same engine.
server
    Weight sync for the vllm-server backend: ``vllm serve`` with ``VLLM_SERVER_DEV_MODE=1``
    and cowork's worker extension; the server offers ``/pause``, ``/weight_info`` and
    ``/collective_rpc`` with the extension; ``VLLMServerClient.update_weights`` (files in
    ``/dev/shm``, its room checked first) returns version 1 and ``/weight_info`` says so; the
    outputs change and agree with transformers on the new weights; an episode paused between
    its turns goes on with the new weights and records both versions.

Exit status 0 when every check passed, 1 when one failed, 2 when the prerequisites (vllm,
a CUDA GPU) are missing. The last line reads ``N passed, N failed``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
try:
    import cowork  # noqa: F401
except ImportError:  # a bare checkout (the GPU machine): use the sources
    sys.path.insert(0, str(ROOT / "runtime"))

RESULTS: list[bool] = []
DEVICE = "cuda"  # of the transformers reference
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file in the workspace",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                          "required": ["path"]}}}]
MESSAGES = [{"role": "system", "content": "You are a capable coworker. Use the tools to do what the user asks."},
            {"role": "user", "content": "Read notes.txt with the read_file tool and tell me the number in it."}]


def report(name: str, ok: bool, detail: str = "") -> bool:
    RESULTS.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    return ok


def skip(name: str, why: str) -> None:
    print(f"SKIP {name}: {why}", flush=True)


def tiny_folder() -> str:
    """A tiny random Qwen2 model and its tokenizer, saved to a temporary folder."""
    from cowork.agents.tiny import tiny_model, tiny_tokenizer

    folder = tempfile.mkdtemp(prefix="cowork-tiny-")
    tok = tiny_tokenizer()
    tiny_model(len(tok), hidden=256, seed=3).save_pretrained(folder)  # head size 64: vLLM's kernels take it
    tok.save_pretrained(folder)
    return folder


class Forward:
    """The same model in transformers (fp32), for reference log-probabilities."""

    def __init__(self, path: str):
        import torch
        from transformers import AutoModelForCausalLM

        self.torch = torch
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(DEVICE).eval()

    def logprobs(self, ids: list[int]) -> list[float]:
        torch = self.torch
        with torch.no_grad():
            x = torch.tensor([ids], device=DEVICE)
            lp = torch.log_softmax(self.model(input_ids=x).logits[0, :-1].float(), -1)
            return lp.gather(1, x[0, 1:].unsqueeze(1)).squeeze(1).tolist()

    def gaps(self, t) -> list[float]:
        ref = self.logprobs(t.ids)
        return [abs(lp - ref[i - 1]) for i, lp in enumerate(t.logprobs) if lp is not None]


def recorder(engine):
    """Keep each generate call's prompt and generated ids."""
    seen: list[tuple[list[int], list[int]]] = []
    original = engine.generate

    async def generate(ids, sampling):
        gen = await original(ids, sampling)
        seen.append((list(ids), list(gen.ids)))
        return gen

    engine.generate = generate
    return seen, lambda: setattr(engine, "generate", original)


async def two_turns(policy) -> list:
    """Turn 1; then the tool's answer (or a nudge when the model called none); then turn 2."""
    messages = list(MESSAGES)
    first = await policy.act(messages, TOOLS)
    msg = {"role": "assistant", "content": first.content}
    if first.tool_calls:
        msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": "{}"}}
                             for c in first.tool_calls]
    messages.append(msg)
    if first.tool_calls:
        messages += [{"role": "tool", "tool_call_id": c.id, "content": "quarterly numbers: 42"} for c in first.tool_calls]
    else:
        messages.append({"role": "user", "content": "Please go on."})
    second = await policy.act(messages, TOOLS)
    return [first, second]


async def sandbox_episode(engine, spec: str, max_turns: int) -> None:
    name = "episode in a real sandbox"
    try:
        from cowork.engine.client import docker_available

        if not docker_available():
            return skip(name, "no Docker daemon answers")
    except ImportError as exc:  # the runtime's own dependencies are not installed here
        return skip(name, f"the sandbox runtime cannot load ({type(exc).__name__}: {exc})")
    from cowork.episode.run import run_episode
    from cowork.sandbox.sandbox import Sandbox
    from cowork.spec.loader import load_spec

    policy = engine.policy()
    async with await Sandbox.start(load_spec(spec)) as sb:
        traj = await run_episode(sb, policy, max_turns=max_turns)
    t = traj.tokens
    try:
        t.check()
        ok = traj.status in ("completed", "truncated", "max_turns") and len(t.turns) == traj.turns
    except ValueError as exc:
        ok, traj.error = False, str(exc)
    report(name, ok, f"{traj.status}, {traj.turns} turn(s), {len(traj.steps)} tool call(s), {len(t.ids)} tokens"
           + (f"; {traj.error}" if traj.error else ""))


#: The groups of checks, in the order they run, and what each covers (``--only``, ``--dry-run``).
GROUPS = {
    "engine": "in-process engine: worker extension, append-only tokens, logprobs vs transformers, weight loads, "
              "concurrency",
    "partial": "partial rollouts: a turn in flight finishes on the old weights; an episode goes on across a weight "
               "update, versions recorded per turn, turn 2 on the new weights",
    "async": "streaming rollout with max_staleness=0: groups handed over while later ones run; after a weight update "
             "every sample (and turn) handed over started at the current version",
    "server": "vllm serve with VLLM_SERVER_DEV_MODE=1: probe, update_weights through its endpoints, /weight_info, "
              "outputs on the new weights, an episode paused between turns",
}


def dry_run(args: argparse.Namespace) -> int:
    """Say what would run, with which settings, and the server's command line: no GPU, no vllm."""
    print(f"model {args.model}; groups {', '.join(args.only)}", flush=True)
    for name in args.only:
        print(f"  {name}: {GROUPS[name]}", flush=True)
    if "server" in args.only:
        cmd, env = server_command(args.model if args.model != "tiny" else "TINY_FOLDER", args, 8000)
        print(f"  server: VLLM_SERVER_DEV_MODE={env['VLLM_SERVER_DEV_MODE']} {' '.join(cmd)}", flush=True)
    print("0 passed, 0 failed (dry run)", flush=True)
    return 0


async def main(args: argparse.Namespace) -> int:
    if args.dry_run:
        return dry_run(args)
    try:
        import torch
        import vllm  # noqa: F401
    except ImportError as exc:
        print(f"FAIL prerequisites: {exc} (pip install 'cowork-runtime[vllm]' on a CUDA machine)")
        return 2
    if not torch.cuda.is_available():
        print("FAIL prerequisites: no CUDA GPU visible")
        return 2
    path = tiny_folder() if args.model == "tiny" else args.model
    try:
        return await run_checks(path, args)
    finally:
        if args.model == "tiny":
            shutil.rmtree(path, ignore_errors=True)


async def run_checks(path: str, args: argparse.Namespace) -> int:
    import torch
    import vllm

    from cowork.agents.tokens import SamplingSettings
    from cowork.agents.vllm_engine import VLLMEngine

    print(f"vllm {vllm.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}, model {path}", flush=True)
    if {"engine", "partial", "async"} & set(args.only):
        t0 = time.monotonic()
        engine = VLLMEngine.start(path, gpu_memory_utilization=args.gpu_memory_utilization,
                                  max_model_len=args.max_model_len, enforce_eager=not args.cuda_graphs, dtype=args.dtype,
                                  sampling=SamplingSettings(temperature=0.7, max_tokens=args.max_tokens, seed=1))
        report("engine starts with cowork's worker extension", True, f"{time.monotonic() - t0:.0f}s")
        try:
            if "engine" in args.only:
                await checks(engine, path, args)
            if "partial" in args.only:
                await partial_checks(engine, path, args)
            if "async" in args.only:
                await stream_checks(engine, path, args)
        finally:
            engine.close()
    if "server" in args.only:
        await server_checks(path, args)
    print(f"{sum(RESULTS)} passed, {len(RESULTS) - sum(RESULTS)} failed", flush=True)
    return 0 if all(RESULTS) else 1


async def checks(engine, path: str, args: argparse.Namespace) -> None:
    from cowork.agents.tokens import SamplingSettings

    await sandbox_episode(engine, args.spec, args.max_turns)

    # Two turns with a stand-in tool: append-only tokens, an exact mask, logprobs as transformers'.
    policy = engine.policy()
    seen, restore = recorder(engine)
    try:
        turns = await two_turns(policy)
    finally:
        restore()
    t = policy.token_trajectory()
    (p1, g1), (p2, g2) = seen
    report("two turns: the second prompt extends the first prompt and generation", p2[:len(p1) + len(g1)] == p1 + g1,
           f"turn 1 {turns[0].extra['finish_reason']} ({len(g1)} tokens), turn 2 {turns[1].extra['finish_reason']}")
    spans_ok = [t.ids[s.gen_start:s.gen_end] for s in t.turns] == [g1, g2] and t.ids == p2 + g2
    try:
        t.check()
    except ValueError as exc:
        spans_ok = False
        print(f"  {exc}")
    report("the mask covers exactly the generated tokens", spans_ok and sum(t.mask) == len(g1) + len(g2))
    hf = Forward(path)
    gaps = hf.gaps(t)
    mean = sum(gaps) / len(gaps)
    report("vLLM's logprobs agree with a transformers forward pass (raw, before temperature)", mean < args.tol,
           f"mean |gap| {mean:.4f}, max {max(gaps):.4f} over {len(gaps)} tokens (temperature 0.7)")

    # Weights: perturbed, then restored.
    greedy = SamplingSettings(temperature=0, max_tokens=args.max_tokens)

    async def one_turn():
        p = engine.policy(greedy)
        await p.act(MESSAGES, TOOLS)
        return p.token_trajectory()

    base = await one_turn()
    torch = hf.torch
    tied = bool(getattr(hf.model.config, "tie_word_embeddings", False))
    original = {k: v.detach().clone() for k, v in hf.model.state_dict().items() if not (tied and k == "lm_head.weight")}
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    perturbed = {k: v * (1 + args.noise * torch.randn(v.shape, generator=gen, device=v.device, dtype=v.dtype))
                 if v.is_floating_point() else v for k, v in original.items()}
    t0 = time.monotonic()
    version = await engine.load_weights(perturbed)
    hf.model.load_state_dict(perturbed, strict=False)
    report("load_weights returns the next version", version == 1, f"{len(perturbed)} tensors in "
           f"{time.monotonic() - t0:.1f}s")
    after = await one_turn()
    b_gen = base.ids[base.turns[0].gen_start:]
    a_gen = after.ids[after.turns[0].gen_start:]
    differs = a_gen != b_gen or max(abs(x - y) for x, y in zip(base.logprobs[base.prompt_len:],
                                                                after.logprobs[after.prompt_len:])) > 1e-3
    report("perturbed weights change the outputs", differs, f"{len(b_gen)} -> {len(a_gen)} tokens")
    gaps = hf.gaps(after)
    mean = sum(gaps) / len(gaps)
    report("after the load, logprobs agree with transformers on the perturbed model (prefix cache reset)",
           mean < args.tol and after.policy_version == 1, f"mean |gap| {mean:.4f}, policy_version {after.policy_version}")
    await engine.load_weights(original)
    hf.model.load_state_dict(original, strict=False)
    back = await one_turn()
    gaps = hf.gaps(back)
    same = back.ids == base.ids
    report("the original weights loaded back restore the outputs", same or sum(gaps) / len(gaps) < args.tol,
           "identical greedy tokens" if same else f"greedy tokens differ; mean |gap| {sum(gaps) / len(gaps):.4f}")

    # Concurrency: many episodes on one engine.
    policies = [engine.policy(SamplingSettings(temperature=1.0, max_tokens=args.max_tokens, seed=s))
                for s in range(args.concurrent)]
    t0 = time.monotonic()
    await asyncio.gather(*(two_turns(p) for p in policies))
    bad = []
    for n, p in enumerate(policies):
        try:
            p.token_trajectory().check()
        except ValueError as exc:
            bad.append(f"{n}: {exc}")
    report(f"{args.concurrent} concurrent two-turn episodes keep valid trajectories", not bad,
           "; ".join(bad) or f"{time.monotonic() - t0:.1f}s")


# --------------------------------------------------------------------------- partial rollouts
def perturb(model, noise: float, seed: int) -> tuple[dict, dict]:
    """(original, perturbed) state dicts of a transformers model (a tied output head left out)."""
    import torch

    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    original = {k: v.detach().clone() for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")}
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    return original, {k: v * (1 + noise * torch.randn(v.shape, generator=gen, device=v.device, dtype=v.dtype))
                      if v.is_floating_point() else v for k, v in original.items()}


def span_gap(hf: Forward, t, span) -> float:
    """Mean |recorded - transformers| logprob over one turn's generated tokens."""
    ref = hf.logprobs(t.ids)
    gaps = [abs(t.logprobs[i] - ref[i - 1]) for i in range(span.gen_start, span.gen_end)]
    return sum(gaps) / max(1, len(gaps))


def follow_up(messages: list, turn) -> list:
    """The conversation after ``turn``: its tool calls answered, or a nudge."""
    msg = {"role": "assistant", "content": turn.content}
    if turn.tool_calls:
        msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": "{}"}}
                             for c in turn.tool_calls]
    out = [*messages, msg]
    if turn.tool_calls:
        return out + [{"role": "tool", "tool_call_id": c.id, "content": "quarterly numbers: 42"} for c in turn.tool_calls]
    return out + [{"role": "user", "content": "Please go on."}]


async def partial_checks(engine, path: str, args: argparse.Namespace) -> None:
    from cowork.agents.tokens import SamplingSettings

    greedy = SamplingSettings(temperature=0, max_tokens=args.max_tokens)
    hf = Forward(path)
    original, perturbed = perturb(hf.model, args.noise, seed=1)
    policy = engine.policy(greedy)
    first = await policy.act(MESSAGES, TOOLS)
    v0 = engine.version

    other = engine.policy(greedy)  # another episode's turn, in flight when the load starts
    inflight = asyncio.ensure_future(other.act(MESSAGES, TOOLS))
    for _ in range(400):
        if engine._active or inflight.done():
            break
        await asyncio.sleep(0.005)
    v1 = await engine.load_weights(perturbed)
    hf.model.load_state_dict(perturbed, strict=False)
    await inflight
    report("a turn in flight when a weight load starts finishes on the old weights",
           other.token_trajectory().turns[0].policy_version == v0 and v1 == v0 + 1,
           f"turn version {other.token_trajectory().turns[0].policy_version}, load -> {v1}")

    await policy.act(follow_up(MESSAGES, first), TOOLS)
    t = policy.token_trajectory()
    versions = [s.policy_version for s in t.turns]
    report("an episode goes on across the update, each turn recording its version", versions == [v0, v1],
           f"turn versions {versions}")
    try:
        t.check()
        gap, ok = span_gap(hf, t, t.turns[1]), True
    except ValueError as exc:
        gap, ok = float("inf"), False
        print(f"  {exc}")
    report("its second turn's logprobs are the new weights' (turn 1's prefix cache dropped)", ok and gap < args.tol,
           f"mean |gap| {gap:.4f} to transformers on the new weights")
    await engine.load_weights(original)


# --------------------------------------------------------------------------- streaming
def docker_ok() -> bool:
    try:
        from cowork.engine.client import docker_available

        return docker_available()
    except ImportError:
        return False


def stand_in_episodes():
    """episode.run_task without sandboxes: two turns with a stand-in tool, graded 1.0."""
    from cowork.episode.run import EpisodeResult, Trajectory
    from cowork.grading import Grade

    async def run_task(loaded, policy, **kw):
        await two_turns(policy)
        traj = Trajectory(task=loaded.spec.id, agent=policy.name, status="completed", turns=2)
        traj.tokens = policy.token_trajectory()
        return EpisodeResult(traj, Grade(task=loaded.spec.id, status="graded", score=1.0, passed=True, safe=True),
                             None, [])

    return run_task


async def stream_checks(engine, path: str, args: argparse.Namespace) -> None:
    from cowork.agents.tokens import SamplingSettings
    from cowork.episode import run as episode
    from cowork.rollouts.runner import RolloutRunner

    real = docker_ok()
    original_run = episode.run_task
    if not real:
        print("  (no Docker daemon: stand-in two-turn episodes on the same engine)", flush=True)
        episode.run_task = stand_in_episodes()
    tasks = [str(ROOT / "specs" / n) for n in ("fix-csv-report", "organize-downloads", "crm-update-from-mail")]
    sampling = SamplingSettings(temperature=1.0, max_tokens=args.max_tokens, seed=7)
    original, perturbed = perturb(Forward(path).model, args.noise / 10, seed=2)
    try:
        async with RolloutRunner(concurrency=4, pool=None if real else object()) as runner:
            async with runner.stream(tasks, lambda spec: engine.policy(sampling), group_size=2, max_staleness=0,
                                     version=lambda: engine.version) as groups:
                first = await groups.__anext__()
                ahead = groups.stats.started > len(first.samples)
                report("the first group is handed over while later groups run", ahead,
                       f"{groups.stats.started} episodes started, {groups.stats.finished} finished")
                await engine.load_weights(perturbed)  # the trainer's step, the other groups running
                received = []
                async for group in groups:
                    received.append((engine.version, group))
                stats = groups.stats
        fresh = all(s.policy_version == v and all(sp.policy_version == v for sp in s.trajectory.tokens.turns)
                    for v, g in received for s in g.samples)
        report("max_staleness=0: every sample handed over after the update started on the current version",
               fresh and len(received) == 2, f"{stats.stale_dropped} stale sample(s) run again, "
               f"{stats.started} started for {3 * 2}")
        await engine.load_weights(original)
    finally:
        episode.run_task = original_run


# --------------------------------------------------------------------------- the server
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_command(path: str, args: argparse.Namespace, port: int) -> tuple[list[str], dict[str, str]]:
    """``vllm serve`` with its dev endpoints and cowork's worker extension, and its environment."""
    from cowork.agents.vllm_engine import WORKER_EXTENSION

    exe = ["vllm"] if shutil.which("vllm") else [sys.executable, "-m", "vllm.entrypoints.cli.main"]
    cmd = [*exe, "serve", path, "--host", "127.0.0.1", "--port", str(port), "--served-model-name", "cowork-check",
           "--worker-extension-cls", WORKER_EXTENSION, "--gpu-memory-utilization", str(args.gpu_memory_utilization),
           "--max-model-len", str(args.max_model_len), "--dtype", args.dtype, "--logprobs-mode", "raw_logprobs"]
    if not args.cuda_graphs:
        cmd.append("--enforce-eager")
    runtime = str(ROOT / "runtime")
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1",
           "PYTHONPATH": runtime + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")}
    return cmd, env


async def wait_healthy(url: str, proc: subprocess.Popen, timeout: float) -> bool:
    import httpx2

    deadline = time.monotonic() + timeout
    async with httpx2.AsyncClient(timeout=5) as http:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if (await http.get(f"{url}/health")).status_code == 200:
                    return True
            except httpx2.HTTPError:
                pass
            await asyncio.sleep(2)
    return False


async def server_checks(path: str, args: argparse.Namespace) -> None:
    from cowork.agents.tokens import SamplingSettings
    from cowork.agents.vllm_server import VLLMServerClient
    from cowork.agents.vllm_weights import SHM, free_bytes

    port = free_port()
    cmd, env = server_command(path, args, port)
    log_path = Path(tempfile.gettempdir()) / f"cowork-vllm-serve-{port}.log"
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen(cmd, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    root = f"http://127.0.0.1:{port}"
    try:
        t0 = time.monotonic()
        if not await wait_healthy(root, proc, args.server_timeout):
            tail = log_path.read_text(errors="replace")[-3000:]
            report("vllm serve starts with VLLM_SERVER_DEV_MODE=1 and cowork's worker extension", False,
                   f"no /health within {args.server_timeout:.0f}s; log tail:\n{tail}")
            return
        report("vllm serve starts with VLLM_SERVER_DEV_MODE=1 and cowork's worker extension", True,
               f"{time.monotonic() - t0:.0f}s")
        greedy = SamplingSettings(temperature=0, max_tokens=args.max_tokens)
        client = VLLMServerClient(f"{root}/v1", "cowork-check", tokenizer=path, sampling=greedy, mode="tokens",
                                  logprobs_mode="raw_logprobs")
        found = await client.weights.probe()
        report("the server offers /pause, /weight_info and /collective_rpc with cowork's loader", all(found.values()),
               str(found))
        base = client.policy()
        await base.act(MESSAGES, TOOLS)
        episode = client.policy()  # paused between its turns by the update
        first = await episode.act(MESSAGES, TOOLS)
        hf = Forward(path)
        _, perturbed = perturb(hf.model, args.noise, seed=3)
        print(f"  {SHM}: {free_bytes(SHM) / 2**20:.0f} MiB free", flush=True)
        t0 = time.monotonic()
        version = await client.update_weights(perturbed)
        hf.model.load_state_dict(perturbed, strict=False)
        said = await client.weights.weight_version()
        report("update_weights through the server's endpoints: the next version, and /weight_info says it",
               version == 1 and said == "1", f"version {version}, weight_info {said!r}, "
               f"{time.monotonic() - t0:.1f}s for {len(perturbed)} tensors")
        after = client.policy()
        await after.act(MESSAGES, TOOLS)
        a, b = after.token_trajectory(), base.token_trajectory()
        gap = span_gap(hf, a, a.turns[0])
        changed = a.ids != b.ids or any(abs(x - y) > 1e-3 for x, y in zip(a.logprobs[a.prompt_len:],
                                                                           b.logprobs[b.prompt_len:]))
        report("the served outputs change and agree with transformers on the new weights", changed and gap < args.tol,
               f"mean |gap| {gap:.4f}, turn version {a.turns[0].policy_version}")
        await episode.act(follow_up(MESSAGES, first), TOOLS)
        t = episode.token_trajectory()
        t.check()
        versions = [s.policy_version for s in t.turns]
        gap2 = span_gap(hf, t, t.turns[1])
        report("an episode paused between its turns goes on with the new weights, both versions recorded",
               versions == [0, 1] and gap2 < args.tol, f"turn versions {versions}, turn 2 mean |gap| {gap2:.4f}")
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _groups(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in GROUPS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown check group(s) {unknown or text!r}; choose from {', '.join(GROUPS)}")
    return [n for n in GROUPS if n in names]  # in run order


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", type=_groups, default=list(GROUPS), help=f"check groups, comma-separated: {','.join(GROUPS)}")
    p.add_argument("--dry-run", action="store_true", help="say what would run (no GPU, no vllm needed)")
    p.add_argument("--server-timeout", type=float, default=600, help="seconds for `vllm serve` to answer /health")
    p.add_argument("--model", default="Qwen/Qwen2.5-0.5B-Instruct", help="a folder, a hub name, or 'tiny'")
    p.add_argument("--spec", default=str(ROOT / "specs" / "fix-csv-report"), help="task for the sandbox episode")
    p.add_argument("--max-turns", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    p.add_argument("--cuda-graphs", action="store_true", help="capture CUDA graphs (slower start)")
    p.add_argument("--noise", type=float, default=0.1, help="relative weight perturbation")
    p.add_argument("--tol", type=float, default=0.1, help="most mean |logprob gap| to transformers (bf16 vs fp32)")
    p.add_argument("--concurrent", type=int, default=8)
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))
