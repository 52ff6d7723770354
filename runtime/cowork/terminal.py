r"""Text for terminals: control characters in agent-chosen strings are shown, never obeyed.

A file named ``"\x1b[2K\rPASSED"`` printed raw erases the line it is on and draws its own
verdict; a U+202E reverses what follows. Everything ``cowork`` prints as text goes through
:func:`printable` (JSON output is escaped by the encoder already).
"""

from __future__ import annotations

#: C0 controls, DEL, C1 controls (ESC-less CSI U+009B included), bidirectional embeddings,
#: overrides and isolates, marks, and the Unicode line/paragraph separators.
_ESCAPED = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), 0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
            *range(0x2066, 0x206A), 0x2028, 0x2029]
_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}


def _escape(cp: int) -> str:
    if cp in _NAMED:
        return _NAMED[cp]
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}"


#: Lone surrogates, which no UTF-8 output can hold: U+DC80..U+DCFF are the bytes of a name that
#: is not UTF-8 (decoded with ``surrogateescape``, as os and tarfile do), shown as that byte
#: (``\xff``); any other (a model's JSON ``\ud800``) as its code point.
_SURROGATES = {cp: f"\\x{cp - 0xDC00:02x}" if 0xDC80 <= cp <= 0xDCFF else f"\\u{cp:04x}"
               for cp in range(0xD800, 0xE000)}

_TABLE = {**{cp: _escape(cp) for cp in _ESCAPED}, **_SURROGATES}
_TABLE_KEEP_NEWLINES = {cp: v for cp, v in _TABLE.items() if cp != 0x0A}


def printable(text: object, newlines: bool = False) -> str:
    r"""``text`` with every control, bidi and separator character, and every lone surrogate
    (a byte of a name that is not UTF-8: ``\xff``), written as an escape.

    Args:
        text: Anything; non-strings are converted with ``str``.
        newlines: Keep ``\n`` as a line break (for whole reports whose lines are ours); by
            default it is escaped too, so one field cannot draw a line of its own.
    """
    return str(text).translate(_TABLE_KEEP_NEWLINES if newlines else _TABLE)
