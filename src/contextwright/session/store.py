"""The ``Store`` protocol, its data types, and the helpers every backend shares.

A store keeps, per session (``user_id`` + ``session_id``), an append-only message log with
gap-free 1-based sequence numbers and one opaque, versioned state document. Each incarnation of a
session (from its first write until it is erased or expires) has a random ``epoch``; a write
conditioned on an epoch fails with ``SessionGone`` once that incarnation is gone, so nothing read
from an erased session can be written back. Backends live in
sibling modules; this module does no I/O. The helpers here fix the things all backends must agree
on: which ids are valid, how a message or state becomes stored text (ASCII JSON, so lone
surrogates and NUL round-trip through any database), how stored text is decoded, and what "expired"
means. ``AsyncStore`` is the same protocol for an event loop; its backends share each sync
backend's data layout.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable
from urllib.parse import parse_qsl

from contextwright.errors import ConflictError, CorruptRecordError, InvalidInputError, SessionGone

Clock = Callable[[], float]
"""Returns the current time in unix seconds; injectable so tests can move time."""

_MAX_ID_LENGTH = 512
MAX_ID_BYTES = 1024
"""The most UTF-8 bytes of an id. With ``MAX_IDEMPOTENCY_KEY_BYTES``, a session's key (user,
session and idempotency key) fits one PostgreSQL btree index row (2,704 bytes) even when it
does not compress (random CJK or emoji): every store takes exactly the same ids."""


def validate_id(value: object, field: str, *, max_bytes: int | None = MAX_ID_BYTES) -> str:
    """Return ``value`` if it is a usable user or session id, else raise ``InvalidInputError``.

    Ids must be non-empty ``str`` without NUL or lone surrogates (neither survives a trip through
    UTF-8 text columns or Redis key names), at most 512 characters and at most 1,024 bytes
    in UTF-8 (``max_bytes``: 341 CJK characters, 256 emoji; None: no byte limit).
    """
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"{field} must be a non-empty string")
    if len(value) > _MAX_ID_LENGTH:
        raise InvalidInputError(f"{field} is longer than {_MAX_ID_LENGTH} characters")
    if "\x00" in value:
        raise InvalidInputError(f"{field} contains a NUL character")
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(f"{field} contains a lone surrogate") from None
    if max_bytes is not None and len(encoded) > max_bytes:
        raise InvalidInputError(f"{field} is longer than {max_bytes} bytes in UTF-8")
    return value


def validate_stored_id(value: object, field: str) -> str:
    """``validate_id`` for an id that names sessions already stored: no byte limit.

    Ids were limited to 512 characters before they were limited to 1,024 bytes, so a store
    may hold a session under a longer id (400 CJK characters). It can still be read, listed and
    erased; only writes check the byte limit (``validate_new_key``).
    """
    return validate_id(value, field, max_bytes=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionKey:
    """Names one session; both parts are required, there is no shared default namespace.

    Both ids are checked as ``validate_stored_id`` does, so a key names every session a store
    can hold, one stored before the byte limit too (to read and erase it); a write under an id
    past ``MAX_ID_BYTES`` is refused by the store (``InvalidInputError``).
    """

    user_id: str
    """The user (or tenant-scoped user) the session belongs to."""
    session_id: str
    """One conversation of that user."""

    def __post_init__(self) -> None:
        validate_stored_id(self.user_id, "user_id")
        validate_stored_id(self.session_id, "session_id")


def validate_new_key(key: SessionKey) -> None:
    """Refuse a write under an id past ``MAX_ID_BYTES`` (``InvalidInputError``).

    Every write checks it (messages, state, index parts), also to a session stored under
    such an id before the limit: every store then takes exactly the same writes.
    """
    validate_id(key.user_id, "user_id")
    validate_id(key.session_id, "session_id")


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredMessage:
    """One message of a session's log, as the store returns it."""

    seq: int
    """1-based position in the session, assigned by the store, gap-free and strictly increasing."""
    message: Mapping[str, Any]
    """The JSON-compatible message dict exactly as appended (role, content, tool_calls, ...)."""
    created_at: float
    """Unix seconds when the message was appended."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StateRecord:
    """The session's state document with its optimistic-concurrency version."""

    version: int
    """Starts at 1 and grows by one with every successful ``put_state``."""
    data: Mapping[str, Any]
    """Opaque JSON document owned by the caller (mode, summary, zones, ...)."""
    updated_at: float
    """Unix seconds of the last ``put_state``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StateWrite:
    """A state document written by ``append_if`` in the same atomic operation as its messages."""

    data: Mapping[str, Any]
    """The new state document."""
    expected_version: int | None
    """The version it replaces (``None``: the session has no state yet), as in ``put_state``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Appended:
    """What one ``append_if`` did."""

    seqs: list[int]
    """The seqs of the messages (on a replay: the seqs the first write with the key got)."""
    epoch: str
    """The incarnation of the session the messages are in."""
    replayed: bool = False
    """The idempotency key had been used in this session: nothing was written this time."""
    state_version: int | None = None
    """The new version of the state, when a ``StateWrite`` was written."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """What ``list_sessions`` tells about one live session."""

    key: SessionKey
    """The session."""
    message_count: int
    """Messages in its log (equal to the last seq)."""
    created_at: float
    """Unix seconds of the first write."""
    updated_at: float
    """Unix seconds of the last write (append or ``put_state``); retention counts from here."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredIndex:
    """What a store keeps of a session's derived recall index (``read_index``)."""

    epoch: str
    """The live incarnation the parts belong to."""
    parts: list[str]
    """The parts in the order they were appended (opaque text; the reader decodes it)."""


@runtime_checkable
class IndexStore(Protocol):
    """A store that also keeps a session's recall index beside its messages.

    Every shipped backend does; a third-party ``Store`` without these methods keeps none. The
    index is derived data: parts appended as the session grows, kept per incarnation, and
    erased, purged and expired with the session. A part is written only while ``epoch`` is the
    live incarnation (checked in the same atomic operation), so an erase racing a write can
    never bring an index back, and a session started again never reads an old one.
    """

    def append_index(self, key: SessionKey, part: str, *, epoch: str,
                     replace: bool = False) -> bool:
        """Append ``part`` (``replace``: instead of every part so far).

        False if ``epoch`` is not the live session's (nothing is written then).
        """
        ...

    def read_index(self, key: SessionKey) -> StoredIndex | None:
        """The live session's epoch and index parts; None when the session is absent."""
        ...

    def read_spans(self, key: SessionKey, spans: Sequence[tuple[int, int]], *, epoch: str
                   ) -> list[StoredMessage] | None:
        """The messages with ``first <= seq <= last`` for each ``(first, last)``, oldest first.

        An index holds no messages: a worker that loaded one reads the turns it shows from the
        log this way. Seqs past the session's end are simply absent. None if ``epoch`` is not
        the live session's (nothing is read from another incarnation).
        """
        ...


@runtime_checkable
class Store(Protocol):
    """Where sessions live. Every backend passes the same conformance suite (``tests/stores``).

    Expired sessions (not written for ``ttl_seconds``) behave as absent before they are purged;
    writing to one starts it afresh at seq 1.
    """

    def append(self, key: SessionKey, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Append all ``messages`` atomically (all or nothing); return their new seqs."""
        ...

    def append_if(
        self, key: SessionKey, messages: Sequence[Mapping[str, Any]], *,
        last_seq: int | None = None, epoch: str | None = None,
        idempotency_key: str | None = None, state: StateWrite | None = None,
    ) -> Appended:
        """Append ``messages`` (and put ``state``) in one atomic operation, under conditions.

        In this order: an ``idempotency_key`` already used in the live session replays that
        write (nothing is written); an ``epoch`` that is not the live session's raises
        ``SessionGone``; a ``last_seq`` that is not the session's last seq (0: empty or absent)
        raises ``ConflictError``, as does a ``state`` whose ``expected_version`` does not match.
        A failed condition writes nothing. A key is kept only by a write that stores messages
        (a state-only write leaves it unused).
        """
        ...

    def read(
        self, key: SessionKey, *, after: int = 0, last: int | None = None
    ) -> list[StoredMessage]:
        """Messages with ``seq > after`` (only the newest ``last`` of them), oldest first."""
        ...

    def epoch(self, key: SessionKey) -> str | None:
        """The live session's incarnation (``None`` when absent); read it before what it guards."""
        ...

    def find_write(self, key: SessionKey, idempotency_key: str) -> list[int] | None:
        """The seqs the write with ``idempotency_key`` stored in the live session, if any."""
        ...

    def count(self, key: SessionKey) -> int:
        """Number of messages in the session (0 when absent)."""
        ...

    def get_state(self, key: SessionKey) -> StateRecord | None:
        """The state document, or ``None`` if none was ever put (or the session expired)."""
        ...

    def put_state(
        self, key: SessionKey, data: Mapping[str, Any], *, expected_version: int | None,
        epoch: str | None = None,
    ) -> int:
        """Replace the state if its version is ``expected_version`` (``None``: none yet).

        Returns the new version; raises ``ConflictError`` on a mismatch, and ``SessionGone``
        if ``epoch`` is given and is not the live session's.
        """
        ...

    def list_sessions(self, user_id: str | None = None) -> list[SessionInfo]:
        """Live sessions (of one user, or all), sorted by ``(user_id, session_id)``."""
        ...

    def erase_session(self, key: SessionKey) -> bool:
        """Remove the session's messages and state; ``True`` if it existed."""
        ...

    def erase_user(self, user_id: str) -> int:
        """Remove every session of exactly this user; return how many existed."""
        ...

    def purge_expired(self) -> int:
        """Remove sessions not written for ``ttl_seconds``; return how many were removed."""
        ...

    def close(self) -> None:
        """Release connections; the store may not be used afterwards."""
        ...


@runtime_checkable
class AsyncStore(Protocol):
    """``Store`` for an event loop: the same methods with the same semantics, as coroutines.

    Epochs, ``append_if``'s conditions and their order, idempotency keys, expiry, and the errors
    (``SessionGone``, ``ConflictError``, ``OutcomeUnknown``, ``StoreUnavailable``, ...) are the
    sync protocol's; the backends share their data layout with the sync ones, so a sync and an
    async worker can serve one session. ``aclose`` replaces ``close``. The same conformance
    suite runs over both kinds (``tests/stores``).
    """

    async def append(self, key: SessionKey, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """As ``Store.append``."""
        ...

    async def append_if(
        self, key: SessionKey, messages: Sequence[Mapping[str, Any]], *,
        last_seq: int | None = None, epoch: str | None = None,
        idempotency_key: str | None = None, state: StateWrite | None = None,
    ) -> Appended:
        """As ``Store.append_if``."""
        ...

    async def read(
        self, key: SessionKey, *, after: int = 0, last: int | None = None
    ) -> list[StoredMessage]:
        """As ``Store.read``."""
        ...

    async def epoch(self, key: SessionKey) -> str | None:
        """As ``Store.epoch``."""
        ...

    async def find_write(self, key: SessionKey, idempotency_key: str) -> list[int] | None:
        """As ``Store.find_write``."""
        ...

    async def count(self, key: SessionKey) -> int:
        """As ``Store.count``."""
        ...

    async def get_state(self, key: SessionKey) -> StateRecord | None:
        """As ``Store.get_state``."""
        ...

    async def put_state(
        self, key: SessionKey, data: Mapping[str, Any], *, expected_version: int | None,
        epoch: str | None = None,
    ) -> int:
        """As ``Store.put_state``."""
        ...

    async def list_sessions(self, user_id: str | None = None) -> list[SessionInfo]:
        """As ``Store.list_sessions``."""
        ...

    async def erase_session(self, key: SessionKey) -> bool:
        """As ``Store.erase_session``."""
        ...

    async def erase_user(self, user_id: str) -> int:
        """As ``Store.erase_user``."""
        ...

    async def purge_expired(self) -> int:
        """As ``Store.purge_expired``."""
        ...

    async def aclose(self) -> None:
        """Release connections (and threads); the store may not be used afterwards."""
        ...


MAX_SEQ = 2**63 - 1
"""The largest seq, count or version a store takes: every backend stores them as 64-bit
integers, so a larger one is refused up front, the same way by every store, rather than
overflowing in one driver and being compared as a float in another."""


def _is_seq(value: object) -> bool:
    """Whether ``value`` is an integer (not a bool) in ``0..MAX_SEQ``."""
    return (isinstance(value, int) and not isinstance(value, bool)
            and 0 <= value <= MAX_SEQ)


def validate_index_part(key: SessionKey, part: object, epoch: object) -> None:
    """``append_index``'s arguments: a key writes take, an ASCII text part, a string epoch."""
    validate_new_key(key)
    if not isinstance(part, str) or not part.isascii():
        raise InvalidInputError("an index part must be ASCII text")
    if not isinstance(epoch, str):
        raise InvalidInputError("epoch must be a string")


def validate_spans(spans: object, epoch: object) -> list[tuple[int, int]]:
    """``read_spans``' arguments: the spans sorted and merged where they touch or overlap."""
    if not isinstance(epoch, str):
        raise InvalidInputError("epoch must be a string")
    if isinstance(spans, str | bytes | Mapping) or not isinstance(spans, Sequence):
        raise InvalidInputError("spans must be a sequence of (first, last) seq pairs")
    pairs: list[tuple[int, int]] = []
    for span in spans:
        if not (isinstance(span, Sequence) and len(span) == 2
                and all(_is_seq(seq) for seq in span) and 1 <= span[0] <= span[1]):
            raise InvalidInputError(
                f"a span must be two seqs, 1 <= first <= last <= 2**63 - 1: {span!r}")
        pairs.append((span[0], span[1]))
    merged: list[tuple[int, int]] = []
    for first, last in sorted(pairs):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def span_seqs(spans: Sequence[tuple[int, int]], upto: int) -> list[int]:
    """Every seq up to ``upto`` (the session's last) the (merged) ``spans`` name, ascending.

    Clamped first, so a wide span costs what the session holds, not what the span names.
    """
    return [seq for first, last in spans for seq in range(first, min(last, upto) + 1)]


def validate_ttl(ttl_seconds: float | None) -> float | None:
    """Return ``ttl_seconds`` if it is ``None`` or a positive finite number."""
    if ttl_seconds is None:
        return None
    if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int | float):
        raise InvalidInputError("ttl_seconds must be a number or None")
    if not math.isfinite(ttl_seconds) or ttl_seconds <= 0:
        raise InvalidInputError("ttl_seconds must be positive and finite")
    return float(ttl_seconds)


def validate_address(value: object, field: str) -> str:
    """A server URL or DSN given to a store's constructor: a non-empty string."""
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"{field} must be a non-empty string")
    return value


def is_expired(updated_at: float, now: float, ttl_seconds: float | None) -> bool:
    """Whether a session last written at ``updated_at`` has expired at ``now``."""
    return ttl_seconds is not None and updated_at + ttl_seconds <= now


def expiry_cutoff(now: float, ttl_seconds: float | None) -> float:
    """Sessions with ``updated_at <= cutoff`` are expired; ``-inf`` when there is no TTL."""
    return -math.inf if ttl_seconds is None else now - ttl_seconds


def validate_read_args(after: int, last: int | None) -> None:
    """Reject ``after`` or ``last`` outside ``0..MAX_SEQ`` (or not integers)."""
    if not _is_seq(after):
        raise InvalidInputError("after must be an integer from 0 to 2**63 - 1")
    if last is not None and not _is_seq(last):
        raise InvalidInputError("last must be None or an integer from 0 to 2**63 - 1")


def validate_messages(key: SessionKey, messages: Sequence[Mapping[str, Any]]) -> None:
    """Check the key and the batch's shape up front (every write, ``put_state`` too, comes here).

    Encoding happens later, inside the write transaction.
    """
    validate_new_key(key)
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise InvalidInputError("messages must be a sequence of mappings")
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidInputError(f"message {index} is not a mapping")


def validate_expected_version(expected_version: int | None) -> None:
    """``expected_version`` is ``None`` or a positive integer."""
    if expected_version is None:
        return
    if isinstance(expected_version, bool) or not isinstance(expected_version, int):
        raise InvalidInputError("expected_version must be None or an integer")
    if not 1 <= expected_version <= MAX_SEQ:
        raise InvalidInputError("expected_version must be from 1 to 2**63 - 1")


_MAX_IDEMPOTENCY_KEY = 256
MAX_IDEMPOTENCY_KEY_BYTES = 512
"""The most UTF-8 bytes of an idempotency key (see ``MAX_ID_BYTES``)."""


def validate_conditions(last_seq: int | None, epoch: str | None,
                        idempotency_key: str | None) -> None:
    """Check the conditions of ``append_if`` (``InvalidInputError`` names the bad one)."""
    if last_seq is not None and not _is_seq(last_seq):
        raise InvalidInputError("last_seq must be None or an integer from 0 to 2**63 - 1")
    if epoch is not None and not isinstance(epoch, str):
        raise InvalidInputError("epoch must be None or a string")
    if idempotency_key is not None:
        validate_id(idempotency_key, "idempotency_key", max_bytes=MAX_IDEMPOTENCY_KEY_BYTES)
        if len(idempotency_key) > _MAX_IDEMPOTENCY_KEY:
            raise InvalidInputError(
                f"idempotency_key is longer than {_MAX_IDEMPOTENCY_KEY} characters")


def new_epoch() -> str:
    """A fresh incarnation id for a session being created."""
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteConditions:
    """The conditions of one ``append_if``, as the backends pass them to their transaction."""

    last_seq: int | None = None
    """The session's last seq must still be this (0: empty or absent)."""
    epoch: str | None = None
    """The live session must be this incarnation."""
    idempotency_key: str | None = None
    """A write already made with this key is replayed instead."""
    state: StateWrite | None = None
    """The state written with the messages (its version is a condition too)."""


def refuse_write(when: WriteConditions, *, live_epoch: str | None, last: int,
                 version: int | None) -> None:
    """Raise the error ``append_if`` must raise for ``when``, if any.

    ``live_epoch``, ``last`` and ``version`` describe the live session (``None``, 0, ``None``
    when it is absent), read inside the write's transaction.
    """
    if when.epoch is not None and when.epoch != live_epoch:
        raise SessionGone("the session was erased or expired since it was read")
    if when.last_seq is not None and when.last_seq != last:
        raise ConflictError("the session has new messages since last_seq")
    if when.state is not None and not check_version(version, when.state.expected_version):
        raise ConflictError("state version does not match expected_version")


def encode_document(document: Mapping[str, Any], what: str) -> str:
    """Encode a message or state as ASCII JSON text; ``InvalidInputError`` if it is not JSON.

    ASCII escapes keep lone surrogates and NUL intact through UTF-8 columns (and PostgreSQL TEXT,
    which refuses a raw NUL); ``allow_nan=False`` because NaN is not JSON and would not compare
    equal after the round trip anyway.
    """
    plain = document if isinstance(document, dict) else dict(document)
    refuse_non_string_keys(plain, what)
    try:
        return json.dumps(plain, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        raise InvalidInputError(f"{what} is not JSON-encodable") from None


_SHOWN_KEY = 40
"""The most characters of one key a path in an error shows."""


def refuse_non_string_keys(document: dict[Any, Any], what: str) -> None:
    """Raise ``InvalidInputError`` naming the first dict key in ``document`` that is not a str.

    ``json.dumps`` writes an ``int``, ``float``, ``bool`` or ``None`` key as text without a
    word, so ``{1: "a"}`` would read back as ``{"1": "a"}`` and ``{1: "x", "1": "y"}`` with one
    entry lost. Walks the containers ``json.dumps`` walks (dicts, lists, tuples) with a stack
    rather than recursion, and each one once, so a shared subtree costs nothing twice and a
    cycle ends here (``json.dumps`` then refuses it).
    """
    pending: list[tuple[object, str]] = [(document, "$")]
    seen: set[int] = set()
    while pending:
        value, path = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, dict):
            for name, item in value.items():
                if not isinstance(name, str):
                    raise InvalidInputError(
                        f"{what} has a non-string key at {path}[{_key_shown(name)}] "
                        f"({type(name).__name__}): JSON object keys are strings, so it would "
                        "not read back as written")
                if isinstance(item, dict | list | tuple):
                    pending.append((item, path + _member(name)))
        elif isinstance(value, list | tuple):
            pending.extend((item, f"{path}[{index}]") for index, item in enumerate(value)
                           if isinstance(item, dict | list | tuple))


def _member(name: str) -> str:
    """``name`` as one step of a path: ``.name`` when it is an identifier, else ``["name"]``."""
    if name.isidentifier() and name.isascii():
        return "." + _shown(name)
    return "[" + _shown(json.dumps(name)) + "]"


def _key_shown(name: object) -> str:
    """A key that is not a string, in a path: a scalar as Python writes it, else its type.

    Another object's ``repr`` is the caller's code, which may fail or be long; its type says
    enough to find it.
    """
    if name is None or isinstance(name, int | float):
        return _shown(repr(name))
    return f"<{type(name).__name__}>"


def _shown(text: str) -> str:
    """``text``, cut to ``_SHOWN_KEY`` characters, so a long key cannot flood an error."""
    return text if len(text) <= _SHOWN_KEY else text[:_SHOWN_KEY - 1] + "…"


def decode_document(text: str | bytes, what: str) -> dict[str, Any]:
    """Decode stored JSON text into a dict; ``CorruptRecordError`` if it is not one."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        raise CorruptRecordError(f"{what} cannot be decoded") from None
    if not isinstance(value, dict):
        raise CorruptRecordError(f"{what} is not a JSON object")
    return value


def check_version(current: int | None, expected: int | None) -> bool:
    """Whether a ``put_state`` expecting ``expected`` may replace a state at ``current``."""
    return current == expected


def sorted_infos(infos: list[SessionInfo]) -> list[SessionInfo]:
    """Sort by ``(user_id, session_id)`` in code-point order, the same for every backend."""
    return sorted(infos, key=lambda info: (info.key.user_id, info.key.session_id))


def open_store(url: str, *, ttl_seconds: float | None = None) -> Store:
    """Open a store from a URL: ``memory://``, ``sqlite:///path``, ``redis://…``, ``postgresql://…``.

    ``sqlite:///agent.db`` is relative to the working directory, ``sqlite:////var/db/agent.db``
    absolute (the SQLAlchemy convention). A Redis URL may carry ``?prefix=…`` (key prefix) and a
    PostgreSQL URL ``?schema=…`` and ``?prepare_threshold=none`` (PgBouncer in transaction
    mode: see ``PostgresStore``); they are taken out before the URL reaches the driver. Backends
    are imported here, on demand, because the Redis and PostgreSQL drivers are optional extras.
    """
    kind, target, option = parse_store_url(url)
    if kind == "memory":
        from contextwright.session.memory import MemoryStore

        return MemoryStore(ttl_seconds=ttl_seconds)
    if kind == "sqlite":
        from contextwright.session.sqlite import SqliteStore

        return SqliteStore(target, ttl_seconds=ttl_seconds)
    if kind == "redis":
        from contextwright.session.redis import RedisStore

        return RedisStore(target, prefix=option, ttl_seconds=ttl_seconds)
    from contextwright.session.postgres import PostgresStore

    dsn, driver_options = _postgres_url_options(target)
    return PostgresStore(dsn, schema=option, ttl_seconds=ttl_seconds, **driver_options)


StoreKind = Literal["memory", "sqlite", "redis", "postgresql"]


def parse_store_url(url: str) -> tuple[StoreKind, str, str]:
    """(backend, what it opens, its key prefix or schema) of a store URL; see ``open_store``.

    The SQLite target is the file path; for Redis and PostgreSQL it is the URL without the
    ``prefix`` / ``schema`` query parameter (default ``contextwright``), which is the third part.
    """
    scheme, sep, rest = url.partition("://") if isinstance(url, str) else ("", "", "")
    if not sep:
        raise InvalidInputError("a store URL looks like scheme://…")
    if scheme == "memory":
        if rest:
            raise InvalidInputError("the memory store URL is memory:// (it takes no options)")
        return "memory", "", ""
    if scheme == "sqlite":
        if not rest.startswith("/") or rest == "/":
            raise InvalidInputError("a SQLite store URL looks like sqlite:///path/to/file.db")
        if "?" in rest or "#" in rest:
            # sqlite:///agent.db?timeout=30 (an SQLAlchemy URL) would otherwise open a second,
            # empty database in a file named "agent.db?timeout=30".
            raise InvalidInputError(
                "a SQLite store URL takes no query options (sqlite:///path/to/file.db; give "
                "SqliteStore's options to SqliteStore itself)")
        return "sqlite", rest[1:], ""
    if scheme in ("redis", "rediss", "unix"):
        return ("redis", *_pop_query(url, "prefix", "contextwright"))
    if scheme in ("postgresql", "postgres"):
        return ("postgresql", *_pop_query(url, "schema", "contextwright"))
    raise InvalidInputError("unknown store URL scheme (memory, sqlite, redis, postgresql)")


def open_async_store(url: str, *, ttl_seconds: float | None = None) -> AsyncStore:
    """``open_store`` for an event loop: the same URLs, the async backend of each.

    ``AsyncRedisStore`` and ``AsyncPostgresStore`` connect on their first call (on the loop
    that makes it); ``AsyncSqliteStore`` opens its file on its own thread.
    """
    kind, target, option = parse_store_url(url)
    if kind == "memory":
        from contextwright.session.async_local import AsyncMemoryStore

        return AsyncMemoryStore(ttl_seconds=ttl_seconds)
    if kind == "sqlite":
        from contextwright.session.async_local import AsyncSqliteStore

        return AsyncSqliteStore(target, ttl_seconds=ttl_seconds)
    if kind == "redis":
        from contextwright.session.async_redis import AsyncRedisStore

        return AsyncRedisStore(target, prefix=option, ttl_seconds=ttl_seconds)
    from contextwright.session.async_postgres import AsyncPostgresStore

    dsn, driver_options = _postgres_url_options(target)
    return AsyncPostgresStore(dsn, schema=option, ttl_seconds=ttl_seconds, **driver_options)


def _postgres_url_options(dsn: str) -> tuple[str, dict[str, Any]]:
    """Take ``?prepare_threshold=`` out of a PostgreSQL store URL: the DSN, the store's options.

    The value is ``none`` (no prepared statements, for PgBouncer in transaction mode) or a
    whole number; libpq itself knows no such option and would refuse the DSN.
    """
    rest, value = _pop_query_value(dsn, "prepare_threshold")
    if value is None:
        return rest, {}
    if value.lower() == "none":
        return rest, {"prepare_threshold": None}
    if value.isascii() and value.isdigit():
        return rest, {"prepare_threshold": int(value)}
    raise InvalidInputError("prepare_threshold in a store URL is none or a whole number")


def _pop_query(url: str, name: str, default: str) -> tuple[str, str]:
    """Remove the query parameter ``name`` from ``url``; the URL and its value (or ``default``)."""
    rest, value = _pop_query_value(url, name)
    return rest, default if value is None else value


def _pop_query_value(url: str, name: str) -> tuple[str, str | None]:
    """Remove the query parameter ``name`` from ``url``; the URL and its value (None: absent).

    Only that parameter is taken out; the rest of the URL is left exactly as written. Taking
    it apart and putting it back together would change it: ``urlunsplit`` writes
    ``postgresql:///db`` as ``postgresql:/db`` (which libpq does not read as a URL), and
    re-encoding the query turns ``%20`` into ``+``, which libpq keeps as a plus sign.
    """
    head, question, tail = url.partition("?")
    query, hash_mark, fragment = tail.partition("#")
    values: list[str] = []
    kept: list[str] = []
    for field in query.split("&") if question else []:
        pairs = parse_qsl(field, keep_blank_values=True)
        if pairs and pairs[0][0] == name:
            values.append(pairs[0][1])
        elif field:
            kept.append(field)
    if len(values) > 1:
        raise InvalidInputError(f"the store URL gives {name} more than once")
    rest = head + ("?" + "&".join(kept) if kept else "") + hash_mark + fragment
    return rest, values[0] if values else None
