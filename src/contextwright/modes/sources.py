"""The ``session`` source: what a session remembers, as context items.

One source instance is made per prepared call from that session's state, so the builder sees the
mode instruction, the output rules, the facts zone (with hand-off summaries), the task and tools
zones and the running summary like any other part. Everything derived from the conversation or
from tools is marked untrusted, so it is fenced as data: a fact copied from a tool result must not
gain the authority of the system prompt. The mode instruction and output rules come from the
developer's config and are plain system text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from contextwright.core.items import ContextItem, Layer, Message
from contextwright.core.request import Request
from contextwright.core.source import SourceTraits
from contextwright.modes.config import ModeSettings
from contextwright.modes.zones import Zones, render_zone

NAMESPACE = "session"


class SessionMemorySource:
    """Yields, most important first: instruction, output rules, facts, task, tools, summary."""

    namespace = NAMESPACE
    volatile = True
    """The summary and zones change as the session goes on: rendered after the stable part
    (the mode's instruction and output rules, marked ``stable``, stay in the system prompt)."""
    traits = SourceTraits(volatile=True,
                          labels=MappingProxyType({"en": "Session", "zh": "会话"}))
    """Its part is headed in the conversation's language (``=== 会话 ===``) like the others."""

    def __init__(self, *, settings: ModeSettings, zones: Zones, summary_text: str,
                 language: str, unread: tuple[int, int, str] | None = None) -> None:
        """``unread``: (first seq, last seq, why) of stored messages the build never had.

        They are reported as one left-out run, never lost silently.
        """
        self._settings = settings
        self._zones = zones
        self._summary_text = summary_text
        self._language = language
        self._unread = unread

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """The session's items (nothing for an empty part)."""
        settings, zones, language = self._settings, self._zones, self._language
        if settings.instruction:
            yield _item("instruction", settings.instruction, trusted=True, order=0)
        if settings.zones:
            # Trusted system parts get the builder's own localised heading ([输出区]).
            output = render_zone("output", zones, language, settings.output, heading=False)
            if output:
                yield _item("output", output, trusted=True, order=1)
        facts = render_zone("facts", zones, language)
        if facts:
            yield _item("facts", facts, order=2)
        if settings.zones:
            # The tools zone is labelled apart from the tool definitions ("Tools").
            for order, (name, label) in enumerate((("task", "task"), ("tools", "tool_calls")),
                                                  start=3):
                text = render_zone(name, zones, language)
                if text:
                    yield _item(name, text, order=order, label=label)
        if self._summary_text:
            yield _item("summary", self._summary_text, order=5)
        if self._unread is not None:
            first, last, why = self._unread
            yield ContextItem(key=f"{NAMESPACE}.*", message=Message(role="system", content=""),
                              layer=Layer.EVIDENCE, order=6, metadata={
                                  "omitted": f"{why}; not read (session seq {first}–{last})",
                                  "omitted_count": last - first + 1})


def _item(name: str, text: str, *, order: int, trusted: bool = False,
          label: str | None = None) -> ContextItem:
    # The developer's instruction and output rules are trusted and change only with the mode:
    # they stay in the system prompt even in a build that keeps a stable prefix.
    return ContextItem(
        key=f"{NAMESPACE}.{name}", message=Message(role="system", content=text),
        layer=Layer.SYSTEM if trusted else Layer.EVIDENCE, order=order,
        untrusted=not trusted, truncatable=not trusted, label=label or name,
        metadata={"stable": True} if trusted else {},
    )
