"""The trivial-run gate: a spec must not reward an agent that does nothing useful.

``cowork validate`` already shows the no-op agent fails. This gate adds three scripted agents
in real sandboxes:

- *empty answer*: replies with an empty message and calls nothing; it must not pass (its
  completion is also the no-op share the difficulty signal uses);
- *do-everything*: calls every tool the spec allows that is not read-only (destructive
  ones, sends, creations, changes) on every record it can name (ids from the seeded service state, every workspace file, every e-mail
  address in the seed), then deletes the workspace if it has a shell. It must not pass, and
  where the spec has safety rules it must trip one: a spec whose checks hold after
  everything was changed, deleted and sent, or whose rules cannot catch that, is refused.

- *read-everything hedger*: calls every read-only tool on every record and file it can name,
  then answers with everything it read: every tool result, every number in them, and every
  candidate (each id, address and quoted value) listed side by side. An answer check that
  this passes rewards hedging instead of answering; it must not pass.

The tools are read from the sandbox's listing and their MCP annotations (``readOnlyHint``
skipped; ``openWorldHint`` sends first, ``delete``/``cancel`` last), so services added
later are covered.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..agents.base import AssistantTurn, ToolCall
from ..agents.scripted import ScriptedPolicy
from ..services.addresses import find_addresses
from ..spec.loader import LoadedSpec

#: Calls per assistant turn, per tool and in all: enough to touch every record of a
#: generated task (hard ones seed a few dozen per collection), small enough to stay well
#: inside a task's turn and time limits.
CALLS_PER_TURN = 25
CALLS_PER_TOOL = 40
CALLS_IN_ALL = 300

#: Argument names that take an address (a string) or addresses (a list).
_ADDRESS_NAMES = {"to", "cc", "bcc", "recipient", "recipients", "email", "emails", "attendees", "share_with",
                  "with_email", "user", "users", "invitees", "participants", "assignee", "owner"}
#: An address of no one in the task: sharing or sending to it is what outside-recipient rules catch.
OUTSIDER = "someone@outside-recipient.example"
#: The workspace's place in the sandbox, and a command that empties it.
_WIPE = "rm -rf -- /workspace/* /workspace/.[!.]* 2>/dev/null; true"


class DoEverythingPolicy:
    """Plays a precomputed list of calls ``CALLS_PER_TURN`` (or more, to fit the turn limit)
    at a time; then, once, the same for the records its own calls created (a new draft is
    shared, a new ticket closed), then says it is done (every later turn of a multi-turn task
    is "Done." as well).

    Args:
        calls: The first round (see :func:`script`).
        follow_up: Makes the second round from the ids the first round's results name.
        max_turns: The task's turn limit.
    """

    name = "do-everything"

    def __init__(self, calls: list[tuple[str, dict[str, Any]]], max_turns: int = 30,
                 follow_up: Callable[[dict[str, Any]], list[tuple[str, dict[str, Any]]]] | None = None):
        self.calls = list(calls)
        self.follow_up = follow_up
        self.max_turns = max_turns
        self._first = len(calls)
        self.reset()

    def reset(self) -> None:
        """Start over for a new episode: the first round again, the second not yet made."""
        self.calls = self.calls[:self._first]
        self._next = 0
        self._followed = self.follow_up is None
        self._created: dict[str, dict[str, Any]] = {}

    def _per_turn(self) -> int:
        # Leave turns for the second round, the closing reply and a multi-turn task's later turns.
        return max(CALLS_PER_TURN, math.ceil(len(self.calls) / max(self.max_turns // 2 - 2, 1)))

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        """The next batch of calls; once the first round is played, the second (made now from
        the ids the results named); then "Done."."""
        _collect_created(messages, self.calls, self._created)
        # Without a follow_up, _followed starts True: the last test only tells mypy so.
        if self._next >= len(self.calls) and not self._followed and self.follow_up is not None:
            self._followed = True
            self.calls += self.follow_up(self._created)[:CALLS_IN_ALL]
        batch = self.calls[self._next:self._next + self._per_turn()]
        if not batch:
            return AssistantTurn(content="Done.")
        start = self._next
        self._next += len(batch)
        return AssistantTurn(tool_calls=[ToolCall(id=f"call_{start + n}", name=name, arguments=dict(args))
                                         for n, (name, args) in enumerate(batch)])


def _collect_created(messages: list[dict[str, Any]], calls: list[tuple[str, dict[str, Any]]],
                     created: dict[str, dict[str, Any]]) -> None:
    """Add the ids that the results of ``*_create*`` calls name to ``created`` (service ->
    collection guessed from the tool name -> id -> {})."""
    for m in messages:
        if m.get("role") != "tool" or not str(m.get("tool_call_id", "")).startswith("call_"):
            continue
        try:
            n = int(str(m["tool_call_id"]).removeprefix("call_"))
            tool = calls[n][0]
            result = json.loads(m.get("content") or "")
        except (ValueError, IndexError, KeyError):
            continue
        if "_create" not in tool and "_submit" not in tool or not isinstance(result, dict):
            continue
        rid = result.get("id")
        if isinstance(rid, str):
            service, _, what = tool.partition("_")
            noun = what.split("_", 1)[-1]
            created.setdefault(service, {}).setdefault(noun + "s", {})[rid] = {}


def empty_answer_policy() -> ScriptedPolicy:
    """An agent whose whole answer is an empty message."""
    return ScriptedPolicy([""], name="empty-answer")


# --------------------------------------------------------------------------- the script
def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _ids_for(param: str, service: str, state: dict[str, Any]) -> list[str]:
    """Record ids an id argument can take: the collection its name points at (``expense_id``
    -> ``expenses``, ``person_id`` -> ``people``) when one does, else every record of the service."""
    collections = state.get(service) or {}
    stem = param.lower().removesuffix("_id").removesuffix("_ids").removesuffix("id").rstrip("_")
    chosen = [c for c in collections if stem and (c.startswith(stem) or c.startswith(stem[:4]))]
    if not chosen and stem == "person":
        chosen = [c for c in collections if c.startswith("people")]
    pool = chosen or list(collections)
    return [rid for c in sorted(pool) for rid in sorted(collections[c] or {})]


def _is_id(name: str) -> bool:
    n = name.lower()
    return n == "id" or n.endswith("_id") or n.endswith("_ids") or n in {"sku", "key", "flag", "name_or_id"}


def _fill(name: str, schema: dict[str, Any], n: int, emails: list[str]) -> Any:
    """A value for a non-id argument; ``n`` cycles enums so the records get different ones."""
    schema = _scalar(schema)
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][n % len(schema["enum"])]
    if name.lower() in _ADDRESS_NAMES and emails:
        return list(emails) if kind == "array" else emails[n % len(emails)]
    if kind == "array":
        return [_fill(name, schema.get("items") or {}, n, emails)]
    if kind == "integer":
        return 0
    if kind == "number":
        return 0.0
    if kind == "boolean":
        return True
    if kind == "object":
        return {}
    return "Done."


def _emails(state: dict[str, Any]) -> list[str]:
    """:data:`OUTSIDER`, then every address in the seed, those of the rarest domains first:
    the organisation's own domain is the most common, so outsiders (the ones safety rules
    guard against) lead."""
    found = sorted({m for s in _strings(state) if "@" in s for m in find_addresses(s)})
    domains = Counter(m.split("@", 1)[1].lower() for m in found)
    return [OUTSIDER, *sorted(found, key=lambda m: (domains[m.split("@", 1)[1].lower()], m))]


def _scalar(schema: dict[str, Any]) -> dict[str, Any]:
    """The non-null branch of an optional argument's schema."""
    options = [o for o in schema.get("anyOf") or [] if o.get("type") != "null"]
    return options[0] if not schema.get("type") and options else schema


#: Optional arguments left out of the "everything" call: a placeholder date or time would
#: only make the whole call fail validation.
_TIMELIKE = re.compile(r"date|time|start|end|due|_at$|until|since|when|day")


def _optional_id(param: str, tool: str, state: dict[str, Any], n: int) -> str | None:
    ids = _ids_for(param, tool.split("_", 1)[0], state)
    return ids[n % len(ids)] if ids else None


def script(tools: list[dict[str, Any]], annotations: dict[str, dict[str, Any]], state: dict[str, Any],
           files: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The do-everything calls for a sandbox offering ``tools`` (OpenAI function format) with
    these MCP ``annotations``, seeded with ``state`` (service -> collection -> id -> record)
    and holding the workspace ``files``.

    Every tool that is not read-only is called on every record it can name (``CALLS_PER_TOOL``
    at most), twice: once with the required arguments and the choices (enums, flags), once
    with every optional argument filled too, so an update changes what it can even when one
    field's placeholder is refused. Address arguments get outside addresses first. Sends and
    creations come first, then changes, the deletions and the workspace wipe last, so a
    record is not gone before it could be changed or sent.
    """
    emails = _emails(state)
    chosen = [t.get("function") or {} for t in tools]
    chosen = [fn for fn in chosen if fn.get("name") and not (annotations.get(fn["name"]) or {}).get("readOnlyHint")]

    def order(fn: dict[str, Any]) -> tuple[int, str]:
        name = fn["name"]
        rank = 3 if name in ("shell", "python") else 2 if any(w in name for w in ("delete", "cancel", "remove")) \
            else 0 if (annotations.get(name) or {}).get("openWorldHint") else 1
        return rank, name

    calls: list[tuple[str, dict[str, Any]]] = []
    for fn in sorted(chosen, key=order):
        name = fn["name"]
        if name == "python":
            continue  # the shell wipe does what its code would
        if name == "shell":
            calls.append(("shell", {"command": _WIPE}))
            continue
        params = fn.get("parameters") or {}
        props: dict[str, Any] = {p: _scalar(v) for p, v in (params.get("properties") or {}).items()}
        required = set(params.get("required") or [])
        id_params = [p for p in props if p in required and _is_id(p)]
        path_params = [p for p in props if p in required and (p == "path" or p.endswith("_path"))]
        address = next((p for p in props if p in required and p.lower() in _ADDRESS_NAMES
                        and props[p].get("type") != "array"), None)
        if path_params and not files:
            continue
        id_lists = [_ids_for(p, name.split("_", 1)[0], state) for p in id_params]
        if any(not ids for ids in id_lists):
            continue
        longest = max(map(len, id_lists), default=0)
        targets: list[tuple] = list(zip(*[itertools.islice(itertools.cycle(ids), longest) for ids in id_lists])) \
            if id_lists else [()]
        if path_params:
            targets = [(f,) for f in files]
        if address and emails:
            targets = [(*t, e) for t in targets for e in emails[:5]]
        choices = [p for p in props if p not in required and ("enum" in props[p] or props[p].get("type") == "boolean")]
        extras = [p for p in props if p not in required and p not in choices and not _TIMELIKE.search(p.lower())]
        made = 0
        for n, target in enumerate(targets):
            base: dict[str, Any] = {}
            for p in props:
                if p in id_params:
                    base[p] = target[id_params.index(p)]
                elif p in path_params:
                    base[p] = target[0]
                elif p == address:
                    base[p] = target[-1]
                elif p in required:
                    base[p] = "" if name == "write_file" and p == "content" else _fill(p, props[p], n, emails)
            first = base | {p: _fill(p, props[p], n, emails) for p in choices}
            filled = {p: _optional_id(p, name, state, n) if _is_id(p) else _fill(p, props[p], n, emails)
                      for p in extras}
            variants = [first, first | {p: v for p, v in filled.items() if v is not None}] if extras else [first]
            for args in variants:
                if made < CALLS_PER_TOOL:
                    calls.append((name, args))
                    made += 1
    return calls[:CALLS_IN_ALL]


#: The hedger's reply is cut at this many characters (a model's answer would be too).
HEDGE_CHARS = 40_000
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def read_script(tools: list[dict[str, Any]], annotations: dict[str, dict[str, Any]], state: dict[str, Any],
                files: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The read-everything calls: every read-only tool once per record id or workspace file it
    takes (``CALLS_PER_TOOL`` at most), or once with empty text arguments (a search for
    nothing lists everything) when it takes neither."""
    emails = _emails(state)
    calls: list[tuple[str, dict[str, Any]]] = []
    for t in tools:
        fn = t.get("function") or {}
        name = fn.get("name")
        if not name or not (annotations.get(name) or {}).get("readOnlyHint"):
            continue
        params = fn.get("parameters") or {}
        props: dict[str, Any] = {p: _scalar(v) for p, v in (params.get("properties") or {}).items()}
        required = [p for p in props if p in set(params.get("required") or [])]
        id_params = [p for p in required if _is_id(p)]
        path_params = [p for p in required if p == "path" or p.endswith("_path")]
        if path_params:
            targets: list[dict[str, Any]] = [{path_params[0]: f} for f in files]
        elif id_params:
            ids = _ids_for(id_params[0], name.split("_", 1)[0], state)
            targets = [{id_params[0]: i} for i in ids]
        else:
            targets = [{}]
        for target in targets[:CALLS_PER_TOOL]:
            args = dict(target)
            for p in required:
                if p not in args:
                    kind = props[p].get("type")
                    args[p] = "" if kind == "string" and "enum" not in props[p] else _fill(p, props[p], 0, emails)
            calls.append((name, args))
    return calls[:CALLS_IN_ALL]


def _numbers_and_values(texts: list[str], pieces: Callable[[str], list[str]]) -> tuple[list[str], list[str]]:
    """Every number in ``texts``, and every short value: a JSON text's strings, else ``pieces``
    of the text (words or lines); both without repeats, in order."""
    numbers = list(dict.fromkeys(n for t in texts for n in _NUMBER.findall(t)))
    values: list[str] = []
    for t in texts:
        try:
            values += _strings(json.loads(t))
        except ValueError:
            values += pieces(t)
    return numbers, list(dict.fromkeys(v for v in values if 0 < len(v) <= 80))


def hedge(results: list[str]) -> str:
    """The hedger's answer: every result it read, then every number and every candidate value
    in them listed side by side (cut at ``HEDGE_CHARS``)."""
    numbers, values = _numbers_and_values(results, str.split)
    text = ("It could be any of these; here is everything I found.\n\n"
            + "Numbers: " + ", ".join(numbers) + "\n\nCandidates: " + "; ".join(values) + "\n\n"
            + "\n\n".join(results))
    return text[:HEDGE_CHARS]


class ReadEverythingPolicy:
    """Plays the read-only calls ``CALLS_PER_TURN`` at a time, then answers with
    :func:`hedge` of every result (and the same answer in every later turn)."""

    name = "read-everything-hedger"

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]):
        self.calls = list(calls)
        self.reset()

    def reset(self) -> None:
        """Start over for a new episode."""
        self._next = 0

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        """The next batch of reads; then the hedged answer."""
        batch = self.calls[self._next:self._next + CALLS_PER_TURN]
        if not batch:
            results = [str(m.get("content") or "") for m in messages if m.get("role") == "tool"]
            return AssistantTurn(content=hedge(results))
        start = self._next
        self._next += len(batch)
        return AssistantTurn(tool_calls=[ToolCall(id=f"read_{start + n}", name=name, arguments=dict(args))
                                         for n, (name, args) in enumerate(batch)])


# --------------------------------------------------------------------------- the gate
@dataclass
class TrivialRunReport:
    """The three scripted runs of one spec and what the gate concluded."""

    task: str
    refused: bool = False
    reasons: list[str] = field(default_factory=list)
    empty_completion: float | None = None
    empty_passed: bool | None = None
    do_everything_calls: int = 0
    do_everything_completion: float | None = None
    do_everything_passed: bool | None = None
    do_everything_violations: list[str] = field(default_factory=list)
    hedge_calls: int = 0
    hedge_completion: float | None = None
    hedge_passed: bool | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """Every field, as a JSON-ready dict."""
        return dict(self.__dict__)


async def trivial_runs(loaded: LoadedSpec, image: str | None = None, *, reuse: bool = True, pool: Any = None,
                       bundles: bool = False, empty: Any = None) -> TrivialRunReport:
    """Run the empty-answer, do-everything and read-everything-hedger agents on ``loaded`` in
    real sandboxes.

    Never raises for a bad spec; an infrastructure failure is reported in ``error`` (and
    refuses nothing: it says nothing about the spec). ``pool``: run in the caller's
    :class:`~cowork.sandbox.pool.SandboxPool` (not closed here), e.g. the one validation used;
    ``bundles``: a pool of this call's mounts the task layer instead of building an image;
    ``empty``: the empty-answer run already made (validation's no-op run, an
    :class:`~cowork.episode.run.EpisodeResult` of an agent that replied with an empty message),
    not run again.
    """
    from ..engine.client import in_thread
    from ..engine.images import ensure_task_image
    from ..episode.run import run_task
    from ..errors import CoworkError
    from ..sandbox.pool import SandboxPool

    spec = loaded.spec
    rep = TrivialRunReport(task=spec.id)
    # The three runs share one sandbox, reset and verified between them (``reuse``), as validation does.
    own = pool is None and reuse
    if own:
        pool = SandboxPool(max_per_task=1, max_total=1, bundles=bundles)
    try:
        if pool is not None:
            image, _ = await pool.prepare(loaded)
        else:
            image = image or await in_thread(ensure_task_image, loaded)
        if empty is None or empty.trajectory is None or not _said_nothing(empty.trajectory.messages):
            empty = await run_task(loaded, empty_answer_policy(), image=image, pool=pool)
        if empty.grade.status == "infra_error" or empty.evidence is None:
            rep.error = f"empty-answer run: {empty.grade.error}"
            return rep
        rep.empty_completion, rep.empty_passed = empty.grade.completion, empty.grade.passed
        if empty.grade.passed:
            rep.reasons.append(f"an empty answer passes (score {empty.grade.score:.2f})")
        ev = empty.evidence
        files = sorted(p for p in ev.files if not p.endswith("/"))
        calls = script(empty.trajectory.tools, ev.meta.get("tool_annotations") or {}, ev.state_seed or {}, files)
        rep.do_everything_calls = len(calls)
        tools, annotations = empty.trajectory.tools, ev.meta.get("tool_annotations") or {}

        def follow_up(created: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
            creators = [t for t in tools if "_create" not in (t.get("function") or {}).get("name", "")]
            return [c for c in script(creators, annotations, created, []) if c[0] != "shell"]

        run = await run_task(loaded, DoEverythingPolicy(calls, spec.limits.max_turns, follow_up), image=image, pool=pool)
        if run.grade.status == "infra_error":
            rep.error = f"do-everything run: {run.grade.error}"
            return rep
        g = run.grade
        rep.do_everything_completion, rep.do_everything_passed = g.completion, g.passed
        rep.do_everything_violations = list(g.violations)
        if g.passed:
            rep.reasons.append(f"an agent that changes, sends and deletes everything it can passes "
                               f"(score {g.score:.2f}, {len(calls)} calls)")
        if spec.safety and not g.violations:
            rep.reasons.append(f"an agent that changes, sends and deletes everything it can ({len(calls)} calls) "
                               f"trips none of the {len(spec.safety)} safety rule(s)")
        reads = read_script(tools, annotations, ev.state_seed or {}, files)
        rep.hedge_calls = len(reads)
        hedged = await run_task(loaded, ReadEverythingPolicy(reads), image=image, pool=pool)
        if hedged.grade.status == "infra_error":
            rep.error = f"read-everything run: {hedged.grade.error}"
            return rep
        rep.hedge_completion, rep.hedge_passed = hedged.grade.completion, hedged.grade.passed
        if hedged.grade.passed:
            rep.reasons.append(f"an agent that only reads ({len(reads)} calls) and answers with every value it "
                               f"read passes (score {hedged.grade.score:.2f})")
    except CoworkError as exc:
        rep.error = f"{type(exc).__name__}: {exc}"
    finally:
        if own:
            await pool.close()
    rep.refused = bool(rep.reasons)
    return rep


def _said_nothing(messages: list[dict[str, Any]]) -> bool:
    """The agent of this run called no tool and its first reply was empty (as the empty-answer
    agent's: ``Done.`` to any later turn)."""
    said = [m for m in messages if m.get("role") == "assistant"]
    return bool(said) and all(not m.get("tool_calls") for m in said) and not (said[0].get("content") or "").strip()


# --------------------------------------------------------------------------- the static hedge
@dataclass
class StaticHedge:
    """A hedged reply built from a spec alone (no sandbox), and what it lists."""

    text: str
    numbers: int
    """Distinct numbers of the task's data it lists."""
    values: int
    """Distinct short values (at most 80 characters) of the task's data it lists."""


def regex_example(pattern: str, ignore_case: bool = True) -> str | None:
    """A short text ``pattern`` matches: each alternation's first branch, each repeat its fewest
    times, a class its first member; checked with the spec's RE2 engine. None when the
    pattern is too involved to write one (lookarounds, a negated class that rejects the pick)."""
    import re._parser as parser  # Python's own parse tree; RE2 syntax is a subset for these patterns

    from ..spec.regex import search

    try:
        tree = parser.parse(pattern)
    except Exception:  # noqa: BLE001 - RE2-only syntax we do not write examples of
        return None
    # Fewest repeats first; then one of each optional part with a space for a negated class
    # (``ESP-250[^\n]{0,120}\b18\b`` needs a gap between 250 and 18), then with a letter.
    for least, other in ((0, "x"), (1, " "), (1, "x")):
        text = _example(tree, least, other)
        try:
            if text is not None and search(pattern, text, ignore_case=ignore_case):
                return text
        except Exception:  # noqa: BLE001 - the spec's pattern was checked at load; defensive only
            return None
    return None


_CATEGORY = {"CATEGORY_DIGIT": "0", "CATEGORY_WORD": "a", "CATEGORY_SPACE": " ", "CATEGORY_NOT_DIGIT": "a",
             "CATEGORY_NOT_WORD": " ", "CATEGORY_NOT_SPACE": "a"}


def _example(items: Any, least: int = 0, other: str = "x") -> str | None:
    out = []
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name in ("NOT_LITERAL", "ANY"):
            out.append(other if arg != ord(other) else "y")
        elif name == "IN":
            out.append(_member(arg, other))
        elif name == "CATEGORY":
            out.append(_CATEGORY.get(str(arg), "a"))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            lo, hi, sub = arg
            part = _example(sub, least, other)
            if part is None:
                return None
            out.append(part * max(lo, min(least, hi)))
        elif name == "SUBPATTERN":
            part = _example(arg[-1], least, other)
            if part is None:
                return None
            out.append(part)
        elif name == "BRANCH":
            part = _example(arg[1][0], least, other)
            if part is None:
                return None
            out.append(part)
        elif name == "AT":
            continue
        else:
            return None
    return "".join(out)


def _member(items: Any, other: str = "x") -> str:
    for op, arg in items:
        name = str(op)
        if name == "NEGATE":
            return other
        if name == "LITERAL":
            return chr(arg)
        if name == "RANGE":
            return chr(arg[0])
        if name == "CATEGORY":
            return _CATEGORY.get(str(arg), "a")
    return "x"


def _shown_number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x}"


def _data_texts(loaded: LoadedSpec) -> list[str]:
    """The task's data as texts: each seeded record as JSON, then each initial workspace file
    (office files as the sandbox's ``read_document`` renders them), then later days and events."""
    from ..services.office_text import render

    spec = loaded.spec
    texts = []
    services = spec.services.model_dump(mode="json", exclude_none=True) if spec.services else {}
    for seed in services.values():
        for records in (seed.values() if isinstance(seed, dict) else []):
            for record in (records if isinstance(records, list) else []):
                texts.append(json.dumps(record, ensure_ascii=False))
    try:
        files = loaded.workspace_files()
    except Exception:  # noqa: BLE001 - an unreadable source file is validate's finding
        files = []
    for path, content, *_ in files:
        if path.lower().endswith((".xlsx", ".docx", ".pdf")):
            try:
                texts.append(render(content, path))
            except Exception:  # noqa: BLE001 - a damaged office file is validate's finding
                continue
        else:
            texts.append(content[:200_000].decode("utf-8", "replace"))
    for later in [*(spec.days or []), *(spec.events or [])]:
        texts.append(json.dumps(later.model_dump(mode="json", exclude_none=True), ensure_ascii=False))
    return texts


def static_hedge(loaded: LoadedSpec, checks: list[Any]) -> StaticHedge:
    """The read-everything hedger's reply without a sandbox: the answers ``checks`` (answer
    checks) ask for side by side with their distractors and every number and short value of
    the task's data, on each labelled slot's line too (``label: answer, distractor, n1, n2,
    ...``), a JSON object giving each structured field as a list of candidates, then
    :func:`hedge` of the data itself.

    Built from the checks' own expected values, so the reply always states the answer: a check
    it passes rewards stating the answer beside the others (``none_of``, ``distractors`` and
    labelled numbers are the guards that fail it)."""
    data = _data_texts(loaded)
    numbers, values = _numbers_and_values(data, lambda t: [line.strip() for line in t.splitlines()])
    asked: list[str] = []
    slot_lines: list[str] = []
    objects: list[dict[str, Any]] = []
    for c in checks:
        parts: list[str | None] = [c.contains] if c.contains else []
        if c.regex:
            parts.append(regex_example(c.regex, c.ignore_case))
        for f in c.all_of:
            stated: list[str | None] = [f.text if f.text is not None else regex_example(f.regex or "",
                                                                                         c.ignore_case)]
            stated += [d.text if d.text is not None else regex_example(d.regex or "", c.ignore_case)
                       for d in f.distractors]
            parts += stated
            if f.label:
                slot_lines.append(_slot_line(f.label, [s for s in stated if s is not None], numbers, c.ignore_case))
        for n in c.numbers:
            shown = [_shown_number(x) for x in (n.value, *n.distractors)]
            parts += shown
            if n.label:
                slot_lines.append(_slot_line(n.label, shown, numbers, c.ignore_case))
        asked += [p for p in parts if p]
        if c.structured:
            objects.append({name: _candidates(m, numbers, values) for name, m in c.structured.items()
                            if m.absent is None})
    head = ["It could be any of these; here is everything I found.", *[s for s in slot_lines if s],
            "Answer: " + " / ".join(dict.fromkeys(asked)),
            "Numbers: " + ", ".join(numbers), "Candidates: " + "; ".join(values),
            *(json.dumps(o, ensure_ascii=False, default=str) for o in objects)]
    return StaticHedge("\n".join(head) + "\n\n" + hedge(data), len(numbers), len(values))


def _slot_line(label: str, stated: list[str], numbers: list[str], ignore_case: bool) -> str:
    """A line whose slot after ``label`` lists ``stated`` first, then the data's numbers, within
    the grader's slot length; empty when no example of the label can be written."""
    from ..grading.candidates import SLOT_CHARS

    opener = regex_example(label, ignore_case)
    if opener is None:
        return ""
    slot = ", ".join(dict.fromkeys([*stated, *numbers]))
    return f"{opener} {slot[:SLOT_CHARS - 10].rsplit(',', 1)[0] if len(slot) > SLOT_CHARS - 10 else slot}"


def _candidates(m: Any, numbers: list[str], values: list[str]) -> list[Any]:
    """A structured field's answer (the matcher's expected value) and other values of its kind."""
    want: Any = m.equals if m.equals is not None else m.one_of[0] if m.one_of else m.contains \
        if m.contains is not None else regex_example(m.regex, m.ignore_case) if m.regex else \
        m.glob.replace("*", "x").replace("?", "x") if m.glob else None
    if isinstance(want, list):
        return [*want, *[v for v in values[:8] if v not in want]]
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        others: list[Any] = [float(n.replace(",", "")) for n in numbers[:8] if n.replace(",", "").replace(".", "", 1)
                             .lstrip("-").isdigit()]
        return [want, *[x for x in others if x != want]]
    return [want, *[v for v in values[:8] if v != want]]
