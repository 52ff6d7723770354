"""A corpus of specs as a Hugging Face ``datasets`` folder, and the way back to spec folders.

:func:`build` turns a corpus folder (``cowork synth corpus --out``) into a ``DatasetDict``
saved with ``save_to_disk`` (train / validation / test), the same splits as parquet files
under ``data/`` (the Hub's layout, so ``load_dataset("parquet", data_dir=...)`` or a Hub
upload reads them too), ``rejects.jsonl`` (every spec left out, with the reason) and a
dataset card ``README.md``.

Splits are drawn by world: a spec tagged ``world:<seed>`` goes to the split that sha256 of
``world:<seed>`` picks (80 / 10 / 10), so every task over one world lands in one split and a
model evaluated on ``test`` never saw that world's people, files and records in training.
A spec without a world tag (hand-written, template families) splits by its id the same way.

Each row is self-contained: the task.yaml text and every file beside it as ``{path, bytes}``,
with the facts :mod:`cowork.synth.stats` reads (family, capabilities, services, oracle calls,
traps, turns) as columns to filter on.

:func:`resolve_tasks` is the one resolver the task lists call (``cowork run``, ``cowork
rollout``, ``cowork validate``, :class:`cowork.rollouts.runner.RolloutRunner`,
:class:`cowork.integrations.trl.CoworkTRL`): a dataset folder (all splits), ``DIR:SPLIT`` or a
split's folder ``DIR/SPLIT`` becomes spec folders, written once into the cache
(``$COWORK_CACHE/datasets/<key>/<id>/``, keyed by the split's fingerprint and files) by
:func:`materialise`; any other item passes through unchanged.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from ..errors import CoworkError, SpecError
from .stats import PARALLEL_FROM, SpecFacts, Stats, facts, find_specs, read_spec, summarise

#: The splits, in order, and each one's share of the hash space (percent).
SPLITS: tuple[str, ...] = ("train", "validation", "test")
SHARES: tuple[int, ...] = (80, 10, 10)
#: Files a dataset folder holds beside the ``save_to_disk`` splits.
REJECTS, CARD, PARQUET_DIR = "rejects.jsonl", "README.md", "data"
#: What ``save_to_disk`` writes at the top of a DatasetDict folder; it marks a dataset.
DICT_FILE = "dataset_dict.json"
#: Rows per parquet write (a generated spec is ~200 KB of YAML with its world's records).
_BATCH = 64

T = TypeVar("T")


def _datasets() -> Any:
    """The ``datasets`` module, or how to install it.

    Raises:
        CoworkError: ``datasets`` is not installed.
    """
    try:
        import datasets
    except ImportError as exc:
        raise CoworkError(f"spec datasets need the `datasets` package ({exc}); install it with "
                          "pip install 'cowork[hf]'") from exc
    return datasets


def features() -> Any:
    """The rows' schema (``datasets.Features``)."""
    ds = _datasets()
    text, strings, count = ds.Value("string"), ds.List(ds.Value("string")), ds.Value("int32")
    return ds.Features({
        "id": text, "spec": text, "files": ds.List({"path": text, "bytes": ds.Value("binary")}),
        "capability": text, "capabilities": strings, "services": strings, "family": text,
        "world_seed": ds.Value("int64"), "difficulty": text, "oracle_calls": count, "n_services": count,
        "n_traps": count, "checks": count, "turns": count, "days": count, "multi": ds.Value("bool"),
        "office": ds.Value("bool"), "traps": strings, "tags": strings,
    })


#: What each column holds (the dataset card lists them).
COLUMNS = {
    "id": "the spec's id (its folder name)",
    "spec": "the task.yaml text, byte for byte",
    "files": "every other file of the spec folder: {path (relative, /-separated), bytes}",
    "capability / capabilities": "the first declared capability / all of them",
    "services": "services the spec seeds or its oracle calls",
    "family": "the generator or family (`family:` tag); null when hand-written",
    "world_seed": "the seed of the world the task is drawn from (`world:` tag); null without one",
    "difficulty": "the declared difficulty (easy, medium, hard)",
    "oracle_calls / n_services / n_traps / checks": "measured difficulty: oracle tool calls, services, traps, checks",
    "turns / days / multi": "user requests (first + later turns), days (first + later), whether either is > 1 "
                            "or the spec has events or a simulated user",
    "office": "whether it reads or writes an .xlsx, .docx or .pdf",
    "traps / tags": "`trap:` kinds and all tags",
}


def split_of(world_seed: str | int | None, task_id: str) -> str:
    """The split of a spec: by sha256 of ``world:<seed>``, or of ``id:<id>`` without a world."""
    key = f"world:{world_seed}" if world_seed is not None else f"id:{task_id}"
    bucket = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 100
    edge = 0
    for name, share in zip(SPLITS, SHARES):
        edge += share
        if bucket < edge:
            return name
    return SPLITS[-1]


# --------------------------------------------------------------------------- rows
@dataclass(frozen=True)
class Reject:
    """A spec left out of the dataset, and why."""

    id: str
    stage: str
    """generation (the generator raised), read (the task.yaml does not read) or validation."""
    reason: str
    path: str | None = None


def _world(tags: list[str]) -> str | None:
    return next((t.split(":", 1)[1] for t in tags if t.startswith("world:")), None)


def _files(folder: Path) -> list[dict[str, Any]]:
    out = []
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            path = Path(root) / name
            rel = path.relative_to(folder).as_posix()
            if rel != "task.yaml":
                out.append({"path": rel, "bytes": path.read_bytes()})
    return out


def row(task_yaml: Path) -> tuple[dict[str, Any], SpecFacts]:
    """The dataset row of the spec at ``task_yaml``, with its facts (for the card's figures).

    Raises:
        CoworkError: The task.yaml does not read, or a file beside it cannot be read.
    """
    spec = read_spec(task_yaml)
    folder = task_yaml.parent
    f = facts(spec, folder)
    tags = [str(t) for t in spec.get("tags") or []]
    world = _world(tags)
    user = spec.get("user")
    later_turns = user.get("turns") or [] if isinstance(user, dict) else []
    try:
        files = _files(folder)
    except OSError as exc:
        raise CoworkError(f"{folder}: cannot read a file beside task.yaml: {exc}") from exc
    return {
        "id": str(spec.get("id") or folder.name), "spec": task_yaml.read_bytes().decode("utf-8"), "files": files,
        "capability": f.capabilities[0] if f.capabilities else None, "capabilities": list(f.capabilities),
        "services": sorted(f.services), "family": f.family,
        "world_seed": int(world) if world is not None and world.lstrip("-").isdigit() else None,
        "difficulty": spec.get("difficulty"), "oracle_calls": len(f.oracle_tools), "n_services": len(f.services),
        "n_traps": len(f.traps), "checks": len(spec.get("checks") or []),
        "turns": 1 + len(later_turns), "days": 1 + len(spec.get("days") or []), "multi": f.multi,
        "office": f.office, "traps": list(f.traps), "tags": tags,
    }, f


def _row_or_reject(task_yaml: Path) -> tuple[dict[str, Any], SpecFacts] | Reject:
    try:
        return row(task_yaml)
    except CoworkError as exc:
        return Reject(task_yaml.parent.name, "read", str(exc), str(task_yaml.parent))


# --------------------------------------------------------------------------- validation verdicts
def _reason(report: dict[str, Any]) -> str:
    """A failed validation report in one line: each failed step and the first line of its detail."""
    failed = [f for f in report.get("findings") or [] if not f.get("ok")]
    parts = [f"{f.get('step')}: {(str(f.get('detail') or '').splitlines() or [''])[0][:300]}" for f in failed]
    return "; ".join(parts) or "validation failed"


def verdicts(reports: Iterable[Any]) -> dict[str, str | None]:
    """Spec id -> None when it validated, else why not; from ``ValidationReport`` objects or
    their JSON (``cowork validate --json``). A report without a task id is keyed by its folder."""
    out: dict[str, str | None] = {}
    for rep in reports:
        data = rep.model_dump() if hasattr(rep, "model_dump") else dict(rep)
        key = data.get("task") or Path(str(data.get("spec", "?"))).parent.name
        out[key] = None if data.get("ok") else _reason(data)
    return out


def read_verdicts(path: Path) -> dict[str, str | None]:
    """The verdicts of a ``cowork validate --json`` file (a list of reports, or one report).

    Raises:
        CoworkError: The file does not read as such JSON.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CoworkError(f"{path}: not a validation report ({exc}); write one with cowork validate DIR "
                          "--json > FILE") from exc
    reports = data if isinstance(data, list) else [data]
    if not all(isinstance(r, dict) and "ok" in r for r in reports):
        raise CoworkError(f"{path}: not a validation report (a list of objects with `ok`); write one with "
                          "cowork validate DIR --json > FILE")
    return verdicts(reports)


def _recorded_rejects(corpus: Path) -> list[Reject]:
    """What the corpus command recorded: generation failures and specs moved to ``_invalid``."""
    out = []
    failures = corpus / "generation-failures.json"
    if failures.is_file():
        for key, why in json.loads(failures.read_text(encoding="utf-8")).items():
            out.append(Reject(key, "generation", str(why)))
    invalid = corpus / "_invalid"
    for folder in sorted(invalid.iterdir()) if invalid.is_dir() else []:
        report = folder / "validation.json"
        reason = _reason(json.loads(report.read_text(encoding="utf-8"))) if report.is_file() \
            else "moved to _invalid without a report"
        out.append(Reject(folder.name, "validation", reason, str(folder)))
    return out


# --------------------------------------------------------------------------- build
@dataclass
class DatasetReport:
    """What :func:`build` wrote."""

    out: Path
    splits: dict[str, int]
    rejects: list[Reject]
    stats: Stats
    validated: bool
    worlds: dict[str, int] = field(default_factory=dict)
    """Distinct world seeds per split."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-able."""
        return {"out": str(self.out), "splits": self.splits, "worlds": self.worlds, "validated": self.validated,
                "rejects": [asdict(r) for r in self.rejects], "stats": self.stats.as_dict()}

    def summary(self) -> str:
        """One line: rows per split and rejects."""
        return (f"wrote dataset {self.out}: " + ", ".join(f"{k} {v}" for k, v in self.splits.items())
                + f" row(s); {len(self.rejects)} spec(s) left out (reasons in {self.out / REJECTS})")


def _rows(found: list[Path]) -> Iterator[tuple[dict[str, Any], SpecFacts] | Reject]:
    workers = min(os.cpu_count() or 1, 8)
    if len(found) >= PARALLEL_FROM and workers > 1:
        # YAML parsing is the cost, as in stats.collect: one process per core.
        with concurrent.futures.ProcessPoolExecutor(workers) as pool:
            yield from pool.map(_row_or_reject, found, chunksize=8)
    else:
        yield from map(_row_or_reject, found)


def _prepare(out: Path) -> None:
    """Make ``out`` an empty folder; an earlier dataset there is replaced.

    Raises:
        CoworkError: ``out`` holds something other than a dataset.
    """
    if out.exists():
        if not out.is_dir() or (any(out.iterdir()) and not (out / DICT_FILE).is_file()):
            raise CoworkError(f"{out}: exists and is not a dataset folder; give an empty or new folder for --dataset")
        shutil.rmtree(out)
    out.mkdir(parents=True)


def build(corpus: Path, out: Path, *, validation: dict[str, str | None] | None = None,
          source: str | None = None) -> DatasetReport:
    """Write the dataset of the specs under ``corpus`` to ``out`` (see the module docstring).

    Args:
        corpus: A folder of spec folders (``_invalid`` and other ``_``/``.`` folders skipped).
        out: The dataset folder (created; an earlier dataset there is replaced).
        validation: Spec id -> None (validated) or the reason it failed (:func:`verdicts`).
            When given, only validated specs become rows; the rest go to ``rejects.jsonl``.
            When None, ``corpus/validation.json`` is read if the corpus command wrote one.
        source: The command that made the corpus, quoted in the card.

    Raises:
        CoworkError: ``corpus`` holds no spec, ``out`` holds something else, or ``datasets``
            is missing.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    ds = _datasets()
    found = find_specs([corpus])
    if not found:
        raise CoworkError(f"{corpus}: no task.yaml under it; give a corpus folder (cowork synth corpus --out)")
    if validation is None and (corpus / "validation.json").is_file():
        validation = read_verdicts(corpus / "validation.json")
    _prepare(out)
    feats = features()
    schema = feats.arrow_schema
    (out / PARQUET_DIR).mkdir()
    parquet = {s: out / PARQUET_DIR / f"{s}-00000-of-00001.parquet" for s in SPLITS}
    writers = {s: pq.ParquetWriter(parquet[s], schema) for s in SPLITS}
    batches: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    counts = dict.fromkeys(SPLITS, 0)
    worlds: dict[str, set[int]] = {s: set() for s in SPLITS}
    rejects = _recorded_rejects(corpus)
    kept: list[SpecFacts] = []
    try:
        for got in _rows(found):
            if isinstance(got, Reject):
                rejects.append(got)
                continue
            r, f = got
            if validation is not None and validation.get(r["id"], "") is not None:
                why = validation.get(r["id"]) or "not validated: no report in the validation run names it"
                rejects.append(Reject(r["id"], "validation", why, f.path))
                continue
            split = split_of(_world(r["tags"]), r["id"])
            batches[split].append(r)
            counts[split] += 1
            if r["world_seed"] is not None:
                worlds[split].add(r["world_seed"])
            kept.append(f)
            if len(batches[split]) >= _BATCH:
                writers[split].write_table(pa.Table.from_pylist(batches[split], schema=schema))
                batches[split] = []
        for s in SPLITS:
            if batches[s]:
                writers[s].write_table(pa.Table.from_pylist(batches[s], schema=schema))
    finally:
        for w in writers.values():
            w.close()
    rejects = list({(r.id, r.stage): r for r in rejects}.values())  # a moved spec may also be in the report
    bars = ds.is_progress_bar_enabled()
    ds.disable_progress_bars()  # the command prints its own summary
    with tempfile.TemporaryDirectory(prefix="cowork-dataset-") as cache:
        splits = ds.DatasetDict({s: ds.Dataset.from_parquet(str(parquet[s]), features=feats, cache_dir=cache)
                                 if counts[s] else ds.Dataset.from_dict({k: [] for k in feats}, features=feats)
                                 for s in SPLITS})
        # datasets saves an empty split without a shard and then cannot load it: give it one.
        splits.save_to_disk(str(out), num_shards={s: 1 for s in SPLITS if not counts[s]})
    if bars:
        ds.enable_progress_bars()
    with (out / REJECTS).open("w", encoding="utf-8") as fh:
        for rej in rejects:
            fh.write(json.dumps(asdict(rej), sort_keys=True) + "\n")
    report = DatasetReport(out, counts, rejects, summarise(kept), validation is not None,
                           {s: len(w) for s, w in worlds.items()})
    (out / CARD).write_text(card(report, source), encoding="utf-8")
    return report


def card(report: DatasetReport, source: str | None = None) -> str:
    """The dataset card: Hub front matter (the parquet splits), the split sizes and rule, the
    columns, the corpus figures of ``cowork synth stats`` and what was left out."""
    configs = "\n".join(f"  - split: {s}\n    path: {PARQUET_DIR}/{s}-*.parquet" for s in SPLITS)
    stages: dict[str, int] = {}
    for r in report.rejects:
        stages[r.stage] = stages.get(r.stage, 0) + 1
    lines = [
        "---", "configs:", "- config_name: default", "  data_files:", configs, "tags:", "- agents", "- tool-use",
        "- synthetic", "---", "", "# Cowork task specs", "",
        "Task specs for the cowork runtime: each row is one task (its `task.yaml` and the files beside it), "
        "runnable with `cowork run DIR:SPLIT` once written back (see docs/synthesis.md).", "",
    ]
    if source:
        lines += [f"Generated by `{source}`.", ""]
    lines += [
        "## Splits", "",
        f"Drawn by world seed: sha256 of `world:<seed>` into {' / '.join(map(str, SHARES))} "
        f"({', '.join(SPLITS)}), so no world appears in two splits; specs without a world tag split by id.", "",
        "| split | rows | worlds |", "|---|---:|---:|",
        *(f"| {s} | {report.splits[s]} | {report.worlds.get(s, 0)} |" for s in SPLITS), "",
        "Only specs that `cowork validate` proved are included." if report.validated
        else "The specs were not validated when the dataset was written.",
        f"Left out: {len(report.rejects)} spec(s)"
        + (" (" + ", ".join(f"{k} {v}" for k, v in sorted(stages.items())) + ")" if stages else "")
        + f", each with its reason in `{REJECTS}`.", "",
        "## Columns", "", *(f"- `{k}`: {v}" for k, v in COLUMNS.items()), "",
        "## Corpus figures (`cowork synth stats`)", "",
        f"{report.stats.specs} spec(s); services: {', '.join(report.stats.services) or 'none'}", "", "```",
        *report.stats.table(), "```", "",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- back to spec folders
def dataset_ref(item: str | os.PathLike[str]) -> tuple[Path, str | None] | None:
    """``(dataset folder, split or None for all)`` when ``item`` names a dataset: its folder,
    ``DIR:SPLIT``, or a split's folder ``DIR/SPLIT``; None for anything else."""
    p = Path(item)
    if (p / DICT_FILE).is_file():
        return p, None
    if (p / "state.json").is_file() and (p.parent / DICT_FILE).is_file():
        return p.parent, p.name
    text = os.fspath(item)
    if ":" in text and not p.exists():
        root, split = text.rsplit(":", 1)
        if (Path(root) / DICT_FILE).is_file():
            return Path(root), split
    return None


def _cache_root() -> Path:
    from ..settings import get

    return get().cache / "datasets"


def _safe(rel: str, what: str) -> PurePosixPath:
    p = PurePosixPath(rel)
    if not rel or p.is_absolute() or ".." in p.parts or "\\" in rel:
        raise SpecError(f"dataset row {what}: path {rel!r} is not a relative path inside the spec folder")
    return p


def materialise(path: str | os.PathLike[str], split: str | None = None, *, cache: Path | None = None) -> list[Path]:
    """The spec folders of a dataset's rows (all splits, or ``split``), written once into the
    cache and reused while the split's files are unchanged.

    Args:
        path: A dataset folder, ``DIR:SPLIT``, or a split's folder.
        split: The split to take (when ``path`` names none).
        cache: Where to write them (default ``$COWORK_CACHE/datasets``).

    Returns:
        One folder per row (``<cache>/<key>/<id>/``), in row order, splits in their order.

    Raises:
        SpecError: ``path`` is not a dataset, the split does not exist, or a row's file path
            leaves its folder.
        CoworkError: ``datasets`` is not installed.
    """
    ref = dataset_ref(path)
    if ref is None:
        raise SpecError(f"{path}: not a spec dataset (no {DICT_FILE}); write one with cowork synth dataset")
    root, named = ref
    if split and named and split != named:
        raise SpecError(f"{path}: names split {named!r} but split {split!r} was asked for; give one")
    have = json.loads((root / DICT_FILE).read_text(encoding="utf-8")).get("splits", [])
    wanted = [split or named] if (split or named) else list(have)
    for s in wanted:
        if s not in have:
            raise SpecError(f"{root}: no split {s!r}; it has {', '.join(have)} (give DIR:SPLIT)")
    return [folder for s in wanted for folder in _materialise_split(root / str(s), cache or _cache_root())]


def _materialise_split(split_dir: Path, cache: Path) -> list[Path]:
    state = json.loads((split_dir / "state.json").read_text(encoding="utf-8"))
    stamp = [state.get("_fingerprint")]
    for f in state.get("_data_files", []):
        st = (split_dir / f["filename"]).stat()
        stamp.append(f"{f['filename']}:{st.st_size}:{st.st_mtime_ns}")
    key = hashlib.sha256(json.dumps([str(split_dir.resolve()), *stamp]).encode()).hexdigest()[:16]
    dest = cache / f"{split_dir.name}-{key}"
    done = dest / ".rows"
    if not done.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=cache, prefix=".writing-"))
        try:
            ids = _write_rows(_datasets().load_from_disk(str(split_dir)), tmp)
            (tmp / ".rows").write_text("\n".join(ids), encoding="utf-8")
            try:
                os.replace(tmp, dest)
            except OSError:  # another process wrote it first: theirs is the same
                if not done.is_file():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    ids = [i for i in done.read_text(encoding="utf-8").splitlines() if i]
    return [dest / i for i in ids]


def _write_rows(rows: Iterable[dict[str, Any]], into: Path) -> list[str]:
    ids = []
    for r in rows:
        rid = str(r["id"])
        _safe(rid, rid)
        if "/" in rid:
            raise SpecError(f"dataset row id {rid!r} is not a folder name")
        folder = into / rid
        folder.mkdir()
        (folder / "task.yaml").write_bytes(r["spec"].encode("utf-8"))
        for f in r["files"] or []:
            target = folder / _safe(f["path"], rid)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(f["bytes"])
        ids.append(rid)
    return ids


def resolve_tasks(items: Iterable[T]) -> list[T | Path]:
    """``items`` with each dataset reference (:func:`dataset_ref`) replaced by its spec
    folders (:func:`materialise`); everything else (paths, loaded specs) unchanged.

    Raises:
        SpecError: A dataset reference names a split it does not have.
        CoworkError: ``datasets`` is not installed.
    """
    out: list[T | Path] = []
    for item in items:
        ref = dataset_ref(item) if isinstance(item, (str, os.PathLike)) else None
        out.extend(materialise(item) if ref is not None else [item])  # type: ignore[arg-type]
    return out
