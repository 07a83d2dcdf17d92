"""``ContextBuilder``: the public entry point that ties a tokenizer and sources to the pipeline.

It is also where a deployment's fence secret is read (``CONTEXTWRIGHT_FENCE_SECRET``), so every
builder of the process, the ones a ``ContextManager`` makes included, keys fences alike; the core
itself never reads the environment.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Literal

from contextwright.core.builder import build_context
from contextwright.core.fence import fence_key
from contextwright.core.final import FinalContext
from contextwright.core.plan import BuildPlan
from contextwright.core.request import Request
from contextwright.core.source import ContextSource
from contextwright.sources import builtin_sources
from contextwright.tokens import CountingTokenizer, Tokenizer, get_tokenizer

FENCE_SECRET_VARIABLE = "CONTEXTWRIGHT_FENCE_SECRET"
"""Environment variable with the deployment's fence secret (read when a builder is made)."""


class ContextBuilder:
    """Builds contexts from plans and requests. Immutable after construction; thread-safe.

    ``tokenizer`` is ``o200k_base`` (default), ``cl100k_base``, ``estimate``, a path to a
    Hugging Face ``tokenizer.json``, or any object following the ``Tokenizer`` protocol.
    ``sources`` adds custom sources or replaces built-ins, keyed by their namespace.
    ``fence_secret`` keys the fence markers of untrusted text, so they cannot be predicted from
    the source code; it defaults to the ``CONTEXTWRIGHT_FENCE_SECRET`` environment variable,
    and without either the built-in key is used. Builds with one secret are byte-identical.
    """

    def __init__(self, tokenizer: str | Tokenizer | CountingTokenizer = "o200k_base",
                 sources: Iterable[ContextSource] = (), *,
                 fence_secret: str | bytes | None = None) -> None:
        self.tokenizer = get_tokenizer(tokenizer)
        if fence_secret is None:
            fence_secret = os.environ.get(FENCE_SECRET_VARIABLE)
        self._fence_key = fence_key(fence_secret)
        registry = builtin_sources()
        for source in sources:
            registry[source.namespace] = source
        self._sources: Mapping[str, ContextSource] = MappingProxyType(dict(registry))

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
        return build_context(plan, request, self._sources, self.tokenizer, target,
                             fence_key=self._fence_key)


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
