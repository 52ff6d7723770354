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


def test_a_base_without_procps_stops_the_build_with_a_clear_message(tmp_path):
    """A public base (python:3.11-slim) has no pkill; offline, the build says so and how to fix it."""
    import io
    import shutil

    import docker.errors

    from cowork.engine.client import get_client
    from cowork.engine.images import _project_file, ensure_base

    client = get_client()
    bare = "cowork-test-noprocps:latest"
    client.images.build(fileobj=io.BytesIO(f"FROM {ensure_base()}\nRUN rm -f /usr/bin/pkill /usr/bin/pgrep\n".encode()),
                        tag=bare, rm=True, forcerm=True)
    shutil.copy(_project_file("Dockerfile"), tmp_path / "Dockerfile")
    try:
        with pytest.raises(docker.errors.BuildError) as info:
            client.images.build(path=str(tmp_path), buildargs={"BASE": bare}, network_mode="none", rm=True, forcerm=True)
        log = "".join(str(c.get("stream", c.get("error", ""))) for c in info.value.build_log)
        assert "no pkill/pgrep (procps)" in log and "images/bootstrap-base.sh" in log, log[-2000:]
    finally:
        client.images.remove(bare, force=True)
