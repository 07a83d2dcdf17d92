"""What ``RedisStore`` and ``AsyncRedisStore`` share: key layout, Lua scripts, encodings, errors.

Both clients speak to the same keys with the same scripts, so a sync and an async worker can serve
one session. Every write is one Lua script (seqs assigned and messages pushed atomically for all
clients); reads that depend on the list's length are scripts too. Key names carry the user id with
its length (``<prefix>:msgs:<len(user)>:<user>:<session>``), so ``u1``/``u10`` and ``a``/``a:b``
never meet. This module builds arguments and reads replies; it does no I/O, and imports ``redis``
only to name its exceptions when mapping them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from contextwright.errors import (
    ConflictError,
    CorruptRecordError,
    OutcomeUnknown,
    SessionGone,
    StoreError,
    StoreUnavailable,
)
from contextwright.session.store import (
    Appended,
    SessionInfo,
    SessionKey,
    StateRecord,
    StateWrite,
    StoredIndex,
    StoredMessage,
    decode_document,
    encode_document,
    new_epoch,
    validate_expected_version,
    validate_id,
    validate_ttl,
)

# KEYS: meta, msgs, state, user index, users index, write keys, recall index.
# ARGV: now, ttl_ms (0 = none), user, session, fresh epoch, '1' if an epoch is required, that
# epoch, last_seq (-1 = any), idempotency key ('' = none), '1' if a state is written, its
# expected version ('' = none), its data; ARGV[13..]: stored messages.
# Returns {'ok', length before, epoch, new version or -1, messages appended}, {'replay',
# 'first count', epoch},
# or the failed condition: {'gone'}, {'seq'}, {'version'}.
_WRITE = """
local meta = redis.call('HMGET', KEYS[1], 'created_at', 'epoch')
local live = false
if meta[1] then live = meta[2] or '' end
if ARGV[9] ~= '' then
  local done = redis.call('HGET', KEYS[6], ARGV[9])
  if done then return {'replay', done, live or ''} end
end
if ARGV[6] == '1' and ARGV[7] ~= live then return {'gone'} end
local n = redis.call('LLEN', KEYS[2])
local last_seq = tonumber(ARGV[8])
if last_seq >= 0 and last_seq ~= n then return {'seq'} end
local cur = redis.call('HGET', KEYS[3], 'version')
if ARGV[10] == '1' and (cur or '') ~= ARGV[11] then return {'version'} end
for i = 13, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
local v = -1
if ARGV[10] == '1' then
  v = (cur and tonumber(cur) or 0) + 1
  redis.call('HSET', KEYS[3], 'version', tostring(v), 'data', ARGV[12], 'updated_at', ARGV[1])
end
if not live then
  redis.call('HSET', KEYS[1], 'created_at', ARGV[1], 'epoch', ARGV[5])
  redis.call('DEL', KEYS[7])
  live = ARGV[5]
end
redis.call('HSET', KEYS[1], 'updated_at', ARGV[1])
if ARGV[9] ~= '' and #ARGV >= 13 then
  redis.call('HSET', KEYS[6], ARGV[9], tostring(n + 1) .. ' ' .. tostring(#ARGV - 12))
end
redis.call('SADD', KEYS[4], ARGV[4])
redis.call('SADD', KEYS[5], ARGV[3])
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  for _, k in ipairs({KEYS[1], KEYS[2], KEYS[3], KEYS[6], KEYS[7]}) do
    redis.call('PEXPIRE', k, ttl)
  end
end
return {'ok', n, live, v, #ARGV - 12}
"""
# KEYS: msgs. ARGV: after, last (-1 = all). Returns {first index, elements}.
_READ = """
local n = redis.call('LLEN', KEYS[1])
local start = tonumber(ARGV[1])
local last = tonumber(ARGV[2])
if last >= 0 and n - last > start then start = n - last end
if start >= n then return {start, {}} end
return {start, redis.call('LRANGE', KEYS[1], start - n, -1)}
"""
# KEYS: as _WRITE's. ARGV: user, session. Returns 1 if it existed.
_ERASE = """
local existed = redis.call('EXISTS', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[6], KEYS[7])
redis.call('SREM', KEYS[4], ARGV[2])
if redis.call('SCARD', KEYS[4]) == 0 then redis.call('SREM', KEYS[5], ARGV[1]) end
return existed
"""
# Drop an index entry whose session expired. Same KEYS/ARGV as _ERASE. Returns 1 if dropped.
_FORGET = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local dropped = redis.call('SREM', KEYS[4], ARGV[2])
if redis.call('SCARD', KEYS[4]) == 0 then redis.call('SREM', KEYS[5], ARGV[1]) end
return dropped
"""

# The recall index: a list whose first element is the epoch its parts belong to.
# KEYS: meta, recall index. ARGV: epoch, '1' to replace the parts, the part.
# Returns 1 if written, 0 if the epoch is not the live session's.
_INDEX_APPEND = """
local meta = redis.call('HMGET', KEYS[1], 'created_at', 'epoch')
if not meta[1] or (meta[2] or '') ~= ARGV[1] then return 0 end
local head = redis.call('LINDEX', KEYS[2], 0)
if ARGV[2] == '1' or (head and head ~= ARGV[1]) then redis.call('DEL', KEYS[2]) end
if redis.call('LLEN', KEYS[2]) == 0 then redis.call('RPUSH', KEYS[2], ARGV[1]) end
redis.call('RPUSH', KEYS[2], ARGV[3])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
"""
# KEYS: meta, recall index. Returns {0} (no session) or {1, live epoch, the list}.
_INDEX_READ = """
local meta = redis.call('HMGET', KEYS[1], 'created_at', 'epoch')
if not meta[1] then return {0} end
return {1, meta[2] or '', redis.call('LRANGE', KEYS[2], 0, -1)}
"""

# KEYS: meta, msgs. ARGV: epoch, then each span's first and last seq. Returns {0} (no live
# session of that epoch) or {1, the elements of each span}. Spans are clamped to the log's
# length first: Lua numbers are doubles, and a seq past 10**17 would reach LRANGE in exponent
# notation, which it refuses.
_READ_SPANS = """
local meta = redis.call('HMGET', KEYS[1], 'created_at', 'epoch')
if not meta[1] or (meta[2] or '') ~= ARGV[1] then return {0} end
local n = redis.call('LLEN', KEYS[2])
local out = {1}
for i = 2, #ARGV, 2 do
  local first, last = tonumber(ARGV[i]), math.min(tonumber(ARGV[i + 1]), n)
  if first <= last then
    out[#out + 1] = redis.call('LRANGE', KEYS[2], first - 1, last - 1)
  else
    out[#out + 1] = {}
  end
end
return out
"""

SCRIPTS = {"write": _WRITE, "read": _READ, "erase": _ERASE, "forget": _FORGET,
           "index_append": _INDEX_APPEND, "index_read": _INDEX_READ,
           "read_spans": _READ_SPANS}
"""The store's Lua scripts by name."""


class RedisLayout:
    """Key names of one store (one prefix) and its TTL in milliseconds."""

    def __init__(self, prefix: str, ttl_seconds: float | None) -> None:
        """Check ``prefix`` and ``ttl_seconds`` (``InvalidInputError``)."""
        self.prefix = validate_id(prefix, "prefix")
        ttl = validate_ttl(ttl_seconds)
        self.ttl_ms = 0 if ttl is None else max(1, round(ttl * 1000))

    def key(self, kind: str, key: SessionKey) -> str:
        """The name of one of a session's keys (``meta``, ``msgs``, ``state``, ``writes``)."""
        return f"{self.prefix}:{kind}:{len(key.user_id)}:{key.user_id}:{key.session_id}"

    def user_index(self, user_id: str) -> str:
        """The set of a user's session ids."""
        return f"{self.prefix}:user:{len(user_id)}:{user_id}"

    @property
    def users(self) -> str:
        """The set of user ids with sessions."""
        return f"{self.prefix}:users"

    def keys(self, key: SessionKey) -> list[str]:
        """The KEYS of the write, erase and forget scripts."""
        return [self.key("meta", key), self.key("msgs", key), self.key("state", key),
                self.user_index(key.user_id), self.users, self.key("writes", key),
                self.key("recall", key)]

    def span_keys(self, key: SessionKey) -> list[str]:
        """The KEYS of the span read script."""
        return [self.key("meta", key), self.key("msgs", key)]

    def index_keys(self, key: SessionKey) -> list[str]:
        """The KEYS of the recall index scripts."""
        return [self.key("meta", key), self.key("recall", key)]

    def write_args(self, key: SessionKey, messages: Sequence[Mapping[str, Any]], now: float, *,
                   last_seq: int | None, epoch: str | None, idempotency_key: str | None,
                   state: StateWrite | None) -> list[Any]:
        """The write script's ARGV; every message and the state encoded up front.

        A message that cannot be encoded stops the whole batch before anything reaches Redis,
        and the script itself cannot fail halfway.
        """
        items = [f"{now!r} {encode_document(m, f'message {i}')}" for i, m in enumerate(messages)]
        return [repr(now), self.ttl_ms, key.user_id, key.session_id, new_epoch(),
                "0" if epoch is None else "1", epoch or "",
                -1 if last_seq is None else last_seq, idempotency_key or "",
                *_state_args(state), *items]


def _state_args(state: StateWrite | None) -> list[str]:
    """The script's three state arguments: whether, the expected version, the data."""
    if state is None:
        return ["0", "", ""]
    validate_expected_version(state.expected_version)
    expected = "" if state.expected_version is None else str(state.expected_version)
    return ["1", expected, encode_document(state.data, "state")]


def appended(reply: list[Any]) -> Appended:
    """Turn the write script's reply into ``Appended``, or raise the failed condition's error."""
    status = str(reply[0])
    if status == "gone":
        raise SessionGone("the session was erased or expired since it was read")
    if status == "seq":
        raise ConflictError("the session has new messages since last_seq")
    if status == "version":
        raise ConflictError("state version does not match expected_version")
    if status == "replay":
        return Appended(seqs=write_seqs(str(reply[1])), epoch=str(reply[2]), replayed=True)
    before, version, added = int(reply[1]), int(reply[3]), int(reply[4])
    return Appended(seqs=list(range(before + 1, before + 1 + added)), epoch=str(reply[2]),
                    state_version=None if version < 0 else version)


def write_seqs(done: str) -> list[int]:
    """Seqs from a write-key entry ``"<first> <count>"``."""
    first, _, count = done.partition(" ")
    try:
        return list(range(int(first), int(first) + int(count)))
    except ValueError:
        raise CorruptRecordError("an idempotency record cannot be decoded") from None


def stored_index(reply: list[Any]) -> StoredIndex | None:
    """``read_index``'s answer from the index read script's reply."""
    if not reply or int(reply[0]) == 0:
        return None
    live, items = str(reply[1]), [str(item) for item in reply[2]]
    parts = items[1:] if items and items[0] == live else []  # another epoch's: none
    return StoredIndex(epoch=live, parts=parts)


def span_args(epoch: str, spans: Sequence[tuple[int, int]]) -> list[Any]:
    """The span read script's ARGV."""
    return [epoch, *(seq for span in spans for seq in span)]


def span_items(reply: list[Any], spans: Sequence[tuple[int, int]]
               ) -> list[StoredMessage] | None:
    """The span read script's reply as stored messages (None: not the live epoch)."""
    if not reply or int(reply[0]) == 0:
        return None
    return [decode_item(str(item), first + i)
            for (first, _), items in zip(spans, reply[1:], strict=True)
            for i, item in enumerate(items)]


def read_args(after: int, last: int | None) -> list[int]:
    """The read script's ARGV."""
    return [after, -1 if last is None else last]


def decoded_items(reply: list[Any]) -> list[StoredMessage]:
    """The read script's reply ``{first index, elements}`` as stored messages."""
    start, items = reply
    return [decode_item(item, int(start) + 1 + i) for i, item in enumerate(items)]


def decode_item(item: str, seq: int) -> StoredMessage:
    """Split a stored list element ``"<created_at> <json>"`` back into a message."""
    stamp, _, body = item.partition(" ")
    try:
        created_at = float(stamp)
    except ValueError:
        raise CorruptRecordError(f"message {seq} cannot be decoded") from None
    return StoredMessage(seq=seq, message=decode_document(body, f"message {seq}"),
                         created_at=created_at)


def epoch_of(meta: list[Any]) -> str | None:
    """The epoch from a session's ``HMGET meta created_at epoch`` (None: no session)."""
    created, epoch = meta
    return None if created is None else str(epoch or "")


def state_record(row: list[Any]) -> StateRecord | None:
    """A state from ``HMGET state version data updated_at`` (None: no state)."""
    version, data, updated_at = row
    if version is None:
        return None
    if data is None or updated_at is None:
        raise CorruptRecordError("state is incomplete")
    try:
        return StateRecord(version=int(version), data=decode_document(data, "state"),
                           updated_at=float(updated_at))
    except ValueError:
        raise CorruptRecordError("state cannot be decoded") from None


def session_infos(keys: list[SessionKey], replies: list[Any]) -> list[SessionInfo]:
    """Infos from a pipeline of ``HMGET meta created_at updated_at`` and ``LLEN msgs`` per key."""
    infos = []
    for key, (created, updated), count in zip(keys, replies[::2], replies[1::2], strict=True):
        if created is None or updated is None:
            continue  # expired since the index was read
        infos.append(SessionInfo(key=key, message_count=int(count),
                                 created_at=float(created), updated_at=float(updated)))
    return infos


def redis_module() -> Any:
    """The ``redis`` package, or ``StoreUnavailable`` saying which extra installs it."""
    try:
        import redis
    except ImportError as exc:
        raise StoreUnavailable(
            "the Redis stores need the redis package: pip install 'contextwright[redis]'"
        ) from exc
    return redis


UNKNOWN_URL_OPTION = ("the redis URL has an option redis-py does not take (the key prefix is "
                      "the store's prefix= argument, or ?prefix= in open_store's URL)")
"""Why a client's first connection could not be made: redis-py passes every query option of the
URL it does not know to the connection, which refuses it with a ``TypeError``."""


@contextmanager
def redis_errors(*, write: bool = False) -> Iterator[None]:
    """Map redis errors onto the store's error tree, without the driver's text.

    A write whose answer was lost (a timeout, a dropped connection) may have been applied, or
    may be applied later: ``OutcomeUnknown``. Works around ``await`` as well.
    """
    import redis.exceptions as rex

    # A pool at max_connections refuses a call before sending it (redis 6 and later name it).
    pool_exhausted = getattr(rex, "MaxConnectionsError", ())
    try:
        yield
    except (rex.ConnectionError, rex.TimeoutError) as exc:
        if isinstance(exc, pool_exhausted):  # nothing was sent: the outcome is known
            raise StoreUnavailable(
                f"redis store unavailable ({type(exc).__name__}: every connection of the "
                "pool is in use)") from exc
        if write:
            raise OutcomeUnknown(
                f"redis store: no answer to a write ({type(exc).__name__}); it may still be "
                "applied (retry with the same idempotency_key)") from exc
        raise StoreUnavailable(f"redis store unavailable ({type(exc).__name__})") from exc
    except rex.RedisError as exc:
        raise StoreError(f"redis store failed ({type(exc).__name__})") from exc
