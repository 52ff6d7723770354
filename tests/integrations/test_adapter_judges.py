"""The trainer adapters grade ``judge`` checks with a judge when their options name one (TRL's
``EnvOptions``, verl's ``LoopOptions``, SkyRL's ``env_config``, OpenEnv's app and
``cowork serve --openenv``): before, every adapter graded with no judge, so a task with a
rubric could never reward more than its deterministic part. Here, without a daemon: each
adapter hands the judge its options name to the episode; a docker test in
tests/integration/test_trl_conversation.py rewards a real episode with it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cowork.cli import main
from cowork.grading.judge import LLMJudge, _shared_judge, shared_judge
from cowork.spec.loader import load_spec

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "specs" / "fix-csv-report"


@pytest.fixture(autouse=True)
def fresh_judges():
    _shared_judge.cache_clear()
    yield
    _shared_judge.cache_clear()


def test_one_judge_per_model_and_endpoint_and_none_without_a_model():
    assert shared_judge(None) is None and shared_judge("") is None
    a = shared_judge("judge-a", "http://127.0.0.1:9/v1")
    assert isinstance(a, LLMJudge) and a.model == "judge-a" and a.client.base_url == "http://127.0.0.1:9/v1"
    assert shared_judge("judge-a", "http://127.0.0.1:9/v1") is a
    assert shared_judge("judge-b", "http://127.0.0.1:9/v1") is not a


def test_trl_and_verl_options_name_a_judge():
    pytest.importorskip("trl")
    from cowork.integrations import trl as ct
    from cowork.integrations.verl.loop import LoopOptions

    for options in (ct.EnvOptions(judge_model="j", judge_base_url="http://127.0.0.1:9/v1"),
                    LoopOptions(judge_model="j", judge_base_url="http://127.0.0.1:9/v1")):
        assert options.judge_model == "j"
        # The judge does not split the pool: one pool per process whatever grades its episodes.
        assert options.pool_key() == type(options)().pool_key()


def test_a_stepped_episode_runs_its_task_with_its_judge(monkeypatch):
    """SkyRL's and OpenEnv's episodes are stepped episodes: their judge reaches run_task."""
    import cowork.episode.run as episode_run
    from cowork.integrations.stepped import SteppedEpisode

    seen = {}

    async def fake_run_task(loaded, policy, **kwargs):
        seen.update(kwargs)

    monkeypatch.setattr(episode_run, "run_task", fake_run_task)
    judge = shared_judge("j", "http://127.0.0.1:9/v1")
    episode = SteppedEpisode(runtime=type("Rt", (), {"pool": None})(), loaded=load_spec(CSV), judge=judge)

    async def launch():
        episode._launch()
        await episode._task

    asyncio.run(launch())
    assert seen["judge"] is judge


def test_skyrl_env_config_takes_a_judge():
    pytest.importorskip("skyrl_gym")
    from cowork.errors import CoworkError
    from cowork.integrations.skyrl import CoworkSkyRLEnv

    env = CoworkSkyRLEnv({"judge_model": "j", "judge_base_url": "http://127.0.0.1:9/v1"}, {"task_dir": str(CSV)})
    assert (env.judge_model, env.judge_base_url) == ("j", "http://127.0.0.1:9/v1")
    with pytest.raises(CoworkError, match="judge_model"):  # the known keys are named
        CoworkSkyRLEnv({"judge": "j"}, {"task_dir": str(CSV)})


def test_openenv_episodes_get_the_apps_judge(monkeypatch):
    pytest.importorskip("openenv")
    from cowork.integrations import openenv as co

    made = []

    class Capture:
        def __init__(self, *args, **kwargs):
            made.append(kwargs)
            raise RuntimeError("captured")

    monkeypatch.setattr(co, "SteppedEpisode", Capture)
    monkeypatch.setattr(co, "step_runtime", lambda options: type("Rt", (), {"spec": staticmethod(lambda ld: ld)})())
    judge = shared_judge("j", "http://127.0.0.1:9/v1")
    env = co.CoworkOpenEnv([load_spec(CSV)], judge=judge)
    with pytest.raises(RuntimeError, match="captured"):
        env.reset()
    assert made[0]["judge"] is judge


def test_the_gateway_refuses_a_judge_it_would_not_use(capsys):
    assert main(["serve", "--judge-model", "j"]) == 2
    assert "--openenv" in capsys.readouterr().err
