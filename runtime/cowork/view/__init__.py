"""A web view of runs: one self-contained HTML page (``export_html``) or a local server
(``serve``) showing episodes, verdicts linked to the calls that caused them, and diffs."""

from .page import export_html, render
from .server import make_server, serve, url_of
from .source import load_page

__all__ = ["export_html", "load_page", "make_server", "render", "serve", "url_of"]
