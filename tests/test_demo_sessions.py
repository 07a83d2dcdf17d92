"""The sessions demo (a support bot through ContextManager) is snapshotted like the main demo.

Regenerate after an intended change with ``CONTEXTWRIGHT_UPDATE_SNAPSHOTS=1 pytest
tests/test_demo_sessions.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

from contextwright.demo_sessions import run_sessions_demo

SNAPSHOT = Path(__file__).parent / "snapshots" / "demo_sessions.txt"


def test_sessions_demo_output_matches_snapshot() -> None:
    lines: list[str] = []
    run_sessions_demo(lines.append)
    output = "\n".join(lines) + "\n"
    if os.environ.get("CONTEXTWRIGHT_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(output, encoding="utf-8")
    assert output == SNAPSHOT.read_text(encoding="utf-8")


def test_sessions_demo_routes_through_three_modes_without_leaking() -> None:
    contexts = run_sessions_demo(lambda _: None)
    assert [c.mode for c in contexts] == [
        "sliding_window", "rag_enhanced", "structured", "rag_enhanced"]
    messages = contexts[2].to_messages("openai")
    memory = "\n".join(str(m["content"] or "") for m in messages)
    for zone in ("[事实区]", "[任务区]", "[工具区]", "[输出区]"):
        assert zone in memory
    assert not any("<<data" in str(m["content"]) for m in messages if m["role"] == "user")
    assert "SF1234567890" in memory  # the order lookup survived two hand-offs
    assert "20241001" not in str(contexts[3].to_messages("openai"))
