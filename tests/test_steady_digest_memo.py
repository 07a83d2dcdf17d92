"""The digest's known values are worked out from an earlier call's: never unlike reading afresh.

Consecutive builds of a growing history keep nearly the same items, so the values the kept
context shows are updated with the items kept or let go since (``_known_values``). Whatever
the order of calls, the answer is the union read item by item.
"""

from __future__ import annotations

import random

from contextwright import clear_caches
from contextwright.core.caches import registered_caches
from contextwright.core.items import ContextItem, Layer, Message
from contextwright.sources.history_digest import _item_keys, _known_values, _text_keys


def _items(count: int) -> list[ContextItem]:
    return [ContextItem(key=f"history.m{n}", order=float(n), layer=Layer.HISTORY,
                        message=Message(role="user", content=(
                            f"order ORD-{n % 17:04d} ships 2024-05-{n % 28 + 1:02d}, "
                            f"ticket T{n % 5}X{n % 3} for {n % 11}.50 EUR")))
            for n in range(count)]


def _read_afresh(kept: list[ContextItem], user_input: str) -> frozenset[str]:
    known = set(_text_keys(user_input)) if user_input else set()
    return frozenset(known.union(*map(_item_keys, kept)))


def test_known_values_follow_any_sequence_of_kept_items() -> None:
    clear_caches()
    pool = _items(60)
    rng = random.Random(7)
    for step in range(200):
        start = rng.randrange(0, 40)
        kept = pool[start:start + rng.randrange(0, 25)]
        if step % 3 == 0:
            kept = rng.sample(pool, rng.randrange(0, 30))
        user_input = ("what about ORD-0003?", "and T1X1 on 2024-05-02?")[step % 7 == 0]
        assert _known_values(kept, user_input, "history") == _read_afresh(kept, user_input)


def test_the_same_item_kept_twice_counts_once() -> None:
    clear_caches()
    pool = _items(8)
    assert _known_values([*pool, pool[2]], "", "turn") == _read_afresh(pool, "")
    assert _known_values(pool[3:], "", "turn") == _read_afresh(pool[3:], "")


def test_the_known_values_memo_is_registered() -> None:
    assert "sources.history_digest.known" in registered_caches()
