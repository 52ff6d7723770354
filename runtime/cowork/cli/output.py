"""What the CLI prints: every value from specs, tools or the agent is escaped (never a raw
control character), Rich styles only on our own words, JSON escaped by the encoder.

Rich text is built from :class:`rich.text.Text` objects, never from markup strings with
task data in them: a task id like ``[bold]x`` must print as written, not restyle the line.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.text import Text

from ..rollouts.progress import live_console
from ..terminal import printable

#: Our own verdict words and their colour on a terminal.
_STYLES = {"PASSED": "bold green", "FAILED": "bold red", "VALID": "bold green", "INVALID": "bold red",
           "UNPROVEN": "bold yellow"}


def console(err: bool = False) -> Console:
    """The console for stdout (or stderr): the progress bar's while one is drawn on the same
    terminal (so lines go above it), else one on the current stream (looked up at each
    write, so a test's captured stream is honoured)."""
    live = live_console()
    if live is not None and (err or sys.stdout.isatty()):
        return live
    return Console(stderr=err, soft_wrap=True, highlight=False, markup=False, emoji=False)


def show(text: Text, *, err: bool = False) -> None:
    """Print one of our Text lines. Soft wrap: a long line is the terminal's to wrap, never
    cut into two lines of output."""
    console(err).print(text, soft_wrap=True)


def say(text: object = "", *, err: bool = False) -> None:
    """Print text (newlines kept, every other control character escaped)."""
    show(Text(printable(text, newlines=True)), err=err)


def error(message: object) -> None:
    """``cowork: error: MESSAGE`` on stderr."""
    show(Text("cowork: error: ", style="bold red") + Text(printable(message, newlines=True)), err=True)


def print_json(obj: Any) -> None:
    """Indented JSON on stdout; ``ensure_ascii`` escapes every control and bidi character."""
    print(json.dumps(obj, indent=2, default=str))


def verdict_line(head: str, verdict: str, tail: str) -> Text:
    """``head: VERDICT  tail`` with the verdict coloured; head and tail are escaped here."""
    return (Text(printable(head) + ": ") + Text(verdict, style=_STYLES.get(verdict, "bold yellow"))
            + Text("  " + printable(tail)))


def styled(line: str) -> Text:
    """A line of ours whose first word may be a verdict (``VALID   task (path)``): escaped,
    and the verdict coloured on a terminal."""
    text = Text(printable(line))
    word = line.split(" ", 1)[0]
    if word in _STYLES:
        text.stylize(_STYLES[word], 0, len(word))
    return text


def episode_line(sample: Any, *, trial: bool = False) -> Text:
    """One line per episode: task, verdict, score, safety, turns, tool calls, seconds; the
    way it ended when that was not the agent finishing, and the trial with several."""
    g, t = sample.grade, sample.trajectory
    safe = {True: "True", False: "False", None: "unknown"}[g.safe]
    tail = f"score={g.score:.2f} safe={safe}  {t.turns} turn(s), {len(t.steps)} tool call(s), {t.duration_s:.2f}s"
    ended = [s for s in dict.fromkeys((t.status, g.status)) if s not in ("completed", "graded")]
    if ended:
        tail += f"  [{', '.join(ended)}]"
    if trial:
        tail += f"  (trial {sample.sample + 1})"
    return verdict_line(sample.task, "PASSED" if g.passed else "FAILED", tail)


#: Marks of Grade.summary() check lines that say nothing went wrong: a pass, and a check
#: left unjudged for want of a judge or verifier (``n/a!`` and ``ERR `` are kept).
_QUIET_MARKS = ("  ok   ", "  n/a  ")


def failure_lines(sample: Any) -> list[str]:
    """What a failing episode shows under its line: the error, the failed checks and the
    violations (the grade's own lines, escaped there), and why the agent stopped."""
    g, t = sample.grade, sample.trajectory
    lines = [ln for ln in g.summary().splitlines()[1:] if not ln.startswith(_QUIET_MARKS)]
    if t.error and t.status != "completed" and not g.error:
        lines.insert(0, f"  agent: {printable(t.status)}: {printable(t.error)}")
    return lines


def full_lines(sample: Any) -> list[str]:
    """``-v``: the agent's line and every check line (the grade's whole summary)."""
    t = sample.trajectory
    head = (f"agent {printable(t.agent)}: {printable(t.status)} after {t.turns} turn(s), {len(t.steps)} tool call(s), "
            f"{t.duration_s:.2f}s")
    return [head, *sample.grade.summary().splitlines()]


def print_episode(sample: Any, *, trial: bool = False, verbose: bool = False) -> None:
    """The episode's line, and its failures (everything with ``verbose``)."""
    if verbose:
        for line in full_lines(sample):
            show(Text(line))
        return
    show(episode_line(sample, trial=trial))
    if not sample.grade.passed:
        for line in failure_lines(sample):
            show(Text(line))


def num(x: float | None) -> str:
    """A figure with three decimals, or ``-`` for none."""
    return "-" if x is None else f"{x:.3f}"


def metrics_table(metrics: dict[str, Any]) -> str:
    """Mean score, pass@1, pass@k, pass^k and safety (episodes that violated a rule, and those
    whose safety could not be judged) per task and overall (task ids escaped)."""
    lines = ["", f"{'task':32} {'trials':>6} {'mean':>6} {'pass@1':>7} {'pass@k':>7} {'pass^k':>7} {'unsafe':>7}"]
    for task, m in metrics["tasks"].items():
        k = m["k"]
        lines.append(f"{printable(task):32} {m['trials']:>6} {m['mean_score']:>6.2f} {m['pass@1']:>7.2f} "
                     f"{m[f'pass@{k}']:>7.2f} {m[f'pass^{k}']:>7.2f} {_unsafe(m.get('unsafe'), m.get('safety_unknown')):>7}"
                     f"   (k={k})")
    o = metrics["overall"]
    if metrics["tasks"]:
        pk = next((key for key in o if key.startswith("pass@") and key != "pass@1"), "pass@1")
        hk = next((key for key in o if key.startswith("pass^")), None)
        s = metrics.get("safety") or {}
        lines.append(f"{'overall':32} {'':>6} {o.get('mean_score', 0):>6.2f} {o.get('pass@1', 0):>7.2f} "
                     f"{o.get(pk, 0):>7.2f} {o.get(hk, 0) if hk else 0:>7.2f} {_unsafe(s.get('unsafe'), s.get('unknown')):>7}")
    return "\n".join(lines)


def _unsafe(unsafe: int | None, unknown: int | None) -> str:
    """The safety column: episodes that violated a rule, ``+N?`` for those not judged."""
    return ("-" if unsafe is None else str(unsafe)) + (f"+{unknown}?" if unknown else "")


def safety_line(metrics: dict[str, Any]) -> str:
    """What the safety column counts, in words, over every scored episode."""
    s = metrics["safety"]
    rate = "-" if s["violation_rate"] is None else f"{s['violation_rate']:.2f}"
    return (f"safety: {s['unsafe']} of {s['scored']} scored episode(s) violated a rule (rate {rate}); "
            f"{s['unknown']} could not be judged (counted as not safe)")


def agents_line(metrics: dict[str, Any]) -> str | None:
    """``agents: oracle 2, nop 1`` when the episodes were not all played by one agent."""
    agents = metrics.get("agents") or {}
    if len(agents) < 2:
        return None
    return "agents: " + ", ".join(f"{printable(name)} {n}" for name, n in agents.items())


def not_scored_line(summary: dict[str, Any]) -> str | None:
    """What was not scored or was retried, when anything was."""
    e = summary["episodes"]
    policy = e.get("policy_error", 0)
    if not (e["infra_error"] or e["infra_retries"] or e["agent_broke_sandbox"] or policy):
        return None
    return (f"episodes: {e['total']}; infrastructure errors (not scored): {e['infra_error']}; "
            + (f"model endpoint failures (not scored): {policy}, {e.get('policy_error_unsafe', 0)} of them after "
               "violating a rule; " if policy else "")
            + f"retried after an infrastructure failure: {e['infra_retries']}; "
            f"agent broke its sandbox (scored 0): {e['agent_broke_sandbox']}")
