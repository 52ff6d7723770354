"""Inspect AI's own conformance suite for sandbox providers, run against ``sandbox="cowork"``.

The suite is Inspect's (``inspect_ai.util._sandbox.self_check``: every provider is expected
to pass it); the checks a cowork sandbox fails on purpose are marked xfail below with the
reason, so a check that starts failing for another reason is seen.
"""

from __future__ import annotations

import pytest

pytest.importorskip("inspect_ai", reason="the inspect extra is not installed (pip install 'cowork-runtime[inspect]')")

# Inspect's checks, collected by pytest from this module (they take the `sandbox_env` fixture below).
from inspect_ai.util._sandbox.self_check import *  # noqa: F403  (the suite is collected by its names)

from cowork.integrations.inspect import CoworkSandboxEnvironment

pytestmark = pytest.mark.docker

SPEC = """
id: inspect-conformance
title: Inspect sandbox conformance
prompt: Nothing to do.
workspace: {dir: null, files: [{path: readme.txt, content: "hi\\n"}]}
tools: [shell, read_file, write_file]
limits: {tool_timeout_s: 20}
checks:
  - {type: file_exists, path: readme.txt}
oracle:
  - {tool: read_file, args: {path: readme.txt}}
"""

_ARGS = "a tool call's arguments are at most 1 MiB (formats.MAX_ARGUMENTS_BYTES), refused before they are sent"
#: Checks a cowork sandbox fails by design, with why.
EXPECTED_FAILURES: dict[str, str] = {
    "test_exec_as_user": "only the agent user exists for exec: useradd/root are SandboxUserUnsupportedError",
    "test_exec_input_large": _ARGS,
    "test_exec_large_command": _ARGS,
}
#: Checks not run, with why.
NOT_RUN: dict[str, str] = {
    # 50 MiB through audited agent calls fills the episode's audit budget (16 MiB + 4 MiB), after
    # which the sandbox refuses every call; that refusal is the guarantee, so the check cannot pass.
    "test_read_and_write_large_file_binary": "every byte moved is an audited agent call; 50 MiB exceeds the "
                                             "audit log's budget, which then refuses all calls",
}


@pytest.fixture(scope="module")
async def cowork_env(tmp_path_factory):
    d = tmp_path_factory.mktemp("inspect-conformance")
    (d / "task.yaml").write_text(SPEC)
    envs = await CoworkSandboxEnvironment.sample_init("conformance", str(d), {})
    yield envs["default"]
    await CoworkSandboxEnvironment.sample_cleanup("conformance", str(d), envs, False)


@pytest.fixture
def sandbox_env(cowork_env, request):
    if request.node.originalname in NOT_RUN:
        pytest.skip(NOT_RUN[request.node.originalname])
    reason = EXPECTED_FAILURES.get(request.node.originalname)
    if reason:
        request.node.add_marker(pytest.mark.xfail(reason=reason, strict=True))
    return cowork_env
