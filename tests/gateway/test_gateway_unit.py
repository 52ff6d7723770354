"""The gateway's token store, header parsing, client configuration, OAuth discovery answers and
kept-alive connections, without Docker (the gateway against real sandboxes is
tests/integration/test_gateway.py)."""

from __future__ import annotations

import asyncio
import http.client
import importlib
import inspect
import json
import logging
import os
import re
import shlex
import socket
import stat
import statistics
import subprocess
import sys
import time

import pytest

from cowork.cli import gateway as cli_gateway
from cowork.gateway import auth as tokens
from cowork.gateway import proxy


class TestTokens:
    def test_issued_token_opens_and_only_its_hash_is_stored(self, tmp_path):
        token = tokens.issue(tmp_path)
        assert tokens.check(tmp_path, token) is None
        path = tmp_path / tokens.TOKEN_FILE
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert token not in path.read_text()
        assert json.loads(path.read_text()) == {"sha256": tokens.digest(token)}
        assert os.listdir(tmp_path) == [tokens.TOKEN_FILE]  # no temporary file left

    def test_wrong_token_and_missing_file_are_refused(self, tmp_path):
        assert tokens.check(tmp_path, "anything") == "no token issued for this sandbox (or it was removed)"
        token = tokens.issue(tmp_path)
        assert tokens.check(tmp_path, token + "x") == "wrong token"
        assert tokens.check(tmp_path, "") == "wrong token"

    def test_a_new_token_revokes_the_old_one(self, tmp_path):
        first = tokens.issue(tmp_path)
        second = tokens.issue(tmp_path)
        assert first != second
        assert tokens.check(tmp_path, first) == "wrong token"
        assert tokens.check(tmp_path, second) is None

    def test_removing_the_file_revokes(self, tmp_path):
        token = tokens.issue(tmp_path)
        (tmp_path / tokens.TOKEN_FILE).unlink()
        assert tokens.check(tmp_path, token) is not None

    def test_a_file_open_to_others_is_refused(self, tmp_path):
        token = tokens.issue(tmp_path)
        (tmp_path / tokens.TOKEN_FILE).chmod(0o644)
        assert "refused" in tokens.check(tmp_path, token)

    def test_a_symlinked_token_file_is_refused(self, tmp_path):
        """A planted link to a hash file elsewhere must not count."""
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        token = tokens.issue(elsewhere)
        box = tmp_path / "box"
        box.mkdir()
        (box / tokens.TOKEN_FILE).symlink_to(elsewhere / tokens.TOKEN_FILE)
        assert "unreadable" in tokens.check(box, token)

    @pytest.mark.parametrize("content", ["", "{}", '{"sha256": 5}', '{"sha256": "ab"}', "not json"])
    def test_a_malformed_file_is_refused(self, tmp_path, content):
        path = tmp_path / tokens.TOKEN_FILE
        path.write_text(content)
        path.chmod(0o600)
        assert tokens.check(tmp_path, "t") == "token file malformed"


class TestRequestParsing:
    @pytest.mark.parametrize("value, token", [
        (b"Bearer abc", "abc"), (b"bearer abc", "abc"), (b"Bearer  abc ", "abc"), (b"Bearer\tabc", None),
        (b"Bearer", None), (b"Bearer ", None), (b"Basic abc", None), (b"abc", None), (b"Bearer a b", None),
        (None, None),
    ])
    def test_bearer(self, value, token):
        assert proxy._bearer(value) == token

    @pytest.mark.parametrize("path, ref", [
        ("/sandboxes/3f2a9c1b7d0e/mcp", "3f2a9c1b7d0e"), ("/sandboxes/3f2a9c1b7d0e/mcp/", "3f2a9c1b7d0e"),
        ("/sandboxes/cowork-fix-csv-report-ab12/mcp", "cowork-fix-csv-report-ab12"),
        ("/sandboxes/a/../b/mcp", None), ("/sandboxes/../mcp", None), ("/sandboxes/a/b/mcp", None),
        ("/sandboxes//mcp", None), ("/sandboxes/.hidden/mcp", None), ("/sandboxes/a/mcp/x", None),
        ("/x/sandboxes/a/mcp", None),
    ])
    def test_route(self, path, ref):
        m = proxy.ROUTE.fullmatch(path)
        assert (m["ref"] if m else None) == ref

    @pytest.mark.parametrize("ref, hit", [
        ("3f2a9c1b7d0e", True), ("3f2a", True), ("3f2a9c1b7d0e" + "0" * 52, True), ("cowork-x-ab12", True),
        ("cowork-x", False), ("2a9c", False), ("", False), ("3f2a9c1b7d0e0001", False),
    ])
    def test_one_rule_names_a_sandbox(self, ref, hit):
        from cowork.engine.labels import refers_to

        assert refers_to(ref, "3f2a9c1b7d0e" + "0" * 52, "cowork-x-ab12") is hit

    def test_the_stdio_bridge_applies_the_same_rule(self, monkeypatch):
        from cowork.engine import labels
        from cowork.gateway import bridge

        rows = [{"Id": "3f2a" + "0" * 60, "Names": ["/cowork-a"], "Labels": {labels.RUN_DIR: "/r/a"}},
                {"Id": "3f2b" + "1" * 60, "Names": ["/cowork-b"], "Labels": {labels.RUN_DIR: "/r/b"}}]
        monkeypatch.setattr(bridge, "_managed_containers", lambda label: rows)
        assert bridge.locate("3f2a").socket_path == "/r/a/mcp.sock"
        assert bridge.locate("cowork-b").socket_path == "/r/b/mcp.sock"

    def test_the_token_is_never_forwarded(self):
        assert b"authorization" not in proxy.REQUEST_HEADERS and b"cookie" not in proxy.REQUEST_HEADERS


class TestClientConfigs:
    def test_default_port_matches_the_serve_command(self):
        params = inspect.signature(importlib.import_module("cowork.cli.app").serve).parameters
        port, host = params["port"].default, params["host"].default
        assert (host, port) == (cli_gateway.DEFAULT_HOST, cli_gateway.DEFAULT_PORT)

    def test_every_client_gets_url_and_token(self):
        url, token = "http://127.0.0.1:8765/sandboxes/3f2a9c1b7d0e/mcp", "tok-123"
        c = cli_gateway.client_configs(url, token, "3f2a9c1b7d0e")
        entry = c["cursor"]["mcpServers"]["cowork-3f2a9c1b7d0e"]
        assert entry == {"url": url, "headers": {"Authorization": "Bearer tok-123"}}
        assert c["mcp_json"]["mcpServers"]["cowork-3f2a9c1b7d0e"]["type"] == "http"
        desktop = c["claude_desktop"]["mcpServers"]["cowork-3f2a9c1b7d0e"]
        assert url in desktop["args"] and desktop["env"] == {"AUTH_HEADER": "Bearer tok-123"}
        assert c["claude_desktop_same_host"]["mcpServers"]["cowork-3f2a9c1b7d0e"]["args"] == ["connect",
                                                                                            "3f2a9c1b7d0e"]
        for key in ("claude_code", "mcp_inspector", "python_fastmcp", "python_mcp"):
            assert url in c[key] and token in c[key], key
            if key.startswith("python"):
                compile(c[key], key, "exec")

    def test_the_inspector_command_is_the_form_every_inspector_since_0_16_takes(self):
        """Inspector 2.x reads the leading run of non-option words as the server: the URL must
        come first; 0.16 to 1.x take that order too (run against a gateway, docs/gateway.md)."""
        url, token = "http://127.0.0.1:8765/sandboxes/3f2a9c1b7d0e/mcp", "tok-123"
        argv = shlex.split(cli_gateway.client_configs(url, token, "3f2a9c1b7d0e")["mcp_inspector"])
        assert argv[:5] == ["npx", "-y", "@modelcontextprotocol/inspector@latest", "--cli", url]
        options = argv[5:]
        assert all(a.startswith("--") for a in options[::2]), options  # only options after the URL
        assert dict(zip(options[::2], options[1::2])) == {
            "--transport": "http", "--header": "Authorization: Bearer tok-123", "--method": "tools/list"}
        info = {"url": url, "token": token, "serve": "cowork serve",
                "clients": cli_gateway.client_configs(url, token, "3f2a9c1b7d0e")}
        text = cli_gateway.describe(info)
        assert "MCP Inspector (0.16 or later, 1.x and 2.x alike; 0.15 and older have no --header):" in text
        assert cli_gateway.client_configs(url, token, "x")["mcp_inspector"] in text

    def test_describe_shows_the_token_once_said_so(self):
        info = {"url": "http://127.0.0.1:8765/sandboxes/x/mcp", "token": "tok-123", "serve": "cowork serve",
                "clients": cli_gateway.client_configs("http://127.0.0.1:8765/sandboxes/x/mcp", "tok-123", "x")}
        text = cli_gateway.describe(info)
        assert "tok-123" in text and "shown once" in text and "cowork serve" in text

    def test_serve_wants_both_tls_files(self, tmp_path):
        from cowork.errors import CoworkError

        with pytest.raises(CoworkError, match="go together"):
            cli_gateway.serve(host="127.0.0.1", port=0, certfile=tmp_path / "c.pem", keyfile=None)

    def test_serve_names_a_bad_certificate(self, tmp_path):
        from cowork.errors import CoworkError

        (tmp_path / "c.pem").write_text("not a certificate")
        (tmp_path / "k.pem").write_text("not a key")
        with pytest.raises(CoworkError, match="cannot serve HTTPS"):
            cli_gateway.serve(host="127.0.0.1", port=0, certfile=tmp_path / "c.pem", keyfile=tmp_path / "k.pem")


class TestOAuthDiscovery:
    """A bearer-only server publishes no OAuth metadata: every discovery path is a quiet 404."""

    @staticmethod
    def ask(path: str, method: str = "GET") -> tuple[int, dict, bytes]:
        sent: list[dict] = []

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": method, "path": path, "headers": [], "client": ("127.0.0.1", 5)}
        asyncio.run(proxy.Gateway()(scope, receive, send))
        return sent[0]["status"], dict(sent[0]["headers"]), b"".join(m.get("body", b"") for m in sent[1:])

    @pytest.mark.parametrize("path", [
        "/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/sandboxes/3f2a9c1b7d0e/mcp",
        "/.well-known/oauth-authorization-server", "/.well-known/oauth-authorization-server/sandboxes/x/mcp",
        "/.well-known/openid-configuration", "/sandboxes/3f2a9c1b7d0e/mcp/.well-known/openid-configuration",
    ])
    def test_discovery_paths_answer_no_metadata_without_a_warning(self, path, caplog):
        caplog.set_level(logging.INFO, logger="cowork.gateway.proxy")
        status, headers, body = self.ask(path)
        assert status == 404 and headers[b"content-type"] == b"application/json"
        answer = json.loads(body)
        assert answer["error"] == "not found" and "no OAuth metadata" in answer["detail"]
        assert "cowork up --http" in answer["detail"]
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert any("no OAuth metadata" in r.getMessage() for r in caplog.records)

    def test_other_unknown_paths_are_still_refusals(self, caplog):
        status, _, body = self.ask("/.well-knownx/a")
        assert status == 404 and json.loads(body) == {"error": "not found"}
        assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING][-1].endswith("no such route")


def _serve() -> tuple[subprocess.Popen, int]:
    """`cowork serve --port 0` (needs no Docker until a sandbox is asked for) and its port."""
    proc = subprocess.Popen([sys.executable, "-m", "cowork.cli", "serve", "--port", "0"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    first = proc.stderr.readline()
    m = re.search(r"listening on http://127\.0\.0\.1:(\d+) ", first)
    if m is None:
        proc.kill()
        raise AssertionError(first + proc.stderr.read())
    return proc, int(m[1])


def _timed_gets(port: int, n: int, *, keep_alive: bool) -> list[float]:
    """``n`` GETs of a discovery path (answered by the gateway itself, head and body in two
    writes): on one kept-alive connection, or a new connection each. Milliseconds."""
    samples, conn = [], http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for _ in range(n):
        if not keep_alive:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        t0 = time.perf_counter()
        conn.request("GET", "/.well-known/oauth-protected-resource")
        response = conn.getresponse()
        response.read()
        samples.append((time.perf_counter() - t0) * 1000)
        assert response.status == 404
        if not keep_alive:
            conn.close()
    conn.close()
    return samples


class TestKeptAliveConnections:
    """Nagle's algorithm held each answer after the first on a kept-alive connection until the
    client's delayed ACK: ~44 ms a request before the listening socket said IPPROTO_TCP."""

    def test_the_listening_socket_says_tcp_and_turns_nagle_off(self):
        sock = cli_gateway._bind("127.0.0.1", 0)
        try:
            assert sock.proto == socket.IPPROTO_TCP  # what asyncio checks before setting TCP_NODELAY
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        finally:
            sock.close()

    def test_each_accepted_connection_has_nagle_off(self):
        """The gateway's server stack (uvicorn on asyncio) serving on the socket _bind makes."""
        async def main() -> int:
            accepted: asyncio.Future = asyncio.get_running_loop().create_future()

            class Probe(asyncio.Protocol):
                def connection_made(self, transport):
                    accepted.set_result(transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP,
                                                                                       socket.TCP_NODELAY))

            server = await asyncio.get_running_loop().create_server(Probe, sock=cli_gateway._bind("127.0.0.1", 0))
            port = server.sockets[0].getsockname()[1]
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                return await asyncio.wait_for(accepted, 10)
            finally:
                writer.close()
                server.close()

        assert asyncio.run(main())

    def test_kept_alive_requests_cost_no_more_than_fresh_connections(self):
        """Measured against a real `cowork serve`: the median over one kept-alive connection is
        not tens of ms above the median of a new connection per request (44 ms above before)."""
        proc, port = _serve()
        try:
            _timed_gets(port, 3, keep_alive=True)  # warm-up
            kept = statistics.median(_timed_gets(port, 20, keep_alive=True))
            fresh = statistics.median(_timed_gets(port, 20, keep_alive=False))
        finally:
            proc.terminate()
            proc.wait(timeout=15)
        assert kept < fresh + 15, (kept, fresh)


class TestDocs:
    def test_docs_match_the_code(self):
        """docs/gateway.md quotes limits, names and client keys that could drift."""
        from pathlib import Path

        text = (Path(__file__).resolve().parents[2] / "docs" / "gateway.md").read_text()
        assert f"{proxy.MAX_BODY_BYTES // 2**20} MiB" in text
        assert f"`{tokens.TOKEN_FILE}`" in text
        assert f"cut to {proxy._LOGGED_CHARS} characters" in text
        assert f"127.0.0.1:{cli_gateway.DEFAULT_PORT}" in text
        for key in cli_gateway.client_configs("http://h/sandboxes/x/mcp", "t", "x"):
            assert f"`{key}`" in text, key
        for header in ("Accept", "Content-Type", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-ID"):
            assert header.lower().encode() in proxy.REQUEST_HEADERS and f"`{header}`" in text
