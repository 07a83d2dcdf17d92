"""A build's recall depends on its own history only, whatever other builds run meanwhile.

Histories that start with the same message objects (a module-level system message and
few-shot examples, or one conversation a few turns apart) share turn indexes and postings. A
build reads the turns of its own history: what another build indexes meanwhile neither shows
up in it nor changes its ranking, and sessions sharing their first message keep an index each.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import contextwright.recall.history as recall_history
from contextwright import BuildPlan, ContextBuilder, Request, clear_caches
from contextwright.recall import LexicalTurnRecaller, RecallExpansion, RecallTurn, turn_index
from contextwright.sources import HistorySource

SYSTEM = {"role": "system", "content": "You are a support agent."}
"""One module-level dict every history starts with."""
FEW_SHOT = [{"role": "user", "content": "How do I reset my password?"},
            {"role": "assistant", "content": "Click 'forgot password' on the login page."}]
QUESTION = "which parcel went to Berlin?"


def turns(prefix: str, n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        city = "Paris" if i % 3 else "Berlin"
        out += [{"role": "user", "content": f"{prefix} question {i}: where is parcel P{i}?"},
                {"role": "assistant", "content": f"{prefix} answer {i}: parcel P{i} is in "
                 f"{city} " + "filler " * 40}]
    return out


A = [SYSTEM, *turns("alpha", 40)]
LONGER = A + turns("beta Berlin Berlin parcel", 200)
"""The same conversation much later (or a branch of it), starting with A's very objects."""


def test_a_view_keeps_the_turns_of_its_history_while_a_longer_one_is_indexed() -> None:
    clear_caches()
    view = turn_index(A)
    held = list(view.turns)
    longer = turn_index(LONGER)
    assert len(longer.turns) > len(held)
    assert list(view.turns) == held and len(view.ends) == len(view.tokens) == len(held)
    assert len(view.calls_after) == len(held) and view.ends[-1] <= len(A)


def test_a_shorter_list_ranks_as_if_the_longer_one_was_never_indexed() -> None:
    recaller = LexicalTurnRecaller(expansion=RecallExpansion())
    clear_caches()
    expected = (recaller.rank(QUESTION, turn_index(A).turns, limit=8),
                recaller.focus(QUESTION, turn_index(A).turns, limit=8))
    clear_caches()
    shorter = turn_index(A)
    recaller.rank(QUESTION, turn_index(LONGER).turns, limit=8)  # the postings grow past A's
    assert (recaller.rank(QUESTION, shorter.turns, limit=8),
            recaller.focus(QUESTION, shorter.turns, limit=8)) == expected
    assert all(position < len(shorter.turns) for position, _ in expected[0])


class PausingRecaller(LexicalTurnRecaller):
    """Ranks like the default recaller; on the thread named "A" it first waits for a go."""

    def __init__(self) -> None:
        super().__init__(expansion=RecallExpansion())
        self.pause: tuple[threading.Event, threading.Event] | None = None
        self.lengths: list[tuple[str, int]] = []

    def rank(self, query: str, turns: Sequence[RecallTurn], *, limit: int,
             now: str | None = None) -> list[tuple[int, float]]:
        if self.pause is not None and threading.current_thread().name == "A":
            reached, go = self.pause
            reached.set()
            assert go.wait(10)
        self.lengths.append((threading.current_thread().name, len(turns)))
        return super().rank(query, turns, limit=limit, now=now)


@pytest.mark.parametrize("other", [LONGER, [SYSTEM, *turns("other user", 120)]],
                         ids=["longer-conversation", "another-session"])
def test_a_build_paused_while_another_runs_shows_what_it_shows_alone(
        other: list[dict[str, Any]]) -> None:
    recaller = PausingRecaller()
    builder = ContextBuilder(sources=[HistorySource(recaller=recaller)])
    plan = BuildPlan.named("chat").with_budget(window=2048)

    def build(history: list[dict[str, Any]]) -> tuple[str, list[str]]:
        ctx = builder.build(plan, Request(user_input=QUESTION, history=history))
        return (json.dumps(ctx.to_messages(), ensure_ascii=False),
                [d.reason for d in ctx.report.decisions if d.reason.startswith("recalled")])

    clear_caches()
    alone = build(A)
    assert alone[1], "the question recalls older turns"
    clear_caches()
    reached, go = threading.Event(), threading.Event()
    recaller.pause = (reached, go)
    result: dict[str, tuple[str, list[str]]] = {}

    def build_other() -> None:
        assert reached.wait(10)
        try:
            result["other"] = build(other)
        finally:
            go.set()

    threads = [threading.Thread(target=lambda: result.__setitem__("A", build(A)), name="A"),
               threading.Thread(target=build_other, name="other")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert "other" in result and result["A"] == alone
    assert {length for name, length in recaller.lengths if name == "A"} == {
        len(turn_index(A).turns)}


def _user_history(user: int, rounds: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for t in range(rounds):
        city = ("Paris", "Berlin", "Lima", "Oslo")[(user + t) % 4]
        messages += [{"role": "user", "content": f"user{user} round {t}: parcel U{user}-{t} "
                      f"for {city}?"},
                     {"role": "assistant", "content": f"U{user}-{t} is in {city}. "
                      + "details " * (5 + (user * 7 + t) % 20)}]
    return messages


def test_concurrent_builds_of_histories_sharing_their_first_messages_are_each_as_alone(
) -> None:
    # Users whose histories all start with the same system and few-shot objects, each built at
    # several lengths (the same list objects, growing): every build on 6 threads renders what
    # it renders alone in a cold process.
    users = {user: _user_history(user, 30) for user in range(8)}
    builder = ContextBuilder()
    plan = BuildPlan.named("chat").with_budget(window=1500)
    tasks = [(user, rounds) for rounds in range(6, 31, 4) for user in users]

    def run(task: tuple[int, int]) -> str:
        user, rounds = task
        history = [SYSTEM, *FEW_SHOT, *users[user][:2 * rounds]]
        ctx = builder.build(plan, Request(user_input=f"where did parcel U{user}-3 go?",
                                          history=history))
        return json.dumps(ctx.to_messages(), ensure_ascii=False)

    expected = {}
    for task in tasks:
        clear_caches()
        expected[task] = run(task)
    clear_caches()
    order = tasks * 6  # 336 builds
    with ThreadPoolExecutor(6) as pool:
        built = list(pool.map(run, order))
    wrong = [task for task, rendered in zip(order, built, strict=True)
             if rendered != expected[task]]
    assert not wrong, f"{len(wrong)} builds differ from the build alone, e.g. {wrong[:3]}"


def test_sessions_sharing_their_first_message_keep_an_index_each(
        monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = 0
    parse = recall_history.parse_fresh

    def counting(raw: Any, where: str) -> Any:
        nonlocal parsed
        parsed += 1
        return parse(raw, where)

    monkeypatch.setattr(recall_history, "parse_fresh", counting)
    clear_caches()
    first, second = [SYSTEM, *turns("alpha", 300)], [SYSTEM, *turns("beta", 300)]
    turn_index(first), turn_index(second)
    parsed = 0
    for n in range(6):  # each session gains a round, alternately
        first += turns(f"alpha more {n}", 1)
        second += turns(f"beta more {n}", 1)
        assert len(turn_index(first).turns) == 300 + n
        assert len(turn_index(second).turns) == 300 + n
    assert parsed == 6 * 2 * 2, "only the messages appended since each session's last build"
