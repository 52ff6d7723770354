"""``cowork synth stats``: the figures of a folder of specs, each beside the target the task
corpus aims at (issue "A task world worth training on").

Specs are read as plain YAML (libyaml's ``CSafeLoader`` when present; a big one through
:mod:`cowork.spec.fastyaml` and its cache), not validated: a stats pass over thousands of specs
should take seconds, and ``cowork validate`` is where a spec is proven. What each figure
counts, exactly (docs/synthesis.md repeats it):

- generators: distinct ``family:<name>`` tags; capabilities: distinct ``capabilities``;
  services: the services (all of them) a spec touches, i.e. seeds under ``services:`` or calls in
  its oracle.
- oracle sequence: the oracle's tool names in order (``reply`` steps left out); oracle calls:
  its steps that call a tool; p90 by nearest rank.
- multi-turn or multi-day: the spec has ``user`` turns or a simulated user, ``days`` or
  ``events``.
- office file: a string in the spec outside the prompt and the seeded records that is a file
  name ending ``.xlsx``, ``.docx`` or ``.pdf`` (workspace paths, check paths, oracle
  arguments, later turns), or such a file in the spec's workspace folder; an attachment name
  in seeded mail alone does not count.
- traps: a generator tags a trapped spec ``trap:<kind>``, and also ``trap-announced`` when its
  prompt tells the agent about the trap; the figure is announced / trapped (n/a without traps).
- distinct prompts: prompts after :func:`prompt_shape` replaces entity names, addresses,
  links, dates, times, ids and numbers by placeholders.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import CoworkError
from ..services.names import SERVICE_TOOLS

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TOOL_SERVICE = {tool: service for service, tools in SERVICE_TOOLS.items() for tool in tools}
_OFFICE = re.compile(r"[^\s\"'<>|]+\.(?:xlsx|docx|pdf)", re.I)


# --------------------------------------------------------------------------- one spec
@dataclass(frozen=True)
class SpecFacts:
    """What the figures need from one spec."""

    path: str
    family: str | None
    capabilities: tuple[str, ...]
    services: frozenset[str]
    oracle_tools: tuple[str, ...]
    multi: bool
    office: bool
    traps: tuple[str, ...]
    trap_announced: bool
    prompt_shape: str


def read_spec(path: Path) -> dict[str, Any]:
    """The task.yaml at ``path`` as a mapping.

    Raises:
        CoworkError: The file is not YAML, or not a mapping (the message names the file and line).
    """
    try:
        text = path.read_text(encoding="utf-8")
        data = _fast(text) if len(text) >= FAST_FROM else _NOT_FAST
        if data is _NOT_FAST:
            data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise CoworkError(f"{where}: not YAML: {getattr(exc, 'problem', None) or exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise CoworkError(f"{path}: cannot read: {exc}") from exc
    if not isinstance(data, dict):
        raise CoworkError(f"{path}: a task.yaml is a mapping (id, prompt, checks, ...), not {type(data).__name__}")
    return data


#: From this size a spec is read through :mod:`cowork.spec.fastyaml` (the same data, three times
#: faster, and cached); smaller ones parse in a few milliseconds, and importing it costs 0.5 s
#: (it brings the spec models), which a pass over hand-written specs need not pay.
FAST_FROM = 64 * 1024
_NOT_FAST = object()


def _fast(text: str) -> Any:
    """The document through the fast parser and its cache, or ``_NOT_FAST`` when PyYAML must
    read it (duplicate or merge keys, tags on collections, errors)."""
    from ..spec import fastyaml

    try:
        return fastyaml.load(text)
    except Exception:  # noqa: BLE001 - NotPlain, or anything else: PyYAML reads it and says what is wrong
        return _NOT_FAST


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _has_office_file(spec: dict[str, Any], folder: Path) -> bool:
    """Whether the task reads or produces an office file: one in its workspace, or named by its
    checks, safety rules, oracle or later turns. An attachment name in the seeded records
    alone does not count (world mailboxes carry them in every task that seeds mail)."""
    named = {k: v for k, v in spec.items() if k not in ("prompt", "services")}
    if any(_OFFICE.fullmatch(s.strip()) for s in _strings(named)):
        return True
    ws = spec.get("workspace")
    sub = ws.get("dir", "workspace") if isinstance(ws, dict) else "workspace"
    root = folder / sub if isinstance(sub, str) else None
    if root is None or not root.is_dir():
        return False
    return any(_OFFICE.fullmatch(name) for _, _, names in os.walk(root) for name in names)


def _multi(spec: dict[str, Any]) -> bool:
    user = spec.get("user")
    turns = isinstance(user, dict) and bool(user.get("turns") or user.get("llm"))
    return turns or bool(spec.get("days")) or bool(spec.get("events"))


def oracle_tools(spec: dict[str, Any]) -> tuple[str, ...]:
    """The tool names of the spec's oracle steps, in order (replies left out)."""
    return tuple(str(s["tool"]) for s in spec.get("oracle") or [] if isinstance(s, dict) and s.get("tool"))


def facts(spec: dict[str, Any], folder: Path) -> SpecFacts:
    """The facts of one spec read by :func:`read_spec` (``folder`` holds its workspace)."""
    tags = [str(t) for t in spec.get("tags") or []]
    tools = oracle_tools(spec)
    seeded = spec.get("services") or {}
    services = {k for k, v in seeded.items() if v is not None and k in SERVICE_TOOLS} if isinstance(seeded, dict) \
        else set()
    services |= {_TOOL_SERVICE[t] for t in tools if t in _TOOL_SERVICE}
    return SpecFacts(
        path=str(folder), family=next((t.split(":", 1)[1] for t in tags if t.startswith("family:")), None),
        capabilities=tuple(str(c) for c in spec.get("capabilities") or []), services=frozenset(services),
        oracle_tools=tools, multi=_multi(spec), office=_has_office_file(spec, folder),
        traps=tuple(t.split(":", 1)[1] for t in tags if t.startswith("trap:")),
        trap_announced="trap-announced" in tags,
        prompt_shape=prompt_shape(str(spec.get("prompt") or ""), _names_in(seeded)))


# --------------------------------------------------------------------------- prompt shape
_SUBS = (
    (re.compile(r"[\w.+'-]+@[\w-]+(?:\.[\w-]+)+"), "<email>"),
    (re.compile(r"\bhttps?://\S+|\bwww\.\S+"), "<url>"),
    (re.compile(r"\b[A-Z][a-z]+/[A-Z][A-Za-z_]+\b"), "<zone>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?Z?)?\b"), "<date>"),
    (re.compile(r"\b(?:\d{1,2}(?:st|nd|rd|th)? (?:of )?)?(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?"
                r"(?: \d{1,2}(?:st|nd|rd|th)?)?(?:,? \d{4})?\b"), "<date>"),
    (re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*\b"), "<day>"),
    (re.compile(r"\b\d{1,2}:\d{2}(?:\s?[ap]m)?\b", re.I), "<time>"),
    (re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w]+(?:-[\w]+)+\b"), "<id>"),
    (re.compile(r"[$€£]?\b\d[\d,]*(?:\.\d+)?\b%?"), "<num>"),
    (re.compile(r"\"[^\"\n]{1,80}\"|“[^”\n]{1,80}”"), "<quoted>"),
)
_SENTENCE = re.compile(r"(?<=[.!?:;])\s+|\n+")
_CAPITAL = re.compile(r"^[A-Z][\w'’.-]*$")


def _names_in(seeded: Any) -> list[str]:
    """Names the spec's seed records carry (``name``, ``requester_name``, ``title`` of people and orgs)."""
    out = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if k in ("name", "requester_name", "customer") and isinstance(x, str) and len(x) > 2:
                    out.append(x)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(seeded)
    return sorted(set(out), key=len, reverse=True)


def prompt_shape(prompt: str, names: Iterable[str] = ()) -> str:
    """``prompt`` with its entities replaced: the spec's seeded names, then addresses, links,
    dates, weekdays, times, ids (words with letters and digits joined by hyphens), numbers and
    quoted titles; then every capitalised word that does not open a sentence (a name the
    seed did not list). Lower-cased, spaces collapsed."""
    text = prompt
    for name in names:
        text = text.replace(name, "<name>")
    for pattern, placeholder in _SUBS:
        text = pattern.sub(placeholder, text)
    words_out = []
    for sentence in _SENTENCE.split(text):
        words = sentence.split()
        for n, word in enumerate(words):
            if n and word != "I" and _CAPITAL.match(word.strip("(),")):
                word = "<name>"
            words_out.append(word)
    return re.sub(r"(?:<name>\s*)+", "<name> ", " ".join(words_out).lower()).strip()


# --------------------------------------------------------------------------- a folder
def find_specs(paths: Iterable[str | Path]) -> list[Path]:
    """Every task.yaml under ``paths`` (a spec folder, its task.yaml, or folders of them),
    sorted; folders whose name starts with ``_`` or ``.`` (``_invalid``) are skipped.

    Raises:
        CoworkError: A path does not exist.
    """
    found: set[Path] = set()
    for p in map(Path, paths):
        if p.is_file():
            found.add(p)
        elif (p / "task.yaml").is_file():
            found.add(p / "task.yaml")
        elif p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
                if "task.yaml" in files:
                    found.add(Path(root) / "task.yaml")
                    dirs[:] = []
        else:
            raise CoworkError(f"{p}: no such spec folder or file")
    return sorted(found)


@dataclass(frozen=True)
class Figure:
    """One figure beside its target; ``met`` is None when it cannot be judged (no data)."""

    key: str
    label: str
    value: str
    target: str
    met: bool | None


@dataclass
class Stats:
    """The figures of a batch of specs."""

    specs: int
    generators: int
    capabilities: int
    services: list[str]
    distinct_oracle_sequences: int
    oracle_calls_median: float | None
    oracle_calls_p90: int | None
    share_3_services: float | None
    share_multi: float | None
    share_office: float | None
    trapped: int
    share_trap_announced: float | None
    distinct_prompts: int
    hand_written: int
    unreadable: dict[str, str] = field(default_factory=dict)

    def figures(self) -> list[Figure]:
        """Each figure beside the issue's target."""
        def pct(x: float | None) -> str:
            return "n/a" if x is None else f"{100 * x:.1f} %"

        def at_least(x: float | None, bar: float) -> bool | None:
            return None if x is None else x >= bar

        n_services = len(self.services)
        return [
            Figure("generators", "generators / capabilities / services",
                   f"{self.generators} / {self.capabilities} / {n_services}", f">= 30 / >= 12 / {len(SERVICE_TOOLS)}",
                   self.generators >= 30 and self.capabilities >= 12 and n_services >= len(SERVICE_TOOLS)),
            Figure("oracle_sequences", "distinct oracle tool-name sequences", str(self.distinct_oracle_sequences),
                   ">= 2,000", self.distinct_oracle_sequences >= 2000),
            Figure("oracle_calls", "oracle calls median / p90",
                   f"{_num(self.oracle_calls_median)} / {_num(self.oracle_calls_p90)}", ">= 10 / >= 25",
                   None if self.oracle_calls_median is None or self.oracle_calls_p90 is None
                   else self.oracle_calls_median >= 10 and self.oracle_calls_p90 >= 25),
            Figure("three_services", "tasks touching >= 3 services", pct(self.share_3_services), ">= 30 %",
                   at_least(self.share_3_services, 0.30)),
            Figure("multi", "multi-turn or multi-day", pct(self.share_multi), ">= 15 %",
                   at_least(self.share_multi, 0.15)),
            Figure("office", "reading or producing an office file", pct(self.share_office), ">= 20 %",
                   at_least(self.share_office, 0.20)),
            Figure("trap_announced", f"trapped tasks whose prompt names the trap ({self.trapped} trapped)",
                   pct(self.share_trap_announced), "<= 20 %",
                   None if self.share_trap_announced is None else self.share_trap_announced <= 0.20),
            Figure("distinct_prompts", "distinct prompts after replacing entity names", str(self.distinct_prompts),
                   ">= 5,000", self.distinct_prompts >= 5000),
        ]

    def table(self) -> list[str]:
        """The figures as aligned text lines (a header, then one line each): what ``cowork
        synth stats`` prints and a dataset card quotes."""
        lines = [f"{'figure':58} {'value':>20}  {'target':18} met"]
        for fig in self.figures():
            met = "n/a" if fig.met is None else "yes" if fig.met else "no"
            lines.append(f"{fig.label:58} {fig.value:>20}  {fig.target:18} {met}")
        return lines

    def as_dict(self) -> dict[str, Any]:
        """JSON-able: the raw numbers and the figures with their targets."""
        return {"specs": self.specs, "hand_written": self.hand_written, "generators": self.generators,
                "capabilities": self.capabilities, "services": self.services,
                "distinct_oracle_sequences": self.distinct_oracle_sequences,
                "oracle_calls_median": self.oracle_calls_median, "oracle_calls_p90": self.oracle_calls_p90,
                "share_3_services": self.share_3_services, "share_multi": self.share_multi,
                "share_office": self.share_office, "trapped": self.trapped,
                "share_trap_announced": self.share_trap_announced, "distinct_prompts": self.distinct_prompts,
                "unreadable": self.unreadable,
                "figures": [{"key": f.key, "label": f.label, "value": f.value, "target": f.target, "met": f.met}
                            for f in self.figures()]}


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:g}"


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def p90(values: list[int]) -> int | None:
    """The 90th percentile by nearest rank (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def collect(paths: Iterable[str | Path]) -> Stats:
    """The figures of every spec under ``paths``; a spec that does not read is listed in
    ``unreadable`` (file: reason) and counted nowhere else.

    Raises:
        CoworkError: A path does not exist, or no task.yaml is under them.
    """
    found = find_specs(paths)
    if not found:
        raise CoworkError("no task.yaml under " + ", ".join(map(str, paths)) + "; give spec folders or folders of them")
    all_facts: list[SpecFacts] = []
    unreadable: dict[str, str] = {}
    workers = min(os.cpu_count() or 1, 8)
    if len(found) >= PARALLEL_FROM and workers > 1:
        # YAML parsing is the cost (a generated spec carries its world's records): one process per core.
        with concurrent.futures.ProcessPoolExecutor(workers) as pool:
            read = list(pool.map(_facts_or_error, found, chunksize=16))
    else:
        read = [_facts_or_error(p) for p in found]
    for path, got in zip(found, read):
        if isinstance(got, str):
            unreadable[str(path)] = got
        else:
            all_facts.append(got)
    return summarise(all_facts, unreadable)


#: From this many specs, :func:`collect` reads them in a process per core.
PARALLEL_FROM = 200


def _facts_or_error(path: Path) -> SpecFacts | str:
    """The facts of the spec at ``path``, or why it does not read."""
    try:
        return facts(read_spec(path), path.parent)
    except CoworkError as exc:
        return str(exc)


def summarise(all_facts: list[SpecFacts], unreadable: dict[str, str] | None = None) -> Stats:
    """The figures of these specs' facts."""
    n = len(all_facts)
    calls = [len(f.oracle_tools) for f in all_facts]
    trapped = [f for f in all_facts if f.traps]
    services: Counter[str] = Counter(s for f in all_facts for s in f.services)
    return Stats(
        specs=n, generators=len({f.family for f in all_facts if f.family}),
        capabilities=len({c for f in all_facts for c in f.capabilities}), services=sorted(services),
        distinct_oracle_sequences=len({f.oracle_tools for f in all_facts}),
        oracle_calls_median=float(statistics.median(calls)) if calls else None, oracle_calls_p90=p90(calls),
        share_3_services=_share(sum(len(f.services) >= 3 for f in all_facts), n),
        share_multi=_share(sum(f.multi for f in all_facts), n),
        share_office=_share(sum(f.office for f in all_facts), n), trapped=len(trapped),
        share_trap_announced=_share(sum(f.trap_announced for f in trapped), len(trapped)),
        distinct_prompts=len({f.prompt_shape for f in all_facts}),
        hand_written=sum(f.family is None for f in all_facts), unreadable=dict(unreadable or {}))
