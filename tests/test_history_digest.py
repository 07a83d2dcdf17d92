"""Digest of omitted turns (``digest_share``): exact values of what did not fit, one fenced item."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.core.digest import MIN_DIGEST_TOKENS, DigestCost, digest_share
from contextwright.core.gather import Costing
from contextwright.core.items import ContextItem, Layer, Message
from contextwright.errors import PlanError
from contextwright.sources.history_digest import omitted_digest, value_rank
from contextwright.tokens import get_tokenizer

BUILDER = ContextBuilder()
USER = {"user_id": "nora_vance_5172", "dob": "1988-11-23",
        "payment_methods": {"certificate_3390412": {"amount": 250},
                            "credit_card_8817203": {"brand": "visa", "last_four": "2916"}},
        "reservations": ["QX4ZT8", "PLM2R7"]}
FILLER = "The agent explains the baggage policy once more, in many words. " * 12


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def result(call_id: str, content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": json.dumps(content)}


def history() -> list[dict[str, Any]]:
    """An old round that looked the user up, then chatty rounds that push it out."""
    old = [{"role": "user", "content": "Hi, my user id is nora_vance_5172."},
           call("c1", "get_user_details", user_id="nora_vance_5172"), result("c1", USER),
           {"role": "assistant", "content": "Thanks, I found your profile."}]
    chat = [m for n in range(4) for m in (
        {"role": "user", "content": f"Question {n} about bags?"},
        {"role": "assistant", "content": FILLER})]
    return old + chat


def plan(history_tokens: int, **options: Any) -> BuildPlan:
    return (BuildPlan.builder("digest").budget(available_override=4000)
            .add("system", weight=0.1)
            .add("history", weight=0.6, max_tokens=history_tokens, options=options)
            .add("user", weight=0.3).build())


def build(history_tokens: int, **options: Any) -> Any:
    request = Request(user_input="Please book it with my certificate.", system="Airline agent.",
                      history=history())
    return BUILDER.build(plan(history_tokens, **options), request)


def text_of(ctx: Any) -> str:
    return "\n".join(str(m.get("content") or "") + json.dumps(m.get("tool_calls") or [])
                     for m in ctx.to_messages("openai"))


def test_digest_keeps_exact_values_of_rounds_that_did_not_fit() -> None:
    without = text_of(build(600))
    ctx = build(600, digest_share=0.3)
    with_digest = text_of(ctx)
    for value in ("nora_vance_5172", "certificate_3390412", "credit_card_8817203", "QX4ZT8",
                  "1988-11-23"):
        assert value not in without
        assert value in with_digest


def test_digest_is_one_fenced_item_that_says_what_it_stands_for() -> None:
    ctx = build(600, digest_share=0.3)
    digests = [m for m in ctx.messages if "left out for space" in m.content]
    assert len(digests) == 1
    assert digests[0].role == "assistant"  # fenced data is never rendered as user or system
    assert digests[0].content.startswith("<<data ")
    assert "history[" in digests[0].content  # names the omitted messages it stands for
    history_messages = [m for m, s in zip(ctx.messages, ctx.sections, strict=True)
                        if s == "history"]
    assert history_messages[0] is digests[0]  # placed where the omitted turns were


def test_digest_is_reported_as_a_decision() -> None:
    ctx = build(600, digest_share=0.3)
    decisions = [d for d in ctx.report.decisions if d.key == "history.digest"]
    assert [d.action for d in decisions] == ["compacted"]
    assert "digest" in decisions[0].reason and decisions[0].tokens_after > 0


def test_digest_stays_within_history_budget() -> None:
    for budget in (200, 400, 600, 900):
        ctx = build(budget, digest_share=0.3)
        row = next(r for r in ctx.report.sources if r.source == "history")
        assert row.tokens <= budget


def test_no_digest_when_everything_fits() -> None:
    assert text_of(build(3000, digest_share=0.3)) == text_of(build(3000))


def test_no_digest_when_nothing_omitted_holds_a_value() -> None:
    request = Request(user_input="and then?", history=[
        m for n in range(6) for m in ({"role": "user", "content": f"Tell me more, part {n}."},
                                      {"role": "assistant", "content": FILLER})])
    with_share = BUILDER.build(plan(500, digest_share=0.3), request)
    assert with_share.to_messages("openai") == BUILDER.build(plan(500), request).to_messages(
        "openai")  # the reserve is handed back: nothing is lost for a digest that says nothing


def digest_values(ctx: Any) -> list[str]:
    digest = next((m.content for m in ctx.messages if "left out for space" in m.content), "")
    lines = [line for line in digest.splitlines() if line.startswith("- ")]
    return [v for line in lines for v in line.split(": ", 1)[1].split("; ")]


def test_digest_leaves_out_values_the_context_already_shows() -> None:
    request = Request(user_input="Cancel QX4ZT8 please.", history=history())
    values = digest_values(BUILDER.build(plan(600, digest_share=0.3), request))
    assert "PLM2R7" in values
    assert "QX4ZT8" not in values  # the user input shows it
    assert len(values) == len(set(values))  # each value once, under the first message holding it


def test_digest_never_cuts_a_value() -> None:
    words = set(re.findall(r"[\w@-]+", json.dumps(history())))
    values = [v for budget in (150, 220, 300, 600)
              for v in digest_values(build(budget, digest_share=0.3))]
    assert values and all(value in words for value in values)  # whole words, never a piece


def test_turn_digest_for_calls_of_this_turn_that_do_not_fit() -> None:
    turn: list[dict[str, Any]] = []
    for n in range(6):
        turn += [call(f"t{n}", "get_reservation_details", reservation_id=f"RES{n}X9"),
                 result(f"t{n}", {"reservation_id": f"RES{n}X9", "note": FILLER})]
    built = (BuildPlan.builder("turn").budget(available_override=4000)
             .add("user", weight=0.3)
             .add("tool_results", weight=0.7, max_tokens=500, options={"digest_share": 0.3})
             .build())
    ctx = BUILDER.build(built, Request(user_input="Which ones?", turn=turn))
    text = text_of(ctx)
    assert all(f"RES{n}X9" in text for n in range(6))
    assert any(d.key == "tool_results.digest" for d in ctx.report.decisions)
    ctx.to_messages("anthropic")  # the validator passes for both formats


@pytest.mark.parametrize("bad", [-0.1, 1, 1.5, "half", True])
def test_digest_share_must_be_a_share(bad: object) -> None:
    with pytest.raises(PlanError):
        digest_share({"digest_share": bad})
    with pytest.raises(PlanError):
        build(600, digest_share=bad)


def test_identifiers_rank_before_dates_values_and_times() -> None:
    ranks = [value_rank(v) for v in ("certificate_3390412", "2024-05-20", "1,250", "14:00:00")]
    assert ranks == sorted(ranks) and len(set(ranks)) == 4


class DigestingNotes:
    """A custom source that stands for its left-out notes with a count."""

    namespace = "notes"

    def build(self, request: Request, options: Any) -> list[ContextItem]:
        return [ContextItem(key=f"notes.n{i}", message=Message(role="system", content=note),
                            layer=Layer.NOTES, order=i)
                for i, note in enumerate(request.notes)]

    def digest(self, request: Request, options: Any, kept: Any, max_tokens: int,
               cost: Any) -> ContextItem | None:
        item = ContextItem(key="notes.digest", layer=Layer.NOTES, order=-1, message=Message(
            role="system", content=f"{len(request.notes) - len(kept)} notes left out"))
        return item if cost(item) <= max_tokens else None


def test_any_source_can_offer_a_digest() -> None:
    builder = ContextBuilder(sources=[DigestingNotes()])
    built = (BuildPlan.builder("notes").budget(available_override=4000).add("user", weight=0.5)
             .add("notes", weight=0.5, max_tokens=120 + MIN_DIGEST_TOKENS,
                  options={"digest_share": 0.3}).build())
    ctx = builder.build(built, Request(user_input="go", notes=[FILLER[:200]] * 5))
    system = ctx.to_messages("openai")[0]["content"]
    assert "notes left out" in system


def _omitted_digest_of(messages: list[dict[str, Any]], kept: list[ContextItem]) -> str | None:
    cost = DigestCost(Costing(get_tokenizer("o200k_base"), "en"), 2_001, remember=True)
    item = omitted_digest(messages, "history", "", {}, kept, 2_000, cost)
    return None if item is None else item.message.content


def test_a_remembered_digest_is_made_again_when_an_omitted_message_is_edited() -> None:
    messages = history()
    first = _omitted_digest_of(messages, [])
    assert first is not None and "QX4ZT8" in first
    assert _omitted_digest_of(messages, []) == first  # the same messages: the same digest
    messages[2]["content"] = json.dumps({**USER, "reservations": ["ZZ9ZZ9"]})  # edited in place
    edited = _omitted_digest_of(messages, [])
    assert edited is not None and "ZZ9ZZ9" in edited and "QX4ZT8" not in edited
    messages[2] = result("c1", {**USER, "reservations": ["YY8YY8"]})  # replaced
    replaced = _omitted_digest_of(messages, [])
    assert replaced is not None and "YY8YY8" in replaced and "ZZ9ZZ9" not in replaced


def test_a_remembered_digest_knows_which_items_were_kept() -> None:
    messages = history()
    assert "nora_vance_5172" in (_omitted_digest_of(messages, []) or "")
    first = Message(role="user", content=messages[0]["content"])
    kept = [ContextItem(key="history.m0", message=first, layer=Layer.HISTORY, order=0.0)]
    shown = _omitted_digest_of(messages, kept) or ""
    assert "nora_vance_5172" not in shown  # the kept message shows it already
