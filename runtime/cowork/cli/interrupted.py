"""What a command says when Ctrl-C ends it (exit 130): what finished, where it is kept, and
how to go on. A command that can say more than "interrupted" registers a note while it
runs (:func:`expect`); ``cowork.cli.app`` prints it when a KeyboardInterrupt ends the
command."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

_note: Callable[[], str] | None = None


def expect(note: Callable[[], str]) -> None:
    """From now until the command ends, a Ctrl-C prints ``note()``'s answer."""
    global _note
    _note = note


def reset() -> None:
    """Forget the last command's note (each command starts without one)."""
    global _note
    _note = None


def message() -> str:
    """The line a Ctrl-C prints: the command's note, or a plain one."""
    if _note is not None:
        try:
            return _note()
        except Exception:  # noqa: BLE001 - a broken note must not hide the interruption
            pass
    return "interrupted (Ctrl-C) before the command finished"


def episodes(done: int, total: int, *, out: str | None, results: str | None = None,
             evidence: str | None = None) -> str:
    """The note of ``cowork run`` / ``cowork rollout``: ``done`` episodes finished of the
    ``total`` planned (with ``out``: those its results file holds, as a rerun reads them back),
    where they are, and whether a rerun resumes (only a rollout folder, ``--out``, is resumed)."""
    head = f"interrupted: {done} of {total} episode(s) finished"
    if done == 0:
        return f"{head}; nothing to keep: rerun the same command to start again"
    if out:
        saved = f"saved in {Path(out)} ({Path(out) / 'results.jsonl'})"
        if done >= total:
            return f"{head}, {saved}; rerun the same command for the summary (nothing is run again)"
        return (f"{head}, {saved}; rerun the same command to run the other {total - done} (finished episodes are "
                "read back, not rerun)")
    kept = [f"one line each in {results}"] if results else []
    kept += [f"their evidence under {evidence}"] if evidence else []
    return (f"{head}" + (f" ({'; '.join(kept)})" if kept else "")
            + "; nothing resumable was kept: rerun with --out DIR, and a rerun of that command after another "
              "interruption runs only the episodes not finished")


def specs(figures: Any) -> str:
    """The note of ``cowork validate``: specs proved of those given (there is no resume)."""
    return (f"interrupted: {figures.done} of {figures.total} spec(s) validated; validation keeps nothing to resume "
            "from: rerun it, on the specs not reported yet or on all")
