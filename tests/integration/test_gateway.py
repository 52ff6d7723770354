"""`cowork serve` in front of real sandboxes (`cowork up --http`): the official mcp SDK and the
fastmcp client work through it with a token; every way in without the right token is refused
and logged; `cowork down` kills the token; HTTPS works with a certificate made here."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import http.client
import io
import ipaddress
import json
import re
import ssl
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2
import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from cowork.cli.app import main
from cowork.gateway import TOKEN_FILE
from cowork.gateway.auth import digest

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "specs" / "fix-csv-report")

pytestmark = pytest.mark.docker

ACCEPT = "application/json, text/event-stream"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}


# --------------------------------------------------------------------------- helpers
def cli(*argv: str) -> tuple[int, str]:
    """`cowork ARGV` in a thread of its own (it runs its own event loop); exit code and stdout."""
    out, result = io.StringIO(), {}

    def target() -> None:
        with contextlib.redirect_stdout(out):
            result["rc"] = main(list(argv))

    t = threading.Thread(target=target)
    t.start()
    t.join()
    return result["rc"], out.getvalue()


def up() -> dict:
    rc, out = cli("up", SPEC, "--http", "--json")
    assert rc == 0, out
    return json.loads(out)


def remove_if_left(info: dict) -> None:
    """What `cowork down` should have done, for a test that failed before it could."""
    from cowork.engine import labels as L
    from cowork.engine.container import remove_container
    from cowork.engine.reaper import managed_containers

    for c in managed_containers():
        if c.id.startswith(info["id"]):
            remove_container(c.id, (c.labels or {}).get(L.RUN_DIR))


class Gateway:
    """`python -m cowork.cli serve --port 0` as a subprocess, its stderr collected."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "cowork.cli", "serve", "--port", "0", *args],
                                     stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        first = self.proc.stderr.readline()
        m = re.search(r"listening on (https?)://127\.0\.0\.1:(\d+) ", first)
        assert m, first + self.proc.stderr.read()
        self.scheme, self.port = m[1], int(m[2])
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)

    def url(self, ref: str) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/sandboxes/{ref}/mcp"

    def log_line(self, *parts: str) -> str:
        """The log line holding every part (waits for the reader thread to catch up)."""
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            for line in self.lines:
                if all(p in line for p in parts):
                    return line
            time.sleep(0.05)
        raise AssertionError(f"no log line with {parts}; log:\n{''.join(self.lines)}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def post(gw: Gateway, path: str, body: dict | None = None, *, token: str | None = None,
         session: str | None = None, method: str = "POST", raw_auth: str | None = None) -> tuple[int, dict, bytes]:
    """One plain HTTP request; the path is sent exactly as given (no `..` folding)."""
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
    headers = {"Content-Type": "application/json", "Accept": ACCEPT}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if raw_auth is not None:
        headers["Authorization"] = raw_auth
    if session:
        headers["Mcp-Session-Id"] = session
        headers["Mcp-Protocol-Version"] = "2025-06-18"
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def open_session(gw: Gateway, ref: str, token: str) -> str:
    status, headers, body = post(gw, f"/sandboxes/{ref}/mcp", INIT, token=token)
    assert status == 200, body
    sid = headers["mcp-session-id"]
    status, _, body = post(gw, f"/sandboxes/{ref}/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"},
                           token=token, session=sid)
    assert status == 202, body
    return sid


def call(tool: str, args: dict, rid: int = 2) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": args}}


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def boxes():
    """Two sandboxes started by `cowork up --http --json`, removed by `cowork down`."""
    infos: list[dict] = []
    try:
        infos.append(up())
        infos.append(up())
        yield infos
    finally:
        for info in infos:
            cli("down", info["id"], "--yes")
            remove_if_left(info)


@pytest.fixture(scope="module")
def gw():
    g = Gateway()
    yield g
    g.stop()


# --------------------------------------------------------------------------- clients
class TestClientsThroughTheGateway:
    async def test_official_mcp_sdk(self, boxes, gw):
        a = boxes[0]
        headers = {"Authorization": f"Bearer {a['http']['token']}"}
        async with (httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
                    streamable_http_client(gw.url(a["id"]), http_client=http) as (read, write),
                    ClientSession(read, write) as session):
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            assert {"shell", "read_file", "write_file"} <= names
            ok = await session.call_tool("read_file", {"path": "reports/q3_sales.csv"})
            assert not ok.is_error and "region,month,units" in ok.content[0].text
            bad = await session.call_tool("read_file", {"path": "no/such/file.txt"})
            assert bad.is_error and "not found" in bad.content[0].text.lower()

    async def test_fastmcp_client_with_auth_and_a_name_for_the_id(self, boxes, gw):
        a = boxes[0]
        async with Client(gw.url(a["name"]), auth=a["http"]["token"]) as client:
            assert "list_files" in {t.name for t in await client.list_tools()}
            r = await client.call_tool("shell", {"command": "echo via-gateway; id -u"})
            assert not r.is_error and "via-gateway\n1000" in r.structured_content["output"]
            bad = await client.call_tool("shell", {"no_such_argument": 1}, raise_on_error=False)
            assert bad.is_error

    def test_issued_python_snippets_run_as_printed(self, boxes, gw):
        """The Python `cowork up --http` prints is real code (only the port differs: ours is free)."""
        a = boxes[0]
        for key in ("python_fastmcp", "python_mcp"):
            code = a["http"]["clients"][key].replace(a["http"]["url"], gw.url(a["id"]))
            run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
            assert run.returncode == 0, (key, run.stderr[-2000:])
            assert "'read_file'" in run.stdout, (key, run.stdout)

    def test_session_delete_passes_through(self, boxes, gw):
        a = boxes[0]
        path = f"/sandboxes/{a['id']}/mcp"
        sid = open_session(gw, a["id"], a["http"]["token"])
        status, _, _ = post(gw, path, call("list_files", {"path": "."}), token=a["http"]["token"], session=sid)
        assert status == 200
        status, _, _ = post(gw, path, method="DELETE", token=a["http"]["token"], session=sid)
        assert status in (200, 204)
        status, _, _ = post(gw, path, call("list_files", {"path": "."}), token=a["http"]["token"], session=sid)
        assert status == 404  # the sandbox server's answer for an ended session


# --------------------------------------------------------------------------- kept-alive connections
class TestKeptAlive:
    def test_tool_calls_on_one_connection_cost_what_fresh_connections_do(self, boxes, gw):
        """Issue 29: 15 tools/call on one kept-alive connection took a median of 48 ms, on a new
        connection each 5.3 ms (Nagle's algorithm waiting for the client's delayed ACK)."""
        a = boxes[0]
        path = f"/sandboxes/{a['id']}/mcp"
        sid = open_session(gw, a["id"], a["http"]["token"])
        headers = {"Content-Type": "application/json", "Accept": ACCEPT, "Mcp-Session-Id": sid,
                   "Mcp-Protocol-Version": "2025-06-18", "Authorization": f"Bearer {a['http']['token']}"}
        body = json.dumps(call("read_file", {"path": "reports/q3_sales.csv"}))

        def timed(keep_alive: bool, n: int = 15) -> list[float]:
            samples, conn = [], http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
            for _ in range(n):
                if not keep_alive:
                    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
                t0 = time.perf_counter()
                conn.request("POST", path, body=body, headers=headers)
                r = conn.getresponse()
                answer = r.read()
                samples.append((time.perf_counter() - t0) * 1000)
                assert r.status == 200 and b"region,month,units" in answer, answer[:300]
                if not keep_alive:
                    conn.close()
            conn.close()
            return samples

        timed(True, 3)  # warm-up
        kept, fresh = statistics.median(timed(True)), statistics.median(timed(False))
        assert kept < fresh + 15, (kept, fresh)


# --------------------------------------------------------------------------- refusals
class TestRefusals:
    def test_no_token(self, boxes, gw):
        a = boxes[0]
        status, headers, _ = post(gw, f"/sandboxes/{a['id']}/mcp", INIT)
        assert status == 401 and headers["www-authenticate"].startswith("Bearer")
        line = gw.log_line("refused POST", repr(a["id"]), "127.0.0.1:", "no bearer token")
        assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", line)  # when

    @pytest.mark.parametrize("auth", ["Bearer not-the-token", "Basic dXNlcjpwYXNz", "Bearer", "Token x"])
    def test_wrong_or_malformed_token(self, boxes, gw, auth):
        a = boxes[0]
        status, headers, _ = post(gw, f"/sandboxes/{a['id']}/mcp", INIT, raw_auth=auth)
        assert status == 401 and headers["www-authenticate"].startswith("Bearer")

    def test_another_sandboxs_token_opens_neither(self, boxes, gw):
        a, b = boxes
        for mine, other in ((a, b), (b, a)):
            status, _, _ = post(gw, f"/sandboxes/{other['id']}/mcp", INIT, token=mine["http"]["token"])
            assert status == 401
            gw.log_line(repr(other["id"]), "wrong token")

    def test_unknown_sandbox_answers_as_a_wrong_token_does(self, boxes, gw):
        """The answer does not tell whether a sandbox exists; only the log does."""
        a = boxes[0]
        unknown = post(gw, "/sandboxes/0123456789ab/mcp", INIT, token=a["http"]["token"])
        wrong = post(gw, f"/sandboxes/{a['id']}/mcp", INIT, token="not-the-token")
        assert unknown[0] == wrong[0] == 401 and unknown[2] == wrong[2]
        assert unknown[1]["www-authenticate"] == wrong[1]["www-authenticate"]
        gw.log_line("'0123456789ab'", "unknown sandbox")

    @pytest.mark.parametrize("template", [
        "/sandboxes/{a}/../{b}/mcp", "/sandboxes/{a}/%2E%2E/{b}/mcp", "/sandboxes/{a}%2F..%2F{b}/mcp",
        "/sandboxes/{b}/mcp/../../{a}/mcp", "//sandboxes/{b}/mcp", "/sandboxes/{a}/mcp/../../{b}/mcp",
        "/sandboxes/{b}/mcp?token={tok}", "/sandboxes/{b}/mcp#{tok}",
    ])
    def test_path_tricks_reach_nothing(self, boxes, gw, template):
        """A's token with a path that names B anywhere: never an MCP answer."""
        a, b = boxes
        path = template.format(a=a["id"], b=b["id"], tok=a["http"]["token"])
        status, _, body = post(gw, path, INIT, token=a["http"]["token"])
        assert status in (401, 404), (status, body)
        assert b"serverInfo" not in body

    def test_a_session_id_is_no_credential(self, boxes, gw):
        """A live session of A, used without A's token, does not run a call (the file stays unwritten)."""
        a, b = boxes
        path = f"/sandboxes/{a['id']}/mcp"
        sid = open_session(gw, a["id"], a["http"]["token"])
        for token in (None, "not-the-token", b["http"]["token"]):
            status, _, _ = post(gw, path, call("write_file", {"path": "planted.txt", "content": "x"}), token=token,
                                session=sid)
            assert status == 401
        status, _, body = post(gw, path, call("list_files", {"path": "."}), token=a["http"]["token"], session=sid)
        assert status == 200 and b"reports" in body and b"planted.txt" not in body

    def test_the_token_is_never_logged(self, boxes, gw):
        """Not from the header, nor when pasted into the path by mistake."""
        a, b = boxes
        post(gw, f"/sandboxes/{a['id']}/mcp", INIT, token=b["http"]["token"])
        post(gw, f"/sandboxes/{a['http']['token']}/mcp", INIT, token=a["http"]["token"])
        post(gw, f"/x/{a['http']['token']}", INIT)
        gw.log_line(repr(a["id"]), "wrong token")
        gw.log_line("refused POST '/x/", "no such route")
        log = "".join(gw.lines)
        assert boxes[0]["http"]["token"] not in log and boxes[1]["http"]["token"] not in log

    def test_other_routes_are_404_and_logged(self, gw):
        status, _, _ = post(gw, "/", INIT)
        assert status == 404
        gw.log_line("refused POST '/'", "no such route")

    def test_oauth_discovery_is_answered_without_a_refusal(self, boxes, gw):
        """What mcp-remote asks at every start: 404, no metadata, and nothing in the log."""
        a = boxes[0]
        for path in ("/.well-known/oauth-protected-resource", f"/.well-known/oauth-protected-resource/sandboxes/"
                     f"{a['id']}/mcp", "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration",
                     f"/sandboxes/{a['id']}/mcp/.well-known/openid-configuration"):
            status, _, body = post(gw, path, method="GET")
            assert status == 404 and b"no OAuth metadata" in body, (path, body)
        post(gw, "/after-the-probes", INIT)
        gw.log_line("'/after-the-probes'", "no such route")  # the log has caught up
        assert not [line for line in gw.lines if ".well-known" in line]


class TestAgentCannotTouchTheToken:
    async def test_agent_can_neither_read_nor_plant_the_hash(self, boxes, gw):
        """The agent's shell runs as uid 1000: the run dir (/run/cowork) is closed to it."""
        a = boxes[0]
        planted = "agent-chosen-token"
        async with Client(gw.url(a["id"]), auth=a["http"]["token"]) as client:
            for command in (f"cat /run/cowork/{TOKEN_FILE}",
                            f"echo '{{\"sha256\": \"{digest(planted)}\"}}' > /run/cowork/{TOKEN_FILE}",
                            f"ln -sf /tmp/x /run/cowork/{TOKEN_FILE}"):
                r = await client.call_tool("shell", {"command": command})
                assert r.structured_content["exit_code"] != 0, command
        status, _, _ = post(gw, f"/sandboxes/{a['id']}/mcp", INIT, token=planted)
        assert status == 401
        status, _, _ = post(gw, f"/sandboxes/{a['id']}/mcp", INIT, token=a["http"]["token"])
        assert status == 200


# --------------------------------------------------------------------------- revocation
class TestDownRevokes:
    async def test_token_dies_with_cowork_down(self, gw):
        """Sandbox.start + detach + issue_token (the other way in), used through the gateway, then
        `cowork down`: the same token on the same URL is refused at once."""
        from cowork.cli.gateway import issue_token
        from cowork.sandbox.sandbox import Sandbox

        sb = await Sandbox.start(SPEC, keep=True)
        info = {"id": sb.id[:12]}
        try:
            await sb.detach()
            token = issue_token(sb)["token"]
            async with Client(gw.url(info["id"]), auth=token) as client:
                assert await client.list_tools()
            rc, out = await asyncio.to_thread(cli, "down", info["id"], "--yes")
            assert rc == 0, out
            assert not (sb.run_dir / TOKEN_FILE).exists()
            status, _, _ = post(gw, f"/sandboxes/{info['id']}/mcp", INIT, token=token)
            assert status in (401, 404)
            gw.log_line(repr(info["id"]), "unknown sandbox")
        finally:
            remove_if_left(info)


# --------------------------------------------------------------------------- TLS
def self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made here (no network, no openssl CLI)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cowork-test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    certfile, keyfile = tmp / "cert.pem", tmp / "key.pem"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    keyfile.chmod(0o600)
    return certfile, keyfile


class TestTLS:
    async def test_https_with_a_verified_certificate(self, boxes, tmp_path):
        certfile, keyfile = self_signed(tmp_path)
        tls = Gateway("--certfile", str(certfile), "--keyfile", str(keyfile))
        try:
            assert tls.scheme == "https"
            a = boxes[0]
            verify = ssl.create_default_context(cafile=str(certfile))
            transport = StreamableHttpTransport(tls.url(a["id"]), auth=a["http"]["token"], verify=verify)
            async with Client(transport) as client:
                assert "read_file" in {t.name for t in await client.list_tools()}
            # Without the certificate trusted, the client refuses the server: TLS is real.
            with pytest.raises(httpx2.ConnectError):
                async with httpx2.AsyncClient() as plain:
                    await plain.get(tls.url(a["id"]))
        finally:
            tls.stop()
