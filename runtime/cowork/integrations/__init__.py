"""Adapters that plug cowork tasks into other projects' training loops, clusters and eval
harnesses (imported on demand).

- :mod:`cowork.integrations.trl`: TRL's ``GRPOTrainer(environment_factory=...)`` (needs the
  ``trl`` extra: ``pip install 'cowork-runtime[trl]'``).
- :mod:`cowork.integrations.ray`: rollouts placed on a Ray cluster's Docker hosts (needs the
  ``ray`` extra; see docs/scale-out.md).
- :mod:`cowork.integrations.inspect`: Inspect AI's ``sandbox="cowork"``, the sandbox's tools
  for Inspect agents, and ``cowork_task`` scored by the cowork grade (needs the ``inspect``
  extra; see docs/inspect.md).
- :mod:`cowork.integrations.verl`: verl's agent loop (``agent_name: cowork``) running graded
  sandbox episodes on verl's rollout servers, and the task dataset verl reads (needs the
  ``verl`` extra and ``verl`` itself; docs/training.md).
- :mod:`cowork.integrations.skyrl`: a skyrl-gym environment that SkyRL's generator drives, and
  SkyRL's ``GeneratorOutput`` from RL exports (needs the ``skyrl`` extra; docs/training.md).
- :mod:`cowork.integrations.openenv`: tasks as OpenEnv environments, ``cowork serve --openenv``
  (needs the ``openenv`` extra and ``openenv`` itself; docs/training.md).
- :mod:`cowork.integrations.stepped`: cowork episodes driven one action at a time from outside,
  what the SkyRL and OpenEnv adapters share.
- :mod:`cowork.integrations.loop_thread`: the sandbox pool on an event loop of its own thread
  that the TRL, verl and stepped adapters drive from their trainers' threads.
- :mod:`cowork.integrations.claw_eval`: ``cowork import claw-eval``, Claw-Eval's tasks with their
  original graders (docs/claw-eval.md).
"""
