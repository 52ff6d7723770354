"""From inside the sandbox, as the agent: the evidence, the socket and the hidden parts of the
spec are out of reach; there is no network; only /workspace and /tmp are writable."""

import re
from pathlib import Path

import pytest

from cowork.sandbox.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.docker
SPEC = ROOT / "specs" / "fix-csv-report"


@pytest.fixture(scope="module")
async def sb():
    box = await Sandbox.start(SPEC)
    yield box
    await box.stop()


async def sh(sb, command: str) -> dict:
    r = await sb.call_tool("shell", {"command": command})
    assert not r.is_error, r.text
    return r.structured


class TestAgentCannotTouchEvidence:
    async def test_runs_as_unprivileged_agent_without_capabilities(self, sb):
        out = await sh(sb, "id -u; id -g; grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status")
        lines = out["output"].split("\n")
        assert lines[:2] == ["1000", "1000"]
        assert "CapEff:\t0000000000000000" in out["output"] and "CapPrm:\t0000000000000000" in out["output"]

    async def test_every_id_is_the_agents_and_root_cannot_be_taken_back(self, sb):
        # Agent commands drop to the agent's ids in a helper (cowork-asagent, or setpriv) before
        # their exec: nothing of root may be left (saved ids, groups, capabilities).
        out = await sh(sb, "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapAmb|NoNewPrivs):' /proc/self/status; "
                           "python3 -c 'import os; os.setresuid(0, 0, 0)' 2>&1 | tail -1; "
                           "python3 -c 'import os; os.setresgid(0, 0, 0)' 2>&1 | tail -1; "
                           "python3 -c 'import os; print(os.getresuid(), os.getresgid(), os.getgroups())'")
        text = out["output"]
        assert "Uid:\t1000\t1000\t1000\t1000" in text and "Gid:\t1000\t1000\t1000\t1000" in text
        assert re.search(r"^Groups:\s*$", text, re.M), text
        for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
            assert f"{cap}:\t0000000000000000" in text, cap
        assert "NoNewPrivs:\t1" in text
        assert text.count("PermissionError") == 2
        assert "(1000, 1000, 1000) (1000, 1000, 1000) []" in text
        # a second command starts the same way
        again = await sh(sb, "id -u")
        assert again["output"].strip() == "1000"

    @pytest.mark.parametrize("command", [
        "cat /run/cowork/audit.jsonl",
        "ls /run/cowork",
        "echo forged >> /run/cowork/audit.jsonl",
        ": > /run/cowork/audit.jsonl",
        "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('/run/cowork/mcp.sock')\"",
        "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('/run/cowork/control.sock')\"",
        "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('/run/cowork/rpc.sock')\"",
        # the id-dropping helper the server starts commands with is no way up for the agent
        "/opt/cowork/bin/cowork-asagent 1000 1000 /bin/cat /run/cowork/audit.jsonl",
        "/opt/cowork/bin/cowork-asagent 0 0 /bin/cat /run/cowork/audit.jsonl",
        "cat /proc/1/environ",
        "kill -9 1",
        "pkill -9 -f cowork.server; exit 1",
    ])
    async def test_forbidden_operation_fails(self, sb, command):
        out = await sh(sb, command)
        assert out["exit_code"] != 0, out["output"]

    async def test_file_tools_cannot_reach_the_run_dir(self, sb):
        for tool, args in [("read_file", {"path": "/run/cowork/audit.jsonl"}),
                           ("write_file", {"path": "/run/cowork/audit.jsonl", "content": "x"}),
                           ("read_file", {"path": "../run/cowork/audit.jsonl"})]:
            r = await sb.call_tool(tool, args)
            assert r.is_error and "Permission denied" in r.text

    async def test_server_survives_and_audit_chain_is_intact(self, sb):
        await sh(sb, "echo still here")
        ev = await sb.export_evidence()
        assert ev.chain.valid, ev.chain.error
        assert any(r["args"].get("command") == "kill -9 1" for r in ev.tool_calls)

    async def test_hidden_parts_of_the_spec_are_not_in_the_sandbox(self, sb):
        # Strings that only the oracle, the checks and the violation script contain.
        # One pass over everything but the OS's own /usr tree (a whole-disk grep outlasts the tool timeout).
        needles = " ".join(f"-e '{n}'" for n in ["1235.00", "north-09-fixed", "no-recursive-delete", "6757.5"])
        out = await sh(sb, f"grep -rlsF {needles} /opt /etc /var /workspace /tmp /home /root /srv /mnt /run "
                           "/usr/local /usr/lib/python3 /usr/bin; true")
        assert out["output"].strip() == "", f"hidden spec content found in {out['output']}"

    async def test_task_layer_is_root_only(self, sb):
        # The task layer holds every seed file (root-only ones too) and the whole service and
        # fault seed: the server reads it, the agent never does.
        out = await sh(sb, "cat /opt/cowork/task/task.json; ls /opt/cowork/task")
        assert out["exit_code"] != 0 and out["output"].count("Permission denied") == 2, out["output"]
        from cowork.engine.images import task_config
        from cowork.spec.loader import load_spec

        assert set(task_config(load_spec(SPEC))) == {"id", "tools", "limits", "clock", "files", "services", "faults"}


class TestIsolation:
    async def test_no_network_connection_succeeds(self, sb):
        script = ("import socket\n"
                  "for host, port in [('1.1.1.1', 80), ('172.17.0.1', 2375), ('8.8.8.8', 53)]:\n"
                  "    s = socket.socket(); s.settimeout(2)\n"
                  "    try:\n"
                  "        s.connect((host, port)); print('CONNECTED', host)\n"
                  "    except OSError as e:\n"
                  "        print('refused', host, e.errno)\n")
        await sb.call_tool("write_file", {"path": "/tmp/net.py", "content": script})
        out = await sh(sb, "python3 /tmp/net.py; cat /proc/net/dev | tail -n +3 | cut -d: -f1")
        assert "CONNECTED" not in out["output"]
        assert out["output"].split()[-1] == "lo"  # the only interface

    async def test_nothing_outside_workspace_and_tmp_is_writable(self, sb):
        out = await sh(sb, "find / -xdev \\( -type f -o -type d \\) -writable 2>/dev/null | "
                           "grep -v -E '^/(proc|sys)(/|$)'; "
                           "for d in / /etc /opt/cowork /usr /var /home /root /run /dev; do "
                           "touch $d/probe 2>/dev/null && echo WROTE $d; done; true")
        bad = [p for p in out["output"].split("\n") if p and not p.startswith(("/workspace", "/tmp"))]
        assert bad == []
        out = await sh(sb, "touch /workspace/ok /tmp/ok && echo yes")
        assert out["output"].strip() == "yes"

    async def test_protected_root_owned_file_cannot_be_written(self, sb):
        r = await sb.call_tool("write_file", {"path": "ledger/approved_2026Q2.csv", "content": "forged"})
        assert r.is_error and "Permission denied" in r.text
        out = await sh(sb, "echo x >> ledger/approved_2026Q2.csv")
        assert out["exit_code"] != 0
