"""What one builder, session or user gave never reaches another through a process-wide cache.

Caches keyed by object ids must keep the keyed objects and check them, or a freed object's id,
reused, hands one builder's remembered work to another; and what a user's erased conversation
left in the recall caches must go with it.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator, Mapping
from typing import Any

from contextwright import (
    BuildPlan,
    ContextBuilder,
    ContextManager,
    MemoryStore,
    Request,
    cache_stats,
    clear_caches,
)
from contextwright.core import covering
from contextwright.core.items import ContextItem, Layer, Message
from contextwright.core.source import AddedSource, SourceTraits
from contextwright.recall.turns import RecallTurn


class TenantNotes:
    """Shows ``request.notes`` labelled with its tenant, which it takes from its options.

    Its traits are made per instance (as the manager's history source makes its own): each
    builder's source is added with its own tenant's options.
    """

    namespace = "tnotes"

    def __init__(self, tenant: str) -> None:
        self.traits = SourceTraits(request_part="notes", added=AddedSource(
            weight=0.1, options={"tenant": tenant}))

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        for i, note in enumerate(request.notes):
            yield ContextItem(key=f"tnotes.n{i}", layer=Layer.NOTES, message=Message(
                role="system", content=f"[{options['tenant']}] {note}"))


PLAN = BuildPlan.named("simple_qa")
NOTES = Request(user_input="hi", notes=["remember the meeting"])


def _tenants_shown(builder: ContextBuilder) -> set[str]:
    return set(re.findall(r"\[(tenant-[\w-]+)\]", builder.build(PLAN, NOTES).to_text()))


def test_builders_made_one_after_another_add_their_own_sources_options() -> None:
    # Each builder is freed before the next is made: its traits' id is free for the next
    # builder's traits, as in a server making a builder per tenant and request.
    wrong = []
    for n in range(40):
        tenant = f"tenant-{n}"
        builder = ContextBuilder(sources=[TenantNotes(tenant)])
        shown = _tenants_shown(builder)
        if shown != {tenant}:
            wrong.append((tenant, shown))
        del builder
        gc.collect()
    assert not wrong, f"builds showed another builder's source options: {wrong[:3]}"


def test_a_covered_plan_is_used_only_for_the_traits_it_was_made_from() -> None:
    # Deterministic form of an id reused: the remembered plan of one builder is found under
    # the key another builder's traits make.
    covering.clear_covered()
    first = TenantNotes("tenant-a")
    assert _tenants_shown(ContextBuilder(sources=[first])) == {"tenant-a"}
    (remembered,) = covering._COVERED.values()
    second = TenantNotes("tenant-b")
    builder = ContextBuilder(sources=[second])
    plan = remembered[0]  # the plan object the builder covered
    covering._COVERED[(id(plan), (("tnotes", id(second.traits)),))] = remembered
    assert _tenants_shown(builder) == {"tenant-b"}


SECRET = "ZQX-ERASE-ME-4242"


def _live_turns_with(marker: str) -> int:
    gc.collect()
    return sum(1 for found in gc.get_objects()
               if isinstance(found, RecallTurn) and marker in found.text)


def test_an_erased_users_turns_and_postings_leave_the_recall_caches() -> None:
    clear_caches()
    manager = ContextManager(MemoryStore(), background=False, max_read_messages=6)
    for t in range(30):
        manager.prepare("alice", "s1", f"turn {t}: my card note is {SECRET}-{t}, parcel P{t}")
        manager.record("alice", "s1", assistant=f"noted {SECRET}-{t}; parcel P{t} " + "ok " * 30)
    manager.prepare("alice", "s1", "what was my card note?")
    assert _live_turns_with(SECRET) > 0, "recall indexed the older turns"
    assert cache_stats()["recall.lexical.postings"].entries == 1
    manager.erase_user("alice")
    assert cache_stats()["recall.lexical.postings"].entries == 0
    assert _live_turns_with(SECRET) == 0, "the erased session's turns are still in memory"


def test_erasing_one_session_keeps_the_others_postings() -> None:
    clear_caches()
    manager = ContextManager(MemoryStore(), background=False, max_read_messages=4)
    for session in ("s1", "s2"):
        for t in range(12):
            manager.prepare("bob", session, f"{session} turn {t}: parcel P{t} went to Paris")
            manager.record("bob", session, assistant=f"{session} noted parcel P{t}")
        manager.prepare("bob", session, "where did parcel P3 go?")
    assert cache_stats()["recall.lexical.postings"].entries == 2
    manager.erase_session("bob", "s1")
    assert cache_stats()["recall.lexical.postings"].entries == 1
    assert _live_turns_with("s1 turn") == 0 and _live_turns_with("s2 turn") > 0


def test_clear_caches_frees_the_turns_a_builds_recall_kept() -> None:
    marker = "ZQX-BUILDER-7777"
    history: list[dict[str, Any]] = []
    for t in range(40):
        history += [{"role": "user", "content": f"q{t} about {marker}-{t} " + "words " * 40},
                    {"role": "assistant", "content": f"a{t} " + "reply " * 40}]
    ContextBuilder().build(BuildPlan.named("chat"), Request(
        user_input=f"what about {marker}-3?", history=history))
    del history
    assert "recall.lexical.postings" in cache_stats()
    clear_caches()
    assert cache_stats()["recall.lexical.postings"].entries == 0
    assert _live_turns_with(marker) == 0
