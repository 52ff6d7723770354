"""The package's public face: ``import cowork``, its settings object, the sandbox backend registry."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import cowork
from cowork import settings
from cowork.engine import docker_backend
from cowork.sandbox import backend as backends


class TestPublicApi:
    def test_every_exported_name_resolves(self):
        for name in cowork.__all__:
            assert getattr(cowork, name) is not None, name

    def test_the_names_the_docs_promise(self):
        from cowork.episode.run import run_task
        from cowork.sandbox.sandbox import Sandbox

        assert cowork.Sandbox is Sandbox and cowork.run_task is run_task
        for name in ("load_spec", "grade", "Evidence", "Grade", "SandboxBackend", "Settings"):
            assert name in cowork.__all__

    def test_unknown_name_is_an_attribute_error(self):
        with pytest.raises(AttributeError, match="no_such_thing"):
            cowork.no_such_thing  # noqa: B018

    def test_import_is_light(self):
        # Loaded inside the container too: importing the package must not pull in Docker,
        # pydantic or the host side.
        code = "import sys, cowork; print(','.join(m for m in ('docker', 'pydantic', 'cowork.sandbox') if m in sys.modules))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        assert out == ""


class TestSettings:
    def test_defaults(self, monkeypatch):
        for var in ("COWORK_RUN_ROOT", "COWORK_MAX_STARTING", "COWORK_SANDBOX_BACKEND"):
            monkeypatch.delenv(var, raising=False)
        s = settings.reload()
        assert s.sandbox_backend == "docker" and s.max_starting == 0
        assert str(s.run_root).startswith("/tmp/cowork-")

    def test_environment_overrides(self, monkeypatch, tmp_path):
        monkeypatch.setenv("COWORK_RUN_ROOT", str(tmp_path / "runs"))
        monkeypatch.setenv("COWORK_MAX_STARTING", "3")
        try:
            s = settings.reload()
            assert s.run_root == tmp_path / "runs" and s.max_starting == 3
        finally:
            monkeypatch.undo()
            settings.reload()

    def test_bad_value_names_the_variable(self, monkeypatch):
        monkeypatch.setenv("COWORK_MAX_STARTING", "lots")
        try:
            with pytest.raises(ValueError, match="max_starting"):
                settings.reload()
        finally:
            monkeypatch.undo()
            settings.reload()

    def test_no_module_reads_cowork_variables_itself(self):
        # One settings object: no other host-side module reads COWORK_* from the environment
        # (passing one to a container, `environment={"COWORK_...": ...}`, is not reading it).
        read = re.compile(r"""(?:environ(?:\.get|\.setdefault|\.pop)?\s*[\[(]|getenv\s*\()\s*f?["']COWORK_""")
        assert read.search('os.environ.get("COWORK_X")') and read.search("os.getenv('COWORK_X')")
        pkg = Path(cowork.__file__).parent
        offenders = []
        for path in pkg.rglob("*.py"):
            rel = path.relative_to(pkg).as_posix()
            if rel == "settings.py" or rel.startswith(("server/", "services/", "toolhost/")):
                continue  # the in-container side is configured by the image and run dir
            if read.search(path.read_text()):
                offenders.append(rel)
        assert offenders == []


class FakeBackend:
    name = "fake"


class TestBackends:
    def test_builtin_backends(self):
        assert {"docker", "gvisor"} <= set(backends.available_backends())
        assert isinstance(backends.get_backend("docker"), docker_backend.DockerBackend)
        g = backends.get_backend("gvisor")
        assert isinstance(g, docker_backend.GVisorBackend) and g.runtime == "runsc"

    def test_default_comes_from_settings(self, monkeypatch):
        monkeypatch.setenv("COWORK_SANDBOX_BACKEND", "gvisor")
        try:
            settings.reload()
            assert backends.get_backend(None).name == "gvisor"
        finally:
            monkeypatch.undo()
            settings.reload()

    def test_register_and_pass_through(self):
        backends.register_backend("fake", FakeBackend)
        try:
            assert isinstance(backends.get_backend("fake"), FakeBackend)
            inst = FakeBackend()
            assert backends.get_backend(inst) is inst
        finally:
            backends._FACTORIES.pop("fake")

    def test_unknown_backend_lists_the_known_ones(self):
        with pytest.raises(cowork.SandboxError, match="unknown sandbox backend 'nope'.*docker.*gvisor"):
            backends.get_backend("nope")

    def test_docker_backend_satisfies_the_protocol(self):
        assert isinstance(docker_backend.DockerBackend(), backends.SandboxBackend)


def test_all_lists_exactly_the_exports():
    assert sorted(cowork.__all__) == sorted(cowork._EXPORTS)


class TestNamesStayTheirs:
    def test_rollout_stays_the_function_once_the_runner_is_imported(self):
        # A subpackage named like a public function would replace it on the package once
        # imported (Python sets the attribute): the rollouts live in `cowork.rollouts`.
        code = ("import cowork, cowork.rollouts.runner, cowork.episode.run, cowork.grading; "
                "from cowork import rollout, grade, run_task; "
                "print(callable(cowork.rollout), callable(rollout), callable(cowork.grade), callable(grade))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.split() == ["True"] * 4

    def test_no_subpackage_shadows_a_public_name(self):
        import pkgutil

        subpackages = {m.name for m in pkgutil.iter_modules(cowork.__path__)}
        assert subpackages & set(cowork.__all__) == set()
