"""Serve the page on a local port (stdlib ``http.server``): ``GET /`` reads the source
afresh, so reloading shows episodes a running rollout has written since."""

from __future__ import annotations

import logging
import sys
import threading
import webbrowser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .page import render
from .source import kind_of, load_page

log = logging.getLogger(__name__)


class _Handler(BaseHTTPRequestHandler):
    source: Path  # set on the subclass make_server builds

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] not in ("/", "/index.html"):
            self._send(404, "text/plain; charset=utf-8", b"not found: this server has one page, at /\n")
            return
        try:
            body = render(load_page(self.source)).encode("utf-8")
        except Exception as exc:
            log.exception("cowork view: %s", self.source)
            self._send(500, "text/plain; charset=utf-8", f"cannot show {self.source}: {exc}\n".encode())
            return
        self._send(200, "text/html; charset=utf-8", body)

    def _send(self, code: int, ctype: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s " + format, self.address_string(), *args)


def make_server(source: Path, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A server for the page of ``source``, bound but not yet serving
    (``server.server_address`` holds the port chosen for ``port=0``).

    Raises:
        EvidenceError: ``source`` is not a results folder, bundle or bench report.
        OSError: the address cannot be bound.
    """
    source = Path(source)
    kind_of(source)  # refuse a wrong folder now, not on the first request
    handler = type("ViewHandler", (_Handler,), {"source": source})
    return ThreadingHTTPServer((host, port), handler)


def url_of(server: ThreadingHTTPServer) -> str:
    """The page's URL."""
    host, port = server.server_address[:2]
    name = str(host)  # an AF_INET(6) address is a str (typeshed also allows an AF_UNIX one's bytes)
    name = f"[{name}]" if ":" in name else name
    return f"http://{name}:{port}/"


def serve(source: Path, host: str = "127.0.0.1", port: int = 0, open_browser: bool = False) -> None:
    """Serve the page of ``source`` until Ctrl-C; prints its URL on stdout.

    Binds loopback by default: the page holds everything the agent saw and did.

    Raises:
        EvidenceError: ``source`` is not a results folder, bundle or bench report.
        OSError: the address cannot be bound.
    """
    server = make_server(source, host, port)
    url = url_of(server)
    # The CLI's one line of output for this command: where to point a browser.
    print(f"cowork view: serving {source} at {url} (Ctrl-C to stop)", file=sys.stdout, flush=True)
    if open_browser:
        threading.Timer(0.2, webbrowser.open, args=(url,)).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
