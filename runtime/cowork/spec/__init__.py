"""Task specs: models, loading with precise errors, JSON Schema export."""

from .loader import LoadedSpec, load_spec, load_specs, resolve_spec_path
from .models import TaskSpec


def json_schema() -> dict:
    """The JSON Schema of task.yaml."""
    return TaskSpec.model_json_schema()


__all__ = ["LoadedSpec", "TaskSpec", "json_schema", "load_spec", "load_specs", "resolve_spec_path"]
