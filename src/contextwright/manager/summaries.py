"""The running summary: when to update it, and committing it safely.

Rounds older than the verbatim window are merged into the summary once ``summary_every`` of them
have piled up, or once they pass ``summary_threshold_ratio`` of the input budget. Only those new
rounds go to the summariser with the previous summary (an incremental merge, never a re-summary
of everything). A summary is committed only if it is not empty and keeps every exact fact it must
keep (``verified``); otherwise the previous summary and the original messages stay. Originals are
never deleted: the summary only moves ``summary_upto``, the point from which history is shown
verbatim. Nor is a summary committed to a session erased or restarted while it was being
written: the write is conditioned on the session's epoch as the job first read it. The update is
a flow (``summary_update``): its store calls are steps, and the summariser runs as a computation
(on a worker thread under an event loop), so it runs over sync and async stores alike.

The work of one update is bounded: it merges at most ``MAX_BATCH_ROUNDS`` rounds (the oldest due;
the next update takes the rest) and, from a store that reads by seq, reads only the two ends of a
long backlog (``BACKLOG_TAIL`` newest, ``BACKLOG_HEAD`` oldest messages); after ``FREE_RETRIES``
failures in a row it retries only in the round that brings the unsummarised messages to a power
of two in number. A batch that keeps failing then costs a few attempts per doubling of the
session, not an ever larger attempt per record, and its originals stay shown meanwhile, so
nothing is lost (``summarize_now`` always tries).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Literal

from contextwright.compress.summarize import Summarizer, Summary, verified
from contextwright.errors import ConflictError, SessionGone
from contextwright.manager.turns import as_messages, split_rounds
from contextwright.modes.config import ModeSettings
from contextwright.session import flow
from contextwright.session.flow import Flow, run_flow
from contextwright.session.state import SessionState, read_state
from contextwright.session.store import SessionKey, StateRecord, Store, StoredMessage
from contextwright.tokens import CountingTokenizer

logger = logging.getLogger("contextwright.session")

Outcome = Literal["committed", "nothing_to_do", "deferred", "rejected", "superseded",
                  "session_gone"]
_StateChange = Callable[[SessionState], SessionState]
MAX_COMMIT_ATTEMPTS = 5
MAX_BATCH_ROUNDS = 40
"""Rounds merged by one update at most: the oldest due ones, so each update's work is bounded."""
BACKLOG_TAIL = 400
"""Unsummarised messages an update reads first, the newest: when they are all there are, as in
a session whose summary keeps up, it reads nothing more."""
BACKLOG_HEAD = 2_000
"""Oldest unsummarised messages (by seq) a longer backlog's update reads for its batch."""
FREE_RETRIES = 3
"""Failed updates in a row after which an update backs off (see ``retry_due``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryJob:
    """Everything one summary update needs."""

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

    The newest round (the turn in progress) and the ``window_size`` rounds before it stay out;
    at most the oldest ``MAX_BATCH_ROUNDS`` rounds are taken.
    """
    return next(due_batches(uncovered, job), [])


def due_batches(uncovered: Sequence[StoredMessage], job: SummaryJob
                ) -> Iterator[list[StoredMessage]]:
    """The batches successive updates would merge, oldest first (each one ``rounds_due``).

    The first is ``rounds_due(uncovered)``; each next one is what ``rounds_due`` gives once the
    batches before it are merged. The rounds are split once, so catching up a long backlog
    costs its length, not its length per batch.
    """
    rounds = split_rounds(uncovered)
    older = rounds[: -max(job.settings.window_size, 1)] if rounds else []
    for start in range(0, len(older), MAX_BATCH_ROUNDS):
        if len(older) - start < job.settings.summary_every:  # the rest: due by its tokens only
            rest = [stored for round_ in older[start:] for stored in round_]
            tokens = sum(job.tokenizer.count(message.content) for message in as_messages(rest))
            if tokens < job.threshold_tokens:
                return
        yield [stored for round_ in older[start:start + MAX_BATCH_ROUNDS] for stored in round_]


def retry_due(failures: int, upto: int, newest: Sequence[StoredMessage]) -> bool:
    """Whether an update tries again after ``failures`` failed ones in a row.

    ``newest``: the newest unsummarised messages (after seq ``upto``), oldest first. The first
    ``FREE_RETRIES`` tries are free (a model may have had a passing fault); then only in the
    round that brought the unsummarised messages to a power of two in number. Nothing is stored
    for it and nothing more is read: the count grows with every message, so the tries thin out
    on their own, one round per doubling of the backlog.
    """
    if failures < FREE_RETRIES or not newest:
        return True
    now = newest[-1].seq - upto
    round_start = next((stored.seq for stored in reversed(newest)
                        if stored.message.get("role") == "user"), newest[0].seq)
    before = round_start - 1 - upto
    return before.bit_length() < now.bit_length()  # a power of two in (before, now]


def update_summary(store: Store, job: SummaryJob, *, force: bool = False) -> Outcome:
    """``summary_update`` on a sync store."""
    return run_flow(summary_update(job, force=force), store)


def summary_update(job: SummaryJob | Callable[[SessionState], SummaryJob],
                   key: SessionKey | None = None, *, force: bool = False,
                   catch_up: bool = False) -> Flow[Outcome]:
    """Merge the due rounds into the session's summary and commit it if it passes the check.

    ``job`` may be made from the state the update reads (the session's mode says how it is
    summarised): pass a function of the state and the session's ``key``. The state is then
    read once per update; a summary update runs after every ``record``. After repeated
    failures it is ``deferred`` unless ``retry_due`` (``force``: try anyway).

    One update merges one batch (``rounds_due``). ``catch_up`` merges every batch that is due,
    one after the other (each summariser call still sees one batch), from one read of the
    session, and commits once: what a run of updates would reach, for a session whose backlog
    is long (a conversation imported whole). A batch that fails stops it; the batches merged
    before it are committed, with the failure counted.
    """
    where = job.key if isinstance(job, SummaryJob) else key
    if where is None:
        raise ValueError("summary_update: a job made from the state needs the session's key")
    if isinstance(job, SummaryJob) and not job.settings.enable_summary:
        return "nothing_to_do"
    epoch = yield from flow.epoch(where)  # first: all read after it is of it, or a later one
    if epoch is None:
        return "nothing_to_do"
    record, state = yield from read_state(where)
    if not isinstance(job, SummaryJob):
        job = job(state)
        if not job.settings.enable_summary:
            return "nothing_to_do"
    upto = state.summary_upto
    newest = yield from flow.read(job.key, after=upto, last=None if catch_up else BACKLOG_TAIL)
    if newest and not (force or retry_due(state.summary_failures, upto, newest)):
        return "deferred"
    backlog = yield from _unsummarised(job, epoch, upto, newest, whole=catch_up)
    if backlog is None:
        return "nothing_to_do"  # erased meanwhile
    batches = due_batches(backlog.messages, job) if backlog.batch is None else iter(())
    batch = backlog.batch or (yield from flow.compute(lambda: next(batches, [])))
    if not batch:
        return "nothing_to_do"
    previous = Summary.from_dict(state.summary) if state.summary else None
    merged = yield from _merge(job, previous, batch, batches if catch_up else iter(()),
                               state.language or "en")
    if merged.last is None or merged.summary is None:  # the first batch failed: only that
        basis = _Basis(epoch=epoch, had_state=record is not None,
                       summary_upto=state.summary_upto, last_summarised=batch[-1])
        yield from _commit(job, basis, lambda s: replace(
            s, summary_failures=s.summary_failures + 1))
        return "rejected"
    basis = _Basis(epoch=epoch, had_state=record is not None, summary_upto=state.summary_upto,
                   last_summarised=merged.last)
    summary, upto, failures = merged.summary, merged.last.seq, int(merged.failed)
    outcome = yield from _commit(job, basis, lambda s: replace(
        s, summary=summary.to_dict(), summary_upto=upto, summary_failures=failures))
    if outcome == "committed":
        _log("summary_committed", job.key, upto=upto, messages=merged.messages)
    return "rejected" if outcome == "committed" and merged.failed else outcome


@dataclass(frozen=True, slots=True)
class _Backlog:
    """What an update read of the unsummarised messages."""

    messages: list[StoredMessage]
    """All of them, oldest first; or, when ``batch`` is set, the oldest ones."""
    batch: list[StoredMessage] | None
    """What ``rounds_due`` gives of all of them, when only the backlog's ends were read."""
    newest: list[StoredMessage]
    """The newest ones (all of them when they are few)."""


def _unsummarised(job: SummaryJob, epoch: str, upto: int, tail: list[StoredMessage], *,
                  whole: bool) -> Flow[_Backlog | None]:
    """The unsummarised messages an update reads (None: the session is gone meanwhile).

    ``tail``: the newest ``BACKLOG_TAIL`` of them, or all of them when ``whole``. A session
    whose summary keeps up has fewer: that is all. A long backlog (a conversation imported
    whole) is read at its two ends: the newest messages say where the verbatim window starts,
    the oldest, read by seq, hold the batch. Reading it all made every update cost the
    backlog's length, once per ``record`` until the summary caught up.
    """
    if whole or len(tail) < BACKLOG_TAIL:
        return _Backlog(messages=tail, batch=None, newest=tail)
    try:
        head = yield from flow.read_spans(job.key, [(upto + 1, upto + BACKLOG_HEAD)],
                                          epoch=epoch)
    except AttributeError:  # a store that cannot read by seq: read it all
        head = []
    else:
        if head is None:
            return None
    if head:
        if upto + BACKLOG_HEAD >= tail[0].seq - 1:  # the two ends meet: that is all of them
            rest = [stored for stored in tail if stored.seq > upto + BACKLOG_HEAD]
            return _Backlog(messages=[*head, *rest], batch=None, newest=tail)
        batch = _batch_of_head(head, tail, job)
        if batch is not None:
            return _Backlog(messages=head, batch=batch, newest=tail)
    everything = yield from flow.read(job.key, after=upto)
    return _Backlog(messages=everything, batch=None, newest=tail)


def _batch_of_head(head: list[StoredMessage], tail: list[StoredMessage], job: SummaryJob
                   ) -> list[StoredMessage] | None:
    """``rounds_due`` of a backlog of which ``head`` is the start and ``tail`` the end.

    None when the two do not tell: the window's rounds do not all lie in ``tail``, or ``head``
    holds too few whole rounds to make the batch without the rest.
    """
    window = max(job.settings.window_size, 1)
    starts = sum(stored.message.get("role") == "user" for stored in tail)
    if starts < window:
        return None
    whole_rounds = split_rounds(head)[:-1]  # the last may go on past the head
    if len(whole_rounds) < max(MAX_BATCH_ROUNDS, job.settings.summary_every):
        return None
    return [stored for round_ in whole_rounds[:MAX_BATCH_ROUNDS] for stored in round_]


@dataclass(frozen=True, slots=True)
class _Merged:
    """What merging batches gave: the summary and the newest message it covers (None: none)."""

    summary: Summary | None
    last: StoredMessage | None
    messages: int
    """Messages merged."""
    failed: bool
    """Whether a batch failed (merging stopped there)."""


def _merge(job: SummaryJob, previous: Summary | None, first: list[StoredMessage],
           more: Iterator[list[StoredMessage]], language: str) -> Flow[_Merged]:
    """Merge ``first``, then each batch of ``more`` while they pass ``verified``."""
    summary, last, messages = previous, None, 0
    batch: list[StoredMessage] = first
    while batch:
        into = summary
        try:  # the summariser may call a model: on a thread
            summary = yield from flow.compute(
                partial(_verified, job, into, batch, language), where="thread")
        except Exception as exc:  # a summariser is pluggable: any failure must leave originals
            _log("summary_rejected", job.key, reason=type(exc).__name__, detail=str(exc)[:200])
            return _Merged(summary=into, last=last, messages=messages, failed=True)
        last, messages = batch[-1], messages + len(batch)
        batch = yield from flow.compute(lambda: next(more, []))
    return _Merged(summary=summary, last=last, messages=messages, failed=False)


def _verified(job: SummaryJob, previous: Summary | None, batch: list[StoredMessage],
              language: str) -> Summary:
    return verified(job.summarizer, previous, as_messages(batch), language=language,
                    max_tokens=job.max_tokens, tokenizer=job.tokenizer)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Basis:
    """The session as the job read it; the job's result may be committed only while it stands."""

    epoch: str
    """The incarnation of the session the job read."""
    had_state: bool
    """Whether the session had a state record."""
    summary_upto: int
    """Where the summary the job merged into ended."""
    last_summarised: StoredMessage
    """The newest message the job summarised (its seq becomes ``summary_upto``)."""


def _commit(job: SummaryJob, basis: _Basis, change: _StateChange) -> Flow[Outcome]:
    # Other writers (prepare, another process) may change the state meanwhile: re-read and
    # re-apply under the state's version. The summary is stale if someone else already
    # summarised past ``basis``, or if the session was erased or restarted while it ran: writing
    # then would bring back erased facts and hide the new session's first messages.
    for _ in range(MAX_COMMIT_ATTEMPTS):
        record, state = yield from read_state(job.key)
        stale = yield from _why_stale(job, basis, record, state)
        if stale is not None:
            return stale
        new_state = change(state)
        if new_state == state:
            return "committed"
        try:
            yield from flow.put_state(job.key, new_state.to_dict(),
                                      expected_version=record.version if record else None,
                                      epoch=basis.epoch)
        except ConflictError:
            continue
        except SessionGone:
            _log("summary_discarded", job.key, reason="session_gone")
            return "session_gone"
        return "committed"
    return "superseded"


def _why_stale(job: SummaryJob, basis: _Basis, record: StateRecord | None,
               state: SessionState) -> Flow[Outcome | None]:
    if basis.had_state and record is None:
        _log("summary_discarded", job.key, reason="session_gone")
        return "session_gone"  # erased, or expired (an expired session reads as absent)
    if state.summary_upto != basis.summary_upto:
        return "superseded"
    if not (yield from _still_stored(job, basis.last_summarised, basis.epoch)):
        _log("summary_discarded", job.key, reason="session_gone")
        return "session_gone"
    return None


def _still_stored(job: SummaryJob, message: StoredMessage, epoch: str) -> Flow[bool]:
    # The log is append-only, so while a session lives the message at a seq never changes; an
    # erase removes it and a restart (after an erase or a TTL expiry) numbers from 1 again, so
    # the seq holds another message (appended later: another created_at) or none.
    try:
        found = yield from flow.read_spans(job.key, [(message.seq, message.seq)],
                                           epoch=epoch)
    except AttributeError:  # a store that cannot read by seq: everything from it on
        found = yield from flow.read(job.key, after=message.seq - 1, last=None)
    if not found:  # None: that incarnation of the session is gone
        return False
    return found[0].seq == message.seq and (
        found[0].created_at == message.created_at and found[0].message == message.message)


def _log(event: str, key: SessionKey, **fields: object) -> None:
    level = logging.WARNING if event == "summary_rejected" else logging.INFO
    logger.log(level, "%s user=%s session=%s %s", event, key.user_id, key.session_id,
               " ".join(f"{k}={v}" for k, v in fields.items()),
               extra={"contextwright": {"event": event, "user_id": key.user_id,
                                        "session_id": key.session_id, **fields}})
