"""``MemoryStore``: sessions in a dict, for tests, demos and single-process agents.

Messages are kept as the same ASCII JSON text the database backends store, so the memory store has
exactly their semantics (a caller mutating a dict after appending changes nothing stored; what
cannot be encoded is refused the same way). One lock makes every operation atomic across threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextwright.errors import StoreError
from contextwright.session.store import (
    Appended,
    Clock,
    SessionInfo,
    SessionKey,
    StateRecord,
    StateWrite,
    StoredIndex,
    StoredMessage,
    WriteConditions,
    decode_document,
    encode_document,
    is_expired,
    new_epoch,
    refuse_write,
    sorted_infos,
    span_seqs,
    validate_conditions,
    validate_expected_version,
    validate_index_part,
    validate_messages,
    validate_read_args,
    validate_spans,
    validate_stored_id,
    validate_ttl,
)


@dataclass(slots=True, kw_only=True)
class _Session:
    """Mutable per-session record, only touched under the store's lock."""

    created_at: float
    """First write."""
    updated_at: float
    """Last write."""
    epoch: str = field(default_factory=new_epoch)
    """This incarnation of the session."""
    messages: list[tuple[float, str]] = field(default_factory=list)
    """(created_at, JSON text); index + 1 is the seq."""
    state: tuple[int, str, float] | None = None
    """(version, JSON text, updated_at) of the state document."""
    writes: dict[str, list[int]] = field(default_factory=dict)
    """Idempotency key → the seqs its write stored."""
    index_parts: list[str] = field(default_factory=list)
    """The recall index's parts (they go with the session record)."""


class MemoryStore:
    """A ``Store`` in process memory; nothing survives the process."""

    def __init__(self, *, ttl_seconds: float | None = None, clock: Clock = time.time) -> None:
        """Create an empty store; sessions expire ``ttl_seconds`` after their last write."""
        self._ttl = validate_ttl(ttl_seconds)
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[SessionKey, _Session] = {}
        self._closed = False

    def append(self, key: SessionKey, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Append all ``messages`` atomically; return their seqs."""
        return self.append_if(key, messages).seqs

    def append_if(
        self, key: SessionKey, messages: Sequence[Mapping[str, Any]], *,
        last_seq: int | None = None, epoch: str | None = None,
        idempotency_key: str | None = None, state: StateWrite | None = None,
    ) -> Appended:
        """Append ``messages`` (and put ``state``) atomically if the conditions hold."""
        validate_messages(key, messages)
        validate_conditions(last_seq, epoch, idempotency_key)
        if state is not None:
            validate_expected_version(state.expected_version)
        # Encode before taking the lock: a batch that fails to encode never touches the session.
        texts = [encode_document(m, f"message {i}") for i, m in enumerate(messages)]
        state_text = None if state is None else encode_document(state.data, "state")
        with self._lock:
            session = self._live(key)
            if session is not None and idempotency_key in session.writes:
                return Appended(seqs=list(session.writes[idempotency_key]),
                                epoch=session.epoch, replayed=True)
            refuse_write(
                WriteConditions(last_seq=last_seq, epoch=epoch, state=state),
                live_epoch=None if session is None else session.epoch,
                last=0 if session is None else len(session.messages),
                version=None if session is None or session.state is None else session.state[0])
            return self._apply(key, texts, state_text, idempotency_key)

    def _apply(self, key: SessionKey, texts: list[str], state_text: str | None,
               idempotency_key: str | None) -> Appended:
        """Write what ``append_if`` checked (caller holds the lock)."""
        now = self._clock()
        session = self._live_or_new(key, now)
        first = len(session.messages) + 1
        session.messages.extend((now, text) for text in texts)
        seqs = list(range(first, first + len(texts)))
        version = None
        if state_text is not None:
            version = (0 if session.state is None else session.state[0]) + 1
            session.state = (version, state_text, now)
        if idempotency_key is not None and seqs:
            # As in every other store: a key names a write of messages, so a state-only write
            # leaves it free and a later write with messages under it is stored, not replayed.
            session.writes[idempotency_key] = seqs
        session.updated_at = now
        return Appended(seqs=seqs, epoch=session.epoch, state_version=version)

    def epoch(self, key: SessionKey) -> str | None:
        """The live session's incarnation, or ``None``."""
        with self._lock:
            session = self._live(key)
            return None if session is None else session.epoch

    def find_write(self, key: SessionKey, idempotency_key: str) -> list[int] | None:
        """The seqs stored by the write with ``idempotency_key``, if the session has it."""
        validate_conditions(None, None, idempotency_key)
        with self._lock:
            session = self._live(key)
            found = None if session is None else session.writes.get(idempotency_key)
            return None if found is None else list(found)

    def read(
        self, key: SessionKey, *, after: int = 0, last: int | None = None
    ) -> list[StoredMessage]:
        """Messages with ``seq > after``, only the newest ``last`` of them, oldest first."""
        validate_read_args(after, last)
        with self._lock:
            session = self._live(key)
            rows = [] if session is None else session.messages
            start = after if last is None else max(after, len(rows) - last)
            picked = list(enumerate(rows[start:], start=start + 1))
        return [
            StoredMessage(seq=seq, message=decode_document(text, f"message {seq}"), created_at=at)
            for seq, (at, text) in picked
        ]

    def count(self, key: SessionKey) -> int:
        """Number of messages in the session."""
        with self._lock:
            session = self._live(key)
            return 0 if session is None else len(session.messages)

    def get_state(self, key: SessionKey) -> StateRecord | None:
        """The session's state document, if any."""
        with self._lock:
            session = self._live(key)
            state = None if session is None else session.state
        if state is None:
            return None
        version, text, updated_at = state
        return StateRecord(
            version=version, data=decode_document(text, "state"), updated_at=updated_at
        )

    def put_state(
        self, key: SessionKey, data: Mapping[str, Any], *, expected_version: int | None,
        epoch: str | None = None,
    ) -> int:
        """Replace the state if it is at ``expected_version``; return the new version."""
        write = StateWrite(data=data, expected_version=expected_version)
        version = self.append_if(key, [], epoch=epoch, state=write).state_version
        assert version is not None  # a StateWrite that passed its checks is always written
        return version

    def append_index(self, key: SessionKey, part: str, *, epoch: str,
                     replace: bool = False) -> bool:
        """Append a part of the recall index if ``epoch`` is live; False if not."""
        validate_index_part(key, part, epoch)
        with self._lock:
            session = self._live(key)
            if session is None or session.epoch != epoch:
                return False
            if replace:
                session.index_parts = []
            session.index_parts.append(part)
            return True

    def read_index(self, key: SessionKey) -> StoredIndex | None:
        """The live session's epoch and recall index parts."""
        with self._lock:
            session = self._live(key)
            return None if session is None else StoredIndex(epoch=session.epoch,
                                                            parts=list(session.index_parts))

    def read_spans(self, key: SessionKey, spans: Sequence[tuple[int, int]], *, epoch: str
                   ) -> list[StoredMessage] | None:
        """The live session's messages in ``spans`` (seqs, inclusive); None if not ``epoch``."""
        merged = validate_spans(spans, epoch)
        with self._lock:
            session = self._live(key)
            if session is None or session.epoch != epoch:
                return None
            rows = session.messages
            picked = [(seq, rows[seq - 1]) for seq in span_seqs(merged, len(rows))]
        return [StoredMessage(seq=seq, message=decode_document(text, f"message {seq}"),
                              created_at=at) for seq, (at, text) in picked]

    def list_sessions(self, user_id: str | None = None) -> list[SessionInfo]:
        """Live sessions, of one user or all, sorted by ``(user_id, session_id)``."""
        if user_id is not None:
            validate_stored_id(user_id, "user_id")
        with self._lock:
            self._check_open()
            now = self._clock()
            infos = [
                SessionInfo(key=key, message_count=len(s.messages),
                            created_at=s.created_at, updated_at=s.updated_at)
                for key, s in self._sessions.items()
                if (user_id is None or key.user_id == user_id)
                and not is_expired(s.updated_at, now, self._ttl)
            ]
        return sorted_infos(infos)

    def erase_session(self, key: SessionKey) -> bool:
        """Remove the session; ``True`` if it was live."""
        with self._lock:
            existed = self._live(key) is not None
            self._sessions.pop(key, None)
            return existed

    def erase_user(self, user_id: str) -> int:
        """Remove every session of exactly ``user_id``; return how many were live."""
        validate_stored_id(user_id, "user_id")
        with self._lock:
            self._check_open()
            now = self._clock()
            keys = [key for key in self._sessions if key.user_id == user_id]
            live = sum(
                not is_expired(self._sessions[key].updated_at, now, self._ttl) for key in keys
            )
            for key in keys:
                del self._sessions[key]
            return live

    def purge_expired(self) -> int:
        """Remove expired sessions; return how many."""
        with self._lock:
            self._check_open()
            now = self._clock()
            expired = [
                key for key, s in self._sessions.items()
                if is_expired(s.updated_at, now, self._ttl)
            ]
            for key in expired:
                del self._sessions[key]
            return len(expired)

    def close(self) -> None:
        """Drop everything; later calls raise ``StoreError``."""
        with self._lock:
            self._sessions.clear()
            self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed")

    def _live(self, key: SessionKey) -> _Session | None:
        """The session if it exists and has not expired (caller holds the lock)."""
        self._check_open()
        session = self._sessions.get(key)
        if session is None or is_expired(session.updated_at, self._clock(), self._ttl):
            return None
        return session

    def _live_or_new(self, key: SessionKey, now: float) -> _Session:
        """The live session, or a fresh one replacing an expired or missing one."""
        session = self._live(key)
        if session is None:
            session = _Session(created_at=now, updated_at=now)
            self._sessions[key] = session
        return session
