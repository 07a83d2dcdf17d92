"""Robustness of tool-result and fact compression.

Each test's docstring names the failure it guards against.
"""

from __future__ import annotations

import json

import pytest

from contextwright.compress.facts import extract_facts as summary_facts
from contextwright.compress.facts import missing_facts
from contextwright.compress.json_compact import compact_tool_result, select_fields
from contextwright.compress.tool_results import (
    ToolTiers,
    extract_facts,
    one_line_tool_result,
    reduce_tool_result,
)
from contextwright.errors import PlanError

# --------------------------------------------------------------------------- retriever



def test_tier_options_with_bad_numbers_are_plan_errors() -> None:
    """``ToolTiers.from_options`` raises PlanError for a bad ``tool_early`` but a bare
    ValueError from ``int()`` for ``tool_full: two``; both are plan mistakes."""
    with pytest.raises(PlanError):
        ToolTiers.from_options({"tool_full": "two"})


def test_reduction_keeps_a_thousands_separated_amount_whole() -> None:
    """``_FACT`` has no integer-with-thousands-separator form, so "12,500" becomes the facts
    "12" and "500" (and vanishes from the one-line tier); the value should be kept verbatim."""
    assert "12,500" in extract_facts("Total charged: 12,500 JPY")
    reduced = reduce_tool_result("pay", json.dumps({"amount": "1,299", "note": "paid"}))
    assert "1,299" in reduced
    line = one_line_tool_result("pay", json.dumps({"order_id": "A1", "total": "12,500"}))
    assert "12,500" in line


def test_reduction_keeps_a_timestamp_with_its_utc_offset() -> None:
    """The date pattern of ``_FACT`` stops before a "+08:00" offset, so a timestamp is reduced
    to "2024-05-01T10:00:00, +08, 00"; it should be kept verbatim."""
    stamp = "2024-05-01T10:00:00+08:00"
    assert stamp in extract_facts(f"departs {stamp}")
    assert stamp in reduce_tool_result("flight", json.dumps({"departure": stamp}))


def test_text_reduction_keeps_a_number_that_also_occurs_inside_an_id() -> None:
    """``_reduce_text`` drops every fact that is a substring of the 100-character head, so the
    quantity 55 is lost because the head contains "ORD-5512"."""
    text = ("Order ORD-5512 confirmed for delivery to the main office. "
            + "The package will be handled by our partner courier. " * 3
            + "Quantity: 55 boxes.")
    reduced = reduce_tool_result("orders", text)
    after_head = reduced.split("…", 1)[1]
    assert "55" in after_head.replace("5512", "")


def test_one_line_tier_respects_max_chars_for_short_text() -> None:
    """``_line_cached`` returns a text result of up to 160 characters whole, ignoring
    ``max_chars`` (``tool_line_chars``): 118 characters come back for a limit of 60."""
    text = ("Found the hotel you asked about; it has free breakfast and a pool, "
            "check-in after three.")
    line = one_line_tool_result("search", text, max_chars=60)
    assert len(line) <= 60


def test_fields_never_hide_an_error_inside_a_list_item() -> None:
    """``select_fields`` keeps ``error`` only at the top level, so a per-item error of a batch
    result is removed by ``fields`` although the module promises a field list never hides a
    failure."""
    content = json.dumps({"batch": "b-7", "results": [{"id": 1, "error": "not found"},
                                                      {"id": 2}]})
    compact = compact_tool_result("lookup", content, ["results[].id"])
    assert compact is not None and "not found" in compact


def test_tier_options_must_be_non_negative_whole_numbers() -> None:
    """A negative, fractional or boolean tier count is a plan mistake too, not a silent tier."""
    for options in ({"tool_full": -1}, {"tool_full": 1, "tool_reduced": 2.5},
                    {"tool_full": True}, {"tool_full": 1, "tool_line_chars": "wide"}):
        with pytest.raises(PlanError, match=next(iter(options.keys() - {"tool_full"}),
                                                 "tool_full")):
            ToolTiers.from_options(options)
    assert ToolTiers.from_options({"tool_full": 2, "tool_reduced": 0}) == ToolTiers(
        full=2, reduced=0)


def test_reduction_keeps_an_ip_address_or_version_whole() -> None:
    """``_FACT`` read "192.168.1.1" as the decimal "192.168" and then "1", "1"."""
    assert extract_facts("host 192.168.1.1 on build 10.0.19045") == ("192.168.1.1", "10.0.19045")


def test_fields_never_hide_an_error_below_an_unselected_field() -> None:
    """An error anywhere is kept, but null / empty ``error``/``errors`` fields say nothing failed
    and are not dragged in."""
    value = {"batch": "b-7", "errors": [],
             "results": [{"id": 1, "error": None}, {"id": 2, "meta": {"error": "timeout"}}]}
    assert select_fields(value, ["batch"]) == {
        "batch": "b-7", "results": [{"meta": {"error": "timeout"}}]}


def test_success_envelope_does_not_take_false_for_zero() -> None:
    """``_is_ok_envelope`` used ``value in accepted``: False == 0 dropped ``code: false`` as a
    success code, and True == 1 dropped ``success: 1``."""
    compact = compact_tool_result("t", json.dumps({"code": False, "success": 1, "seat": "4A"}))
    assert compact is not None and "code: false" in compact and "success: 1" in compact
    compact = compact_tool_result("t", json.dumps({"code": 0, "success": True, "seat": "4A"}))
    assert compact == "Tool result (t): seat: 4A"


def test_compact_shows_an_empty_object_as_an_empty_list_is_shown() -> None:
    """``_flatten`` yielded nothing for ``{}``, so ``"filters": {}`` lost its key while
    ``"tags": []`` showed as ``tags: []``."""
    compact = compact_tool_result("t", json.dumps({"filters": {}, "tags": [], "n": 3}))
    assert compact == "Tool result (t): filters: {}, tags: [], n: 3"


# --------------------------------------------------------------------------- facts


def test_summary_facts_do_not_cut_a_dotted_number_into_a_piece() -> None:
    """``_NUMBER`` ends at a ".", so "192.168.1.1" is reported as the fact "192.168" and
    ``missing_facts`` accepts a summary that changed the address to 192.168.7.7."""
    facts = summary_facts("Server 192.168.1.1 is down")
    assert "192.168" not in facts
    assert missing_facts("Server 192.168.7.7 is down", facts) != ()
