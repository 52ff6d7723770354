"""The ``cowork`` command without a daemon (tests/integration/test_cli.py has the Docker ones):
exit codes, endpoint preflight, progress on a terminal and off one, escaped output, "did you
mean", ``cowork view``, help.

Episodes are scripted by standing in for ``cowork.episode.run.run_task`` (the rollout runner
looks it up at call time); endpoints are loopback HTTP servers or a closed port.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import socket
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from cowork import cli
from cowork.cli import exits
from cowork.episode import run as episode
from cowork.episode.run import EpisodeResult, Trajectory
from cowork.errors import DockerUnavailable
from cowork.grading import Grade
from cowork.grading.grade import CheckResult
from fakes import FakeChatServer

ROOT = Path(__file__).resolve().parents[2]
CSV = str(ROOT / "specs" / "fix-csv-report")
CONFIG = str(ROOT / "specs" / "update-service-config")
ESC = "\x1b[31m"


def _result(task: str = "fix-csv-report", *, passed: bool = True, status: str = "completed",
            grade_status: str = "graded", checks: list[CheckResult] | None = None, error: str | None = None,
            score: float | None = None) -> EpisodeResult:
    score = (1.0 if passed else 0.25) if score is None else score
    return EpisodeResult(Trajectory(task=task, agent="oracle", status=status, turns=3, duration_s=0.5, error=error),
                         Grade(task=task, status=grade_status, score=score, passed=passed, safe=True,
                               completion=score, checks=checks or [], error=error if grade_status != "graded" else None),
                         None, [])


@pytest.fixture
def episodes(monkeypatch):
    """Script the episodes: ``episodes.append(result)`` per episode, in order; the default passes."""
    queue: list[EpisodeResult] = []

    async def fake_run_task(loaded, *args, **kwargs):
        return queue.pop(0) if queue else _result(loaded.spec.id)

    monkeypatch.setattr(episode, "run_task", fake_run_task)
    return queue


def _endpoint(status: int) -> FakeChatServer:
    """A loopback OpenAI-compatible root answering ``GET /models`` with a fixed status."""
    return FakeChatServer(lambda method, path, body: (status, {"data": []} if status == 200 else {"error": "no"}))


@pytest.fixture
def endpoint():
    made = []

    def make(status: int) -> FakeChatServer:
        made.append(_endpoint(status))
        return made[-1]

    yield make
    for e in made:
        e.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once it is closed


# --------------------------------------------------------------------------- exit codes
class TestExitCodes:
    def test_0_when_everything_ran_even_if_tasks_failed(self, episodes, capsys):
        episodes += [_result(passed=False), _result()]
        assert cli.main(["run", CSV, "--trials", "2"]) == exits.OK
        out = capsys.readouterr().out
        assert "FAILED" in out and "PASSED" in out and "overall" in out

    def test_1_when_the_mean_score_is_under_fail_under(self, episodes, capsys):
        episodes += [_result(passed=False), _result()]  # mean 0.625
        assert cli.main(["run", CSV, "--trials", "2", "--fail-under", "0.9"]) == exits.GATE_FAILED
        assert "mean score 0.625 is below --fail-under 0.9" in capsys.readouterr().err
        episodes += [_result(passed=False), _result()]
        assert cli.main(["run", CSV, "--trials", "2", "--fail-under", "0.6"]) == exits.OK

    def test_1_for_rollout_under_fail_under(self, episodes, tmp_path):
        episodes += [_result(passed=False)]
        assert cli.main(["rollout", CSV, "--out", str(tmp_path / "o"), "--fail-under", "0.5"]) == exits.GATE_FAILED

    def test_1_when_a_spec_is_invalid(self, tmp_path, capsys):
        (tmp_path / "task.yaml").write_text("id: x\ntitle: t\nprompt: p\nlimits:\n  max_turns: lots\n")
        assert cli.main(["validate", str(tmp_path)]) == exits.GATE_FAILED
        out = capsys.readouterr().out
        assert "INVALID" in out and "task.yaml:5: limits.max_turns:" in out

    def test_1_when_export_keeps_nothing(self, episodes, tmp_path, capsys):
        episodes += [_result(passed=False)]
        assert cli.main(["rollout", CSV, "--out", str(tmp_path / "o")]) == exits.OK
        rc = cli.main(["export", str(tmp_path / "o"), "--format", "openai-sft", "--out", str(tmp_path / "x.jsonl")])
        assert rc == exits.GATE_FAILED

    def test_2_for_a_bad_spec_with_file_and_line(self, tmp_path, capsys):
        (tmp_path / "task.yaml").write_text("id: x\ntitle: t\nprompt: p\nlimits:\n  max_turns: lots\n")
        assert cli.main(["run", str(tmp_path)]) == exits.BAD_INPUT
        assert "task.yaml:5: limits.max_turns:" in capsys.readouterr().err

    @pytest.mark.parametrize("argv", [["run", CSV, "--trials", "0"], ["run", CSV, "--fail-under", "2"],
                                      ["run", CSV, "--no-such-option"], ["run", CSV, "--agent", "openai"],
                                      ["validate", CSV, "--concurrency", "0"], ["nosuchcommand"], ["run"]])
    def test_2_for_bad_arguments(self, argv, capsys):
        assert cli.main(argv) == exits.BAD_INPUT
        assert "cowork: error:" in capsys.readouterr().err

    @pytest.mark.parametrize("cmd", [["run"], ["validate"], ["grade"], ["view"], ["export"]])
    def test_2_for_a_missing_folder(self, cmd, tmp_path, capsys):
        argv = [*cmd, str(tmp_path / "missing")] + (["--format", "rl", "--out", str(tmp_path / "x.jsonl")]
                                                    if cmd == ["export"] else [])
        assert cli.main(argv) == exits.BAD_INPUT
        err = capsys.readouterr().err
        assert "missing" in err and "cowork: error:" in err

    def test_3_when_docker_is_unavailable(self, monkeypatch, capsys):
        import docker

        from cowork.engine import client

        def no_daemon(*args, **kwargs):
            raise docker.errors.DockerException("test: no daemon here")

        # The client itself finds no daemon: every module that holds get_client sees it.
        monkeypatch.setattr(client, "_client", None)
        monkeypatch.setattr(client.docker, "from_env", no_daemon)
        assert cli.main(["gc"]) == exits.INFRASTRUCTURE
        err = capsys.readouterr().err
        assert "no Docker daemon answers (test: no daemon here)" in err and "start one" in err

    def test_3_when_docker_is_unavailable_for_run(self, monkeypatch, capsys):
        async def no_daemon(*args, **kwargs):
            raise DockerUnavailable("no Docker daemon answers (test); start one")

        monkeypatch.setattr(episode, "run_task", no_daemon)
        assert cli.main(["run", CSV]) == exits.INFRASTRUCTURE
        assert "no Docker daemon answers" in capsys.readouterr().err

    def test_3_when_an_episode_ended_on_the_model_endpoint(self, episodes, capsys):
        episodes += [_result(passed=False, status="policy_error", grade_status="policy_error", score=0.0,
                             error="chat completion at http://x/v1 failed: HTTP 401")]
        assert cli.main(["run", CSV, "--fail-under", "0.0"]) == exits.INFRASTRUCTURE
        cap = capsys.readouterr()
        assert "[policy_error]" in cap.out and "HTTP 401" in cap.out
        assert "1 episode(s) ended because the model failed to answer" in cap.err and "--base-url" in cap.err

    def test_infrastructure_wins_over_the_gate(self, episodes):
        episodes += [_result(passed=False, grade_status="infra_error", status="infra_error", score=0.0, error="x")]
        assert cli.main(["run", CSV, "--fail-under", "0.5"]) == exits.INFRASTRUCTURE

    def test_readme_has_the_table(self):
        readme = (ROOT / "README.md").read_text()
        table = readme[readme.index("### Exit codes"):]
        rows = re.findall(r"^\| (\d+) \|", table[:table.index("\n\n", table.index("|"))], re.M)
        assert rows == ["0", "1", "2", "3", "130"]


# --------------------------------------------------------------------------- the harness agent
class TestHarnessAgent:
    def test_agent_harness_runs_a_main_agent_and_subagents_on_the_openai_backend(self, endpoint, monkeypatch,
                                                                                   capsys):
        from cowork.agents.harness import HarnessPolicy
        from cowork.agents.openai import OpenAIPolicy

        server = endpoint(200)
        seen: list = []

        async def fake_run_task(loaded, policy, *args, **kwargs):
            seen.append(policy)
            return _result(loaded.spec.id)

        monkeypatch.setattr(episode, "run_task", fake_run_task)
        assert cli.main(["run", CSV, "--agent", "harness", "--model", "m", "--base-url", server.url,
                         "--temperature", "0.3"]) == exits.OK
        (policy,) = seen
        assert isinstance(policy, HarnessPolicy) and isinstance(policy.main, OpenAIPolicy)
        assert policy.main.model == "m" and server.url.rstrip("/") in str(policy.main.base_url)
        assert len(server.requests) == 1  # the endpoint was preflighted like --agent openai's

    def test_agent_harness_without_a_model_is_refused(self, episodes, capsys):
        assert cli.main(["run", CSV, "--agent", "harness"]) == exits.BAD_INPUT
        assert "--agent harness needs --model" in capsys.readouterr().err


# --------------------------------------------------------------------------- endpoint preflight
class TestPreflight:
    def test_a_closed_port_exits_3_naming_the_endpoint_and_the_fix(self, episodes, capsys):
        url = f"http://127.0.0.1:{_closed_port()}/v1"
        assert cli.main(["run", CSV, "--agent", "openai", "--model", "m", "--base-url", url]) == exits.INFRASTRUCTURE
        err = capsys.readouterr().err
        assert url in err and "cannot be reached" in err and "ConnectError" in err and "check --base-url" in err

    def test_a_refused_key_exits_3_saying_which_variable(self, episodes, endpoint, monkeypatch, capsys):
        server = endpoint(401)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        assert cli.main(["run", CSV, "--agent", "openai", "--model", "m", "--base-url", server.url]) == 3
        err = capsys.readouterr().err
        assert "refused the key (HTTP 401" in err and "set $OPENAI_API_KEY" in err and server.url in err
        monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
        assert cli.main(["run", CSV, "--agent", "openai", "--model", "m", "--base-url", server.url]) == 3
        err = capsys.readouterr().err
        assert "refused the key (HTTP 401" in err and "check $OPENAI_API_KEY" in err
        assert server.requests[-1] == {"method": "GET", "path": "/v1/models", "auth": "Bearer sk-wrong", "body": None}

    def test_the_missing_key_is_named(self, episodes, endpoint, monkeypatch, capsys):
        server = endpoint(403)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        assert cli.main(["run", CSV, "--agent", "openai", "--model", "m", "--base-url", server.url]) == 3
        err = capsys.readouterr().err
        assert "HTTP 403" in err and "set $OPENAI_API_KEY" in err

    @pytest.mark.parametrize("status", [200, 404, 405])
    def test_a_reachable_endpoint_goes_on(self, episodes, endpoint, status, capsys):
        server = endpoint(status)
        assert cli.main(["run", CSV, "--agent", "openai", "--model", "m", "--base-url", server.url]) == exits.OK
        assert len(server.requests) == 1 and "PASSED" in capsys.readouterr().out

    def test_the_judge_endpoint_is_checked_too(self, episodes, capsys, tmp_path, monkeypatch):
        monkeypatch.setenv("COWORK_CACHE", str(tmp_path))
        url = f"http://127.0.0.1:{_closed_port()}/v1"
        assert cli.main(["run", CSV, "--judge-model", "j", "--judge-base-url", url]) == exits.INFRASTRUCTURE
        err = capsys.readouterr().err
        assert "--judge-model" in err and url in err and "--judge-base-url" in err

    def test_the_user_endpoint_is_checked_too(self, episodes, capsys):
        url = f"http://127.0.0.1:{_closed_port()}/v1"
        assert cli.main(["rollout", CSV, "--out", "unused", "--user-model", "u", "--user-base-url", url]) == 3
        assert "--user-model" in capsys.readouterr().err


# --------------------------------------------------------------------------- progress
RUNNER = textwrap.dedent("""
    import asyncio, sys
    from cowork.episode import run as episode
    from cowork.episode.run import EpisodeResult, Trajectory
    from cowork.grading import Grade

    from cowork.grading.grade import CheckResult

    HOSTILE = None  # a failing check's detail, when set

    async def fake_run_task(loaded, *args, **kwargs):
        await asyncio.sleep(0.4)
        t = loaded.spec.id
        checks = [] if HOSTILE is None else [CheckResult(id="c", type="file_exists", group="completion",
                                                         status="fail", passed=False, weight=1, detail=HOSTILE)]
        return EpisodeResult(Trajectory(task=t, agent="oracle", status="completed", turns=2),
                             Grade(task=t, status="graded", score=1.0 if HOSTILE is None else 0.0,
                                   passed=HOSTILE is None, safe=True, checks=checks), None, [])

    episode.run_task = fake_run_task
    from cowork.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def _on_a_terminal(script: Path, argv: list[str]) -> tuple[int, str]:
    """Run the command with stdout and stderr on a pseudo-terminal; what it drew."""
    main_fd, child_fd = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "150"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, str(script), *argv], stdin=child_fd, stdout=child_fd, stderr=child_fd,
                            env=env, cwd=ROOT)
    os.close(child_fd)
    seen = b""
    try:
        while True:
            ready, _, _ = select.select([main_fd], [], [], 60)
            if not ready:
                break
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(main_fd)
        proc.wait(timeout=60)
    return proc.returncode, seen.decode("utf-8", "replace")


class TestProgress:
    def test_a_bar_on_a_terminal(self, tmp_path):
        script = tmp_path / "runner.py"
        script.write_text(RUNNER)
        rc, seen = _on_a_terminal(script, ["run", CSV, CONFIG])
        assert rc == 0, seen
        assert "1/2" in seen and "2/2" in seen and "episodes/s" in seen and "left" in seen
        assert "\r\x1b[2K" in seen  # redrawn in place
        assert "━" in seen  # the bar itself
        assert seen.count("PASSED") == 2  # each episode's line, printed above the bar

    def test_plain_lines_when_piped(self, tmp_path):
        script = tmp_path / "runner.py"
        script.write_text(RUNNER)
        proc = subprocess.run([sys.executable, str(script), "run", CSV, "--trials", "2"], capture_output=True,
                              text=True, cwd=ROOT, timeout=120)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stderr.splitlines()
        assert [ln.split(",")[0] for ln in lines] == ["run: 1/2 episodes", "run: 2/2 episodes"]
        assert "episodes/s" in lines[-1] and "left" in lines[-1] and "fix-csv-report (trial 2)" in lines[-1]
        assert "\r" not in proc.stderr and "\x1b" not in proc.stderr + proc.stdout
        assert proc.stdout.count("PASSED") == 2

    def test_rollout_counts_what_a_resumed_folder_holds(self, episodes, tmp_path, capsys):
        out = tmp_path / "o"
        assert cli.main(["rollout", CSV, "--group-size", "3", "--out", str(out)]) == 0
        results = out / "results.jsonl"
        results.write_text("".join(results.read_text().splitlines(keepends=True)[:2]))  # the third is lost
        capsys.readouterr()
        assert cli.main(["rollout", CSV, "--group-size", "3", "--out", str(out)]) == 0
        cap = capsys.readouterr()
        assert "(1 run now, 2 done before)" in cap.out
        assert cap.err.splitlines()[0].startswith("rollout: 3/3 episodes, ")

    def test_a_single_episode_draws_nothing(self, episodes, capsys):
        assert cli.main(["run", CSV]) == 0
        assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------- escaping
class TestEscaping:
    HOSTILE = f"{ESC}[bold]PASSED[/bold]\r"

    def test_task_data_prints_escaped_never_raw_nor_as_markup(self, episodes, capsys):
        check = CheckResult(id=f"c{ESC}", type="file_contains", group="completion", status="fail", passed=False,
                            weight=1.0, detail=f"out.txt holds {self.HOSTILE}")
        episodes.append(_result(passed=False, checks=[check], status="max_turns", error=f"tool said {ESC}"))
        assert cli.main(["run", CSV]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\r" not in out
        assert "c\\x1b[31m" in out and "\\x1b[31m[bold]PASSED[/bold]\\r" in out and "tool said \\x1b[31m" in out

    def test_on_a_terminal_too(self, tmp_path):
        script = tmp_path / "runner.py"
        script.write_text(RUNNER.replace("HOSTILE = None", f"HOSTILE = {self.HOSTILE!r}"))
        rc, seen = _on_a_terminal(script, ["run", CSV, "--trials", "2"])
        # Rich colours our own words with escape sequences; the task's never reach the terminal raw.
        assert rc == 0 and f"{ESC}[bold]" not in seen and "PASSED[/bold]\r" not in seen
        assert seen.count("\\x1b[31m[bold]PASSED[/bold]\\r") == 2  # shown, as written, once per episode

    def test_verbose_prints_every_check_escaped(self, episodes, capsys):
        ok = CheckResult(id="fine", type="file_exists", group="completion", status="pass", passed=True, weight=1.0,
                         detail=f"exists {ESC}")
        episodes.append(_result(checks=[ok]))
        assert cli.main(["run", CSV, "-v"]) == 0
        out = capsys.readouterr().out
        assert "ok   completion fine: exists \\x1b[31m" in out and "agent oracle: completed after 3 turn(s)" in out
        episodes.append(_result(checks=[ok]))
        assert cli.main(["run", CSV]) == 0
        assert "fine" not in capsys.readouterr().out  # a pass is one line

    @pytest.mark.parametrize("written", ["\\e[31m", ESC])  # a YAML escape, and the raw character
    def test_an_error_quoting_the_spec_is_escaped_and_located(self, tmp_path, capsys, written):
        (tmp_path / "task.yaml").write_text(f'id: "bad{written}"\ntitle: t\nprompt: p\n')
        assert cli.main(["run", str(tmp_path)]) == exits.BAD_INPUT
        err = capsys.readouterr().err
        assert "\x1b" not in err and "task.yaml:1: " in err and "\\x1b" in err


# --------------------------------------------------------------------------- did you mean
class TestDidYouMean:
    @pytest.mark.parametrize("argv,suggestion", [
        (["rnu", CSV], "Did you mean 'run'?"),
        (["validat", CSV], "Did you mean 'validate'?"),
        (["run", CSV, "--agent", "orcale"], "did you mean 'oracle'?"),
        (["run", CSV, "--agent", "vllm-sever"], "did you mean 'vllm-server'?"),
        (["rollout", CSV, "--out", "x", "--reward", "pas"], "did you mean 'pass'?"),
        (["export", CSV, "--format", "openai", "--out", "x.jsonl"], "did you mean 'openai-sft'?"),
    ])
    def test_a_close_name_is_suggested(self, argv, suggestion, capsys):
        assert cli.main(argv) == exits.BAD_INPUT
        assert suggestion in capsys.readouterr().err

    def test_nothing_close_lists_the_choices(self, capsys):
        assert cli.main(["run", CSV, "--agent", "zzz"]) == exits.BAD_INPUT
        err = capsys.readouterr().err
        assert "did you mean" not in err and "'oracle', 'nop', 'violation'" in err


# --------------------------------------------------------------------------- validate
class TestValidate:
    @pytest.fixture
    def reports(self, monkeypatch):
        import asyncio

        from cowork.validate import validate
        from cowork.validate.validate import Finding, ValidationReport

        state = {"now": 0, "most": 0, "run": None}

        async def fake_validate_spec(path, **options):
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
            await asyncio.sleep(0.05)
            state["now"] -= 1
            name = Path(path).name
            findings = [Finding(step="schema", ok=True, detail="spec is valid")]
            if state["run"] and name == "update-service-config":
                findings.append(Finding(step="run", ok=False, detail=state["run"]))
            return ValidationReport(spec=str(path), task=name, ok=len(findings) == 1, findings=findings)

        monkeypatch.setattr(validate, "validate_spec", fake_validate_spec)
        return state

    def test_several_at_once_bounded(self, reports, capsys):
        specs = [CSV, CONFIG, str(ROOT / "specs" / "crm-update-from-mail")]
        assert cli.main(["validate", *specs, "--concurrency", "2"]) == exits.OK
        assert reports["most"] == 2
        cap = capsys.readouterr()
        assert "3 of 3 spec(s) valid" in cap.out and cap.out.count("VALID") == 3
        assert "spec is valid" not in cap.out  # a valid spec is one line
        assert [ln.split(",")[0] for ln in cap.err.splitlines()] == [f"validate: {i}/3 specs" for i in (1, 2, 3)]
        reports["most"] = 0
        assert cli.main(["validate", *specs]) == exits.OK and reports["most"] == 1  # one at a time by default

    def test_a_machine_failure_is_3_not_a_spec_problem(self, reports, capsys):
        reports["run"] = "DockerUnavailable: no Docker daemon answers"
        assert cli.main(["validate", CSV, CONFIG]) == exits.INFRASTRUCTURE
        reports["run"] = "SpecError: something of the spec's"
        assert cli.main(["validate", CSV, CONFIG]) == exits.GATE_FAILED
        assert "INVALID update-service-config" in capsys.readouterr().out

    def test_a_folder_of_specs(self, reports, capsys):
        assert cli.main(["validate", str(ROOT / "specs"), "--json"]) == exits.OK
        assert len(json.loads(capsys.readouterr().out)) == len(list((ROOT / "specs").glob("*/task.yaml")))


# --------------------------------------------------------------------------- view
class TestView:
    @pytest.fixture
    def fake_view(self, monkeypatch):
        calls = []
        module = types.ModuleType("cowork.view")
        module.export_html = lambda source, out: calls.append(("export", source, out)) or out
        module.serve = lambda source, host="127.0.0.1", port=0, open_browser=False: calls.append(
            ("serve", source, port, open_browser))
        monkeypatch.setitem(sys.modules, "cowork.view", module)
        return calls

    def test_export_writes_a_file(self, fake_view, tmp_path, capsys):
        assert cli.main(["view", str(tmp_path), "--export", str(tmp_path / "v.html")]) == 0
        assert fake_view == [("export", tmp_path, tmp_path / "v.html")]
        assert "v.html" in capsys.readouterr().out

    def test_serve(self, fake_view, tmp_path):
        assert cli.main(["view", str(tmp_path), "--port", "8765", "--no-browser"]) == 0
        assert cli.main(["view", str(tmp_path)]) == 0
        assert fake_view == [("serve", tmp_path, 8765, False), ("serve", tmp_path, 0, True)]

    def test_help(self, capsys):
        assert cli.main(["view", "--help"]) == 0
        out = capsys.readouterr().out
        assert "--export" in out and "--port" in out and "--no-browser" in out


# --------------------------------------------------------------------------- help and completion
class TestHelp:
    def test_commands_are_grouped_with_examples(self, capsys, monkeypatch):
        monkeypatch.setenv("COLUMNS", "200")
        assert cli.main(["--help"]) == 0
        out = capsys.readouterr().out
        for panel in ("Run and evaluate", "Train and export", "Sandboxes", "Maintenance", "Exit codes"):
            assert panel in out
        assert "--install-completion" in out and "--show-completion" in out
        for name, command in cli.build_command().commands.items():
            if name in ("spec", "images"):
                continue
            assert "Example" in (command.epilog or ""), name

    def test_every_option_says_its_default(self):
        def options(command, path=""):
            for name, sub in getattr(command, "commands", {}).items():
                yield from options(sub, f"{path} {name}")
            for p in command.params:
                if p.param_type_name == "option" and "--help" not in p.opts:
                    yield f"{path} {p.opts[0]}", p

        missing = [name for name, p in options(cli.build_command())
                   if not (p.required or p.is_flag or (p.default is not None and p.show_default is not False)
                           or "default" in (p.help or ""))]
        assert not missing, missing

    def test_agent_help_names_the_oracle_default_and_the_backends(self, capsys, monkeypatch):
        monkeypatch.setenv("COLUMNS", "200")
        assert cli.main(["run", "--help"]) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert "the default, oracle, plays the spec's scripted reference solution" in out
        for backend in ("openai", "vllm-server", "vllm", "hf", "nop", "violation"):
            assert backend in out

    def test_choices_match_the_runtime(self):
        from cowork.cli import commands
        from cowork.cli import episodes as cli_episodes
        from cowork.export import FORMATS
        from cowork.rollouts.runner import REWARDS

        assert cli_episodes.REWARDS == REWARDS and commands.EXPORT_FORMATS == FORMATS

    def test_python_m_and_the_console_script_agree(self):
        proc = subprocess.run([sys.executable, "-m", "cowork.cli", "spec", "schema"], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0 and json.loads(proc.stdout)["type"] == "object"


def test_images_build_reports_its_steps(monkeypatch, capsys):
    """`cowork images build`: the base image, the wheelhouse and the sandbox image as steps
    (plain lines when piped), each reported by the builder itself."""
    from cowork.engine import images

    monkeypatch.setattr(images, "ensure_base", lambda offline_only=False: "cowork-base:test")
    monkeypatch.setattr(images, "sandbox_tag", lambda base: "cowork-sandbox:test")
    monkeypatch.setattr(images, "_image_exists", lambda tag: True)
    assert cli.main(["images", "build"]) == exits.OK
    captured = capsys.readouterr()
    assert captured.out.strip().endswith("cowork-sandbox:test")
    assert "images: 1/3 steps" in captured.err and "base image cowork-base:test" in captured.err
    assert "images: 3/3 steps" in captured.err and "already built" in captured.err
