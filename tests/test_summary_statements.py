"""What the user states reaches the summary: constraints, corrections, steps done, labels.

A standing constraint ("I'm allergic to peanuts", "我吃素") is kept in the user's words for the
whole conversation; a correction phrased any common way is recognised, and the value it replaces
is marked wherever the summary shows it; a step a hand-off carried as not done clears when it is
done; "still on time" opens nothing; the library's own labels quoted back are not kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from contextwright.compress.summarize import (
    _CHANGE_REQUEST,
    _CORRECTION,
    ExtractiveSummarizer,
    Summary,
    condense_for_handoff,
    fit_summary,
    verified,
)
from contextwright.core.items import Message, ToolCall
from contextwright.tokens import get_tokenizer
from fakes.openai_server import FakeOpenAIServer, text

TOKENIZER = get_tokenizer("o200k_base")


def user(content: str) -> Message:
    return Message(role="user", content=content)


def assistant(content: str, *calls: ToolCall) -> Message:
    return Message(role="assistant", content=content, tool_calls=calls)


def call(call_id: str, name: str, arguments: dict[str, Any]) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments, ensure_ascii=False))


def tool(call_id: str, name: str, content: str) -> Message:
    return Message(role="tool", content=content, tool_call_id=call_id, name=name)


def summarize(messages: Sequence[Message], previous: Summary | None = None, *,
              language: str = "auto", **cap: Any) -> Summary:
    return verified(ExtractiveSummarizer(), previous, messages, language=language, **cap)


def in_batches(messages: Sequence[Message], size: int = 4) -> Summary:
    """Merged a few messages at a time, as a running summary is."""
    summary: Summary | None = None
    for start in range(0, len(messages), size):
        summary = summarize(messages[start:start + size], summary)
    assert summary is not None
    return summary


# ----- constraints the user states ----------------------------------------------------------

MEAL_PLAN = {
    "en": [user("Hi, can you help me plan meals for next week?"),
           assistant("Of course! Any dietary restrictions?"),
           user("I'm severely allergic to peanuts, and I'm vegetarian."),
           assistant("Noted. Monday: lentil soup and a veggie stir fry."),
           *[m for day in ("Tuesday", "Wednesday", "Thursday", "Friday") for m in (
               user(f"What about {day}?"),
               assistant(f"For {day}: a chickpea curry and a green salad."))]],
    "zh": [user("你好，帮我规划下周的菜单吧"), assistant("好的！有什么忌口吗？"),
           user("我对花生严重过敏，而且我吃素"), assistant("记住了。周一：番茄炒蛋和清炒时蔬。"),
           *[m for day in ("周二", "周三", "周四", "周五") for m in (
               user(f"{day}呢？"), assistant(f"{day}：麻婆豆腐和凉拌黄瓜。"))]],
}


@pytest.mark.parametrize(("lang", "said"), [
    ("en", "I'm severely allergic to peanuts, and I'm vegetarian."),
    ("zh", "我对花生严重过敏，而且我吃素")])
def test_a_constraint_the_user_states_outlasts_its_round(lang: str, said: str) -> None:
    summary = in_batches(MEAL_PLAN[lang])
    assert summary.constraints == (said,)
    assert said in summary.render(lang)


@pytest.mark.parametrize(("lang", "label"), [("en", "User constraints"), ("zh", "用户约束")])
def test_constraints_are_shown_right_after_the_need(lang: str, label: str) -> None:
    lines = in_batches(MEAL_PLAN[lang]).render(lang).splitlines()
    assert lines[1].startswith(f"{label}: ")


@pytest.mark.parametrize(("said", "kept"), [
    ("I'm allergic to peanuts, what snack do you suggest?", "I'm allergic to peanuts"),
    ("Never book a red-eye for me. Which flights are there?", "Never book a red-eye for me."),
    ("我不吃香菜，推荐一家面馆吧？", "我不吃香菜"),
    ("Neither works, as I don't want to fly before 11am.",
     "Neither works, as I don't want to fly before 11am."),
    ("It's a bit over my budget.", "It's a bit over my budget."),
])
def test_a_constraint_inside_any_message_is_kept_in_the_users_words(said: str,
                                                                   kept: str) -> None:
    summary = summarize([user("Help me plan a trip to Lisbon."), assistant("Sure."),
                         user(said), assistant("OK.")])
    assert summary.constraints == (kept,)


@pytest.mark.parametrize("said", [
    "Suggest a quick snack for movie night tonight.", "今晚看电影，推荐个小零食吧",
    "I don't have my user id.", "I must have left it somewhere else.",
    "I'll make sure to find it first.", "能不能帮我订一下？"])
def test_a_request_or_an_aside_is_no_constraint(said: str) -> None:
    summary = summarize([user("Help me plan a trip to Lisbon."), assistant("Sure."),
                         user(said), assistant("OK.")])
    assert summary.constraints == ()


def test_a_constraint_the_need_holds_whole_is_not_repeated() -> None:
    summary = summarize([user("I'm vegan. Plan my meals for the week."), assistant("Sure.")])
    assert summary.need == "I'm vegan. Plan my meals for the week."
    assert summary.constraints == ()


def test_a_constraint_the_clipped_need_lost_is_kept() -> None:
    need = ("Can you help me plan meals for next week? We are a family of four and the kids "
            "will eat anything at all. Also I'm severely allergic to peanuts.")
    summary = summarize([user(need), assistant("Sure.")])
    assert "peanuts" not in summary.need
    assert summary.constraints == ("Also I'm severely allergic to peanuts.",)


@pytest.mark.parametrize(("reply", "note"), [
    ("Noted. Monday: lentil soup and a veggie stir fry.",
     "Monday: lentil soup and a veggie stir fry."),
    ("记住了。周一：番茄炒蛋和清炒时蔬。", "周一：番茄炒蛋和清炒时蔬。"),
    ("Got it! Your seat is 14C. Boarding starts at 10:40.",
     "Your seat is 14C. Boarding starts at 10:40."),
])
def test_a_note_is_what_the_answer_says_not_its_acknowledgement(reply: str, note: str) -> None:
    summary = summarize([user("Plan my week."), assistant("Any restrictions?"),
                         user("I like soup."), assistant(reply)])
    assert summary.notes[-1] == note


def test_a_hand_off_keeps_the_constraints() -> None:
    handed = condense_for_handoff(None, MEAL_PLAN["en"], tokenizer=TOKENIZER, max_tokens=200,
                                  language="en")
    assert "allergic to peanuts" in handed.render("en")


def test_under_a_cap_constraints_outlast_the_need_and_go_before_any_fact() -> None:
    summary = Summary(need="Plan meals for my family for the whole of next week, please, "
                           "with a shopping list for each day and the prices we can expect",
                      constraints=("I'm severely allergic to peanuts, and I'm vegetarian.",),
                      facts=("ORD-1001", "2025-06-13"), notes=("Monday: soup.",),
                      unresolved=("which shop?",))
    fitted = fit_summary(summary, 45, TOKENIZER)
    assert fitted.notes == () and fitted.unresolved == ()
    assert fitted.constraints == summary.constraints
    assert fitted.need.endswith("…")
    tighter = fit_summary(summary, 24, TOKENIZER)
    assert tighter.constraints == ()
    assert tighter.facts == summary.facts


def test_a_stored_summary_without_the_new_fields_still_loads() -> None:
    stored = {"need": "Find a flight", "facts": ["HAT123"], "unresolved": [], "corrected": [],
              "notes": [], "truncated_facts": 0, "unconfirmed": []}
    summary = Summary.from_dict(stored)
    assert summary.constraints == () and summary.superseded == ()
    both = Summary(need="n", constraints=("I'm vegan.",), facts=("7:30pm", "8:30pm"),
                   superseded=(("7:30pm", "8:30pm"),))
    assert Summary.from_dict(json.loads(json.dumps(both.to_dict()))) == both


# ----- corrections ----------------------------------------------------------------------------

@pytest.mark.parametrize("said", [
    "Make it 8:30pm instead.", "Sorry, typo: 8:30pm, not 7:30pm.", "不是7:30pm，是8:30pm",
    "换到周二吧", "I mean Tuesday", "Scratch that, use the other card.",
    "My email is wrong, use ann@example.com", "Let's do May 7 instead of May 6",
    "Switch it to Tuesday", "Oops, wrong number: 555-0199", "Tuesday, not Monday",
    "不是5月7日，是5月8日", "我打错了，是8:30pm"])
def test_common_correction_phrasings_are_recognised(said: str) -> None:
    from contextwright.compress.summarize import is_correction

    assert is_correction(said)
    assert _CORRECTION.search(said) or _CHANGE_REQUEST.search(said)


@pytest.mark.parametrize("said", [
    "Thanks, not sure yet", "What's wrong with my order?", "I mean, it's fine",
    "Can you make it to the airport?", "ok, not now", "Please book a table for 4."])
def test_what_corrects_nothing_is_no_correction(said: str) -> None:
    from contextwright.compress.summarize import is_correction

    assert not is_correction(said)


BOOKING = [user("Please book a table for 4 at Nopa on 2025-06-13 at 7:30pm."),
           assistant("Booked: Nopa, 4 people, 2025-06-13 at 7:30pm.")]


@pytest.mark.parametrize("correction", [
    "Make it 8:30pm instead.", "Sorry, typo: 8:30pm, not 7:30pm.", "不是7:30pm，是8:30pm",
    "Actually, make it 8:30pm."])
def test_a_correction_marks_the_value_it_replaces(correction: str) -> None:
    summary = in_batches([*BOOKING, user(correction),
                          assistant("Updated: Nopa, 4 people, 2025-06-13 at 8:30pm.")], size=3)
    assert summary.superseded == (("7:30pm", "8:30pm"),)
    assert summary.facts == ("2025-06-13", "7:30pm", "8:30pm")  # exact, as said
    shown = summary.render("en")
    assert "Original need: Please book a table for 4 at Nopa on 2025-06-13 at 7:30pm " \
           "(now 8:30pm)." in shown
    assert "Key facts: 2025-06-13; 7:30pm (superseded by 8:30pm); 8:30pm" in shown
    assert summary.corrected[0].startswith(correction)
    assert "（已由 8:30pm 取代）" in summary.render("zh")


def test_a_hand_off_says_which_value_holds() -> None:
    handed = condense_for_handoff(None, [*BOOKING, user("Make it 8:30pm instead."),
                                         assistant("Updated.")],
                                  tokenizer=TOKENIZER, max_tokens=200, language="en")
    assert "7:30pm (now 8:30pm)" in handed.render("en")


def test_a_corrected_order_number_leaves_the_card_number_alone() -> None:
    summary = summarize([user("First cancel my order 20241001, then refund it to my card "
                              "ending 4242."), assistant("On it."),
                         user("Sorry, I mistyped. The order number is 20241010.")])
    assert summary.superseded == (("20241001", "20241010"),)


def test_an_ambiguous_correction_marks_nothing() -> None:
    summary = summarize([user("Book dinner at 7:30pm and a taxi at 6:45pm."),
                         assistant("Dinner at 7:30pm, taxi at 6:45pm."),
                         user("Make it 9pm instead.")])
    assert summary.superseded == ()
    assert "superseded" not in summary.render("en")


def test_a_value_corrected_back_holds_again() -> None:
    summary = in_batches([*BOOKING, user("Make it 8:30pm instead."), assistant("Updated."),
                          user("Actually, 7:30pm after all, not 8:30pm."),
                          assistant("Back to 7:30pm.")], size=3)
    assert summary.superseded == (("8:30pm", "7:30pm"),)
    assert "7:30pm (superseded" not in summary.render("en")


def test_the_first_message_corrects_nothing() -> None:
    summary = summarize([user("Book me the 9am flight instead of the 7am one."),
                         assistant("Booked the 9am flight.")])
    assert summary.corrected == ()


# ----- planned steps carried as not done --------------------------------------------------------

STEP = Summary(need="First back up the database, then email the team the backup id.",
               unresolved=("not done: email the team the backup id",))


def test_a_step_carried_as_not_done_clears_when_a_tool_call_does_it() -> None:
    summary = summarize([assistant("", call("c1", "send_email",
                                            {"to": "team", "body": "backup BK-7781 done"})),
                         tool("c1", "send_email", '{"status": "sent"}')], STEP)
    assert summary.unresolved == ()


def test_a_failed_call_leaves_the_step_open() -> None:
    summary = summarize([assistant("", call("c1", "send_email", {"to": "team"})),
                         tool("c1", "send_email", '{"error": "smtp down"}')], STEP)
    assert "not done: email the team the backup id" in summary.unresolved


def test_a_call_of_another_action_leaves_the_step_open() -> None:
    hotel = Summary(need="Find flights, then book a hotel near Shinjuku.",
                    unresolved=("not done: book a hotel near Shinjuku",))
    summary = summarize([assistant("", call("c1", "search_hotels", {"area": "Shinjuku"})),
                         tool("c1", "search_hotels", '{"hotels": ["Keio Plaza"]}')], hotel)
    assert summary.unresolved == ("not done: book a hotel near Shinjuku",)


@pytest.mark.parametrize(("previous", "said"), [
    (STEP, "Done: I emailed the team that backup BK-7781 is complete."),
    (Summary(need="先查高铁，再订一家外滩附近的酒店", unresolved=("未完成：订一家外滩附近的酒店",)),
     "已为您订好外滩附近的酒店，入住5月8日。"),
])
def test_a_step_clears_when_the_assistant_says_it_is_done(previous: Summary, said: str) -> None:
    assert summarize([assistant(said)], previous).unresolved == ()


@pytest.mark.parametrize("said", [
    "Backup BK-7781 is done. Shall I email the team?", "I'll email the team the backup id now.",
    "I couldn't email the team: the backup id is missing."])
def test_a_question_a_promise_or_a_failure_leaves_the_step_open(said: str) -> None:
    summary = summarize([assistant(said)], STEP)
    assert "not done: email the team the backup id" in summary.unresolved


# ----- what is open, and what is the library's own --------------------------------------------

def test_a_positive_still_or_outstanding_opens_nothing() -> None:
    summary = summarize([user("Is my flight UA837 on time?"),
                         assistant("Yes, UA837 is still on time and departs at 11:05."),
                         user("great, thanks"),
                         assistant("You're welcome! Your feedback was outstanding."),
                         user("航班还准点吗？"), assistant("航班仍然准点。")])
    assert summary.unresolved == ()


@pytest.mark.parametrize("said", [
    "My refund still hasn't arrived.", "The app is still broken.",
    "There is an outstanding balance of $40.", "退款仍然没有到账"])
def test_a_negative_still_or_outstanding_stays_open(said: str) -> None:
    summary = summarize([user("Help with my account."), assistant("Sure."), user(said)])
    assert summary.unresolved == (said,)


ECHO = ("Here is what I have on file:\n[Facts]\n- 20241001\n- 4242\n"
        "Earlier: Original need: First cancel my order 20241001\n"
        "Unresolved: not done: refund it\n[任务区]\n目标: 退款")


@pytest.fixture
def echoed() -> list[Message]:
    return [user("What do you remember about my request?"), assistant(ECHO)]


def test_zone_labels_the_assistant_quotes_are_not_kept(echoed: list[Message]) -> None:
    for summary in (summarize(echoed),
                    condense_for_handoff(None, echoed, tokenizer=TOKENIZER, language="en")):
        said = " ".join((*summary.unresolved, *summary.notes))
        for label in ("[Facts]", "Earlier:", "Original need:", "Unresolved:", "[任务区]", "目标:"):
            assert label not in said


def test_a_users_words_that_look_like_labels_are_kept() -> None:
    need = "Notes: I fly on 2025-06-13. Earlier: you said the gate is B12. Next: hotel?"
    summary = summarize([user(need), assistant("Noted.")])
    assert summary.need == need


def test_every_zone_label_is_stripped() -> None:
    from contextwright.compress.summarize import without_library_labels
    from contextwright.modes.zones import ZONE_LABELS

    for labels in ZONE_LABELS.values():
        for name, label in labels.items():
            quoted = f"{label}\n- x" if label.startswith("[") else f"{label}: x"
            assert without_library_labels(quoted).strip() in ("- x", "x"), name


# ----- the LLM summariser keeps the same by rule ------------------------------------------------

@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def test_the_llm_summariser_keeps_constraints_and_marks_by_rule(
        server: FakeOpenAIServer) -> None:
    from contextwright.compress.summary_llm import LLMSummarizer
    from contextwright.llm import OpenAIChatClient

    server.script(text(json.dumps({
        "need": "Original need: Book a table at Nopa", "facts": ["2025-06-13", "7:30pm", "8:30pm"],
        "unresolved": [], "corrected": [], "notes": ["[Facts] booked"]})))
    messages = [*BOOKING, user("I'm allergic to shellfish. Make it 8:30pm instead.")]
    with OpenAIChatClient(server.base_url, max_retries=0, timeout=5) as client:
        summary = verified(LLMSummarizer(client, model="m"), None, messages, language="en")
    assert summary.constraints == ("I'm allergic to shellfish.",)
    assert summary.superseded == (("7:30pm", "8:30pm"),)
    assert summary.need == "Book a table at Nopa"
    assert summary.notes == ("booked",)
    sent = json.loads(server.requests[0].body["messages"][1]["content"])
    assert set(sent["previous_summary"]) == {"need", "facts", "unresolved", "corrected",
                                             "notes", "truncated_facts"}
