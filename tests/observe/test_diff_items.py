"""What a diff and a snapshot say about messages: repeated messages are items of their own,
the reasoning an assistant sends back is part of what it renders, and a message's image tokens
are those of the build's own image rule."""

from __future__ import annotations

import base64
import struct
import zlib

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.observe import SnapshotRecorder, SqliteSink, diff_snapshots, snapshot_of
from contextwright.observe.diff import divergence_text
from contextwright.observe.snapshot import Snapshot


def test_messages_that_repeat_an_earlier_one_are_each_an_item() -> None:
    plan = BuildPlan.named("chat")
    turn = [{"role": "user", "content": "ok"}, {"role": "assistant", "content": "Done."}]
    a = snapshot_of(plan, Request(user_input="thanks", history=turn))
    b = snapshot_of(plan, Request(user_input="thanks", history=turn * 3))
    diff = diff_snapshots(a, b)
    assert diff.messages[1] == diff.messages[0] + 4
    added = [item for item in diff.items if item.change == "added"]
    assert len(added) == 4 and not [i for i in diff.items if i.change != "added"]
    assert sorted(item.key.rsplit("#", 1)[1] for item in added) == ["2", "2", "3", "3"]
    back = diff_snapshots(b, a)
    assert [item.change for item in back.items] == ["removed"] * 4
    assert diff_snapshots(b, b).items == ()


def _thinking_turn(thought: str) -> list[dict[str, object]]:
    call = {"role": "assistant", "content": None,
            "thinking_blocks": [{"type": "thinking", "thinking": thought, "signature": "c2ln"}],
            "tool_calls": [{"id": "toolu_1", "type": "function", "function": {
                "name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]}
    return [call, {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"}]


def _with_thinking(thought: str, *, redact: bool = False) -> Snapshot:
    tools = [{"type": "function", "function": {"name": "weather", "description": "w",
              "parameters": {"type": "object",
                             "properties": {"city": {"type": "string"}}}}}]
    request = Request(user_input="weather?", tools=tools, turn=_thinking_turn(thought))
    return snapshot_of(BuildPlan.named("tool_heavy"), request, redact=redact)


def test_a_diff_sees_reasoning_sent_back_that_differs() -> None:
    a, same_size = _with_thinking("Check Paris first."), _with_thinking("Check Rome first.")
    assert a.total_tokens == same_size.total_tokens
    diff = diff_snapshots(a, same_size)
    index = next(i for i, m in enumerate(a.messages) if m.get("thinking"))
    assert diff.first_divergence == index
    assert divergence_text(diff) == f"renderings diverge at message #{index}"
    assert {item.change for item in diff.items} == {"removed", "added"}
    assert diff_snapshots(a, _with_thinking("Check Paris first.")).first_divergence is None


def test_reasoning_compares_between_a_raw_and_a_redacted_snapshot() -> None:
    raw, redacted = _with_thinking("Check Paris first."), _with_thinking(
        "Check Paris first.", redact=True)
    diff = diff_snapshots(raw, redacted)
    assert diff.hashes_comparable and diff.items == () and diff.first_divergence is None
    other = diff_snapshots(raw, _with_thinking("Check Rome first.", redact=True))
    assert other.first_divergence is not None


def _png(width: int, height: int) -> bytes:
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))


def _image_tokens(model: str | None, request: Request) -> tuple[str | None, int]:
    recorder = SnapshotRecorder(SqliteSink(":memory:"), redact=False)
    ContextBuilder(model=model, snapshots=recorder).build(BuildPlan.named("chat"), request)
    assert recorder.flush()
    (snapshot,) = recorder.sink.read()
    recorder.close()
    message = next(m for m in snapshot.messages if m.get("images"))
    return snapshot.image_rule, int(message["tokens"])


def test_a_shared_message_records_the_image_tokens_of_each_builders_rule() -> None:
    url = "data:image/png;base64," + base64.b64encode(_png(1500, 1100)).decode()
    history = [{"role": "user", "content": [{"type": "text", "text": "look at this"},
                                            {"type": "image_url", "image_url": {"url": url}}]},
               {"role": "assistant", "content": "A red square."}]

    def fresh() -> Request:
        return Request(user_input="and now?", history=[dict(m) for m in history])

    alone = {model: _image_tokens(model, fresh()) for model in (None, "gpt-4o")}
    assert alone[None][0] != alone["gpt-4o"][0] and alone[None][1] != alone["gpt-4o"][1]
    shared = fresh()  # one history list, recorded by both builders in turn
    for model in ("gpt-4o", None, "gpt-4o"):
        assert _image_tokens(model, shared) == alone[model]
