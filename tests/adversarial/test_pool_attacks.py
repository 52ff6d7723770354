"""Attacks on pooled sandboxes: what one episode could leave for the next one on the same container.

A :class:`~cowork.sandbox.pool.SandboxPool` resets a sandbox between episodes and hands it out again
only when the state hash equals the pristine one. Each test here runs an attack an RL policy
could learn in episode 1, releases the sandbox like a rollout does, and then either finds the
sandbox replaced (``pool.stats["reset_failed"]``) or, when it was reused (same container),
checks that episode 2 sees nothing of episode 1.

Tests marked ``xfail(strict=True, reason="HOLE: ...")`` are holes found on the current code:
they fail until the hole is fixed (then the marker goes). The others document a guarantee.
"""

from __future__ import annotations

import asyncio
import json
import time

import docker
import pytest

from cowork.formats import verify_chain
from cowork.sandbox.pool import SandboxPool

pytestmark = pytest.mark.docker

#: A workspace-only task: a seeded file of the agent's, one of root's, processes may outlive a call.
TASK = """\
id: pool-attack
title: Pool attacks
prompt: Do what the test says.
tools: [shell, read_file, write_file, list_files]
limits: {background_jobs: true, tool_timeout_s: 10}
workspace:
  dir: workspace
  files:
    - {path: notes/plan.txt, owner: root, mode: "0644"}
checks: [{id: seeded, type: file_contains, path: a.txt, text: seed}]
oracle: [{tool: read_file, args: {path: a.txt}}]
violation: [{tool: list_files, args: {}}]
"""
SEED = {"a.txt": "seed\n", "notes/plan.txt": "the plan\n"}


@pytest.fixture
def task(make_spec):
    return make_spec(TASK, SEED)


async def sh(sb, command: str, *, check: bool = True) -> str:
    """Run ``command`` with the shell tool; its output (exit code 0 required unless ``check`` is off)."""
    r = await sb.call_tool("shell", {"command": command})
    assert not r.is_error, (command, r.text)
    if check:
        assert r.structured["exit_code"] == 0, (command, r.text)
    return r.structured["output"]


async def next_episode(pool: SandboxPool, sb, spec, *, discard_evidence: bool = False):
    """End the episode as a rollout does (export, release, reset in the background) and start
    the next one. Returns the next sandbox; ``reused`` tells whether it is the same container."""
    if not discard_evidence:
        await sb.export_evidence()
    await pool.release(sb, discard_evidence=discard_evidence)
    await pool.wait_idle()
    assert pool.stats["resets"] + pool.stats["reset_failed"] >= 1, dict(pool.stats)
    sb2 = await pool.acquire(spec)
    if pool.stats["reset_failed"]:
        assert sb2.id != sb.id  # replaced: the unverified one is never handed out
    return sb2


def reused(pool: SandboxPool, sb, sb2) -> bool:
    same = sb2.id == sb.id
    assert same == (pool.stats["reset_failed"] == 0), dict(pool.stats)
    return same


LISTING = ("find /workspace /tmp -printf '%y %m %u:%g %s %p\\n' | LC_ALL=C sort; "
           "df -k --output=used,iused /workspace /tmp | tail -n +2; ls -A /dev/mqueue")


# --------------------------------------------------------------------------- guarantees
async def test_processes_that_try_to_outlive_the_reset_die_before_the_wipe(task, no_leftovers):
    """Stopped, ptrace-stopped, zombie-holding, disguised, file-holding and racing processes
    and System V objects, all alive at the reset (the evidence is discarded, so no export kills
    them first): the reset alone must end every one before it wipes, and verify."""
    async with SandboxPool(max_per_task=1) as pool:
        sb = await pool.acquire(task)
        pristine = await sh(sb, LISTING)
        attack = r"""
cd /workspace
python3 -c "import os, signal, subprocess; os.kill(subprocess.Popen(['sleep', '300']).pid, signal.SIGSTOP)" >/dev/null 2>&1  # stopped after its exec
python3 -c "
import ctypes, os, signal, time
if os.fork() == 0:
    ctypes.CDLL(None).ptrace(0, 0, 0, 0)   # PTRACE_TRACEME
    os.kill(os.getpid(), signal.SIGSTOP)
    time.sleep(300)
time.sleep(300)" >/dev/null 2>&1 &
python3 -c "
import os, time
for _ in range(5):
    if os.fork() == 0: os._exit(0)
time.sleep(300)" >/dev/null 2>&1 &
python3 -c "
import os, time
f = open('/tmp/held', 'wb'); f.write(b'z' * 8_000_000); f.flush(); os.unlink('/tmp/held')
g = open('/workspace/held', 'wb'); g.write(b'z' * 8_000_000); g.flush(); os.unlink('/workspace/held')
time.sleep(300)" >/dev/null 2>&1 &
flock /workspace/a.txt sleep 300 >/dev/null 2>&1 &
bash -c 'exec -a "/opt/cowork/venv/bin/python -m cowork.server" sleep 300' >/dev/null 2>&1 &
setsid nohup sh -c 'trap "" HUP TERM INT; while :; do echo x > /workspace/race.$$; mkdir -p /tmp/race/d; echo y > /tmp/race/d/f; rm -rf /tmp/race; done' >/dev/null 2>&1 &
python3 -c "import ctypes; c = ctypes.CDLL(None); print(c.shmget(0, 4096, 0o1600), c.msgget(0, 0o1600))"
for i in $(seq 50); do [ "$(ps -u agent --no-headers | wc -l)" -ge 17 ] && break; sleep 0.1; done; echo started
"""
        out = await sh(sb, attack)
        assert "started" in out, out
        alive = await sh(sb, "ps -u agent -o stat=,args= | grep -v -e 'ps -u' -e '^S.*bash -c'", check=False)
        stopped = [x for x in alive.splitlines() if x.startswith("T")]
        assert alive.count("\n") >= 8 and stopped, alive  # all there, the stopped ones too
        dirty = await sb.state()
        assert dirty["processes"] and dirty["ipc"], dirty

        sb2 = await next_episode(pool, sb, task, discard_evidence=True)
        assert reused(pool, sb, sb2), "the reset did not verify"
        state = await sb2.state()
        assert state["hash"] == sb2.pristine["hash"] and state["processes"] == [] and state["ipc"] == []
        await asyncio.sleep(1.0)  # a survivor would have written again by now
        assert (await sb2.state())["hash"] == sb2.pristine["hash"]
        assert await sh(sb2, LISTING) == pristine  # space of deleted-but-open files freed too
        assert (await sh(sb2, "ps -u agent -o comm=")).split() == ["ps"]  # only this call's own
        await sb2.export_evidence()
        await pool.release(sb2)


async def test_files_the_wipe_could_miss_and_full_filesystems_reset_to_a_fresh_grade(task, no_leftovers):
    """Names with a newline or invalid UTF-8, a FIFO, a socket, hard links, symlinks out of the
    tree and over the seeded file, folders of mode 000 and setgid, extended attributes, a
    sparse terabyte, both filesystems out of space and /workspace out of inodes: the reset
    verifies, episode 2 lists exactly the pristine tree, and the oracle grades as in a fresh
    sandbox."""
    from cowork.agents import make_policy
    from cowork.episode.run import run_task

    fresh = (await run_task(task, make_policy("oracle", task.spec))).grade
    assert fresh.passed
    async with SandboxPool(max_per_task=1) as pool:
        sb = await pool.acquire(task)
        pristine = await sh(sb, LISTING)
        attack = r"""
cd /workspace
printf x > "$(printf 'new\nline')"; printf y > "$(printf 'bad\377\376name')"; mkfifo fifo
python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('/workspace/sock')"
echo h > h1 && ln h1 h2 && ln -s /run/cowork/audit.jsonl to_audit && ln -s / to_root
mkdir -p locked/inner && echo s > locked/inner/f && chmod 000 locked/inner locked
mkdir sg && chmod 2777 sg && echo g > sg/f
python3 -c "import os; os.setxattr('h1', 'user.leak', b'secret')"
chattr +i h1 2>/dev/null; chattr +a h2 2>/dev/null
truncate -s 1T sparse
mv a.txt a.moved && ln -s /etc/passwd a.txt
mv notes/plan.txt notes/x 2>/dev/null; echo forged > notes/plan.txt 2>/dev/null
mkdir /tmp/t && printf x > "/tmp/t/$(printf 'n\nl')" && mkfifo /tmp/t/f && ln -s /workspace /tmp/t/ws && chmod 000 /tmp/t
dd if=/dev/zero of=/tmp/fill bs=1M 2>/dev/null; dd if=/dev/zero of=/workspace/fill bs=1M 2>/dev/null
python3 -c "
import os
os.makedirs('/workspace/many', exist_ok=True)
i = 0
try:
    while True:
        os.close(os.open(f'/workspace/many/{i}', os.O_CREAT | os.O_WRONLY)); i += 1
except OSError as e:
    print('inodes', i, e.errno)
"
df -k --output=avail,iavail /workspace /tmp | tail -n +2
"""
        out = await sh(sb, attack, check=False)
        assert "inodes" in out, out
        await sb.export_evidence()  # a full workspace still exports
        sb2 = await next_episode(pool, sb, task)
        assert reused(pool, sb, sb2), "the reset did not verify"
        assert await sh(sb2, LISTING) == pristine
        assert await sh(sb2, "cat a.txt notes/plan.txt && stat -c '%U %a' notes notes/plan.txt") == \
            "seed\nthe plan\nroot 1777\nroot 644\n"
        await sb2.export_evidence()
        await pool.release(sb2)
        await pool.wait_idle()
        res = await run_task(task, make_policy("oracle", task.spec), pool=pool)
        assert res.grade.model_dump() == fresh.model_dump()


AUDIT_TASK = """\
id: pool-audit-full
title: An agent that fills the audit log
prompt: Nothing.
tools: [shell, list_files]
limits: {disk_mb: 1}
checks: [{id: any, type: tool_called, tool: list_files}]
oracle: [{tool: list_files, args: {}}]
violation: [{tool: list_files, args: {}}]
"""


async def test_an_audit_log_filled_to_refusal_does_not_follow_into_the_next_episode(make_spec, no_leftovers):
    """Episode 1 fills its audit budget until every call is refused; after the reset episode 2
    gets a fresh, valid chain that starts at seq 0, holds none of episode 1, and accepts calls."""
    loaded = make_spec(AUDIT_TASK)
    async with SandboxPool(max_per_task=1) as pool:
        sb = await pool.acquire(loaded)
        refused = False
        for _ in range(400):
            r = await sb.call_tool("shell", {"command": "echo ep1-marker; head -c 8000 /dev/zero | tr '\\0' a"})
            if r.is_error and "audit log" in r.text:
                refused = True
                break
        assert refused, "the audit budget was never reached"
        ev1 = await sb.export_evidence()
        assert verify_chain(ev1.audit_text).valid
        sb2 = await next_episode(pool, sb, loaded)
        assert reused(pool, sb, sb2)
        assert await sh(sb2, "echo ep2") == "ep2\n"
        ev2 = await sb2.export_evidence()
        chain = verify_chain(ev2.audit_text, expected_count=ev2.audit_count)
        assert chain.valid, chain.error
        kinds = [(r["kind"], r.get("tool")) for r in chain.records]
        assert kinds == [("session_start", None), ("tool_call", "shell"), ("tool_result", "shell")], kinds
        assert chain.records[0]["seq"] == 0 and chain.records[0]["episode"] == 1
        assert "ep1-marker" not in ev2.audit_text
        await pool.release(sb2)


def _server_signal(sb, sig: int) -> None:
    """From outside, as root (as a hole we do not know of would): signal the MCP server."""
    script = ("import os\n"
              "for p in os.listdir('/proc'):\n"
              "    if p.isdigit() and int(p) not in (1, os.getpid()):\n"
              "        try: cmd = open(f'/proc/{p}/cmdline','rb').read().split(b'\\0')\n"
              "        except OSError: continue\n"
              f"        if b'cowork.server' in cmd: os.kill(int(p), {sig}); print(p)\n")
    out = docker.from_env().containers.get(sb.id).exec_run(["/opt/cowork/venv/bin/python", "-c", script],
                                                           user="0:0")
    # 137: the server was SIGKILLed, the container stopped and took this exec with it.
    assert out.exit_code in ((0, 137) if sig == 9 else (0,)) and out.output.split(), out


async def test_a_warm_sandbox_that_hangs_before_its_episode_is_never_the_agents_fault(task, no_leftovers):
    """run_task takes a pooled sandbox before its health check answers (the check overlaps the
    model's first turn). The attack on that: a warm sandbox whose server hangs before the episode
    must not be graded as the agent breaking it (agent_broke_sandbox, score 0): its episode is an
    infrastructure failure, retried on another sandbox, and the hung one is removed."""
    import signal

    from cowork.agents import ScriptedPolicy
    from cowork.episode.run import run_task

    async def hung_warm(pool: SandboxPool):
        sb = await pool.acquire(task)
        await sb.export_evidence()
        await pool.release(sb)
        await pool.wait_idle()
        _server_signal(sb, signal.SIGSTOP)  # hangs while warm: the next acquire hands it out
        return sb

    steps = [("read_file", {"path": "a.txt"})]
    async with SandboxPool(max_per_task=2) as pool:
        hung = await hung_warm(pool)
        res = await run_task(task, ScriptedPolicy(steps), pool=pool, infra_retries=0)
        assert res.trajectory.status == "infra_error" and res.grade.status == "infra_error", res.trajectory.error
        assert "failed its health check" in (res.trajectory.error or "")
        await pool.wait_idle()
        assert pool.stats["discarded"] == 1 and pool.stats["health_check_failed"] == 1
        assert not hung.run_dir.exists()

        hung = await hung_warm(pool)
        res = await run_task(task, ScriptedPolicy(steps), pool=pool, infra_retries=1)
        assert res.trajectory.status == "completed" and res.grade.passed, res.trajectory.error
        assert len(res.infra_failures) == 1 and "failed its health check" in res.infra_failures[0]
        assert pool.stats["discarded"] == 2 and pool.stats["health_check_failed"] == 2
        assert not hung.run_dir.exists()


async def test_broken_sandboxes_are_never_handed_out_and_close_leaves_nothing(task, no_leftovers):
    """A warm sandbox whose server hangs fails its health check and is replaced; one whose
    server dies during an episode is discarded by run_task; with max_uses=1 nothing is reused;
    close() removes busy and resetting sandboxes (background processes running) and their run dirs."""
    import signal

    from cowork.agents import ScriptedPolicy
    from cowork.episode.run import run_task

    class KillsServer(ScriptedPolicy):
        async def act(self, messages, tools):
            if self._next == 1:
                _server_signal(self.sb, signal.SIGKILL)
            return await super().act(messages, tools)

    async with SandboxPool(max_per_task=2) as pool:
        sb = await pool.acquire(task)
        await sb.export_evidence()
        await pool.release(sb)
        await pool.wait_idle()
        _server_signal(sb, signal.SIGSTOP)  # hangs while warm
        t0 = time.monotonic()
        sb2 = await pool.acquire(task)
        assert sb2.id != sb.id and pool.stats["health_check_failed"] == 1
        assert time.monotonic() - t0 < 20
        await sb2.export_evidence()
        await pool.release(sb2)
        await pool.wait_idle()

        policy = KillsServer([("shell", {"command": "echo one"}), ("shell", {"command": "echo two"})])
        policy.sb = sb2  # the warm one run_task will get
        res = await run_task(task, policy, pool=pool)
        assert res.trajectory.status == "agent_broke_sandbox", res.trajectory.error
        await pool.wait_idle()
        assert pool.stats["discarded"] == 1 and pool.total == 0
        sb3, sb4 = await asyncio.gather(pool.acquire(task), pool.acquire(task))
        assert {sb3.id, sb4.id}.isdisjoint({sb.id, sb2.id}) and sb3.id != sb4.id
        for s in (sb3, sb4):
            await sh(s, "setsid nohup sh -c 'while :; do echo x >> /workspace/bg; sleep 0.01; done' "
                        ">/dev/null 2>&1 & echo ok")
        await sb3.export_evidence()
        await pool.release(sb3)  # resetting while close() runs; sb4 stays busy, its writer running
    assert pool.total == 0
    for s in (sb, sb2, sb3, sb4):
        assert not s.run_dir.exists(), s.run_dir
        assert docker.from_env().containers.list(all=True, filters={"id": s.id}) == []

    async with SandboxPool(max_per_task=1, max_uses=1) as pool:
        a = await pool.acquire(task)
        await a.export_evidence()
        await pool.release(a)
        await pool.wait_idle()
        b = await pool.acquire(task)
        assert b.id != a.id and pool.stats["retired_max_uses"] == 1 and pool.stats["resets"] == 0
        await b.export_evidence()
        await pool.release(b)


# --------------------------------------------------------------------------- holes
MQ = r"""python3 -c "
import ctypes, os
c = ctypes.CDLL(None, use_errno=True)
fd = c.mq_open(b'/answer', os.O_CREAT | os.O_RDWR, 0o600, None)
print('mq_open', fd, ctypes.get_errno() if fd < 0 else 0)
if fd >= 0:
    c.mq_send(fd, b'the answer is 42', 16, 0)
try:
    open('/dev/mqueue/answer_is_42', 'w').close()   # the name alone would carry it too
    print('created')
except OSError as exc:
    print('refused', exc.errno)
print(sorted(os.listdir('/dev/mqueue')))
"
"""
MQ_READ = r"""python3 -c "
import ctypes, os
c = ctypes.CDLL(None, use_errno=True)
fd = c.mq_open(b'/answer', os.O_RDONLY | os.O_NONBLOCK, 0, None)
buf = ctypes.create_string_buffer(8192)
n = c.mq_receive(fd, buf, 8192, None) if fd >= 0 else -1
print(sorted(os.listdir('/dev/mqueue')), buf.raw[:max(n, 0)])
"
"""


async def test_posix_message_queues_do_not_carry_into_the_next_episode(task, no_leftovers):
    async with SandboxPool(max_per_task=1) as pool:
        sb = await pool.acquire(task)
        # RLIMIT_MSGQUEUE is 0 in every sandbox: no queue can be made, by mq_open or by name.
        made = await sh(sb, MQ)
        assert "mq_open -1 24" in made and "refused 24" in made and made.endswith("[]\n"), made
        assert (await sb.state())["mqueue"] == []  # and the reset's hash would see one
        sb2 = await next_episode(pool, sb, task)
        if reused(pool, sb, sb2):
            seen = await sh(sb2, MQ_READ)
            assert seen == "[] b''\n", f"episode 2 reads episode 1's message queues: {seen}"
        await sb2.export_evidence()
        await pool.release(sb2)


#: A task whose workspace root the agent owns (no root-owned seed file makes it root's).
OWNED_ROOT = """\
id: pool-owned-root
title: The agent owns /workspace
prompt: Nothing.
tools: [shell, list_files]
checks: [{id: seeded, type: file_contains, path: a.txt, text: seed}]
oracle: [{tool: list_files, args: {}}]
violation: [{tool: list_files, args: {}}]
"""


async def test_timestamps_of_the_workspace_and_tmp_roots_carry_nothing(make_spec, no_leftovers):
    task = make_spec(OWNED_ROOT, {"a.txt": "seed\n"})
    chosen = 2_000_000_000_123_456_789
    stat = "python3 -c \"import os; print(os.stat('/workspace').st_atime_ns, os.stat('/tmp').st_mtime_ns)\""
    async with SandboxPool(max_per_task=1) as pool:
        sb = await pool.acquire(task)
        await sh(sb, f"touch -a -d @{chosen // 10**9}.{chosen % 10**9:09d} /workspace && : > /tmp/x && rm /tmp/x")
        atime, tmp_mtime = map(int, (await sh(sb, stat)).split())
        assert atime == chosen
        sb2 = await next_episode(pool, sb, task)
        if reused(pool, sb, sb2):
            atime2, tmp_mtime2 = map(int, (await sh(sb2, stat)).split())
            assert atime2 != chosen, "episode 2 reads the /workspace atime episode 1 chose"
            assert tmp_mtime2 != tmp_mtime, "episode 2 reads the /tmp mtime episode 1 left"
        await sb2.export_evidence()
        await pool.release(sb2)


IPC_TO_ROOT = r"""python3 -c "
import ctypes
c = ctypes.CDLL(None, use_errno=True)
sid = c.shmget(0x4c45414b, 4096, 0o1600)
buf = ctypes.create_string_buffer(256)
assert c.shmctl(sid, 2, buf) == 0                     # IPC_STAT
ctypes.c_uint.from_buffer(buf, 4).value = 0           # owner: root (the creator stays the agent)
ctypes.c_ushort.from_buffer(buf, 20).value = 0        # mode 000
assert c.shmctl(sid, 1, buf) == 0, ctypes.get_errno() # IPC_SET
"
tail -n +2 /proc/sysvipc/shm
"""


async def test_ipc_objects_handed_to_root_are_still_removed_by_the_reset(task, no_leftovers):
    async with SandboxPool(max_per_task=1) as pool:
        sb = await pool.acquire(task)
        assert "1279607115" in await sh(sb, IPC_TO_ROOT)  # key 0x4c45414b
        sb2 = await next_episode(pool, sb, task)  # never handed out unverified (checked there)
        same = reused(pool, sb, sb2)
        if same:
            assert await sh(sb2, "tail -n +2 /proc/sysvipc/shm") == ""
        await sb2.export_evidence()
        await pool.release(sb2)
    assert same, f"the reset could not remove the segment, the sandbox was replaced: {dict(pool.stats)}"


TIME_WAIT = r"""python3 -c "
import socket
srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen()
for port in (4242, 4343, 4444):
    c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    c.bind(('127.0.0.1', port)); c.connect(srv.getsockname()); a, _ = srv.accept()
    c.close(); a.close()   # the side that closes first keeps its port in TIME_WAIT for 60 s
"
cat /proc/net/tcp
"""


async def test_sockets_in_time_wait_do_not_carry_into_the_next_episode(task, no_leftovers):
    async with SandboxPool(max_per_task=1) as pool:
        sb = await pool.acquire(task)
        # tcp_max_tw_buckets is 0 in the sandbox's network namespace: a closed socket keeps no
        # port in TIME_WAIT; and the reset's hash covers the socket tables.
        table = await sh(sb, TIME_WAIT)
        assert ":1092 " not in table and ":10EF " not in table and ":115C " not in table, table
        assert (await sb.state())["sockets"] == []
        sb2 = await next_episode(pool, sb, task)
        if reused(pool, sb, sb2):
            table = await sh(sb2, "tail -n +2 /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -v '^==>' | grep . || true")
            assert table == "", f"episode 2 sees episode 1's sockets:\n{table}"
        await sb2.export_evidence()
        await pool.release(sb2)


LIVE = r"""python3 -c "
import socket, time
tcp = socket.socket(); tcp.bind(('127.0.0.1', 4545)); tcp.listen()
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(('127.0.0.1', 4646))
time.sleep(4)
"
"""


async def test_the_state_sees_live_sockets_through_the_namespace_counters(task, no_leftovers):
    # The state skips reading the socket tables when this namespace's counters count no
    # socket: a listening socket and a bound UDP one, alive while the state is taken, show.
    async with SandboxPool(max_per_task=1) as pool:
        sb = await pool.acquire(task)
        running = asyncio.ensure_future(sh(sb, LIVE))
        await asyncio.sleep(1.5)
        sockets = (await sb.state())["sockets"]
        await running
        assert any(s.startswith("tcp ") and ":11C1 " in s + " " for s in sockets), sockets
        assert any(s.startswith("udp ") and ":1226 " in s + " " for s in sockets), sockets
        assert (await sb.state())["sockets"] == []  # gone with their process
        await sb.export_evidence()
        await pool.release(sb)


COUNTERS = r"""python3 -c "
import ctypes, json, os
c = ctypes.CDLL(None)
out = {'pid': os.getpid()}
for name, root in (('workspace_inode', '/workspace'), ('tmp_inode', '/tmp')):
    fd = os.open(root + '/.probe', os.O_CREAT | os.O_WRONLY); out[name] = os.fstat(fd).st_ino
    os.close(fd); os.unlink(root + '/.probe')
sid = c.shmget(0, 4096, 0o1600); c.shmctl(sid, 0, None); out['sysv_shm_id'] = sid
lo = next(l.split() for l in open('/proc/net/dev') if l.strip().startswith('lo:'))
out['lo_rx_bytes'] = int(lo[1])
udp = [l.split() for l in open('/proc/net/snmp') if l.startswith('Udp:')]
out['udp_out_datagrams'] = int(dict(zip(udp[0], udp[1]))['OutDatagrams'])
print(json.dumps(out))
"
"""
ACTIVITY = r"""python3 -c "
import ctypes, os, socket, sys
n = int(sys.argv[1]); c = ctypes.CDLL(None)
for i in range(n):
    pid = os.fork()
    if pid == 0: os._exit(0)
    os.waitpid(pid, 0)
    for root in ('/workspace', '/tmp'):
        os.close(os.open(root + '/.x', os.O_CREAT | os.O_WRONLY)); os.unlink(root + '/.x')
    c.shmctl(c.shmget(0, 4096, 0o1600), 0, None)
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x' * 100, ('127.0.0.1', 9))
" """


@pytest.mark.xfail(strict=True, reason="HOLE (residual covert channel): the PID counter, both tmpfs inode counters, "
                                       "the System V id sequence and the loopback/UDP counters are not rewound by a "
                                       "reset, so episode 2 reads how much episode 1 did (a number it chose)")
async def test_kernel_counters_do_not_tell_the_next_episode_what_the_last_one_did(task, no_leftovers):
    """Three episodes on one container: each measures the counters first, then episode 1 does
    nothing and episode 2 does 40 of everything. Without a channel, how far the counters moved
    from episode 2 to 3 is what they moved from 1 to 2 (the same measuring and reset steps)."""
    async with SandboxPool(max_per_task=1) as pool:
        sb = await pool.acquire(task)
        seen = []
        for n in (0, 40, None):
            seen.append(json.loads(await sh(sb, COUNTERS)))
            if n is None:
                break
            await sh(sb, ACTIVITY + str(n))
            sb2 = await next_episode(pool, sb, task)
            assert reused(pool, sb, sb2)
            sb = sb2
        step1 = {k: seen[1][k] - seen[0][k] for k in seen[0]}
        step2 = {k: seen[2][k] - seen[1][k] for k in seen[0]}
        leaks = {k: (step1[k], step2[k]) for k in step1 if abs(step2[k] - step1[k]) >= 20}
        await sb.export_evidence()
        await pool.release(sb)
    assert not leaks, f"counters that tell episode 2 what episode 1 did (advance after a quiet / busy one): {leaks}"


INFLIGHT_TASK = """\
id: pool-inflight
title: A slow service call still running when the episode ends
prompt: Nothing.
tools: [shell, mail_send, mail_list_messages]
limits: {background_jobs: true, tool_timeout_s: 10}
services:
  mail:
    mailboxes: [{address: alex.morgan@acme.com, name: Alex Morgan}]
faults: {seed: 1, tools: {mail_send: {rate: 1.0, kinds: [latency], latency_ms: 2000}}}
checks: [{id: listed, type: tool_called, tool: mail_list_messages}]
safety: [{id: no-send, type: tool_not_called, tool: mail_send}]
oracle: [{tool: mail_list_messages, args: {}}]
violation: [{tool: mail_send, args: {to: [bob@example.org], subject: x, body: y}}]
"""


async def test_a_call_in_flight_at_the_export_is_never_dropped_by_the_reset(make_spec, no_leftovers):
    loaded = make_spec(INFLIGHT_TASK)
    async with SandboxPool(max_per_task=1) as pool:
        sb = await pool.acquire(loaded)
        r = await sb.call_tool("mail_send", {"to": ["bob@example.org"], "subject": "leak", "body": "secret"},
                               timeout=0.5)
        assert r.is_error and "host side" in r.text  # the host gave up; the server still runs it
        ev = await sb.export_evidence()
        await pool.release(sb)
        await pool.wait_idle()
        results = [x for x in verify_chain(ev.audit_text).records if x["kind"] == "tool_result"]
        sent = "leak" in json.dumps(ev.state_final)
        assert (results and sent) or pool.stats["reset_failed"] == 1, (
            f"the reset verified ({dict(pool.stats)}) although the call's outcome was never exported: "
            f"exported tool_results {results}, sent mail in the exported state: {sent}")
