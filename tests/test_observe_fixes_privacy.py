"""What snapshots keep of a failing source's error, and of a history of ``Message`` objects."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.core.images import image_from_part
from contextwright.core.items import ContextItem, Message, ThinkingBlock, ToolCall, parse_message
from contextwright.observe import JsonlSink, Snapshot, SnapshotRecorder, render_html
from contextwright.observe.replay import replay, snapshot_of

SECRET_INPUT = "I am alice@example.com, my card 4111 1111 1111 1111 was charged twice"


class EchoingSearch:
    """An optional source whose client error quotes the URL it fetched, query and all."""

    namespace = "search"

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        raise RuntimeError(f"GET https://search.internal/api?q={request.user_input} -> 503")


def _failing_source_snapshot(tmp_path: Path, *, redact: bool) -> Snapshot:
    sink = JsonlSink(tmp_path / "snapshots.jsonl")
    recorder = SnapshotRecorder(sink, redact=redact, fence_secret="prod-secret")
    plan = (BuildPlan.builder("support").add("system", weight=0.1).add("search", weight=0.3)
            .add("user", weight=0.6).build())
    ContextBuilder(tokenizer="o200k_base", sources=[EchoingSearch()], snapshots=recorder).build(
        plan, Request(user_input=SECRET_INPUT, system="sys"))
    recorder.close()
    reader = JsonlSink(tmp_path / "snapshots.jsonl")
    try:
        return reader.read()[-1]
    finally:
        reader.close()


def test_a_redacted_snapshot_keeps_a_failing_sources_error_text_as_a_hash(
        tmp_path: Path) -> None:
    snapshot = _failing_source_snapshot(tmp_path, redact=True)
    record = snapshot.to_json()
    assert "alice@example.com" not in record and "4111" not in record
    assert "alice@example.com" not in render_html(snapshot)
    (error,) = [row["error"] for row in snapshot.sources if row["error"]]
    assert error.startswith("RuntimeError: (redacted: hmac ")  # the kind stays readable
    (warning,) = [w for w in snapshot.warnings if "search" in w]
    assert warning == f"source search failed: {error}"


def test_an_unredacted_snapshot_keeps_the_error_text(tmp_path: Path) -> None:
    snapshot = _failing_source_snapshot(tmp_path, redact=False)
    (warning,) = [w for w in snapshot.warnings if "search" in w]
    assert "alice@example.com" in warning


def _message_history() -> list[Any]:
    image = image_from_part({"type": "image_url", "image_url": {
        "url": "https://example.com/invoice.png", "width": 512, "height": 512}}, "image")
    return [
        Message(role="user", content="Where is order KST418?", id="u1", images=(image,)),
        Message(role="assistant", content="", id="a1",
                tool_calls=(ToolCall(id="c1", name="track_order",
                                     arguments='{"order_id": "KST418"}'),),
                thinking=(ThinkingBlock(type="thinking", text="look it up", signature="sig"),)),
        Message(role="tool", content='{"status": "shipped"}', tool_call_id="c1",
                name="track_order", timestamp="2026-01-01T00:00:00Z"),
        Message(role="assistant", content="It shipped on Monday.", id="a2"),
    ]


def test_a_message_object_becomes_a_chat_dict_that_reads_back_equal() -> None:
    from contextwright.observe.snapshot import message_to_dict

    for message in _message_history():
        data = message_to_dict(message)
        json.dumps(data)
        assert parse_message(data, "history[0]") == message


def test_a_history_of_message_objects_is_recorded_unredacted_and_replays_identically(
        tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path / "snapshots.jsonl")
    recorder = SnapshotRecorder(sink, redact=False)
    plan = BuildPlan.named("chat")
    request = Request(user_input="When will it arrive?", history=_message_history())
    ContextBuilder(tokenizer="o200k_base", snapshots=recorder).build(plan, request)
    recorder.close()
    assert recorder.stats.capture_errors == 0 and recorder.stats.written == 1
    reader = JsonlSink(tmp_path / "snapshots.jsonl")
    try:
        (snapshot,) = reader.read()
    finally:
        reader.close()
    result = replay(snapshot, plan)
    assert result.diff.first_divergence is None and not result.diff.items
    assert snapshot_of(plan, request, tokenizer="o200k_base").messages == snapshot.messages
