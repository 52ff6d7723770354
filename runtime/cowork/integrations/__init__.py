"""Adapters that plug cowork tasks into other projects' training loops, clusters and eval
harnesses (imported on demand).

- :mod:`cowork.integrations.trl`: TRL's ``GRPOTrainer(environment_factory=...)`` (needs the
  ``trl`` extra: ``pip install 'cowork-runtime[trl]'``).
- :mod:`cowork.integrations.ray`: rollouts placed on a Ray cluster's Docker hosts (needs the
  ``ray`` extra; see docs/scale-out.md).
- :mod:`cowork.integrations.inspect`: Inspect AI's ``sandbox="cowork"``, the sandbox's tools
  for Inspect agents, and ``cowork_task`` scored by the cowork grade (needs the ``inspect``
  extra; see docs/inspect.md).
"""
