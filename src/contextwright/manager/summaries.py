"""The running summary (R-HIST-1, R-HIST-2): when to update it, and committing it safely.

Rounds older than the verbatim window are merged into the summary once ``summary_every`` of them
have piled up, or once they pass ``summary_threshold_ratio`` of the input budget. Only those new
rounds go to the summariser with the previous summary (an incremental merge, never a re-summary
of everything). A summary is committed only if it is not empty and keeps every exact fact it must
keep (``verified``); otherwise the previous summary and the original messages stay. Originals are
never deleted: the summary only moves ``summary_upto``, the point from which history is shown
verbatim.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from contextwright.compress.summarize import Summarizer, Summary, verified
from contextwright.errors import ConflictError
from contextwright.manager.turns import as_messages, split_rounds
from contextwright.modes.config import ModeSettings
from contextwright.session.state import SessionState, load_state, update_state
from contextwright.session.store import SessionKey, Store, StoredMessage
from contextwright.tokens import CountingTokenizer

logger = logging.getLogger("contextwright.session")

Outcome = Literal["committed", "nothing_to_do", "rejected", "superseded"]
_StateChange = Callable[[SessionState], SessionState]
MAX_COMMIT_ATTEMPTS = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryJob:
    """Everything one summary update needs."""

    store: Store
    """Where the session lives."""
    key: SessionKey
    """Which session."""
    settings: ModeSettings
    """The session's current mode (window size, K, threshold)."""
    summarizer: Summarizer
    """Extractive by default, or an LLM one."""
    tokenizer: CountingTokenizer
    """Counts the threshold and caps the summary."""
    threshold_tokens: int
    """Unsummarised history above this many tokens triggers an update."""
    max_tokens: int
    """Cap of the summary's rendering."""


def rounds_due(uncovered: Sequence[StoredMessage], job: SummaryJob) -> list[StoredMessage]:
    """Messages of the rounds that should be merged into the summary now (maybe none).

    The newest round (the turn in progress) and the ``window_size`` rounds before it stay out.
    """
    rounds = split_rounds(uncovered)
    older = rounds[: -max(job.settings.window_size, 1)] if rounds else []
    if not older:
        return []
    batch = [stored for round_ in older for stored in round_]
    if len(older) >= job.settings.summary_every:
        return batch
    tokens = sum(job.tokenizer.count(str(stored.message.get("content") or ""))
                 for stored in batch)
    return batch if tokens >= job.threshold_tokens else []


def update_summary(job: SummaryJob) -> Outcome:
    """Merge the due rounds into the session's summary and commit it if it passes the check."""
    _, state = load_state(job.store, job.key)
    if not job.settings.enable_summary:
        return "nothing_to_do"
    batch = rounds_due(job.store.read(job.key, after=state.summary_upto), job)
    if not batch:
        return "nothing_to_do"
    previous = Summary.from_dict(state.summary) if state.summary else None
    language = state.language or "en"
    try:
        summary = verified(job.summarizer, previous, as_messages(batch), language=language,
                           max_tokens=job.max_tokens, tokenizer=job.tokenizer)
    except Exception as exc:  # a summariser is pluggable: any failure must leave the originals
        _log("summary_rejected", job.key, reason=type(exc).__name__, detail=str(exc)[:200])
        _commit(job, state.summary_upto, lambda s: replace(
            s, summary_failures=s.summary_failures + 1))
        return "rejected"
    upto = batch[-1].seq
    outcome = _commit(job, state.summary_upto, lambda s: replace(
        s, summary=summary.to_dict(), summary_upto=upto, summary_failures=0))
    if outcome == "committed":
        _log("summary_committed", job.key, upto=upto, messages=len(batch))
    return outcome


def _commit(job: SummaryJob, based_on_upto: int, change: _StateChange) -> Outcome:
    # Other writers (prepare, another process) may change the state meanwhile: re-read and
    # re-apply, unless someone else already summarised past the point this summary started from.
    superseded = False

    def unless_superseded(state: SessionState) -> SessionState | None:
        nonlocal superseded
        superseded = state.summary_upto != based_on_upto
        return None if superseded else change(state)

    try:
        update_state(job.store, job.key, unless_superseded, attempts=MAX_COMMIT_ATTEMPTS)
    except ConflictError:
        return "superseded"
    return "superseded" if superseded else "committed"


def _log(event: str, key: SessionKey, **fields: object) -> None:
    level = logging.WARNING if event == "summary_rejected" else logging.INFO
    logger.log(level, "%s user=%s session=%s %s", event, key.user_id, key.session_id,
               " ".join(f"{k}={v}" for k, v in fields.items()),
               extra={"contextwright": {"event": event, "user_id": key.user_id,
                                        "session_id": key.session_id, **fields}})
