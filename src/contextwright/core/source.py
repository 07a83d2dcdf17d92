"""The ``ContextSource`` protocol: the seam through which anything contributes context.

A source declares what it can contribute; it never touches the message list. It yields items in
*keep order* — the item it would keep first comes first (history: newest round first; documents:
best first) — and the builder reads only as far as the budget can reach, so a source over a
100,000-message history costs what fits, not what exists. Items of one unit (a tool call and its
results) share a ``group`` and are yielded together in render order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from contextwright.core.items import ContextItem
from contextwright.core.request import Request


@runtime_checkable
class ContextSource(Protocol):
    """Anything that contributes context items. Must be safe to call from many threads."""

    @property
    def namespace(self) -> str:
        """The key prefix this source owns (``history`` owns ``history.*``)."""
        ...

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterable[ContextItem]:
        """Items for ``request`` in keep order; ``options`` come from the plan entry."""
        ...


@runtime_checkable
class DigestingSource(Protocol):
    """A source that can stand in for what a build left out with one compact item (a digest).

    Used when the plan sets the source's ``digest_share`` option: the builder keeps that share
    of the source's grant free while pruning, then, if something was left out, asks for a digest
    of it (see ``core.digest``).
    """

    def digest(self, request: Request, options: Mapping[str, Any],
               kept: Sequence[ContextItem], max_tokens: int,
               cost: Callable[[ContextItem], int]) -> ContextItem | None:
        """One item standing for what is not in ``kept``, costing at most ``max_tokens``.

        ``cost`` gives an item's exact cost as it would render. None when there is nothing
        worth saying.
        """
        ...
