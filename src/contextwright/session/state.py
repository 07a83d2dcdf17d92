"""``SessionState``: what a session remembers besides its message log.

The current mode and its history of switches, the running summary with the last message it
covers, the zones and the session's language. It is immutable data that round-trips through a
store's JSON state document; the message log itself lives in the store, append-only. Reading and
updating it are flows (``read_state``, ``change_state``), so they run over sync and async stores.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from contextwright.errors import ConflictError, CorruptRecordError
from contextwright.modes.zones import Zones
from contextwright.session import flow
from contextwright.session.flow import Flow, run_flow
from contextwright.session.store import SessionKey, StateRecord, Store

MAX_MODE_HISTORY = 100
"""Mode switches kept in the state (the newest); the structured log has them all."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModeSwitch:
    """One explicit hand-off from one mode to another."""

    old_mode: str | None
    """Mode before the switch (None when the session started)."""
    new_mode: str
    """Mode after it."""
    trigger: str
    """The keyword, pattern or classifier that caused it ('' for a default)."""
    basis: str
    """How the router decided: rule, classifier, kept, released or default."""
    at_seq: int
    """Sequence number of the user message that caused it."""
    at: float
    """Unix time of the switch."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionState:
    """Mode, mode history, running summary and zones of one session."""

    mode: str | None = None
    """Current mode (None before the first message)."""
    language: str | None = None
    """``zh`` or ``en``: the first user message's, until two in a row are in another; labels
    follow it."""
    mode_history: tuple[ModeSwitch, ...] = ()
    """Switches, oldest first (the last ``MAX_MODE_HISTORY``)."""
    summary: Mapping[str, Any] | None = None
    """The committed running summary (``Summary.to_dict()``), or None."""
    summary_upto: int = 0
    """The last message sequence number the summary covers (0: none)."""
    summary_failures: int = 0
    """Summaries rejected since the last one committed (failed fact check, empty, error)."""
    zones: Zones = field(default_factory=Zones)
    """Facts, task and tools zones."""
    handoff: Mapping[str, Any] | None = None
    """The hand-off summary (``Summary.to_dict()``) that later hand-offs merge into."""
    cache: Mapping[str, Any] | None = None
    """The last build's ``Fingerprint.to_dict()``: any worker's next build continues it."""
    kept_turns: int = 0
    """User messages in a row that matched no rule and stayed in the current mode."""
    routed_upto: int = 0
    """The newest user message whose routing changed this state (0: none): a retry of it with
    its idempotency key must not apply that change again."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data for a store."""
        return {
            "mode": self.mode, "language": self.language,
            "mode_history": [
                {"old_mode": s.old_mode, "new_mode": s.new_mode, "trigger": s.trigger,
                 "basis": s.basis, "at_seq": s.at_seq, "at": s.at}
                for s in self.mode_history[-MAX_MODE_HISTORY:]
            ],
            "summary": dict(self.summary) if self.summary is not None else None,
            "summary_upto": self.summary_upto, "summary_failures": self.summary_failures,
            "zones": self.zones.to_dict(),
            "handoff": dict(self.handoff) if self.handoff is not None else None,
            "cache": dict(self.cache) if self.cache is not None else None,
            "kept_turns": self.kept_turns, "routed_upto": self.routed_upto,
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> SessionState:
        """Inverse of ``to_dict``; ``CorruptRecordError`` if the document is not a state."""
        try:
            return SessionState(
                mode=data.get("mode"), language=data.get("language"),
                mode_history=tuple(ModeSwitch(**s) for s in data.get("mode_history", ())),
                summary=data.get("summary"), summary_upto=int(data.get("summary_upto", 0)),
                summary_failures=int(data.get("summary_failures", 0)),
                zones=Zones.from_dict(data.get("zones") or {}),
                handoff=data.get("handoff"), cache=data.get("cache"),
                kept_turns=int(data.get("kept_turns", 0)),
                routed_upto=int(data.get("routed_upto", 0)),
            )
        except (TypeError, ValueError, AttributeError) as exc:
            raise CorruptRecordError(
                f"session state document is malformed ({type(exc).__name__})") from None


def read_state(key: SessionKey) -> Flow[tuple[StateRecord | None, SessionState]]:
    """The stored record (None if never written) and the state it holds (empty if none)."""
    record = yield from flow.get_state(key)
    return record, SessionState.from_dict(record.data) if record else SessionState()


def change_state(key: SessionKey, change: Callable[[SessionState], SessionState | None], *,
                 attempts: int = 8, epoch: str | None = None,
                 known: tuple[int | None, SessionState] | None = None) -> Flow[SessionState]:
    """Apply ``change`` under optimistic concurrency, re-reading and re-applying on a conflict.

    ``change`` returning None, or a state equal to the one read, writes nothing. Returns the
    state now stored; ``ConflictError`` if other writers won ``attempts`` times in a row, and
    ``SessionGone`` if ``epoch`` is given and that incarnation of the session is gone.
    ``known``: the version and state the caller read or wrote last in this call (version None:
    no state stored); the first attempt starts from it instead of reading, and a write
    conflict (someone wrote since) reads as usual.
    """
    for attempt in range(attempts):
        if attempt == 0 and known is not None:
            version, state = known
        else:
            record, state = yield from read_state(key)
            version = record.version if record else None
        new_state = change(state)
        if new_state is None or new_state == state:
            return state
        try:
            yield from flow.put_state(key, new_state.to_dict(), expected_version=version,
                                      epoch=epoch)
        except ConflictError:
            continue
        return new_state
    raise ConflictError("session state kept changing under this update; try again")


def load_state(store: Store, key: SessionKey) -> tuple[StateRecord | None, SessionState]:
    """``read_state`` on a sync store."""
    return run_flow(read_state(key), store)


def update_state(store: Store, key: SessionKey,
                 change: Callable[[SessionState], SessionState | None], *,
                 attempts: int = 8, epoch: str | None = None) -> SessionState:
    """``change_state`` on a sync store."""
    return run_flow(change_state(key, change, attempts=attempts, epoch=epoch), store)
