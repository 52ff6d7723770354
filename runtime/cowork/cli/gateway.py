"""``cowork serve`` (the gateway for remote MCP clients) and ``cowork up --http`` (a sandbox's
token and ready-to-paste client configuration)."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import socket
import sys
from pathlib import Path
from typing import Any

from ..errors import CoworkError

#: `cowork serve`'s default port (cli/app.py's --port default; a test keeps them equal).
DEFAULT_PORT = 8765
DEFAULT_HOST = "127.0.0.1"


# --------------------------------------------------------------------------- cowork up --http
def issue_token(sb: Any) -> dict[str, Any]:
    """Make the sandbox's bearer token and the configuration of each kind of client.

    Args:
        sb: A started sandbox (``id``, ``run_dir``).

    Returns:
        ``url`` (for `cowork serve` with its defaults), ``token`` (shown this once; only its
        hash is kept), ``serve`` (the command to run) and ``clients``.

    Raises:
        CoworkError: when the token cannot be stored in the sandbox's run dir.
    """
    from ..gateway import issue

    try:
        token = issue(Path(sb.run_dir))
    except OSError as exc:
        raise CoworkError(f"could not store the gateway token in {sb.run_dir}: {exc}; "
                          f"check that the run dir exists and is yours") from exc
    sid = sb.id[:12]
    url = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}/sandboxes/{sid}/mcp"
    return {"url": url, "token": token, "serve": "cowork serve", "clients": client_configs(url, token, sid)}


def client_configs(url: str, token: str, sid: str) -> dict[str, Any]:
    """Configuration for each common MCP client, for the endpoint ``url`` and its ``token``."""
    name = f"cowork-{sid}"
    auth = {"Authorization": f"Bearer {token}"}
    # mcp-remote's README form: the header through an env var, because Claude Desktop and
    # Cursor on Windows do not quote arguments holding a space.
    remote_args = ["-y", "mcp-remote", url, "--header", "Authorization:${AUTH_HEADER}"]
    if url.startswith("http://"):
        remote_args.append("--allow-http")  # mcp-remote refuses plain HTTP to other hosts otherwise
    return {
        "claude_code": f"claude mcp add --transport http {name} {url} --header 'Authorization: Bearer {token}'",
        "mcp_json": {"mcpServers": {name: {"type": "http", "url": url, "headers": auth}}},
        "cursor": {"mcpServers": {name: {"url": url, "headers": auth}}},
        "claude_desktop": {"mcpServers": {name: {"command": "npx", "args": remote_args,
                                                 "env": {"AUTH_HEADER": f"Bearer {token}"}}}},
        "claude_desktop_same_host": {"mcpServers": {name: {"command": "cowork", "args": ["connect", sid]}}},
        # The URL first and every option after it: the order Inspector 2.x requires, which 0.16
        # to 1.x accept too (tested with 0.16.8, 0.17.5, 0.22.0, 1.0.3 and 2.12.0); 0.15 and older
        # have no --header. `@latest`: a bare name lets npx reuse whatever version it cached.
        "mcp_inspector": (f"npx -y @modelcontextprotocol/inspector@latest --cli {url} --transport http "
                          f"--header 'Authorization: Bearer {token}' --method tools/list"),
        "python_fastmcp": _FASTMCP_SNIPPET.format(url=url, token=token),
        "python_mcp": _MCP_SNIPPET.format(url=url, token=token),
    }


#: The MCP Inspector releases the printed ``--cli`` command works with.
INSPECTOR_VERSIONS = "0.16 or later, 1.x and 2.x alike; 0.15 and older have no --header"

_FASTMCP_SNIPPET = '''\
import asyncio
from fastmcp import Client

async def main():
    async with Client("{url}", auth="{token}") as client:
        print([tool.name for tool in await client.list_tools()])

asyncio.run(main())
'''

_MCP_SNIPPET = '''\
import asyncio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

async def main():
    headers = {{"Authorization": "Bearer {token}"}}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        async with streamable_http_client("{url}", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                print([tool.name for tool in (await session.list_tools()).tools])

asyncio.run(main())
'''


def describe(info: dict[str, Any]) -> str:
    """The human-readable block `cowork up --http` prints (the token appears here only)."""
    clients = info["clients"]

    def indent(text: str) -> str:
        return "\n".join(("      " + line).rstrip() for line in text.splitlines())

    return "\n".join([
        f"  MCP over HTTP, once `{info['serve']}` runs: {info['url']}",
        f"  bearer token (shown once, not stored; `cowork down` revokes it): {info['token']}",
        "    Claude Code:",
        indent(clients["claude_code"]),
        "    Cursor (~/.cursor/mcp.json):",
        indent(json.dumps(clients["cursor"], indent=2)),
        "    Claude Desktop (claude_desktop_config.json; stdio only, bridged by mcp-remote):",
        indent(json.dumps(clients["claude_desktop"], indent=2)),
        f"    MCP Inspector ({INSPECTOR_VERSIONS}):",
        indent(clients["mcp_inspector"]),
        "    Python (fastmcp):",
        indent(clients["python_fastmcp"]),
        "    (`cowork up --http --json` also gives .mcp.json, same-host Claude Desktop and mcp SDK forms)",
    ])


# --------------------------------------------------------------------------- cowork serve
def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that --port 0 yields its real port to print.

    Its ``proto`` is ``IPPROTO_TCP``, not the 0 ``socket.create_server`` leaves: asyncio turns
    Nagle off (TCP_NODELAY) on an accepted connection only when the socket says IPPROTO_TCP,
    and an accepted socket copies the listener's. With Nagle on, every answer after the first
    on a kept-alive connection (its head and body are two writes) waited for the client's
    delayed ACK: 44-48 ms per call, against 1-4 ms on a fresh connection (docs/performance.md).
    """
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, port), family=family, backlog=128)
    except OSError as exc:
        raise CoworkError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; pick another --port "
                          f"(0: any free one) or --host") from exc
    # Linux also copies TCP_NODELAY from the listener to each accepted socket: set it there too,
    # so that the fix does not rest on asyncio's check alone.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, fileno=sock.detach())


def serve(*, host: str, port: int, certfile: Path | None, keyfile: Path | None) -> int:
    """Run the gateway until interrupted (SIGINT/SIGTERM); returns the exit code.

    Raises:
        CoworkError: when only one of certfile/keyfile is given, or the address is taken.
    """
    import uvicorn

    from ..gateway import Gateway

    if (certfile is None) != (keyfile is None):
        raise CoworkError("--certfile and --keyfile go together: give both to serve HTTPS, or neither")
    # Refusals are logged at WARNING with their time; `cowork -v serve` adds every forwarded request.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sock = _bind(host, port)
    bound = sock.getsockname()[1]
    scheme = "https" if certfile else "http"
    shown = f"[{host}]" if ":" in host else host
    config = uvicorn.Config(
        Gateway(), host=host, port=bound, ssl_certfile=str(certfile) if certfile else None,
        ssl_keyfile=str(keyfile) if keyfile else None, log_level="warning", access_log=False,
        # The peer address in the refusal log is the real one, never a header's claim.
        proxy_headers=False, server_header=False, date_header=True, lifespan="on", loop="asyncio",
        http="h11", ws="none", timeout_graceful_shutdown=2,
    )
    try:
        config.load()  # the TLS files are read here: a bad one is an error, not a traceback
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        sock.close()
        raise CoworkError(f"cannot serve HTTPS with --certfile {certfile} --keyfile {keyfile}: {exc}; give a "
                          f"PEM certificate and its private key") from exc
    server = uvicorn.Server(config)

    async def run() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.05)
        if server.started:
            print(f"cowork serve: listening on {scheme}://{shown}:{bound} "
                  f"(sandboxes at /sandboxes/<id>/mcp; Ctrl-C stops)", file=sys.stderr, flush=True)
            if scheme == "http" and not _is_loopback(host):
                print("cowork serve: warning: plain HTTP on a non-loopback address sends tokens and tool "
                      "calls in clear text; give --certfile and --keyfile", file=sys.stderr, flush=True)
        await task

    try:
        asyncio.run(run())
    finally:
        sock.close()
    return 0
