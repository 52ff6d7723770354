"""Claw-Eval's ``task.yaml`` as the importer reads it: the fields it converts, with their types.

Unknown keys are ignored (a checkout may carry fields newer than these), but the fields read
here must have the right shape: a wrong one is reported with its file and field, never guessed.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Prompt(_Part):
    """The first user message."""

    text: str
    language: str = "zh"
    attachments: list[str] = []


class ToolSpec(_Part):
    """A tool the model is offered."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = {}


class ToolEndpoint(_Part):
    """The HTTP endpoint behind a tool."""

    tool_name: str
    url: str
    method: str = "POST"


class Service(_Part):
    """A mock service started from the checkout's root."""

    name: str
    command: str
    port: int = Field(ge=1, le=65535)
    health_check: str
    health_check_method: str = "POST"
    ready_timeout: float = 10
    reset_endpoint: str | None = None
    env: dict[str, str] = {}

    @field_validator("env", mode="before")
    @classmethod
    def _env_text(cls, v: Any) -> Any:
        # YAML reads `PORT: 9100` as a number; the process environment holds text
        if isinstance(v, dict):
            return {str(k): v if isinstance(v, str) else str(v) for k, v in v.items()}
        return v


class Environment(_Part):
    """Run limits."""

    timeout_seconds: float = 300
    max_turns: int = 20
    fixtures: list[str] = []


class Check(_Part):
    """The rule of a scoring component (declarative in Claw-Eval: the grader is the truth)."""

    type: str
    field: str | None = None
    tool_name: str | None = None
    min_calls: int | None = None
    min_length: int | None = None
    patterns: list[str] | None = None
    keywords: list[str] | None = None
    categories: list[str] | None = None
    description: str | None = None
    rubric: str | None = None

    @field_validator("keywords", "categories", mode="before")
    @classmethod
    def _words_text(cls, v: Any) -> Any:
        return [str(x) for x in v] if isinstance(v, list) else v


class ScoringComponent(_Part):
    """A weighted part of completion."""

    name: str
    weight: float
    check: Check


class SafetyCheck(_Part):
    """A rule the agent must not break."""

    type: str
    tool_name: str | None = None
    patterns: list[str] | None = None
    description: str = ""


class UserAgent(_Part):
    """The simulated user of a multi-turn task."""

    enabled: bool = False
    persona: str = ""
    max_rounds: int = Field(default=3, ge=0)
    system_prompt_suffix: str = ""


class ClawTask(_Part):
    """One task.yaml."""

    task_id: str
    task_name: str
    category: str = ""
    difficulty: str = ""
    tags: list[str] = []
    prompt: Prompt
    tools: list[ToolSpec] = []
    tool_endpoints: list[ToolEndpoint] = []
    services: list[Service] = []
    environment: Environment = Environment()
    scoring_components: list[ScoringComponent] = []
    safety_checks: list[SafetyCheck] = []
    user_agent: UserAgent = UserAgent()
    judge_rubric: str = ""
    reference_solution: str = ""
    sandbox_files: list[str] = []
    sandbox_grader_files: list[str] = []
    env_snapshot_files: list[str] = []
    env_snapshot_commands: list[str] = []
    local_grader_files: list[str] = []

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_text(cls, v: Any) -> Any:
        return [str(x) for x in v] if isinstance(v, list) else v
