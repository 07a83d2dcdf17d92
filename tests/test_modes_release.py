"""When a structured task is done, when it goes on, and what a mode hands over when it lets go.

A task is done when its steps are: not when one tool is called twice for one step, not when the
assistant asks the user something, and it is done by an answer when its last step asks for one
("then tell me …"). A reply inside a running task keeps the task; a put-off or a story is no
plan; and a value the user corrects is shown as replaced, never as one to act on.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextwright.manager import ContextManager
from contextwright.modes import RAG_ENHANCED, SLIDING_WINDOW, STRUCTURED, Router, Zones
from contextwright.modes.zones import plan_steps, render_zone
from contextwright.session import MemoryStore

WEATHER_PLAN = "First check the weather in Paris and London, then email my boss the forecast."
ORDER_PLAN = "First cancel my order 20241001, then refund it to my card ending 4242."


class _Chat:
    """One session driven like an agent loop: say, call tools, answer."""

    def __init__(self) -> None:
        self.cm = ContextManager(store=MemoryStore(), background=False)
        self.calls = 0

    def say(self, text: str) -> Any:
        return self.cm.prepare("u", "s", text)

    def call(self, name: str, result: str, **arguments: str) -> None:
        self.calls += 1
        call_id = f"call_{self.calls}"
        self.cm.record("u", "s", assistant={
            "role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {
                "name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}]},
            tool_results=[{"tool_call_id": call_id, "content": result}])

    def answer(self, text: str) -> None:
        self.cm.record("u", "s", assistant=text)

    @property
    def state(self) -> Any:
        return self.cm.state("u", "s")


# ----- a step done by two calls of one tool ------------------------------------------------

def test_a_step_done_by_two_calls_of_one_tool_leaves_the_next_step_to_do() -> None:
    chat = _Chat()
    assert chat.say(WEATHER_PLAN).mode == STRUCTURED
    chat.call("get_weather", '{"temp": "18C"}', city="Paris")
    chat.call("get_weather", '{"temp": "12C"}', city="London")
    task = chat.state.zones.task
    assert task.done == ("check the weather in Paris and London (get_weather)",)
    assert task.next == ("email my boss the forecast",)
    chat.answer("Paris is 18C and London 12C. Shall I send the email to your boss now?")
    assert not chat.state.zones.task.closed
    assert chat.say("yes please").mode == STRUCTURED
    chat.call("send_email", '{"sent": true}', to="boss")
    chat.answer("Sent the forecast to your boss.")
    assert chat.state.zones.task.closed


def test_a_search_redone_after_a_correction_is_still_the_search_step() -> None:
    chat = _Chat()
    chat.say("先查5月7日北京到上海的高铁，再订一家外滩附近的酒店")
    chat.call("search_trains", '{"no": "G1"}', date="5月7日")
    chat.answer("5月7日有G1（07:00），要订吗？")
    chat.say("不对，日期改成5月8日")
    chat.call("search_trains", '{"no": "G5"}', date="5月8日")
    chat.answer("5月8日有G5（09:00），¥553。")
    task = chat.state.zones.task
    assert task.next == ("订一家外滩附近的酒店",) and not task.closed
    assert chat.say("那就订G5吧").mode == STRUCTURED


def test_the_same_tool_takes_the_next_step_when_that_step_names_its_arguments() -> None:
    chat = _Chat()
    chat.say("First get the weather in Paris, then get the weather in London.")
    chat.call("get_weather", '{"temp": "18C"}', city="Paris")
    chat.call("get_weather", '{"temp": "12C"}', city="London")
    assert chat.state.zones.task.next == ()


def test_a_step_never_run_is_handed_over_when_the_mode_lets_go() -> None:
    chat = _Chat()
    chat.say(WEATHER_PLAN)
    chat.call("get_weather", '{"temp": "18C"}', city="Paris")
    chat.call("get_weather", '{"temp": "12C"}', city="London")
    chat.answer("Paris is 18C and London 12C. Shall I email your boss?")
    for text in ("hmm", "nice weather", "tell me a joke", "ha", "write a poem"):
        chat.say(text)
        chat.answer("Sure.")
    state = chat.state
    assert state.mode == SLIDING_WINDOW
    (handoff,) = state.zones.handoffs
    assert "not done: email my boss the forecast" in handoff


# ----- a question back to the user ---------------------------------------------------------

def test_a_question_back_to_the_user_does_not_finish_the_task() -> None:
    chat = _Chat()
    chat.say("Please do this step by step: find flights from SFO to Tokyo on 2025-05-06")
    chat.call("search_flights", '{"flights": [{"id": "JL1", "price": "$980"}]}', dest="NRT")
    chat.answer("I found JL1 at $980. Shall I book it?")
    assert not chat.state.zones.task.closed
    assert chat.say("yes").mode == STRUCTURED  # not released as "task done"


@pytest.mark.parametrize("answer", ["Booked JL1. Anything else I can help with?",
                                    "已订好JL1。还有什么需要帮忙的吗？"])
def test_an_offer_of_more_help_asks_nothing_about_the_task(answer: str) -> None:
    chat = _Chat()
    chat.say("Please do this step by step: book flight JL1 on 2025-05-06")
    chat.call("book_flight", '{"status": "confirmed"}', flight="JL1")
    chat.answer(answer)
    assert chat.state.zones.task.closed


# ----- a step the assistant does in text ---------------------------------------------------

@pytest.mark.parametrize(("plan", "answer"), [
    ("First look up the weather in Paris for 2025-05-06, then tell me whether I need an "
     "umbrella.", "Rain is forecast with an 80% chance: yes, bring an umbrella."),
    ("先查一下上海明天的天气，然后总结一下要不要带伞", "明天上海有雨，降水概率80%，建议带伞。"),
])
def test_a_step_the_answer_does_in_words_is_done_by_it(plan: str, answer: str) -> None:
    chat = _Chat()
    chat.say(plan)
    chat.call("get_weather", '{"forecast": "rain", "chance": "80%"}', city="Paris")
    chat.answer(answer)
    task = chat.state.zones.task
    assert task.next == () and task.closed
    assert chat.say("thanks!").mode == SLIDING_WINDOW
    assert "not done" not in " ".join(chat.state.zones.handoffs)
    assert "未完成" not in " ".join(chat.state.zones.handoffs)


def test_a_step_that_needs_a_tool_is_not_done_by_an_answer() -> None:
    chat = _Chat()
    chat.say("First search flights to Tokyo, then find a hotel near Shinjuku.")
    chat.call("search_flights", '{"flights": ["JL1"]}', dest="NRT")
    chat.answer("JL1 leaves at 13:30.")
    assert chat.state.zones.task.next == ("find a hotel near Shinjuku",)


# ----- the turn limit and a task that advances every turn ----------------------------------

def test_a_task_that_advances_with_every_yes_is_not_released_by_the_turn_limit() -> None:
    chat = _Chat()
    chat.say("First back up the database, then run the migration, then restart the API, "
             "then run the smoke tests, then email the team.")
    chat.answer("Ready to back up db-prod-01. Proceed?")
    tools = ["backup_db", "migrate", "restart_api", "smoke_tests", "send_email"]
    for text, tool in zip(["yes", "ok go ahead", "yes, continue", "sure, next", "yes"], tools,
                          strict=True):
        assert chat.say(text).mode == STRUCTURED
        chat.call(tool, '{"ok": true}', step=tool)
        chat.answer(f"{tool} done. Shall I continue?")
    assert chat.state.zones.task.next == ()


# ----- a reply inside a running task -------------------------------------------------------

def test_a_correction_that_names_an_order_keeps_the_running_task() -> None:
    chat = _Chat()
    chat.say(ORDER_PLAN)
    chat.answer("Before I cancel: can you confirm the order number?")
    kept = chat.say("Sorry, I mistyped. The order number is actually 20241010, not 20241001.")
    assert (kept.mode, kept.route.basis, kept.route.trigger) == (STRUCTURED, "kept", "open task")
    chat.call("update_order", '{"status": "cancelled"}', order_id="20241010", action="cancel")
    chat.answer("Order 20241010 is cancelled. Shall I refund it now?")
    assert chat.say("OK, go ahead and refund it now").mode == STRUCTURED
    # a new request of its own (another order) is routed as before
    assert chat.say("Now look up the refund policy for order 55102").mode == RAG_ENHANCED


def test_only_a_message_about_the_open_task_holds_its_mode() -> None:
    router, task = Router(), "First cancel my order 20241001, then refund it"
    held = router.route("go ahead and refund it", STRUCTURED, open_task=task)
    assert (held.mode, held.basis) == (STRUCTURED, "kept")
    assert router.route("Where is order 55102?", STRUCTURED, open_task=task).mode == RAG_ENHANCED
    assert router.route("go ahead and refund it", STRUCTURED).mode == RAG_ENHANCED  # no task
    # the hold is a kept turn: keep_limit bounds it like any other
    limit = router.config.keep_limit
    assert router.route("go ahead and refund it", STRUCTURED, open_task=task,
                        kept_turns=limit).mode == RAG_ENHANCED


def test_a_correction_that_switches_the_mode_is_in_the_hand_off() -> None:
    chat = _Chat()
    chat.say("Hi, my parcel 20241001 has not arrived.")
    chat.answer("Sorry to hear that. What would you like me to do?")
    switched = chat.say("Actually it is 20241010, not 20241001. Check its shipping status.")
    assert switched.mode == RAG_ENHANCED and switched.switch is not None
    (handoff,) = chat.state.zones.handoffs
    assert "20241010" in handoff
    poem = _Chat()
    poem.say("Hi, my parcel 20241001 has not arrived.")
    poem.answer("Sorry to hear that.")
    poem.say("What is your shipping policy?")  # a new request is not what the old mode hands over
    assert "policy" not in " ".join(poem.state.zones.handoffs)


# ----- put-offs and stories are no plans ---------------------------------------------------

PUT_OFFS = ["我先想想，明天再来问你", "我先去开个会，回来再找你", "先等等吧，我再考虑一下",
            "你先别急，再等等", "我先吃个饭，晚点再来", "好的我先试试，不行再来找你",
            "At first I thought it was broken, then I realized it was fine.",
            "I first met her in Paris, then we moved to Berlin.",
            "Let me try it first, then I'll get back to you.",
            "I'll think about it first and then decide tomorrow."]


@pytest.mark.parametrize("text", PUT_OFFS)
def test_a_put_off_or_a_story_is_no_plan(text: str) -> None:
    assert Router().route(text, RAG_ENHANCED).mode == RAG_ENHANCED
    assert Router().route(text).mode == SLIDING_WINDOW
    assert plan_steps(text) == []


@pytest.mark.parametrize(("text", "steps"), [
    ("帮我先查库存，再调用供应商接口", ["查库存", "调用供应商接口"]),
    ("First search flights, then I'd like you to book the cheapest",
     ["search flights", "I'd like you to book the cheapest"]),
    ("I need you to first check the logs, then restart the server",
     ["check the logs", "restart the server"]),
    ("先查物流，再来处理退款", ["查物流", "来处理退款"]),
])
def test_a_plan_for_the_assistant_is_still_one(text: str, steps: list[str]) -> None:
    assert Router().route(text, RAG_ENHANCED).mode == STRUCTURED
    assert plan_steps(text) == steps


# ----- a corrected fact in the write-once facts zone ---------------------------------------

def test_a_corrected_fact_is_marked_as_replaced_not_shown_as_current() -> None:
    chat = _Chat()
    chat.say(ORDER_PLAN)
    chat.answer("Before I cancel: can you confirm the order number?")
    chat.say("Sorry, I mistyped. The order number is actually 20241010, not 20241001.")
    zones = chat.state.zones
    assert zones.facts == ("20241001", "4242", "20241010")  # write once: nothing removed
    assert render_zone("facts", zones, "en").splitlines()[1:] == [
        "- 20241001 (no longer valid: corrected to 20241010)", "- 4242", "- 20241010"]
    assert Zones.from_dict(json.loads(json.dumps(zones.to_dict()))) == zones


def test_a_correction_in_chinese_marks_the_one_value_of_its_kind() -> None:
    chat = _Chat()
    chat.say("先查5月7日北京到上海的高铁，再订一家酒店，预算每晚800元以内")
    chat.say("不对，日期改成5月8日")
    lines = render_zone("facts", chat.state.zones, "zh").splitlines()[1:]
    assert lines == ["- 5月7日（已失效，更正为 5月8日）", "- 800元", "- 5月8日"]


def test_a_correction_that_does_not_say_which_value_it_replaces_marks_none() -> None:
    chat = _Chat()
    chat.say("First book the flight out on 2025-05-06, then the return on 2025-05-20.")
    chat.say("Actually make it 2025-05-09.")
    assert chat.state.zones.superseded == ()


def test_a_correction_after_the_mode_switched_still_marks_the_listed_fact() -> None:
    chat = _Chat()
    chat.say(ORDER_PLAN)
    chat.call("update_order", '{"status": "cancelled"}', order_id="20241001")
    chat.call("refund", '{"status": "refunded"}', card="4242")
    chat.answer("Cancelled and refunded.")
    chat.say("thanks")
    assert chat.state.mode == SLIDING_WINDOW
    chat.say("Actually my card ends in 4343, not 4242.")
    assert "- 4242 (no longer valid: corrected to 4343)" in render_zone(
        "facts", chat.state.zones, "en")


def test_a_value_the_message_itself_says_is_wrong_is_never_listed_as_current() -> None:
    chat = _Chat()
    chat.say("First cancel my order 20241010 (not 20241001), then refund it.")
    assert chat.state.zones.facts == ("20241010",)


def test_a_value_named_again_after_it_was_replaced_stands_again() -> None:
    chat = _Chat()
    chat.say(ORDER_PLAN)
    chat.say("Sorry, the order is actually 20241010, not 20241001.")
    chat.say("No wait, it really is 20241001, not 20241010.")
    lines = render_zone("facts", chat.state.zones, "en").splitlines()[1:]
    assert lines == ["- 20241001", "- 4242",
                     "- 20241010 (no longer valid: corrected to 20241001)"]
