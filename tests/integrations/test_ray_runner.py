"""The Ray runner's parts that need no cluster and no daemon: its options, the Agent factory,
shipping a task folder to a node that lacks it, and the address check before ``ray.init``."""

from __future__ import annotations

import pickle
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the ray extra is not installed")

from cowork.cli import exits  # noqa: E402
from cowork.errors import ClusterUnavailable, CoworkError  # noqa: E402
from cowork.integrations import ray as cowork_ray  # noqa: E402
from cowork.integrations.ray import Agent, RayRolloutRunner, _local_spec, _spec_archive, preflight  # noqa: E402
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


# --------------------------------------------------------------------------- address preflight
def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once it is closed


class TestAddressPreflight:
    def test_the_cli_exits_3_within_10_s_on_a_closed_loopback_port(self, tmp_path):
        """What `cowork rollout --ray 127.0.0.1:1` did for minutes (ray.init retrying) now takes
        one refused connection: a real CLI process, timed from its start."""
        address = f"127.0.0.1:{_closed_port()}"
        t0 = time.monotonic()
        run = subprocess.run([sys.executable, "-m", "cowork.cli", "rollout", str(ROOT / "specs" / "fix-csv-report"),
                              "--ray", address, "--out", str(tmp_path / "out")],
                             capture_output=True, text=True, timeout=60, check=False)
        took = time.monotonic() - t0
        assert run.returncode == exits.INFRASTRUCTURE, run.stderr[-2000:]
        assert took < 10, took
        err = run.stderr
        assert f"no Ray cluster answers at {address}" in err and "connection refused" in err, err
        assert f"ray start --head --port {address.split(':')[1]}" in err and "--ray HOST:PORT" in err, err

    def test_a_head_on_loopback_only_names_the_rewrite_and_the_fix(self, monkeypatch):
        """Ray connects to this machine's address for a loopback host: a listener on 127.0.0.1
        alone answers as given but not where Ray goes (127.0.0.2 stands for that address)."""
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            port = listener.getsockname()[1]
            monkeypatch.setattr(cowork_ray, "ray_target", lambda address: f"127.0.0.2:{port}")
            with pytest.raises(ClusterUnavailable) as info:
                preflight(f"127.0.0.1:{port}", timeout=2)
        msg = str(info.value)
        assert f"the Ray cluster at 127.0.0.1:{port} answers, but Ray connects to 127.0.0.2:{port}" in msg
        assert "connection refused" in msg and "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0" in msg

    def test_the_real_rewrite_of_a_loopback_host(self):
        """Without stand-ins: what Ray itself makes of 127.0.0.1 on this machine."""
        target = cowork_ray.ray_target("127.0.0.1:6379")
        if target.startswith("127."):
            pytest.skip("this machine's address for Ray is loopback: nothing is rewritten")
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            port = listener.getsockname()[1]
            with pytest.raises(ClusterUnavailable, match="RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0"):
                preflight(f"127.0.0.1:{port}", timeout=2)

    def test_an_answering_address_passes(self, monkeypatch):
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            address = "127.0.0.1:%d" % listener.getsockname()[1]
            monkeypatch.setattr(cowork_ray, "ray_target", lambda a: a)
            preflight(address, timeout=2)
            preflight("ray://" + address, timeout=2)  # Ray Client: tried as given
        preflight(None)
        preflight("local")

    def test_auto_without_a_cluster_says_how_to_start_one(self, monkeypatch):
        monkeypatch.setattr(cowork_ray, "ray_target", lambda address: None)
        with pytest.raises(ClusterUnavailable, match=r"--ray auto found no Ray cluster.*ray start --head"):
            preflight("auto")

    def test_a_ray_client_address_that_answers_nothing(self):
        port = _closed_port()
        with pytest.raises(ClusterUnavailable, match=rf"no Ray cluster answers at ray://127.0.0.1:{port}: "
                                                     r"connection refused; .*Ray Client server listens on 10001"):
            preflight(f"ray://127.0.0.1:{port}", timeout=2)

    def test_not_an_address_is_bad_input(self):
        with pytest.raises(CoworkError, match="is not a Ray address") as info:
            preflight("head-without-port")
        assert not isinstance(info.value, ClusterUnavailable)
        assert exits.code_for(info.value) == exits.BAD_INPUT
        assert exits.code_for(ClusterUnavailable("x")) == exits.INFRASTRUCTURE
