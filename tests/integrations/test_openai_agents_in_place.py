"""The OpenAI Agents input filter with items a hook or tool changes in place between calls."""

from __future__ import annotations

from typing import Any

from contextwright.integrations.openai_agents import ContextwrightInputFilter


def test_a_part_appended_to_an_items_content_is_read_again() -> None:
    apply = ContextwrightInputFilter()
    question: dict[str, Any] = {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "Book seat 12C"}]}
    assert "12C" in str(apply.build([question], None).to_messages("openai"))
    question["content"].append({"type": "input_text", "text": "and add a bag"})
    assert "and add a bag" in str(apply.build([question], None).to_messages("openai"))
