"""Builds made for looking at them: ``snapshot_of`` (one build, now) and ``replay``.

``replay`` rebuilds a snapshot's request under another plan, with the snapshot's tokenizer, and
diffs the two: one variable changed, the rest held. It needs the request's text, so a redacted
snapshot is refused. A build a ``ContextManager`` made also drew on session memory and recalled
turns, which are not part of the request: those sources are named in the replay's
``missing_sources`` rather than silently rebuilt without.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from contextwright.core.plan import BuildPlan
from contextwright.core.request import Request
from contextwright.errors import BudgetError, InvalidInputError
from contextwright.observe.diff import SnapshotDiff, diff_snapshots
from contextwright.observe.snapshot import (
    BuildRecord,
    Snapshot,
    capture,
    deployment_hasher,
    frozen_request,
)

_SESSION_SOURCES = frozenset(("session",))
"""Sources a manager adds from the session store, not from the request."""


def snapshot_of(plan: BuildPlan, request: Request, *, tokenizer: str | None = None,
                target: Literal["chat", "text"] = "chat", redact: bool = False,
                labels: Mapping[str, Any] | None = None,
                fence_secret: str | bytes | None = None) -> Snapshot:
    """Build ``request`` under ``plan`` now and return its snapshot (a ``BudgetError`` too).

    ``redact`` hashes as a recorder of ``fence_secret`` would (``SnapshotRecorder``).
    """
    from contextwright import __version__
    from contextwright.builder import ContextBuilder

    builder = ContextBuilder(tokenizer)
    effective = builder.effective_plan(plan)
    started, begin = time.time(), time.perf_counter_ns()
    context, error = None, None
    try:
        context = builder.build(effective, request, target=target)
    except BudgetError as exc:
        error = exc
    record = BuildRecord(
        request=frozen_request(request, with_history=True), plan=effective, context=context,
        report=context.report if context else error.report if error else None, error=error,
        started=started, build_ns=time.perf_counter_ns() - begin,
        tokenizer=builder.tokenizer.name, history_length=len(request.history),
        labels=dict(labels or {}))
    return capture(record, redact=redact, library_version=__version__,
                   hasher=deployment_hasher(fence_secret) if redact else None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Replay:
    """A snapshot rebuilt under another plan."""

    original: Snapshot
    """The snapshot replayed."""
    replayed: Snapshot
    """The new build."""
    diff: SnapshotDiff
    """What changed."""
    missing_sources: tuple[str, ...]
    """Sources of the original whose items came from outside the request (session memory,
    recalled turns of a manager's build): the replay could not offer them."""


def request_of(snapshot: Snapshot) -> Request:
    """The request a snapshot recorded; ``InvalidInputError`` when it was redacted."""
    if snapshot.redacted or snapshot.request.get("redacted"):
        raise InvalidInputError(
            f"snapshot {snapshot.id} is redacted (hashes only): record with "
            "SnapshotRecorder(..., redact=False) to replay")
    return Request.from_dict(dict(snapshot.request))


def replay(snapshot: Snapshot, plan: BuildPlan) -> Replay:
    """Rebuild ``snapshot``'s request under ``plan`` and diff the result against it."""
    request = request_of(snapshot)
    rebuilt = snapshot_of(plan, request, tokenizer=snapshot.tokenizer,
                          labels={"replay_of": snapshot.id})
    missing = tuple(str(row["source"]) for row in snapshot.sources
                    if str(row["source"]) in _SESSION_SOURCES and int(row["items"]))
    if snapshot.mode is not None and any(
            "recalled" in str(d["key"]) for d in snapshot.decisions):
        missing += ("history (recalled turns)",)
    return Replay(original=snapshot, replayed=rebuilt, diff=diff_snapshots(snapshot, rebuilt),
                  missing_sources=missing)
