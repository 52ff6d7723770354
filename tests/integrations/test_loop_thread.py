"""The shared pool runtime without a daemon: work run, spawned and awaited on its loop thread,
closing (background work waited for, the pool closed, the leftover fallback when it cannot
close), the spec cache, and the per-process registry."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from cowork.engine import labels
from cowork.errors import CoworkError
from cowork.integrations import loop_thread
from cowork.integrations.loop_thread import PoolRuntime, Runtimes
from cowork.spec.loader import load_spec

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "specs" / "fix-csv-report"
OPTIONS = SimpleNamespace(max_sandboxes=4, max_per_task=None, max_uses=7, backend=None)


class FakePool:
    """A pool whose ``close`` is recorded, fails with ``fail`` or hangs until ``release`` is set."""

    def __init__(self, fail: BaseException | None = None, hang: bool = False):
        self.fail, self.hang = fail, hang
        self.closed_on: str | None = None
        self.order: list[str] = []
        self.release = threading.Event()

    async def close(self) -> None:
        self.closed_on = threading.current_thread().name
        self.order.append("pool")
        if self.hang:
            while not self.release.is_set():
                await asyncio.sleep(0.01)
        if self.fail is not None:
            raise self.fail


@pytest.fixture
def runtime():
    rt = PoolRuntime(OPTIONS, name="cowork-test-loop", pool=FakePool())
    yield rt
    rt.close(5)


class TestRunningWork:
    def test_run_waits_for_a_result_computed_on_the_loop_thread(self, runtime):
        async def where() -> str:
            await asyncio.sleep(0)
            return threading.current_thread().name

        assert runtime.run(where(), 5) == "cowork-test-loop"
        assert runtime.thread.daemon

    def test_run_raises_the_coroutines_error_and_times_out(self, runtime):
        async def boom() -> None:
            raise ValueError("nope")

        with pytest.raises(ValueError, match="nope"):
            runtime.run(boom(), 5)
        with pytest.raises(TimeoutError):
            runtime.run(asyncio.sleep(5), 0.05)

    def test_run_on_the_loop_thread_itself_is_refused_not_a_deadlock(self, runtime):
        async def nested() -> None:
            runtime.run(asyncio.sleep(0))

        with pytest.raises(CoworkError, match="on the cowork-test-loop thread itself"):
            runtime.run(nested(), 5)

    def test_spawn_tracks_background_work_until_it_ends_and_logs_a_failure(self, runtime, caplog):
        go = threading.Event()

        async def wait_then(fail: bool) -> None:
            while not go.is_set():
                await asyncio.sleep(0.01)
            if fail:
                raise RuntimeError("reset failed")

        ok, bad = runtime.spawn(wait_then(False)), runtime.spawn(wait_then(True))
        assert runtime.background == {ok, bad}
        with caplog.at_level(logging.WARNING, logger=loop_thread.__name__):
            go.set()
            ok.result(5)
            with pytest.raises(RuntimeError):
                bad.result(5)
            deadline = time.monotonic() + 5
            while runtime.background and time.monotonic() < deadline:  # callbacks run just after the result
                time.sleep(0.01)
        assert runtime.background == set()
        assert "reset failed" in caplog.text

    def test_arun_awaits_from_another_loop_and_is_cancelled_with_its_caller(self, runtime):
        started, cancelled = threading.Event(), threading.Event()

        async def forever() -> None:
            started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        async def where() -> str:
            return threading.current_thread().name

        async def caller() -> str:
            name = await runtime.arun(where())
            task = asyncio.ensure_future(runtime.arun(forever()))
            await asyncio.to_thread(started.wait, 5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return name

        assert asyncio.run(caller()) == "cowork-test-loop"
        assert cancelled.wait(5), "the coroutine on the runtime's loop was not cancelled with its caller"


class TestClose:
    def test_close_waits_for_background_work_then_closes_the_pool_and_stops_the_loop(self, runtime):
        order = runtime.pool.order

        async def slow() -> None:
            await asyncio.sleep(0.2)
            order.append("background")

        runtime.spawn(slow())
        runtime.close(5)
        assert order == ["background", "pool"]
        assert runtime.pool.closed_on == "cowork-test-loop"
        assert not runtime.thread.is_alive() and runtime.loop.is_closed()

    def test_a_closed_runtime_refuses_work_and_closes_once(self, runtime):
        runtime.close(5)
        runtime.pool.closed_on = None
        runtime.close(5)  # a second close does nothing (the loop is gone)
        assert runtime.pool.closed_on is None
        coro = asyncio.sleep(0)
        with pytest.raises(CoworkError, match="closed"):
            runtime.run(coro)
        assert coro.cr_frame is None  # closed, so no "never awaited" warning

    def test_a_pool_that_cannot_close_falls_back_to_removing_the_leftovers(self, monkeypatch):
        # What happens at interpreter exit: the thread pools Docker calls run in are shut down.
        rt = PoolRuntime(OPTIONS, pool=FakePool(fail=RuntimeError("cannot schedule new futures after "
                                                                  "interpreter shutdown")))
        calls: list[str] = []
        monkeypatch.setattr(rt, "_remove_leftovers", lambda: calls.append("leftovers"))
        rt.close(5)
        assert calls == ["leftovers"]
        assert not rt.thread.is_alive()

    def test_a_pool_that_hangs_past_the_timeout_falls_back_too(self, monkeypatch):
        pool = FakePool(hang=True)
        rt = PoolRuntime(OPTIONS, pool=pool)
        calls: list[str] = []
        monkeypatch.setattr(rt, "_remove_leftovers", lambda: calls.append("leftovers"))
        try:
            rt.close(0.2)
        finally:
            pool.release.set()
        assert calls == ["leftovers"]

    @pytest.mark.parametrize("prelude", ["", "import concurrent.futures.thread  # as the Docker engine does"])
    def test_at_interpreter_exit_the_sandboxes_are_removed_directly(self, tmp_path, prelude):
        # A real exit: the registry's atexit hook runs after Python shut its thread pools down.
        script = tmp_path / "exits.py"
        script.write_text(prelude + textwrap.dedent("""
            from types import SimpleNamespace
            from cowork.integrations.loop_thread import PoolRuntime, Runtimes

            class Pool:
                async def close(self):
                    print("POOL CLOSED", flush=True)

            class Runtime(PoolRuntime):
                def _remove_leftovers(self):
                    print("LEFTOVERS REMOVED", flush=True)

            options = SimpleNamespace(max_sandboxes=1, max_per_task=None, max_uses=1, backend=None)
            runtimes = Runtimes(lambda o: Runtime(o, pool=Pool()))
            runtimes.get("k", options)
            print("EXITING", flush=True)
        """))
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["EXITING", "LEFTOVERS", "REMOVED"], done.stdout
        assert "was destroyed but it is pending" not in done.stderr

    def test_the_thread_pools_are_up_while_the_interpreter_runs(self):
        assert loop_thread.thread_pools_down() is False

    def test_work_still_running_at_close_is_cancelled_not_dropped(self):
        rt = PoolRuntime(OPTIONS, pool=FakePool())
        cancelled = threading.Event()

        async def forever() -> None:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        fut = rt.spawn(forever())
        rt.close(0.1)  # the background wait gives up; the pool closes; the rest is cancelled
        assert cancelled.is_set() and fut.cancelled()
        assert rt.pool.closed_on is not None and rt.loop.is_closed()

    def test_a_pool_that_closes_needs_no_fallback(self, runtime, monkeypatch):
        monkeypatch.setattr(runtime, "_remove_leftovers", lambda: pytest.fail("the fallback ran"))
        runtime.close(5)
        assert runtime.pool.closed_on == "cowork-test-loop"

    def test_the_leftovers_are_this_processes_and_sessions_sandboxes_of_its_tasks(self, runtime, monkeypatch):
        import os

        from cowork.engine import container, reaper

        task = runtime.spec(CSV).spec.id

        def box(cid: str, **over: str) -> SimpleNamespace:
            lab = {labels.SESSION: labels.SESSION_ID, labels.OWNER_PID: str(os.getpid()), labels.TASK: task,
                   labels.RUN_DIR: f"/runs/{cid}", **over}
            return SimpleNamespace(id=cid, labels=lab)

        found = [box("mine"), box("other-session", **{labels.SESSION: "elsewhere"}),
                 box("other-process", **{labels.OWNER_PID: "1"}), box("other-task", **{labels.TASK: "x"}),
                 SimpleNamespace(id="unlabelled", labels=None)]
        removed: list[tuple[str, str | None]] = []
        monkeypatch.setattr(reaper, "managed_containers", lambda: found)
        monkeypatch.setattr(container, "remove_container", lambda cid, run_dir=None: removed.append((cid, run_dir)))
        runtime.pool.fail = RuntimeError("cannot schedule new futures after interpreter shutdown")
        runtime.close(5)
        assert removed == [("mine", "/runs/mine")]

    def test_a_runtime_that_loaded_no_task_asks_docker_nothing(self, runtime, monkeypatch):
        from cowork.engine import reaper

        monkeypatch.setattr(reaper, "managed_containers", lambda: pytest.fail("docker was asked"))
        runtime.pool.fail = RuntimeError("closed")
        runtime.close(5)


class TestSpecsAndPool:
    def test_one_loaded_spec_per_folder_from_a_path_or_a_loaded_spec(self, runtime, monkeypatch):
        first = runtime.spec(str(CSV))
        assert runtime.spec(CSV / ".." / CSV.name) is first
        monkeypatch.chdir(CSV.parent)
        assert runtime.spec(CSV.name) is first
        other = PoolRuntime(OPTIONS, pool=FakePool())
        try:
            given = load_spec(CSV)
            assert other.spec(given) is given and other.spec(CSV) is given
        finally:
            other.close(5)

    def test_the_default_pool_is_made_from_the_options(self):
        from cowork.sandbox.pool import SandboxPool

        rt = PoolRuntime(OPTIONS)
        try:
            assert isinstance(rt.pool, SandboxPool)
            assert (rt.pool.max_per_task, rt.pool.max_total, rt.pool.max_uses) == (4, 4, 7)
        finally:
            rt.close(5)  # an unused pool closes without Docker

    def test_the_adapters_runtimes_share_it(self):
        from cowork.integrations import stepped, trl

        for cls, name in ((trl._Runtime, "cowork-trl-loop"), (stepped.StepRuntime, "cowork-step-loop")):
            rt = cls(OPTIONS, pool=FakePool())
            try:
                assert isinstance(rt, PoolRuntime) and rt.thread.name == name
            finally:
                rt.close(5)


class TestRuntimes:
    def test_one_runtime_per_key_registered_at_exit_once(self, monkeypatch):
        registered: list = []
        monkeypatch.setattr(loop_thread.atexit, "register", registered.append)
        made: list = []

        def make(options) -> PoolRuntime:
            made.append(options)
            return PoolRuntime(options, pool=FakePool())

        runtimes = Runtimes(make)
        a = runtimes.get("a", OPTIONS)
        assert runtimes.get("a", OPTIONS) is a and len(made) == 1
        runtimes.close_all(5)
        assert runtimes.runtimes == {} and not a.thread.is_alive()
        b = runtimes.get("a", OPTIONS)  # made anew after a close, without a second exit hook
        assert b is not a and registered == [runtimes.close_all]
        runtimes.close_all(5)

    def test_close_all_says_what_failed_and_closes_the_rest(self, caplog):
        runtimes = Runtimes(lambda options: PoolRuntime(options, pool=FakePool()))
        bad, good = runtimes.get("bad", OPTIONS), runtimes.get("good", OPTIONS)

        def fail(timeout: float = 0) -> None:
            raise CoworkError("docker is gone")

        real_close = bad.close
        bad.close = fail  # type: ignore[method-assign]
        with caplog.at_level(logging.WARNING, logger=loop_thread.__name__):
            runtimes.close_all(5)
        assert "docker is gone" in caplog.text
        assert not good.thread.is_alive()
        real_close(5)
