"""Email addresses, strictly: plain ``local@domain`` with an RFC 5321 host name, nothing else.

The services refuse every other form (display names, ``%`` or ``#`` routing tricks, address
literals such as ``[10.0.0.1]``, non-ASCII or trailing-dot domains), and the grader parses
with the same function, so an address the tools accepted has exactly one domain. Standard
library only: it runs in the container and on the host.
"""

from __future__ import annotations

import re
from functools import lru_cache

#: Local part: dot-separated atoms of letters, digits and ``_ + ' = - ! $ & * / ? ^ ` { | } ~``;
#: no ``%`` or ``#`` (old source routes and fragments some mailers still honour), no quotes.
_LOCAL = re.compile(r"[A-Za-z0-9_+'=!$&*/?^`{|}~-]+(?:\.[A-Za-z0-9_+'=!$&*/?^`{|}~-]+)*", re.ASCII)
#: One DNS label: letters, digits and inner hyphens, 1-63 characters.
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", re.ASCII)
_TLD = re.compile(r"[A-Za-z]{2,63}", re.ASCII)
#: What looks like an address inside free text (a mail body, a note); :func:`find_addresses`
#: keeps those :func:`parse_address` accepts.
#: From the start of a run of address characters only, at most 64 of them (what a local part
#: may hold): linear in the text, where an open ``+`` retried every position of a long run
#: (a base64 attachment beside an address took seconds).
_IN_TEXT = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]+\.[A-Za-z]{2,}", re.ASCII)


def parse_address(value: object) -> tuple[str, str] | None:
    """The lower-cased ``(local, domain)`` of a plain address, or None when it is not one.

    Accepted: ``local@host.tld`` of at most 254 characters, the local part at most 64, the
    host two or more DNS labels and an alphabetic top-level label. Everything else, including
    surrounding spaces and a trailing dot, is refused rather than repaired.
    """
    if type(value) is str:
        return _parse(value)
    return _parse.__wrapped__(value) if isinstance(value, str) else None  # a subclass: not cached


@lru_cache(maxsize=8192)  # a world's few hundred addresses recur in every record that names them
def _parse(value: str) -> tuple[str, str] | None:
    if len(value) > 254 or value.count("@") != 1:
        return None
    local, domain = value.split("@")
    if len(local) > 64 or not _LOCAL.fullmatch(local):
        return None
    labels = domain.split(".")
    if len(labels) < 2 or not all(_LABEL.fullmatch(x) for x in labels) or not _TLD.fullmatch(labels[-1]):
        return None
    return local.lower(), domain.lower()


def check_address(value: str) -> str:
    """The address lower-cased; ValueError saying what a plain address looks like."""
    if parse_address(value) is None:
        raise ValueError(f"{value!r} is not an email address; give a plain local@domain.tld (letters, "
                         "digits, dots and hyphens in the domain; no display name, spaces, '%', '#', "
                         "brackets or trailing dot)")
    return value.lower()


def find_addresses(text: str) -> list[str]:
    """The plain addresses written in free text, in order and as written (each one
    :func:`parse_address` accepts; a look-alike the services would refuse is left out)."""
    return [m for m in _IN_TEXT.findall(text) if parse_address(m) is not None]
