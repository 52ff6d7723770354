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
                 fix_difficulty: bool = False, resume: bool = False) -> int:
    """Write ``per_family`` specs of every registered family (seeds ``seed`` ..), or ``n`` in
    all spread evenly over them (the first ``n % families`` get one more); ``only`` picks
    ``generators`` (the world generators), ``templates`` (the template families) or ``all``. With
    ``validate`` prove each in sandboxes, ``concurrency`` at once; an invalid spec is moved
    to ``out/_invalid/`` with its report, so ``out`` holds only specs that validated, and every
    report goes to ``out/validation.json``. Each finished proof is kept at once in
    ``out/validation.journal.jsonl`` (:class:`CorpusJournal`): an interrupted run is finished by
    the same command with ``resume``, which rewrites no spec and proves no journaled spec again.
    With ``dataset_out`` also write the Hugging Face dataset of the corpus there
    (:func:`cowork.synth.dataset.build`: only validated specs when ``validate``). Prints
    valid/invalid per family and per capability and validated specs per second.

    Raises:
        CoworkError: A bad option; ``out`` holds a journal and ``resume`` is not given; ``resume``
            with other options than the journal's, or a spec on disk that differs from what
            the options generate.
        KeyboardInterrupt: Ctrl-C: the journaled proofs stay, and the note says how to resume.
    """
    import time

    from ..errors import CoworkError

    # From the module: after the first call the package attribute `families` is the
    # subpackage of built-in families (its import shadows the function).
    from ..synth.family import families
    from . import interrupted

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
    options = _corpus_options(per_family, seed, n, only, gates, fix_difficulty)
    again = _corpus_source(out, per_family, seed, True, n, only) + _corpus_flags(gates, fix_difficulty, concurrency,
                                                                                 dataset_out) + " --resume"
    journal = None
    if validate:
        journal = CorpusJournal.open(out, options, resume=resume, command=again)
    elif resume:
        raise CoworkError("--resume finishes an interrupted `synth corpus --validate`: add --validate (and the "
                          "options of the first run)")
    elif (out / JOURNAL).exists():
        raise CoworkError(f"{out / JOURNAL} exists: {out} holds a validated corpus; finish it with --validate "
                          "--resume and its options, or choose another --out")
    total = sum(counts.values())
    written: list[tuple[str, Path]] = []
    if journal is not None:
        interrupted.expect(lambda: _corpus_note(journal, out, len(written), total, again))
    t_gen = time.monotonic()
    failed, kept = _generate_corpus(out, counts, seed, written, resume=resume,
                                    journaled=journal.proofs if journal is not None else {})
    gen_s = time.monotonic() - t_gen
    result: dict[str, Any] = {"out": str(out), "families": len(fams), "written": len(written),
                              "generate_seconds": round(gen_s, 2),
                              "generated_per_second": round(len(written) / gen_s, 1) if gen_s else None,
                              "generation_failed": failed}
    if resume:
        result["already_on_disk"] = kept
    if failed:
        import json

        out.mkdir(parents=True, exist_ok=True)
        (out / "generation-failures.json").write_text(json.dumps(failed, indent=1, sort_keys=True))
    if journal is not None:  # --validate
        try:
            result |= await _prove_corpus(out, written, concurrency=concurrency, gates=gates,
                                          fix_difficulty=fix_difficulty, journal=journal)
        except Exception:  # the machine failed: say what is kept, then the error
            output.say(f"cowork: {_corpus_note(journal, out, len(written), total, again, 'stopped by an error')}",
                       err=True)
            raise
    else:  # an earlier --validate run's record does not speak for these specs
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
    _say_corpus(result, out, len(fams), gen_s, validate, gates)
    if validate:
        return exits.OK if not result["invalid"] and not failed else exits.GATE_FAILED
    output.say(f"check them: cowork validate {out} --concurrency 2 && cowork synth check {out}")
    return exits.OK if not failed else exits.GATE_FAILED


def _say_corpus(result: dict[str, Any], out: Path, families: int, gen_s: float, validate: bool, gates: bool) -> None:
    """The text report of ``synth corpus`` (``result`` as ``--json`` prints it)."""
    failed = result["generation_failed"]
    output.say(f"wrote {result['written']} spec(s) from {families} famil{'y' if families == 1 else 'ies'} under "
               f"{out} in {gen_s:.1f} s ({result['generated_per_second']} specs/s)"
               + (f"; {result['already_on_disk']} were on disk already, unchanged" if "already_on_disk" in result
                  else ""))
    if failed:
        output.say(f"{len(failed)} spec(s) could not be generated (reasons in {out / 'generation-failures.json'}):")
        for key, why in list(failed.items())[:10]:
            output.say(f"  {key}: {why}")
    if not validate:
        return
    for title, table in (("family", result["per_family"]), ("capability", result["per_capability"])):
        output.say(f"{title:32} valid invalid")
        for k, v in table.items():
            output.say(f"{k:32} {v.get('valid', 0):5} {v.get('invalid', 0):7}")
    for reason, count in result["rejects_by_reason"].items():
        output.say(f"rejected {count:5} {reason}")
    segments = result["segments"]
    if len(segments) > 1 or result["proved_before"]:
        output.say(f"proved in {len(segments)} run(s) ({result['proved_before']} read back from the journal): "
                   + "; ".join(f"{s['proved']} in {s['seconds']} s from {s['started']}, {s['ended']}"
                               for s in segments))
    output.say(f"{result['valid']} valid, {result['invalid']} rejected (moved to {out / '_invalid'}); "
               f"{result['valid_per_second']} validated specs per second "
               f"({'gates included' if gates else 'no gates'}), {result['minutes']} min")


def _generate_corpus(out: Path, counts: dict[str, int], seed: int, written: list[tuple[str, Path]], *,
                     resume: bool, journaled: dict[str, dict[str, Any]]) -> tuple[dict[str, str], int]:
    """Write every family's specs under ``out``, appending ``(family, folder)`` to ``written``
    as each is placed (the interrupt note counts them). Each spec is written to a staging
    folder first and renamed into place, so a spec folder is whole or absent. With ``resume``
    a spec already on disk (in ``out`` or ``out/_invalid``) is compared with the draft and
    kept, not rewritten. Returns the specs that could not be generated (with why) and how
    many were on disk already.

    Raises:
        CoworkError: With ``resume``, a spec on disk differs from its draft.
    """
    import shutil

    failed: dict[str, str] = {}
    kept = 0
    stage = out / _STAGING
    jobs = [(name, s, str(stage)) for name in sorted(counts) for s in range(seed, seed + counts[name])]
    drafts = _drafts(jobs)
    try:
        for name, s, staged_at, error in drafts:
            if staged_at is None:
                failed[f"{name}-{s}"] = error or "no draft"
                continue
            staged = Path(staged_at)
            target = out / staged.name
            found = next((p for p in (target, out / "_invalid" / staged.name) if (p / SPEC).is_file()),
                         None) if resume else None
            if found is not None:
                _same_spec(staged, found, journaled.get(staged.name), out)
                shutil.rmtree(staged)
                written.append((name, found))
                kept += 1
                continue
            if target.exists():
                shutil.rmtree(target)
            staged.rename(target)
            written.append((name, target))
    finally:
        drafts.close()  # the workers stop before their staging folder goes
        if stage.exists():
            shutil.rmtree(stage)
    return failed, kept


def _draft_job(job: tuple[str, int, str]) -> tuple[str, int, str | None, str | None]:
    """Generate spec ``seed`` of family ``name`` and write it under the staging folder:
    ``(name, seed, its staged folder, None)``, or ``(name, seed, None, why)`` when the
    generator raised (a generator's bug costs its spec, not the corpus)."""
    from ..synth.family import generate, write_draft

    name, seed, stage = job
    try:
        draft = generate(name, seed)
    except Exception as exc:  # noqa: BLE001 - said per spec in generation-failures.json
        return name, seed, None, f"{type(exc).__name__}: {exc}"
    return name, seed, str(write_draft(draft, Path(stage))), None


#: From this many specs on, drafts are generated in worker processes (one per core, at most
#: 8), in order: 10,000 world-generator specs took about 10 minutes on one core.
DRAFTS_PARALLEL_FROM = 64


def _drafts(jobs: list[tuple[str, int, str]]) -> Any:
    """:func:`_draft_job` of every job, in the jobs' order (workers run ahead of the caller)."""
    import concurrent.futures
    import os

    workers = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8)
    if len(jobs) < DRAFTS_PARALLEL_FROM or workers < 2:
        yield from map(_draft_job, jobs)
        return
    pool = concurrent.futures.ProcessPoolExecutor(workers)
    try:
        yield from pool.map(_draft_job, jobs, chunksize=8)
    finally:  # closed early (a spec on disk refused, Ctrl-C): drafts not started are dropped
        pool.shutdown(wait=True, cancel_futures=True)


def _same_spec(staged: Path, found: Path, journaled: dict[str, Any] | None, out: Path) -> None:
    """Check that the spec on disk at ``found`` is the draft staged at ``staged``: every file of
    the draft the same bytes, except a task.yaml that proving relabelled (``--fix-difficulty``),
    which must be the text the journal recorded after proving this very draft.

    Raises:
        CoworkError: A file differs or is missing (other options, or other generators).
    """
    from ..errors import CoworkError

    draft_sha = _sha(staged / SPEC)
    if journaled is not None and journaled.get("draft_sha") != draft_sha:
        raise CoworkError(f"{found / SPEC}: the journal's proof of {found.name} was of another text than these "
                          f"options generate: {out} was made with other options or another version of the "
                          "generators; rerun with the options it was made with, or choose another --out")
    for path in sorted(p for p in staged.rglob("*") if p.is_file()):
        rel = path.relative_to(staged)
        on_disk = found / rel
        if on_disk.is_file() and on_disk.read_bytes() == path.read_bytes():
            continue
        if (rel.as_posix() == SPEC and journaled is not None and on_disk.is_file()
                and journaled.get("disk_sha") == _sha(on_disk)):
            continue  # relabelled by its proof, as the journal recorded
        what = "is missing" if not on_disk.is_file() else "differs from what these options generate"
        raise CoworkError(f"{on_disk} {what}: {out} was made with other options (or another version of the "
                          "generators); rerun with the options it was made with, or choose another --out")


def _sha(path: Path) -> str | None:
    """The sha256 of a file's bytes; None when it is not there."""
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _corpus_note(journal: CorpusJournal, out: Path, written: int, total: int, again: str,
                 head: str = "interrupted") -> str:
    """What an interrupted or failed ``synth corpus --validate`` keeps, and the command that
    finishes it."""
    proved = len(journal.proofs)
    return (f"{head}: {proved} of {total} spec(s) proved and kept in {journal.path}"
            f"{f' ({written} of {total} written)' if written < total else ''}; finish with: {again} "
            "(journaled specs are read back, not proved again)")


async def _prove_corpus(out: Path, written: list[tuple[str, Path]], *, concurrency: int, gates: bool,
                        fix_difficulty: bool, journal: CorpusJournal | None = None) -> dict[str, Any]:
    """Prove every written spec (``synth.prove``) the journal does not hold yet, keeping each
    proof in it as it finishes; then, over all of them, reject the invalid and the refused
    (moved to ``out/_invalid`` with their report; a spec already there stays), and write
    ``out/validation.json`` (every report, gate findings included) and ``out/corpus-report.json``;
    the figures for the corpus result, timed over every run's proving (the journal's segments).
    Without ``journal`` a new one is started in ``out``.

    Raises:
        CoworkError: ``journal`` is None and ``out`` holds one already.
        KeyboardInterrupt, asyncio.CancelledError: The proofs finished are journaled, the
            others not; the segment is closed as interrupted.
    """
    import asyncio
    import time

    from ..rollouts.progress import ProgressReport
    from ..synth.prove import Proof, can_bundle, prove

    if journal is None:
        journal = CorpusJournal.open(out, {}, resume=False, command="")
    done: dict[str, tuple[str, Path, Proof]] = {}
    todo: list[tuple[str, Path]] = []
    for name, folder in written:
        record = journal.proofs.get(folder.name)
        if record is not None:
            done[folder.name] = (name, folder, journal.proof(folder.name))
        else:
            todo.append((name, folder))
    before = len(done)
    limit = asyncio.Semaphore(concurrency)
    progress = ProgressReport("validate", "specs", len(written), done=before)

    async def one(name: str, folder: Path) -> None:
        async with limit:
            draft_sha = _sha(folder / SPEC)
            proof = await prove(folder, gates=gates, fix_difficulty=fix_difficulty)
        journal.record(name, folder, proof, draft_sha=draft_sha, disk_sha=_sha(folder / SPEC))
        done[folder.name] = (name, folder, proof)
        progress.advance(f"{proof.task or folder.name} {'VALID' if proof.ok else 'REJECTED'}")

    if todo:
        journal.begin()
        tasks = [asyncio.ensure_future(one(n, f)) for n, f in todo]
        try:
            with progress:
                await asyncio.gather(*tasks)
        except BaseException as exc:
            # In-flight proofs are dropped, not journaled; the segment's time is kept.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            journal.end(interrupted=True)
            current = asyncio.current_task()
            if isinstance(exc, KeyboardInterrupt) and current is not None and current.cancelling():
                # A proof's KeyboardInterrupt already left the loop, and asyncio.run is
                # cancelling us before it raises it: end cancelled, so the loop closes cleanly.
                raise asyncio.CancelledError() from exc
            raise
        journal.end(interrupted=False)
    t1 = time.monotonic()
    ordered = [done[folder.name] for _, folder in written]
    by_key = _corpus_gates(ordered) if gates else {f.name: list(p.reasons) for _, f, p in ordered}
    corpus_gate_s = time.monotonic() - t1 if gates else 0.0
    figures = _corpus_reports(out, ordered, by_key)
    segments = journal.segments()
    proving_s = sum(s["seconds"] for s in segments)
    seconds = proving_s + corpus_gate_s
    valid, proofs = figures.pop("valid"), sorted(p.seconds for _, _, p in ordered)
    figures = {
        "valid": valid, **figures, "minutes": round(seconds / 60, 2),
        "valid_per_minute": round(valid / seconds * 60, 2) if seconds else None,
        "proved_per_second": round(len(ordered) / seconds, 3) if seconds else None,
        "valid_per_second": round(valid / seconds, 3) if seconds else None,
        "gates": gates, "bundles": can_bundle(), "concurrency": concurrency,
        "sandbox_seconds": round(proving_s, 1), "corpus_gate_seconds": round(corpus_gate_s, 3),
        "proving_seconds": round(proving_s, 3), "segments": segments, "proved_before": before,
        "journal": str(journal.path),
        "proof_seconds_median": round(proofs[len(proofs) // 2], 2) if proofs else None,
        "relabelled": {p.task: p.relabelled for _, _, p in ordered if p.relabelled}}
    import json

    (out / "corpus-report.json").write_text(json.dumps(figures, indent=1, sort_keys=True))
    return figures


def _corpus_gates(done: list[tuple[str, Path, Any]]) -> dict[str, list[str]]:
    """Each spec's reasons (by folder name) with the corpus-wide gates': of a near-duplicate or
    clone pair among the specs proved ok, the later goes.

    The gates read each spec's features (:mod:`cowork.synth.features`: cached by content, and
    worked out in worker processes from ``PARALLEL_FROM`` specs on), not the loaded specs: 10,000 loaded specs held at once
    took about 1.5 MB each in this process, and loading and shingling them one after another
    was the slowest part after proving. A spec proved ok whose features cannot be had now
    (it no longer loads) is rejected with why, never kept unchecked.
    """
    from ..synth import features

    by_key: dict[str, list[str]] = {folder.name: list(proof.reasons) for _, folder, proof in done}
    ok = [folder for _, folder, proof in done if proof.ok]
    kept: list[features.SpecFeatures] = []
    folder_of: dict[str, str] = {}
    for folder, got in zip(ok, features.each(ok)):
        if isinstance(got, features.SpecFeatures):
            kept.append(got)
            folder_of[got.key] = folder.name
        else:
            by_key[folder.name].append(f"gate unreadable: the corpus gates could not read it: {got}")
    pairs = features.near_duplicates(kept)
    for pair in pairs:
        by_key[folder_of[pair.second]].append(f"gate near-duplicate: of {pair.first} (prompt "
                                              f"{pair.prompt_similarity:.2f}, seed {pair.seed_similarity:.2f})")
    seen = {(p.first, p.second) for p in pairs}
    for pair in features.structural_duplicates(kept):
        if (pair.first, pair.second) not in seen:
            by_key[folder_of[pair.second]].append(f"gate clone: of {pair.first} (same oracle, checks and "
                                                  "rules with entities renamed)")
    return by_key


def _corpus_reports(out: Path, done: list[tuple[str, Path, Any]], by_key: dict[str, list[str]]) -> dict[str, Any]:
    """Write each spec's verdict: a rejected spec goes to ``out/_invalid/<name>`` with its
    report (one a resumed run finds there already stays), and ``out/validation.json`` gets
    every report; the counts per family, capability and reason."""
    import json
    import shutil
    from collections import Counter, defaultdict

    from ..validate.validate import Finding, ValidationReport

    per_family_counts: dict[str, Counter] = defaultdict(Counter)
    per_capability: dict[str, Counter] = defaultdict(Counter)
    reasons: Counter[str] = Counter()
    reports, rejected = [], 0
    for name, folder, proof in done:
        why = by_key[folder.name]
        # A copy: a journaled report is read back fresh each run, a new one is the proof's own.
        report = (proof.validation.model_copy(deep=True) if proof.validation is not None
                  else ValidationReport(spec=str(folder), ok=False, findings=[]))  # did not load
        extra = [r for r in why if not r.startswith("invalid ")]
        report.findings += [Finding(step=r.split(":", 1)[0], ok=False, detail=r.split(":", 1)[1].strip())
                            for r in extra]
        if not report.findings and why:  # a schema rejection
            report.findings += [Finding(step="schema", ok=False, detail=r.split(":", 1)[1].strip()) for r in why]
        report.ok = not why
        reports.append(report)
        verdict = "valid" if report.ok else "invalid"
        per_family_counts[name][verdict] += 1
        for cap in proof.capabilities:
            per_capability[cap][verdict] += 1
        reasons.update(set(r.split(":", 1)[0] for r in why))
        invalid = out / "_invalid" / folder.name
        if not report.ok:
            rejected += 1
            if folder != invalid:
                if invalid.exists():
                    shutil.rmtree(invalid)
                invalid.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(folder), invalid)
            (invalid / "validation.json").write_text(json.dumps(report.model_dump(), indent=1))
        elif folder == invalid:  # rejected by an earlier run's reports, valid now: back in the corpus
            (folder / "validation.json").unlink(missing_ok=True)
            shutil.move(str(folder), out / folder.name)
    # The record `cowork synth dataset` reads to keep only validated specs.
    (out / "validation.json").write_text(json.dumps([r.model_dump() for r in reports], indent=1))
    return {"valid": len(done) - rejected, "invalid": rejected, "rejects_by_reason": dict(sorted(reasons.items())),
            "per_family": {k: dict(v) for k, v in sorted(per_family_counts.items())},
            "per_capability": {k: dict(v) for k, v in sorted(per_capability.items())}}


# --------------------------------------------------------------------------- the corpus journal
#: The journal of ``synth corpus --validate`` in its ``--out`` folder.
JOURNAL = "validation.journal.jsonl"
#: Where ``synth corpus`` writes a spec before renaming it into place (removed when done).
_STAGING = ".generating"
SPEC = "task.yaml"


class CorpusJournal:
    """The durable record of ``synth corpus --validate`` in its output folder: one JSON line
    per proved spec, written, flushed and synced as its proof finishes, so an interrupted or
    crashed run keeps every finished proof and ``--resume`` proves only the rest.

    Each line is an object with a ``kind``: ``options`` (the first: the generation and proving
    options the corpus was made with), ``segment`` (a run began proving: its number and
    wall-clock start), ``proof`` (one spec: folder, family, :meth:`Proof.as_record
    <cowork.synth.prove.Proof.as_record>`, the task.yaml's sha256 before and after proving, and
    seconds into its segment), ``end`` (the segment's seconds, specs proved, whether it was
    interrupted). A segment without an end (the process was killed) counts up to its last
    proof. A torn last line (killed mid-write) is ignored, and cut off before appending.
    """

    def __init__(self, path: Path, options: dict[str, Any], lines: list[dict[str, Any]]):
        self.path, self.options = path, options
        self.proofs: dict[str, dict[str, Any]] = {}
        """Each journaled spec's ``proof`` line, by folder name (the last one wins)."""
        self._segments: dict[int, dict[str, Any]] = {}
        self._fh: Any = None
        self._segment, self._t0, self._proved = 0, 0.0, 0
        for line in lines:
            self._take(line)

    @classmethod
    def open(cls, out: Path, options: dict[str, Any], *, resume: bool, command: str) -> CorpusJournal:
        """The journal of ``out``: a new one (its ``options`` line written), or with ``resume``
        the one there, read back.

        Raises:
            CoworkError: A journal is there and ``resume`` is not given; its options differ from
                ``options``; a line before the last does not read. ``command`` is the resume
                command the messages quote.
        """
        import json

        from ..errors import CoworkError

        path = out / JOURNAL
        lines: list[dict[str, Any]] = []
        if path.exists():
            if not resume:
                raise CoworkError(f"{path} exists: {out} holds the proofs of an earlier `synth corpus --validate`; "
                                  "finish it with --resume and the same options" + (f" ({command})" if command else "")
                                  + ", or choose another --out")
            lines = _read_journal(path)
        if not lines:  # new, or nothing whole was written
            out.mkdir(parents=True, exist_ok=True)
            with path.open("w", encoding="utf-8") as fh:
                fh.write(json.dumps({"kind": "options", "version": 1, "options": options}) + "\n")
                fh.flush()
            return cls(path, options, [])
        head = lines[0]
        if head.get("kind") != "options":
            raise CoworkError(f"{path}:1: not a corpus journal (its first line is not the options line); "
                              "choose another --out")
        if head.get("options") != options:
            was, now = head.get("options") or {}, options
            diff = ", ".join(f"{k} {was.get(k)!r} (now {now.get(k)!r})" for k in sorted(set(was) | set(now))
                             if was.get(k) != now.get(k))
            raise CoworkError(f"{out} was made with other options: {diff}; --resume needs the options of the first "
                              "run, or choose another --out")
        return cls(path, options, lines[1:])

    def proof(self, folder: str) -> Any:
        """The journaled :class:`~cowork.synth.prove.Proof` of the spec in ``folder``."""
        from ..synth.prove import Proof

        return Proof.from_record(self.proofs[folder]["proof"])

    def begin(self) -> None:
        """Start a segment: this run's proving, timed from now."""
        import time
        from datetime import datetime, timezone

        self._segment = max(self._segments, default=0) + 1
        self._t0, self._proved = time.monotonic(), 0
        self._fh = self.path.open("a", encoding="utf-8")
        self._write({"kind": "segment", "segment": self._segment,
                     "started": datetime.now(timezone.utc).isoformat(timespec="seconds")})

    def record(self, family: str, folder: Path, proof: Any, *, draft_sha: str | None, disk_sha: str | None) -> None:
        """Keep one finished proof (``draft_sha``/``disk_sha``: its task.yaml before and after)."""
        self._proved += 1
        self._write({"kind": "proof", "segment": self._segment, "elapsed": self._elapsed(), "folder": folder.name,
                     "family": family, "draft_sha": draft_sha, "disk_sha": disk_sha, "proof": proof.as_record()})

    def end(self, *, interrupted: bool) -> None:
        """Close the segment with its seconds and count."""
        try:
            self._write({"kind": "end", "segment": self._segment, "seconds": self._elapsed(),
                         "proved": self._proved, "interrupted": interrupted})
        finally:
            self._fh.close()
            self._fh = None

    def segments(self) -> list[dict[str, Any]]:
        """Every segment: its start, seconds, specs proved, and how it ended."""
        rows = []
        for number, seg in sorted(self._segments.items()):
            end = seg.get("end")
            ended = ("killed, timed to its last proof (no end line)" if end is None
                     else "interrupted" if end["interrupted"] else "finished")
            rows.append({"segment": number, "started": seg.get("started"), "proved": seg["proved"],
                         "seconds": round(end["seconds"] if end else seg["last"], 2), "ended": ended})
        return rows

    def _elapsed(self) -> float:
        import time

        return round(time.monotonic() - self._t0, 3)

    def _write(self, line: dict[str, Any]) -> None:
        import json
        import os

        self._fh.write(json.dumps(line) + "\n")
        self._fh.flush()
        # Synced: a machine that goes away keeps the line. 0.2 ms here, against ~1-2 s a proof.
        os.fsync(self._fh.fileno())
        self._take(line)

    def _take(self, line: dict[str, Any]) -> None:
        kind = line["kind"]
        if kind == "options":
            return
        seg = self._segments.setdefault(int(line["segment"]), {"proved": 0, "last": 0.0})
        if kind == "segment":
            seg["started"] = line["started"]
        elif kind == "proof":
            self.proofs[line["folder"]] = line
            seg["proved"] += 1
            seg["last"] = max(seg["last"], float(line["elapsed"]))
        elif kind == "end":
            seg["end"] = line
        else:
            raise ValueError(f"unknown kind {kind!r}")


def _read_journal(path: Path) -> list[dict[str, Any]]:
    """The journal's lines; a torn last line (killed mid-write) is left out and cut off the
    file, and a whole last line without its newline gets one, so the next line starts clean.

    Raises:
        CoworkError: A line before the last is not a journal line.
    """
    import json

    from ..errors import CoworkError
    from ..synth.prove import Proof

    data = path.read_bytes()
    raw = data.splitlines(keepends=True)
    lines: list[dict[str, Any]] = []
    whole = 0  # bytes of the lines kept
    for i, text in enumerate(raw, 1):
        try:
            line = json.loads(text)
            if not isinstance(line, dict) or not isinstance(line.get("kind"), str):
                raise ValueError("not an object with a kind")
            if line["kind"] == "proof":
                Proof.from_record(line["proof"])
                if not isinstance(line.get("folder"), str) or "segment" not in line or "elapsed" not in line:
                    raise ValueError("a proof line needs folder, segment and elapsed")
            elif line["kind"] in ("segment", "end") and "segment" not in line:
                raise ValueError(f"a {line['kind']} line needs its segment")
            elif line["kind"] not in ("options", "segment", "end", "proof"):
                raise ValueError(f"unknown kind {line['kind']!r}")
        except (ValueError, KeyError, TypeError) as exc:
            if i == len(raw):  # torn: the process died writing it
                with path.open("r+b") as fh:
                    fh.truncate(whole)
                break
            raise CoworkError(f"{path}:{i}: not a corpus journal line ({exc}); the file is damaged before its last "
                              "line: choose another --out (or remove the line to keep the rest)") from exc
        lines.append(line)
        whole += len(text)
    if data and whole == len(data) and not data.endswith(b"\n"):
        with path.open("ab") as fh:
            fh.write(b"\n")
    return lines


def _corpus_options(per_family: int, seed: int, n: int | None, only: str, gates: bool,
                    fix_difficulty: bool) -> dict[str, Any]:
    """What makes a corpus and its proofs (a resumed run must give the same)."""
    size: dict[str, Any] = {"n": n} if n is not None else {"per_family": per_family}
    return {"only": only, "seed": seed, **size, "gates": gates, "fix_difficulty": fix_difficulty}


def _corpus_flags(gates: bool, fix_difficulty: bool, concurrency: int, dataset_out: Path | None) -> str:
    import shlex

    return ((" --no-gates" if not gates else "") + (" --fix-difficulty" if fix_difficulty else "")
            + (f" --concurrency {concurrency}" if concurrency != 2 else "")
            + (f" --dataset {shlex.quote(str(dataset_out))}" if dataset_out is not None else ""))


def _corpus_source(out: Path, per_family: int, seed: int, validate: bool, n: int | None, only: str) -> str:
    import shlex

    size = f"--n {n}" if n is not None else f"--per-family {per_family}"
    return (f"cowork synth corpus --out {shlex.quote(str(out))} {size} --only {only} --seed {seed}"
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
