"""Shared fixtures. Docker tests carry the ``docker`` marker: skipped locally when no daemon
answers, failed in CI (COWORK_REQUIRE_DOCKER=1) so that none is silently skipped there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted(p.parent for p in (ROOT / "specs").glob("*/task.yaml"))
#: Per-test limit of docker-marked tests (sandboxes start, images build); the rest get
#: pyproject's short default. A test's own ``timeout`` mark wins.
DOCKER_TIMEOUT_S = 300


def pytest_collection_modifyitems(config, items):
    docker_items = [i for i in items if i.get_closest_marker("docker")]
    for item in docker_items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(DOCKER_TIMEOUT_S))
    if not docker_items:
        return
    from cowork.engine.client import docker_available

    if docker_available():
        return
    from cowork import settings

    if settings.reload().require_docker:
        raise pytest.UsageError("COWORK_REQUIRE_DOCKER=1 but no Docker daemon answers")
    skip = pytest.mark.skip(reason="no Docker daemon answers (run scripts/setup.sh)")
    for item in docker_items:
        item.add_marker(skip)


@pytest.fixture(autouse=True)
def _one_os_environ():
    """Put ``os.environ`` back when a test's library replaced it with a copy.

    ``datasets``' ``map(num_proc=...)`` (verl's RLHFDataset calls it) rebinds ``os.environ`` to
    a deep copy. Readers that kept the original mapping, rich's ``Console._environ`` among them,
    then no longer see a later test's ``monkeypatch.setenv``: typer drew ``--help`` 80 columns
    wide under ``COLUMNS=200`` in every test after tests/integrations/test_verl.py.
    """
    original = os.environ
    yield
    replaced = os.environ
    if replaced is not original:
        os.environ = original
        for key in set(original) - set(replaced):
            del original[key]
        original.update(replaced)


@pytest.fixture(scope="session")
def sandbox_image() -> str:
    """The sandbox image for the current sources (built if missing)."""
    from cowork.engine.images import ensure_sandbox_image

    return ensure_sandbox_image()


@pytest.fixture
def no_leftovers():
    """Fail the test if it leaves a cowork container of this test process behind."""
    from cowork.engine import labels as L
    from cowork.engine.reaper import managed_containers

    def mine():
        return {c.id: c.name for c in managed_containers() if (c.labels or {}).get(L.SESSION) == L.SESSION_ID}

    before = mine()
    yield
    left = [name for cid, name in mine().items() if cid not in before]
    assert not left, f"containers left behind: {left}"
