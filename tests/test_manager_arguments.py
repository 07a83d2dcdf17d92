"""ContextManager's own arguments are checked when it is made, not at its first call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from contextwright.errors import ConfigurationError, InvalidInputError
from contextwright.manager import ContextManager
from contextwright.session.store import SessionKey


@pytest.mark.parametrize(("name", "value"), [
    ("max_read_messages", 0), ("max_read_messages", -1), ("max_read_messages", "10"),
    ("max_read_messages", True), ("max_read_messages", 2.5),
    ("summary_max_tokens", 0), ("summary_max_tokens", -5),
    ("recall_cache_messages", -1),
])
def test_a_count_out_of_range_is_refused_by_name(name: str, value: Any) -> None:
    with pytest.raises(InvalidInputError, match=name):
        ContextManager(**{name: value})


def test_the_smallest_counts_work() -> None:
    manager = ContextManager(max_read_messages=1, summary_max_tokens=1, recall_cache_messages=0,
                             background=False)
    context = manager.prepare("u", "s", "hello there")
    assert context.to_messages()[-1]["content"] == "hello there"


@pytest.mark.parametrize("target", ["html", "Chat", "txt", None, 5])
def test_an_unknown_target_is_refused_before_the_message_is_stored(target: Any) -> None:
    # Another value was counted partly as the chat rendering and partly as the text one.
    manager = ContextManager(background=False)
    with pytest.raises(InvalidInputError, match="target must be 'chat' or 'text'"):
        manager.prepare("u", "s", "hello there", target=target)
    assert manager.state("u", "s").mode is None
    assert manager.store.read(SessionKey(user_id="u", session_id="s")) == []


def test_an_unknown_target_is_refused_by_aprepare_too() -> None:
    manager = ContextManager(background=False)
    with pytest.raises(InvalidInputError, match="did you mean 'text'"):
        asyncio.run(manager.aprepare("u", "s", "hello there", target="txt"))  # type: ignore[arg-type]


def test_record_refuses_a_context_that_is_not_a_prepared_one() -> None:
    # Its FinalContext or request body passed by mistake had raised AttributeError.
    manager = ContextManager(background=False)
    prepared = manager.prepare("u", "s", "hello there")
    for wrong in (prepared.context, prepared.to_request("openai", model="m"), "s"):
        with pytest.raises(InvalidInputError, match="context must be the PreparedContext"):
            manager.record("u", "s", assistant="hi", context=wrong)  # type: ignore[arg-type]
    assert manager.record("u", "s", assistant="hi", context=prepared) == [2]


@pytest.mark.parametrize(("argument", "value", "says"), [
    ("store", "sqlite:///agent.db", "open_store"),
    ("store", object(), "store must be a Store"),
    ("modes", {"default_mode": "structured"}, "modes_from_mapping"),
    ("modes", 5, "modes must be a ModesConfig"),
    ("plans", {"structured": 5}, "plans must map"),
    ("sources", "history", "sources must be a list"),
    ("sources", [5], r"sources\[0\] must be a source"),
    ("summarizer", "extractive", "summarizer must have a summarize"),
    ("recaller", 5, "recaller must have a rank"),
    ("clock", "now", "clock must be a function"),
])
def test_a_part_of_the_wrong_kind_is_refused_when_made(argument: str, value: Any,
                                                      says: str) -> None:
    # Each had failed at the first prepare (or every summary, or every recall) instead.
    with pytest.raises(ConfigurationError, match=says):
        ContextManager(**{argument: value})
