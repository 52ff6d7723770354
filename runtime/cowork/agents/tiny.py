"""A tiny randomly initialised chat model, made on the spot (no download): for tests and the
CPU training example.

Its tokenizer is a byte-level BPE trained here on a small corpus, so it encodes any text
and decodes it back unchanged; its chat template is ChatML with hermes tool calls (the
format of Qwen2.5 and Qwen3). The weights are random: it writes gibberish unless its turns
are forced (``HFEngine.policy(forced=...)``) or it is trained.
"""

from __future__ import annotations

from typing import Any

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]

#: ChatML with tools and hermes tool calls; tool results come back as a user turn wrapped in
#: <tool_response>, as in Qwen's templates.
CHAT_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n"
    "{% if messages[0].role == 'system' %}{{ messages[0].content }}{% else %}You are a helpful assistant.{% endif %}\n\n"
    "# Tools\n<tools>\n"
    "{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools>\n"
    "Call a tool with <tool_call>{\"name\": NAME, \"arguments\": {...}}</tool_call>.<|im_end|>\n"
    "{% elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n"
    "{% endif %}"
    "{% for m in messages %}"
    "{% if m.role == 'user' %}<|im_start|>user\n{{ m.content }}<|im_end|>\n"
    "{% elif m.role == 'assistant' %}<|im_start|>assistant\n{{ m.content or '' }}"
    "{% for tc in (m.tool_calls or []) %}<tool_call>\n"
    "{{ {'name': tc.function.name, 'arguments': tc.function.arguments} | tojson }}\n</tool_call>"
    "{% endfor %}<|im_end|>\n"
    "{% elif m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_CORPUS = [
    '{"name": "read_file", "arguments": {"path": "report.csv"}}',
    '{"type": "function", "function": {"name": "shell", "description": "Run a command", "parameters": '
    '{"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}',
    "You are a capable coworker. Use the tools to do what the user asks in the workspace.",
    "exit_code output truncated workspace file path content list_files write_file edit_file grep",
    "mail tickets calendar contacts documents crm chat knowledge base expenses todo",
]


def tiny_tokenizer(vocab_size: int = 600, extra_text: list[str] | None = None) -> Any:
    """A byte-level BPE tokenizer trained on a small corpus, with the ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_CORPUS * 4 + list(extra_text or []), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   additional_special_tokens=["<|im_start|>"])
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_model(vocab_size: int, *, seed: int = 0, hidden: int = 32, layers: int = 2) -> Any:
    """A Qwen2-architecture causal LM with random weights (a few hundred thousand parameters)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=16384, tie_word_embeddings=True)
    return Qwen2ForCausalLM(cfg).eval()


def tiny_engine(*, seed: int = 0, **kw: Any) -> Any:
    """An :class:`~cowork.agents.hf.HFEngine` on a fresh tiny model and tokenizer."""
    from .hf import HFEngine

    tok = tiny_tokenizer()
    return HFEngine(tiny_model(len(tok), seed=seed), tok, name="tiny-random-qwen2", **kw)


__all__ = ["CHAT_TEMPLATE", "tiny_engine", "tiny_model", "tiny_tokenizer"]
