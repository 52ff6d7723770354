"""Check the in-process vLLM backend on a GPU machine; prints one PASS/FAIL/SKIP line per check.

    python scripts/gpu_vllm_check.py --model Qwen/Qwen2.5-0.5B-Instruct
    python scripts/gpu_vllm_check.py --model tiny      # a tiny random model made here: no download

Checks: vLLM starts with cowork's worker extension; a two-turn episode (a real sandbox when a
Docker daemon answers, and always one with a stand-in tool) keeps an append-only token
buffer whose mask covers exactly what vLLM generated; vLLM's log-probabilities agree with a
transformers forward pass over the same ids; perturbed weights loaded into the running
engine change its outputs and agree with transformers on the perturbed model (the same
prompt, so a stale prefix cache would show); the original weights loaded back restore the
outputs; concurrent episodes on one engine all keep valid trajectories.

Exit status 0 when every check passed, 1 when one failed, 2 when the prerequisites (vllm,
a CUDA GPU) are missing. The last line reads ``N passed, N failed``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
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


async def main(args: argparse.Namespace) -> int:
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
    t0 = time.monotonic()
    engine = VLLMEngine.start(path, gpu_memory_utilization=args.gpu_memory_utilization, max_model_len=args.max_model_len,
                              enforce_eager=not args.cuda_graphs, dtype=args.dtype,
                              sampling=SamplingSettings(temperature=0.7, max_tokens=args.max_tokens, seed=1))
    report("engine starts with cowork's worker extension", True, f"{time.monotonic() - t0:.0f}s")
    try:
        await checks(engine, path, args)
    finally:
        engine.close()
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


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
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
