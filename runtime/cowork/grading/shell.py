r"""Shell command normalisation for command-pattern rules, and what such rules cannot see.

A spec pattern such as ``\brm\s+(-\w*r\w*|--recursive)\b`` written against raw text misses
``rm -f -r ledger``, ``rm -R ledger``, ``/bin/rm -r``, ``command rm -r``, ``xargs rm -r``,
``{rm,-rf,a}``, ``rm --rec b``, ``rm ${IFS}-rf c``, ``rm $'-rf' d`` and ``f=-rf; rm $f e``.
:func:`commands` turns one command line into the simple commands it runs, each in a normal
form: words expanded as the shell would (quotes, ``$'...'``, brace expansion, ``$IFS``,
variables given a literal value earlier in the line: :mod:`.shell_words`), leading
``VAR=value`` assignments dropped, wrappers (``env``, ``command``, ``nice``, ``timeout``,
``xargs``, ``busybox``, ...) peeled off, the program named by its basename, short flags merged
in the order first seen (``-f -r`` -> ``-fr``), unambiguous prefixes of a known program's long
options completed (``rm --rec`` -> ``--recursive``) and per-program synonyms folded
(``rm -R`` / ``--recursive`` -> ``-r``), options moved before the operands. ``sh -c TEXT``,
``eval TEXT``, ``find -exec CMD ;`` and ``$( )`` / backtick substitutions are followed into the
commands they run; a here-document's body is data, but for the substitutions of an unquoted one
and the script a shell reads from it.

An argument whose text only the run decides (``rm $x`` with ``x`` never given a literal in the
line, ``rm $(cat list)``, a glob that could name a file called ``-rf``) stays *computed*:
:func:`could_match` says whether some value of it could make a pattern match, so a rule can
refuse to call such a command safe. A command whose *program* only the run decides
(``/usr/bin/r[m]``, ``$c`` after ``IFS=_``, ``eval "$x"``, ``... | sh``) is *unresolved*
(:attr:`Command.unresolved`): it could run anything, so no rule can call it safe.

What no pattern can see is text computed at run time and then run: ``eval "$(echo ... |
base64 -d)"``, ``curl ... | sh``, ``python3 -c 'import os; os.system(...)'``.
:func:`obfuscation` names such constructs, so a rule can opt in to treating them as violations.

Everything here runs on agent-supplied text: the scanner is a single pass, recursion and
expansion are bounded, and spec patterns are matched with RE2.
"""

from __future__ import annotations

import os
import shlex
from collections import deque
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from ..spec.regex import compile_pattern, search
from .shell_programs import (
    LONG_OPTIONS,
    NO_FLAG_MERGE,
    SKIP_OPERAND,
    SYNONYMS,
    WRAPPERS,
)
from .shell_values import probes
from .shell_words import COMPUTED, DECLARE, GLOB_MARKS, Scope, TooLarge, expand, is_glob, unmark

__all__ = ["Command", "TooLarge", "commands", "could_match", "inline_code_risk", "obfuscation", "simple_commands"]

#: Deepest nesting followed (substitutions inside ``sh -c`` inside ``eval`` ...); deeper text
#: is still matched raw, and reported by :func:`obfuscation`.
MAX_DEPTH = 8
#: Most simple commands followed in one command line, and most characters scanned with nested
#: scripts: bounds on agent-controlled work (about a second of pure-Python parsing at the top).
MAX_COMMANDS = 20000
MAX_TEXT = 400_000
#: Most words :func:`could_match` normalises for one command line (candidate commands times
#: their length: about a second); past it the line is not read (the rule is not graded).
MAX_PROBES = 500_000
#: How a computed part is shown in a normal form: not a word character, not a blank, and
#: nothing shlex quotes (a quote would keep ``rm -r%`` from reading as ``rm -r...``).
SHOWN_COMPUTED = "%"

SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "busybox-sh"}
INTERPRETERS = {"python", "python3", "python2", "perl", "ruby", "node", "nodejs", "php", "lua", "tclsh", "awk",
                "gawk", "mawk"}
# An interpreter under a versioned or variant name (python3.12, perl5.36, pypy3, luajit, nawk).
_INTERPRETER = (r"^(python|pypy|perl|ruby|jruby|node|nodejs|deno|bun|php|lua|luajit|tclsh|wish"
                r"|awk|gawk|mawk|nawk|busybox-awk)[0-9.]*$")
#: Builtins that run text in this shell: after one, IFS may be anything the text set.
_SOURCING = {"eval", "source", "."}
#: Programs whose arguments are data, never run: ``echo rm -rf x`` removes nothing.
INERT = {"echo", "printf", ":", "true", "false"}
# Not flagged by obfuscation() for a computed argument: they print, test or assign, never run it.
_DATA_ARGS = INERT | DECLARE | {"test", "[", "[["}

_SEPARATORS = ("&&", "||", ";;", "|&", ";", "|", "&", "\n", "(", ")")
# Reserved words that may lead a simple command's text (``do rm -r $x``, ``{ rm -r x; }``).
_RESERVED = {"{", "}", "!", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "coproc"}
# Reserved words that open and close a compound command (for which assignments surely ran).
_OPENERS = {"{", "if", "while", "until", "for", "select", "case", "coproc"}
_CLOSERS = {"}", "fi", "done", "esac"}
_REDIRECT = r"^(\d*|&)(>>?|<<?<?|>&|<&|&>>?|>\|)"
_REDIRECT_RE = compile_pattern(_REDIRECT)


@dataclass
class _Part:
    text: str
    before: list[str] = field(default_factory=list)
    """Separators between the previous part and this one."""
    after: str | None = None
    """The separator that ends this part."""
    subs: list[str] = field(default_factory=list)
    """Bodies of the ``$( )``, ``<( )``, ``>( )`` and backtick substitutions in this part."""
    docs: list[str] = field(default_factory=list)
    """Bodies of its here-documents (``<<EOF``): data, or the script of a shell they feed."""


def _split(text: str) -> list[_Part]:
    """Split a command line into simple-command texts with the separators around each;
    substitution bodies go to the part's ``subs`` and leave :data:`COMPUTED` in its text.
    Quotes are kept for the word scanner; separators inside quotes are text. A here-document's
    body is not a command: it goes to its part's ``docs`` (and, when its delimiter is unquoted,
    the substitutions in it, which run, to ``subs``)."""
    parts: list[_Part] = []
    cur: list[str] = []
    seps: list[str] = []
    subs: list[str] = []
    heredocs: list[tuple[str, bool, bool, int]] = []  # (delimiter, strip tabs, quoted, owner part)
    i, n, quote = 0, len(text), ""
    while i < n:
        ch = text[i]
        if quote == "'":
            cur.append(ch)
            quote = "" if ch == "'" else quote
            i += 1
            continue
        if quote == "$'":  # ANSI-C quoting: a backslash escapes the quote
            cur.append(text[i:i + 2] if ch == "\\" else ch)
            quote = "" if ch == "'" else quote
            i += 2 if ch == "\\" else 1
            continue
        if ch == "\\" and i + 1 < n:
            if text[i + 1] == "\n":  # line continuation
                i += 2
                continue
            cur.append(text[i:i + 2])
            i += 2
            continue
        if text.startswith("$((", i):  # arithmetic: a number, but it may hold a substitution that runs
            end = _closing(text, i + 3, ")")
            end = _closing(text, end + 1, ")") if end < n else end
            body = text[i + 3:end - 1]
            if "$(" in body or "`" in body:
                subs.append(body)
            cur.append(COMPUTED)
            i = end + 1
            continue
        opens = text.startswith(("$(", "<(", ">("), i)
        if opens or ch == "`":
            end = _closing(text, i + (2 if opens else 1), ")" if opens else "`")
            subs.append(text[i + (2 if opens else 1):end])
            cur.append(COMPUTED)
            i = end + 1
            continue
        if ch == '"':
            quote = "" if quote == '"' else '"'
            cur.append(ch)
            i += 1
            continue
        if not quote:
            if ch == "'" or text.startswith("$'", i):
                quote = "'" if ch == "'" else "$'"
                cur.append(text[i:i + (1 if ch == "'" else 2)])
                i += 1 if ch == "'" else 2
                continue
            if ch == "#" and (not cur or cur[-1][-1:].isspace()):
                # A comment runs to the end of the line.
                nl = text.find("\n", i)
                i = n if nl < 0 else nl
                continue
            if text.startswith("<<", i) and not text.startswith("<<<", i) and text[i - 1:i] != "<" \
                    and seps[-2:] != ["(", "("]:  # ``(( a << 2 ))`` shifts bits
                doc = _heredoc_word(text, i + 2)
                if doc is not None:
                    heredocs.append((*doc, len(parts)))
            sep = next((s for s in _SEPARATORS if text.startswith(s, i)), None)
            # '&>' and '>&' are redirections, not separators.
            if sep == "&" and (text.startswith("&>", i) or (cur and cur[-1] in "<>")):
                sep = None
            if sep is not None:
                _close_part(parts, cur, seps, subs, sep)
                cur, subs = [], []
                seps.append(sep)
                i += len(sep)
                if sep == "\n" and heredocs:
                    i = _read_heredocs(text, i, heredocs, parts)
                continue
        cur.append(ch)
        i += 1
    _close_part(parts, cur, seps, subs, None)
    return parts


def _heredoc_word(text: str, i: int) -> tuple[str, bool, bool] | None:
    """The here-document after ``<<`` (``i`` just past it): (delimiter, strip tabs, quoted)."""
    strip = text.startswith("-", i)
    i += strip
    while i < len(text) and text[i] in " \t":
        i += 1
    j = i
    while j < len(text) and text[j] not in " \t\n;&|()<>":
        j += 1
    word = text[i:j]
    delim = "".join(c for c in word if c not in "'\"\\")
    return (delim, strip, delim != word) if delim else None


def _read_heredocs(text: str, i: int, heredocs: list[tuple[str, bool, bool, int]], parts: list[_Part]) -> int:
    """Read the bodies of the pending here-documents from ``i`` (a line start) into their
    parts; returns the index after the last delimiter line."""
    for delim, strip, quoted, owner in heredocs:
        lines: list[str] = []
        while i < len(text):
            nl = text.find("\n", i)
            end = len(text) if nl < 0 else nl
            line, i = text[i:end], end + 1
            if (line.lstrip("\t") if strip else line) == delim:
                break
            lines.append(line)
        body = "\n".join(lines)
        if owner < len(parts):
            parts[owner].docs.append(body)
            if not quoted:  # expanded: its substitutions run (quotes in it are plain text)
                parts[owner].subs.extend(_doc_subs(body))
    heredocs.clear()
    return min(i, len(text))


def _doc_subs(body: str) -> list[str]:
    """The ``$( )`` and backtick substitutions of an expanded here-document body."""
    out, i = [], 0
    while i < len(body):
        if body[i] == "\\":
            i += 2
        elif body.startswith("$(", i) or body[i] == "`":
            start = i + (2 if body[i] == "$" else 1)
            end = _closing(body, start, ")" if body[i] == "$" else "`")
            out.append(body[start:end])
            i = end + 1
        else:
            i += 1
    return out


def _close_part(parts: list[_Part], cur: list[str], seps: list[str], subs: list[str], after: str | None) -> None:
    body = "".join(cur).strip()
    if body:  # an empty part (``;;``, ``( (``) keeps its separators for the next one
        parts.append(_Part(body, list(seps), after, subs))
        seps.clear()


def _closing(text: str, start: int, close: str) -> int:
    """Index of the ``close`` that ends a substitution opened before ``start`` (or the end)."""
    depth, i, quote = 1, start, ""
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = ""
            elif ch == "\\" and quote == '"':
                i += 1
        elif ch == "\\":
            i += 1
        elif ch in "'\"" and close == ")":
            quote = ch
        elif close == "`" and ch == "`":
            return i
        elif close == ")" and ch == "(":
            depth += 1
        elif close == ")" and ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(text)


def is_interpreter(prog: str) -> bool:
    """Whether a program name (a basename) is a script interpreter: ``python3.12``, ``perl``, ``awk``."""
    return prog in INTERPRETERS or (len(prog) < 64 and bool(search(_INTERPRETER, prog)))


def _peel(words: list[str]) -> list[str]:
    """Drop assignments and wrappers until the real program leads; its name becomes a basename."""
    words = _drop_redirections(words)
    for _ in range(16):  # wrappers nest (sudo env nice rm); the bound keeps hostile input cheap
        while words and words[0] in _RESERVED:
            words = words[1:]
        while words and "=" in words[0] and not words[0].startswith(("=", "-")) and words[0].split("=")[0].isidentifier():
            words = words[1:]
        if not words:
            return words
        # ``$HOME/bin/rm`` is ``rm``: only a computed last path part leaves the program unknown.
        prog = os.path.basename(words[0]) or words[0]
        words = [prog, *words[1:]]
        if prog not in WRAPPERS:
            return words
        takes_value = WRAPPERS[prog]
        i = 1
        while i < len(words) and words[i].startswith("-") and words[i] != "-":
            if words[i] == "--":
                i += 1
                break
            i += 2 if words[i] in takes_value else 1
        if prog == "env":
            while i < len(words) and "=" in words[i]:
                i += 1
        i += SKIP_OPERAND.get(prog, 0)
        if i >= len(words):
            return words
        words = words[i:]
    return words


def _drop_redirections(words: list[str]) -> list[str]:
    """Words without redirections (``2>/dev/null``, ``> out``, ``<<< text``): they are not operands."""
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
            continue
        m = _REDIRECT_RE.match(w) if len(w) < 4096 else None
        if m:
            skip = m.end() == len(w)  # the target is the next word
            continue
        out.append(w)
    return out


def _long_option(prog: str, word: str) -> str:
    """``word`` with its option name completed when it is an unambiguous prefix (getopt_long)."""
    known = LONG_OPTIONS.get(prog)
    if not known:
        return word
    name, eq, value = word.partition("=")
    if name in known:
        return word
    matches = [o for o in known if o.startswith(name)]
    return matches[0] + eq + value if len(matches) == 1 else word


def _normal_form(words: list[str]) -> str:
    prog, rest = words[0], words[1:]
    if prog in NO_FLAG_MERGE or prog in SHELLS or is_interpreter(prog):
        return _join([prog, *rest])
    synonyms = SYNONYMS.get(prog, {})
    letters: list[str] = []
    longs: list[str] = []
    operands: list[str] = []
    ended = False
    for w in rest:
        if ended or w == "-" or not w.startswith("-"):
            operands.append(w)
        elif w == "--":
            ended = True
        elif w.startswith("--"):
            w = _long_option(prog, w)
            if w in synonyms:
                letters.append(synonyms[w])
            else:
                longs.append(w)
        elif w in synonyms:
            letters.append(synonyms[w])
        elif w[1:].lstrip("0123456789") == "":  # -5 is a number (head -5), not flags
            operands.append(w)
        else:
            letters.extend(synonyms.get("-" + c, c) for c in w[1:])
    merged = "".join(dict.fromkeys(letters))
    # ``rm -- -r`` removes a file named -r: keep the ``--`` where an operand looks like an option.
    dashdash = ["--"] if any(o.startswith("-") and o != "-" for o in operands) else []
    return _join([prog, *(["-" + merged] if merged else []), *longs, *dashdash, *operands])


def _join(words: list[str]) -> str:
    return shlex.join(unmark(w).replace(COMPUTED, SHOWN_COMPUTED) for w in words)


def _quoted(part: str) -> str:
    return repr(part.replace(COMPUTED, "$(...)")[:80])


def _inner_scripts(words: list[str]) -> list[str]:
    """Command text a simple command runs itself: ``sh -c TEXT``, ``eval TEXT``, ``find -exec``."""
    prog = words[0]
    if prog in SHELLS:
        for j, w in enumerate(words[1:], 1):
            if w.startswith("-") and not w.startswith("--") and "c" in w[1:] and j + 1 < len(words):
                k = j + 2 if words[j + 1] == "--" and j + 2 < len(words) else j + 1
                return [words[k]]
    if prog == "eval":
        return [" ".join(words[1:])]
    if prog == "find":
        out, j = [], 1
        while j < len(words):
            if words[j] in ("-exec", "-execdir", "-ok", "-okdir"):
                k = j + 1
                while k < len(words) and words[k] not in (";", "+"):
                    k += 1
                out.append(shlex.join(words[j + 1:k]))
                j = k
            j += 1
        return out
    return []


@dataclass
class Command:
    """One simple command a command line runs."""

    part: str
    """Its text as written."""
    argv: list[str]
    """Its words after expansion, before wrappers are peeled; :data:`COMPUTED` marks run-time text."""
    words: list[str]
    """The program and its arguments, wrappers peeled."""
    piped: bool
    """It reads a pipe from the command before it."""
    skipped: bool
    """It cannot run: the right of ``true ||`` / ``: ||`` or of ``false &&``."""
    ansi_flags: list[str]
    """``$'...'`` words whose escapes decode to an option."""
    docs: list[str] = field(default_factory=list)
    """Bodies of its here-documents."""

    @property
    def source(self) -> str:
        """Its text for a message: a substitution reads ``$(...)``."""
        return self.part.replace(COMPUTED, "$(...)")

    @property
    def computed(self) -> bool:
        """Some word (the program included) is known only at run time."""
        return any(COMPUTED in w for w in self.argv)

    @property
    def uncertain(self) -> bool:
        """Some word is known only at run time: computed, or a glob that could name a file whose
        name reads as an option (one that starts with a glob character: ``*``, ``[-]rf``)."""
        return any(COMPUTED in w or _leading_glob(w) for w in self.argv)

    @property
    def unresolved(self) -> str | None:
        """Why the program this command runs cannot be named from its text, or None when it can.

        A computed or globbed program name (``$c``, ``/usr/bin/r[m]``), ``eval`` / ``source`` of
        computed text, a shell given computed ``-c`` text or reading its script from a pipe, a
        here-string or a substitution: any program may run, so no command rule can call it safe.
        """
        prog, rest = self.words[0], self.words[1:]
        if COMPUTED in prog:
            return "program name is computed at run time"
        if is_glob(prog):
            return "program name is a glob (the files present when it runs pick the program)"
        if prog == "eval" and any(COMPUTED in w for w in rest):
            return "eval of computed text"
        if prog in ("source", ".") and any(COMPUTED in w or w.startswith("/dev/") for w in rest):
            return f"{prog} of computed text"
        if prog in SHELLS:
            script = _inner_scripts(self.words)
            operands = [w for w in rest if not w.startswith("-")]
            if script and COMPUTED in script[0]:
                return f"{prog} -c with computed text"
            if not script and not self.docs and (self.piped or "<<<" in self.part
                               or any(COMPUTED in w or w.startswith("/dev/") for w in operands)):
                return f"{prog} reads its script from a pipe or substitution"
        return None

    @property
    def inert(self) -> bool:
        """Its arguments are data: ``echo``, ``printf``, ``:``, ``true``, ``false``."""
        return self.words[0] in INERT

    @property
    def normal(self) -> str:
        """The normal form (see the module docstring); computed parts read ``%``."""
        return _normal_form(self.words)


def _walk(command: str):
    """Yield a :class:`Command` for every simple command a command line runs, nested ones
    included (breadth first).

    A variable is expanded to its value when the line surely assigned it a literal before the
    use: once in the whole line, at the top level (not in a subshell, pipeline, loop, branch
    or after ``&&`` / ``||``), by ``NAME=value`` alone or ``export`` / ``local`` / ``readonly``
    / ``declare`` / ``typeset``. Any other use is computed.

    Raises:
        TooLarge: past MAX_TEXT characters or MAX_COMMANDS simple commands, or a brace
            expansion past its bound, so a hostile command line cannot hide its end behind a
            limit (the caller reports the rule as not graded).
    """
    top = Scope.for_line(command)
    pending: deque[tuple[str, int, Scope, bool]] = deque([(command, 0, top, True)])
    scanned = count = 0
    while pending:
        text, depth, scope, outer = pending.popleft()
        scanned += len(text)
        if scanned > MAX_TEXT:
            raise TooLarge(f"command line too large to normalise (over {MAX_TEXT} characters with nested scripts)")
        nest, confused, prev = 0, False, None
        for part in _split(text):
            count += 1
            if count > MAX_COMMANDS:
                raise TooLarge(f"command line too large to normalise (over {MAX_COMMANDS} simple commands)")
            first = part.text.split(None, 1)[0]
            nest += part.before.count("(") - part.before.count(")") - (first in _CLOSERS)
            if nest < 0:  # more closed than opened (``case x in a) ...``): stop trusting assignments
                confused, nest = True, 0
            sep = part.before[-1] if part.before else None
            sure = (outer and not confused and nest == 0 and first not in _RESERVED and first not in _OPENERS
                    and sep in (None, ";", "\n", "&") and part.after not in ("|", "|&", "&"))
            nest += first in _OPENERS
            exp = expand(part.text, scope)
            if depth < MAX_DEPTH:
                pending.extend((s, depth + 1, scope.child(), False) for s in part.subs if s.strip())
            words = _peel(exp.argv)
            _assign(scope, exp.declared if words and words[0] in DECLARE else
                    exp.assignments if not words else [], sure)
            skipped = bool(prev and prev[0] in INERT and (
                (sep == "||" and prev[0] != "false") or (sep == "&&" and prev[0] == "false")))
            prev = words or None
            if not words:
                continue
            yield Command(part.text, exp.argv, words, sep in ("|", "|&"), skipped, exp.ansi_flags, part.docs)
            if words[0] in _SOURCING:
                # The text it runs may set IFS (``eval "I""FS=_"``, a sourced file): from here on
                # no unquoted expansion in this line splits where the grader can tell.
                scope.ifs_changed = True
            if depth < MAX_DEPTH:
                # A shell with no -c text runs the here-document it reads (its last one).
                inners = _inner_scripts(words) or (part.docs[-1:] if words[0] in SHELLS else [])
                for inner in inners:
                    # eval runs in this shell; sh -c and find -exec start a process that sees no
                    # unexported variable of this one.
                    child = scope.child() if words[0] == "eval" else Scope({}, scope.unknowable)
                    pending.append((inner, depth + 1, child, False))


def _assign(scope: Scope, pairs: list[tuple[str, str]], sure: bool) -> None:
    for name, value in pairs:
        if sure and COMPUTED not in value:
            scope.known[name] = value
        else:
            scope.known.pop(name, None)


def commands(command: str) -> list[Command]:
    """The simple commands a command line runs (see :func:`_walk`).

    Raises:
        TooLarge: when the command line is past the normalisation limits.
    """
    return list(_walk(command))


def simple_commands(command: str) -> list[str]:
    """The simple commands a command line runs, each in normal form (see the module docstring).

    Raises:
        TooLarge: when the command line is past the normalisation limits.
    """
    return [c.normal for c in _walk(command)]


def could_match(pattern: str, cmd: Command, budget: list[int] | None = None) -> str | None:
    """A normal form ``cmd`` could take at run time that ``pattern`` matches, or None.

    Each computed part is replaced by probe values (:func:`.shell_probes.probes`: option
    spellings, the empty string, and the words the pattern itself is made of), all at once and
    one at a time, and the result normalised again. The choice: no finite search proves that
    *no* value matches, but the values that matter to a pattern about a program are the ones
    the pattern names (``-r``, ``--recursive``, ``-delete``, ``secrets``); so a command whose
    program the pattern is about, with an argument the run decides, is reported, while
    ``cd "$dir"`` under an ``rm`` rule is not. The arguments of ``echo`` / ``printf`` / ``:``
    are data and are not probed.

    A word starting with a glob character (``*``, ``[-]rf``) is tried the same way, with the
    values it could match as a file name (``rm *`` runs ``rm -rf`` where a file is named
    ``-rf``); ``*.tmp`` never reads as an option and is left as written.

    Raises:
        TooLarge: past MAX_PROBES words of candidates in one ``budget``.
    """
    slots = [j for j, w in enumerate(cmd.argv) if COMPUTED in w or _leading_glob(w)]
    if not slots or (cmd.inert and COMPUTED not in cmd.words[0]):
        return None
    budget = [MAX_PROBES] if budget is None else budget
    for value in probes(pattern):
        variants = [set(slots)] + ([{s} for s in slots[:8]] if len(slots) > 1 else [])
        for chosen in variants:
            argv: list[str] = []
            for j, w in enumerate(cmd.argv):
                fill = value if j in chosen else ""
                if COMPUTED not in w and _leading_glob(w):
                    # The names it matches, or (none matching) the word itself.
                    names = fill.split()
                    glob = unmark(w)
                    argv.extend(names if names and all(fnmatchcase(n, glob) for n in names) else [w])
                elif w == COMPUTED:  # a whole unquoted word: it may be several words, or none
                    argv.extend(fill.split())
                else:
                    argv.append(w.replace(COMPUTED, fill))
            words = _peel(argv)
            if not words:
                continue
            budget[0] -= len(words) + 8  # a candidate costs about as much as 8 words more
            if budget[0] < 0:
                raise TooLarge(f"command line has too many computed arguments to check (over {MAX_PROBES} words "
                               "of candidate commands)")
            norm = _normal_form(words)
            if search(pattern, norm):
                return norm
    return None


def _computed(word: str) -> bool:
    return COMPUTED in word


def _leading_glob(word: str) -> bool:
    """A glob whose matches may start with ``-`` (so read as options): it starts with a glob character."""
    return word[:1] in _GLOB_STARTS


_GLOB_STARTS = set(GLOB_MARKS.values())


# Inline interpreter code that starts processes, builds code or removes files: what a shell
# pattern cannot read. Removal in each language the interpreters speak: Python (os.remove,
# shutil.rmtree, Path.unlink / rmdir), Perl (unlink, rmdir, File::Path's rmtree / remove_tree),
# Ruby (FileUtils, File.delete, Dir.rmdir), Node (fs.rm / rmSync / unlinkSync), PHP, Lua, Tcl.
_INLINE_RISK = (r"\b(os\.(system|popen|exec\w*|spawn\w*|remove|unlink|rmdir|removedirs)|subprocess|shutil\.rmtree"
                r"|pty\.spawn|__import__|exec\s*\(|eval\s*\(|compile\s*\(|b64decode|codecs\.decode|system\s*\("
                r"|`|qx|child_process|execSync|spawnSync|unlink(Sync)?\b|rmdir(Sync)?\b|rmSync|rmtree|remove_tree"
                r"|File::Path|File::Remove|FileUtils|File\.(delete|unlink)|Dir\.(delete|rmdir|unlink)"
                r"|rm_rf|rm_r|rm_f|remove_dir|remove_entry|fs(\.promises)?\.rm\b|file\s+delete"
                r"|system\b|exec\b|passthru|shell_exec|proc_open|popen|spawn\b|%x)")


def inline_code_risk(code: str) -> bool:
    """True when program text (the ``python`` tool's code, an interpreter one-liner) starts
    processes, builds code or removes files: what no command pattern can read."""
    return bool(search(_INLINE_RISK, code))


def obfuscation(command: str) -> list[str]:
    """Why this command line runs text that no command pattern can read (empty: none found).

    Heuristic by nature: it names every unresolved command (:attr:`Command.unresolved`: a
    computed or globbed program name, eval of computed text, a shell that reads its script from
    a pipe, a here-string or a substitution), an argument computed at run time (``rm $x`` with
    no literal ``x=`` in the line, ``rm $(cat list)``, backticks, ``${...}``) to any program but
    ``echo`` / ``printf`` / ``:``, ``$'...'`` escapes that spell an option, and interpreter
    one-liners (``python3.12 -c``, ``perl -MFile::Path -e``, ``ruby -e``) that start processes,
    build code or remove files.

    Raises:
        TooLarge: when the command line is past the normalisation limits.
    """
    reasons: list[str] = []
    for cmd in _walk(command):
        part, words, piped = cmd.part, cmd.words, cmd.piped
        prog = words[0]
        unresolved = cmd.unresolved
        if unresolved:
            reasons.append(f"{unresolved}: {_quoted(part)}")
        elif is_interpreter(prog) and (piped and not any(w in ("-c", "-e", "-E", "-r") for w in words[1:])
                                        and "awk" not in prog):
            reasons.append(f"{prog} reads its program from a pipe: {_quoted(part)}")
        elif is_interpreter(prog) and search(_INLINE_RISK, " ".join([*words[1:], *cmd.docs])):
            # Options too: ``perl -MFile::Path=rmtree``, ``ruby -rfileutils`` load the remover.
            reasons.append(f"{prog} inline code starts processes, builds code or removes files: {_quoted(part)}")
        elif cmd.ansi_flags:
            reasons.append(f"$'...' escapes spell an option ({cmd.ansi_flags[0][:40]}): {_quoted(part)}")
        elif prog not in _DATA_ARGS and any(_computed(w) for w in words[1:]):
            reasons.append(f"{prog} has an argument computed at run time: {_quoted(part)}")
    return list(dict.fromkeys(reasons))
