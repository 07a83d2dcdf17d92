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

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.core import covering
from contextwright.core.items import ContextItem, Layer, Message
from contextwright.core.source import AddedSource, SourceTraits


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
