"""Summaries racing an erase, tool results recorded apart reaching the tools zone, and the
summary shown next to the facts zone."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from contextwright.compress.summarize import ExtractiveSummarizer, Summary
from contextwright.manager import ContextManager
from contextwright.manager.handoff import record_turn_in_zones
from contextwright.modes.zones import PENDING_RESULT, ToolRecord, Zones, add_handoff, render_zone
from contextwright.session import MemoryStore, SqliteStore
from contextwright.session.state import SessionState
from contextwright.session.store import SessionKey

KEY = SessionKey(user_id="u", session_id="s")


def _manager(store: Any = None, **kwargs: Any) -> ContextManager:
    return ContextManager(store=store if store is not None else MemoryStore(),
                          background=False, **kwargs)


def _call(call_id: str, name: str = "stock") -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"id": call_id, "type": "function",
                                           "function": {"name": name, "arguments": "{}"}}]}


# ----- summaries ---------------------------------------------------------------------------


class _ErasingSummarizer:
    """Summarises, and meanwhile the user erases the session (a GDPR erase racing the job)."""

    def __init__(self) -> None:
        self.inner = ExtractiveSummarizer()
        self.manager: ContextManager | None = None

    def summarize(self, previous: Summary | None, messages: Sequence[Any], **kwargs: Any
                  ) -> Summary:
        summary = self.inner.summarize(previous, messages, **kwargs)
        assert self.manager is not None
        self.manager.erase_session("u", "s")
        return summary


def test_summary_finished_after_erase_does_not_resurrect_the_session(tmp_path: Path) -> None:
    """A summary job that finishes after the session was erased writes the erased messages'
    facts back into a fresh state document (and a summary_upto that hides the next session's
    first messages); expected: the erased session stays gone and the summary is not committed."""
    store = SqliteStore(tmp_path / "s.db")
    summarizer = _ErasingSummarizer()
    cm = _manager(store, summarizer=summarizer)
    summarizer.manager = cm
    for i in range(15):
        store.append(KEY, [{"role": "user", "content": f"my phone is 1380013800{i % 10}"},
                           {"role": "assistant", "content": "noted"}])
    cm.summarize_now("u", "s")
    assert store.get_state(KEY) is None, "erased session's summary was written back"
    # A new conversation in the same session id must be answerable.
    ctx = cm.prepare("u", "s", "hello")
    assert ctx.to_messages()[-1]["content"] == "hello"
    store.close()


def _fill(store: Any, rounds: int = 15) -> None:
    for i in range(rounds):
        store.append(KEY, [{"role": "user", "content": f"my phone is 1380013800{i % 10}"},
                           {"role": "assistant", "content": "noted"}])


class _MeanwhileSummarizer:
    """Summarises (or fails), running ``meanwhile`` while it works: a writer racing the job."""

    def __init__(self, meanwhile: Any, *, fail: bool = False) -> None:
        self.inner = ExtractiveSummarizer()
        self.meanwhile = meanwhile
        self.fail = fail

    def summarize(self, previous: Summary | None, messages: Sequence[Any], **kwargs: Any
                  ) -> Summary:
        summary = self.inner.summarize(previous, messages, **kwargs)
        self.meanwhile()
        if self.fail:
            raise RuntimeError("summariser down")
        return summary


def test_failed_summary_after_erase_does_not_resurrect_the_session() -> None:
    """The failure count is bookkeeping in the same state document: not written after an erase."""
    store = MemoryStore()
    cm = _manager(store, summarizer=_MeanwhileSummarizer(
        lambda: store.erase_session(KEY), fail=True))
    _fill(store)
    assert cm.summarize_now("u", "s") == "rejected"
    assert store.get_state(KEY) is None


def test_summary_finished_after_a_ttl_restart_is_not_committed() -> None:
    """The session expires while the job runs and starts afresh at seq 1 with its own state: the
    old summary (and its summary_upto past the new messages) stays out of it."""
    now = [1000.0]
    store = MemoryStore(ttl_seconds=60, clock=lambda: now[0])

    def restart() -> None:
        now[0] += 61
        cm.prepare("u", "s", "hello again")

    cm = _manager(store, summarizer=_MeanwhileSummarizer(restart))
    cm.prepare("u", "s", "my phone is 13800138000")  # the first session has a state record
    _fill(store)
    assert cm.summarize_now("u", "s") == "session_gone"
    state = cm.state("u", "s")
    assert state.summary is None and state.summary_upto == 0
    assert cm.prepare("u", "s", "and now?").to_messages()[-2]["content"] == "hello again"


def test_erase_between_the_check_and_the_write_is_undone() -> None:
    """With no state record there is no version to conflict on: an erase landing just before the
    write is refused by the write itself (it is conditioned on the session's epoch)."""

    class ErasingBeforePut(MemoryStore):
        def put_state(self, key: SessionKey, data: Any, *, expected_version: int | None,
                      epoch: str | None = None) -> int:
            if data.get("summary"):
                self.erase_session(key)
            return super().put_state(key, data, expected_version=expected_version, epoch=epoch)

    store = ErasingBeforePut()
    cm = _manager(store)
    _fill(store)
    assert cm.summarize_now("u", "s") == "session_gone"
    assert cm.state("u", "s") == SessionState()


def test_summary_still_commits_when_the_session_only_grew_meanwhile() -> None:
    """New messages appended while the job runs are the same session: the summary commits."""
    store = MemoryStore()
    cm = _manager(store, summarizer=_MeanwhileSummarizer(
        lambda: store.append(KEY, [{"role": "user", "content": "one more"}])))
    cm.prepare("u", "s", "my phone is 13800138000")
    _fill(store)
    assert cm.summarize_now("u", "s") == "committed"
    assert cm.state("u", "s").summary_upto > 0


# ----- record: what it accepts -------------------------------------------------------------


def test_tool_result_recorded_separately_reaches_the_tools_zone() -> None:
    """In structured mode a tool result recorded in a later ``record`` call than its call never
    reaches the tools zone, which shows ``→ …`` for that call forever; expected: the zone's
    record gets the result when it is recorded."""
    cm = _manager()
    ctx = cm.prepare("u", "s", "first check the stock of SKU-1, then call the supplier api")
    assert ctx.mode == "structured"
    cm.record("u", "s", assistant=_call("c1"))
    cm.record("u", "s", tool_results=[{"tool_call_id": "c1", "content": "qty 42 left"}])
    tools = cm.state("u", "s").zones.tools
    assert len(tools) == 1 and "42" in tools[0].result, tools


def _structured_settings() -> Any:
    return _manager().modes.settings("structured")


def _result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def test_tool_result_recorded_with_its_call_still_fills_the_record() -> None:
    """The usual case, one batch with the call and its result, is unchanged."""
    state = record_turn_in_zones(
        SessionState(), [{"role": "assistant", **_call("c1")}, _result("c1", "qty 42 left")],
        _structured_settings())
    assert state.zones.tools == (ToolRecord(name="stock", arguments="{}", result="qty 42 left",
                                            call_id="c1"),)


def test_result_for_a_call_that_left_the_zone_is_not_added() -> None:
    """The zone keeps its last ``tool_zone_keep`` calls: a late result for an older one is
    dropped, not appended, and a result never overwrites one already there."""
    settings = _structured_settings()
    state = SessionState()
    for index in range(settings.tool_zone_keep + 1):
        state = record_turn_in_zones(state, [{"role": "assistant", **_call(f"c{index}")}],
                                     settings)
    state = record_turn_in_zones(state, [_result("c0", "late")], settings)
    assert len(state.zones.tools) == settings.tool_zone_keep
    assert all(record.result == PENDING_RESULT for record in state.zones.tools)
    last = f"c{settings.tool_zone_keep}"
    state = record_turn_in_zones(state, [_result(last, "first")], settings)
    state = record_turn_in_zones(state, [_result(last, "second")], settings)
    assert state.zones.tools[-1].result == "first"


def test_reused_call_id_fills_the_newest_pending_call() -> None:
    """Some clients number calls per turn ("call_0" every time): the result answers the latest."""
    settings = _structured_settings()
    state = record_turn_in_zones(SessionState(), [{"role": "assistant", **_call("call_0")}],
                                 settings)
    state = record_turn_in_zones(state, [{"role": "assistant", **_call("call_0", "price")}],
                                 settings)
    state = record_turn_in_zones(state, [_result("call_0", "9.99")], settings)
    assert [(t.name, t.result) for t in state.zones.tools] == [
        ("stock", PENDING_RESULT), ("price", "9.99")]


def test_zone_stored_before_call_ids_still_reads() -> None:
    """State documents written by earlier versions have tool records without a call id: they
    load, render as before, are written back without an id, and no late result matches them."""
    old = {"tools": [{"name": "stock", "arguments": "{}", "result": PENDING_RESULT}]}
    zones = Zones.from_dict(old)
    assert zones.tools == (ToolRecord(name="stock", arguments="{}", result=PENDING_RESULT),)
    assert zones.to_dict()["tools"] == old["tools"]
    assert render_zone("tools", zones, "en") == "[Tools]\n- stock({}) → …"
    state = record_turn_in_zones(SessionState(zones=zones), [_result("", "x"), _result("c1", "y")],
                                 _structured_settings())
    assert state.zones == zones


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_call_id_survives_the_store(tmp_path: Path, backend: str) -> None:
    """The call id is kept in the stored state, so the result may come from another process."""
    store = MemoryStore() if backend == "memory" else SqliteStore(tmp_path / "s.db")
    _manager(store).prepare("u", "s", "first check the stock of SKU-1, then call the supplier api")
    _manager(store).record("u", "s", assistant=_call("c1"))
    _manager(store).record("u", "s", tool_results=[{"tool_call_id": "c1", "content": "qty 42"}])
    record = store.get_state(KEY)
    assert record is not None and record.data["zones"]["tools"] == [
        {"name": "stock", "arguments": "{}", "result": "qty 42", "call_id": "c1"}]
    store.close()


# ----- hand-offs ---------------------------------------------------------------------------


def test_the_facts_zone_shows_each_fact_once_after_a_hand_off() -> None:
    tools = [{"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {}}}} for name in ("check_stock", "update_order")]
    cm = _manager()
    cm.prepare("u", "s", "First check stock for SKU-77, then update order A-1001", tools=tools)
    for i, name in enumerate(("check_stock", "update_order")):
        cm.record("u", "s", assistant={**_call(f"c{i}", name)},
                  tool_results=[{"tool_call_id": f"c{i}", "content": '{"ok": true}'}])
        cm.prepare("u", "s", tools=tools)
    cm.record("u", "s", assistant="Done: stock checked and order A-1001 updated.")
    cm.prepare("u", "s", "写一首诗", tools=tools)  # the task is done: the mode lets go
    state = cm.state("u", "s")
    assert state.handoff is not None and "SKU-77" in state.handoff["facts"]  # kept for merges
    facts = render_zone("facts", state.zones, "en")
    assert "- SKU-77\n- A-1001" in facts and "Key facts" not in facts  # listed once, above
    assert "Original need: First check stock" in facts


def test_a_hand_off_with_nothing_new_leaves_no_stale_one() -> None:
    zones = Zones(facts=("SKU-77",), handoffs=("Original need: old",))
    assert add_handoff(zones, "").handoffs == ()
    assert add_handoff(zones, None).handoffs == ("Original need: old",)


# ----- the summary next to the facts zone --------------------------------------------------


def _fenced(ctx: Any, label: str) -> str:
    """The text of the session part fenced under ``label`` in a prepared context."""
    text = "\n".join(str(m["content"] or "") for m in ctx.to_messages("openai"))
    found = re.search(rf"<<data [0-9a-f]{{12}} {label}>>\n(.*?)\n<<end", text, re.DOTALL)
    assert found is not None, text
    return found.group(1)


def _key_facts(summary_text: str) -> list[str]:
    line = next((ln for ln in summary_text.splitlines() if ln.startswith("Key facts: ")), "")
    return line.removeprefix("Key facts: ").split("; ") if line else []


def test_the_summary_leaves_out_the_facts_the_facts_zone_lists() -> None:
    """A fact stated in structured mode is listed in the facts zone; once its round is
    summarised, the summary's key facts listed it again in the same build. Expected: the
    summary shows only the facts the zone does not, and still stores them all (later merges
    and their check need them)."""
    cm = _manager()
    cm.prepare("u", "s", "First check stock for SKU-77, then update order A-1001")
    for i in range(8):
        cm.record("u", "s", assistant=f"Working on it, step {i}.")
        cm.prepare("u", "s", f"Also look at order B-{2000 + i}, then report back")
    assert cm.summarize_now("u", "s") == "committed"
    ctx = cm.prepare("u", "s", "How is it going?")
    state = cm.state("u", "s")
    assert state.summary is not None and {"SKU-77", "A-1001"} <= set(state.summary["facts"])
    assert {"SKU-77", "A-1001"} <= set(state.zones.facts)
    facts_zone = _fenced(ctx, "facts")
    assert "- SKU-77\n- A-1001" in facts_zone
    shown = _key_facts(_fenced(ctx, "summary"))
    assert "B-2000" in shown and "SKU-77" not in shown and "A-1001" not in shown, shown


def test_the_summary_leaves_out_the_facts_of_the_zones_hand_off_line() -> None:
    """The hand-off line in the facts zone lists the facts of the mode left; when the summary
    later covers the same rounds it lists them no more (nor the zone's own facts)."""
    cm = _manager()
    cm.prepare("u", "s", "Please look at order B-1999 and tell me its status")
    for i in range(3):
        cm.record("u", "s", assistant=f"Working on it, step {i}.")
        cm.prepare("u", "s", f"Also look at order B-{2000 + i} and its status")
    cm.record("u", "s", assistant="Looking.")
    assert cm.prepare("u", "s", "First check stock for SKU-99, then update order A-1001"
                      ).mode == "structured"
    for i in range(8):
        cm.record("u", "s", assistant=f"Done {i}.")
        ctx = cm.prepare("u", "s", f"thanks {i}")
    state = cm.state("u", "s")
    assert state.summary is not None and "B-2001" in state.summary["facts"]
    assert "Key facts: B-1999; B-2000; B-2001; B-2002" in _fenced(ctx, "facts")
    summary = _fenced(ctx, "summary")
    assert summary.startswith("Original need: Please look at order B-1999")
    assert _key_facts(summary) == []
