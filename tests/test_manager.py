"""ContextManager: sessions, routing, hand-offs, zones and summaries end to end."""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright.compress.summarize import ExtractiveSummarizer, Summary
from contextwright.core.items import Message
from contextwright.core.plan import BuildPlan
from contextwright.errors import BudgetError, InvalidInputError, SessionGone, StoreUnavailable
from contextwright.manager import ContextManager, PreparedContext, summaries
from contextwright.manager.flows import SessionFlows
from contextwright.manager.summaries import FREE_RETRIES, MAX_BATCH_ROUNDS, SummaryJob
from contextwright.modes import RAG_ENHANCED, SLIDING_WINDOW, STRUCTURED
from contextwright.modes.config import ModeSettings
from contextwright.session import MemoryStore, PostgresStore, RedisStore, SqliteStore
from contextwright.session.flow import run_flow
from contextwright.session.store import SessionKey, Store, StoredMessage
from contextwright.tokens import Tokenizer, get_tokenizer

SKIP_SERVICES = os.environ.get("CONTEXTWRIGHT_SKIP_SERVICES") == "1"


def session_memory(ctx: PreparedContext) -> str:
    """The session's summary and zones as rendered: in the system message of a fresh build,
    after the stable part of one that keeps a stable prefix (fenced zones in the assistant's
    voice: fenced data is never in the user's role)."""
    messages = ctx.to_messages("openai")
    assert not any("<<data" in (m["content"] or "") for m in messages if m["role"] == "user")
    return "\n".join(str(m["content"] or "") for m in messages)


def _services_store(kind: str) -> Store:
    try:
        if kind == "redis":
            return RedisStore("redis://127.0.0.1:6379/0", prefix=f"cwtest-{uuid.uuid4().hex}")
        return PostgresStore("postgresql://postgres@127.0.0.1:5432/test",
                             schema=f"cwtest_{uuid.uuid4().hex[:12]}")
    except StoreUnavailable:
        if SKIP_SERVICES:
            pytest.skip(f"{kind} is not running and CONTEXTWRIGHT_SKIP_SERVICES=1")
        raise


@pytest.fixture(params=["memory", "sqlite", "redis", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    kind = request.param
    if kind == "memory":
        opened: Store = MemoryStore()
    elif kind == "sqlite":
        opened = SqliteStore(tmp_path / "sessions.db")
    else:
        opened = _services_store(kind)
    yield opened
    for info in opened.list_sessions():
        opened.erase_session(info.key)
    opened.close()


def _manager(store: Store | None = None, **kwargs: Any) -> ContextManager:
    return ContextManager(store=store or MemoryStore(), background=False, **kwargs)


def _texts(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content")) for m in messages)


def test_issue_example_prepare_record_prepare(tmp_path: Path) -> None:
    cm = ContextManager(store=SqliteStore(tmp_path / "agent.db"))
    ctx = cm.prepare(user_id="U001", session_id="S001", text="帮我查一下订单号 20241001 的物流状态")
    messages = ctx.to_messages("openai")
    assert messages[-1] == {"role": "user", "content": "帮我查一下订单号 20241001 的物流状态"}
    assert ctx.mode == RAG_ENHANCED
    cm.record(user_id="U001", session_id="S001",
              assistant="订单 20241001 已发货，顺丰 SF123456789。")
    ctx = cm.prepare(user_id="U001", session_id="S001", text="大概什么时候到？")
    text = _texts(ctx.to_messages("openai"))
    assert "SF123456789" in text and "大概什么时候到" in text
    cm.close()


def test_a_mode_switch_hands_off_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    cm = _manager()
    cm.prepare("u", "s", "你好，我叫王小明，收货地址是北京市朝阳区建国路88号")
    cm.record("u", "s", assistant="你好王小明，请问有什么可以帮你？")
    with caplog.at_level(logging.INFO, logger="contextwright.session"):
        ctx = cm.prepare("u", "s", "帮我查一下订单号 20241001 的物流状态")
    assert ctx.switch is not None
    assert (ctx.switch.old_mode, ctx.switch.new_mode) == (SLIDING_WINDOW, RAG_ENHANCED)
    assert ctx.switch.trigger == "帮我查"
    events = [r.contextwright for r in caplog.records if hasattr(r, "contextwright")]
    assert {"route", "mode_switch"} <= {e["event"] for e in events}
    switch_event = next(e for e in events if e["event"] == "mode_switch")
    assert (switch_event["old_mode"], switch_event["new_mode"], switch_event["trigger"]) == (
        SLIDING_WINDOW, RAG_ENHANCED, "帮我查")
    state = cm.state("u", "s")
    assert len(state.zones.handoffs) == 1
    assert "北京市朝阳区建国路88号" in state.zones.handoffs[0]
    assert [s.new_mode for s in state.mode_history] == [SLIDING_WINDOW, RAG_ENHANCED]
    memory = session_memory(ctx)
    assert "[事实区]" in memory and "建国路88号" in memory


def test_handoff_summary_stays_within_200_tokens() -> None:
    cm = _manager()
    for i in range(8):
        cm.prepare("u", "s", f"我想聊聊第 {i} 件事，编号 ID-{1000 + i}，" + "细节很多。" * 30)
        cm.record("u", "s", assistant="好的，" + "我明白了。" * 30)
    cm.prepare("u", "s", "帮我查订单")
    handoff = cm.state("u", "s").zones.handoffs[-1]
    assert 0 < cm.tokenizer.count(handoff) <= 200


def test_switch_clears_the_tools_zone() -> None:
    cm = _manager()
    cm.prepare("u", "s", "先查库存再调用供应商接口更新订单状态")
    _record_tool_round(cm, "check_stock", {"sku": "A1"}, {"stock": 15})
    assert cm.state("u", "s").zones.tools
    cm.prepare("u", "s", "帮我查一下退款政策")
    assert cm.state("u", "s").mode == RAG_ENHANCED
    assert cm.state("u", "s").zones.tools == ()


def _record_tool_round(cm: ContextManager, name: str, args: dict[str, Any],
                       result: dict[str, Any], user: str = "u", session: str = "s") -> None:
    call_id = f"call_{uuid.uuid4().hex[:8]}"
    cm.record(user, session, assistant={
        "role": "assistant", "content": "",
        "tool_calls": [{"id": call_id, "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)}}],
    }, tool_results=[{"tool_call_id": call_id, "name": name,
                      "content": json.dumps(result, ensure_ascii=False)}])


def test_structured_mode_keeps_labelled_zones() -> None:
    cm = _manager()
    ctx = cm.prepare("u", "s", "先查库存再调用供应商接口更新订单 A-20241001 的状态")
    assert ctx.mode == STRUCTURED
    for i in range(4):
        _record_tool_round(cm, f"tool_{i}", {"n": i}, {"value": 1000 + i})
    ctx = cm.prepare("u", "s")  # continue the same turn with the tool results
    memory = session_memory(ctx)
    for label in ("[事实区]", "[任务区]", "[工具区]", "[输出区]"):
        assert label in memory
    assert "A-20241001" in memory
    zones = cm.state("u", "s").zones
    assert [t.name for t in zones.tools] == ["tool_1", "tool_2", "tool_3"]
    assert zones.task.done[0].startswith("查库存")
    tools_zone = memory.split("[工具区]")[1].split("<<end")[0]
    assert "tool_1" in tools_zone and "tool_0" not in tools_zone


def test_continuing_a_turn_puts_tool_results_after_the_input() -> None:
    cm = _manager()
    cm.prepare("u", "s", "What's the weather in Beijing?", tools=[_WEATHER_TOOL])
    _record_tool_round(cm, "get_weather", {"city": "Beijing"}, {"temp": 25, "sky": "sunny"})
    ctx = cm.prepare("u", "s", tools=[_WEATHER_TOOL])
    assert ctx.route is None
    messages = ctx.to_messages("openai")
    roles = [m["role"] for m in messages]
    assert roles[-3:] == ["user", "assistant", "tool"]
    assert "25" in messages[-1]["content"]


_WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


def test_continuing_without_any_user_message_is_an_error() -> None:
    with pytest.raises(InvalidInputError, match="no user message"):
        _manager().prepare("u", "s")


def test_a_message_too_large_for_the_budget_is_stored_once() -> None:
    cm = _manager()
    huge = "refund order #A-1234 please " * 20_000
    with pytest.raises(BudgetError) as failed:
        cm.prepare("u", "s", huge)
    assert failed.value.stored_seq == 1 and "text=None" in " ".join(failed.value.__notes__)
    assert cm.store.count(SessionKey(user_id="u", session_id="s")) == 1
    with pytest.raises(BudgetError) as again:
        cm.prepare("u", "s")  # building again stores nothing more
    assert again.value.stored_seq is None
    assert cm.store.count(SessionKey(user_id="u", session_id="s")) == 1
    cm.record("u", "s", assistant="That message is too long; please shorten it.")
    prepared = cm.prepare("u", "s", "refund order #A-1234")
    assert prepared.user_seq == 3
    assert str(prepared.context.messages[-1].content).endswith("refund order #A-1234")


def test_bad_record_appends_nothing() -> None:
    cm = _manager()
    cm.prepare("u", "s", "hi")
    before = cm.store.count(SessionKey(user_id="u", session_id="s"))
    with pytest.raises(InvalidInputError):
        cm.record("u", "s", assistant="fine", messages=[{"role": "wizard", "content": "x"}])
    with pytest.raises(InvalidInputError):
        cm.record("u", "s")
    assert cm.store.count(SessionKey(user_id="u", session_id="s")) == before


def test_conflicting_configuration_is_a_plan_error() -> None:
    from contextwright.errors import PlanError
    from contextwright.modes import Router

    with pytest.raises(PlanError, match="Router"):
        ContextManager(router=Router(), modes=Path("modes.yaml"))
    with pytest.raises(PlanError, match="unknown modes"):
        ContextManager(plans={"sliding_windw": "chat"})


def test_a_mode_can_build_with_another_plan() -> None:
    no_history = BuildPlan.builder("no_history").add("system", 0.3).add("user", 0.7).build()
    cm = ContextManager(plans={"sliding_window": no_history}, background=False)
    _chat(cm, 2)
    ctx = cm.prepare("u", "s", "hello again")
    assert ctx.report.plan == "no_history"
    assert "Round 1" not in _texts(ctx.to_messages("openai"))


def test_a_shipped_plan_shows_the_history_it_has_no_source_for() -> None:
    cm = ContextManager(plans={"sliding_window": "simple_qa"}, background=False)
    _chat(cm, 2)
    ctx = cm.prepare("u", "s", "hello again")
    assert ctx.report.plan == "simple_qa+history"
    assert "Round 1" in _texts(ctx.to_messages("openai"))


def test_ids_are_required() -> None:
    with pytest.raises(InvalidInputError):
        _manager().prepare("", "s", "hi")
    with pytest.raises(InvalidInputError):
        _manager().prepare("u", "", "hi")


# ----- summaries -----


def _chat(cm: ContextManager, rounds: int, user: str = "u", session: str = "s",
          start: int = 0) -> None:
    for i in range(start, start + rounds):
        cm.prepare(user, session, f"Round {i}: please note booking code BK{7000 + i}.")
        cm.record(user, session, assistant=f"Noted booking BK{7000 + i} for round {i}.")


def test_old_rounds_are_summarised_and_recent_ones_stay_verbatim() -> None:
    cm = _manager()
    _chat(cm, 12)
    state = cm.state("u", "s")
    assert state.summary is not None and state.summary_upto > 0
    summary = Summary.from_dict(state.summary)
    for i in range(5):
        assert f"BK{7000 + i}" in summary.render("en")
    ctx = cm.prepare("u", "s", "What codes do I have?")
    text = _texts(ctx.to_messages("openai"))
    for i in range(6, 12):  # the last six rounds are verbatim
        assert f"Round {i}: please note booking code BK{7000 + i}." in text
    verbatim = [m["content"] for m in ctx.to_messages("openai") if m["role"] != "system"]
    assert "Round 0: please note booking code BK7000." not in verbatim  # summarised…
    assert "BK7000" in text  # …and the summary keeps its exact facts
    assert cm.store.count(SessionKey(user_id="u", session_id="s")) == 25  # originals stay


class _Recording(ExtractiveSummarizer):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def summarize(self, previous: Summary | None, messages: Sequence[Message], *,
                  language: str, max_tokens: int | None = None,
                  tokenizer: Tokenizer | None = None) -> Summary:
        self.calls.append([m.content for m in messages])
        return super().summarize(previous, messages, language=language, max_tokens=max_tokens,
                                 tokenizer=tokenizer)


def test_summary_merges_only_new_rounds() -> None:
    recording = _Recording()
    cm = _manager(summarizer=recording)
    _chat(cm, 30)
    assert len(recording.calls) >= 2
    seen = [content for call in recording.calls for content in call]
    assert len(seen) == len(set(seen)), "a message was summarised twice"
    summary = Summary.from_dict(cm.state("u", "s").summary or {})
    assert "BK7000" in summary.render("en")  # the first round survives later merges


class _Lossy(ExtractiveSummarizer):
    def summarize(self, previous: Summary | None, messages: Sequence[Message], *,
                  language: str, max_tokens: int | None = None,
                  tokenizer: Tokenizer | None = None) -> Summary:
        return Summary(need="chat", facts=(), unresolved=(), corrected=(), notes=())


class _Broken(ExtractiveSummarizer):
    def summarize(self, previous: Summary | None, messages: Sequence[Message], *,
                  language: str, max_tokens: int | None = None,
                  tokenizer: Tokenizer | None = None) -> Summary:
        raise RuntimeError("model down")


@pytest.mark.parametrize("summarizer", [_Lossy(), _Broken()], ids=["loses-facts", "raises"])
def test_a_bad_summary_is_not_committed(summarizer: ExtractiveSummarizer,
                                        caplog: pytest.LogCaptureFixture) -> None:
    cm = _manager(summarizer=summarizer)
    with caplog.at_level(logging.WARNING, logger="contextwright.session"):
        _chat(cm, 12)
    state = cm.state("u", "s")
    assert state.summary is None and state.summary_upto == 0
    assert state.summary_failures > 0
    assert any(getattr(r, "contextwright", {}).get("event") == "summary_rejected"
               for r in caplog.records)
    text = _texts(cm.prepare("u", "s", "codes?").to_messages("openai"))
    assert "BK7000" in text  # the original messages are still there


class _BrokenCounting(ExtractiveSummarizer):
    """Always fails, and remembers how many messages each attempt was given."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def summarize(self, previous: Summary | None, messages: Sequence[Message], *,
                  language: str, max_tokens: int | None = None,
                  tokenizer: Tokenizer | None = None) -> Summary:
        self.batches.append(len(messages))
        raise RuntimeError("model down")


def test_a_summary_that_keeps_failing_costs_bounded_work() -> None:
    broken = _BrokenCounting()
    cm = _manager(summarizer=broken)
    _chat(cm, 200)
    state = cm.state("u", "s")
    assert state.summary is None and state.summary_upto == 0
    assert max(broken.batches) <= 2 * MAX_BATCH_ROUNDS  # two messages a round here
    # three tries, then one per doubling of the unsummarised rounds (16, 32, 64, 128)
    assert len(broken.batches) <= FREE_RETRIES + 5
    assert state.summary_failures == len(broken.batches)
    text = _texts(cm.prepare("u", "s", "codes?").to_messages("openai"))
    assert "BK7199" in text  # the originals are still shown, as far as the budget reaches
    assert cm.summarize_now("u", "s") == "rejected"  # an explicit update still tries
    assert len(broken.batches) <= FREE_RETRIES + 6


def test_a_summary_that_keeps_failing_on_a_long_backlog_reads_only_its_newest_messages(
        ) -> None:
    # Whether a failing summary is tried again is read off the newest messages: counting the
    # backlog's rounds read all of it on every record.
    store = _ReadCounting(_imported(3_000))
    broken = _BrokenCounting()
    cm = _manager(store=store, summarizer=broken)  # type: ignore[arg-type]
    reads = []
    for turn in range(40):
        store.reads.clear()
        cm.record("u", "s", messages=[{"role": "user", "content": f"new {turn}"},
                                      {"role": "assistant", "content": f"ok {turn}"}])
        reads.append(max(store.reads))
    assert len(broken.batches) == FREE_RETRIES  # 6,000 to 6,080 messages: no power of two
    assert max(reads) <= summaries.BACKLOG_HEAD
    assert max(reads[FREE_RETRIES:]) <= summaries.BACKLOG_TAIL  # deferred: the newest only
    assert cm.state("u", "s").summary_failures == FREE_RETRIES
    assert cm.summarize_now("u", "s") == "rejected"  # an explicit update still tries


def test_a_failing_summary_is_tried_again_in_the_round_that_doubles_the_backlog() -> None:
    def stored(seqs: range, users: set[int]) -> list[StoredMessage]:
        return [StoredMessage(seq=seq, message={"role": "user" if seq in users else
                                                "assistant", "content": "x"}, created_at=0.0)
                for seq in seqs]

    # Unsummarised from seq 11: a round that starts at message 14 of the backlog and reaches
    # message 16 holds the sixteenth.
    assert summaries.retry_due(FREE_RETRIES, 10, stored(range(20, 27), {24}))
    assert not summaries.retry_due(FREE_RETRIES, 10, stored(range(20, 26), {20}))  # to 15th
    assert not summaries.retry_due(FREE_RETRIES, 10, stored(range(28, 34), {28}))  # 18th on
    assert summaries.retry_due(FREE_RETRIES - 1, 10, stored(range(28, 34), {28}))  # free
    # A round longer than the newest messages read: counted from the first of them.
    assert summaries.retry_due(FREE_RETRIES, 0, stored(range(60, 70), set()))
    assert not summaries.retry_due(FREE_RETRIES, 0, stored(range(70, 80), set()))


class _Counting(ExtractiveSummarizer):
    """Summarises as the extractive one does; remembers each batch's size, fails on demand."""

    def __init__(self, fail_on: int | None = None) -> None:
        super().__init__()
        self.batches: list[int] = []
        self.fail_on = fail_on

    def summarize(self, previous: Summary | None, messages: Sequence[Message], *,
                  language: str, max_tokens: int | None = None,
                  tokenizer: Tokenizer | None = None) -> Summary:
        self.batches.append(len(messages))
        if len(self.batches) == self.fail_on:
            raise RuntimeError("model down")
        return super().summarize(previous, messages, language=language, max_tokens=max_tokens,
                                 tokenizer=tokenizer)


def _imported(rounds: int) -> MemoryStore:
    """A session whose ``rounds`` rounds were stored at once, none summarised yet."""
    store = MemoryStore()
    messages: list[dict[str, Any]] = []
    for i in range(rounds):
        messages += [
            {"role": "user", "content": f"Round {i}: please note booking code BK{7000 + i}."},
            {"role": "assistant", "content": f"Noted booking BK{7000 + i} for round {i}."}]
    store.append(SessionKey(user_id="u", session_id="s"), messages)
    return store


def test_summarize_now_catches_up_an_imported_session_batch_by_batch() -> None:
    # One call merges every due round, at most a batch per summariser call, and reaches the
    # very state a run of one-batch updates reaches.
    counting = _Counting()
    cm = _manager(store=_imported(300), summarizer=counting)
    assert cm.summarize_now("u", "s") == "committed"
    caught_up = cm.state("u", "s")
    assert len(counting.batches) >= 300 // MAX_BATCH_ROUNDS
    assert max(counting.batches) <= 2 * MAX_BATCH_ROUNDS  # two messages a round
    assert cm.summarize_now("u", "s") == "nothing_to_do"

    one_by_one = _manager(store=_imported(300))
    key = SessionKey(user_id="u", session_id="s")
    updates = 0
    while one_by_one._run(one_by_one._summary_flow(key, force=True)) == "committed":
        updates += 1
    assert updates == len(counting.batches)
    expected = one_by_one.state("u", "s")
    assert (caught_up.summary, caught_up.summary_upto) == (expected.summary,
                                                           expected.summary_upto)
    assert "BK7000" in Summary.from_dict(caught_up.summary or {}).render("en")


def test_a_catch_up_commits_what_it_merged_before_a_batch_failed() -> None:
    counting = _Counting(fail_on=3)
    cm = _manager(store=_imported(300), summarizer=counting)
    assert cm.summarize_now("u", "s") == "rejected"
    state = cm.state("u", "s")
    assert len(counting.batches) == 3  # the failed batch stops it
    assert state.summary_failures == 1 and state.summary is not None
    merged = sum(counting.batches[:2])
    assert state.summary_upto == merged  # seqs from 1: the two batches merged, no more
    assert "BK7299" in _texts(cm.prepare("u", "s", "codes?").to_messages("openai"))
    assert cm.summarize_now("u", "s") == "committed"  # the next call goes on from there
    assert cm.state("u", "s").summary_failures == 0


class _ReadCounting:
    """A store that counts the messages each read returns; ``spans=False``: it cannot read by
    seq (as a store of one's own may not)."""

    def __init__(self, inner: Store, *, spans: bool = True) -> None:
        self.inner, self.spans, self.reads = inner, spans, []

    def __getattr__(self, name: str) -> Any:
        if name == "read_spans" and not self.spans:
            raise AttributeError(name)
        method = getattr(self.inner, name)
        if name not in ("read", "read_spans"):
            return method

        def counted(*args: Any, **kwargs: Any) -> Any:
            found = method(*args, **kwargs)
            self.reads.append(len(found or ()))
            return found
        return counted


def test_an_update_on_a_long_backlog_reads_its_ends_not_all_of_it(store: Store) -> None:
    # A conversation imported whole leaves a long backlog; each record's update merges one
    # batch of it. Reading the whole backlog for that made every record cost its length.
    def imported(inner: Store) -> Store:
        inner.append(SessionKey(user_id="u", session_id="s"), [
            message for i in range(3_000) for message in (
                {"role": "user", "content": f"Round {i}: booking code BK{7000 + i}."},
                {"role": "assistant", "content": f"Noted BK{7000 + i}."})])
        return inner

    ends, whole = _ReadCounting(imported(store)), _ReadCounting(imported(MemoryStore()),
                                                                spans=False)
    states = []
    for counting in (ends, whole):
        cm = _manager(store=counting)  # type: ignore[arg-type]
        for turn in range(3):
            counting.reads.clear()
            cm.record("u", "s", messages=[{"role": "user", "content": f"new {turn}"}])
        states.append(cm.state("u", "s"))
    assert max(whole.reads) >= 5_000  # the store that cannot read by seq reads it all
    assert max(ends.reads) <= 2_000  # the other reads a batch's worth and the newest
    assert (states[0].summary, states[0].summary_upto) == (states[1].summary,
                                                           states[1].summary_upto)
    assert states[0].summary_upto == 3 * 2 * MAX_BATCH_ROUNDS  # a batch a record


@settings(max_examples=60, deadline=None)
@given(rounds=st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=40),
       lead=st.integers(min_value=0, max_value=2), window=st.integers(min_value=0, max_value=4),
       every=st.integers(min_value=1, max_value=6), upto=st.integers(min_value=0, max_value=10))
def test_reading_a_backlogs_ends_finds_the_batch_reading_it_all_finds(
        rounds: list[int], lead: int, window: int, every: int, upto: int) -> None:
    # Rounds of random lengths (a user message and 0-5 replies, calls or results), messages
    # before the first user message, any window, ends far smaller than the backlog.
    messages = [{"role": "assistant", "content": f"lead {i}"} for i in range(lead)]
    for number, replies in enumerate(rounds):
        messages.append({"role": "user", "content": f"round {number}"})
        messages += [{"role": "assistant", "content": f"reply {number}.{i}"}
                     for i in range(replies)]
    store, key = MemoryStore(), SessionKey(user_id="u", session_id="s")
    store.append(key, messages)
    mode = ModeSettings(name=SLIDING_WINDOW, plan="chat", window_size=window, summary_every=every)
    job = SummaryJob(key=key, settings=mode,
                     summarizer=ExtractiveSummarizer(), tokenizer=get_tokenizer("o200k_base"),
                     threshold_tokens=10**9, max_tokens=300)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(summaries, "BACKLOG_TAIL", 6)
        patch.setattr(summaries, "BACKLOG_HEAD", 9)
        patch.setattr(summaries, "MAX_BATCH_ROUNDS", 3)
        epoch = store.epoch(key)
        assert epoch is not None
        tail = store.read(key, after=upto, last=summaries.BACKLOG_TAIL)
        backlog = run_flow(summaries._unsummarised(job, epoch, upto, tail, whole=False), store)
        everything = store.read(key, after=upto)
        assert backlog is not None
        found = backlog.batch if backlog.batch is not None else summaries.rounds_due(
            backlog.messages, job)
        assert found == summaries.rounds_due(everything, job)
    assert backlog.newest == everything[-len(backlog.newest):]
    if backlog.batch is None:
        assert backlog.messages == everything


class _Interrupted(ExtractiveSummarizer):
    """On its first call, lets another worker commit an update first (a ``record``'s)."""

    def __init__(self, interrupt: Callable[[], object]) -> None:
        super().__init__()
        self.interrupt: Callable[[], object] | None = interrupt

    def summarize(self, previous: Summary | None, messages: Sequence[Message], *,
                  language: str, max_tokens: int | None = None,
                  tokenizer: Tokenizer | None = None) -> Summary:
        if self.interrupt is not None:
            interrupt, self.interrupt = self.interrupt, None
            assert interrupt() == "committed"
        return super().summarize(previous, messages, language=language, max_tokens=max_tokens,
                                 tokenizer=tokenizer)


def test_a_catch_up_another_update_supersedes_starts_again_from_it() -> None:
    store, key = _imported(300), SessionKey(user_id="u", session_id="s")
    other = _manager(store=store)
    cm = _manager(store=store, summarizer=_Interrupted(
        lambda: other._run(other._summary_flow(key, force=True))))
    assert cm.summarize_now("u", "s") == "committed"
    assert other.summarize_now("u", "s") == "nothing_to_do"  # up to date


class _Blocking(ExtractiveSummarizer):
    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.started = threading.Event()

    def summarize(self, previous: Summary | None, messages: Sequence[Message], *,
                  language: str, max_tokens: int | None = None,
                  tokenizer: Tokenizer | None = None) -> Summary:
        self.started.set()
        assert self.release.wait(10)
        return super().summarize(previous, messages, language=language, max_tokens=max_tokens,
                                 tokenizer=tokenizer)


def test_prepare_never_waits_for_a_background_summary() -> None:
    blocking = _Blocking()
    cm = ContextManager(summarizer=blocking, background=True)
    try:
        _chat(cm, 12)
        assert blocking.started.wait(10)
        ctx = cm.prepare("u", "s", "still there?")  # returns while the summary is blocked
        assert "still there?" in _texts(ctx.to_messages("openai"))
        assert cm.state("u", "s").summary is None
        blocking.release.set()
        cm.flush(10)  # waits for the running job too
        assert cm.state("u", "s").summary is not None
    finally:
        blocking.release.set()
        cm.close()


def test_llm_summaries_through_an_openai_compatible_server() -> None:
    from contextwright.compress.summary_llm import LLMSummarizer
    from contextwright.llm import OpenAIChatClient
    from fakes.openai_server import FakeOpenAIServer, text

    reply = json.dumps({"need": "track bookings", "facts": [f"BK{7000 + i}" for i in range(6)],
                        "unresolved": [], "corrected": [], "notes": ["user lists codes"]})
    with FakeOpenAIServer([text(reply), text("not json at all")]) as fake:
        client = OpenAIChatClient(fake.base_url, timeout=5, max_retries=0)
        cm = _manager(summarizer=LLMSummarizer(client, model="any"))
        _chat(cm, 12)
        state = cm.state("u", "s")
        assert state.summary is not None and "BK7005" in json.dumps(state.summary)
        first = fake.requests[0].body["messages"][-1]["content"]
        assert "BK7000" in first and "BK7006" not in first  # only rounds outside the window
        _chat(cm, 5, start=12)  # the next merge gets garbage back: not committed
        assert cm.state("u", "s").summary == state.summary
        # every later attempt failed (garbage, then errors): counted, nothing committed
        assert cm.state("u", "s").summary_failures == len(fake.requests) - 1 >= 1
        client.close()


class _ErasedWhileRead(MemoryStore):
    """Erases the session, and begins it again, right after a prepare reads its state."""

    armed = False

    def get_state(self, key: SessionKey) -> Any:
        found = super().get_state(key)
        if self.armed:
            self.armed = False
            self.erase_session(key)
            super().append(key, [{"role": "user", "content": "new chat, first question"}])
        return found


@pytest.mark.parametrize("text", ["Where is order 20241001?", None])
def test_a_session_erased_between_a_prepares_reads_is_gone_not_mixed(text: str | None) -> None:
    # The state read is the erased session's (its summary), the log the new one's: no context
    # may be built of the two, and the error is not one that says the message is stored.
    store = _ErasedWhileRead()
    cm = _manager(store=store)
    _chat(cm, 12)
    assert cm.state("u", "s").summary_upto > 0  # past the new session's only message
    store.armed = True
    with pytest.raises(SessionGone) as caught:
        cm.prepare("u", "s", text)
    assert getattr(caught.value, "stored_seq", None) is None
    assert [m.message["content"] for m in store.read(SessionKey(user_id="u", session_id="s"))] \
        == ["new chat, first question"]


def test_a_prepare_answers_the_message_it_stored_not_one_stored_after_it() -> None:
    # A retry (its response was lost) replays its idempotency key after another message came:
    # its context still answers its own message, as a concurrent prepare's does.
    cm = _manager()
    first = cm.prepare("u", "s", "Question A: what is 2+2?", idempotency_key="kA")
    cm.prepare("u", "s", "Question B: capital of France?", idempotency_key="kB")
    retried = cm.prepare("u", "s", "Question A: what is 2+2?", idempotency_key="kA")
    assert retried.user_seq == first.user_seq
    messages = retried.to_messages("openai")
    assert messages[-1] == {"role": "user", "content": "Question A: what is 2+2?"}
    assert "Question B" not in _texts(messages)
    assert cm.prepare("u", "s", None).to_messages("openai")[-1]["content"] == (
        "Question B: capital of France?")  # without text: the newest, as before


def test_erase_user_removes_only_that_user() -> None:
    cm = _manager()
    _chat(cm, 2, "u1", "a")
    _chat(cm, 2, "u1", "b")
    _chat(cm, 2, "u10", "a")
    assert cm.erase_user("u1") == 2
    assert cm.state("u1", "a").mode is None
    assert cm.store.count(SessionKey(user_id="u10", session_id="a")) == 4
    assert cm.erase_session("u10", "a")
    assert not cm.erase_session("u10", "a")



def test_a_worker_never_shows_an_erased_message_restarted_in_the_same_clock_tick(
        tmp_path: Path) -> None:
    # Two workers share a store whose clock gives the erased message and the new first
    # message the same time (a coarse or frozen clock): the new one must be shown.
    for store in (MemoryStore(clock=lambda: 1000.0),
                  SqliteStore(tmp_path / "tick.db", clock=lambda: 1000.0)):
        first, second = _manager(store), _manager(store)
        first.prepare("u", "s", "my card number is 4111-1111-1111-1111")
        second.erase_session("u", "s")
        second.prepare("u", "s", "hello, new conversation")
        shown = _texts(first.prepare("u", "s").to_messages("openai"))
        assert "4111" not in shown and "hello, new conversation" in shown
        store.close()


def test_one_key_for_a_turns_question_and_answer_stores_both_and_retries_store_once() -> None:
    cm = _manager()
    turn = "turn-0001"
    assert cm.prepare("u", "s", "What is 2+2?", idempotency_key=turn).user_seq == 1
    assert cm.record("u", "s", assistant="4", idempotency_key=turn) == [2]
    assert cm.record("u", "s", assistant="4", idempotency_key=turn) == [2]  # a retry
    assert cm.prepare("u", "s", "What is 2+2?", idempotency_key=turn).user_seq == 1
    long_key = "k" * 256  # the longest key a store takes is still a record's own key
    assert cm.record("u", "s", assistant="5", idempotency_key=long_key) == [3]
    assert cm.record("u", "s", assistant="5", idempotency_key=long_key) == [3]
    stored = [(m.seq, m.message["content"]) for m in cm.store.read(
        SessionKey(user_id="u", session_id="s"))]
    assert stored == [(1, "What is 2+2?"), (2, "4"), (3, "5")]
    with pytest.raises(InvalidInputError, match="idempotency_key"):
        cm.record("u", "s", assistant="6", idempotency_key="k" * 257)

def test_a_key_reused_for_another_message_is_refused_and_stores_nothing(store: Store) -> None:
    cm = _manager(store)
    assert cm.prepare("u", "s", "Transfer 100 EUR to Alice", idempotency_key="k1").user_seq == 1
    with pytest.raises(InvalidInputError, match="idempotency_key was used for other messages"):
        cm.prepare("u", "s", "Transfer 900 EUR to Bob", idempotency_key="k1")
    tool_call = {"id": "c1", "type": "function",
                 "function": {"name": "transfer", "arguments": '{"to": "Alice"}'}}
    assert cm.record("u", "s", assistant={"role": "assistant", "content": None,
                                          "tool_calls": [tool_call]},
                     tool_results=[{"role": "tool", "tool_call_id": "c1", "content": "ok"}],
                     idempotency_key="r1") == [2, 3]
    assert cm.record("u", "s", assistant={"role": "assistant", "content": None,
                                          "tool_calls": [tool_call]},
                     tool_results=[{"role": "tool", "tool_call_id": "c1", "content": "ok"}],
                     idempotency_key="r1") == [2, 3]  # a retry of the same write
    with pytest.raises(InvalidInputError, match="idempotency_key was used for other messages"):
        cm.record("u", "s", assistant="Something else entirely", idempotency_key="r1")
    assert cm.prepare("u", "s", "Transfer 100 EUR to Alice", idempotency_key="k1").user_seq == 1
    stored = [m.message["role"] for m in store.read(SessionKey(user_id="u", session_id="s"))]
    assert stored == ["user", "assistant", "tool"]


def test_retrieval_mode_reads_a_corpus_and_the_newer_policy_wins() -> None:
    pytest.importorskip("numpy", reason="the retrieval extra is not installed")
    from contextwright.retrieval import Retriever, SourceDocument
    from contextwright.sources.retrieval import RetrievalSource

    fixture = Path(__file__).parent / "fixtures" / "retrieval" / "refund_policy.json"
    retriever = Retriever()
    retriever.add([SourceDocument(**doc) for doc in json.loads(fixture.read_text("utf-8"))])
    cm = _manager(sources=[RetrievalSource(retriever)])
    ctx = cm.prepare("u", "s", "退款政策是几天内可以退货？")
    assert ctx.mode == RAG_ENHANCED
    text = _texts(ctx.to_messages("openai"))
    assert "15 天内" in text and "7 天内" not in text
    assert "退货政策.md" in text  # the chunk keeps its source label


# ----- isolation -----


def test_users_and_sessions_never_see_each_others_data(store: Store) -> None:
    cm = _manager(store)
    parties = [("alice", "s1"), ("alice", "s2"), ("bob", "s1"), ("alice1", "s1")]
    for user, session in parties:
        marker = f"{user}-{session}-secret"
        cm.prepare(user, session, f"先查库存再更新订单 {marker}-0001")
        _record_tool_round(cm, "lookup", {"who": marker}, {"code": f"{marker}-0002"},
                           user, session)
        cm.record(user, session, assistant=f"done for {marker}")
        _chat(cm, 8, user, session)
    for user, session in parties:
        marker = f"{user}-{session}-secret"
        ctx = cm.prepare(user, session, "summary please")
        text = json.dumps(ctx.to_messages("openai"), ensure_ascii=False)
        assert marker in text
        others = [f"{u}-{s}-secret" for u, s in parties if (u, s) != (user, session)]
        assert not any(other in text for other in others)
        state_text = json.dumps(cm.state(user, session).to_dict(), ensure_ascii=False)
        assert not any(other in state_text for other in others)


def test_concurrent_threads_keep_sessions_apart(tmp_path: Path) -> None:
    cm = ContextManager(store=SqliteStore(tmp_path / "s.db"), background=True)
    errors: list[BaseException] = []

    def converse(user: str) -> None:
        try:
            for i in range(15):
                text = cm.prepare(user, "s", f"{user} says message {i} code {user}-{i:04d}")
                assert f"{user}-{i:04d}" in _texts(text.to_messages("openai"))
                cm.record(user, "s", assistant=f"ack {user} {i}")
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=converse, args=(f"user{n}",)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cm.flush(30)
    cm.close()
    assert not errors
    for n in range(6):
        stored = cm.store.read(SessionKey(user_id=f"user{n}", session_id="s"))
        assert len(stored) == 30
        assert all(f"user{n}" in str(m.message["content"]) for m in stored)


class _StateReads(MemoryStore):
    """A memory store that counts state reads and writes."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = self.writes = 0

    def get_state(self, key: SessionKey) -> Any:
        self.reads += 1
        return super().get_state(key)

    def put_state(self, key: SessionKey, data: Any, **kwargs: Any) -> int:
        self.writes += 1
        return super().put_state(key, data, **kwargs)


def test_the_summary_update_after_a_record_reads_the_state_once() -> None:
    store = _StateReads()
    cm = ContextManager(store=store, background=False)
    reads = []
    for turn in range(12):  # records of whole rounds: each may make a summary due
        store.reads = 0
        cm.record("u", "s", messages=[
            {"role": "user", "content": f"Question {turn} about order A-{100 + turn}?"},
            {"role": "assistant", "content": f"Answer {turn}."}])
        reads.append(store.reads)
    # The record's own read, then the update's (made from the mode that state names); one
    # more when a summary is committed.
    assert reads.count(2) == 11 and max(reads) == 3
    assert cm.state("u", "s").summary_upto > 0
    cm.close()


def _prepare_record_loop(cm: ContextManager, turns: int,
                         between: Callable[[int], None] | None = None) -> list[int]:
    """``turns`` rounds of prepare then record; where the summary ends after each record."""
    ends = []
    for turn in range(turns):
        cm.prepare("u", "s", f"Question {turn} about order A-{100 + turn}?")
        if between is not None:
            between(turn)
        cm.record("u", "s", assistant=f"Answer {turn}.")
        ends.append(cm.state("u", "s").summary_upto)
    return ends


def test_a_record_after_a_prepare_that_found_no_summary_due_runs_no_update(
        monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[int] = []
    flow_of = SessionFlows._summary_flow

    def counted(self: SessionFlows, key: SessionKey) -> Any:
        runs.append(1)
        return flow_of(self, key)

    monkeypatch.setattr(SessionFlows, "_summary_flow", counted)
    skipping = _prepare_record_loop(ContextManager(background=False), 30)
    skipped = len(runs)
    runs.clear()
    monkeypatch.setattr(SessionFlows, "_summary_may_be_due", lambda *args: True)
    every = _prepare_record_loop(ContextManager(background=False), 30)
    assert len(runs) == 30
    assert skipping == every and every[-1] > 0  # summaries land where they always did
    assert skipped <= 30 // 3


def test_a_record_runs_the_update_when_the_session_moved_since_its_prepare(
        monkeypatch: pytest.MonkeyPatch) -> None:
    key = SessionKey(user_id="u", session_id="s")

    def loop() -> list[int]:
        cm = ContextManager(background=False)
        # Rounds stored between each prepare and its record by a writer that schedules no
        # update: the rounds the prepare read are not all the session's any more.
        return _prepare_record_loop(cm, 24, lambda turn: cm.store.append(key, [
            message for aside in range(2) for message in (
                {"role": "user", "content": f"Aside {turn}.{aside}."},
                {"role": "assistant", "content": f"Noted {turn}.{aside}."})]))

    checked = loop()
    monkeypatch.setattr(SessionFlows, "_summary_may_be_due", lambda *args: True)
    assert checked == loop() and checked[-1] > 0


def test_a_prepare_reads_the_state_once_and_still_keeps_the_fingerprint() -> None:
    store = _StateReads()
    cm = ContextManager(store=store, background=False)
    for turn in range(4):
        store.reads = store.writes = 0
        prepared = cm.prepare("u", "s", f"Question {turn} about order A-{100 + turn}?")
        assert store.reads == 1  # the fingerprint is written over the state already read
        assert store.writes >= 1
        cache = prepared.context.report.cache
        assert cache is not None and (turn == 0 or cache.previous)
        cm.record("u", "s", assistant=f"Answer {turn}.")
    state = store.get_state(SessionKey(user_id="u", session_id="s"))
    assert state is not None and state.data.get("cache")
    cm.close()


def test_the_session_language_follows_a_user_who_goes_on_in_another_one() -> None:
    # Opened with a Chinese greeting, then English: one message in another language keeps the
    # session's language, two in a row move it (summaries and labels follow the session's).
    cm = _manager()
    languages = []
    for text in ("你好你好", "What is the weather in Paris today?", "And in Berlin tomorrow?",
                 "谢谢！", "Thanks, and in Rome?"):
        cm.prepare("u", "s", text)
        cm.record("u", "s", assistant="...")
        languages.append(cm.state("u", "s").language)
    assert languages == ["zh", "zh", "en", "en", "en"]
    cm.close()
