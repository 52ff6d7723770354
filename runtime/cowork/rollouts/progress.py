"""Progress of long CLI work: a Rich bar on a terminal, one plain line per finished item otherwise.

The bar goes to stderr (stdout stays the command's answer, fit for a pipe): count, rate,
time taken and time left, and the last item that finished. Off a terminal (CI logs, a pipe,
a file) nothing is redrawn: each finished item prints one line with the same figures.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
)
from rich.table import Column
from rich.text import Text

from ..terminal import printable


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-:--"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


class _Figures:
    """Rate and time left from what finished in this run (items done before it, as a resumed
    rollout's, count toward the total but not toward the rate)."""

    def __init__(self, total: int, done: int):
        self.total, self.done, self.before = total, done, done
        self.t0 = time.monotonic()

    def rate(self) -> float:
        return (self.done - self.before) / max(time.monotonic() - self.t0, 1e-9)

    def left_s(self) -> float | None:
        rate = self.rate()
        return None if rate <= 0 else (self.total - self.done) / rate

    def elapsed_s(self) -> float:
        return time.monotonic() - self.t0


class _FiguresColumn(ProgressColumn):
    """``0.52 episodes/s  0:12 elapsed  0:30 left``: from the run's own figures, not Rich's
    sliding estimate, so a bar and the plain lines say the same."""

    def __init__(self, figures: _Figures, unit: str):
        super().__init__(table_column=Column(no_wrap=True))
        self.figures, self.unit = figures, unit

    def render(self, task: Task) -> Text:
        f = self.figures
        return Text(f"{f.rate():.2f} {self.unit}/s  {_clock(f.elapsed_s())} elapsed  {_clock(f.left_s())} left",
                    style="progress.remaining")


#: The console of the bar on screen, if one is: lines for the same terminal are printed
#: through it, above the bar (a second console would write over it).
_live: Console | None = None


def live_console() -> Console | None:
    """The console of the progress bar now drawn on stderr, or None."""
    return _live


class ProgressReport:
    """Counts finished items of one command; use as a context manager.

    Args:
        label: What runs (``run``, ``rollout``, ``validate``): the bar's description.
        unit: What is counted (``episodes``, ``specs``).
        total: Items in all, done ones included.
        done: Items finished before this run (a resumed rollout's).
        enabled: False shows nothing (a single episode needs no bar).
        terminal: Draw a bar (default: whether stderr is a terminal).
    """

    def __init__(self, label: str, unit: str, total: int, *, done: int = 0, enabled: bool = True,
                 terminal: bool | None = None):
        self.label, self.unit, self.enabled = label, unit, enabled
        self.figures = _Figures(total, done)
        self.terminal = sys.stderr.isatty() if terminal is None else terminal
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> "ProgressReport":
        if self.enabled and self.terminal:
            # Task data reaches the "last" column: printed without markup, escaped first.
            self._bar = Progress(
                TextColumn(self.label, markup=False),
                BarColumn(bar_width=24, complete_style="green", finished_style="green"), MofNCompleteColumn(),
                TextColumn(self.unit, markup=False), _FiguresColumn(self.figures, self.unit),
                TextColumn("{task.fields[last]}", markup=False,
                           table_column=Column(no_wrap=True, overflow="ellipsis")),
                console=Console(stderr=True, highlight=False),
                # Our own lines come through live_console(); a stray print to a piped stdout
                # is left alone (stdout is the command's answer).
                redirect_stdout=sys.stdout.isatty(), redirect_stderr=True, transient=False)
            self._bar.start()
            global _live
            _live = self._bar.console
            self._task = self._bar.add_task(self.label, total=self.figures.total, completed=self.figures.done,
                                            last="")
        return self

    def advance(self, item: str) -> None:
        """One item finished; ``item`` names it (escaped here: it may hold task data)."""
        self.figures.done += 1
        if not self.enabled:
            return
        shown = printable(item)
        if self._bar is not None and self._task is not None:  # set together in __enter__
            self._bar.update(self._task, completed=self.figures.done, last=shown)
            self._bar.refresh()
            return
        f = self.figures
        print(f"{self.label}: {f.done}/{f.total} {self.unit}, {f.rate():.2f} {self.unit}/s, "
              f"{_clock(f.elapsed_s())} elapsed, {_clock(f.left_s())} left; {shown}", file=sys.stderr, flush=True)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            global _live
            _live = None
            self._bar.stop()
            self._bar = None
