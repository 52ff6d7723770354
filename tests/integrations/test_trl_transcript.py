"""TRL's transcript of a rollout read as the conversation cowork grades (no sandbox): assistant
texts kept, calls matched to the ones that reached the sandbox, the user channel turned into the
reply that ended a turn and the user's answer."""

from __future__ import annotations

import json

from cowork.integrations.trl_transcript import (
    OVER,
    USER_TOOL,
    Said,
    Step,
    channel_tool,
    completion_from_log,
    read_transcript,
    user_says,
)

PROMPT = [{"role": "system", "content": "Be useful."}, {"role": "user", "content": "Book it."}]


def call(name: str, **args) -> dict:
    """A tool call as TRL's response parser writes it (arguments as a dict)."""
    return {"type": "function", "function": {"name": name, "arguments": args}}


class TestReadTranscript:
    def test_a_conversation_with_the_user_channel(self):
        answer = user_says("Daniel Price, please.")
        completion = [
            {"role": "assistant", "content": "Looking.", "tool_calls": [call("search", query="Daniel"),
                                                                         call("search", limit="x")]},
            {"role": "tool", "name": "search", "content": "3 people"},
            {"role": "tool", "name": "search", "content": "{'error': 'bad limit'}"},  # TRL refused it
            {"role": "assistant", "content": "", "tool_calls": [call(USER_TOOL, message="Which Daniel?")]},
            {"role": "tool", "name": USER_TOOL, "content": answer},
            {"role": "assistant", "content": None, "tool_calls": [call("book", who="price")]},
            {"role": "tool", "name": "book", "content": "ERROR: slot taken"},
            {"role": "assistant", "content": "Booked at 15:30 instead."},
        ]
        steps = [Step("call_1", "search", "3 people"), Step("call_2", "book", "ERROR: slot taken")]
        said = [Said(message="Which Daniel?", returned=answer, answer="Daniel Price, please.")]
        t = read_transcript(PROMPT, completion, steps, said)
        assert [(m["role"], m.get("content")) for m in t.messages] == [
            ("system", "Be useful."), ("user", "Book it."), ("assistant", "Looking."), ("tool", "3 people"),
            ("tool", "{'error': 'bad limit'}"), ("assistant", "Which Daniel?"), ("user", "Daniel Price, please."),
            ("assistant", None), ("tool", "ERROR: slot taken"), ("assistant", "Booked at 15:30 instead.")]
        first = t.messages[2]["tool_calls"]
        assert [c["id"] for c in first] == ["call_1", "trl_call_1"]  # the refused call never reached the sandbox
        assert json.loads(first[0]["function"]["arguments"]) == {"query": "Daniel"}
        assert [m.get("tool_call_id") for m in t.messages if m["role"] == "tool"] == ["call_1", "trl_call_1", "call_2"]
        assert t.user_messages == [6] and t.turns == 4 and t.final_reply == "Booked at 15:30 instead."
        assert t.step_turns == {"call_1": 1, "call_2": 3}

    def test_a_channel_call_after_the_end_and_a_call_that_failed_before_it(self):
        completion = [
            {"role": "assistant", "content": "Done, telling you.", "tool_calls": [
                call("book", who="p"), call(USER_TOOL, message="Booked."), call(USER_TOOL)]},
            {"role": "tool", "name": "book", "content": "ok"},
            {"role": "tool", "name": USER_TOOL, "content": OVER},
            {"role": "tool", "name": USER_TOOL, "content": "{'error': \"missing a required argument: 'message'\"}"},
            {"role": "assistant", "content": ""},
        ]
        t = read_transcript(PROMPT, completion, [Step("call_1", "book", "ok")], [Said("Booked.", OVER)])
        assert [(m["role"], m.get("content")) for m in t.messages[2:]] == [
            ("assistant", "Done, telling you."), ("tool", "ok"), ("assistant", "Booked."),
            ("assistant", None), ("tool", "{'error': \"missing a required argument: 'message'\"}"),
            ("assistant", "")]
        assert t.messages[5]["tool_calls"][0]["function"]["name"] == USER_TOOL
        assert t.user_messages == [] and t.final_reply == ""

    def test_a_rollout_cut_while_calling_tools_has_no_final_reply(self):
        # TRL rolls back the tool results that would overflow max_completion_length.
        completion = [{"role": "assistant", "content": "", "tool_calls": [call("read", path="big.csv")]}]
        t = read_transcript(PROMPT, completion, [], [])
        assert t.final_reply is None and t.turns == 1
        assert [m["role"] for m in t.messages] == ["system", "user", "assistant"]

    def test_text_prompts_and_completions(self):
        t = read_transcript("Sum the column.", "It is 42.", [], [])
        assert t.messages == [{"role": "user", "content": "Sum the column."}, {"role": "assistant", "content": "It is 42."}]
        assert t.final_reply == "It is 42."

    def test_the_environments_log_reads_back_as_a_transcript(self):
        said = Said("Which one?", user_says("The red one.", day=2, clock="2026-03-03T09:00:00Z"), "The red one.")
        log = [("tool", ("read", {"path": "a"}, "A")), ("user", said)]
        t = read_transcript(PROMPT, completion_from_log(log), [Step("call_1", "read", "A")], [said])
        assert [(m["role"], m.get("content")) for m in t.messages[2:]] == [
            ("assistant", None), ("tool", "A"), ("assistant", "Which one?"), ("user", "The red one.")]
        assert t.final_reply is None and said.returned.startswith("A new day began (day 2")

    def test_the_channels_schema(self):
        tool = channel_tool("talk")
        assert tool["name"] == "talk" and tool["input_schema"]["required"] == ["message"]
