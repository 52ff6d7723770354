r"""Spec regular expressions: one linear-time engine (RE2) for every spec pattern matched on the host.

The text a grader matches is the agent's (its shell commands, files, tool arguments, records),
so a backtracking engine is an attack surface: ``(a|a)*b`` against 32 KB of ``a`` takes seconds
in Python's ``re`` and a megabyte takes minutes. RE2 matches in time linear in the text, and
refuses at spec load what it cannot do in linear time (lookarounds, backreferences).

Python's ``\Z`` (end of text) is accepted and read as RE2's ``\z``; everything else follows
RE2 syntax (https://github.com/google/re2/wiki/Syntax). Classes such as ``\d``, ``\w``,
``\b`` are ASCII-only in RE2.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad spec pattern is reported as a spec error, not on stderr

#: What RE2 refuses that Python accepts, for the error message.
_HINT = ("RE2 syntax: no lookarounds ((?=, (?!, (?<=, (?<!) and no backreferences (\\1); "
         "write the complement out, or use a check that says 'not' (file_regex absent: true, "
         "a safety rule, record_absent)")


def _translate(pattern: str) -> str:
    r"""Python's ``\Z`` is RE2's ``\z``; an escaped backslash before ``Z`` stays as it is."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append("\\z" if nxt == "Z" else ch + nxt)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def compile_pattern(pattern: str, ignore_case: bool = False, multiline: bool = False) -> Any:
    """The compiled RE2 form of a spec pattern (cached).

    Args:
        pattern: The pattern as written in the spec.
        ignore_case: Match case-insensitively.
        multiline: ``^`` and ``$`` match at line boundaries.

    Raises:
        ValueError: when RE2 cannot compile the pattern (the message names it and the fix).
    """
    flags = ("i" if ignore_case else "") + ("m" if multiline else "")
    try:
        return re2.compile((f"(?{flags})" if flags else "") + _translate(pattern), _OPTIONS)
    except re2.error as exc:
        detail = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
    try:
        # Compiling (never matching) with Python's engine only to word the error: a pattern
        # broken for both gets the familiar message, one only RE2 refuses gets the RE2 hint.
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc.msg}") from None
    raise ValueError(f"invalid regular expression {pattern!r}: {detail}; {_HINT}")


def check_pattern(pattern: str) -> str:
    """Validator for spec fields holding a pattern: returns it unchanged.

    Raises:
        ValueError: when RE2 cannot compile it.
    """
    compile_pattern(pattern)
    return pattern


def search(pattern: str, text: str, ignore_case: bool = False, multiline: bool = False) -> bool:
    """Whether ``pattern`` finds a match anywhere in ``text``, in time linear in the text.

    Raises:
        ValueError: when RE2 cannot compile the pattern.
    """
    compiled = compile_pattern(pattern, ignore_case, multiline)
    try:
        return compiled.search(text) is not None
    except UnicodeEncodeError:
        # A lone surrogate (JSON allows \ud800) cannot go to RE2 as UTF-8; match the rest of the text.
        return compiled.search(text.encode("utf-8", "replace").decode("utf-8")) is not None


def findall(pattern: str, text: str) -> list[str]:
    """Every non-overlapping match of a pattern without groups, in linear time.

    Raises:
        ValueError: when RE2 cannot compile the pattern.
    """
    compiled = compile_pattern(pattern)
    try:
        return [m.group(0) for m in compiled.finditer(text)]
    except UnicodeEncodeError:
        return [m.group(0) for m in compiled.finditer(text.encode("utf-8", "replace").decode("utf-8"))]
