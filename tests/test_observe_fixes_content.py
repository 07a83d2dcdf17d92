"""The HTML report and ``inspect`` show what a message carries besides its text: its images (as a
line naming them, never their data), its tool calls and reasoning; the tool schemas offered; and
the original text of a cut item. HTML is checked in headless Chromium."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.cli import app
from contextwright.observe import SnapshotRecorder, SqliteSink
from test_observe_fixes_views import dom_of, needs_chromium, text_of

TOOLS = [{"type": "function", "function": {
    "name": name, "description": f"{name} for an order.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}}}
    for name in ("track_order", "search_kb", "cancel_order")]


def _png(width: int, height: int) -> str:
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))
    return base64.b64encode(data).decode("ascii")


def _request() -> Request:
    call = {"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "cancel_order", "arguments": json.dumps({"order_id": "KST418"})}}]}
    result = {"role": "tool", "tool_call_id": "call_1", "name": "cancel_order",
              "content": json.dumps({"status": "cancelled", "rows": [
                  {"line": i, "sku": f"SKU-{i:04d}", "note": "   padded   "}
                  for i in range(40)]}, indent=4)}
    image = {"type": "image_url",
             "image_url": {"url": f"data:image/png;base64,{_png(64, 48)}", "detail": "high"}}
    return Request(
        user_input="What is wrong with this invoice?", tools=TOOLS,
        history=[{"role": "user", "content": [{"type": "text", "text": "Cancel KST418."}, image]},
                 call, result, {"role": "assistant", "content": "Done, it is cancelled."}])


def _recorded(tmp_path: Path) -> str:
    path = tmp_path / "snapshots.db"
    recorder = SnapshotRecorder(SqliteSink(path), redact=False)
    ContextBuilder(tokenizer="o200k_base", snapshots=recorder).build(
        BuildPlan.named("tool_heavy"), _request())
    recorder.close()
    return f"sqlite:///{path}"


def test_inspect_messages_shows_calls_images_and_the_offered_tools(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["inspect", "latest", "--messages",
                                      "--sink", _recorded(tmp_path)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert 'call cancel_order({"order_id": "KST418"})' in out
    assert "[image image/png 64x48, detail high" in out
    assert "base64" not in out and _png(64, 48)[:40] not in out
    for name in ("track_order", "search_kb", "cancel_order"):
        assert name in out.split("offered tools", 1)[1]


@needs_chromium
def test_the_html_report_shows_images_offered_tools_and_cut_text(tmp_path: Path) -> None:
    out = tmp_path / "build.html"
    result = CliRunner().invoke(app, ["inspect", "latest", "--html", str(out),
                                      "--sink", _recorded(tmp_path)])
    assert result.exit_code == 0, result.output
    dom = dom_of(out, tmp_path / "profile")
    assert "[image image/png 64x48, detail high" in text_of(dom, r'<div class="image">')
    assert _png(64, 48)[:40] not in dom
    tools = text_of(dom, r'<table id="offered-tools">.*?</table')
    for name in ("track_order", "search_kb", "cancel_order"):
        assert name in tools
    if '<details class="cut-text">' not in dom:
        pytest.fail("no cut item's original text in the decisions")
    assert "SKU-0001" in text_of(dom, r'<details class="cut-text">.*?</details')
