"""Renderings of long sessions cost in proportion to their length: counted work, not time."""

from __future__ import annotations

from typing import Any

import pytest

from contextwright.core.items import Message, parse_message
from contextwright.core.providers import (
    ANTHROPIC_IDS,
    CHAT_IDS,
    RESPONSES_IDS,
    CallIdRules,
    CallIds,
)


def calls_message(*call_ids: str) -> Message:
    return parse_message({"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for call_id in call_ids]}, "message")


def rendered_ids(rules: CallIdRules, blocks: list[tuple[str, ...]]) -> list[str]:
    ids = CallIds(rules)
    rendered: list[str] = []
    for block in blocks:
        ids.open_block(calls_message(*block))
        rendered += [ids.call(call_id) for call_id in block]
    return rendered


@pytest.mark.parametrize("rules", [RESPONSES_IDS, ANTHROPIC_IDS])
def test_an_id_reused_in_every_turn_is_renamed_in_one_step_each_time(
        rules: CallIdRules, monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[Any] = []
    fit = CallIds._fit

    def counted(self: CallIds, base: str, suffix: str) -> str:
        tried.append(suffix)
        return fit(self, base, suffix)

    monkeypatch.setattr(CallIds, "_fit", counted)
    turns = 1000
    rendered = rendered_ids(rules, [("call_0",)] * turns)
    assert rendered == ["call_0", *(f"call_0_{n}" for n in range(2, turns + 1))]
    assert len(tried) == turns - 1  # each rename tries one number, not every one before it


@pytest.mark.parametrize(("blocks", "expected"), [
    ([("call_0",), ("call_0_2",), ("call_0",), ("call_0",)],
     ["call_0", "call_0_2", "call_0_3", "call_0_4"]),
    ([("call_0",), ("call_0",), ("call_0_3",), ("call_0",)],
     ["call_0", "call_0_2", "call_0_3", "call_0_4"]),
    ([("a b",), ("a_b",), ("a b",)], ["a_b", "a_b_2", "a_b_3"]),
])
def test_renamed_ids_are_the_smallest_free_numbers(blocks: list[tuple[str, ...]],
                                                   expected: list[str]) -> None:
    assert rendered_ids(ANTHROPIC_IDS, blocks) == expected


def test_chat_completions_ids_are_unique_per_message_only() -> None:
    blocks = [("call_0", "call_1"), ("call_0", "call_1"), ("call_0",)]
    assert rendered_ids(CHAT_IDS, blocks) == ["call_0", "call_1", "call_0", "call_1", "call_0"]
