"""The per-source table adds up, ``inspect --compare`` reads from the compared build to this
one, and diff and replay show the warnings a build gave. HTML is checked in headless Chromium."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.cli import app
from contextwright.observe import SnapshotRecorder, SqliteSink, diff_snapshots, snapshot_of

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SKIP_BROWSER = os.environ.get("CONTEXTWRIGHT_SKIP_BROWSER") == "1"
needs_chromium = pytest.mark.skipif(CHROMIUM is None and SKIP_BROWSER,
                                    reason="no chromium and CONTEXTWRIGHT_SKIP_BROWSER=1")
_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
          "--no-first-run", "--disable-extensions", "--disable-background-networking"]
RAG_REQUEST = Request(
    user_input="退款多久到账？", system="你是客服助手。",
    env={"time": "2026-12-07 10:00", "tz": "Asia/Shanghai"}, notes=["VIP 用户"],
    documents=[{"id": "d1", "text": "退款将在 3-5 个工作日内退回原支付方式。"}])
TOOLS = [{"type": "function", "function": {
    "name": "track_order", "description": "Track an order.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}}}]


def dom_of(page: Path, home: Path) -> str:
    """The DOM headless Chromium built from ``page``."""
    if CHROMIUM is None:  # CI must not pass by skipping: .ci/run installs the browser
        pytest.fail("chromium is not installed (.ci/run installs it); set "
                    "CONTEXTWRIGHT_SKIP_BROWSER=1 to skip these tests", pytrace=False)
    return subprocess.run([CHROMIUM, *_FLAGS, f"--user-data-dir={home}", "--dump-dom",
                           page.as_uri()], capture_output=True, text=True, timeout=120,
                          check=True).stdout


def text_of(dom: str, pattern: str) -> str:
    """The text of the first element ``pattern`` opens (tags stripped, entities read)."""
    found = re.search(pattern + r".*?</(?:tr|section|ul|li|p|div|table|details)>", dom,
                      re.DOTALL)
    assert found is not None, pattern
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", found.group())))


def test_the_reports_rows_and_its_framing_add_up_to_the_total() -> None:
    ctx = ContextBuilder(tokenizer="o200k_base").build(BuildPlan.named("rag_qa"), RAG_REQUEST)
    report = ctx.report
    assert report.framing_tokens > 0  # the data note, labels, repeated question, primer
    assert sum(row.tokens for row in report.sources) + report.framing_tokens == ctx.total_tokens
    snapshot = snapshot_of(BuildPlan.named("rag_qa"), RAG_REQUEST, tokenizer="o200k_base")
    assert snapshot.framing_tokens == report.framing_tokens


def _recorded(tmp_path: Path) -> str:
    """Two consecutive calls of one conversation, recorded; the sink's URL."""
    path = tmp_path / "snapshots.db"
    recorder = SnapshotRecorder(SqliteSink(path), redact=False)
    builder = ContextBuilder(tokenizer="o200k_base", snapshots=recorder)
    history = [{"role": "user", "content": "Where is order KST418?"},
               {"role": "assistant", "content": "It shipped on Monday."}]
    for question in ("When will it arrive?", "Can I change the address?"):
        builder.build(BuildPlan.named("rag_qa"), Request(
            user_input=question, history=history, system="You help with orders.",
            env={"time": "10:00"}, tools=TOOLS))
        history += [{"role": "user", "content": question},
                    {"role": "assistant", "content": "..."}]
    recorder.close()
    return f"sqlite:///{path}"


def test_inspect_prints_the_framing_row_and_the_sum(tmp_path: Path) -> None:
    sink = _recorded(tmp_path)
    result = CliRunner().invoke(app, ["inspect", "latest", "--sink", sink])
    assert result.exit_code == 0, result.output
    found = re.search(r"sources (\d+) \+ framing (-?\d+) = total (\d+)", result.output)
    assert found is not None, result.output
    assert int(found.group(1)) + int(found.group(2)) == int(found.group(3))
    assert "(framing)" in result.output


def test_inspect_compare_shows_the_new_question_as_added(tmp_path: Path) -> None:
    sink = _recorded(tmp_path)
    result = CliRunner().invoke(app, ["inspect", "latest", "--compare", "latest~1",
                                      "--sink", sink])
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "kept: in user as user" in line]
    assert any("added" in line for line in rows), result.output
    assert not any("removed" in line for line in rows), result.output


@needs_chromium
def test_the_html_report_adds_up_and_diffs_from_the_compared_build(tmp_path: Path) -> None:
    sink = _recorded(tmp_path)
    out = tmp_path / "out.html"
    result = CliRunner().invoke(app, ["inspect", "latest", "--compare", "latest~1",
                                      "--html", str(out), "--sink", sink])
    assert result.exit_code == 0, result.output
    dom = dom_of(out, tmp_path / "profile")
    total = text_of(dom, r'<tr class="total-row">')
    found = re.search(r"sources (\d+) \+ framing (-?\d+) = (\d+)", total)
    assert found is not None, total
    assert int(found.group(1)) + int(found.group(2)) == int(found.group(3))
    assert "data note" in text_of(dom, r'<tr class="framing-row">')
    new_question = [row for row in re.findall(r'<tr class="item-change[^"]*".*?</tr>', dom,
                                              re.DOTALL) if "in user as user" in row]
    assert new_question and all("change-removed" not in row for row in new_question)
    assert any("change-added" in row for row in new_question)


def test_a_diff_names_the_warnings_only_one_build_gave() -> None:
    request = Request(user_input="Where is KST418?", tools=TOOLS)
    with_tools = snapshot_of(BuildPlan.named("tool_heavy"), request)
    without = snapshot_of(BuildPlan.named("chat"), request)
    added = [w for w in without.warnings if "no tools source" in w]
    assert added
    diff = diff_snapshots(with_tools, without)
    assert set(added) <= set(diff.warnings_only_b)
    assert diff_snapshots(without, with_tools).warnings_only_a == diff.warnings_only_b


@needs_chromium
def test_replay_prints_and_renders_the_replayed_builds_warnings(tmp_path: Path) -> None:
    path = tmp_path / "snapshots.db"
    recorder = SnapshotRecorder(SqliteSink(path), redact=False)
    ContextBuilder(snapshots=recorder).build(BuildPlan.named("tool_heavy"), Request(
        user_input="Where is KST418?", tools=TOOLS))
    recorder.close()
    out = tmp_path / "replay.html"
    result = CliRunner().invoke(app, ["replay", "latest", "--plan", "chat", "--sink",
                                      f"sqlite:///{path}", "--html", str(out)])
    assert result.exit_code == 0, result.output
    assert "no tools source" in result.output
    dom = dom_of(out, tmp_path / "profile")
    assert "no tools source" in text_of(dom, r'<ul id="warnings">')  # the replayed build's
    assert "no tools source" in text_of(dom, r'<ul id="diff-warnings">')


def test_a_text_target_snapshots_messages_add_up_to_its_total() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "track_order", "arguments": '{"order_id": "KST418"}'}}]}
    request = Request(user_input="Where is it now?", system="You help with orders.", tools=TOOLS,
                      history=[{"role": "user", "content": "Track KST418."}, call,
                               {"role": "tool", "tool_call_id": "call_1",
                                "content": "in transit"}])
    snapshot = snapshot_of(BuildPlan.named("tool_heavy"), request, target="text")
    assert sum(int(m["tokens"]) for m in snapshot.messages) == snapshot.total_tokens
