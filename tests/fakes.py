"""Test doubles that speak real protocols: a chat-completions server on loopback; a
workspace archive as the export writes it."""

import io
import json
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeChatServer:
    """An OpenAI-compatible endpoint on loopback that records requests.

    Args:
        responses: ``(status, payload)`` pairs played in order, one per POST; or a function
            ``answer(method, path, body) -> (status, payload)`` deciding each request (GET
            included, ``body`` None), for a server whose answer depends on what it is asked.
    """

    def __init__(self, responses):
        self.answer = responses if callable(responses) else None
        self.responses = [] if callable(responses) else list(responses)
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, method, body):
                outer.requests.append({"method": method, "path": self.path,
                                       "auth": self.headers.get("Authorization"), "body": body})
                status, payload = (outer.answer(method, self.path, body) if outer.answer
                                   else outer.responses.pop(0))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                self._reply("POST", json.loads(self.rfile.read(int(self.headers["Content-Length"]))))

            def do_GET(self):
                if outer.answer is None:
                    self.send_error(405)
                    return
                self._reply("GET", None)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def tar_of(files: dict) -> bytes:
    """A workspace archive holding these regular files (content as bytes or text)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            data = data.encode() if isinstance(data, str) else data
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
