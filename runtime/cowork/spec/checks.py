"""Check models of task spec v1: completion checks and safety rules, one tagged union."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_serializer,
    model_validator,
)

from .paths import WsPath
from .regex import check_pattern


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


# --------------------------------------------------------------------------- matchers
class Matcher(_Frozen):
    """How to match one value: exactly one of the fields is set."""

    equals: Any = None
    """Equal to this value (numbers within ``tolerance``)."""
    contains: str | None = None
    """Text containing this."""
    regex: str | None = None
    """Text in which this regular expression (RE2 syntax) finds a match."""
    glob: str | None = None
    """Text matching this shell-style pattern."""
    one_of: list[Any] | None = None
    """Equal to one of these values."""
    ignore_case: bool = False
    """Compare text case-insensitively."""
    tolerance: float = Field(default=0.0, ge=0)
    """Allowed absolute difference when both sides are numbers (seconds, for ``at``)."""
    absent: bool | None = None
    """``true``: the argument or field is missing (or null); ``false``: it is given."""
    or_absent: bool = False
    """Also match when the argument or field is missing or null (a defaulted argument:
    ``{one_of: ["", "*"], or_absent: true}``)."""
    at: str | None = None
    """A time (ISO 8601): the value is a time that is the same instant (within ``tolerance``
    seconds), whatever zone either side is written in: ``2026-03-04T07:00:00Z`` matches
    ``{at: "2026-03-04T15:00", tz: Asia/Shanghai}``."""
    within: list[str] | None = Field(default=None, min_length=2, max_length=2)
    """Two times ``[start, end]``: the value is a time in that span, both ends included."""
    tz: str | None = None
    """IANA time zone (``Asia/Shanghai``) of the times written without an offset, in ``at`` /
    ``within`` and in the value; default UTC."""

    @model_validator(mode="after")
    def _exactly_one(self) -> "Matcher":
        if len(self.model_fields_set & set(MATCHER_KINDS)) != 1:
            raise ValueError("a matcher needs exactly one of " + ", ".join(MATCHER_KINDS))
        if self.regex is not None:
            check_pattern(self.regex)
        if self.tz is not None or self.at is not None or self.within is not None:
            from .instants import instant, zone

            if self.at is None and self.within is None:
                raise ValueError("tz goes with at or within")
            tz = zone(self.tz)
            given = [self.at] if self.at is not None else list(self.within or [])
            spans = [instant(t, tz) for t in given]
            for text, when in zip(given, spans):
                if when is None:
                    raise ValueError(f"{'at' if self.at is not None else 'within'}: {text!r} is not an ISO 8601 "
                                     "time (2026-03-04T15:00, with or without an offset)")
            if len(spans) == 2 and spans[0] and spans[1] and spans[0] > spans[1]:
                raise ValueError(f"within: the start {given[0]!r} is after the end {given[1]!r}")
        return self

    @model_serializer(mode="wrap")
    def _only_what_was_set(self, handler: Any) -> Any:
        # A dump must load back (spec.json in every evidence bundle): with every field
        # written out, a matcher would set all of them, and a matcher sets exactly one.
        data = handler(self)
        return {k: v for k, v in data.items() if k in self.model_fields_set} if isinstance(data, dict) else data


#: The fields of which a matcher sets exactly one (the rest are modifiers).
MATCHER_KINDS = ("equals", "contains", "regex", "glob", "one_of", "absent", "at", "within")


def _as_matcher(v: Any) -> Any:
    return v if isinstance(v, dict) else {"equals": v}


#: In a spec a bare value means ``{equals: value}``; the schema says so too.
ArgMatcher = Annotated[Matcher, WithJsonSchema({"anyOf": [
    Matcher.model_json_schema(),
    {"type": ["string", "number", "integer", "boolean", "null", "array"]},
]})]


def _as_matchers(v: Any) -> Any:
    return {k: _as_matcher(x) for k, x in v.items()} if isinstance(v, dict) else v


#: A regular expression in RE2 syntax (linear-time matching), checked when the spec loads.
Pattern = Annotated[str, AfterValidator(check_pattern)]
#: Field or argument name -> matcher (a bare value means equals).
Matchers = Annotated[dict[str, ArgMatcher], BeforeValidator(_as_matchers)]


# --------------------------------------------------------------------------- checks
class _Check(_Frozen):
    id: str | None = None
    """Stable name of the check in grades; defaults to ``<type>-<n>``."""
    description: str | None = None
    """What the check means, for people reading the grade."""
    weight: float = Field(default=1.0, ge=0)
    """Weight in the completion score."""
    holds_initially: bool = False
    """The check already holds on the untouched seed on purpose (a "keep this as it is" guard);
    validation does not flag it."""
    after_turn: int | None = Field(default=None, ge=1)
    """Judge on the state and actions as they were when the agent ended this turn (see
    spec.conversation), instead of at the end. A turn the episode never reached is judged at
    the end (nothing happened after it)."""
    after_day: int | None = Field(default=None, ge=1)
    """Judge as things were when this day's last turn ended."""
    example: Annotated[str | None, BeforeValidator(
        lambda v: str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)] = None
    """For a safety rule: an example the rule must catch (a shell command for shell_forbidden,
    an argument value for regex matchers), used by validation to prove the rule can fire."""
    agent: str | None = Field(default=None, min_length=1)
    """Count only the calls of this agent of a harness episode (docs/harness.md): ``main``,
    ``subagent`` (any subagent), or an assignment label / subagent id. In a single-agent
    episode every call is the main agent's. Only on checks that read tool calls."""
    reserved_to: str | None = Field(default=None, min_length=1)
    """The action is this agent's alone (same values as ``agent``): a prohibition then counts
    only the calls of every other agent, so ``tool_not_called`` ``reserved_to: main`` fires
    when a subagent makes the call and not when the main agent does."""


    @model_validator(mode="after")
    def _one_scope(self) -> "_Check":
        if self.after_turn is not None and self.after_day is not None:
            raise ValueError("give after_turn or after_day, not both")
        kind = getattr(self, "type", None)
        if (self.agent is not None or self.reserved_to is not None) and kind not in AGENT_SCOPED:
            raise ValueError(f"agent / reserved_to select tool calls: only on {', '.join(sorted(AGENT_SCOPED))}")
        if self.agent is not None and self.reserved_to is not None:
            raise ValueError("give agent or reserved_to, not both")
        if self.reserved_to is not None and kind not in PROHIBITIONS:
            raise ValueError(f"reserved_to marks a prohibition: only on {', '.join(sorted(PROHIBITIONS))}")
        return self


#: Check types that read the audited tool calls, and so may select them by agent.
AGENT_SCOPED = frozenset({"tool_called", "tool_not_called", "tool_call_count", "call_order", "shell_matches",
                          "shell_forbidden", "destructive_tool_not_used"})
#: Check types that forbid an action (what ``reserved_to`` reserves to one agent).
PROHIBITIONS = frozenset({"tool_not_called", "shell_forbidden", "destructive_tool_not_used"})


class FileExists(_Check):
    """The file exists in the final workspace."""
    type: Literal["file_exists"]
    path: WsPath


class FileAbsent(_Check):
    """The path does not exist in the final workspace."""
    type: Literal["file_absent"]
    path: WsPath


class FileContains(_Check):
    """The file's text contains ``text``."""
    type: Literal["file_contains"]
    path: WsPath
    text: str


class FileRegex(_Check):
    """A regular expression (RE2 syntax) finds a match in the file's text (multiline mode)."""
    type: Literal["file_regex"]
    path: WsPath
    pattern: Pattern
    absent: bool = False
    """Invert: the file exists and the pattern finds no match in it (RE2 has no lookarounds)."""



class JsonEquals(_Check):
    """The JSON file's value at a dotted field path equals ``value``."""
    type: Literal["json_equals"]
    path: WsPath
    field: str
    """Dotted path into the document, list indexes as numbers: ``servers.0.port``."""
    value: Any


class PathUnchanged(_Check):
    """The files at these paths (globs allowed) are byte-for-byte as seeded, and none was added or removed."""
    type: Literal["path_unchanged"]
    paths: list[WsPath] = Field(min_length=1)



class _Calls(_Check):
    tool: str
    args: Matchers = {}
    include_failed: bool = False
    """Count calls that failed too (attempts). By default only calls that succeeded count for
    a minimum, and calls that succeeded or may have (the server died mid-call) for a maximum
    or a prohibition."""
    which: Literal["first", "last"] | int | None = None
    """Look at one call of ``tool`` only (among those counted): the first, the last, or the
    n-th (1-based; -1 is the last); its arguments must then match."""


class ToolCalled(_Calls):
    """Some audited call of ``tool`` matched every argument matcher."""
    type: Literal["tool_called"]
    min_count: int = Field(default=1, ge=1)



class ToolNotCalled(_Calls):
    """No audited call of ``tool`` matched every argument matcher."""
    type: Literal["tool_not_called"]



class ShellMatches(_Check):
    """Some shell command the agent ran matches ``pattern``: one of its simple commands as the
    shell expands and cowork normalises it (see :mod:`cowork.grading.shell`), counting only
    commands that run (not echo's arguments, comments, or what ``true ||`` skips)."""
    type: Literal["shell_matches"]
    pattern: Pattern



class ShellForbidden(_Check):
    """No shell command the agent ran matches ``pattern`` (a forbidden operation), as written or
    as expanded and normalised: split into simple commands, quotes, braces and variables set in
    the line expanded, program names resolved, flags merged; a computed argument that could
    make it match leaves the rule not graded.

    A command pattern is a weak signal: it cannot see what a command computes at run time.
    Prefer effect-based rules (path_unchanged, no_deletions, writes_within, record_unchanged,
    no_record_created) and use this one beside them."""
    type: Literal["shell_forbidden"]
    pattern: Pattern
    forbid_obfuscated: bool = False
    """Also a violation: any command whose effect no pattern can read (eval of computed text,
    a shell fed from a pipe or a command substitution, base64-decoded scripts, inline
    interpreter code that starts processes or builds code)."""



class CsvCellEquals(_Check):
    """A cell of a CSV file (header row names the columns) equals ``value``."""
    type: Literal["csv_cell_equals"]
    path: WsPath
    column: str
    """Column name from the header row."""
    row: int | None = Field(default=None, ge=0)
    """Data row index (0 = first row after the header). Give this or ``where``."""
    where: dict[str, str] | None = None
    """Pick the row whose cells equal these values, e.g. ``{region: north, month: 2026-09}``."""
    value: Any
    """Expected value; compared as a number when both sides parse as numbers."""
    tolerance: float = Field(default=0.0, ge=0)
    """Allowed absolute difference for numbers."""

    @model_validator(mode="after")
    def _one_selector(self) -> "CsvCellEquals":
        if (self.row is None) == (self.where is None):
            raise ValueError("give exactly one of row or where")
        return self


class LineCount(_Check):
    """The file's number of lines lies within [min, max]."""
    type: Literal["line_count"]
    path: WsPath
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _bounds(self) -> "LineCount":
        if self.min is None and self.max is None:
            raise ValueError("give min, max or both")
        return self


class ToolCallCount(_Calls):
    """The number of audited calls of ``tool`` matching ``args`` lies within [min, max]."""
    type: Literal["tool_call_count"]
    min: int = Field(default=0, ge=0)
    max: int | None = Field(default=None, ge=0)



class CallOrder(_Check):
    """These tools were called in this order (other calls may come between)."""
    type: Literal["call_order"]
    tools: list[str] = Field(min_length=2)
    include_failed: bool = False
    """Count failed calls too (by default only calls that succeeded)."""


class WritesWithin(_Check):
    """Every file the agent added, changed or removed lies under one of ``paths`` (globs)."""
    type: Literal["writes_within"]
    paths: list[WsPath] = Field(min_length=1)



class NoDeletions(_Check):
    """No seeded file under ``paths`` (globs; default everything) was deleted."""
    type: Literal["no_deletions"]
    paths: list[WsPath] = ["**"]



class DestructiveToolNotUsed(_Check):
    """No tool annotated destructive was called, except those in ``allow``."""
    type: Literal["destructive_tool_not_used"]
    allow: list[str] = []


class Judge(_Check):
    """An LLM judge scores the outcome against a rubric; ``not_graded`` when no judge is configured."""
    type: Literal["judge"]
    rubric: str = Field(min_length=1)
    """What the judge must decide, phrased as a yes/no question about the outcome."""
    files: list[WsPath] = []
    """Workspace files shown to the judge."""
    include_transcript: bool = True
    """Show the judge the conversation (tool calls and results) too."""
    items: list["RubricItem"] = []
    """A graded rubric instead of one yes/no question: weighted items, each scored in [0, 1]
    by the judge (all in one call); the check's credit is their weighted mean. ``rubric``
    then says what is being graded."""
    pass_at: float = Field(default=1.0, ge=0, le=1)
    """With ``items``: the credit at which the check counts as passed (a safety rule: below
    it, a violation). Partial credit counts in the completion score either way."""
    scope: Annotated["JudgeScope | None", BeforeValidator(lambda v: {v: True} if v == "final_reply" else v)] = None
    """Show the judge only part of the conversation (default: all of it, up to the end of the
    turn a scoped check stands for)."""

    @model_validator(mode="after")
    def _scope_needs_transcript(self) -> "Judge":
        if self.scope is not None and not self.include_transcript:
            raise ValueError("scope selects the part of the transcript the judge sees; it needs "
                             "include_transcript: true")
        return self


class JudgeScope(_Frozen):
    """Which part of the conversation a judge sees: exactly one field is set."""

    final_reply: Literal[True] | None = None
    """Only the agent's final reply (its last message with text): nothing said before it can
    sway the judge."""
    replies_after_turn: int | None = Field(default=None, ge=1)
    """Only the conversation after turn N ended: the user's next message onwards."""
    phase: Literal["clarification", "answer"] | None = None
    """``answer``: the agent's work after the user's last message (the last turn);
    ``clarification``: everything before it, that message included (Claw-Eval's split of a
    consultation into asking and answering)."""
    day: int | None = Field(default=None, ge=1)
    """Only the turns of this day (see ``days``)."""

    @model_validator(mode="after")
    def _exactly_one(self) -> "JudgeScope":
        # By value, not by the fields set: a dump (spec.json in a bundle) writes the nulls too.
        if sum(getattr(self, name) is not None for name in type(self).model_fields) != 1:
            raise ValueError("a judge scope needs exactly one of final_reply, replies_after_turn, phase, day")
        return self

    def describe(self) -> str:
        """The part, in words (the judge is told what it is shown)."""
        if self.final_reply:
            return "the assistant's final reply only"
        if self.replies_after_turn is not None:
            return f"the conversation after turn {self.replies_after_turn} only"
        if self.phase is not None:
            return ("the answer phase only (after the user's last message)" if self.phase == "answer"
                    else "the clarification phase only (up to and including the user's last message)")
        return f"day {self.day} of the conversation only"



class Verifier(_Check):
    """A hidden verifier: files beside task.yaml (never in the task image) and a command run in a
    fresh grader container over a read-only copy of the final workspace; exit code 0 passes."""
    type: Literal["verifier"]
    files: str
    """Folder beside task.yaml mounted read-only at /verifier."""
    command: str = Field(min_length=1)
    """Run with bash in /verifier, as an unprivileged user, with PATH=/usr/bin:/bin and no network."""
    timeout_s: float = Field(default=60, gt=0)


class Plugin(_Check):
    """A custom check from an installed plugin (entry point group ``cowork.checks``)."""
    type: Literal["plugin"]
    name: str
    """Entry point name."""
    options: dict[str, Any] = {}
    """Passed to the plugin."""


class RubricItem(_Frozen):
    """One part of a graded rubric."""

    id: str = Field(min_length=1)
    """Name of the item in the judgement."""
    rubric: str = Field(min_length=1)
    """What earns this item's credit."""
    weight: float = Field(default=1.0, gt=0)
    """Weight of the item in the check's credit."""


class LastActed(_Frozen):
    """The record the agent's last successful call (of ``tool``, or of any tool of ``service``)
    acted on, read from the audit log."""

    tool: str | None = None
    """Only calls of this tool."""
    service: str | None = None
    """Only calls of this service's tools (``expenses``)."""
    arg: str | None = None
    """The record is the one this argument names (``report_id``): the last successful call
    that gives it. Without ``arg``: the records the last successful call changed (its
    audited service actions), skipping calls that changed none of this collection."""

    @model_validator(mode="after")
    def _one_filter(self) -> "LastActed":
        if (self.tool is None) == (self.service is None):
            raise ValueError("last_acted needs exactly one of tool or service")
        return self


def _as_last_acted(v: Any) -> Any:
    return {"tool": v} if isinstance(v, str) else v


class RecordSelector(_Frozen):
    """Which record a record check looks at."""

    last_acted: Annotated[LastActed, BeforeValidator(_as_last_acted)]
    """The record the agent's last successful call acted on: ``{tool: expenses_submit_report,
    arg: report_id}``, or a bare tool name."""


class _Records(_Check):
    service: str
    """Service name: mail, calendar, contacts, documents, tickets, crm, chat, kb, expenses, todo."""
    collection: str
    """Collection in the service's state dump, e.g. ``messages`` or ``events``."""
    where: Matchers = {}
    """Field matchers a record must all satisfy (a list field matches when any element does;
    dotted names reach into nested fields)."""
    only: list[Literal["created", "updated"]] = []
    """Look only at records the episode created or updated (against the seed, with the
    user's and the world's own changes folded in), so a new event is not a seeded one."""



class _Selected(_Records):
    record: RecordSelector | None = None
    """Look only at the record a selector names (``{last_acted: {tool: expenses_submit_report,
    arg: report_id}}``): the last report submitted, not any report."""


class RecordExists(_Selected):
    """At least ``min_count`` records in the final state match ``where``."""
    type: Literal["record_exists"]
    min_count: int = Field(default=1, ge=1)


class RecordAbsent(_Selected):
    """No record in the final state matches ``where``."""
    type: Literal["record_absent"]


class RecordCount(_Selected):
    """The number of final records matching ``where`` lies within [min, max]."""
    type: Literal["record_count"]
    min: int = Field(default=0, ge=0)
    max: int | None = Field(default=None, ge=0)


class NoRecordCreated(_Records):
    """No record created during the episode matches ``where`` (e.g. mail to an outside domain)."""
    type: Literal["no_record_created"]


class RecordUnchanged(_Records):
    """The seeded records matching ``where`` (or listed in ``ids``) were neither changed nor deleted."""
    type: Literal["record_unchanged"]
    ids: list[str] = []


class FieldChanged(_Check):
    """A field of one seeded record differs from the seed at the end (or, ``changed: false``, does not)."""
    type: Literal["field_changed"]
    service: str
    collection: str
    record: str
    """Id of the seeded record."""
    field: str
    changed: bool = True
    """False: the field must still hold its seeded value."""


class NoExternalRecipients(_Check):
    """Nothing was sent or shared outside the allowed domains and addresses: mail the agent sent
    (to, cc, bcc; drafts excluded unless ``include_drafts``), documents it shared, events it invited to."""
    type: Literal["no_external_recipients"]
    allowed_domains: list[str] = Field(min_length=1)
    """Domains inside the organisation, e.g. ``[acme.com]``."""
    allowed_addresses: list[str] = []
    """Outside addresses that are nonetheless allowed."""
    include_drafts: bool = False
    """Count unsent drafts as sent."""


class Statement(_Frozen):
    """A statement to find in the agent's text: ``text`` (a substring) or ``regex``."""

    text: str | None = None
    regex: Pattern | None = None

    @model_validator(mode="after")
    def _one(self) -> "Statement":
        if (self.text is None) == (self.regex is None):
            raise ValueError("a fact is text or regex")
        return self


def _as_fact(v: Any) -> Any:
    return {"text": v} if isinstance(v, str) else v


#: In a spec a bare string means ``{text: ...}``; the schema says so too.
Statements = list[Annotated[Statement, BeforeValidator(_as_fact),
                            WithJsonSchema({"anyOf": [Statement.model_json_schema(), {"type": "string"}]})]]


class Fact(Statement):
    """A statement the text must make; ``label`` and ``distractors`` make a reply that hedges
    (states the fact beside other candidates for the same asked value) fail."""

    label: Pattern | None = None
    """Where the value is stated: the fact must be in a *slot*, the rest of a line after a
    match of this pattern (``^`` and ``$`` match at line ends), e.g. ``'^\\W*retention\\b'``."""
    distractors: Statements = []
    """Wrong candidates for the same asked value (the stale 180 days beside the current 30):
    the check fails when the text states one, in a slot when ``label`` is given, else anywhere."""


#: In a spec a bare string means ``{text: ...}``; the schema says so too.
Facts = list[Annotated[Fact, BeforeValidator(_as_fact),
                       WithJsonSchema({"anyOf": [Fact.model_json_schema(), {"type": "string"}]})]]


class NumberFact(_Frozen):
    """A number the text must state (``1,482,300``, ``1482300.00``, ``EUR 1.78`` all read)."""

    value: float
    tolerance: float = Field(default=0.0, ge=0)
    label: Pattern | None = None
    """Where the value is stated: a *slot* is the rest of a line after a match of this pattern
    (``^`` and ``$`` match at line ends). The value must be in a slot, and a slot that states
    numbers but not this one states another candidate: the check fails."""
    distractors: list[float] = []
    """Wrong candidates for the same asked value (the total with a lost deal counted): the
    check fails when the text states one (within ``tolerance``), in a slot when ``label`` is
    given, else anywhere."""


class Answer(_Check):
    """What the agent said: its final reply (the reply that ended the episode, or the turn for
    a scoped check), any of its messages, or all of them together. Every part given must hold."""
    type: Literal["answer"]
    scope: Literal["final", "any", "all"] = "final"
    """``final``: the last reply; ``any``: some single assistant message satisfies every part;
    ``all``: the agent's messages joined."""
    contains: str | None = None
    """A substring the text must hold."""
    all_of: Facts = []
    """Facts the text must state, each a substring (a bare string) or ``{regex: ...}``."""
    none_of: Facts = []
    """Statements the agent must not make (forbidden claims, leaked secrets): read in every
    message the agent wrote (up to the turn a scoped check stands for), whatever ``scope``."""
    regex: Pattern | None = None
    """A regular expression (RE2) that must find a match."""
    numbers: list[NumberFact] = []
    """Numbers the text must state (within ``tolerance``)."""
    structured: Matchers | None = None
    """A structured answer: the first JSON object in the text (a fenced ```json block or a
    bare ``{...}``) that gives one of these fields must have them all (dotted names reach
    inside), and every other object that gives one must give it the same answer."""
    list_match: Literal["set", "sequence", "any"] = "set"
    """How ``structured`` reads a list in the reply. ``set``: ``equals: [a, b]`` needs the
    same items in any order, and any other matcher matches a list only when it holds exactly
    one item, which matches. ``sequence``: like ``set``, but ``equals`` lists compare in
    order. ``any``: a list matches when the whole list or any one item does (a reply that
    lists every candidate passes)."""
    ignore_case: bool = True
    """Compare text case-insensitively."""

    @model_validator(mode="after")
    def _something(self) -> "Answer":
        if not (self.contains or self.all_of or self.none_of or self.regex or self.numbers or self.structured):
            raise ValueError("an answer check needs at least one of contains, all_of, none_of, regex, numbers, "
                             "structured")
        if any(f.label is not None or f.distractors for f in self.none_of):
            raise ValueError("none_of: label and distractors belong to all_of facts (what the text must state)")
        return self


class DistinctCount(_Check):
    """How many different values: of argument ``arg`` over the calls of ``tool`` (how many
    different tickets were read), or of ``field`` over the records of a collection. The
    count lies within [min, max]."""
    type: Literal["distinct_count"]
    tool: str | None = None
    arg: str | None = None
    args: Matchers = {}
    """With ``tool``: only calls whose arguments match."""
    include_failed: bool = False
    """With ``tool``: count failed calls too (by default only calls that succeeded)."""
    service: str | None = None
    collection: str | None = None
    field: str | None = None
    where: Matchers = {}
    """With ``service``: only records that match."""
    only: list[Literal["created", "updated"]] = []
    """With ``service``: only records the episode created or updated."""
    min: int = Field(default=0, ge=0)
    max: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _one_source(self) -> "DistinctCount":
        calls = self.tool is not None and self.arg is not None
        records = self.service is not None and self.collection is not None and self.field is not None
        if calls == records:
            raise ValueError("give tool and arg, or service, collection and field")
        return self


class AttachmentRef(_Frozen):
    """A file attached to a mail message, judged instead of a workspace file."""

    name: str = Field(min_length=1)
    """The attachment's file name, or a shell-style pattern of it (``variance*.xlsx``); any case."""
    where: Matchers = {}
    """Field matchers the message must satisfy (``to``, ``subject``, ...), as in record checks."""
    folder: str | None = "sent"
    """Only messages in this folder (null: any folder)."""
    only: list[Literal["created", "updated"]] = ["created"]
    """Only messages the episode created (the default) or updated; [] for every message."""


class _OfficeCheck(_Check):
    path: WsPath | None = None
    """The workspace file. Give this or ``attachment``."""
    attachment: AttachmentRef | None = None
    """A file attached to a mail message instead: the check holds when some matching
    message's attachment satisfies it."""

    @model_validator(mode="after")
    def _one_file(self) -> "_OfficeCheck":
        if (self.path is None) == (self.attachment is None):
            raise ValueError("give exactly one of path or attachment")
        return self


#: One value's matcher where a bare value means ``{equals: value}``.
ValueMatcher = Annotated[ArgMatcher, BeforeValidator(_as_matcher)]


class XlsxCell(_OfficeCheck):
    """A cell (or every / any cell of a range) of an xlsx sheet holds the expected value. Formula
    cells are judged by their value: the file's cached result, else the one cowork computes for
    the formula (services.office_text.Evaluator); ``formula`` can require the formula itself."""
    type: Literal["xlsx_cell"]
    sheet: str | None = None
    """Sheet name (any case); default the first sheet."""
    cell: str = Field(pattern=r"^\$?[A-Za-z]{1,3}\$?[1-9]\d*(:\$?[A-Za-z]{1,3}\$?[1-9]\d*)?$")
    """A cell (``D4``) or a range (``B2:B9``)."""
    value: ValueMatcher | None = None
    """The expected value (a bare value means equals; numbers within ``tolerance``), or a
    matcher (contains, regex, one_of, absent...). Dates compare as ``YYYY-MM-DD`` text."""
    values: list[list[Any]] | None = None
    """For a range: the expected values row by row (numbers within ``tolerance``)."""
    tolerance: float = Field(default=0.0, ge=0)
    """Allowed absolute difference for numbers (for ``values``, and a bare ``value``)."""
    mode: Literal["all", "any"] = "all"
    """For a range with ``value``: every cell must match, or at least one."""
    formula: ValueMatcher | None = None
    """The cell's formula (``=SUM(B2:B9)``) must match this; a cell without one fails."""

    @model_validator(mode="after")
    def _expected(self) -> "XlsxCell":
        if self.value is None and self.values is None and self.formula is None:
            raise ValueError("give value, values or formula")
        if self.values is not None and (self.value is not None or ":" not in self.cell):
            raise ValueError("values is for a range (cell: B2:C5), instead of value")
        return self


class DocxContains(_OfficeCheck):
    """A Word document holds text, a heading and/or a table row. Every part given must hold."""
    type: Literal["docx_contains"]
    text: str | None = None
    """Text found in the document's headings, paragraphs or table cells (spaces collapsed)."""
    regex: Pattern | None = None
    """A regular expression (RE2) that finds a match in that text."""
    heading: str | None = None
    """A heading containing this."""
    row: list[str] | None = Field(default=None, min_length=1)
    """A table row holding each of these values as one of its cells, in this order (spaces
    trimmed; numbers compared as numbers)."""
    ignore_case: bool = True
    """Compare text case-insensitively."""

    @model_validator(mode="after")
    def _something(self) -> "DocxContains":
        if self.text is None and self.regex is None and self.heading is None and self.row is None:
            raise ValueError("give text, regex, heading or row")
        return self


class PdfText(_OfficeCheck):
    """A page of a PDF (or any page) holds text or matches a regular expression."""
    type: Literal["pdf_text"]
    page: int | None = Field(default=None, ge=1)
    """1-based page number; default any page."""
    contains: str | None = None
    """Text on the page (whitespace and line breaks collapsed to single spaces on both sides)."""
    regex: Pattern | None = None
    """A regular expression (RE2) that finds a match in the page's text."""
    ignore_case: bool = True
    """Compare text case-insensitively."""

    @model_validator(mode="after")
    def _something(self) -> "PdfText":
        if self.contains is None and self.regex is None:
            raise ValueError("give contains or regex")
        return self


class AllOf(_Check):
    """Every listed check holds."""
    type: Literal["all_of"]
    checks: list["Check"] = Field(min_length=1)


class AnyOf(_Check):
    """At least one listed check holds."""
    type: Literal["any_of"]
    checks: list["Check"] = Field(min_length=1)


class AtLeast(_Check):
    """At least ``k`` of the listed checks hold."""
    type: Literal["at_least"]
    k: int = Field(ge=1)
    checks: list["Check"] = Field(min_length=1)

    @model_validator(mode="after")
    def _k(self) -> "AtLeast":
        if self.k > len(self.checks):
            raise ValueError(f"k is {self.k} but only {len(self.checks)} checks are listed")
        return self


class Not(_Check):
    """The listed check does not hold."""
    type: Literal["not"]
    check: "Check"


class Tier(_Frozen):
    """One tier: its checks all hold -> its credit."""

    credit: float = Field(ge=0, le=1)
    checks: list["Check"] = Field(min_length=1)


class Tiers(_Check):
    """Tiered credit: the highest-credit tier whose checks all hold gives the check's credit in
    [0, 1] (no tier: 0); it passes with the highest tier's credit."""
    type: Literal["tiers"]
    tiers: list[Tier] = Field(min_length=1)


Check = Annotated[
    Union[FileExists, FileAbsent, FileContains, FileRegex, JsonEquals, CsvCellEquals, LineCount,
          PathUnchanged, WritesWithin, NoDeletions, ToolCalled, ToolNotCalled, ToolCallCount, CallOrder,
          ShellMatches, ShellForbidden, DestructiveToolNotUsed, Judge, Verifier, Plugin,
          RecordExists, RecordAbsent, RecordCount, NoRecordCreated, RecordUnchanged, FieldChanged,
          NoExternalRecipients, Answer, DistinctCount, XlsxCell, DocxContains, PdfText,
          AllOf, AnyOf, AtLeast, Not, Tiers],
    Field(discriminator="type"),
]

#: Check types that hold other checks.
COMBINATORS = ("all_of", "any_of", "at_least", "not", "tiers")


def sub_checks(check: Any) -> list[Any]:
    """The checks a combinator holds (its tiers' checks for ``tiers``); [] for others."""
    if check.type == "not":
        return [check.check]
    if check.type == "tiers":
        return [c for t in check.tiers for c in t.checks]
    return list(getattr(check, "checks", []) if check.type in COMBINATORS else [])


def walk(check: Any) -> list[Any]:
    """``check`` and every check it holds, at any depth, outer ones first."""
    return [check, *(c for sub in sub_checks(check) for c in walk(sub))]


def no_outside_checks(check: Any) -> None:
    """ValueError when a verifier sits inside a combinator (it runs outside the grader, in a
    container of its own, by its top-level id), or a judge does without an ``id`` of its own
    (its verdict is asked for and looked up by that id)."""
    for sub in sub_checks(check):
        if sub.type == "verifier":
            raise ValueError(f"a verifier check cannot sit inside {check.type}: it runs outside the grader, by id")
        if sub.type == "judge" and not sub.id:
            raise ValueError(f"a judge inside {check.type} needs its own id: its verdict is looked up by it")
        no_outside_checks(sub)


def nested_judges(check: Any) -> list[Any]:
    """The judge checks ``check`` holds inside it (each with its own id), at any depth."""
    return [c for c in walk(check)[1:] if c.type == "judge"]


for _model in (AllOf, AnyOf, AtLeast, Not, Tier, Tiers, Judge):
    _model.model_rebuild()



