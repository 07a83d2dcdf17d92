"""Exact facts a summary must keep: extract_facts, and missing_facts' comparison."""

from __future__ import annotations

import json
import pathlib
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from contextwright.compress.facts import (
    extract_facts,
    fact_key,
    looks_like_fence_marker,
    missing_facts,
)

DATA = pathlib.Path(__file__).parents[2] / "shared" / "data" / "tau-bench-airline-dev"


@pytest.mark.parametrize(("text", "expected"), [
    ("帮我查一下订单号 20241001 的物流状态", ["20241001"]),
    ("订单号20241001，收货地址改为北京市朝阳区建国路88号，电话13800138000",
     ["20241001", "北京市朝阳区建国路88号", "13800138000"]),
    ("快递单号是SF1234567890，寄到上海市浦东新区世纪大道100号A座1201室",
     ["SF1234567890", "上海市浦东新区世纪大道100号A座1201室"]),
    ("我在杭州市西湖区文三路90号上班", ["杭州市西湖区文三路90号"]),
    ("请把收货地址改成杭州市西湖区文三路 88 号。", ["杭州市西湖区文三路 88 号"]),
    ("寄到北京市朝阳区建国路 8 号 3 号楼 1201 室，谢谢",
     ["北京市朝阳区建国路 8 号 3 号楼 1201 室"]),
    ("收货地址：广东省深圳市南山区科技园南区10栋", ["广东省深圳市南山区科技园南区10栋"]),
    ("我家在成都市武侯区人民南路四段27号", ["成都市武侯区人民南路四段27号"]),
    ("送到上海市徐汇区漕溪北路", ["上海市徐汇区漕溪北路"]),
    ("上海市徐汇区的路很堵", ["上海市徐汇区"]),
    ("Ship it to 221B Baker Street, London", ["221B Baker Street, London"]),
    ("Order ORD-2024-001 ships to 123 Main St, Apt 4B, Springfield, IL 62704 on May 15, 2024.",
     ["ORD-2024-001", "123 Main St, Apt 4B, Springfield, IL 62704", "May 15, 2024"]),
    ("Flight HAT123, code A1B2C3; mail john.doe@example.com or call +1 (555) 123-4567.",
     ["HAT123", "A1B2C3", "john.doe@example.com", "+1 (555) 123-4567"]),
    ("See https://example.com/orders/42?x=1.", ["https://example.com/orders/42?x=1"]),
    ("总价￥1,299.00，另付199元，10月1日下午3点送达，截止2024年10月1日 14:30",
     ["￥1,299.00", "199元", "10月1日下午3点", "2024年10月1日 14:30"]),
    ("my user id is nora_vance_5172, pay with certificate_3390412", ["nora_vance_5172",
                                                                 "certificate_3390412"]),
    ("reservation id ZFABCD please", ["ZFABCD"]),
    ('{"reservation_id": "WQ3KDV", "flight_number": "KST052", "date": "2024-05-21", "price": 1502}',
     ["WQ3KDV", "KST052", "2024-05-21", "1502"]),
    ("meet at 10:30 a.m. or 4pm", ["10:30 a.m.", "4pm"]),
    ("客服电话 400-123-4567 或 010-12345678", ["400-123-4567", "010-12345678"]),
])
def test_extracts_exact_facts_in_order(text: str, expected: list[str]) -> None:
    assert list(extract_facts(text)) == expected


@pytest.mark.parametrize(("text", "expected"), [
    # UK postcodes: outward and inward code are one value, alone or closing an address.
    ("Please send it to SW1A 1AA by Friday.", ["SW1A 1AA"]),
    ("Our office postcode is EC2R 8AH.", ["EC2R 8AH"]),
    ("Depots at M1 1AE, B33 8TH and CR2 6XH", ["M1 1AE", "B33 8TH", "CR2 6XH"]),
    ("Deliver to 10 Downing Street, London SW1A 2AA today",
     ["10 Downing Street, London SW1A 2AA"]),
    # Versions: a "v" prefix, three or more parts, a pre-release or build suffix.
    ("Upgrade to v2.3.1 before Monday", ["v2.3.1"]),
    ("We run 2.3.1 in production", ["2.3.1"]),
    ("Pinned to v10.4, tested on 1.0.0-rc.1 and 4.2.0+build.7.", ["v10.4", "1.0.0-rc.1",
                                                                   "4.2.0+build.7"]),
    # Phones: a local number, an area code, international and national formats.
    ("Call me on 555-0142 after six", ["555-0142"]),
    ("Reach the desk at (415) 555-0142.", ["(415) 555-0142"]),
    ("From abroad dial +44 20 7946 0958 please", ["+44 20 7946 0958"]),
    ("In London ring 020 7946 0958 or 07700 900123", ["020 7946 0958", "07700 900123"]),
    # Street addresses with an ordinal street name or a directional suffix.
    ("I live at 350 5th Ave, New York, NY 10118", ["350 5th Ave, New York, NY 10118"]),
    ("Meet at 350 5th Ave tomorrow", ["350 5th Ave"]),
    ("Drop it at 221B Baker Street.", ["221B Baker Street"]),
    ("Tours leave 1600 Pennsylvania Avenue NW daily", ["1600 Pennsylvania Avenue NW"]),
    ("The shop is at 42 W 23rd St.", ["42 W 23rd St"]),
])
def test_extracts_postcodes_versions_phones_and_addresses_whole(text: str,
                                                                 expected: list[str]) -> None:
    assert list(extract_facts(text)) == expected


@pytest.mark.parametrize(("text", "expected"), [
    # Digits joined by hyphens are one number (account, phone, ZIP+4, social security number),
    # however the groups are sized; no piece of it is a fact of its own.
    ("Call me at 555-01162", ["555-01162"]),
    ("Account 123-4567 is overdrawn", ["123-4567"]),
    ("Card 1234-5678-9012 expires soon", ["1234-5678-9012"]),
    ("Ship to ZIP 10001-1234 and SSN 123-45-6789", ["10001-1234", "123-45-6789"]),
    ("Dial 1-800-555-0199 or 555-0142-3", ["1-800-555-0199", "555-0142-3"]),
    ("The score was 113-98 at half time", ["113-98"]),
    # Still what they were: a date, an id, and a rising pair of one magnitude, which reads as a
    # range of two numbers.
    ("Due 2024-05-01, order ORD-2024-001", ["2024-05-01", "ORD-2024-001"]),
    ("Read pages 100-200 and budget 1000-5000", ["100", "200", "1000", "5000"]),
])
def test_hyphenated_numbers_are_one_fact_and_ranges_two(text: str, expected: list[str]) -> None:
    assert list(extract_facts(text)) == expected


@pytest.mark.parametrize("text", [
    "I have 2 kids and 3 dogs",
    "I will be there in 5 minutes",
    "We won 3-2 in extra time, pages 10-20 explain it",
    "The ratio went from 2.5 to 1.8 in 2 years",
    "The V8 4WD pickup does 0-60 in 7 seconds",
    "Take the A1 north, then the M25 for 12 miles",
    "In the 5th round we had 2 Main Course options",
    "Version two is out and v2 is better",
])
def test_prose_with_small_numbers_has_no_facts(text: str) -> None:
    assert extract_facts(text) == ()


@pytest.mark.parametrize("text", [
    "About 120 people came, 300 more wrote",
    "The years 1990-2000 were good",
])
def test_prose_keeps_only_the_facts_it_had(text: str) -> None:
    # Numbers of three or more digits were facts before postcodes, versions and local phone
    # numbers were added; nothing in these sentences may become a new kind of fact.
    assert extract_facts(text) == tuple(re.findall(r"\d{3,}", text))


@pytest.mark.parametrize("text", [
    "今天上海天气怎么样，顺便帮我记下来",
    "你好我想咨询一下退款政策",
    "The refund usually takes a few business days.",
    "the 1st and 22nd floors, 5G and MP3",
    "我们一起去超市买东西吧，市场里人很多",
])
def test_ordinary_text_has_no_facts(text: str) -> None:
    assert extract_facts(text) == ()


def test_full_width_digits_are_found_and_compared_as_half_width() -> None:
    assert extract_facts("订单号：２０２４１００１") == ("２０２４１００１",)
    assert missing_facts("订单 20241001 已发货", ["２０２４１００１"]) == ()


def test_a_fact_is_reported_once_and_never_with_a_piece_of_itself() -> None:
    text = "订单 20241001 … 再说一次 20241001，金额 $1,299.00"
    assert extract_facts(text) == ("20241001", "$1,299.00")


def test_missing_facts_ignores_whitespace_not_content() -> None:
    summary = "Order ORD-2024-001, address 北京市朝阳区 建国路88号"
    assert missing_facts(summary, ["ORD-2024-001", "北京市朝阳区建国路88号"]) == ()
    assert missing_facts(summary, ["ORD-2024-002", "hat123"]) == ("ORD-2024-002", "hat123")


def test_missing_facts_keeps_given_order_and_reports_each_once() -> None:
    assert missing_facts("", ["B2", "A1", "B2"]) == ("B2", "A1")


def test_adversarial_runs_stay_linear() -> None:
    # These once made the address and email patterns backtrack without end.
    for text in ("路" * 20_000, "北京市" * 5_000, "a1-" * 10_000, "May 1 " * 5_000,
                 "1 5th " * 5_000, "0 12" * 8_000, "v1.2-rc" * 5_000, "SW1A 1" * 5_000):
        assert len(extract_facts(text)) <= 2


_ID_PATTERN = r"[A-Z]{2,4}-?[0-9]{3,8}"
_ids = st.from_regex(_ID_PATTERN, fullmatch=True)
_filler = st.sampled_from(["你好，", "请帮我查一下", " and then ", "，谢谢。", "Hi! ", "\n"])


@given(st.lists(st.one_of(_ids, _filler), max_size=12))
def test_every_embedded_id_is_extracted_in_order(parts: list[str]) -> None:
    def is_id(part: str) -> bool:
        return re.fullmatch(_ID_PATTERN, part) is not None

    text = "".join(f" {p} " if is_id(p) else p for p in parts)
    ids = [p for p in parts if is_id(p)]
    expected = list(dict.fromkeys(fact_key(i) for i in ids))
    assert [fact_key(f) for f in extract_facts(text)] == expected


@given(st.text(max_size=300))
@example("00A0.1")  # an id-like start of a number: "00A0" is no fact of it
@example("ref X7Y9.5 and 1.5")
def test_facts_are_substrings_unique_and_present(text: str) -> None:
    facts = extract_facts(text)
    assert len({fact_key(f) for f in facts}) == len(facts)
    for fact in facts:
        assert fact and fact in text
    assert missing_facts(text, facts) == ()
    assert extract_facts(text) == facts  # deterministic


@given(st.text(max_size=200), st.text(max_size=200))
def test_facts_of_a_prefix_survive_in_the_whole(head: str, tail: str) -> None:
    assert missing_facts(head + "\n" + tail, extract_facts(head)) == ()


@pytest.mark.data
def test_finds_every_id_like_fact_of_tau_bench_where_it_first_appears() -> None:
    if not DATA.is_dir():
        pytest.skip("../shared/data is absent")
    trajectories = json.loads((DATA / "gpt-4o-airline-dev.json").read_text(encoding="utf-8"))
    found = total = 0
    for line in (DATA / "required_facts.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        traj = trajectories[row["traj_index"]]["traj"]
        for fact in row["facts"]:
            if not fact["id_like"] or fact["first_msg_role"] not in {"user", "tool"}:
                continue
            content = traj[fact["first_msg_index"]].get("content") or ""
            total += 1
            found += fact_key(fact["value"]) in {fact_key(f) for f in extract_facts(content)}
    assert total == 400
    assert found == total


@pytest.mark.parametrize("value", [
    "0123456789ab", "<<end 0123456789ab>>", "<\\<end 0123456789ab>>", "＜＜end 0123456789ab＞＞",
    "<<END 0123456789AB>>", "<<data 0123456789ab tool track>>", "[recalled 2024-01-01]"])
def test_fence_shaped_values_in_any_form_look_like_fence_markers(value: str) -> None:
    assert looks_like_fence_marker(value)
    if value != "0123456789ab":  # a bare one may be a real id (the caller knows who wrote it)
        assert extract_facts(f"see {value} and ORD-2024-001") == ("ORD-2024-001",)


@pytest.mark.parametrize("value", ["ORD-2024-001", "a<b", "<<end soon>>", ""])
def test_other_values_are_no_fence_markers(value: str) -> None:
    assert not looks_like_fence_marker(value)
