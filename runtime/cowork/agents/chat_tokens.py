"""Turn a growing chat into an append-only token sequence with a model's chat template.

A chat template renders the whole conversation each time; tokenizing each rendering anew
can split text differently at the seams (re-tokenization drift), and some templates render
old turns differently from new ones (Qwen3 drops old reasoning). So the policy keeps its
own token buffer: the generated tokens stay exactly as generated, and after each turn only
the environment's new text is tokenized and appended, found as the difference between two
renderings of the template.
"""

from __future__ import annotations

import json
from typing import Any

#: A stand-in conversation to render new messages after, when the real history does not
#: render as a prefix of its continuation.
_STUB = [{"role": "user", "content": "stub"}, {"role": "assistant", "content": "stub"}]


def template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages as chat templates expect them: tool-call arguments as objects."""
    out = []
    for m in messages:
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                fn = dict(c.get("function") or {})
                if isinstance(fn.get("arguments"), str):
                    try:
                        fn["arguments"] = json.loads(fn["arguments"])
                    except ValueError:
                        pass
                calls.append({**c, "function": fn})
            m = {**m, "tool_calls": calls}
        out.append(m)
    return out


class ChatTokens:
    """Renders and tokenizes a conversation for one model, turn by turn.

    Args:
        tokenizer: A transformers tokenizer with a chat template (``apply_chat_template``,
            ``encode``, ``convert_tokens_to_ids``).
        end_token: The token that ends an assistant turn (default: the tokenizer's eos).
        template_kwargs: Extra arguments for the template (e.g. ``enable_thinking``).
    """

    def __init__(self, tokenizer: Any, *, end_token: str | None = None, template_kwargs: dict | None = None):
        self.tok = tokenizer
        self.end_token = end_token or tokenizer.eos_token
        self.end_id = tokenizer.convert_tokens_to_ids(self.end_token)
        self.kwargs = dict(template_kwargs or {})

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
               add_generation_prompt: bool) -> str:
        """The template's text for ``messages``."""
        return self.tok.apply_chat_template(template_messages(messages), tools=tools or None, tokenize=False,
                                            add_generation_prompt=add_generation_prompt, **self.kwargs)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, with no special tokens added."""
        return list(self.tok.encode(text, add_special_tokens=False))

    def prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
        """Tokens of the first prompt (the conversation so far, then the generation prompt)."""
        return self.encode(self.render(messages, tools, True))

    def continuation(self, history: list[dict[str, Any]], new: list[dict[str, Any]],
                     tools: list[dict[str, Any]] | None, *, ended: bool) -> list[int]:
        """Environment tokens to append after the model's last turn.

        Args:
            history: The conversation up to and including the model's last assistant message.
            new: Messages since (tool results, a user turn).
            tools: The tools the template renders (None: none).
            ended: Whether the model's generated tokens ended with the end-of-turn token
                (False for a truncated turn: the end token is then appended here, as the
                environment's, so the template's structure holds).

        Returns:
            Token ids: what closes the assistant turn in the template (beyond the end token),
            then the new messages, then the next generation prompt.
        """
        prev = self.render(history, tools, False)
        full = self.render(history + new, tools, True)
        if full.startswith(prev):
            delta = full[len(prev):]
        else:  # the template renders history differently once it grows: render the new part alone
            stub_prev = self.render(_STUB, tools, False)
            stub_full = self.render(_STUB + new, tools, True)
            delta = stub_full[len(stub_prev):] if stub_full.startswith(stub_prev) else stub_full
        head = self.render(history[:-1], tools, True)
        section = prev[len(head):] if prev.startswith(head) else prev
        cut = section.rfind(self.end_token)
        closing = section[cut + len(self.end_token):] if cut >= 0 else ""
        ids = [] if ended or cut < 0 else [self.end_id]
        return ids + self.encode(closing + delta)

    def assistant_section(self, history: list[dict[str, Any]], message: dict[str, Any],
                          tools: list[dict[str, Any]] | None) -> tuple[str, str]:
        """The template's text of one assistant message after ``history``: the part the
        model writes (up to and including the end token) and the closing text after it."""
        head = self.render(history, tools, True)
        whole = self.render(history + [message], tools, False)
        section = whole[len(head):] if whole.startswith(head) else whole
        cut = section.rfind(self.end_token)
        if cut < 0:
            return section, ""
        return section[:cut + len(self.end_token)], section[cut + len(self.end_token):]


__all__ = ["ChatTokens", "template_messages"]
