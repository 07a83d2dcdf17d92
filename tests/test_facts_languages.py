"""Exact facts beyond English and Simplified Chinese, and the summary rules around them.

Traditional Chinese, Japanese and Korean amounts, times, dates, addresses and keyed ids; amounts
grouped with spaces, apostrophes or lakh commas and written with a decimal comma; every currency
sign; international phone numbers. A fact is never a piece of a longer value, so a summary that
states a piece of it does not pass.
"""

from __future__ import annotations

import time
import unicodedata

import pytest

from contextwright.compress.facts import extract_facts, fact_kind, missing_facts
from contextwright.compress.summarize import ExtractiveSummarizer, Summary, verified
from contextwright.core.items import Message
from contextwright.errors import SummaryError


@pytest.mark.parametrize(("text", "expected"), [
    ("預算¥1.2萬元，尾款3千元", ["¥1.2萬元", "3千元"]),
    ("預算1.5萬塊", ["1.5萬塊"]),
    ("12月3號晚上8點半送達", ["12月3號晚上8點半"]),
    ("下午3點到", ["下午3點"]),
    ("請寄到臺北市信義區信義路五段7號", ["臺北市信義區信義路五段7號"]),
    ("寄到新北市板橋區文化路", ["新北市板橋區文化路"]),
    ("訂單編號 ABCDEF", ["ABCDEF"]),
    ("快遞單號 SFABCDEFG", ["SFABCDEFG"]),
    ("金額 NT$1,200", ["NT$1,200"]),
])
def test_traditional_chinese_facts_read_as_the_simplified_ones(
        text: str, expected: list[str]) -> None:
    assert list(extract_facts(text)) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("Итого: 12 500 ₽", ["12 500 ₽"]),
    ("Итого: 1 250 000 ₽", ["1 250 000 ₽"]),
    ("Итого: 12\u00a0500,00\u00a0₽", ["12\u00a0500,00\u00a0₽"]),
    ("Total : 12\u202f500,00\u00a0€", ["12\u202f500,00\u00a0€"]),
    ("Razem: 1 299,99 zł", ["1 299,99 zł"]),
    ("Celkem 25 000 Kč", ["25 000 Kč"]),
    ("Summe: 1.299,00 €", ["1.299,00 €"]),
    ("Total: €1.200,50", ["€1.200,50"]),
    ("CHF 1'250.00", ["CHF 1'250.00"]),
    ("Loan amount is ₹1,50,000 and EMI ₹12,500", ["₹1,50,000", "₹12,500"]),
    ("कुल राशि ₹2,35,000 है", ["₹2,35,000"]),
    ("Budget: Rs. 10,00,000", ["Rs. 10,00,000"]),
    ("population 10,00,000", ["10,00,000"]),
    ("Итого: 12 500", ["12 500"]),
    ("paid €1,50 today", ["€1,50"]),
])
def test_amounts_grouped_in_any_locale_are_one_fact(text: str, expected: list[str]) -> None:
    assert list(extract_facts(text)) == expected


@pytest.mark.parametrize("text", [
    "Итого: 12 500 ₽", "Total : 12\u202f500,00\u00a0€", "Celkem 25 000 Kč", "Total: €1.200,50",
    "CHF 1'250.00", "Итого: 1 250 000 ₽", "12\u00a0500", "x 1'250", "$10,20,30",
])
def test_no_fact_is_a_piece_of_a_grouped_amount(text: str) -> None:
    pieces = {"500", "000", "250", "250.00", "€1.200", "500 ₽", "$10"}
    assert pieces.isdisjoint(extract_facts(text))


@pytest.mark.parametrize(("told", "wrong"), [
    ("Сумма счёта 12 500 ₽.", "500 ₽"),
    ("Le total est de 1 299,00 €.", "299 €"),
    ("Der Betrag ist €1.200,50.", "€1.200"),
    ("預算¥1.2萬元", "¥1.2"),
    ("My loan amount is ₹1,50,000.", "₹1"),
])
def test_a_summary_stating_a_piece_of_the_amount_is_refused(told: str, wrong: str) -> None:
    class Wrong:
        def summarize(self, previous: Summary | None, messages: object, *, language: str,
                      max_tokens: int | None = None, tokenizer: object = None) -> Summary:
            return Summary(need="pay the invoice", facts=(wrong,))

    messages = [Message(role="user", content=told), Message(role="assistant", content="OK")]
    with pytest.raises(SummaryError):
        verified(Wrong(), None, messages, language="en")


@pytest.mark.parametrize(("text", "expected"), [
    ("お支払いは3万円です", ["3万円"]),
    ("お支払いは30,000円です", ["30,000円"]),
    ("予算は1万2千円", ["1万2千円"]),
    ("5千円札", ["5千円"]),
    ("午後3時30分にお届け", ["午後3時30分"]),
    ("15時30分", ["15時30分"]),
    ("12月3日午後3時30分にお届け", ["12月3日午後3時30分"]),
    ("注文番号は A1B2C3 です", ["A1B2C3"]),
    ("결제 금액은 3만원입니다", ["3만원"]),
    ("30,000원", ["30,000원"]),
    ("총 1억 2천만 원", ["1억 2천만 원"]),
    ("12월 3일 오후 3시", ["12월 3일 오후 3시"]),
    ("오후 3시 30분에 만나요", ["오후 3시 30분"]),
    ("₩30,000", ["₩30,000"]),
    ("₹1,200", ["₹1,200"]),
    ("฿1,200", ["฿1,200"]),
    ("₪1,200", ["₪1,200"]),
    ("₽1,200", ["₽1,200"]),
])
def test_japanese_and_korean_amounts_times_and_every_currency_sign(
        text: str, expected: list[str]) -> None:
    assert list(extract_facts(text)) == expected


@pytest.mark.parametrize("text", ["3千米", "5時間かかる", "3시간 걸려요", "1万2"])
def test_distances_and_durations_are_no_amounts_or_times(text: str) -> None:
    assert extract_facts(text) == ()


def test_every_currency_sign_unicode_knows_is_a_currency() -> None:
    signs = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Sc"]
    assert [s for s in signs if extract_facts(f"{s}1,200") != (f"{s}1,200",)] == []


@pytest.mark.parametrize(("fact", "kind"), [
    ("午後3時30分", "time"), ("오후 3시", "time"), ("12月3號晚上8點", "date"),
    ("1万2千円", "money"), ("12 500 ₽", "money"), ("+91 98765 43210", "phone"),
])
def test_fact_kinds_of_the_new_forms(fact: str, kind: str) -> None:
    assert fact_kind(fact) == kind


@pytest.mark.parametrize("phone", [
    "+91 98765 43210", "+33 1 23 45 67 89", "+49 30 12345678", "+49 151 23456789",
    "+55 11 91234-5678", "+81 3-1234-5678", "+7 (495) 123-45-67", "+971 50 123 4567",
    "(03) 1234-5678", "(02) 9876 5432", "098765 43210", "555 123 4567", "+919876543210",
])
def test_international_phone_numbers_are_one_fact(phone: str) -> None:
    assert extract_facts(f"call me at {phone} please") == (phone,)


def test_a_phone_rewritten_as_its_pieces_is_missing() -> None:
    required = extract_facts("call +91 98765 43210")
    assert missing_facts("numbers 98765 and 43210", required) == ("+91 98765 43210",)


@pytest.mark.parametrize(("text", "expected"), [
    # English and Simplified Chinese as before.
    ("Total charged: $12,500", ["$12,500"]),
    ("总价￥1,299.00，另付199元", ["￥1,299.00", "199元"]),
    ("买了3件，299元一件", ["299元"]),
    ("数量3，2999元", ["2999元"]),
    ("预算¥1.2万元，尾款3千元", ["¥1.2万元", "3千元"]),
    ("ids 1234,5678", ["1234"]),
    ("call +44 20 7946 0958 or 020 7946 0958", ["+44 20 7946 0958", "020 7946 0958"]),
    ("version 1.2.3 costs $3", ["1.2.3", "$3"]),
    ("price $100 $200", ["$100", "$200"]),
])
def test_english_and_simplified_chinese_facts_are_unchanged(
        text: str, expected: list[str]) -> None:
    assert list(extract_facts(text)) == expected


_NEAR_MISSES = {
    "spaced digits": "1 ", "long spaced run": " 234", "no-break run": "\u00a0234",
    "apostrophe run": "'234", "lakh run": ",50", "comma run": ",234", "dot run": ".234",
    "decimal comma run": ",5", "magnitude run": "万2", "korean magnitude run": "억 2",
    "korean times": "오후 3시 ", "japanese times": "午後3時", "plus groups": "+1 2 ",
    "area codes": "(03) 12", "signs": "€1 ", "signs after": "1 €", "currency words": "1 zł",
    "traditional": "萬號點區",
}


@pytest.mark.parametrize("unit", list(_NEAR_MISSES.values()), ids=list(_NEAR_MISSES))
def test_facts_of_near_misses_take_linear_time(unit: str) -> None:
    def seconds(size: int) -> float:
        text = "1" + unit * (size // len(unit))
        start = time.perf_counter()
        extract_facts(text)
        return time.perf_counter() - start

    small, large = seconds(20_000), seconds(160_000)
    # Eight times the text: a linear scan takes about eight times as long, a quadratic one
    # sixty-four times; the margin leaves room for a busy machine.
    assert large < 20 * small + 0.5


# ----- summaries: the need, clipping, steps carried as not done, recalled turns ---------------

def _summary(messages: list[Message], previous: Summary | None = None) -> Summary:
    return verified(ExtractiveSummarizer(), previous, messages, language="auto")


@pytest.mark.parametrize(("hello", "need", "ack"), [
    ("こんにちは！", "注文 A1B2C3 の配送先を変更したいです。", "はい。"),
    ("안녕하세요!", "주문 A1B2C3의 배송지를 변경하고 싶어요.", "네."),
    ("Здравствуйте!", "Хочу изменить адрес доставки заказа A1B2C3.", "Хорошо."),
    ("¡Hola!", "Quiero cambiar la dirección de entrega del pedido A1B2C3.", "Claro."),
    ("Hallo!", "Ich möchte die Lieferadresse der Bestellung A1B2C3 ändern.", "Gern."),
    # Greetings no list names: a short exclamation gives way to the request after it.
    ("Grüezi!", "Ich möchte die Lieferadresse der Bestellung A1B2C3 ändern.", "Gern."),
    ("Καλημέρα!", "Θέλω να αλλάξω τη διεύθυνση της παραγγελίας A1B2C3.", "Εντάξει, A1B2C3."),
])
def test_a_greeting_in_any_language_is_not_the_need(hello: str, need: str, ack: str) -> None:
    summary = _summary([Message(role="user", content=hello), Message(role="assistant", content=ack),
                        Message(role="user", content=need), Message(role="assistant", content=ack)])
    assert summary.need == need
    acknowledgements = ("はい。", "네.", "Хорошо.", "Claro.", "Gern.")
    assert not any(note in acknowledgements for note in summary.notes)


def test_a_greeting_need_from_an_earlier_merge_gives_way_to_the_request() -> None:
    previous = Summary(need="Grüezi!")
    later = "Ich möchte die Lieferadresse der Bestellung A1B2C3 ändern."
    summary = _summary([Message(role="user", content=later)], previous)
    assert summary.need == later


def test_a_short_english_request_stays_the_need() -> None:
    summary = _summary([Message(role="user", content="Cancel it!"),
                        Message(role="assistant", content="Which order?"),
                        Message(role="user", content="Order A1B2C3, please.")])
    assert summary.need == "Cancel it!"


THAI = ("สวัสดีครับผมต้องการเปลี่ยนที่อยู่จัดส่งสำหรับคำสั่งซื้อของผมเพราะผมย้ายบ้านไปอยู่ที่เชียงใหม่แล้ว"
        "และอยากให้ส่งของไปที่บ้านใหม่แทนที่จะส่งไปที่กรุงเทพเหมือนเดิมช่วยดำเนินการให้ด้วยนะครับ")


def test_a_long_need_without_spaces_is_cut_between_characters_not_lost() -> None:
    summary = _summary([Message(role="user", content=THAI),
                        Message(role="assistant", content="ได้ครับ")])
    need = summary.need
    assert need.endswith("…") and len(need) > 60
    kept = need[:-1]
    assert kept in THAI
    # The cut splits no cluster: the next character is no mark of the last one kept.
    assert unicodedata.category(THAI[THAI.index(kept) + len(kept)])[0] != "M"


def test_a_clip_without_spaces_keeps_a_fact_whole() -> None:
    from contextwright.compress.summarize import _clip

    text = "ก" * 100 + "12345678901234567890" + "ข" * 100
    clipped = _clip(text)
    assert clipped.endswith("…") and "1234" not in clipped[:-1].replace("12345678901234567890", "")


STEP = Summary(need="First cancel my order 20241001, then refund it to my card ending 4242.",
               unresolved=("not done: refund it to my card ending 4242",))


@pytest.mark.parametrize("policy", [
    "Cancelled orders are refunded within 5 business days to the original card.",
    "Cancelled orders are refunded to the original card.",
    "Refunds go back to the card you paid with, card ending 4242 here.",
    "取消的订单一般会在5个工作日内退款到原卡。",
])
def test_a_policy_about_a_step_does_not_mark_it_done(policy: str) -> None:
    summary = _summary([Message(role="user", content="what's your refund policy?"),
                        Message(role="assistant", content=policy)], STEP)
    assert "not done: refund it to my card ending 4242" in summary.unresolved


@pytest.mark.parametrize("report", [
    "I refunded it to your card ending 4242.",
    "Your card ending 4242 has been refunded.",
    "Refunded $50 to your card ending 4242.",
])
def test_a_report_of_the_step_marks_it_done(report: str) -> None:
    summary = _summary([Message(role="assistant", content=report)], STEP)
    assert summary.unresolved == ()


def test_a_hand_off_after_a_policy_answer_still_carries_the_step() -> None:
    import json

    from contextwright import ContextManager
    from contextwright.session import MemoryStore

    tools = [{"type": "function", "function": {"name": name, "description": name,
              "parameters": {"type": "object", "properties": {}}}}
             for name in ("update_order", "track_order", "send_email")]
    cm = ContextManager(store=MemoryStore(), background=False)
    cm.prepare("u", "s", "First cancel my order 20241001, then refund it to my card ending 4242.",
               tools=tools)
    cm.record("u", "s", assistant="Before I cancel: can you confirm the order number?")
    cm.prepare("u", "s", "Sorry, I mistyped. The order number is actually 20241010, not "
               "20241001.", tools=tools)
    cm.record("u", "s", assistant={
        "role": "assistant", "content": None, "tool_calls": [{
            "id": "c1", "type": "function", "function": {
                "name": "update_order",
                "arguments": json.dumps({"order_id": "20241010", "action": "cancel"})}}]},
        tool_results=[{"tool_call_id": "c1", "content": '{"status": "cancelled"}'}])
    cm.prepare("u", "s", None, tools=tools)
    cm.record("u", "s", assistant="Order 20241010 is cancelled. Shall I refund it now?")
    cm.prepare("u", "s", "wait, what's your refund policy for cancelled orders?", tools=tools)
    cm.record("u", "s", assistant=(
        "Cancelled orders are refunded within 5 business days to the original card."))
    for small_talk in ("ok", "thanks", "nice", "how's the weather there?", "haha"):
        cm.prepare("u", "s", small_talk, tools=tools)
        cm.record("u", "s", assistant="Sure!")
    cm.prepare("u", "s", "OK, go ahead and refund it now", tools=tools)
    handoffs = " ".join(cm.state("u", "s").zones.handoffs)
    assert "not done: refund it to my card ending 4242" in handoffs


def test_a_recalled_turn_quoted_with_its_speaker_leaves_no_label_in_open_items() -> None:
    summary = _summary([
        Message(role="user", content="What do you remember about my request?"),
        Message(role="assistant",
                content="[recalled 2024-05-01] user: my order 20241001 is still pending")])
    assert "my order 20241001 is still pending" in summary.unresolved
    assert not any("user:" in item for item in summary.unresolved)
