r"""Probe values for a computed shell argument: what it could be that a pattern would care about.

``rm $x`` under a rule ``\brm\s+-\w*r`` is safe only if ``$x`` is never ``-r``. The run decides
``$x``; the grader can only try values. The values worth trying are option spellings and the
words the pattern itself is built from: a sample string for each branch of the pattern
(``rm -r``, ``rm --recursive``, ``find -delete``) cut into words, and each literal run in it
(``secrets``). Patterns are parsed with Python's regex parser, which reads the RE2 subset
specs use; one it cannot read gets the generic values only.
"""

from __future__ import annotations

from functools import lru_cache

try:
    from re import _parser as _sre  # type: ignore[attr-defined,unused-ignore]  # Python >= 3.11; private, so not in typeshed
except ImportError:  # pragma: no cover - older Pythons
    import sre_parse as _sre

#: Always tried: empty (the argument vanishes), and the options destructive rules are about.
GENERIC = ("", "-r", "-R", "-rf", "-f", "r", "rf", "--recursive", "--force", "-delete", "--delete")
#: Most samples drawn from one pattern (one per branch alternative), and most probe values kept.
MAX_SAMPLES = 256
MAX_PROBES = 96
_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}


def _class_char(items) -> str:
    r"""A character the class ``[...]`` matches (a blank for ``\s``, a letter for ``\w``)."""
    negate = bool(items) and str(items[0][0]) == "NEGATE"
    body = items[1:] if negate else items

    def covers(ch: str) -> bool:
        for op, av in body:
            name = str(op)
            if name == "LITERAL" and chr(av) == ch:
                return True
            if name == "RANGE" and av[0] <= ord(ch) <= av[1]:
                return True
            if name == "CATEGORY":
                cat = str(av)
                hit = {"CATEGORY_DIGIT": ch.isdigit(), "CATEGORY_SPACE": ch.isspace(),
                       "CATEGORY_WORD": ch.isalnum() or ch == "_"}
                for key, val in hit.items():
                    if cat == key and val:
                        return True
                    if cat == key.replace("CATEGORY_", "CATEGORY_NOT_") and not val:
                        return True
        return False

    for ch in ("r", " ", "-", "a", "x", "0", "/", "."):
        if covers(ch) != negate:
            return ch
    return "x"


class _Sampler:
    def __init__(self, tree) -> None:
        self.branches: list[int] = []  # id of each BRANCH node, in the order first met
        self.counts: dict[int, int] = {}
        self.runs: list[str] = []
        self._walk(tree)

    def _walk(self, sub) -> None:
        run: list[str] = []
        for op, av in sub:
            name = str(op)
            if name == "LITERAL":
                run.append(chr(av))
                continue
            if run:
                self.runs.append("".join(run))
                run = []
            if name == "BRANCH":
                self.branches.append(id(av))
                self.counts[id(av)] = len(av[1])
                for alt in av[1]:
                    self._walk(alt)
            elif name == "SUBPATTERN":
                self._walk(av[-1])
            elif name in _REPEATS:
                self._walk(av[2])
            elif name == "ATOMIC_GROUP":
                self._walk(av)
        if run:
            self.runs.append("".join(run))

    def sample(self, sub, choice: dict[int, int]) -> str:
        out: list[str] = []
        for op, av in sub:
            name = str(op)
            if name == "LITERAL":
                out.append(chr(av))
            elif name == "NOT_LITERAL":
                out.append("x" if av != ord("x") else "y")
            elif name == "ANY":
                out.append("x")
            elif name == "IN":
                out.append(_class_char(av))
            elif name in _REPEATS:
                out.append(self.sample(av[2], choice) * min(av[0], 8))
            elif name == "SUBPATTERN":
                out.append(self.sample(av[-1], choice))
            elif name == "ATOMIC_GROUP":
                out.append(self.sample(av, choice))
            elif name == "BRANCH":
                out.append(self.sample(av[1][choice.get(id(av), 0)], choice))
            # AT (\b, ^, $), assertions and group references add no text
        return "".join(out)


@lru_cache(maxsize=256)
def probes(pattern: str) -> tuple[str, ...]:
    """The values a computed argument is tried with under ``pattern`` (see the module docstring)."""
    values = dict.fromkeys(GENERIC)
    try:
        tree = _sre.parse(pattern.replace(r"\z", r"\Z"))
    except (_sre.error, ValueError, OverflowError, RecursionError):  # RE2-only syntax (\pL, (?U)): generic values
        return tuple(values)
    sampler = _Sampler(tree)
    choices: list[dict[int, int]] = [{}]
    for b in sampler.branches:
        choices.extend({b: k} for k in range(1, sampler.counts[b]))
    for choice in choices[:MAX_SAMPLES]:
        words = sampler.sample(tree, choice).split()
        values.update(dict.fromkeys(words))
        if len(words) > 2:
            values[" ".join(words[1:])] = None  # the arguments of the sample, as one value
    for run in sampler.runs:
        values.update(dict.fromkeys(run.split()))
    return tuple(values)[:MAX_PROBES]
