"""The sandbox image, started directly with testcontainers (not through runtime), serves MCP
on its unix socket and lists the workspace tools."""

import asyncio
import time

import httpx2
import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from testcontainers.core.container import DockerContainer

from cowork.formats import WORKSPACE_TOOLS

pytestmark = pytest.mark.docker


def test_image_serves_mcp_on_its_socket(sandbox_image, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    container = (DockerContainer(sandbox_image)
                 .with_volume_mapping(str(run), "/run/cowork", "rw")
                 .with_kwargs(network_mode="none", labels={"cowork.test": "image"}))
    with container:
        sock = run / "mcp.sock"
        deadline = time.monotonic() + 60
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sock.exists(), container.get_logs()

        def factory(**kw):
            kw.pop("transport", None)
            return httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(uds=str(sock)), **kw)

        async def talk():
            async with Client(StreamableHttpTransport("http://localhost/mcp", httpx_client_factory=factory)) as c:
                names = {t.name for t in await c.list_tools()}
                who = await c.call_tool("shell", {"command": "id -u; pwd"})
                return names, who.structured_content

        for _ in range(100):  # the socket appears a moment before uvicorn accepts
            try:
                names, who = asyncio.run(talk())
                break
            except Exception:
                time.sleep(0.1)
        assert names == set(WORKSPACE_TOOLS)
        assert who["output"].split() == ["1000", "/workspace"]
        assert (run / "audit.jsonl").stat().st_mode & 0o777 == 0o600
