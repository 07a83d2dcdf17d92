"""Queries over snapshots, diffs of two builds, replay under another plan."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from observe_helpers import pressured

from contextwright import BuildPlan, ContextBuilder, ContextManager, ImagePart, Request
from contextwright.core.accounting import MESSAGE_OVERHEAD
from contextwright.errors import CorruptRecordError
from contextwright.observe import (
    Snapshot,
    SnapshotRecorder,
    SqliteSink,
    diff_snapshots,
    render_html,
    replay,
    summarize,
)
from contextwright.observe.diff import divergence_text
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
    assert history.cut_builds == 1 and history.compacted == 5 and history.dropped == 75
    assert summary.most_dropped[0].key == "history.*" and summary.most_dropped[0].dropped == 56
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
    held = replay(snap, wider)  # the window is the build's, unless the replay is told
    assert held.replayed.window == snap.window and held.notes == (
        "the plan's window 8192 is not used: the replay holds the original build's 4096 "
        "(pass window= to replay, or --window, to change it)",)
    result = replay(snap, wider, window=8192)
    assert result.replayed.window == 8192 and result.replayed.request == snap.request
    assert result.notes == ()
    assert result.replayed.labels == {"replay_of": snap.id}
    assert result.diff.total_tokens == (snap.total_tokens, result.replayed.total_tokens)
    assert result.diff.items and result.missing_sources == ()
    recorder.close()


def test_replay_holds_the_tokens_the_original_had_available() -> None:
    _, request = pressured()
    budgeted = BuildPlan.named("chat").with_budget(available_override=900)  # the CLI's --budget
    snap = snapshot_of(budgeted, request)
    held = replay(snap, BuildPlan.named("chat"))
    assert held.replayed.available == snap.available == 900
    assert held.notes == (
        f"the plan's budget of {BuildPlan.named('chat').budget.available} tokens is not used: "
        "the replay holds the original build's 900 (pass available= to replay, or "
        "--available, to change it)",)
    assert held.diff.total_tokens[0] == snap.total_tokens and held.diff.items == ()
    assert replay(snap, BuildPlan.named("chat"), available=1500).replayed.available == 1500
    # a changed window is a new budget: the plan's own under it
    wider = replay(snap, BuildPlan.named("chat"), window=16384)
    assert wider.replayed.available == BuildPlan.named("chat").with_budget(
        window=16384).budget.available and wider.notes == ()


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


def _picture_request(url: str) -> Request:
    return Request(user_input="What is in this picture?",
                   images=[ImagePart(url=url, detail="low")])


def _named_request(speaker: str) -> Request:
    return Request(user_input="q", history=[{"role": "user", "content": "hi", "name": speaker},
                                            {"role": "assistant", "content": "hello"}])


def test_another_image_or_speaker_name_is_where_the_renderings_diverge() -> None:
    pairs = [(BuildPlan.named("simple_qa"), _picture_request("https://example.invalid/a.png"),
              _picture_request("https://example.invalid/b.png")),
             (BuildPlan.named("chat"), _named_request("alice"), _named_request("bob"))]
    for plan, first, second in pairs:
        for redact in (False, True):
            a, b = (snapshot_of(plan, request, redact=redact) for request in (first, second))
            diff = diff_snapshots(a, b)
            assert diff.first_divergence == 0, (plan.name, redact)
            assert sorted(c.change for c in diff.items) == ["added", "removed"]
            assert divergence_text(diff) == "renderings diverge at message #0"
        raw, redacted = snapshot_of(plan, first), snapshot_of(plan, first, redact=True)
        twins = diff_snapshots(raw, redacted)  # the same image and name, raw and hashed
        assert twins.first_divergence is None and not twins.items


def _without(snapshot: Snapshot, *names: str) -> Snapshot:
    """The snapshot as a version that did not record ``names`` of a message wrote it."""
    data = snapshot.to_dict()
    data["messages"] = [{k: v for k, v in m.items() if k not in names}
                        for m in data["messages"]]
    return Snapshot.from_dict(data)


def test_a_record_without_images_or_names_loads_and_reads_as_a_message_without_them() -> None:
    plan = BuildPlan.named("simple_qa")
    with_image = snapshot_of(plan, _picture_request("https://example.invalid/a.png"))
    older = _without(with_image, "images")
    assert diff_snapshots(older, _without(with_image, "images")).first_divergence is None
    assert diff_snapshots(older, with_image).first_divergence == 0  # never read as equal
    named = snapshot_of(BuildPlan.named("chat"), _named_request("alice"))
    assert diff_snapshots(_without(named, "name"), named).first_divergence == 0
    damaged = {**with_image.to_dict(), "messages": [
        {**with_image.messages[-1], "images": [{"media_type": "image/png"}]}]}
    with pytest.raises(CorruptRecordError, match=r"messages\[0\]\.images"):
        Snapshot.from_dict(damaged)


def _long_history() -> list[dict[str, str]]:
    return [m for i in range(30) for m in (
        {"role": "user", "content": f"q{i} " + "lorem " * 80},
        {"role": "assistant", "content": f"a{i} " + "ipsum " * 80})]


@pytest.mark.parametrize("builder_args", [
    {"model": "gpt-4o"}, {"model": "claude-sonnet-4-5"}, {"window": 4096},
    {"tokenizer": "cl100k_base", "window": 6000, "reserved_output": 700}])
def test_a_replay_under_the_same_plan_reproduces_a_builders_model_and_window(
        tmp_path: Path, builder_args: dict[str, object]) -> None:
    recorder = SnapshotRecorder(SqliteSink(tmp_path / "s.db"), redact=False)
    request = Request(user_input="Where is my order?", history=_long_history())
    ContextBuilder(snapshots=recorder, **builder_args).build(  # type: ignore[arg-type]
        BuildPlan.named("chat"), request)
    recorder.flush()
    (snap,) = recorder.sink.read()
    again = replay(snap, BuildPlan.named("chat"))
    assert (again.replayed.window, again.replayed.tokenizer, again.replayed.total_tokens) == (
        snap.window, snap.tokenizer, snap.total_tokens)
    assert again.diff.plans == ("chat", "chat") and again.diff.items == ()
    assert again.diff.first_divergence is None
    recorder.close()


def _fenced_request() -> Request:
    return Request(user_input="Weather in Lyon?", turn=[
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Lyon"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "sunny, 21C"}])


def test_a_fence_secret_given_in_code_is_named_when_a_replay_cannot_recover_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTEXTWRIGHT_FENCE_SECRET", raising=False)
    recorder = SnapshotRecorder(SqliteSink(tmp_path / "s.db"), redact=False)
    plan = BuildPlan.named("tool_heavy")
    ContextBuilder(snapshots=recorder, fence_secret="given in code").build(
        plan, _fenced_request())
    recorder.flush()
    (snap,) = recorder.sink.read()
    assert any("<<data " in str(m["content"]) for m in snap.messages)  # the case under test
    blind = replay(snap, plan)
    assert blind.diff.items  # the markers differ ...
    assert any("another fence secret" in note for note in blind.notes)  # ... and it says why
    told = replay(snap, plan, fence_secret="given in code")
    assert told.diff.items == () and told.notes == ()
    recorder.close()


def test_a_replay_names_an_image_rule_it_cannot_recover() -> None:
    plan = BuildPlan.named("simple_qa")
    snap = snapshot_of(plan, _picture_request("https://example.invalid/a.png"))
    as_gpt = replace(snap, image_rule="openai-tiles-85-170")  # a builder given model="gpt-4o"
    (note,) = replay(as_gpt, plan).notes
    assert "openai-tiles-85-170" in note and snap.image_rule in note
    assert replay(snap, plan).notes == ()
    older = replace(snap, image_rule=None, target=None)  # a record from before both were kept
    (note,) = replay(older, plan).notes
    assert "does not say how its images were counted" in note
