"""Each spec's inputs to the static quality gates, worked out once per spec content.

``cowork synth check --static`` judges a batch as a whole (near-duplicates, clones, the order
of levels, diversity), but most of its work is per spec: loading it, shingling its seed, its
skeleton, the hedged reply graded on its answer checks. Over 2,000 generated specs that took
about 70 s on every check. Here that work runs in worker processes, and its result (a few
kilobytes a spec) is kept under ``settings.cache / "gate-features"``, keyed by what the spec
is (its task.yaml and every other file of its folder) and by the package's code, so checking
the same corpus again reads the entries and compares.

The exact seed shingles (tens of kilobytes a spec) are not kept, only their MinHash
signatures: the few pairs whose signatures agree get their exact sets from the two specs,
loaded again, before a pair is reported (:class:`cowork.synth.gates._Item`).
"""

from __future__ import annotations

import base64
import collections
import concurrent.futures
import functools
import hashlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import SpecError
from ..spec import fastyaml
from ..spec.loader import PARALLEL_FROM, LoadedSpec, load_spec, resolve_spec_path
from . import gates

log = logging.getLogger(__name__)

#: Bumped when what an entry holds changes shape (the package's code is in the key anyway).
FEATURES_VERSION = 2
#: The entries of 10,000 specs take about 40 MB.
CACHE_BYTES = 256 << 20
#: A task folder with more files than this (a task.yaml at the top of a big tree) is not
#: cached: hashing the folder would cost more than it saves.
MAX_FILES = 256


@dataclass
class SpecFeatures:
    """What the static gates need of one spec."""

    id: str
    path: str
    """The task.yaml, as :func:`cowork.spec.loader.load_spec` names it (never part of the key)."""
    prompt: np.ndarray
    """3-word shingles of the request (:func:`gates.prompt_text`) as sorted hashes."""
    seed_signature: np.ndarray
    """MinHash signature of the seed's 5-word shingles (:func:`gates.seed_text`)."""
    skeleton: str
    """sha256 of :func:`gates.skeleton`."""
    shape_prompt: np.ndarray
    """3-word shingles of the prompt with entities replaced."""
    shape_signature: np.ndarray | None
    """MinHash signature of the seed's shingles with entities replaced; ``None`` until a spec
    shares its skeleton with another (replacing the entities is the dearest feature, about
    0.1 s a spec, and only specs of one skeleton are compared on it): :func:`with_shapes`
    fills it in and writes it back to the entry."""
    answer: gates.AnswerGate
    difficulty: gates.DifficultySignal
    """The signal without the no-op agent's share (:meth:`gates.DifficultySignal.scored`)."""
    family: str
    capabilities: list[str]
    services: list[str]
    declared: str | None
    entry: Path | None = field(default=None, compare=False, repr=False)
    """The cache entry it was read from or written to (``None``: not cached)."""

    @property
    def key(self) -> str:
        """How the gates name the spec: ``id (path)``."""
        return f"{self.id} ({self.path})"

    def item(self) -> gates._Item:
        """The spec for :func:`gates.near_duplicate_items`; its exact seed read on demand."""
        return gates._Item(self.key, self.prompt, None, self.seed_signature, lambda: exact_seeds(self.path)[0])

    def shape_item(self) -> gates._Item:
        """The spec for :func:`gates.structural_duplicate_items` (the shape signature computed
        here when it was not yet: :func:`with_shapes` does it for many in parallel)."""
        if self.shape_signature is None:
            self.shape_signature = _shape_signature(self.path, self.entry)
        return gates._Item(self.key, self.shape_prompt, None, self.shape_signature, lambda: exact_seeds(self.path)[1])

    def as_json(self) -> dict[str, Any]:
        """The cache entry: everything but the path."""
        return {"v": FEATURES_VERSION, "id": self.id, "prompt": _pack(self.prompt),
                "seed_signature": _pack(self.seed_signature), "skeleton": self.skeleton,
                "shape_prompt": _pack(self.shape_prompt),
                "shape_signature": None if self.shape_signature is None else _pack(self.shape_signature),
                "answer": {k: v for k, v in self.answer.as_dict().items() if k != "refused"},
                "difficulty": {k: v for k, v in self.difficulty.as_dict().items() if k not in ("mismatch", "overclaims")},
                "family": self.family, "capabilities": self.capabilities, "services": self.services,
                "declared": self.declared}

    @classmethod
    def from_json(cls, data: Any, path: str) -> SpecFeatures:
        """An entry read back; ``ValueError``/``KeyError``/``TypeError`` when it is not one."""
        if data.get("v") != FEATURES_VERSION:
            raise ValueError(f"version {data.get('v')!r}")
        seed = _unpack(data["seed_signature"])
        shape = None if data["shape_signature"] is None else _unpack(data["shape_signature"])
        if seed.size != gates.PERMUTATIONS or (shape is not None and shape.size != gates.PERMUTATIONS):
            raise ValueError("signature size")
        return cls(id=str(data["id"]), path=path, prompt=_unpack(data["prompt"]), seed_signature=seed,
                   skeleton=str(data["skeleton"]), shape_prompt=_unpack(data["shape_prompt"]), shape_signature=shape,
                   answer=gates.AnswerGate(**data["answer"]), difficulty=gates.DifficultySignal(**data["difficulty"]),
                   family=str(data["family"]), capabilities=[str(c) for c in data["capabilities"]],
                   services=[str(s) for s in data["services"]], declared=data["declared"])


def _pack(a: np.ndarray) -> str:
    return base64.b64encode(a.astype("<u8").tobytes()).decode()


def _unpack(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text, validate=True), dtype="<u8").astype(np.uint64)


# --------------------------------------------------------------------------- computing
_memo: dict[str, int] = {}


def _word_memo() -> dict[str, int]:
    if len(_memo) > 2_000_000:  # a long-lived process over many worlds: start again
        _memo.clear()
    return _memo


def compute(loaded: LoadedSpec, *, shape: bool = False) -> SpecFeatures:
    """The features of a loaded spec (no cache); the seed's shape signature only with ``shape``."""
    from .stats import prompt_shape

    memo = _word_memo()
    spec = loaded.spec
    names = gates.seed_names(loaded)
    text = gates.seed_text(loaded)
    return SpecFeatures(
        id=spec.id, path=str(loaded.path),
        prompt=gates.shingle_hashes(gates.prompt_text(spec), 3, memo),
        seed_signature=gates._signature(gates.shingle_hashes(text, 5, memo)),
        skeleton=hashlib.sha256(gates.skeleton(loaded, names).encode()).hexdigest(),
        shape_prompt=gates.shingle_hashes(prompt_shape(gates.prompt_text(spec), names), 3, memo),
        shape_signature=gates._signature(gates.shingle_hashes(gates.entity_shape(text, names), 5, memo)) if shape else None,
        answer=gates.answer_gate(loaded),
        difficulty=gates.difficulty(loaded), family=gates.family_of(loaded), capabilities=list(spec.capabilities),
        services=gates.used_services(loaded), declared=spec.difficulty)


def _seed_sets(loaded: LoadedSpec, names: list[str], memo: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    text = gates.seed_text(loaded)
    return gates.shingle_hashes(text, 5, memo), gates.shingle_hashes(gates.entity_shape(text, names), 5, memo)


@functools.lru_cache(maxsize=64)
def exact_seeds(path: str) -> tuple[np.ndarray, np.ndarray]:
    """The exact seed shingles of the spec at ``path``, as they are and with entities
    replaced: what a candidate pair is confirmed on."""
    loaded = load_spec(path)
    return _seed_sets(loaded, gates.seed_names(loaded), _word_memo())


def _shape_signature(path: str, entry: Path | None) -> np.ndarray:
    """The shape signature of the spec at ``path``, written into its cache entry when it has one."""
    sig = gates._signature(exact_seeds(path)[1])
    if entry is not None:
        data = fastyaml.read_entry(entry)
        if isinstance(data, dict) and data.get("v") == FEATURES_VERSION:
            fastyaml.write_entry(entry, {**data, "shape_signature": _pack(sig)}, CACHE_BYTES)
    return sig


def _shape_job(job: tuple[str, Path | None]) -> np.ndarray:
    return _shape_signature(*job)


def with_shapes(feats: list[SpecFeatures]) -> None:
    """Fill in the shape signature of every spec that shares its skeleton with another (the
    only ones :func:`structural_duplicates` compares on it), in worker processes from
    :data:`PARALLEL_FROM` specs on, and keep them in their cache entries."""
    count = collections.Counter(f.skeleton for f in feats)
    todo = [f for f in feats if f.shape_signature is None and count[f.skeleton] > 1]
    workers = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8)
    jobs = [(f.path, f.entry) for f in todo]
    if len(todo) < PARALLEL_FROM or workers < 2:
        sigs = [_shape_job(j) for j in jobs]
    else:
        with concurrent.futures.ProcessPoolExecutor(workers) as pool:
            sigs = list(pool.map(_shape_job, jobs, chunksize=4))
    for f, sig in zip(todo, sigs):
        f.shape_signature = sig


# --------------------------------------------------------------------------- the cache
@functools.lru_cache(maxsize=1)
def _salt() -> bytes:
    """The code the features come from: every module of the package (a change anywhere in
    grading or loading can change an answer gate), numpy, and the entry version."""
    h = hashlib.sha256(f"cowork-gate-features {FEATURES_VERSION} numpy {np.__version__}\0".encode())
    package = Path(__file__).resolve().parents[1]
    for file in sorted(package.rglob("*.py")):
        h.update(file.relative_to(package).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(file.read_bytes()).digest())
    return h.digest()


def cache_dir() -> Path:
    """``gate-features`` under ``settings.cache`` (``$COWORK_CACHE``, default ``~/.cache/cowork``)."""
    from ..settings import get

    return get().cache / "gate-features"


def content_key(file: Path) -> str | None:
    """The key of the spec whose task.yaml is ``file``: its bytes and every other file of its
    folder (sorted paths, sizes and bytes; hidden ones left out), with the code's salt.
    ``None`` (not cached) for a folder of more than :data:`MAX_FILES` files."""
    root = file.parent
    others: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            p = Path(dirpath, name)
            if not name.startswith(".") and p != file:
                others.append(p)
        if len(others) > MAX_FILES:
            return None
    h = hashlib.sha256(_salt())
    for p in [file, *others]:
        data = p.read_bytes()
        rel = p.relative_to(root).as_posix().encode()
        h.update(len(rel).to_bytes(8, "little") + rel + len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def _cached(file: Path) -> tuple[SpecFeatures | None, Path | None]:
    try:
        key = content_key(file)
    except OSError:
        return None, None
    if key is None:
        return None, None
    entry = cache_dir() / f"{key}.json.z"
    data = fastyaml.read_entry(entry)
    if data is not None:
        try:
            got = SpecFeatures.from_json(data, str(file))
            got.entry = entry
            return got, entry
        except (ValueError, KeyError, TypeError, AttributeError) as exc:  # a foreign or old entry
            log.debug("gate features %s unreadable (%s); computing", entry.name, exc)
    return None, entry


def of(loaded: LoadedSpec) -> SpecFeatures:
    """The features of a loaded spec, from the cache or computed (and kept)."""
    got, entry = _cached(Path(loaded.path))
    if got is not None:
        return got
    got = compute(loaded)
    if entry is not None:
        fastyaml.write_entry(entry, got.as_json(), CACHE_BYTES)
        got.entry = entry
    return got


def of_path(path: str | os.PathLike[str]) -> SpecFeatures | SpecError:
    """The features of the spec at ``path`` (a folder or its task.yaml), the spec loaded only
    when the cache has no entry; the :class:`SpecError` that refuses it otherwise."""
    try:
        file = resolve_spec_path(path)
    except SpecError as exc:
        return exc
    got, entry = _cached(file)
    if got is not None:
        return got
    try:
        loaded = load_spec(file)
    except SpecError as exc:
        return exc
    got = compute(loaded)
    if entry is not None:
        fastyaml.write_entry(entry, got.as_json(), CACHE_BYTES)
        got.entry = entry
    return got


def each(paths: Sequence[str | os.PathLike[str]]) -> list[SpecFeatures | SpecError]:
    """:func:`of_path` for every path, in order; from :data:`PARALLEL_FROM` paths on, in worker
    processes (as :func:`cowork.spec.loader.load_each` loads)."""
    workers = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8)
    if len(paths) < PARALLEL_FROM or workers < 2:
        return [of_path(p) for p in paths]
    with concurrent.futures.ProcessPoolExecutor(workers) as pool:
        return list(pool.map(of_path, paths, chunksize=8))


# --------------------------------------------------------------------------- the batch gates
def near_duplicates(feats: list[SpecFeatures], threshold: float = gates.DUPLICATE_THRESHOLD) -> list[gates.DuplicatePair]:
    """:func:`gates.near_duplicates` over features."""
    return gates.near_duplicate_items([f.item() for f in feats], threshold)


def structural_duplicates(feats: list[SpecFeatures], threshold: float = gates.DUPLICATE_THRESHOLD,
                          seed_threshold: float = gates.CLONE_SEED_THRESHOLD) -> list[gates.DuplicatePair]:
    """:func:`gates.structural_duplicates` over features."""
    with_shapes(feats)
    groups: dict[str, list[SpecFeatures]] = {}
    for f in feats:
        groups.setdefault(f.skeleton, []).append(f)
    return gates.structural_duplicate_items([[f.shape_item() for f in g] for g in groups.values() if len(g) > 1],
                                            threshold, seed_threshold)


def diversity(feats: list[SpecFeatures]) -> gates.Diversity:
    """:func:`gates.diversity` over features."""
    return gates.diversity_of([(f.capabilities, f.services, f.family, f.declared) for f in feats])
