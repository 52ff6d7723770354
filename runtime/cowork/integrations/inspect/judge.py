"""The LLM judge of ``judge`` checks inside Inspect: a model bound to a role (``grader`` by
default: ``inspect eval --model-role grader=openai/gpt-4o``, or ``Task(model_roles=...)``), asked
the same questions ``cowork run --judge-model`` asks, through Inspect's own model API (its
providers, keys, retries, usage accounting and log). With no model bound to the role, the
checks stay not graded (never passed): the model under evaluation never grades itself.
"""

from __future__ import annotations

from typing import Any

from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser, GenerateConfig, Model, get_model

from ...errors import PolicyError
from ...grading.judge import LLMJudge

#: As :class:`cowork.grading.judge.LLMJudge` asks its endpoint: deterministic, short.
JUDGE_CONFIG = GenerateConfig(temperature=0.0, max_tokens=300)


class InspectChatClient:
    """An Inspect model as the chat client :class:`LLMJudge` calls (``complete``)."""

    def __init__(self, model: Model):
        self.inspect_model = model
        self.model = str(model)

    async def complete(self, messages: list[dict[str, Any]], tools: Any = None, **_: Any) -> dict[str, Any]:
        """One chat completion of ``messages`` (system and user texts, as the judge writes
        them), answered in the OpenAI chat-completions shape.

        Raises:
            PolicyError: The model failed or answered with an error.
        """
        chat: list[ChatMessage] = [ChatMessageSystem(content=m["content"]) if m["role"] == "system"
                                   else ChatMessageUser(content=m["content"]) for m in messages]
        try:
            out = await self.inspect_model.generate(chat, config=JUDGE_CONFIG)
        except Exception as exc:  # noqa: BLE001 - a provider's failure, said as the judge's
            raise PolicyError(f"the judge model {self.model} failed: {type(exc).__name__}: {exc}") from exc
        if out.error:
            raise PolicyError(f"the judge model {self.model} answered with an error: {out.error}")
        return {"model": self.model, "choices": [{"index": 0, "message": {"role": "assistant",
                                                                          "content": out.completion}}]}


def role_judge(role: str | None) -> LLMJudge | None:
    """The judge for ``judge`` checks: the model bound to ``role`` in the running eval, or
    None when the role is not given or no model is bound to it."""
    from inspect_ai._util.error import PrerequisiteError

    if not role:
        return None
    try:
        model = get_model(role=role, required=True)
    except PrerequisiteError:
        return None
    return LLMJudge(model=str(model), client=InspectChatClient(model))


__all__ = ["InspectChatClient", "JUDGE_CONFIG", "role_judge"]
