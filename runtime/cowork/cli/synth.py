"""``cowork synth``: generate task specs from families or a model, and check a batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import exits, output


def list_families(as_json: bool) -> int:
    """Print every task family with its capabilities and summary (``cowork synth list``)."""
    from ..synth import families

    fams = families()
    if as_json:
        output.print_json({n: {"capabilities": list(f.capabilities), "summary": f.summary} for n, f in fams.items()})
    else:
        for name, fam in sorted(fams.items()):
            output.say(f"{name:32} {', '.join(fam.capabilities)}\n    {fam.summary}")
    return exits.OK


def family(name: str, *, n: int, seed: int, out: Path, difficulty: str | None, as_json: bool) -> int:
    """Write ``n`` specs of family ``name`` for seeds ``seed .. seed+n-1`` under ``out``."""
    from ..synth import generate, write_draft

    written = [str(write_draft(generate(name, s, difficulty), out)) for s in range(seed, seed + n)]
    if as_json:
        output.print_json({"family": name, "written": written})
    else:
        output.say(f"wrote {len(written)} spec(s) of {name} under {out} (check them: cowork validate {out})")
    return exits.OK


async def llm(capability: str, *, n: int, model: str, base_url: str | None, out: Path, rounds: int,
              concurrency: int, examples: list[Path], as_json: bool) -> int:
    """Ask a chat model for ``n`` specs of ``capability``, repairing each from its validation
    report; exit 0 when at least one validated spec was written, 1 when none was."""
    from ..synth.llm import SynthOptions, synthesize
    from .preflight import Endpoint, preflight

    opts = SynthOptions(capability=capability, n=n, model=model, base_url=base_url, out=out, rounds=rounds,
                        concurrency=concurrency, examples=list(examples))
    await preflight([Endpoint("--model", opts.resolved_base_url(), opts.resolved_api_key(), "$OPENAI_API_KEY",
                              "--base-url or $OPENAI_BASE_URL")])
    report = await synthesize(opts)
    if as_json:
        output.print_json(report.as_dict())
    else:
        output.say(report.summary() + f"\nreport: {out / 'synth-report.json'}")
    return exits.OK if report.accepted else exits.GATE_FAILED


# --------------------------------------------------------------------------- quality gates
async def check(paths: list[str], *, concurrency: int, threshold: float, static: bool, as_json: bool,
                fix_difficulty: bool = False) -> int:
    """Run the quality gates (cowork.synth.gates) over a batch of specs: near-duplicates (by seed
    similarity, and clones with entities renamed), the difficulty label, the answer gate
    (a hedged reply), diversity and, unless ``static``, the trivial-run refusal in sandboxes.
    1 when a spec is refused (it near-duplicates or clones an earlier one, its label claims two
    levels more than it measures, an answer check passes the hedged reply, a trivial run passes
    or trips no rule, or it does not load). With ``fix_difficulty`` an overclaimed label is
    rewritten to the measured level instead of refused."""
    import asyncio

    from ..errors import CoworkError, SpecError
    from ..rollouts.progress import ProgressReport
    from ..spec.loader import load_each
    from ..synth import features, gates
    from ..synth.prove import can_bundle
    from ..synth.trivial import trivial_runs
    from .commands import _spec_targets

    if concurrency < 1:
        raise CoworkError(f"--concurrency must be at least 1, got {concurrency}")
    if not 0 < threshold <= 1:
        raise CoworkError(f"--threshold must be in (0, 1], got {threshold}")
    refused: dict[str, list[str]] = {}
    loaded: list[Any] = []  # LoadedSpec, or SpecFeatures when static
    targets = _spec_targets(paths)
    # The static gates need only each spec's features, cached by content; the sandbox runs
    # need the specs themselves. Either way in processes for a big batch.
    for target, got in zip(targets, features.each(targets) if static else load_each(targets)):
        if isinstance(got, SpecError):
            refused[str(target)] = [f"does not load: {p}" for p in got.problems]
        else:
            loaded.append(got)
    feats: list[features.SpecFeatures] = loaded if static else [features.of(ls) for ls in loaded]
    pairs = features.near_duplicates(feats, threshold)
    for pair in pairs:  # the later of a pair goes; the first stays
        refused.setdefault(pair.second, []).append(
            f"near-duplicate of {pair.first} (prompt {pair.prompt_similarity:.2f}, seed {pair.seed_similarity:.2f})")
    seen = {(p.first, p.second) for p in pairs}
    clones = [p for p in features.structural_duplicates(feats, threshold) if (p.first, p.second) not in seen]
    for pair in clones:
        refused.setdefault(pair.second, []).append(
            f"clone of {pair.first}: same oracle, checks and rules with entities renamed (prompt shape "
            f"{pair.prompt_similarity:.2f}, seed after renaming {pair.seed_similarity:.2f})")
    answers = {f.key: f.answer for f in feats}
    for key, gate in answers.items():
        if gate.refused:
            refused.setdefault(key, []).extend(gate.reasons())
    runs: dict[str, Any] = {}
    if not static and loaded:
        limit = asyncio.Semaphore(concurrency)
        progress = ProgressReport("check", "specs", len(loaded), enabled=len(loaded) > 1)

        async def one(ls):
            async with limit:
                rep = await trivial_runs(ls, bundles=can_bundle())
            progress.advance(f"{ls.spec.id} {'REFUSED' if rep.refused else 'error' if rep.error else 'ok'}")
            return ls, rep

        with progress:
            for ls, rep in await asyncio.gather(*(one(ls) for ls in loaded)):
                runs[_key(ls)] = rep
                if rep.refused:
                    refused.setdefault(_key(ls), []).extend(rep.reasons)
    signals = [(f.family, f.difficulty.scored(getattr(runs.get(f.key), "empty_completion", None))) for f in feats]
    relabelled: dict[str, str] = {}
    for f, (_, sig) in zip(feats, signals):
        if not sig.overclaims:
            continue
        if fix_difficulty:
            gates.relabel(Path(f.path), sig.predicted)
            relabelled[f.key] = f"{sig.declared} -> {sig.predicted}"
        else:
            refused.setdefault(f.key, []).append(
                f"declared {sig.declared} but measures {sig.predicted} (score {sig.score:g}: {sig.oracle_steps} oracle "
                f"calls, {sig.services} services, {sig.checks} checks): relabel it, or rerun with --fix-difficulty")
    order = gates.level_order_problems(signals)
    div = features.diversity(feats)
    errors = {k: r.error for k, r in runs.items() if r.error}
    total = len(feats) + sum(1 for k in refused if k not in {f.key for f in feats})
    if as_json:
        output.print_json({"specs": total, "refused": refused, "near_duplicates": [p.as_dict() for p in pairs],
                           "clones": [p.as_dict() for p in clones],
                           "answer_gate": {k: g.as_dict() for k, g in answers.items() if g.judged},
                           "difficulty": [s.as_dict() for _, s in signals], "relabelled": relabelled,
                           "level_order": order, "diversity": div.as_dict(),
                           "trivial_runs": {k: r.as_dict() for k, r in runs.items()}, "errors": errors})
    else:
        for key, reasons in sorted(refused.items()):
            output.say(f"REFUSED {key}")
            for reason in reasons:
                output.say(f"  {reason}")
        for key, err in sorted(errors.items()):
            output.say(f"NOT RUN {key}: {err}")
        for key, change in sorted(relabelled.items()):
            output.say(f"RELABELLED {key}: difficulty {change}")
        under = [s for _, s in signals if s.mismatch and not s.overclaims]
        for s in under:
            output.say(f"difficulty: {s.task} is declared {s.declared} but measures {s.predicted} (score {s.score:g}: "
                       f"{s.oracle_steps} oracle calls, {s.services} services, {s.checks} checks; reported, not refused)")
        for line in order:
            output.say(f"difficulty: {line}")
        mentions = sum(len(g.mentions_passed) for g in answers.values())
        output.say(f"answers: {sum(1 for g in answers.values() if g.judged)} spec(s) with answer checks, "
                   f"{sum(1 for g in answers.values() if g.refused)} refused for rewarding a hedged reply; "
                   f"{mentions} mention check(s) a hedged reply passes (reported, not refused)")
        output.say("capabilities: " + ", ".join(f"{k} {v}" for k, v in sorted(div.capabilities.items()))
                   + (f"; none for {', '.join(div.missing_capabilities)}" if div.missing_capabilities else ""))
        output.say("services: " + ", ".join(f"{k} {v}" for k, v in sorted(div.services.items())))
        output.say("difficulty: " + ", ".join(f"{k} {v}" for k, v in sorted(div.difficulties.items())))
        output.say(f"{total - len(refused)} of {total} spec(s) accepted; {len(pairs)} near-duplicate pair(s), "
                   f"{len(clones)} clone(s), {sum(1 for _, s in signals if s.mismatch)} difficulty mismatch(es)"
                   + (f", {len(relabelled)} relabelled" if relabelled else "")
                   + ("" if not static else " (static gates only)"))
    if refused:
        return exits.GATE_FAILED
    return exits.INFRASTRUCTURE if errors else exits.OK


def _key(ls: Any) -> str:
    return f"{ls.spec.id} ({ls.path})"


async def corpus(out: Path, *, per_family: int, seed: int, validate: bool, concurrency: int, as_json: bool,
                 n: int | None = None, only: str = "all", dataset_out: Path | None = None, gates: bool = True,
                 fix_difficulty: bool = False) -> int:
    """Write ``per_family`` specs of every registered family (seeds ``seed`` ..), or ``n`` in
    all spread evenly over them (the first ``n % families`` get one more); ``only`` picks
    ``generators`` (the world generators), ``templates`` (the template families) or ``all``. With
    ``validate`` prove each in sandboxes, ``concurrency`` at once; an invalid spec is moved
    to ``out/_invalid/`` with its report, so ``out`` holds only specs that validated, and every
    report goes to ``out/validation.json``. With ``dataset_out`` also write the Hugging Face
    dataset of the corpus there (:func:`cowork.synth.dataset.build`: only validated specs
    when ``validate``). Prints valid/invalid per family and per capability and validated specs
    per minute."""
    import json
    import time

    from ..errors import CoworkError

    # From the module: after the first call the package attribute `families` is the
    # subpackage of built-in families (its import shadows the function).
    from ..synth.family import families, generate, write_draft

    if concurrency < 1:
        raise CoworkError(f"--concurrency must be at least 1, got {concurrency}")
    if per_family < 1:
        raise CoworkError(f"--per-family must be at least 1, got {per_family}")
    from ..synth.compose import generators

    if only not in ("all", "generators", "templates"):
        raise CoworkError(f"--only must be all, generators or templates, not {only!r}")
    if n is not None and n < 1:
        raise CoworkError(f"--n must be at least 1, got {n}")
    world = set(generators())
    fams = {k: v for k, v in families().items()
            if only == "all" or (k in world) == (only == "generators")}
    if not fams:
        raise CoworkError(f"no task family is registered for --only {only} (cowork synth list shows them)")
    counts = {name: per_family for name in fams}
    if n is not None:
        counts = {name: n // len(fams) + (i < n % len(fams)) for i, name in enumerate(sorted(fams))}
    written: list[tuple[str, Path]] = []
    failed: dict[str, str] = {}
    t_gen = time.monotonic()
    for name in sorted(fams):
        for s in range(seed, seed + counts[name]):
            try:
                draft = generate(name, s)
            except Exception as exc:  # noqa: BLE001 - a generator's bug costs its spec, not the corpus
                failed[f"{name}-{s}"] = f"{type(exc).__name__}: {exc}"
                continue
            written.append((name, write_draft(draft, out)))
    gen_s = time.monotonic() - t_gen
    result: dict[str, Any] = {"out": str(out), "families": len(fams), "written": len(written),
                              "generate_seconds": round(gen_s, 2),
                              "generated_per_second": round(len(written) / gen_s, 1) if gen_s else None,
                              "generation_failed": failed}
    if failed:
        out.mkdir(parents=True, exist_ok=True)
        (out / "generation-failures.json").write_text(json.dumps(failed, indent=1, sort_keys=True))
    if validate:
        result |= await _prove_corpus(out, written, concurrency=concurrency, gates=gates,
                                      fix_difficulty=fix_difficulty)
    if not validate:  # an earlier --validate run's record does not speak for these specs
        (out / "validation.json").unlink(missing_ok=True)
    built = None
    if dataset_out is not None and written:
        from ..synth.dataset import build

        built = build(out, dataset_out, source=_corpus_source(out, per_family, seed, validate, n, only))
        result["dataset"] = {"out": str(dataset_out), "splits": built.splits, "rejects": len(built.rejects)}
    if as_json:
        output.print_json(result)
        return exits.OK if not result.get("invalid") and not failed else exits.GATE_FAILED
    if built is not None:
        output.say(built.summary())
    output.say(f"wrote {len(written)} spec(s) from {len(fams)} famil{'y' if len(fams) == 1 else 'ies'} under {out} "
               f"in {gen_s:.1f} s ({result['generated_per_second']} specs/s)")
    if failed:
        output.say(f"{len(failed)} spec(s) could not be generated (reasons in {out / 'generation-failures.json'}):")
        for key, why in list(failed.items())[:10]:
            output.say(f"  {key}: {why}")
    if validate:
        for title, table in (("family", result["per_family"]), ("capability", result["per_capability"])):
            output.say(f"{title:32} valid invalid")
            for k, v in table.items():
                output.say(f"{k:32} {v.get('valid', 0):5} {v.get('invalid', 0):7}")
        for reason, count in result["rejects_by_reason"].items():
            output.say(f"rejected {count:5} {reason}")
        output.say(f"{result['valid']} valid, {result['invalid']} rejected (moved to {out / '_invalid'}); "
                   f"{result['valid_per_second']} validated specs per second "
                   f"({'gates included' if gates else 'no gates'}), {result['minutes']} min")
        return exits.OK if not result["invalid"] and not failed else exits.GATE_FAILED
    output.say(f"check them: cowork validate {out} --concurrency 2 && cowork synth check {out}")
    return exits.OK if not failed else exits.GATE_FAILED


async def _prove_corpus(out: Path, written: list[tuple[str, Path]], *, concurrency: int, gates: bool,
                        fix_difficulty: bool) -> dict[str, Any]:
    """Prove every written spec (``synth.prove``), reject the invalid and the refused (moved to
    ``out/_invalid`` with their report), and write ``out/validation.json`` (every report, gate
    findings included) and ``out/corpus-report.json``; the figures for the corpus result."""
    import asyncio
    import json
    import shutil
    import time
    from collections import Counter, defaultdict

    from ..rollouts.progress import ProgressReport
    from ..spec.loader import load_spec
    from ..synth import gates as G
    from ..synth.prove import can_bundle, prove
    from ..validate.validate import Finding

    limit = asyncio.Semaphore(concurrency)
    progress = ProgressReport("validate", "specs", len(written))
    t0 = time.monotonic()

    async def one(name: str, folder: Path):
        async with limit:
            proof = await prove(folder, gates=gates, fix_difficulty=fix_difficulty)
        progress.advance(f"{proof.task or folder.name} {'VALID' if proof.ok else 'REJECTED'}")
        return name, folder, proof

    with progress:
        done = await asyncio.gather(*(one(n, f) for n, f in written))
    sandbox_s = time.monotonic() - t0
    by_key: dict[Path, list[str]] = {folder: list(proof.reasons) for _, folder, proof in done}
    corpus_gate_s = 0.0
    if gates:  # corpus-wide: the later spec of a near-duplicate or clone pair goes
        t1 = time.monotonic()
        kept = [load_spec(folder) for _, folder, proof in done if proof.ok]
        folder_of = {_key(ls): ls.root for ls in kept}
        pairs = G.near_duplicates(kept)
        for pair in pairs:
            by_key[folder_of[pair.second]].append(f"gate near-duplicate: of {pair.first} (prompt "
                                                  f"{pair.prompt_similarity:.2f}, seed {pair.seed_similarity:.2f})")
        seen = {(p.first, p.second) for p in pairs}
        for pair in G.structural_duplicates(kept):
            if (pair.first, pair.second) not in seen:
                by_key[folder_of[pair.second]].append(f"gate clone: of {pair.first} (same oracle, checks and "
                                                      "rules with entities renamed)")
        corpus_gate_s = time.monotonic() - t1
    seconds = time.monotonic() - t0
    per_family_counts: dict[str, Counter] = defaultdict(Counter)
    per_capability: dict[str, Counter] = defaultdict(Counter)
    reasons: Counter[str] = Counter()
    reports, rejected = [], 0
    for name, folder, proof in done:
        report = proof.validation
        if report is None:  # did not load: a report of its reasons
            from ..validate.validate import ValidationReport

            report = ValidationReport(spec=str(folder), ok=False, findings=[])
        extra = [r for r in by_key[folder] if not r.startswith("invalid ")]
        report.findings += [Finding(step=r.split(":", 1)[0], ok=False, detail=r.split(":", 1)[1].strip())
                            for r in extra]
        if not report.findings and by_key[folder]:  # a schema rejection
            report.findings += [Finding(step="schema", ok=False, detail=r.split(":", 1)[1].strip())
                                for r in by_key[folder]]
        report.ok = not by_key[folder]
        reports.append(report)
        verdict = "valid" if report.ok else "invalid"
        per_family_counts[name][verdict] += 1
        for cap in proof.capabilities:
            per_capability[cap][verdict] += 1
        reasons.update(set(r.split(":", 1)[0] for r in by_key[folder]))
        if not report.ok:
            rejected += 1
            dest = out / "_invalid" / folder.name
            if dest.exists():
                shutil.rmtree(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(folder), dest)
            (dest / "validation.json").write_text(json.dumps(report.model_dump(), indent=1))
    # The record `cowork synth dataset` reads to keep only validated specs.
    (out / "validation.json").write_text(json.dumps([r.model_dump() for r in reports], indent=1))
    valid = len(done) - rejected
    proofs = sorted(p.seconds for _, _, p in done)
    figures: dict[str, Any] = {
        "valid": valid, "invalid": rejected, "minutes": round(seconds / 60, 2),
        "valid_per_minute": round(valid / seconds * 60, 2) if seconds else None,
        "proved_per_second": round(len(done) / seconds, 3) if seconds else None,
        "valid_per_second": round(valid / seconds, 3) if seconds else None,
        "gates": gates, "bundles": can_bundle(), "concurrency": concurrency,
        "sandbox_seconds": round(sandbox_s, 1), "corpus_gate_seconds": round(corpus_gate_s, 1),
        "proof_seconds_median": round(proofs[len(proofs) // 2], 2) if proofs else None,
        "rejects_by_reason": dict(sorted(reasons.items())),
        "relabelled": {p.task: p.relabelled for _, _, p in done if p.relabelled},
        "per_family": {k: dict(v) for k, v in sorted(per_family_counts.items())},
        "per_capability": {k: dict(v) for k, v in sorted(per_capability.items())}}
    (out / "corpus-report.json").write_text(json.dumps(figures, indent=1, sort_keys=True))
    return figures


def _corpus_source(out: Path, per_family: int, seed: int, validate: bool, n: int | None, only: str) -> str:
    size = f"--n {n}" if n is not None else f"--per-family {per_family}"
    return (f"cowork synth corpus --out {out} {size} --only {only} --seed {seed}"
            + (" --validate" if validate else ""))


def dataset(corpus_dir: Path, *, out: Path, validation: Path | None, as_json: bool) -> int:
    """Write the Hugging Face dataset of a corpus folder (``cowork synth dataset``): splits by
    world seed, rows self-contained, ``rejects.jsonl`` and a card. Only validated specs go in
    when ``validation`` (a ``cowork validate --json`` file) is given or the corpus holds the
    ``validation.json`` of ``cowork synth corpus --validate``; 1 when a spec was left out."""
    from ..synth.dataset import build, read_verdicts

    verdicts = read_verdicts(validation) if validation is not None else None
    built = build(corpus_dir, out, validation=verdicts)
    if as_json:
        output.print_json(built.as_dict())
    else:
        output.say(built.summary())
        for rej in built.rejects[:10]:
            output.say(f"  LEFT OUT {rej.id} ({rej.stage}): {rej.reason}")
        output.say(f"load it: datasets.load_from_disk({str(out)!r}); run a split: cowork run {out}:test")
    return exits.GATE_FAILED if built.rejects else exits.OK


# --------------------------------------------------------------------------- the world and corpus figures
def world(*, seed: int, size: str, out: Path | None, as_json: bool) -> int:
    """Build the seeded world of ``seed``; print its summary, and with ``out`` write
    ``world.json`` (every entity, office files as data) and ``services.yaml`` (the fourteen
    service seeds from the user's viewpoint) there (``cowork synth world``)."""
    import time

    import yaml

    from ..synth.world import build_world

    t0 = time.perf_counter()
    built = build_world(seed, size)
    ms = (time.perf_counter() - t0) * 1000
    summary = {**built.summary(), "build_ms": round(ms, 1)}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "world.json").write_text(built.to_json(indent=1), encoding="utf-8")
        (out / "services.yaml").write_text(yaml.safe_dump(built.services_seed(), sort_keys=False, allow_unicode=True,
                                                          width=100), encoding="utf-8")
        summary["written"] = [str(out / "world.json"), str(out / "services.yaml")]
    if as_json:
        output.print_json(summary)
        return exits.OK
    output.say(f"world {seed} ({size}): {summary['company']}, clock {summary['clock']}, built in {ms:.0f} ms")
    output.say(f"user: {summary['user']}")
    output.say("counts: " + ", ".join(f"{k} {v}" for k, v in summary["counts"].items()))
    output.say("organisations: " + ", ".join(f"{k} {v}" for k, v in summary["org_kinds"].items()))
    output.say(f"time zones ({len(summary['time_zones'])}): " + ", ".join(summary["time_zones"]))
    output.say(f"cultures ({len(summary['cultures'])}): " + ", ".join(summary["cultures"]))
    output.say("domains: " + ", ".join(summary["domains"]))
    for path in summary.get("written", []):
        output.say(f"wrote {path}")
    return exits.OK


def stats(paths: list[str], *, as_json: bool) -> int:
    """Print the corpus figures of the specs under ``paths`` beside the issue's targets
    (``cowork synth stats``); 2 when a spec does not read as YAML (it is listed)."""
    import time

    from ..synth.stats import collect

    t0 = time.perf_counter()
    result = collect(paths)
    seconds = time.perf_counter() - t0
    if as_json:
        output.print_json({**result.as_dict(), "seconds": round(seconds, 3)})
    else:
        output.say(f"{result.specs} spec(s) read in {seconds:.2f} s ({result.hand_written} hand-written); "
                   f"services: {', '.join(result.services) or 'none'}")
        for line in result.table():
            output.say(line)
        for path, reason in result.unreadable.items():
            output.say(f"UNREADABLE {path}: {reason}")
    return exits.BAD_INPUT if result.unreadable else exits.OK


# --------------------------------------------------------------------------- environment evolution
async def evolve(runs: Path, *, out: Path, specs: Path | None, seed: int, variants: int, harder_at: float,
                 easier_at: float, as_json: bool) -> int:
    """The next round of tasks from a rollout folder's pass rates (``cowork synth evolve``):
    harder variants of the tasks passed at least ``harder_at`` of the time, easier ones of those
    passed at most ``easier_at``, the rest kept; each new task validated. Exit 1 when a new task
    was left out."""
    from ..synth.evolve import REPORT_JSON, REPORT_TEXT, Evolver

    report = await Evolver(runs, out, specs=specs, seed=seed, variants=variants, harder_at=harder_at,
                           easier_at=easier_at).run()
    if as_json:
        output.print_json(report.model_dump())
    else:
        output.say(report.summary())
        output.say(f"report: {out / REPORT_JSON} and {out / REPORT_TEXT}; next: cowork rollout {out} --out RUNS2")
    return exits.GATE_FAILED if report.counts["rejected"] else exits.OK


async def bench(corpus_dir: Path, *, concurrency: int, rounds: int, limit: int | None, as_json: bool) -> int:
    """``cowork synth bench``: :func:`cowork.synth.prove.bench` over the specs of a folder."""
    from ..errors import CoworkError
    from ..synth.prove import bench as run
    from .commands import _spec_targets

    if concurrency < 1 or rounds < 1:
        raise CoworkError("--concurrency and --rounds must be at least 1")
    folders = [Path(t) for t in _spec_targets([str(corpus_dir)])][:limit]
    if not folders:
        raise CoworkError(f"no spec under {corpus_dir}")
    result = await run(folders, concurrency=concurrency, rounds=rounds)
    if as_json:
        output.print_json(result)
        return exits.OK
    for key, rate in result["specs_per_second"].items():
        output.say(f"{key:22} {rate:6.3f} specs/s (rounds: {', '.join(map(str, result['each_round'][key]))}; "
                   f"accepted {result['accepted'][key]} of {result['specs']})")
    output.say(f"speed-up {result['speedup']}x, {result['specs']} specs, concurrency {concurrency}, gates included")
    return exits.OK
