"""Adapters that plug cowork tasks into other projects' training loops (imported on demand).

- :mod:`cowork.integrations.trl`: TRL's ``GRPOTrainer(environment_factory=...)`` (needs the
  ``trl`` extra: ``pip install 'cowork-runtime[trl]'``).
- :mod:`cowork.integrations.ray`: rollouts placed on a Ray cluster's Docker hosts (needs the
  ``ray`` extra; see docs/scale-out.md).
"""
