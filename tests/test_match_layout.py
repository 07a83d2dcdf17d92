"""Finding an earlier layout again among units, many of which render alike."""

from __future__ import annotations

import random

from contextwright.core.gather import Candidate, Unit
from contextwright.core.items import ContextItem, Layer, Message
from contextwright.core.stable import _first_order, candidate_hash, match_layout


def _unit(key: str, order: float, texts: list[str]) -> Unit:
    candidates = [Candidate(item=ContextItem(key=f"{key}.{i}", message=Message(
        role="user" if i % 2 == 0 else "assistant", content=text), layer=Layer.HISTORY,
        order=order + i), message=Message(role="user" if i % 2 == 0 else "assistant",
                                          content=text), tokens=len(text))
                  for i, text in enumerate(texts)]
    return Unit(source="history", candidates=candidates, round=None, rank=0)


def _reference(hashes: list[str], pool: list[Unit]) -> tuple[list[Unit], int | None]:
    """The plain search: every unit that fits, looked at for every message."""
    rendered = {id(u): [candidate_hash(c) for c in sorted(u.candidates,
                                                          key=lambda c: c.item.order)]
                for u in pool}
    units: list[Unit] = []
    shown: set[str] = set()
    index, last = 0, float("-inf")
    while index < len(hashes):
        fits = [u for u in pool if rendered[id(u)][0] == hashes[index]
                and not any(c.item.key in shown for c in u.candidates)
                and hashes[index:index + len(rendered[id(u)])] == rendered[id(u)]]
        found = min((u for u in fits if _first_order(u) > last), key=_first_order,
                    default=fits[0] if fits else None)
        if found is None:
            return units, index
        last = max(last, _first_order(found))
        shown.update(c.item.key for c in found.candidates)
        units.append(found)
        index += len(found.candidates)
    return units, None


def test_the_layout_found_among_alike_units_is_the_plain_searchs() -> None:
    rng = random.Random(7)
    for trial in range(300):
        texts = ["What was the tracking number again?", "answer", "ok", "thanks", "hi"]
        pool = [_unit(f"u{trial}.{n}", rng.choice([n, n, rng.randrange(40)]) * 10,
                      [rng.choice(texts) for _ in range(rng.choice([1, 2, 2, 3]))])
                for n in range(rng.randrange(1, 40))]
        rng.shuffle(pool)
        shown = rng.sample(pool, rng.randrange(0, len(pool) + 1))
        hashes = [candidate_hash(c) for u in shown
                  for c in sorted(u.candidates, key=lambda c: c.item.order)]
        if hashes and rng.random() < 0.3:
            hashes.insert(rng.randrange(len(hashes)), "not in the pool")
        got, missing = match_layout(hashes, pool)
        want, want_missing = _reference(hashes, pool)
        assert [id(u) for u in got] == [id(u) for u in want] and missing == want_missing, trial
