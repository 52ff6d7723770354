"""The page: one self-contained HTML file (stylesheet, script and data inline) that works
offline from ``file://``; no build step, no CDN."""

from __future__ import annotations

import html
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..terminal import printable
from .source import load_page, page_json

_SLOTS = re.compile(r"\{(title|css|data|js)\}")


@cache
def _static(name: str) -> str:
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def render(page: dict[str, Any]) -> str:
    """The HTML for page data (see :func:`cowork.view.source.load_page`).

    The data goes in a ``<script type="application/json">`` with ``<``, ``>`` and ``&``
    escaped, the title through ``html.escape``; the script builds the DOM with text nodes
    only, so no value from a task becomes markup.
    """
    title = f"cowork view: {Path(str(page.get('source', ''))).name or page.get('source', '')}"
    parts = {"title": html.escape(printable(title)), "css": _static("view.css"), "js": _static("view.js").replace("</", "<\\/"),
             "data": page_json(page)}
    # One pass, so a slot's content is never scanned for further slots.
    return _SLOTS.sub(lambda m: parts[m.group(1)], _static("page.html"))


def export_html(source: Path, out: Path) -> Path:
    """Write the page for ``source`` to ``out`` as one self-contained HTML file.

    Args:
        source: A results folder (``cowork run/rollout --out``), an evidence bundle
            (``cowork run --evidence``) or a ``cowork bench --json`` report.
        out: The HTML file to write (its folder is created).

    Returns:
        ``out``.

    Raises:
        EvidenceError: ``source`` is none of the above, or its results are unreadable.
        OSError: ``out`` cannot be written.
    """
    text = render(load_page(source))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out
