"""Pausing a model's episodes at a turn boundary while its weights change (partial rollouts).

A trainer that updates the weights while episodes are in flight must not let one turn mix
two weight versions, and should not throw the episodes away either: it pauses them, loads
the new weights, and lets them go on. :class:`TurnGate` is the pause of one engine (the hf
backend's ``HFEngine.pause``; the vllm-server client's, beside vLLM's own ``/pause``): a
turn waits at its start while the gate is held, and :meth:`TurnGate.pause` returns once no
turn is being generated. Each turn's weights version is recorded on its span
(``TurnSpan.policy_version``), so the trajectory shows where the version changed.

The wait happens on the event loop, never in a worker thread: a paused episode holds no
thread of the default executor (on 2 cores it has 6), so a trainer's own ``to_thread``
calls during the pause cannot starve.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class TurnGate:
    """Holds new turns while paused; counts the turns being generated.

    Pauses nest: the gate opens when every :meth:`pause` had its :meth:`resume`.
    """

    def __init__(self) -> None:
        self._holds = 0
        self._active = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._open = asyncio.Event()
        self._idle = asyncio.Event()
        self._bind()

    def _bind(self) -> None:
        """Events of the running loop: an engine outlives event loops (a test's, then the
        next test's; ``asyncio.run`` per training step), and an asyncio.Event that once made
        a coroutine wait belongs to that loop for good."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is self._loop and self._loop is not None:
            return
        self._loop = loop
        self._open, self._idle = asyncio.Event(), asyncio.Event()
        if not self._holds:
            self._open.set()
        if not self._active:
            self._idle.set()

    @property
    def paused(self) -> bool:
        """True while a pause holds the gate."""
        return self._holds > 0

    @property
    def active(self) -> int:
        """Turns being generated now."""
        return self._active

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """One turn: waits while the gate is held, then counts as in flight until it ends."""
        self._bind()
        while not self._open.is_set():
            await self._open.wait()
        self._active += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._active -= 1
            if not self._active:
                self._idle.set()

    async def pause(self) -> None:
        """Hold every turn not yet started; return once the turns in flight have ended."""
        self._bind()
        self._holds += 1
        self._open.clear()
        try:
            await self._idle.wait()
        except BaseException:  # cancelled while waiting: the pause never took hold
            self.resume()
            raise

    def resume(self) -> None:
        """Undo one :meth:`pause`; the held turns start when none is left.

        Raises:
            RuntimeError: when the gate is not paused.
        """
        if not self._holds:
            raise RuntimeError("resume() without a pause()")
        self._holds -= 1
        if not self._holds:
            self._open.set()

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """``async with gate.hold():`` pause, then resume whatever happens inside."""
        await self.pause()
        try:
            yield
        finally:
            self.resume()


__all__ = ["TurnGate"]
