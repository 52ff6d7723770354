"""The Ray runner's parts that need no cluster and no daemon: its options, the Agent factory and
shipping a task folder to a node that lacks it."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the ray extra is not installed")

from cowork.integrations.ray import Agent, RayRolloutRunner, _local_spec, _spec_archive  # noqa: E402
from cowork.spec.loader import load_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


class TestOptions:
    @pytest.mark.parametrize("kwargs", [{"concurrency": 4}, {"pool_size": 2}, {"pool": object()}])
    def test_local_pool_options_are_refused_with_the_reason(self, kwargs):
        with pytest.raises(ValueError, match="not an option of RayRolloutRunner.*cowork` slots"):
            RayRolloutRunner(None, **kwargs)

    def test_bad_values_are_refused(self):
        with pytest.raises(ValueError, match="policy_at"):
            RayRolloutRunner(None, policy_at="gpu")
        with pytest.raises(ValueError, match="slots_per_node >= 1"):
            RayRolloutRunner(None, slots_per_node=0)


def test_agent_pickles_by_value_and_makes_the_policy():
    spec = load_spec(ROOT / "specs" / "fix-csv-report").spec
    agent = pickle.loads(pickle.dumps(Agent("oracle")))
    policy = agent(spec)
    assert policy.name == "oracle" and agent.name == "oracle"


def test_a_node_without_the_task_folder_unpacks_the_shipped_one(tmp_path, monkeypatch):
    src = tmp_path / "driver" / "fix-csv-report"
    shutil.copytree(ROOT / "specs" / "fix-csv-report", src)
    loaded = load_spec(src)
    digest, data = _spec_archive(loaded)
    files = loaded.workspace_files()
    assert _local_spec(loaded, digest, data) is loaded  # the folder is here: used as it is
    shutil.rmtree(src)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    there = _local_spec(loaded, digest, data)
    assert there.root == tmp_path / "cache" / "cowork" / "ray-specs" / digest / "fix-csv-report"
    assert there.spec == loaded.spec and there.workspace_files() == files
    assert _local_spec(loaded, digest, data).root == there.root  # unpacked once per digest
