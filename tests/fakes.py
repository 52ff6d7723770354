"""Test doubles: a chat-completions server on loopback; a sandbox without a container; a
workspace archive as the export writes it."""

import io
import json
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

from cowork.formats import INVALID_ARGUMENTS_KEY
from cowork.sandbox.sandbox import ToolResult


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


class FakeSandbox:
    """Enough of a Sandbox for the episode loop and the TRL environment, with no container:
    one ``read_file`` tool. Every call is kept in ``calls``.

    Args:
        spec: The TaskSpec it runs.
        files: Path -> text that ``read_file`` serves when no ``replies`` are given (an
            unknown path, another tool or unreadable arguments are refused as an error).
        replies: Answers played in order instead, one per call (the list is shared, so a
            test may append to it later): a text, an error when it starts with ``!``, or an
            exception to raise.
    """

    image = "img"

    def __init__(self, spec, files=None, replies=None):
        self.spec, self.files, self.replies, self.calls = spec, dict(files or {}), replies, []
        #: What ``diagnose`` answers: (whose fault, why).
        self.diagnosis = ("agent", "server killed")

    async def list_tools(self):
        return [SimpleNamespace(name="read_file", description="Read a file",
                                input_schema={"type": "object", "properties": {"path": {"type": "string"}}})]

    async def tools(self):
        return await self.list_tools()

    async def call_tool(self, name, args, timeout=None):
        self.calls.append((name, args))
        if self.replies is not None:
            reply = self.replies.pop(0)
            if isinstance(reply, Exception):
                raise reply
            return ToolResult(tool=name, args=args, is_error=reply.startswith("!"), text=reply.lstrip("!"),
                              duration_ms=1.0)
        if name != "read_file" or INVALID_ARGUMENTS_KEY in args or args.get("path") not in self.files:
            return ToolResult(tool=name, args=args, is_error=True, text=f"Refused: bad call {name} {args}",
                              duration_ms=0.0)
        return ToolResult(tool=name, args=args, is_error=False, text=self.files[args["path"]], duration_ms=0.0)

    async def diagnose(self):
        return self.diagnosis


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
