"""The demo's output is snapshotted so any change to what the model sees shows up in review.

Regenerate after an intended change with: ``CONTEXTWRIGHT_UPDATE_SNAPSHOTS=1 pytest
tests/test_demo_snapshot.py`` (the variable is read by this test only).
"""

from __future__ import annotations

import os
from pathlib import Path

from contextwright.demo import run_basic, run_demo

SNAPSHOT = Path(__file__).parent / "snapshots" / "demo.txt"


def test_demo_output_matches_snapshot() -> None:
    lines: list[str] = []
    run_demo(lines.append)
    output = "\n".join(lines) + "\n"
    if os.environ.get("CONTEXTWRIGHT_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(output, encoding="utf-8")
    assert output == SNAPSHOT.read_text(encoding="utf-8")


def test_weather_result_is_fenced_data_right_after_its_call() -> None:
    contexts = run_basic(lambda _: None)
    messages = contexts[1].to_messages("openai")
    call_index = next(i for i, m in enumerate(messages) if m.get("tool_calls"))
    tool = messages[call_index + 1]
    assert tool["role"] == "tool" and tool["content"].startswith("<<data ")
    assert "多云" in tool["content"]
    assert all("多云" not in (m["content"] or "") for m in messages if m["role"] == "user")


def test_system_prompt_prefix_is_stable_between_turns() -> None:
    """The cacheable prefix (system message and tools) does not move as the turn grows."""
    first, second, third = run_basic(lambda _: None)
    assert first.to_messages()[0] == second.to_messages()[0] == third.to_messages()[0]
    assert first.tool_schemas == second.tool_schemas == third.tool_schemas
