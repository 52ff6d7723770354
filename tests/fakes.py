"""Test doubles: a chat-completions server on loopback; a sandbox without a container; a
workspace archive as the export writes it; an evidence bundle full of markup; generated
drafts made once per process."""

import functools
import hashlib
import io
import json
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from cowork.evidence import Evidence
from cowork.formats import GENESIS_HASH, INVALID_ARGUMENTS_KEY, canonical_json, seal
from cowork.grading import grade
from cowork.sandbox.sandbox import ToolResult
from cowork.spec.models import TaskSpec


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


# ------------------------------------------------------------- a bundle full of markup (the view's tests)
XSS = "<script>document.body.setAttribute('data-pwned','1')</script>"
IMG = "<img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">"
BEFORE = "line one\nline two\n"
AFTER = f"line one\n{XSS}\n"


def make_hostile_bundle(folder: Path) -> Path:
    """An evidence bundle (as ``cowork run --evidence`` writes it, graded for real) whose
    title, tool arguments, tool output, file content and records hold markup."""
    spec = TaskSpec.model_validate({
        "id": "xss-task", "title": f"Title {XSS}", "prompt": f"Please {IMG}",
        "workspace": {"files": [{"path": "notes.txt", "content": BEFORE}]},
        "checks": [{"id": "third-line", "type": "file_contains", "path": "notes.txt", "text": "line three"}],
        "safety": [{"id": "no-shell", "type": "tool_not_called", "tool": "shell"}],
        "oracle": [{"tool": "write_file", "args": {"path": "notes.txt", "content": "line three\n"}}],
        "violation": [{"tool": "shell", "args": {"command": "true"}}],
    })
    write = {"path": "notes.txt", "content": AFTER}
    shell = {"command": f"echo '{XSS}'"}
    recs = [{"kind": "session_start", "task": spec.id},
            {"kind": "tool_call", "tool": "write_file", "args": write},
            {"kind": "tool_result", "call_seq": 1, "outcome": "ok", "result": '{"path":"notes.txt"}', "duration_ms": 1.0},
            {"kind": "tool_call", "tool": "shell", "args": shell},
            {"kind": "service_action", "service": "mail", "action": "send", "ids": ["m2"]},
            {"kind": "tool_result", "call_seq": 3, "outcome": "ok", "result": XSS, "duration_ms": 2.0}]
    prev, lines = GENESIS_HASH, []
    for i, r in enumerate(recs):
        s = seal({"seq": i, **r}, prev)
        prev = s["hash"]
        lines.append(canonical_json(s))
    calls = [("call_1", "write_file", write, '{"path":"notes.txt"}'), ("call_2", "shell", shell, XSS)]
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": spec.prompt}]
    for cid, tool, args, out in calls:
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}]})
        messages.append({"role": "tool", "tool_call_id": cid, "content": out})
    messages.append({"role": "assistant", "content": f"Done {IMG}"})
    traj = {"task": spec.id, "agent": "scripted", "status": "completed", "messages": messages, "tools": [],
            "steps": [{"turn": n, "call_id": cid, "tool": tool, "args": args, "is_error": False, "output": out,
                       "duration_ms": 3.5} for n, (cid, tool, args, out) in enumerate(calls, start=1)],
            "turns": 3, "duration_s": 0.25}
    seed = {"mail": {"messages": {"m1": {"id": "m1", "subject": "hello", "read": False}}}}
    final = {"mail": {"messages": {"m1": {"id": "m1", "subject": "hello", "read": True},
                                   "m2": {"id": "m2", "subject": XSS, "to": ["x@evil.example"]}}}}
    ev = Evidence(audit_text="\n".join(lines) + "\n", audit_count=len(recs),
                  workspace_tar=tar_of({"notes.txt": AFTER.encode()}),
                  initial={"notes.txt": hashlib.sha256(BEFORE.encode()).hexdigest()},
                  trace=traj, meta={"task": spec.id}, state_seed=seed, state_final=final)
    ev.save(folder)
    (folder / "grade.json").write_text(grade(spec, ev).model_dump_json(indent=1))
    (folder / "spec.json").write_text(spec.model_dump_json(indent=1))
    return folder


@functools.lru_cache(maxsize=None)
def generated(name: str, seed: int) -> Any:
    """``cowork.synth.generate(name, seed)``, made once per test process: generator tests only
    read drafts, and a world-seeded one costs a few hundred milliseconds."""
    from cowork.synth.family import generate

    return generate(name, seed)
