"""ContextManager's own arguments are checked when it is made, not at its first call."""

from __future__ import annotations

from typing import Any

import pytest

from contextwright.errors import InvalidInputError
from contextwright.manager import ContextManager


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
