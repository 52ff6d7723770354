"""The vllm-server client keeps one HTTP client per endpoint: every request of every policy
goes over the same kept-alive connection, counted at a loopback stand-in server."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cowork.agents.vllm_server import VLLMServerClient


class CountingServer:
    """A loopback HTTP/1.1 server that answers every POST with ``{"ok": n}`` and counts the
    connections it accepted and saw closed."""

    def __init__(self):
        self.accepted = self.closed = self.requests = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn speaks it

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                with outer.lock:
                    outer.requests += 1
                    n = outer.requests
                data = json.dumps({"ok": n}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def finish(self):
                super().finish()
                with outer.lock:
                    outer.closed += 1

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def verify_request(self, request, client_address):
                with outer.lock:
                    outer.accepted += 1
                return True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = CountingServer()
    yield s
    s.stop()


async def _until(predicate, what: str) -> None:
    for _ in range(200):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


class TestSharedHttpClient:
    async def test_many_requests_of_many_policies_open_one_connection(self, server):
        client = VLLMServerClient(server.url, "m", mode="chat")
        try:
            policies = [client.policy() for _ in range(4)]
            answers = [await p.client.post("/chat/completions", {"turn": t}) for t in range(5) for p in policies]
            assert [a["ok"] for a in answers] == list(range(1, 21))
            assert server.requests == 20 and server.accepted == 1, (server.requests, server.accepted)
            assert client.http() is client.http()
        finally:
            await client.aclose()
        # Closed properly: the server sees its one connection end, and the next request opens anew.
        await _until(lambda: server.closed == 1, "the connection closed by aclose()")
        async with client:
            await client.post("/completions", {})
        assert server.accepted == 2
        await _until(lambda: server.closed == 2, "the connection closed on leaving async with")

    async def test_another_event_loop_gets_its_own_client(self, server):
        client = VLLMServerClient(server.url, "m", mode="chat")
        try:
            await client.post("/completions", {})
            mine = client.http()

            def elsewhere():  # make_policy shares a client across asyncio.run calls
                async def go():
                    async with client:
                        assert client.http() is not mine
                        return await client.post("/completions", {})
                return asyncio.run(go())

            answer = await asyncio.to_thread(elsewhere)
            assert answer["ok"] == 2 and server.accepted == 2
            await client.post("/completions", {})  # this loop's client still works, same connection
            assert client.http() is mine and server.accepted == 2 and server.requests == 3
        finally:
            await client.aclose()
