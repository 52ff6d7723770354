"""Shell word expansion for command-pattern rules: quotes, ANSI-C strings, braces, variables.

The shell, not the program, decides what ``{rm,-rf,a}``, ``rm $'-rf' d``, ``rm ${IFS}-rf c`` and
``f=-rf; rm $f e`` run: each is ``rm -rf ...``. :func:`expand` does those expansions for one
simple command the way bash does, as far as the text decides them. What only the run decides
(``$x`` never given a literal value in the line, ``$(...)``, backticks, ``$((...))``, ``${x%y}``,
``$1``) becomes the :data:`COMPUTED` character, so the caller can tell a computed argument
from a literal one. Globs are left as written, but each unquoted glob character (``*``, ``?``,
``[`` with its ``]``; also one a variable's unquoted value brings) is marked (:data:`GLOB_MARKS`):
pathname expansion, not the text, decides what such a word becomes (``/usr/bin/r[m]`` is ``rm``).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

#: Stands for text known only at run time (also the mark ``_split`` leaves for a substitution).
#: A command line cannot carry NUL (``execve`` ends an argument there), so no literal is mistaken for it.
COMPUTED = "\x00"
#: Stand in an expanded word for the unquoted glob characters ``*``, ``?`` and ``[``: the files
#: present when the command runs decide what the word becomes. A literal control character of
#: these in agent text reads as a glob too, which only makes a command less certain.
GLOB_MARKS = {"*": "\x01", "?": "\x02", "[": "\x03"}
_UNMARK = str.maketrans({v: k for k, v in GLOB_MARKS.items()})
#: Most words one word may expand to by brace expansion (``{a,b}{c,d}`` is 4); past it the
#: command is not read (:class:`TooLarge`), so an expansion cannot hide its end behind a cap.
MAX_BRACE_WORDS = 256
#: Most words brace expansion adds to one simple command, all its words together.
MAX_EXPANDED_WORDS = 4096
#: Longest word brace expansion is tried on; a longer unquoted word holding ``{`` is not read.
MAX_BRACE_TEXT = 4096

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=")
# A run of name characters: a use after ``$`` / ``${``, or a word that may name a variable.
# Matched with Python's re on agent text: no nested quantifier, so linear time.
_NAME_TOKEN = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][A-Za-z0-9_]*(\+?=)?")
_BEFORE_NAME = ("", " ", "\t", "\n", "=", "(", ";", "&", "|", "'", '"', "{")
_AFTER_NAME = ("", " ", "\t", "\n", ";", "&", "|", ")", "<", ">", "+", "'", '"', "[", "}")
_SEQUENCE = re.compile(r"(-?\d{1,9})\.\.(-?\d{1,9})(?:\.\.(-?\d{1,9}))?|([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?\d{1,9}))?")
_ANSI = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
         "\\": "\\", "'": "'", '"': '"', "?": "?"}
# Declaration builtins whose NAME=VALUE operands set variables; flags other than these make the
# value something else (an array, an integer, a name reference): not a literal.
DECLARE = {"export", "local", "readonly", "declare", "typeset"}
_PLAIN_DECLARE_FLAGS = {"-x", "-r", "-g", "--"}


def is_glob(word: str) -> bool:
    """Whether an expanded word holds an unquoted glob character (see :data:`GLOB_MARKS`)."""
    return any(m in word for m in GLOB_MARKS.values())


def unmark(word: str) -> str:
    """An expanded word with its glob marks read back as ``*``, ``?`` and ``[``."""
    return word.translate(_UNMARK)


class TooLarge(ValueError):
    """The command line holds more text, simple commands or expansions than normalisation follows."""


@dataclass
class Scope:
    """What the variables of one command line hold, as far as its text decides.

    ``known`` holds values from literal assignments the line surely ran before the use;
    ``unknowable`` names variables assigned twice, or in ways a grader does not follow
    (``read f``, ``for f in``, ``unset f``, ``declare -n``, a conditional branch): their uses are
    computed whatever ``known`` says."""

    known: dict[str, str] = field(default_factory=dict)
    unknowable: frozenset[str] = frozenset()
    ifs_changed: bool = False
    """``IFS`` may differ from the default (assigned, read into, or set by ``eval`` / ``source``
    text): an unquoted expansion then splits where the grader cannot tell, so it is computed."""

    @classmethod
    def for_line(cls, command: str) -> Scope:
        """An empty scope whose ``unknowable`` names come from the whole command line's text:
        a name is trusted only when its one ``NAME=`` in the line is its only mention outside
        ``$NAME`` / ``${NAME}`` (so a loop that reassigns it, or a ``read`` into it, cannot
        leave a stale value in ``known``)."""
        assigned: dict[str, int] = {}
        bare: set[str] = set()
        for m in _NAME_TOKEN.finditer(command):
            tok = m.group(0)
            if tok.startswith("$"):
                continue
            if m.group(1):
                name = tok[:-len(m.group(1))]
                assigned[name] = assigned.get(name, 0) + 1
            elif command[m.start() - 1:m.start()] in _BEFORE_NAME and command[m.end():m.end() + 1] in _AFTER_NAME:
                # A name standing as a word of its own: ``read f``, ``for f in``, ``unset f``,
                # ``declare -n r=f``, ``((f++))`` (not ``-f``, ``f/x`` or ``a.txt``).
                bare.add(tok)
        unknowable = bare | {n for n, k in assigned.items() if k > 1}
        ifs_changed = "IFS" in assigned or "IFS" in bare  # IFS=_, read IFS, printf -v IFS _, for IFS in
        if ifs_changed:
            # A changed IFS changes how every unquoted expansion splits: trust none.
            unknowable |= set(assigned) | {"IFS"}
        return cls({}, frozenset(unknowable), ifs_changed)

    def value(self, name: str) -> str | None:
        """The literal value ``name`` surely holds, or None (not assigned, or unknowable)."""
        return None if name in self.unknowable else self.known.get(name)

    def child(self) -> Scope:
        """A copy for a nested command (a subshell, ``eval``): what it assigns stays in it."""
        return Scope(dict(self.known), self.unknowable, self.ifs_changed)


# A word is a list of items: ("u", ch) unquoted character, ("l", ch) quoted or escaped one,
# ("c", source) computed text, ("s", "") a field break (unquoted $IFS or blank in a value),
# ("q", "") a quote (keeps an empty word a word), ("g", ch) a glob character of an unquoted
# value (globbed like "u", but never a brace or an assignment's "=").
Item = tuple[str, str]


def _ansi_c(text: str, i: int) -> tuple[str, int, bool]:
    """Decode ``$'...'`` whose body starts at ``i``: (text, index after the quote, had escapes)."""
    out, n, escaped = [], len(text), False
    while i < n and text[i] != "'":
        ch = text[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        escaped = True
        nxt = text[i + 1]
        i += 2
        if nxt in _ANSI:
            out.append(_ANSI[nxt])
        elif nxt in "01234567":
            j = i
            while j < n and j < i + 2 and text[j] in "01234567":
                j += 1
            out.append(chr(int(text[i - 1:j], 8) & 0xFF))
            i = j
        elif nxt in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            j = i
            while j < n and j < i + width and text[j] in "0123456789abcdefABCDEF":
                j += 1
            if j == i:
                out.append("\\" + nxt)
            else:
                code = int(text[i:j], 16)
                out.append(chr(code) if code < 0x110000 else "\ufffd")
                i = j
        elif nxt == "c" and i < n:
            out.append(chr(ord(text[i]) & 0x1F))
            i += 1
        else:
            out.append("\\" + nxt)
    return "".join(out), i + 1, escaped


def _closing_brace(text: str, i: int) -> int:
    """Index of the ``}`` closing a ``${`` whose body starts at ``i`` (or the end)."""
    depth = 1
    while i < len(text):
        if text[i] == "\\":
            i += 1
        elif text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(text)


def _closing_arith(text: str, i: int) -> int:
    """Index just past the ``))`` closing a ``$((`` whose body starts at ``i``."""
    depth = 2
    while i < len(text):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


def _expansion(text: str, i: int, scope: Scope, quoted: bool, add) -> int:
    """Read the ``$`` expansion at ``i`` into ``add``; returns the index after it."""
    n = len(text)
    if text.startswith("$((", i):
        end = _closing_arith(text, i + 3)
        add("c", text[i:end])
        return end
    if text.startswith("${", i):
        end = _closing_brace(text, i + 2)
        body = text[i + 2:end]
        if _NAME.fullmatch(body):
            _variable(body, scope, quoted, add, text[i:end + 1])
        else:
            add("c", text[i:end + 1])  # ${x:-y}, ${#x}, ${!x}, ${x[0]}: what they give is the run's
        return end + 1
    m = _NAME.match(text, i + 1)
    if m:
        _variable(m.group(0), scope, quoted, add, m.group(0))
        return m.end()
    if i + 1 < n and (text[i + 1].isdigit() or text[i + 1] in "@*#?$!-"):
        add("c", text[i:i + 2])
        return i + 2
    add("l" if quoted else "u", "$")
    return i + 1


def _variable(name: str, scope: Scope, quoted: bool, add, source: str) -> None:
    if name == "IFS" and name not in scope.unknowable and not scope.ifs_changed:
        # Unquoted, $IFS splits fields (``rm${IFS}-rf`` is ``rm -rf``); quoted, it is blanks.
        if quoted:
            for ch in " \t\n":
                add("l", ch)
        else:
            add("s", "")
        return
    value = scope.value(name)
    if value is None or (scope.ifs_changed and not quoted and value):
        add("c", "$" + source.lstrip("$"))
        return
    for ch in value:
        if ch == COMPUTED:
            add("c", "$" + name)
        elif not quoted and ch in " \t\n":
            add("s", "")
        else:
            add("g" if not quoted and ch in "*?[]" else "l", ch)


def tokenize(text: str, scope: Scope) -> list[list[Item]]:
    """The words of one simple command's text, quotes decoded and variables expanded."""
    words: list[list[Item]] = []
    cur: list[Item] | None = None

    def add(kind: str, val: str) -> None:
        nonlocal cur
        if cur is None:
            cur = []
        cur.append((kind, val))

    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in " \t\n":
            if cur is not None:
                words.append(cur)
                cur = None
            i += 1
        elif ch == COMPUTED:
            add("c", "$(...)")
            i += 1
        elif ch == "\\":
            if i + 1 < n and text[i + 1] != "\n":
                add("l", text[i + 1])
            i += 2
        elif ch == "'":
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            add("q", "")
            for c in text[i + 1:end]:
                add("c" if c == COMPUTED else "l", "$(...)" if c == COMPUTED else c)
            i = end + 1
        elif text.startswith("$'", i):
            decoded, i, _ = _ansi_c(text, i + 2)
            add("q", "")
            for c in decoded:
                add("c" if c == COMPUTED else "l", "$(...)" if c == COMPUTED else c)
        elif ch == '"' or text.startswith('$"', i):
            i += 1 if ch == '"' else 2
            add("q", "")
            while i < n and text[i] != '"':
                c = text[i]
                if c == "\\" and i + 1 < n and text[i + 1] in '$`"\\\n':
                    if text[i + 1] != "\n":
                        add("l", text[i + 1])
                    i += 2
                elif c == "$":
                    i = _expansion(text, i, scope, True, add)
                elif c == COMPUTED:
                    add("c", "$(...)")
                    i += 1
                else:
                    add("l", c)
                    i += 1
            i += 1
        elif ch == "$":
            i = _expansion(text, i, scope, False, add)
        else:
            add("u", ch)
            i += 1
    if cur is not None:
        words.append(cur)
    return words


def render(items: list[Item], field_break: str = " ") -> str:
    """The word as text, computed parts as :data:`COMPUTED`."""
    return "".join(COMPUTED if k == "c" else field_break if k == "s" else v for k, v in items)


def marked(items: list[Item]) -> str:
    """The word as :func:`render` gives it, its unquoted glob characters marked
    (:data:`GLOB_MARKS`); a ``[`` is a glob only with an unquoted ``]`` after it, as in bash."""
    out: list[str] = []
    for j, (kind, val) in enumerate(items):
        if kind in ("u", "g") and val in "*?":
            out.append(GLOB_MARKS[val])
        elif kind in ("u", "g") and val == "[" and any(k in ("u", "g") and v == "]" for k, v in items[j + 2:]):
            out.append(GLOB_MARKS[val])
        else:
            out.append(COMPUTED if kind == "c" else " " if kind == "s" else val)
    return "".join(out)


def assignment(items: list[Item]) -> tuple[str, list[Item]] | None:
    """``(NAME, value items)`` when the word is an assignment (``NAME=...``, ``NAME+=...``)."""
    head = []
    for kind, val in items:
        if kind != "u":
            break
        head.append(val)
        if val == "=":
            break
    m = _ASSIGN.fullmatch("".join(head))
    return None if m is None else (m.group(1), items[m.end():])


def _brace_spans(items: list[Item]) -> tuple[int, int, list[int]] | None:
    """The first ``{`` with its ``}`` and top-level commas that brace expansion expands, or None."""
    stack: list[tuple[int, list[int]]] = []
    found: list[tuple[int, int, list[int]]] = []
    for j, (kind, val) in enumerate(items):
        if kind != "u":
            continue
        if val == "{":
            stack.append((j, []))
        elif val == "," and stack:
            stack[-1][1].append(j)
        elif val == "}" and stack:
            start, commas = stack.pop()
            if commas or _SEQUENCE.fullmatch(render(items[start + 1:j])):
                found.append((start, j, commas))
    # Bash expands the leftmost outermost brace first; inner ones are expanded in the recursion.
    return min(found) if found else None


def _sequence(body: str) -> list[str]:
    m = _SEQUENCE.fullmatch(body)
    assert m
    if m.group(1) is not None:
        a, b, step = int(m.group(1)), int(m.group(2)), abs(int(m.group(3) or 1)) or 1
        count = abs(b - a) // step + 1
        if count > MAX_BRACE_WORDS:
            raise TooLarge(f"brace expansion {{{body}}} makes {count} words (over {MAX_BRACE_WORDS})")
        width = max(len(m.group(1)), len(m.group(2))) if m.group(1).lstrip("-").startswith("0") or \
            m.group(2).lstrip("-").startswith("0") else 0
        return [str(v).zfill(width) for v in range(a, b + (1 if b >= a else -1), step if b >= a else -step)]
    a, b, step = ord(m.group(4)), ord(m.group(5)), abs(int(m.group(6) or 1)) or 1
    return [chr(v) for v in range(a, b + (1 if b >= a else -1), step if b >= a else -step)]


def braces(items: list[Item], budget: list[int] | None = None) -> list[list[Item]]:
    """Brace expansion of one word (``{a,b}c`` -> ``ac``, ``bc``; ``{1..3}``).

    Raises:
        TooLarge: past :data:`MAX_BRACE_WORDS` words, or a long word holding braces.
    """
    budget = [MAX_BRACE_WORDS] if budget is None else budget
    span = _brace_spans(items) if len(items) <= MAX_BRACE_TEXT else None
    if span is None:
        if len(items) > MAX_BRACE_TEXT and ("u", "{") in items:
            raise TooLarge(f"a word of {len(items)} characters with braces is too long to expand (over {MAX_BRACE_TEXT})")
        budget[0] -= 1
        if budget[0] < 0:
            raise TooLarge(f"brace expansion makes over {MAX_BRACE_WORDS} words")
        return [items]
    start, end, commas = span
    if commas:
        bounds = [start, *commas, end]
        alternatives = [items[a + 1:b] for a, b in itertools.pairwise(bounds)]
    else:
        alternatives = [[("l", c) for c in v] for v in _sequence(render(items[start + 1:end]))]
    out: list[list[Item]] = []
    for alt in alternatives:
        out.extend(braces(items[:start] + alt + items[end + 1:], budget))
    return out


def fields(items: list[Item]) -> list[list[Item]]:
    """Field splitting at unquoted ``$IFS`` and blanks of unquoted values; empty unquoted fields vanish."""
    out: list[list[Item]] = []
    cur: list[Item] = []
    for item in items:
        if item[0] == "s":
            out.append(cur)
            cur = []
        else:
            cur.append(item)
    out.append(cur)
    return [f for f in out if f]  # a field of a quote alone is the empty word ""


@dataclass
class Expanded:
    """One simple command after expansion: its leading assignments and its argument words."""

    assignments: list[tuple[str, str]]
    """``(NAME, value)`` of ``NAME=value`` words before the program (value may hold COMPUTED)."""
    argv: list[str]
    """The words the program receives, computed parts as :data:`COMPUTED`, unquoted glob
    characters marked (:data:`GLOB_MARKS`)."""
    declared: list[tuple[str, str]]
    """``(NAME, value)`` set by ``export`` / ``local`` / ``readonly`` / ``declare`` / ``typeset``;
    a value that is not a plain literal is :data:`COMPUTED`."""
    ansi_flags: list[str]
    """``$'...'`` words with escapes that decode to an option (``$'\\x2drf'``)."""


def expand(text: str, scope: Scope) -> Expanded:
    """Expand one simple command's text.

    Raises:
        TooLarge: when brace expansion passes its bounds.
    """
    raw = tokenize(text, scope)
    assignments: list[tuple[str, str]] = []
    k = 0
    while k < len(raw) and (a := assignment(raw[k])) is not None:
        assignments.append((a[0], render(a[1], " ")))
        k += 1
    argv: list[str] = []
    for word in raw[k:]:
        for expanded in braces(word):
            argv.extend(marked(f) for f in fields(expanded))
        if len(argv) > len(raw) + MAX_EXPANDED_WORDS:
            raise TooLarge(f"brace expansion makes over {MAX_EXPANDED_WORDS} more words in one command")
    declared: list[tuple[str, str]] = []
    if argv and argv[0] in DECLARE:
        plain = all(w in _PLAIN_DECLARE_FLAGS for w in argv[1:] if w.startswith("-"))
        for word in raw[k + 1:]:
            a = assignment(word)
            if a is not None:
                declared.append((a[0], render(a[1], " ") if plain else COMPUTED))
    ansi_flags = [m.group(0) for m in re.finditer(r"\$'(?:[^'\\]|\\.)*'", text)
                  if "\\" in m.group(0) and _ansi_c(m.group(0), 2)[0].startswith("-")]
    return Expanded(assignments, argv, declared, ansi_flags)
