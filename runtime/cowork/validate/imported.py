"""Validation of a spec graded by its original benchmark's grader (``original_grader``), such as
a task imported from Claw-Eval: there is no reference solution, so validation proves what it
can without one.

- ``services``: every HTTP service comes up (the sandbox starts only once each answers its
  health check) and, between the episodes below, resets to its seed, verified by the pool's
  state hash (or the sandbox is recycled, for a service without a reset endpoint);
- ``tools``: every HTTP tool answers a call with arguments made from its input schema (an answer
  with a client error, such as an unknown id, is an answer; a service that does not answer,
  fails with a server error or refuses the arguments is not);
- ``nop``: the no-op agent's grade is the original grader's score for an empty trace, run by
  the original harness's own grading path (its trace reader and its grader call) on the same
  translated trajectory, and it does not pass;
- ``trajectory``: the tool-probe episode's translated trajectory gets the same grade from the
  original harness's grader call and from cowork.

Grades that need the judge are compared only when a judge is given; without one the steps that
depend on it are NOT PROVEN (never proven).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ..agents.scripted import ScriptedPolicy
from ..episode.run import EpisodeResult, run_task

#: Scores closer than this are equal (the original rounds its task score to 4 places).
TOLERANCE = 1e-4


def sample_value(schema: Any, name: str = "value") -> Any:
    """A value of ``schema``: its default, first example or first enum value when it has one,
    else a plain value of its type (an object gets its required properties)."""
    if not isinstance(schema, dict):
        return "x"
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    if isinstance(schema.get("examples"), list) and schema["examples"]:
        return schema["examples"][0]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return sample_value(schema[key][0], name)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or (kind is None and "properties" in schema):
        return sample_args(schema)
    if kind == "array":
        return []
    if kind == "integer":
        return max(1, int(schema.get("minimum", 1)))
    if kind == "number":
        return float(schema.get("minimum", 1))
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    text = f"probe-{name}"
    least = schema.get("minLength")
    return text if not isinstance(least, int) or len(text) >= least else text + "x" * (least - len(text))


def sample_args(schema: Any) -> dict[str, Any]:
    """Arguments for a tool with input schema ``schema``: each required property (see
    :func:`sample_value`); optional ones are left out."""
    if not isinstance(schema, dict):
        return {}
    props = schema.get("properties") or {}
    return {name: sample_value(props.get(name), name) for name in schema.get("required") or [] if isinstance(name, str)}


def answered(step: Any) -> tuple[bool, str]:
    """Whether one probe call was answered by its service: a result, or an HTTP client error
    (4xx) the service gave; not a timeout, a service that is down, a server error or an
    argument refusal (the schema's own sample did not satisfy the schema)."""
    if not step.is_error:
        return True, "answered"
    text = str(step.output or "")
    if text.startswith("HTTP 4"):
        return True, f"answered with a client error ({text[:80]})"
    return False, text[:300]


async def validate_imported(steps: Any) -> None:
    """The steps for a spec with ``original_grader`` and no oracle (see the module doc), adding
    findings to ``steps.report``. ``steps`` is validate._Steps after ``build``."""
    from ..engine.client import in_thread
    from ..engine.original_grader import run_original_grader

    spec, loaded, pool = steps.spec, steps.loaded, steps.pool

    async def run(policy: Any) -> EpisodeResult:
        return await run_task(loaded, policy, image=steps.image, judge=steps.judge, pool=pool)

    before = dict(pool.stats) if pool is not None else {}
    probe_calls = [(t.name, sample_args(t.input_schema)) for t in spec.http_tools]
    probe = await run(ScriptedPolicy([*probe_calls, "Done."], name="tool-probe"))
    problems = []
    seen = [s for s in probe.trajectory.steps if s.tool in {t.name for t in spec.http_tools}]
    for (tool, args), step in zip(probe_calls, seen):
        ok, how = answered(step)
        if not ok:
            problems.append(f"{tool}({args}): {how}")
    missing = [tool for tool, _ in probe_calls[len(seen):]]
    problems += [f"{tool}: never called (the probe ended early: {probe.grade.status})" for tool in missing]
    steps._add(step="tools", ok=not problems,
               detail=f"every one of {len(probe_calls)} HTTP tool(s) answered a call made from its schema"
               if not problems else "; ".join(problems), field="http_tools" if problems else None,
               hint=None if not problems else "check the tool's endpoint (service, method, path) and that the service "
                                              "handles a request with only the required arguments")

    nop = steps.runs["nop"] = await run(ScriptedPolicy([""], name="nop"))
    after = dict(pool.stats) if pool is not None else {}
    resets = after.get("resets", 0) - before.get("resets", 0)
    failed = after.get("reset_failed", 0) - before.get("reset_failed", 0)
    recycled = not any(s.reset is not None for s in spec.http_services) and bool(spec.http_services)
    if pool is None:
        steps._add(step="services", ok=True, proven=False,
                   detail=f"{len(spec.http_services)} service(s) came up; NOT PROVEN: resets are checked only "
                          "with a pool (reuse)")
    else:
        ok = failed == 0 and (resets >= 1 or recycled or not spec.http_services)
        steps._add(step="services", ok=ok,
                   detail=(f"{len(spec.http_services)} service(s) came up; "
                           + ("the sandbox was recycled between episodes (a service has no reset endpoint)"
                              if recycled else f"{resets} verified reset(s) between episodes"))
                   if ok else f"{failed} reset(s) failed or did not restore the seed", field=None if ok else "http_services",
                   hint=None if ok else "make each service's reset endpoint restore exactly its seeded state")

    for name, episode in (("nop", nop), ("trajectory", probe)):
        ev = episode.evidence
        if ev is None:
            steps._add(step=name, ok=False, detail=f"no evidence to grade ({episode.grade.status}: {episode.grade.error})")
            continue
        if steps.judge is not None:  # cowork's own grade of the episode against the harness's
            harness = await in_thread(run_original_grader, spec, loaded.root, ev, steps.image, steps.judge,
                                      modes=("harness",))
            steps._add(**compare(name, episode.grade, harness, judged=True))
            continue
        # Without a judge cowork's grade of a grader that asks one is not graded (fail closed);
        # what can still be shown is that cowork's translation and the original harness's own
        # path give the grader the same trajectory: both run with no judge, as Claw-Eval's
        # `grade` does without a judge key.
        both = await in_thread(run_original_grader, spec, loaded.root, ev, steps.image, None,
                               modes=("cowork", "harness"), without_judge="none")
        mine = both.get("cowork") if isinstance(both, dict) else None
        if isinstance(mine, dict) and "task_score" in mine and episode.grade.status == "graded":
            shown = SimpleNamespace(score=float(mine["task_score"]), passed=bool(mine["passed"]), status="graded")
        else:
            shown = SimpleNamespace(score=0.0, passed=False, status=episode.grade.status if mine else "not graded")
        steps._add(**compare(name, shown, both, judged=False, asked=bool(episode.grade.original and
                                                                          episode.grade.original.get("judge_calls"))))


def compare(step: str, grade: Any, harness: dict[str, Any], *, judged: bool, asked: bool = False) -> dict[str, Any]:
    """A finding comparing cowork's grade of an episode with the original harness's grade of the
    same translated trajectory (``harness``: run_original_grader's result with the
    ``harness`` mode). Without a judge (``judged`` False) ``grade`` is cowork's translation
    graded with no judge; when the grader asks a judge (``asked``), the match proves the
    translation, not the judged grade: NOT PROVEN."""
    theirs = harness.get("harness") if isinstance(harness, dict) else None
    mine = harness.get("cowork") if isinstance(harness, dict) else None
    if (not judged and asked and isinstance(theirs, dict) and isinstance(mine, dict) and theirs.get("error")
            and theirs.get("error") == mine.get("error")):
        # Given no judge, the grader raised the same error on both paths, and cowork's own
        # grading saw it call the judge (Claw-Eval's graders call theirs unconditionally on
        # some traces): the grade needs a judge. Not proven, and not counted as a match. A
        # grader that fails without asking the judge (broken code) stays a failure.
        return {"step": step, "ok": True, "proven": False,
                "detail": f"the grader cannot grade this trace without a judge (both paths raise "
                          f"{str(theirs['error'])[:200]}); NOT PROVEN: needs --judge-model"}
    if not isinstance(theirs, dict) or "task_score" not in theirs:
        # A mode that failed inside the grader container says why in its own entry.
        why = ((theirs or {}).get("error") if isinstance(theirs, dict) else None) \
            or (harness or {}).get("error") or "no result"
        return {"step": step, "ok": False, "detail": f"the original harness's grader call failed: {why}",
                "field": "original_grader", "hint": "run the grader by hand on the trace (see docs/claw-eval.md)"}
    score, passed = float(theirs["task_score"]), bool(theirs["passed"])
    failures = list(harness.get("judge_errors") or [])
    if judged and failures:
        return {"step": step, "ok": False, "detail": f"the judge failed {len(failures)} call(s): {failures[0]}",
                "field": None, "hint": "check the judge endpoint (--judge-model / --judge-base-url)"}
    same = grade.status == "graded" and abs(grade.score - score) <= TOLERANCE and grade.passed == passed
    if same and not judged and asked:
        return {"step": step, "ok": True, "proven": False,
                "detail": f"same grade without a judge: cowork's translation {grade.score:.4f}, the original harness "
                          f"{score:.4f}; NOT PROVEN: the grader asks the judge, so the judged grade needs "
                          "--judge-model"}
    detail = (f"cowork {grade.score:.4f} ({'passed' if grade.passed else 'not passed'}, {grade.status}), "
              f"the original harness {score:.4f} ({'passed' if passed else 'not passed'})")
    if step == "nop" and same and passed:
        return {"step": step, "ok": False, "detail": "the no-op agent passes: " + detail, "field": "original_grader",
                "hint": "the original grader passes an empty trace; the task cannot tell work from none"}
    return {"step": step, "ok": same, "detail": ("same grade: " if same else "grades differ: ") + detail,
            "field": None if same else "original_grader",
            "hint": None if same else "the translation of the trajectory into the original's trace format loses "
                                      "something the grader reads; compare the two traces"}
