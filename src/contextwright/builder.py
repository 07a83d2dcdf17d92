"""``ContextBuilder``: the public entry point that ties a tokenizer and sources to the pipeline.

It is also where a deployment's fence secret is read (``CONTEXTWRIGHT_FENCE_SECRET``), so every
builder of the process, the ones a ``ContextManager`` makes included, keys fences alike; the core
itself never reads the environment.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from contextwright.core.builder import build_context
from contextwright.core.fence import fence_key
from contextwright.core.final import FinalContext
from contextwright.core.plan import BuildPlan
from contextwright.core.request import Request
from contextwright.core.source import ContextSource
from contextwright.errors import PlanError
from contextwright.models import model_profile, profile_tokenizer
from contextwright.sources import builtin_sources
from contextwright.tokens import CountingTokenizer, Tokenizer, get_tokenizer

if TYPE_CHECKING:
    from contextwright.observe import SnapshotRecorder, SnapshotSink

FENCE_SECRET_VARIABLE = "CONTEXTWRIGHT_FENCE_SECRET"
"""Environment variable with the deployment's fence secret (read when a builder is made)."""


class ContextBuilder:
    """Builds contexts from plans and requests. Immutable after construction; thread-safe.

    ``tokenizer`` is ``o200k_base`` (default), ``cl100k_base``, ``estimate``, a path to a
    Hugging Face ``tokenizer.json``, or any object following the ``Tokenizer`` protocol.
    ``model`` (``gpt-4o``, ``claude-sonnet-4-5``, see ``contextwright.models``) sets the
    tokenizer, every plan's window and output reserve from the model's profile, and the model
    the requests name; ``window`` / ``reserved_output`` override those (with or without a
    model), while each plan's weights and safety ratio still apply.
    ``sources`` adds custom sources or replaces built-ins, keyed by their namespace.
    ``fence_secret`` keys the fence markers of untrusted text, so they cannot be predicted from
    the source code; it defaults to the ``CONTEXTWRIGHT_FENCE_SECRET`` environment variable,
    and without either the built-in key is used. Builds with one secret are byte-identical.
    ``snapshots`` (a ``SnapshotSink`` or ``SnapshotRecorder``, see ``contextwright.observe``)
    records every build off the request path; ``self.snapshots`` is its recorder.
    """

    def __init__(self, tokenizer: str | Tokenizer | CountingTokenizer | None = None,
                 sources: Iterable[ContextSource] = (), *,
                 model: str | None = None, window: int | None = None,
                 reserved_output: int | None = None,
                 fence_secret: str | bytes | None = None,
                 snapshots: SnapshotRecorder | SnapshotSink | None = None) -> None:
        from contextwright.observe.recorder import as_recorder

        self.snapshots = as_recorder(snapshots)
        self.model = model
        self._profile = model_profile(model) if model is not None else None
        if tokenizer is None:
            self.tokenizer = (profile_tokenizer(self._profile) if self._profile is not None
                              else get_tokenizer("o200k_base"))
        else:
            self.tokenizer = get_tokenizer(tokenizer)
        self._budget = self._model_budget(window, reserved_output)
        if fence_secret is None:
            fence_secret = os.environ.get(FENCE_SECRET_VARIABLE)
        self._fence_key = fence_key(fence_secret)
        registry = builtin_sources()
        for source in sources:
            registry[source.namespace] = source
        self._sources: Mapping[str, ContextSource] = MappingProxyType(dict(registry))

    def _model_budget(self, window: int | None, reserved_output: int | None) -> dict[str, int]:
        """Budget fields that replace every plan's: the model's, or the ones given."""
        profile = self._profile
        budget: dict[str, int] = {}
        if profile is not None:
            budget = {"window": profile.window, "reserved_output": profile.default_output}
        if window is not None:
            budget["window"] = window
        if reserved_output is not None:
            budget["reserved_output"] = reserved_output
        if profile is not None and budget["reserved_output"] > profile.max_output:
            raise PlanError(f"model {profile.name} writes at most {profile.max_output} tokens; "
                            f"reserved_output {budget['reserved_output']} is more")
        return budget

    async def abuild(self, plan: BuildPlan, request: Request, *,
                     target: Literal["chat", "text"] = "chat") -> FinalContext:
        """``build`` for an event loop, with the same result.

        The build is CPU work; it runs on a worker thread, so the loop never waits for it.
        """
        return await asyncio.to_thread(self.build, plan, request, target=target)

    def effective_plan(self, plan: BuildPlan) -> BuildPlan:
        """``plan`` as this builder builds it: its window and output reserve set to the model's.

        Or to the ``window`` / ``reserved_output`` given to the builder.
        """
        effective = plan.with_budget(**self._budget) if self._budget else plan
        profile, budget = self._profile, effective.budget
        if profile is not None and budget.reserved_output + budget.reserved_reasoning > (
                profile.max_output):
            raise PlanError(f"plan {plan.name}: output and reasoning reserves "
                            f"({budget.reserved_output} + {budget.reserved_reasoning}) exceed the "
                            f"{profile.max_output} tokens {profile.name} can write")
        return effective

    @property
    def sources(self) -> Mapping[str, ContextSource]:
        """Registered sources by namespace."""
        return self._sources

    def build(self, plan: BuildPlan, request: Request, *,
              target: Literal["chat", "text"] = "chat") -> FinalContext:
        """Build the context for one model call.

        ``target`` is the rendering the budget is counted for: ``chat`` (OpenAI and Anthropic
        messages, the default) or ``text`` (``FinalContext.to_text()``).
        """
        plan = self.effective_plan(plan)
        run = partial(build_context, plan, request, self._sources, self.tokenizer, target,
                      fence_key=self._fence_key)
        context = run() if self.snapshots is None else self.snapshots.record_build(
            run, plan, request, self.tokenizer.name)
        return replace(context, model=self.model) if self.model is not None else context


def clear_caches() -> None:
    """Forget every remembered parse, item, rendering and token count of this process.

    The caches make re-reading a long history cheap; clearing them frees their memory and
    makes the next build a cold one (benchmarks use this).
    """
    from contextwright.core import gather, items
    from contextwright.sources import conversation, tools
    from contextwright.tokens import CountingTokenizer

    items._PARSED.clear()
    gather._CANDIDATES.clear()
    conversation._ITEMS.clear()
    conversation._BLOCKS.clear()
    conversation._OPTION_KEYS.clear()
    tools._SCHEMA_JSON.clear()
    for cache in CountingTokenizer._caches.values():
        cache.clear()
    from contextwright.compress.json_compact import _compact_cached
    from contextwright.compress.tool_results import _line_cached, _reduce_cached
    from contextwright.sources.recall import clear_recall_caches

    _compact_cached.cache_clear()
    _reduce_cached.cache_clear()
    _line_cached.cache_clear()
    tools._schema_terms.cache_clear()
    clear_recall_caches()
    from contextwright.sources import history_digest

    history_digest._ITEM_KEYS.clear()
    history_digest._MESSAGE_FACTS.clear()
    for cached in (history_digest._values, history_digest._text_keys, history_digest._key,
                   history_digest._value_rank, conversation._estimate):
        cached.cache_clear()
