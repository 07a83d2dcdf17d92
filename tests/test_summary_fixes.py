"""Summaries and hand-offs under a cap: a fact too long to fit is left out and counted."""

from __future__ import annotations

import json

import pytest

from contextwright import ContextManager
from contextwright.compress.facts import missing_facts
from contextwright.compress.summarize import (
    ExtractiveSummarizer,
    Summary,
    condense_for_handoff,
    fit_summary,
    verified,
)
from contextwright.compress.summary_llm import LLMSummarizer, parse_summary_reply
from contextwright.core.items import Message
from contextwright.errors import SummaryError
from contextwright.manager import handoff
from contextwright.tokens import get_tokenizer

TOKENIZER = get_tokenizer("o200k_base")
LINK = "https://files.example.com/export.csv?X-Amz-Signature=" + "ab12cd34ef56" * 80


def user(content: str) -> Message:
    return Message(role="user", content=content)


def assistant(content: str) -> Message:
    return Message(role="assistant", content=content)


def test_a_fact_longer_than_the_cap_is_left_out_and_counted() -> None:
    summary = Summary(need="refund", facts=(LINK,))
    fitted = fit_summary(summary, 60, TOKENIZER)
    assert fitted.facts == ()
    assert fitted.truncated_facts == 1


def test_a_too_long_fact_goes_before_the_facts_that_fit() -> None:
    summary = Summary(need="refund", facts=("ORD-5512", LINK, "ann@example.com"))
    fitted = fit_summary(summary, 60, TOKENIZER, confirmed=[LINK])
    assert fitted.facts == ("ORD-5512", "ann@example.com")
    assert fitted.truncated_facts == 1


def test_a_hand_off_condenses_a_window_holding_a_long_link() -> None:
    window = [user(f"Here is the download link I got: {LINK}"), assistant("Thanks, I see it.")]
    summary = condense_for_handoff(None, window, tokenizer=TOKENIZER, max_tokens=200)
    assert summary.truncated_facts >= 1
    assert all(LINK not in fact for fact in summary.facts)


def test_a_mode_switch_after_a_long_link_does_not_fail_prepare() -> None:
    manager = ContextManager(background=False)
    manager.prepare("u", "s", f"Here is the download link I got: {LINK}")
    manager.record("u", "s", assistant="Thanks, I see the link.")
    prepared = manager.prepare("u", "s", "Now I want a refund please")
    assert prepared.mode != "sliding_window"


def test_the_running_summary_commits_past_a_fact_longer_than_its_cap() -> None:
    summary = ExtractiveSummarizer().summarize(
        None, [user(f"Here is the download link I got: {LINK}"), assistant("Thanks.")],
        language="en", max_tokens=120, tokenizer=TOKENIZER)
    assert summary.truncated_facts >= 1


def test_a_hand_off_whose_summary_fails_still_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*_: object, **__: object) -> Summary:
        raise SummaryError("max_tokens is too small to hold the summary")

    monkeypatch.setattr(handoff, "condense_for_handoff", failing)
    manager = ContextManager(background=False)
    manager.prepare("u", "s", "Here is my account number 44718299 for you")
    manager.record("u", "s", assistant="Thanks, I see the note.")
    prepared = manager.prepare("u", "s", "Now I want a refund please")
    assert prepared.mode != "sliding_window"


@pytest.mark.parametrize(("shown", "fact"), [
    ("Key facts: $120", "$12"),
    ("Key facts: ORD-10012", "ORD-1001"),
    ("total 1,299.50", "1,299"),
    ("card 44171", "4417"),
    ("weight 21,299 kg", "1,299"),
])
def test_a_fact_inside_a_different_value_is_missing(shown: str, fact: str) -> None:
    assert missing_facts(shown, [fact]) == (fact,)


@pytest.mark.parametrize(("shown", "fact"), [
    ("Key facts: ¥1,299.00", "1,299"),
    ("Order ORD-1001, shipped.", "ORD-1001"),
    ("订单号20241001已发货", "20241001"),
    ("US$12 refund", "$12"),
    ("card ending 4417.", "4417"),
    ("地址 350 5th Ave", "350 5th Ave"),
])
def test_a_fact_shown_as_itself_is_found(shown: str, fact: str) -> None:
    assert missing_facts(shown, [fact]) == ()


def test_a_summary_that_changes_an_amount_and_an_order_is_rejected() -> None:
    messages = [user("Refund $12 for order ORD-1001 please")]

    class Changing:
        def summarize(self, previous: Summary | None, messages: object, **_: object) -> Summary:
            return Summary(need="refund", facts=("$120", "ORD-10012"))

    with pytest.raises(SummaryError):
        verified(Changing(), None, messages, language="en")


class _NeedWithANumber:
    """A model that leaves out the card ending and writes a long need ending in a number."""

    def complete(self, messages: object, **_: object) -> str:
        return json.dumps({"need": "Cancel a booking and get a refund "
                           + "as quickly as possible " * 6 + "reference 99887766",
                           "facts": ["ZQ7781", "ann@example.com"], "unresolved": [],
                           "corrected": [], "notes": []})


def test_a_capped_summary_cannot_pay_for_a_lost_fact_with_a_number_cut_from_its_need() -> None:
    messages = [user("Please cancel booking ZQ7781 and refund card ending 4417 to "
                     "ann@example.com."),
                assistant("Cancelled ZQ7781; refund to card 4417, receipt sent to "
                          "ann@example.com.")]
    with pytest.raises(SummaryError):
        verified(LLMSummarizer(_NeedWithANumber(), model="m"), None, messages,
                 language="en", max_tokens=30, tokenizer=TOKENIZER)


def test_a_fact_the_cap_dropped_is_still_excused() -> None:
    messages = [user(f"Order ORD-{n:04d} is one of mine") for n in range(1000, 1030)]
    summary = verified(ExtractiveSummarizer(), None, messages, language="en",
                       max_tokens=60, tokenizer=TOKENIZER)
    assert summary.truncated_facts > 0


_REPLY = '{"need": "refund", "facts": ["ORD-1001"], "unresolved": [], "corrected": [], "notes": []}'


@pytest.mark.parametrize("reply", [
    f"```JSON\n{_REPLY}\n```", f"```json\n{_REPLY}```", f"```{_REPLY}```", f"```json {_REPLY} ```",
    f"```json\r\n{_REPLY}\r\n```",
])
def test_a_summary_reply_in_a_common_fence_is_read(reply: str) -> None:
    assert parse_summary_reply(reply).facts == ("ORD-1001",)


def test_text_outside_the_fence_is_still_refused() -> None:
    with pytest.raises(SummaryError):
        parse_summary_reply(f"Here it is:\n```json\n{_REPLY}\n```")


@pytest.mark.parametrize("need, fact", [
    ("I need help with a refund for the wireless headphones I bought last month and the order "
     "number on my receipt is 4471829930 thanks", "4471829930"),
    ("My parcel never came, the tracking page https://shop.example.com/orders/track?id=ORD-88123"
     "&token=Zk29QpLm77Zk29QpLm77 shows nothing at all",
     "https://shop.example.com/orders/track?id=ORD-88123&token=Zk29QpLm77Zk29QpLm77"),
])
def test_a_clipped_need_never_shows_part_of_a_value(need: str, fact: str) -> None:
    """The need is clipped between words: a value is shown whole or not at all."""
    from contextwright.compress.facts import extract_facts
    from contextwright.compress.summarize import ExtractiveSummarizer, verified
    from contextwright.core.items import Message

    summary = verified(ExtractiveSummarizer(), None, [
        Message(role="user", content=need),
        Message(role="assistant", content="Sure, I can help with that.")], language="en")
    assert summary.need.endswith("…")
    assert all(found == fact for found in extract_facts(summary.need)), summary.need
    assert fact in summary.facts


def test_an_unrelated_actually_retracts_no_earlier_conclusion() -> None:
    from contextwright.compress.summarize import ExtractiveSummarizer, verified

    summary = verified(ExtractiveSummarizer(), None, [
        Message(role="user", content="What is the status of order ORD-7788?"),
        Message(role="assistant", content="Order ORD-7788 was delivered on 2024-05-02."),
        Message(role="user", content="Actually my email is ann@example.com, please update it."),
        Message(role="assistant", content="Email updated to ann@example.com.")], language="en")
    assert "Order ORD-7788 was delivered on 2024-05-02." in summary.notes
    assert not any("was Order ORD-7788" in line for line in summary.corrected)


def _tool_turn(call_id: str, flights: str) -> list[Message]:
    from contextwright.core.items import ToolCall
    return [Message(role="assistant", content="",
                    tool_calls=(ToolCall(id=call_id, name="search_flights",
                                         arguments='{"destination": "SEA"}'),)),
            Message(role="tool", content=flights, tool_call_id=call_id, name="search_flights")]


def test_what_the_user_said_merges_ago_outlasts_what_a_tool_printed_since() -> None:
    """The user id was said in the first merge; the second brings forty flights a search
    printed. Under the cap the printed ones go first, whichever merge a fact came from."""
    first = [user("Find me a flight to Seattle please."), assistant("Sure. Your user id?"),
             user("It is nora_vance_5172, and my card is card_7741.")]
    one = ExtractiveSummarizer().summarize(None, first, language="en")
    flights = json.dumps([{"flight": f"HAT{n:03d}", "price": n + 100} for n in range(40)])
    two = ExtractiveSummarizer().summarize(one, _tool_turn("s1", flights), language="en",
                                           max_tokens=70, tokenizer=TOKENIZER)
    assert two.truncated_facts > 0
    assert {"nora_vance_5172", "card_7741"} <= set(two.facts)
    assert set(two.unconfirmed) <= set(two.facts) - {"nora_vance_5172", "card_7741"}
    # the mark survives the store
    assert Summary.from_dict(json.loads(json.dumps(two.to_dict()))) == two


def test_a_stored_summary_without_the_mark_counts_every_fact_as_confirmed() -> None:
    stored = Summary.from_dict({"need": "Find a flight", "facts": ["nora_vance_5172"]})
    flights = json.dumps([{"flight": f"HAT{n:03d}", "price": n + 100} for n in range(40)])
    two = ExtractiveSummarizer().summarize(stored, _tool_turn("s1", flights), language="en",
                                           max_tokens=60, tokenizer=TOKENIZER)
    assert "nora_vance_5172" in two.facts


def test_the_llm_summariser_is_not_shown_the_mark() -> None:
    from contextwright.compress.summary_llm import summary_request
    previous = Summary(need="x", facts=("HAT001",), unconfirmed=("HAT001",))
    payload = json.loads(summary_request(previous, [user("hi")], "en")[1]["content"])
    assert "unconfirmed" not in payload["previous_summary"]


def test_a_correction_outlasts_the_tail_of_the_need() -> None:
    """Both flights stay listed; without the correction line nothing says HAT123 is stale."""
    need = ("Please book me the cheapest morning flight from Shanghai to Seattle next week, "
            "window seat, vegetarian meal, and send the itinerary to my work address when done")
    summary = Summary(need=need, facts=("HAT123", "HAT124"),
                      corrected=("The flight is HAT124 (corrected: was HAT123)",))
    assert TOKENIZER.count(summary.render("en")) > 60
    fitted = fit_summary(summary, 60, TOKENIZER)
    assert fitted.corrected == summary.corrected
    assert fitted.facts == summary.facts
    assert fitted.need.endswith("…") and need.startswith(fitted.need[:-1])


def test_corrections_still_go_before_the_need_falls_under_a_quarter_of_the_cap() -> None:
    need = "Please book the cheapest morning flight from Shanghai to Seattle next week"
    corrections = tuple(f"Seat {n}A (corrected: was {n}C)" for n in range(10, 40))
    summary = Summary(need=need, facts=("HAT124",), corrected=corrections)
    fitted = fit_summary(summary, 80, TOKENIZER)
    assert TOKENIZER.count(fitted.render("zh")) <= 80
    assert 0 < len(fitted.corrected) < len(corrections)
    assert fitted.corrected == corrections[-len(fitted.corrected):]  # the newest stay
    assert TOKENIZER.count(fitted.need) >= 10
