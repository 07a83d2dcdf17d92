"""Snapshots: one per build, off the request path, redacted by default, never failing a build."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from observe_helpers import RaisingSink, pressured

from contextwright import BudgetError, BuildPlan, ContextBuilder, ContextManager, Request
from contextwright.errors import InvalidInputError
from contextwright.observe import (
    Snapshot,
    SnapshotQuery,
    SnapshotRecorder,
    SqliteSink,
    replay,
)
from contextwright.observe.snapshot import (
    BuildRecord,
    capture,
    frozen_request,
    identifier_digest,
    plan_hash,
    plan_to_dict,
)


def _recorded(tmp_path: Path, **options: Any) -> SnapshotRecorder:
    return SnapshotRecorder(SqliteSink(tmp_path / "s.db"), **options)


def test_every_build_writes_one_snapshot_with_its_whole_account(tmp_path: Path) -> None:
    recorder = _recorded(tmp_path)
    builder = ContextBuilder(snapshots=recorder)
    plan, request = pressured()
    contexts = [builder.build(plan, request) for _ in range(3)]
    assert recorder.flush()
    snapshots = recorder.sink.read()
    assert len(snapshots) == 3 and recorder.stats.written == 3
    snap, ctx = snapshots[-1], contexts[-1]
    assert snap.plan == "tool_heavy" and snap.status == "ok"
    assert snap.plan_hash == plan_hash(plan_to_dict(builder.effective_plan(plan)))
    assert snap.total_tokens == ctx.total_tokens and snap.available == 2560
    assert snap.window == 4096 and snap.tokenizer == "o200k_base"
    assert snap.library_version == "0.1.0" and snap.build_ms > 0
    rows = {row["source"]: row for row in snap.sources}
    for row in ctx.report.sources:
        assert (rows[row.source]["budget"], rows[row.source]["tokens"],
                rows[row.source]["share"]) == (row.budget, row.tokens, row.share)
    assert rows["user"]["cuttable"] is False and rows["history"]["cuttable"] is True
    assert [(d["key"], d["action"], d["reason"]) for d in snap.decisions] == [
        (d.key, d.action, d.reason) for d in ctx.report.decisions]
    assert [(m["role"], m["section"]) for m in snap.messages] == [
        (m.role, s) for m, s in zip(ctx.messages, ctx.sections, strict=True)]
    assert snap.request["history"] == {"messages": 80 + 40 // 3 * 2 + 2}
    recorder.close()


def test_redaction_is_the_default_and_keeps_no_text(tmp_path: Path) -> None:
    recorder = _recorded(tmp_path)
    plan, request = pressured()
    ContextBuilder(snapshots=recorder).build(plan, request)
    recorder.flush()
    (snap,) = recorder.sink.read()
    text = snap.to_json()
    assert snap.redacted
    for secret in ("上海", "杭州", "ignore the user", "get_weather\\\", \\\"arguments"):
        assert json.dumps(secret, ensure_ascii=True)[1:-1] not in text
    user = snap.request["user_input"]
    assert user["chars"] == len(request.user_input) and len(user["hmac"]) == 64
    assert all(set(m["content"]) == {"hmac", "chars"} for m in snap.messages)
    compacted = [d for d in snap.decisions if d["action"] == "compacted"
                 and not d["key"].endswith(".digest")]  # a digest is new text: no original
    assert compacted and all(set(d["detail"]) == {"hmac", "chars"} for d in compacted)
    with pytest.raises(InvalidInputError, match="redacted"):
        replay(snap, BuildPlan.named("chat"))
    recorder.close()


def test_without_redaction_the_request_round_trips_and_replays(tmp_path: Path) -> None:
    recorder = _recorded(tmp_path, redact=False)
    plan, request = pressured()
    ctx = ContextBuilder(snapshots=recorder).build(plan, request)
    recorder.flush()
    (snap,) = recorder.sink.read()
    assert Request.from_dict(dict(snap.request)).history == list(request.history)
    assert [m["content"] for m in snap.messages] == [m.content for m in ctx.messages]
    again = replay(snap, plan)
    assert again.replayed.total_tokens == snap.total_tokens
    assert again.diff.items == () and again.diff.first_divergence is None
    recorder.close()


def test_a_budget_error_is_recorded_with_its_report(tmp_path: Path) -> None:
    recorder = _recorded(tmp_path)
    plan = BuildPlan.named("chat").with_budget(window=512, reserved_output=256)
    with pytest.raises(BudgetError):
        ContextBuilder(snapshots=recorder).build(plan, Request(user_input="word " * 600))
    recorder.flush()
    (snap,) = recorder.sink.read()
    assert snap.status == "budget_error" and "exceed" in (snap.error or "")
    assert snap.messages == () and snap.sources
    recorder.close()


@pytest.mark.parametrize("redact", [True, False])
def test_a_snapshot_holds_the_plan_the_build_used(tmp_path: Path, redact: bool) -> None:
    recorder = _recorded(tmp_path, redact=redact)
    builder = ContextBuilder(snapshots=recorder)
    history = [{"role": "user", "content": "Is KST7 confirmed?"},
               {"role": "assistant", "content": "Yes."}]
    ctx = builder.build(BuildPlan.named("simple_qa"), Request(user_input="And KST8?",
                                                              history=history))
    small = BuildPlan.named("simple_qa").with_budget(window=512, reserved_output=256)
    with pytest.raises(BudgetError) as failed:
        builder.build(small, Request(user_input="word " * 600, history=history))
    recorder.flush()
    done, budget_error = recorder.sink.read()
    assert ctx.report.plan == failed.value.report.plan == "simple_qa+history"
    for snap in (done, budget_error):
        assert snap.plan == "simple_qa+history"
        specs = [spec["source"] for spec in snap.plan_spec["sources"]]
        assert "history" in specs and snap.plan_hash == plan_hash(dict(snap.plan_spec))
        assert {row["source"] for row in snap.sources} <= set(specs)
    assert [spec["source"] for spec in done.plan_spec["sources"]] == [
        row["source"] for row in done.sources]
    assert done.plan_hash == plan_hash(plan_to_dict(ctx.plan))
    assert budget_error.status == "budget_error" and budget_error.window == 512
    recorder.close()


def test_a_sink_that_raises_leaves_every_build_unchanged(tmp_path: Path) -> None:
    plan, request = pressured()
    plain = ContextBuilder()
    failing = RaisingSink()
    recorder = SnapshotRecorder(failing)
    watched = ContextBuilder(snapshots=recorder)
    for fmt in ("openai", "anthropic", "openai-responses"):
        assert watched.build(plan, request).to_request(fmt) == plain.build(
            plan, request).to_request(fmt)  # type: ignore[arg-type]
    assert watched.build(plan, request).report == plain.build(plan, request).report
    assert recorder.flush()
    assert recorder.stats.dropped_sink_error == 4 and recorder.stats.written == 0
    assert failing.calls >= 1
    recorder.close()


class BlockedSink(SqliteSink):
    """A sink stuck on its first write until released (a slow network store)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.release = threading.Event()
        self.entered = threading.Event()

    def write(self, snapshots: Any) -> None:
        self.entered.set()
        self.release.wait(30)
        super().write(snapshots)


def test_a_full_queue_drops_and_counts_without_waiting(tmp_path: Path) -> None:
    sink = BlockedSink(tmp_path / "s.db")
    recorder = SnapshotRecorder(sink, queue_size=4, batch_size=1)
    builder = ContextBuilder(snapshots=recorder)
    request = Request(user_input="hello")
    plan = BuildPlan.named("simple_qa")
    builder.build(plan, request)
    assert sink.entered.wait(10)  # the writer is now stuck inside the sink
    for _ in range(20):
        builder.build(plan, request)
    stats = recorder.stats
    assert stats.submitted == 5 and stats.dropped_queue_full == 16
    sink.release.set()
    assert recorder.flush()
    assert recorder.stats.written == 5 and len(sink.read()) == 5
    recorder.close()


def test_a_manager_snapshot_names_session_mode_and_route(tmp_path: Path) -> None:
    recorder = _recorded(tmp_path)
    manager = ContextManager(snapshots=recorder, background=False)
    manager.prepare("nora_vance_5172", "s1", "hello there")
    manager.record("nora_vance_5172", "s1", assistant="hi, how can I help?")
    manager.prepare("nora_vance_5172", "s1", "please debug this python traceback for me")
    recorder.flush()
    first, second = recorder.sink.read()
    assert first.session == {"user_id": identifier_digest("nora_vance_5172"),
                             "session_id": identifier_digest("s1")}  # redacted: kept hashed
    assert first.mode is not None and first.route is not None
    assert set(first.route) == {"mode", "basis", "trigger", "confidence"}
    assert second.route is not None and second.route["mode"] == second.mode
    if second.mode != first.mode:
        assert second.switch is not None and second.switch["new_mode"] == second.mode
    assert recorder.sink.read(SnapshotQuery(mode=second.mode))[-1].id == second.id
    recorder.close()


def test_a_cache_prefix_result_goes_into_the_snapshot_when_the_build_has_one() -> None:
    plan, request = pressured()
    builder = ContextBuilder()
    first = builder.build(plan, request, cache=True)
    ctx = builder.build(plan, request, previous=first)
    assert ctx.report.cache is not None
    record = BuildRecord(request=frozen_request(request, with_history=False), plan=plan,
                         context=ctx, report=ctx.report, error=None,
                         started=1.0, build_ns=1000, tokenizer="o200k_base",
                         history_length=len(request.history))
    snap = capture(record, redact=True, library_version="0")
    assert snap.cache == ctx.report.cache.to_dict()
    assert snap.cache["previous"] is True and snap.cache["prefix_tokens"] > 0
    plain = builder.build(plan, request)
    unstable = capture(replace(record, report=plain.report, context=plain), redact=True,
                       library_version="0")
    assert unstable.cache is None


def test_a_snapshot_round_trips_through_json(tmp_path: Path) -> None:
    recorder = _recorded(tmp_path, redact=False)
    plan, request = pressured()
    ContextBuilder(snapshots=recorder).build(plan, request)
    recorder.flush()
    (snap,) = recorder.sink.read()
    assert Snapshot.from_json(snap.to_json()) == snap
    assert recorder.sink.get(snap.id) == snap
    with pytest.raises(InvalidInputError, match="no snapshot"):
        recorder.sink.get("0" * 20)
    recorder.close()


def test_appending_to_the_history_after_a_build_does_not_change_its_snapshot(
        tmp_path: Path) -> None:
    recorder = _recorded(tmp_path, redact=False)
    history: list[dict[str, Any]] = [{"role": "user", "content": "one"},
                                     {"role": "assistant", "content": "two"}]
    ContextBuilder(snapshots=recorder).build(BuildPlan.named("chat"),
                                             Request(user_input="three", history=history))
    history.append({"role": "user", "content": "later"})
    recorder.flush()
    (snap,) = recorder.sink.read()
    assert [m["content"] for m in snap.request["history"]] == ["one", "two"]
    recorder.close()


def test_labels_go_into_every_snapshot_and_must_be_json(tmp_path: Path) -> None:
    recorder = _recorded(tmp_path, labels={"tenant": "acme"})
    view = recorder.labelled(scenario="pressure")
    ContextBuilder(snapshots=view).build(*pressured())
    recorder.flush()
    (snap,) = recorder.sink.read()
    assert snap.labels == {"tenant": "acme", "scenario": "pressure"}
    with pytest.raises(InvalidInputError, match="label 'when'"):
        recorder.labelled(when=object())
    recorder.close()


def test_a_request_that_is_not_json_loses_only_its_own_snapshot(tmp_path: Path) -> None:
    recorder = _recorded(tmp_path, redact=False, batch_size=8)
    builder = ContextBuilder(snapshots=recorder)
    odd = {"role": "user", "content": "hi", "meta": {1, 2}}  # a set: not JSON
    builder.build(BuildPlan.named("chat"), Request(user_input="a", history=[odd]))
    builder.build(BuildPlan.named("chat"), Request(user_input="b"))
    recorder.flush()
    assert recorder.stats.capture_errors == 1 and recorder.stats.written == 1
    recorder.close()


def test_the_metrics_extras_are_imported_only_when_used() -> None:
    import subprocess
    import sys

    import contextwright.observe as observe

    assert all(hasattr(observe, name) for name in observe.__all__)
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, contextwright, contextwright.observe; print(sorted("
         "{m.split('.')[0] for m in sys.modules} & {'prometheus_client', 'opentelemetry', "
         "'psycopg', 'redis'}))"], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"
