"""A/B of the host's transport, in one process on the host: rpc.sock against streamable HTTP.

``python -m cowork.bench.transport [CALLS]`` serves one tool host (a temp workspace, the six
workspace tools) both ways at once: the newline-delimited JSON-RPC server (server.rpc)
with its client (``RpcMcpClient``), and the FastMCP app built from the same host behind
uvicorn with the client the host used before (``LeanMcpClient``, streamable HTTP). It
alternates blocks of ``read_file`` calls between the two and prints the p50 per call and
the CPU per call of the whole process (client and server are both in it), so the figures
compare the transports and the tool host against fastmcp's stack on the same machine at
the same moment. No container: what Docker adds is the same for both.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time


async def _ab(calls: int) -> dict:
    import uvicorn

    from ..sandbox.mcp import LeanMcpClient, RpcMcpClient
    from ..server.app import ServerConfig, build_app
    from ..server.state.audit import AuditLog
    from ..server.tools.workspace import WorkspaceConfig
    from ..toolhost.rpc import RpcServer

    tmp = tempfile.mkdtemp(prefix="cowork-transport-")
    ws = os.path.join(tmp, "ws")
    os.makedirs(ws)
    with open(os.path.join(ws, "report.csv"), "w") as fh:
        fh.write("".join(f"row{i},{i}\n" for i in range(7)))
    audit = AuditLog(os.path.join(tmp, "audit.jsonl"))
    host, fs = build_app(ServerConfig(task_id="ab", workspace=WorkspaceConfig(root=ws)), audit)
    rpc = RpcServer(host)
    await rpc.start(os.path.join(tmp, "rpc.sock"))
    http_sock = os.path.join(tmp, "mcp.sock")
    server = uvicorn.Server(uvicorn.Config(host.fastmcp().http_app(path="/mcp", json_response=True), uds=http_sock,
                                           log_level="warning", lifespan="on", loop="asyncio", http="h11", ws="none"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    out: dict = {"calls_per_side": calls}
    try:
        clients: dict[str, RpcMcpClient | LeanMcpClient] = {"rpc": RpcMcpClient(os.path.join(tmp, "rpc.sock")),
                                                            "http": LeanMcpClient(http_sock)}
        lat: dict[str, list[float]] = {k: [] for k in clients}
        cpu: dict[str, float] = {k: 0.0 for k in clients}
        for c in clients.values():
            await c.initialize()
            for _ in range(20):  # warm-up
                await c.call_tool("read_file", {"path": "report.csv"})
        block = 50
        for _ in range(max(1, calls // block)):
            for name, c in clients.items():
                c0 = time.process_time()
                for _ in range(block):
                    t = time.perf_counter()
                    r = await c.call_tool("read_file", {"path": "report.csv"})
                    lat[name].append((time.perf_counter() - t) * 1000)
                    assert not r.get("isError"), r
                cpu[name] += time.process_time() - c0
        for name in clients:
            out[name] = {"p50_ms": statistics.median(lat[name]), "cpu_ms_per_call": cpu[name] * 1000 / len(lat[name])}
        await clients["rpc"].close()
        await clients["http"].close()
    finally:
        server.should_exit = True
        await serving
        rpc.close()
        fs.close()
        audit.close()
    out["speedup_p50"] = out["http"]["p50_ms"] / out["rpc"]["p50_ms"]
    return out


def main(argv: list[str]) -> int:
    """Run the A/B with ``argv[1]`` calls per side (default 1000) and print its figures as JSON; returns 0."""
    calls = int(argv[1]) if len(argv) > 1 else 1000
    result = asyncio.run(_ab(calls))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
