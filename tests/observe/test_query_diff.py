"""Queries over snapshots, diffs of two builds, replay under another plan."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from observe_helpers import pressured

from contextwright import BuildPlan, ContextBuilder, ContextManager, Request
from contextwright.core.accounting import MESSAGE_OVERHEAD
from contextwright.observe import (
    SnapshotRecorder,
    SqliteSink,
    diff_snapshots,
    render_html,
    replay,
    summarize,
)
from contextwright.observe.query import percentile
from contextwright.observe.replay import snapshot_of


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.95), percentile(values, 1.0)) == (
        50.0, 95.0, 100.0)
    assert percentile([], 0.95) == 0.0 and percentile([7.0], 0.5) == 7.0


def test_summary_answers_lengths_unused_grants_cuts_and_drops() -> None:
    plan, request = pressured()
    pressured_snap = snapshot_of(plan, request)
    roomy = snapshot_of(BuildPlan.named("tool_heavy"), Request(user_input="hi", tools=[]))
    failed = snapshot_of(BuildPlan.named("chat").with_budget(window=512, reserved_output=256),
                         Request(user_input="word " * 600))
    snaps = [pressured_snap, roomy, failed]
    summary = summarize(snaps)
    rows = {row.group: row for row in summary.lengths}
    heavy = rows["tool_heavy"]
    assert heavy.builds == 2 and heavy.max_tokens == pressured_snap.total_tokens
    assert heavy.p50_tokens == roomy.total_tokens
    assert heavy.p95_window_share == round(pressured_snap.total_tokens / 4096, 4)
    assert heavy.truncated_builds == 1 and heavy.budget_errors == 0
    assert rows["chat"].budget_errors == 1 and rows["chat"].builds == 1
    history = next(s for s in summary.most_cut if s.source == "history")
    assert history.cut_builds == 1 and history.compacted == 5 and history.dropped == 68
    assert summary.most_dropped[0].key == "history.*" and summary.most_dropped[0].dropped == 40
    unused = {s.source: s for s in summary.sources}
    granted = sum(int(r["budget"]) for s in snaps for r in s.sources if r["source"] == "tools")
    used = sum(int(r["tokens"]) for s in snaps for r in s.sources if r["source"] == "tools")
    assert (unused["tools"].granted, unused["tools"].used) == (granted, used)
    only = summarize(snaps, source="tool_results")
    assert {s.source for s in only.sources} == {"tool_results"}
    assert all(item.source == "tool_results" for item in only.most_dropped)


def test_diff_of_two_consecutive_session_builds_names_the_items_that_changed(
        tmp_path: Path) -> None:
    recorder = SnapshotRecorder(SqliteSink(tmp_path / "s.db"))
    # Without the stable prefix the first question is the first message of both renderings
    # (with it, the data note opens a system message from the first call).
    manager = ContextManager(snapshots=recorder, background=False, cache=False)
    manager.prepare("kai_osei_204", "s", "What is the status of order KST418?")
    manager.record("kai_osei_204", "s", assistant="Order KST418 shipped yesterday.")
    manager.prepare("kai_osei_204", "s", "And when does it arrive?")
    recorder.flush()
    first, second = recorder.sink.read()
    diff = diff_snapshots(first, second)
    by_fate = {(c.change, c.source, c.before, c.after) for c in diff.items}
    assert by_fate == {
        ("changed", "history", "kept: in user as user", "kept: in history as user"),
        ("added", "history", None, "kept: in history as assistant"),
        ("added", "user", None, "kept: in user as user"),
    }
    answer = next(c for c in diff.items if c.after == "kept: in history as assistant")
    assert answer.tokens_after == second.messages[1]["tokens"]
    deltas = {d.source: d for d in diff.sources}
    shown = second.messages[:2]
    assert deltas["history"].delta == sum(m["tokens"] + MESSAGE_OVERHEAD for m in shown)
    # The first question is the first message of both: the renderings part after it.
    assert diff.first_divergence == 1
    recorder.close()


def test_diff_of_two_plans_on_one_request_shows_reasons_and_token_deltas() -> None:
    _, request = pressured()
    tight = BuildPlan.named("tool_heavy").with_budget(window=4096, reserved_output=512)
    roomy = BuildPlan.named("tool_heavy").with_budget(window=16384, reserved_output=512)
    diff = diff_snapshots(snapshot_of(tight, request), snapshot_of(roomy, request))
    assert diff.plans == ("tool_heavy@" + snapshot_of(tight, request).plan_hash,
                          "tool_heavy@" + snapshot_of(roomy, request).plan_hash)
    assert diff.total_tokens[1] > diff.total_tokens[0]
    back = [c for c in diff.items if c.change == "added" and c.before
            and c.before.startswith("dropped")]
    assert back and all("budget" in (c.before or "") for c in back)
    assert next(d for d in diff.sources if d.source == "history").delta > 0
    same = snapshot_of(tight, request)
    assert diff_snapshots(same, replace(same, id="other")).items == ()


def test_replay_rebuilds_under_another_plan_one_variable_at_a_time(tmp_path: Path) -> None:
    recorder = SnapshotRecorder(SqliteSink(tmp_path / "s.db"), redact=False)
    plan, request = pressured()
    ContextBuilder(snapshots=recorder).build(plan, request)
    recorder.flush()
    (snap,) = recorder.sink.read()
    wider = plan.with_budget(window=8192)
    result = replay(snap, wider)
    assert result.replayed.window == 8192 and result.replayed.request == snap.request
    assert result.replayed.labels == {"replay_of": snap.id}
    assert result.diff.total_tokens == (snap.total_tokens, result.replayed.total_tokens)
    assert result.diff.items and result.missing_sources == ()
    recorder.close()


_WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


def _tool_request(description: str = "Weather of a city.") -> Request:
    tool = {**_WEATHER_TOOL, "function": {**_WEATHER_TOOL["function"],
                                          "description": description}}
    return Request(user_input="Weather in Lyon?", system="Be brief.", tools=[tool],
                   history=[{"role": "user", "content": "hi"},
                            {"role": "assistant", "content": "hello"}])


def test_a_replay_without_the_tools_names_the_removed_schema_and_parts_at_the_start(
        tmp_path: Path) -> None:
    recorder = SnapshotRecorder(SqliteSink(tmp_path / "s.db"), redact=False)
    ContextBuilder(snapshots=recorder).build(BuildPlan.named("tool_heavy"), _tool_request())
    recorder.flush()
    (snap,) = recorder.sink.read()
    no_tools = (BuildPlan.builder("mine").add("system", 0.2).add("history", 0.5)
                .add("user", 0.3).build())
    diff = replay(snap, no_tools).diff
    tools = next(d for d in diff.sources if d.source == "tools")
    (schema,) = [c for c in diff.items if c.source == "tools"]
    assert (schema.key, schema.change) == ("tools.get_weather", "removed")
    assert schema.tokens_before == tools.tokens_a > 0 and schema.tokens_after == 0
    # The messages are the same, but the schemas before them are not: nothing is shared.
    assert diff.tools_changed and diff.first_divergence == 0
    assert "tool schemas differ" in render_html(snap, replay(snap, no_tools).replayed)
    recorder.close()


def test_a_reworded_tool_schema_is_a_changed_item_even_redacted() -> None:
    plan = BuildPlan.named("tool_heavy")
    before = snapshot_of(plan, _tool_request(), redact=True)
    after = snapshot_of(plan, _tool_request("Weather of a town."), redact=True)
    diff = diff_snapshots(before, after)
    assert [(c.key, c.change) for c in diff.items if c.source == "tools"] == [
        ("tools.get_weather", "changed")]
    assert diff.tools_changed and diff.first_divergence == 0
    same = diff_snapshots(before, snapshot_of(plan, _tool_request(), redact=True))
    assert not same.tools_changed and same.first_divergence is None
