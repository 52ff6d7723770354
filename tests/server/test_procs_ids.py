"""The ids a server thread takes to kill the agent's processes leave the server unsignalable by the agent.

The kernel lets a process signal another whose real or saved uid equals its own real or
effective uid. While ``kill_agent_processes`` runs, its thread must therefore hold neither
the agent's uid as its real uid nor anything the agent has: a child dropped to the agent's
uid tries ``kill(parent, 0)`` (a permission check, nothing delivered) while the parent's
main thread holds those ids. Needs root (tests run as root in CI); on a host, uid 1000 is
only borrowed for the check, no process of it is killed.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cowork.server.tools import procs

AGENT = 1000
PROBE = ("import os, sys, time\n"
         "parent = int(sys.argv[1])\n"
         "os.setresgid(1000, 1000, 1000); os.setresuid(1000, 1000, 1000)\n"
         "print('ready', flush=True); sys.stdin.readline()\n"
         "try:\n    os.kill(parent, 0); print('CAN', flush=True)\n"
         "except PermissionError:\n    print('cannot', flush=True)\n")

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or procs._SYS_SETRESUID is None,
                                reason="needs root and a known architecture")


def _can_signal_parent_while(ruid: int) -> str:
    child = subprocess.Popen([sys.executable, "-c", PROBE, str(os.getpid())], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        procs._setresuid_thread(ruid, AGENT, 0)
        try:
            child.stdin.write("go\n")
            child.stdin.flush()
            answer = child.stdout.readline().strip()
        finally:
            procs._setresuid_thread(0, 0, 0)
        return answer
    finally:
        child.wait(10)


def test_the_killers_real_uid_keeps_the_agent_out():
    assert procs.killer_ruid(AGENT) not in (0, AGENT)
    assert _can_signal_parent_while(procs.killer_ruid(AGENT)) == "cannot"
    assert os.getresuid() == (0, 0, 0)


def test_the_agents_uid_as_real_uid_would_let_it_in():
    # What the check above guards against: the ids the server used to take.
    assert _can_signal_parent_while(AGENT) == "CAN"
    assert os.getresuid() == (0, 0, 0)
