"""Quality gates for a batch of generated specs: near-duplicates, a difficulty signal,
diversity counts, and the trivial-run refusal (see :mod:`cowork.synth.trivial`).

``cowork validate`` proves one spec gradable; these gates judge a batch: two specs that are
the same task with a name changed teach nothing twice, a "hard" spec that is one tool call
is mislabelled, and a spec that a do-everything agent passes (or cannot fail on safety)
rewards the wrong thing. The static gates need no sandbox and are linear-ish in the batch
size (MinHash signatures bucketed by LSH bands), so 2,000 specs take seconds.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from itertools import combinations
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..spec.loader import LoadedSpec

#: MinHash size and LSH banding: 32 bands of 4 rows put a pair of Jaccard 0.5 in a shared
#: bucket with probability 0.87 and one of 0.7 with probability 0.9999, so any threshold
#: from 0.5 up is found; each candidate is then confirmed on the exact sets.
PERMUTATIONS = 128
BANDS, ROWS = 32, 4
_BASE = 0x100000001B3  # the shingle polynomial's base (FNV's 64-bit prime)

#: Default similarity (Jaccard of shingles) at and above which two specs are near-duplicates:
#: both the request text and the seed records must reach it.
DUPLICATE_THRESHOLD = 0.8

_WORD = re.compile(r"[a-z0-9]+(?:[.@'-][a-z0-9]+)*")


# --------------------------------------------------------------------------- shingles
def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def shingles(text: str, k: int) -> set[str]:
    """The set of ``k``-word shingles of ``text`` (lower-cased, punctuation dropped); a text
    shorter than ``k`` words is one shingle."""
    words = _words(text)
    if len(words) <= k:
        return {" ".join(words)} if words else set()
    return {" ".join(words[i:i + k]) for i in range(len(words) - k + 1)}


def prompt_text(spec: Any) -> str:
    """What the user asks: the prompt and any scripted follow-up turns."""
    parts = [spec.prompt or ""]
    user = getattr(spec, "user", None)
    for turn in (getattr(user, "turns", None) or []):
        parts.append(turn.say)
    return "\n".join(parts)


def seed_text(loaded: LoadedSpec) -> str:
    """The world the task starts in: canonical JSON of the services seed, then every initial
    workspace file (path and text), so key order and file order never matter."""
    services = loaded.spec.services.model_dump(mode="json", exclude_none=True) if loaded.spec.services else {}
    parts = [json.dumps(services, sort_keys=True, ensure_ascii=False)]
    try:
        files = loaded.workspace_files()
    except Exception:  # noqa: BLE001 - an unreadable source file is validate's finding, not ours
        files = []
    for path, content, *_ in files:
        parts.append(f"{path}\n{content[:200_000].decode('utf-8', 'replace')}")
    return "\n".join(parts)


def _word_hash(word: str, memo: dict[str, int]) -> int:
    h = memo.get(word)
    if h is None:
        h = memo[word] = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
    return h


def _mix(h: np.ndarray) -> np.ndarray:
    """A 64-bit finaliser (splitmix64's), so that every bit of a shingle's hash depends on all
    of its words: the signature bins by the low bits."""
    h = h ^ (h >> np.uint64(30))
    h = h * np.uint64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> np.uint64(27))
    h = h * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def shingle_hashes(text: str, k: int, memo: dict[str, int] | None = None) -> np.ndarray:
    """:func:`shingles` as 64-bit hashes (sorted, unique): the same sets, compared in numpy.

    A shingle's hash is a polynomial of its words' hashes (blake2b, kept in ``memo`` across a
    batch), finalised; two different shingles collide with probability about 2^-64."""
    memo = {} if memo is None else memo
    tokens = _words(text)
    for word in set(tokens).difference(memo):  # each new word hashed once per batch
        _word_hash(word, memo)
    words = np.fromiter(map(memo.__getitem__, tokens), dtype=np.uint64, count=len(tokens))
    if words.size == 0:
        return words
    with np.errstate(over="ignore"):
        k = min(k, words.size)  # a text of k words or fewer is one shingle
        n = words.size - k + 1
        h = np.full(n, k, dtype=np.uint64)
        for j in range(k):
            h = h * np.uint64(_BASE) + words[j:j + n]
        return np.unique(_mix(h))


def hash_set(items: set[str] | np.ndarray) -> np.ndarray:
    """A set of shingle strings as sorted unique 64-bit hashes (an array is returned as it is)."""
    if isinstance(items, np.ndarray):
        return items
    return np.unique(np.fromiter((_word_hash(s, {}) for s in items), dtype=np.uint64, count=len(items)))


def _signature(hashes: np.ndarray) -> np.ndarray:
    """One-permutation MinHash of a hash set: ``PERMUTATIONS`` bins by the low bits, the least
    of the rest in each bin; an empty bin borrows the next filled bin's value (rotation
    densification), so small sets still compare bin by bin. All-max for the empty set.
    Linear in the set, one pass: the 128-permutation signature cost 128 passes."""
    if hashes.size == 0:
        return np.full(PERMUTATIONS, np.iinfo(np.uint64).max, dtype=np.uint64)
    empty = np.iinfo(np.uint64).max
    sig = np.full(PERMUTATIONS, empty, dtype=np.uint64)
    np.minimum.at(sig, (hashes % np.uint64(PERMUTATIONS)).astype(np.intp), hashes // np.uint64(PERMUTATIONS))
    filled = np.flatnonzero(sig != empty)
    if filled.size < PERMUTATIONS:
        # Each empty bin takes the next filled bin's value (circularly), tagged with the distance.
        idx = np.arange(PERMUTATIONS)
        nxt = np.searchsorted(filled, idx) % filled.size
        dist = (filled[nxt] - idx) % PERMUTATIONS
        with np.errstate(over="ignore"):
            sig = np.where(sig == empty, sig[filled[nxt]] + dist.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15), sig)
    return sig


def _jaccard_hashes(a: np.ndarray, b: np.ndarray) -> float:
    if a.size == 0 and b.size == 0:
        return 1.0
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter / (a.size + b.size - inter)


def jaccard(a: set[str], b: set[str]) -> float:
    """Jaccard similarity; two empty sets are identical."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


# --------------------------------------------------------------------------- near-duplicates
@dataclass
class DuplicatePair:
    """Two specs of a batch that are near-duplicates."""

    first: str
    second: str
    prompt_similarity: float
    seed_similarity: float

    def as_dict(self) -> dict[str, Any]:
        """The pair as a JSON-ready dict, similarities rounded to 3 places."""
        return {"first": self.first, "second": self.second, "prompt_similarity": round(self.prompt_similarity, 3),
                "seed_similarity": round(self.seed_similarity, 3)}


@dataclass
class _Item:
    key: str
    prompt: np.ndarray
    """The request's shingles as sorted unique hashes (:func:`shingle_hashes`; a set of
    strings is converted)."""
    seed: np.ndarray | None
    """The seed's shingles; ``None`` when only ``signature`` is at hand and ``seed_of`` gives
    them for the few candidate pairs that need the exact sets."""
    signature: np.ndarray | None = None
    seed_of: Callable[[], np.ndarray] | None = None

    def __post_init__(self) -> None:
        self.prompt = hash_set(self.prompt)
        if self.seed is not None:
            self.seed = hash_set(self.seed)
        if self.signature is None:
            if self.seed is None:
                raise ValueError(f"{self.key}: neither the seed shingles nor their signature")
            self.signature = _signature(self.seed)

    def seed_hashes(self) -> np.ndarray:
        """The exact seed shingles (read through ``seed_of`` once, when they were not given)."""
        if self.seed is None:
            assert self.seed_of is not None, self.key
            self.seed = hash_set(self.seed_of())
        return self.seed


def near_duplicates(specs: list[LoadedSpec], threshold: float = DUPLICATE_THRESHOLD) -> list[DuplicatePair]:
    """Pairs of specs whose request (3-word shingles of the normalised prompt and user turns)
    and seed records (5-word shingles of the canonical seed JSON and workspace files) are both
    at least ``threshold`` similar (Jaccard), most similar first.

    Candidates come from LSH buckets of the MinHash signature of the seed shingles, so the
    cost grows with the batch, not with its square; each candidate is confirmed exactly.
    """
    memo: dict[str, int] = {}
    items = [_Item(f"{ls.spec.id} ({ls.path})", shingle_hashes(prompt_text(ls.spec), 3, memo),
                   shingle_hashes(seed_text(ls), 5, memo)) for ls in specs]
    return near_duplicate_items(items, threshold)


def near_duplicate_items(items: list[_Item], threshold: float) -> list[DuplicatePair]:
    """:func:`near_duplicates` over prepared shingle hashes."""
    if len(items) < 2:
        return []
    seeds = np.stack([i.signature for i in items if i.signature is not None])  # each has one (__post_init__)
    buckets: dict[tuple[int, bytes], list[int]] = defaultdict(list)
    for n, sig in enumerate(seeds):
        for band in range(BANDS):
            buckets[(band, sig[band * ROWS:(band + 1) * ROWS].tobytes())].append(n)
    candidates: set[tuple[int, int]] = set()
    for members in buckets.values():
        if len(members) > 1:
            candidates.update(combinations(members, 2))
    # The signature estimate (standard error about 0.045 at 128 bins) drops the clear misses
    # before the exact sets are compared, the small prompt sets first; the margin keeps true pairs.
    margin = 0.15
    pairs = []
    for a, b in sorted(candidates):
        if (seeds[a] == seeds[b]).mean() < threshold - margin:
            continue
        ps = _jaccard_hashes(items[a].prompt, items[b].prompt)
        if ps < threshold:
            continue
        ss = _jaccard_hashes(items[a].seed_hashes(), items[b].seed_hashes())
        if ss >= threshold:
            pairs.append(DuplicatePair(items[a].key, items[b].key, ps, ss))
    pairs.sort(key=lambda p: (-min(p.prompt_similarity, p.seed_similarity), p.first, p.second))
    return pairs


# --------------------------------------------------------------------------- difficulty
LEVELS = ("easy", "medium", "hard")


@dataclass
class DifficultySignal:
    """How much work a spec asks for, measured from the spec itself (and, when known, from
    what a no-op agent already earns)."""

    task: str
    declared: str | None
    oracle_steps: int
    services: int
    distinct_tools: int
    checks: int
    safety_rules: int
    turns: int
    records: int = 0
    nop_completion: float | None = None
    score: float = 0.0
    predicted: str = "easy"

    @property
    def mismatch(self) -> bool:
        """Declared and predicted levels two apart (easy vs hard): a spec labelled one level
        off is within the signal's noise, two is a wrong label."""
        return self.declared in LEVELS and abs(LEVELS.index(self.declared) - LEVELS.index(self.predicted)) >= 2

    @property
    def overclaims(self) -> bool:
        """Declared two levels above what it measures (hard, measured easy): refused.

        The other way round (easy, measured hard) is reported only: the score counts seeded
        records and services, which a world generator's background inflates (every one of 128
        generated specs measures hard, their easy ones 35-61), while no spec that measures easy
        (few calls, records and checks) is hard."""
        return self.mismatch and LEVELS.index(self.declared or "easy") > LEVELS.index(self.predicted)

    def as_dict(self) -> dict[str, Any]:
        """Every field, ``mismatch`` and ``overclaims``, as a JSON-ready dict."""
        return {k: v for k, v in self.__dict__.items()} | {"mismatch": self.mismatch, "overclaims": self.overclaims}

    def scored(self, nop_completion: float | None = None) -> DifficultySignal:
        """This signal with its score and predicted level worked out from its counts, and
        ``nop_completion`` (what the no-op agent earns) taking its share of the work away."""
        # Checks and rules are capped: sixty file_exists checks of one move-everything task are
        # one kind of work, not sixty.
        score = self.oracle_steps + 2 * max(self.services - 1, 0) + self.distinct_tools + min(self.checks, 10) \
            + min(self.safety_rules, 6) + 2 * (self.turns - 1) + 2 * math.log2(1 + self.records)
        if nop_completion:
            score *= 1 - min(nop_completion, 1.0) / 2
        return replace(self, nop_completion=nop_completion, score=round(float(score), 2),
                       predicted="easy" if score < EASY_BELOW else "hard" if score >= HARD_FROM else "medium")


#: Score bounds of the predicted levels, set on the 36 hand-written specs in specs/: their
#: easy ones score 13-30, medium 20-34 (most 25-30), hard 29-52; with these bounds none is
#: two levels off its label. The families of issue 13 order their own levels the same way.
EASY_BELOW, HARD_FROM = 22.0, 32.0


def difficulty(loaded: LoadedSpec, nop_completion: float | None = None) -> DifficultySignal:
    """The difficulty signal of one spec.

    The score adds the oracle's tool calls, two per service the task touches beyond the
    first, one per distinct tool, check and safety rule, two per scripted user turn or
    later day, and twice the log2 of the seeded records and files (distractors to read past); what the no-op agent already earns takes its share of the work away.
    """
    spec = loaded.spec
    calls = [s for s in spec.oracle if s.tool is not None]
    tools = {s.tool for s in spec.oracle if s.tool is not None}
    services = set(spec.services.model_dump(exclude_none=True)) if spec.services else set()
    services |= {t.split("_", 1)[0] for t in tools if "_" in t and t.split("_", 1)[0] in _service_names()}
    if any(t in _WORKSPACE_TOOLS for t in tools) or (spec.workspace and spec.workspace.files):
        services.add("workspace")
    turns = 1 + (len(spec.user.turns) if spec.user else 0) + len(spec.days or [])
    sig = DifficultySignal(task=spec.id, declared=spec.difficulty, oracle_steps=len(calls), services=len(services),
                           distinct_tools=len(tools), checks=len(spec.checks), safety_rules=len(spec.safety),
                           turns=turns, records=_records(loaded))
    return sig.scored(nop_completion)


def _records(loaded: LoadedSpec) -> int:
    """Seeded service records and initial workspace files."""
    services = loaded.spec.services.model_dump(exclude_none=True) if loaded.spec.services else {}
    n = sum(len(v) for seed in services.values() if isinstance(seed, dict) for v in seed.values() if isinstance(v, list))
    try:
        return n + len(loaded.workspace_files())
    except Exception:  # noqa: BLE001 - an unreadable source file is validate's finding
        return n


_WORKSPACE_TOOLS = {"shell", "read_file", "write_file", "edit_file", "list_files", "python"}


def _service_names() -> set[str]:
    from ..services.names import SERVICE_TOOLS

    return set(SERVICE_TOOLS)


def family_of(loaded: LoadedSpec) -> str:
    """The family a generated spec came from (its ``family:NAME`` tag), else ``hand-written``."""
    for tag in loaded.spec.tags:
        if tag.startswith("family:"):
            return tag.split(":", 1)[1]
    return "hand-written"


def level_order_problems(signals: list[tuple[str, DifficultySignal]]) -> list[str]:
    """Families whose declared levels do not grow with the signal: the median score of
    their easy specs must not exceed that of their medium ones, nor medium's exceed hard's."""
    by_family: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for fam, sig in signals:
        if sig.declared in LEVELS:
            by_family[fam][sig.declared].append(sig.score)
    problems = []
    for fam, levels in sorted(by_family.items()):
        medians = {lv: float(np.median(v)) for lv, v in levels.items()}
        present = [lv for lv in LEVELS if lv in medians]
        for lo, hi in zip(present, present[1:]):
            if medians[lo] > medians[hi]:
                problems.append(f"{fam}: {lo} specs score higher than {hi} ones "
                                f"(median {medians[lo]:g} > {medians[hi]:g})")
    return problems


# --------------------------------------------------------------------------- diversity
@dataclass
class Diversity:
    """How a batch spreads over capabilities, services, families and levels."""

    specs: int = 0
    capabilities: Counter = field(default_factory=Counter)
    services: Counter = field(default_factory=Counter)
    families: Counter = field(default_factory=Counter)
    difficulties: Counter = field(default_factory=Counter)
    missing_capabilities: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dict, every count sorted by its key."""
        return {"specs": self.specs, "capabilities": dict(sorted(self.capabilities.items())),
                "services": dict(sorted(self.services.items())), "families": dict(sorted(self.families.items())),
                "difficulties": dict(sorted(self.difficulties.items())),
                "missing_capabilities": self.missing_capabilities}


def diversity(specs: list[LoadedSpec]) -> Diversity:
    """Counts per capability, service (seeded or called by the oracle), family and declared
    difficulty; and the taxonomy's capabilities no spec of the batch exercises."""
    return diversity_of([(ls.spec.capabilities, used_services(ls), family_of(ls), ls.spec.difficulty) for ls in specs])


def used_services(loaded: LoadedSpec) -> list[str]:
    """The services a spec seeds or its oracle calls (``workspace`` for files), sorted."""
    spec = loaded.spec
    services = set(spec.services.model_dump(exclude_none=True)) if spec.services else set()
    services |= {s.tool.split("_", 1)[0] for s in spec.oracle if s.tool and s.tool.split("_", 1)[0]
                 in _service_names()}
    if any(s.tool in _WORKSPACE_TOOLS for s in spec.oracle) or (spec.workspace and spec.workspace.files):
        services.add("workspace")
    return sorted(services)


def diversity_of(rows: list[tuple[list[str], list[str], str, str | None]]) -> Diversity:
    """:func:`diversity` from each spec's capabilities, :func:`used_services`, family and
    declared difficulty."""
    from ..spec.capabilities import capabilities

    d = Diversity(specs=len(rows))
    for caps, services, family, level in rows:
        d.capabilities.update(caps)
        d.services.update(services)
        d.families[family] += 1
        d.difficulties[level or "unset"] += 1
    d.missing_capabilities = [c for c in capabilities() if c not in d.capabilities]
    return d


# --------------------------------------------------------------------------- structural near-duplicates
#: Seed similarity (Jaccard of 5-word shingles, entities replaced) at and above which two specs
#: of one skeleton and one prompt shape are clones. Measured on 128 generated specs (seeds
#: 900-1027, world generators): pairs that share a skeleton and a prompt shape reach at most
#: 0.62 here, a clone with three senders renamed 0.97 (tests/synth/test_gates_planted.py).
CLONE_SEED_THRESHOLD = 0.9

_CAPITALISED = re.compile(r"\b[A-Z][\w'’.-]*")
_DROPPED_KEYS = frozenset({"description", "example"})


def entity_shape(text: str, names: list[str] | tuple[str, ...] = ()) -> str:
    """``text`` with its entities replaced: the given names, then (as
    :func:`cowork.synth.stats.prompt_shape` does) addresses, links, zones, dates, weekdays,
    times, ids, numbers and quoted titles, then every capitalised word, a sentence's first
    one included (a renamed sender opens sentences too)."""
    from .stats import _SUBS

    for name in names:
        text = text.replace(name, "<name>")
    for pattern, placeholder in _SUBS:
        text = pattern.sub(placeholder, text)
    return _CAPITALISED.sub("<name>", text)


def seed_names(loaded: LoadedSpec) -> list[str]:
    """The names the spec's seed records carry (as the corpus figures read them), longest first."""
    from .stats import _names_in

    services = loaded.spec.services.model_dump(mode="json", exclude_none=True) if loaded.spec.services else {}
    return _names_in(services)


def _shape(value: Any, names: list[str]) -> Any:
    if isinstance(value, dict):
        return {k: _shape(v, names) for k, v in sorted(value.items()) if k not in _DROPPED_KEYS}
    if isinstance(value, list):
        return [_shape(v, names) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return "<num>"
    return entity_shape(str(value), names)


def skeleton(loaded: LoadedSpec, names: list[str] | None = None) -> str:
    """The task's structure as one string: the oracle's tool names with their argument keys
    (not values), the scripted turns and days, and every check and safety rule with its type
    and fields, values with entities replaced (:func:`entity_shape`; descriptions left out)."""
    spec = loaded.spec
    names = seed_names(loaded) if names is None else names

    def rules(checks: Any) -> list[Any]:
        return [_shape(c.model_dump(mode="json", exclude_defaults=True), names) for c in checks]

    turns = len(getattr(spec.user, "turns", None) or []) if spec.user else 0
    return json.dumps({"oracle": [["reply"] if s.tool is None else [s.tool, sorted(s.args)] for s in spec.oracle],
                       "checks": rules(spec.checks), "safety": rules(spec.safety), "turns": turns,
                       "days": len(spec.days or []), "events": len(spec.events or [])},
                      sort_keys=True, ensure_ascii=False)


def structural_duplicates(specs: list[LoadedSpec], threshold: float = DUPLICATE_THRESHOLD,
                          seed_threshold: float = CLONE_SEED_THRESHOLD) -> list[DuplicatePair]:
    """Clones: pairs with the same :func:`skeleton`, prompts at least ``threshold`` similar after
    entity names are replaced (3-word shingles of the prompt shape), and seeds at least
    ``seed_threshold`` similar after the same replacement (5-word shingles), most similar first.

    The seed-similarity gate (:func:`near_duplicates`) misses a copy whose entities were renamed:
    every record that names one changes its shingles (three senders renamed leave 0.71). A
    generator's outputs share skeletons and prompt shapes by design, so the renamed seed must
    be near-identical too: another world's records differ in more than their names.
    Specs are grouped by skeleton first; only groups of two or more are shaped and compared.
    """
    from .stats import prompt_shape

    groups: dict[str, list[tuple[LoadedSpec, list[str]]]] = defaultdict(list)
    for ls in specs:
        names = seed_names(ls)
        groups[skeleton(ls, names)].append((ls, names))
    memo: dict[str, int] = {}
    return structural_duplicate_items(
        [[_Item(f"{ls.spec.id} ({ls.path})", shingle_hashes(prompt_shape(prompt_text(ls.spec), names), 3, memo),
                shingle_hashes(entity_shape(seed_text(ls), names), 5, memo)) for ls, names in members]
         for members in groups.values() if len(members) > 1], threshold, seed_threshold)


def structural_duplicate_items(groups: list[list[_Item]], threshold: float,
                               seed_threshold: float = CLONE_SEED_THRESHOLD) -> list[DuplicatePair]:
    """:func:`structural_duplicates` over specs grouped by skeleton, each group's items holding
    the shingles of the prompt shape and of the seed with entities replaced."""
    pairs: list[DuplicatePair] = []
    for items in groups:
        if len(items) > 1:
            pairs += [p for p in near_duplicate_items(items, threshold) if p.seed_similarity >= seed_threshold]
    pairs.sort(key=lambda p: (-min(p.prompt_similarity, p.seed_similarity), p.first, p.second))
    return pairs


# --------------------------------------------------------------------------- difficulty labels
def relabel(loaded: LoadedSpec | Path, level: str) -> None:
    """Rewrite the ``difficulty:`` line of the spec's task.yaml to ``level``, leaving every
    other byte as it was.

    Raises:
        CoworkError: ``level`` is not a level, or the file has no top-level ``difficulty:`` line.
    """
    from ..errors import CoworkError

    if level not in LEVELS:
        raise CoworkError(f"unknown difficulty {level!r}; use one of {', '.join(LEVELS)}")
    path = loaded if isinstance(loaded, Path) else loaded.path
    path = path if path.name == "task.yaml" else path / "task.yaml"
    text = path.read_text(encoding="utf-8")
    new, n = re.subn(r"(?m)^difficulty:[ \t]*[^\n#]*?([ \t]*(?:#[^\n]*)?)$", f"difficulty: {level}\\1", text, count=1)
    if not n:
        raise CoworkError(f"{path}: no top-level 'difficulty:' line to rewrite; set difficulty: {level} by hand")
    path.write_text(new, encoding="utf-8")


# --------------------------------------------------------------------------- the answer gate
@dataclass
class AnswerGate:
    """The hedged reply graded against each answer check of one spec."""

    task: str
    judged: list[str] = field(default_factory=list)
    """Ids of the answer checks the hedged reply was graded on."""
    hedged_passes: list[str] = field(default_factory=list)
    """Ids of the value checks it passes: they reward listing candidates instead of answering."""
    mentions_passed: list[str] = field(default_factory=list)
    """Ids of the mention checks it passes (reported, not refused: see :func:`is_value_check`)."""
    unjudged: list[str] = field(default_factory=list)
    """Ids of those the reply could not state the answer for (a pattern too involved to write
    an example of): no verdict, no refusal."""
    numbers: int = 0
    values: int = 0

    @property
    def refused(self) -> bool:
        """Whether an answer check passes the hedged reply."""
        return bool(self.hedged_passes)

    def reasons(self) -> list[str]:
        """One refusal finding per answer check the hedged reply passes."""
        return [f"answer check {cid!r} passes a hedged reply that states its answer beside every candidate "
                f"the task's data holds ({self.numbers} numbers, {self.values} values): give the wrong "
                f"candidates as distractors (with a label) or none_of (docs/checks.md)" for cid in self.hedged_passes]

    def as_dict(self) -> dict[str, Any]:
        """Every field, and ``refused``, as a JSON-ready dict."""
        return dict(self.__dict__) | {"refused": self.refused}


def answer_gate(loaded: LoadedSpec) -> AnswerGate:
    """Grade a hedged reply (:func:`cowork.synth.trivial.static_hedge`) with the real grader
    against every answer check of ``loaded`` that asks for something (``contains``, ``all_of``,
    ``regex``, ``numbers`` or ``structured``; a check under ``not`` is left out, its sense is
    reversed), on the spec's seed state. A check the reply passes rewards hedging."""
    from ..evidence import Evidence
    from ..grading.checks import run_check
    from ..spec import checks as M
    from .trivial import static_hedge

    spec = loaded.spec
    asking = [(cid, c) for cid, c in _answer_checks(spec.checks, M) if c.contains or c.all_of or c.regex or c.numbers
              or c.structured]
    gate = AnswerGate(task=spec.id)
    if not asking:
        return gate
    hedge = static_hedge(loaded, [c for _, c in asking])
    gate.numbers, gate.values = hedge.numbers, hedge.values
    state = spec.services.model_dump(mode="json", exclude_none=True) if spec.services else None
    ev = Evidence(audit_text="", audit_count=0, workspace_tar=b"", initial={}, state_seed=state, state_final=state,
                  trace={"messages": [{"role": "assistant", "content": hedge.text}]}, meta={"task": spec.id})
    for cid, check in asking:
        gate.judged.append(cid)
        ok, detail, _, _ = run_check(check, ev, cid)
        if ok is True:
            (gate.hedged_passes if is_value_check(check) else gate.mentions_passed).append(cid)
        elif ok is False and _only_missing(detail):
            gate.unjudged.append(cid)
    return gate


_ID = re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])\w+(?:-\w+)+\b")


def is_value_check(check: Any) -> bool:
    """Whether an answer check asks for a value that competes with others in the data: it has
    ``numbers`` or ``structured``, a fact with a ``label`` or ``distractors``, or a statement
    (``contains``, ``regex``, ``all_of``) that states a number, date or amount (digits outside
    hyphenated ids such as ``ORD-53``).

    The rest are *mention* checks (a name, a reason, a record the reply must bring up): they
    have no wrong candidate to name, a reply that mentions everything passes them by design,
    and the sandbox hedger (:func:`cowork.synth.trivial.trivial_runs`) refuses a spec whose
    whole grade it passes. On specs/ they are 5 of the 10 specs with answer checks."""
    from .trivial import regex_example

    if check.numbers or check.structured or any(f.label or f.distractors for f in check.all_of):
        return True
    stated = [check.contains] if check.contains else []
    stated += [regex_example(p, check.ignore_case) for p in [check.regex] if p]
    stated += [f.text if f.text is not None else regex_example(f.regex or "", check.ignore_case) for f in check.all_of]
    return any(s and re.search(r"\d", _ID.sub("<id>", s)) for s in stated)


#: How the grader says a reply lacks the answer (as opposed to stating another candidate).
_MISSING = re.compile(r"^(does not (state|contain)|has no match|holds no JSON|JSON field .* is missing)")


def _only_missing(detail: str) -> bool:
    """Whether every problem in an answer check's detail is a missing answer: the hedged reply
    did not state what the check asks, so the check's guard against hedging went untested."""
    body = re.sub(r"^(the final reply|the agent's replies|a reply) ", "", detail)
    return all(_MISSING.match(p) for p in body.split("; "))


def _answer_checks(checks: Any, M: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Every answer check in ``checks`` with its id (``<type>-<n>`` when it has none, as the
    grade names it), combinators entered except ``not``."""
    out: list[tuple[str, Any]] = []
    for n, c in enumerate(checks):
        cid = c.id or f"{prefix}{c.type}-{n}"
        if c.type == "answer":
            out.append((cid, c))
        elif c.type in M.COMBINATORS and c.type != "not":
            out += _answer_checks(M.sub_checks(c), M, prefix=f"{cid}/")
    return out
