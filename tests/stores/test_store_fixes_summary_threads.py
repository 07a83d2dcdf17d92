"""``summary_threads``: summary updates of many sessions run side by side, one per session.

A model-backed summariser takes seconds; with one thread, a busy service's updates queue behind
each other and the summaries fall behind the conversations.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest
from store_workers import Backend

from contextwright.compress.summarize import ExtractiveSummarizer, Summary
from contextwright.core.items import Message
from contextwright.errors import InvalidInputError
from contextwright.manager import ContextManager
from contextwright.tokens import Tokenizer


class _SlowSummarizer:
    """The extractive summariser, as slow as a model call, counting the calls under way."""

    def __init__(self) -> None:
        self.inner = ExtractiveSummarizer()
        self.lock = threading.Lock()
        self.running: dict[str, int] = {}
        self.most = 0
        self.most_per_session = 0

    def summarize(self, previous: Summary | None, messages: Sequence[Message], *,
                  language: str, max_tokens: int | None = None,
                  tokenizer: Tokenizer | None = None) -> Summary:
        session = str(messages[0].content).split()[0]
        with self.lock:
            self.running[session] = self.running.get(session, 0) + 1
            self.most = max(self.most, sum(self.running.values()))
            self.most_per_session = max(self.most_per_session, self.running[session])
        try:
            time.sleep(0.15)
            return self.inner.summarize(previous, messages, language=language,
                                        max_tokens=max_tokens, tokenizer=tokenizer)
        finally:
            with self.lock:
                self.running[session] -= 1


def test_summary_updates_of_sessions_run_side_by_side_one_per_session(
        backend: Backend) -> None:
    slow = _SlowSummarizer()
    cm = ContextManager(store=backend.make(), summarizer=slow, summary_threads=4)
    sessions = [f"s{index}" for index in range(6)]
    for turn in range(14):
        for session in sessions:
            cm.prepare("u", session, f"{session} asks about widget W-{turn:04d} and its price")
            cm.record("u", session, assistant=f"{session} hears: W-{turn:04d} costs ${turn}.99")
    cm.flush()
    cm.close()
    assert slow.most > 1  # sessions summarised side by side
    assert slow.most_per_session == 1  # never two updates of one session at once
    assert all(cm.state("u", session).summary_upto > 0 for session in sessions)


def test_summary_threads_must_be_a_positive_integer() -> None:
    for bad in (0, -1, True, 1.5):
        with pytest.raises(InvalidInputError, match="summary_threads"):
            ContextManager(summary_threads=bad)  # type: ignore[arg-type]
