"""Agent processes: make them the OOM killer's first choice, and kill every one of them at once.

Runs inside the container as root. ``kill_agent_processes`` is what keeps a shell call's
leftovers (``setsid``/``nohup`` jobs, fork bombs) from changing files after the call or
during the export.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

#: Script bash sources before an agent command (BASH_ENV): sets oom_score_adj to 1000.
AGENT_BASH_ENV = str(Path(__file__).parents[1] / "agent_env.sh")

_libc = ctypes.CDLL(None, use_errno=True)
#: setresuid as a raw system call: it changes the calling thread only (glibc's wrapper would
#: change every thread of the server).
_SYS_SETRESUID = {"x86_64": 117, "aarch64": 147, "arm64": 147}.get(platform.machine())


#: Real uid of the thread that kills the agent's processes: no process in a sandbox has it.
KILLER_RUID = 65534


def killer_ruid(uid: int) -> int:
    """The real uid kill_agent_processes takes: not root, not ``uid`` (the agent's)."""
    return KILLER_RUID if uid != KILLER_RUID else KILLER_RUID - 1


def _setresuid_thread(ruid: int, euid: int, suid: int) -> None:
    if _SYS_SETRESUID is None or _libc.syscall(_SYS_SETRESUID, ruid, euid, suid) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setresuid({ruid}, {euid}, {suid}) failed: {os.strerror(err)}")


def kill_agent_processes(uid: int) -> None:
    """SIGKILL every process of ``uid`` in this PID namespace, atomically (signal_agent_processes)."""
    signal_agent_processes(uid, signal.SIGKILL)


@contextmanager
def agent_processes_stopped(uid: int) -> Iterator[None]:
    """Hold every process of ``uid`` stopped (SIGSTOP) for the block, then let them go on (SIGCONT).

    For a task with background jobs, what a kill gives an export (nothing changes files while
    they are read) without ending the jobs: a turn boundary or the user's and the world's
    actions freeze them, the final export still kills them. SIGSTOP cannot be caught, and it
    reaches every agent process at once as SIGKILL does, so none is left running to wake the
    others. A job the agent had stopped itself is woken too.
    """
    signal_agent_processes(uid, signal.SIGSTOP)
    try:
        yield
    finally:
        signal_agent_processes(uid, signal.SIGCONT)


def signal_agent_processes(uid: int, sig: int) -> None:
    """Send ``sig`` to every process of ``uid`` in this PID namespace, atomically.

    The calling thread (only it) takes ``uid`` as its effective uid and KILLER_RUID (neither
    root nor the agent) as its real one, keeping 0 as its saved uid, calls ``kill(-1, SIGKILL)``
    and takes uid 0 back. ``kill(-1)`` reaches exactly the processes whose real or saved uid is
    ``uid`` or KILLER_RUID, which are the agent's (root processes refuse it, PID 1 and the server
    itself are never included), and the kernel delivers it under the task-list lock, so a fork
    bomb cannot outrun it: a process with SIGKILL pending can no longer fork. Costs ~10-60 us;
    no fork, no exec.

    The real uid is not the agent's on purpose: the kernel lets a process signal another whose
    real or saved uid is its own, so a thread holding the agent's uid as its real one could be
    stopped or killed, with the whole server, by an agent process that spins on
    ``kill(server, SIGSTOP)`` while its call ends.

    Must be called by root inside the sandbox; on a host it would kill that user's processes.

    Where a thread cannot change its own uid (an unknown architecture, a kernel that does
    not keep ids per thread), a child that drops to ``uid`` does the same ``kill(-1)``
    (~2 ms more).

    Raises:
        OSError: the fallback child could not be started.
    """
    try:
        _setresuid_thread(killer_ruid(uid), uid, 0)
    except OSError as exc:  # a kernel without per-thread ids (or an unknown architecture)
        log.debug("per-thread setresuid unavailable (%s); killing through a child", exc)
        _kill_by_child(uid, sig)
        return
    try:
        if _libc.kill(-1, int(sig)) != 0 and ctypes.get_errno() not in (0, 3):  # 3: ESRCH, none left
            log.warning("kill(-1) as uid %s: %s", uid, os.strerror(ctypes.get_errno()))
    finally:
        try:
            # Allowed without privilege: 0 is still the saved uid.
            _setresuid_thread(0, 0, 0)
        except OSError:  # a server thread stuck as the agent must not go on: stop everything
            log.critical("could not take uid 0 back after killing agent processes")
            os._exit(70)


def _kill_by_child(uid: int, sig: int) -> None:
    setpriv = next((p for p in ("/usr/bin/setpriv", "/bin/setpriv") if os.access(p, os.X_OK)), None)
    if setpriv is None:
        raise OSError(f"cannot kill the processes of uid {uid}: no per-thread setresuid and no setpriv")
    # bash's builtin kill: kill(-1) never includes the caller, so the child survives to exit.
    subprocess.run([setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
                    "/bin/bash", "-c", f"kill -{int(sig)} -1 2>/dev/null; exit 0"],
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=10, check=False, env={"PATH": "/usr/bin:/bin"})
