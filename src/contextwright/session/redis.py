"""``RedisStore``: sessions in Redis, shared by many processes and machines.

Every write is one Lua script, so assigning seqs (the list length) and pushing the messages happen
atomically for all clients; reads that depend on the length are scripts too. Retention is Redis's
own: each write sets the same ``PEXPIRE`` deadline on the session's keys, so they vanish together
and an expired session reads as absent without any purge. The per-user index sets do not expire
(their entries are how ``purge_expired`` counts what Redis removed); ``purge_expired`` trims them,
so run it now and then. Key names carry the user id with its
length (``<prefix>:msgs:<len(user)>:<user>:<session>``), so ``u1``/``u10`` and ``a``/``a:b`` can
never meet. The ``redis`` package is imported only when a store is created (it is an extra).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

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
    Clock,
    SessionInfo,
    SessionKey,
    StateRecord,
    StateWrite,
    StoredMessage,
    decode_document,
    encode_document,
    new_epoch,
    sorted_infos,
    validate_conditions,
    validate_expected_version,
    validate_id,
    validate_messages,
    validate_read_args,
    validate_ttl,
)

if TYPE_CHECKING:
    from redis import Redis

# KEYS: meta, msgs, state, user index, users index, write keys.
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
  for _, k in ipairs({KEYS[1], KEYS[2], KEYS[3], KEYS[6]}) do redis.call('PEXPIRE', k, ttl) end
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
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[6])
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


class RedisStore:
    """A ``Store`` in Redis; TTL by native key expiry, refreshed on every write."""

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "contextwright",
        ttl_seconds: float | None = None,
        clock: Clock = time.time,
        socket_timeout: float | None = 30.0,
    ) -> None:
        """Connect to ``url`` (and check the server answers); keys start with ``prefix:``.

        A call waits at most ``socket_timeout`` seconds for Redis's answer. A write that times
        out raises ``OutcomeUnknown``: Redis may still run it later, so the client never
        re-sends it by itself (redis-py's default retries would store a message twice); retry
        with the same ``idempotency_key`` instead.
        """
        self._prefix = validate_id(prefix, "prefix")
        ttl = validate_ttl(ttl_seconds)
        self._ttl_ms = 0 if ttl is None else max(1, round(ttl * 1000))
        self._clock = clock
        self._redis = _connect(url, socket_timeout)
        self._scripts = {name: self._redis.register_script(text) for name, text in (
            ("write", _WRITE), ("read", _READ),
            ("erase", _ERASE), ("forget", _FORGET))}

    def append(self, key: SessionKey, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Append all ``messages`` in one script; return their seqs."""
        return self.append_if(key, messages).seqs

    def append_if(
        self, key: SessionKey, messages: Sequence[Mapping[str, Any]], *,
        last_seq: int | None = None, epoch: str | None = None,
        idempotency_key: str | None = None, state: StateWrite | None = None,
    ) -> Appended:
        """Append ``messages`` (and put ``state``) in one script if the conditions hold."""
        validate_messages(messages)
        validate_conditions(last_seq, epoch, idempotency_key)
        now = self._clock()
        # Encoded before the script runs: a message that cannot be encoded stops the whole batch
        # before anything reaches Redis, and the script itself cannot fail halfway.
        items = [f"{now!r} {encode_document(m, f'message {i}')}" for i, m in enumerate(messages)]
        args = [repr(now), self._ttl_ms, key.user_id, key.session_id, new_epoch(),
                "0" if epoch is None else "1", epoch or "",
                -1 if last_seq is None else last_seq, idempotency_key or "",
                *_state_args(state), *items]
        return _appended(self._run("write", self._keys(key), args, write=True))

    def epoch(self, key: SessionKey) -> str | None:
        """The live session's incarnation, or ``None``."""
        with _errors():
            created, epoch = self._redis.hmget(self._key("meta", key), ["created_at", "epoch"])
        return None if created is None else str(epoch or "")

    def find_write(self, key: SessionKey, idempotency_key: str) -> list[int] | None:
        """The seqs stored by the write with ``idempotency_key``, if the session has it."""
        validate_conditions(None, None, idempotency_key)
        with _errors():
            done = self._redis.hget(self._key("writes", key), idempotency_key)
        return None if done is None else _seqs(str(done))

    def read(
        self, key: SessionKey, *, after: int = 0, last: int | None = None
    ) -> list[StoredMessage]:
        """Messages with ``seq > after``, only the newest ``last`` of them, oldest first."""
        validate_read_args(after, last)
        start, items = self._run("read", [self._key("msgs", key)],
                                 [after, -1 if last is None else last])
        return [_decode_item(item, int(start) + 1 + i) for i, item in enumerate(items)]

    def count(self, key: SessionKey) -> int:
        """Number of messages in the session."""
        with _errors():
            return int(self._redis.llen(self._key("msgs", key)))

    def get_state(self, key: SessionKey) -> StateRecord | None:
        """The session's state document, if any."""
        with _errors():
            row = self._redis.hmget(self._key("state", key), ["version", "data", "updated_at"])
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

    def put_state(
        self, key: SessionKey, data: Mapping[str, Any], *, expected_version: int | None,
        epoch: str | None = None,
    ) -> int:
        """Replace the state if it is at ``expected_version``; return the new version."""
        write = StateWrite(data=data, expected_version=expected_version)
        version = self.append_if(key, [], epoch=epoch, state=write).state_version
        assert version is not None  # a StateWrite that passed its checks is always written
        return version

    def list_sessions(self, user_id: str | None = None) -> list[SessionInfo]:
        """Live sessions, of one user or all, sorted by ``(user_id, session_id)``."""
        users = [validate_id(user_id, "user_id")] if user_id is not None else sorted(
            self._members(f"{self._prefix}:users"))
        infos: list[SessionInfo] = []
        for user in users:
            keys = [SessionKey(user_id=user, session_id=s)
                    for s in self._members(self._user_index(user))]
            infos.extend(self._infos(keys))
        return sorted_infos(infos)

    def erase_session(self, key: SessionKey) -> bool:
        """Remove the session; ``True`` if it was live."""
        return bool(self._run("erase", self._keys(key), [key.user_id, key.session_id]))

    def erase_user(self, user_id: str) -> int:
        """Remove every session of exactly ``user_id``; return how many were live."""
        validate_id(user_id, "user_id")
        keys = [SessionKey(user_id=user_id, session_id=s)
                for s in self._members(self._user_index(user_id))]
        # One script per session: a session appended concurrently is either erased or kept
        # whole, never split; erase_user racing new sessions of the same user may miss those.
        return sum(self.erase_session(key) for key in keys)

    def purge_expired(self) -> int:
        """Drop index entries of sessions Redis has expired; return how many sessions that was."""
        dropped = 0
        for user in self._members(f"{self._prefix}:users"):
            for session in self._members(self._user_index(user)):
                key = SessionKey(user_id=user, session_id=session)
                dropped += int(self._run("forget", self._keys(key), [user, session]))
        return dropped

    def close(self) -> None:
        """Close the connection pool."""
        self._redis.close()

    # -- helpers ------------------------------------------------------------------------------

    def _key(self, kind: str, key: SessionKey) -> str:
        return f"{self._prefix}:{kind}:{len(key.user_id)}:{key.user_id}:{key.session_id}"

    def _user_index(self, user_id: str) -> str:
        return f"{self._prefix}:user:{len(user_id)}:{user_id}"

    def _keys(self, key: SessionKey) -> list[str]:
        return [self._key("meta", key), self._key("msgs", key), self._key("state", key),
                self._user_index(key.user_id), f"{self._prefix}:users",
                self._key("writes", key)]

    def _run(self, script: str, keys: list[str], args: list[Any], *, write: bool = False) -> Any:
        with _errors(write=write):
            return self._scripts[script](keys=keys, args=args)

    def _members(self, name: str) -> list[str]:
        with _errors():
            return list(self._redis.smembers(name))  # type: ignore[arg-type]

    def _infos(self, keys: list[SessionKey]) -> list[SessionInfo]:
        with _errors():
            pipe = self._redis.pipeline(transaction=False)
            for key in keys:
                pipe.hmget(self._key("meta", key), ["created_at", "updated_at"])
                pipe.llen(self._key("msgs", key))
            replies = pipe.execute()
        infos = []
        for key, (created, updated), count in zip(keys, replies[::2], replies[1::2], strict=True):
            if created is None or updated is None:
                continue  # expired since the index was read
            infos.append(SessionInfo(key=key, message_count=int(count),
                                     created_at=float(created), updated_at=float(updated)))
        return infos


def _state_args(state: StateWrite | None) -> list[str]:
    """The script's three state arguments: whether, the expected version, the data."""
    if state is None:
        return ["0", "", ""]
    validate_expected_version(state.expected_version)
    expected = "" if state.expected_version is None else str(state.expected_version)
    return ["1", expected, encode_document(state.data, "state")]


def _appended(reply: list[Any]) -> Appended:
    """Turn the write script's reply into ``Appended``, or raise the failed condition's error."""
    status = str(reply[0])
    if status == "gone":
        raise SessionGone("the session was erased or expired since it was read")
    if status == "seq":
        raise ConflictError("the session has new messages since last_seq")
    if status == "version":
        raise ConflictError("state version does not match expected_version")
    if status == "replay":
        return Appended(seqs=_seqs(str(reply[1])), epoch=str(reply[2]), replayed=True)
    before, version, added = int(reply[1]), int(reply[3]), int(reply[4])
    return Appended(seqs=list(range(before + 1, before + 1 + added)), epoch=str(reply[2]),
                    state_version=None if version < 0 else version)


def _seqs(done: str) -> list[int]:
    """Seqs from a write-key entry ``"<first> <count>"``."""
    first, _, count = done.partition(" ")
    try:
        return list(range(int(first), int(first) + int(count)))
    except ValueError:
        raise CorruptRecordError("an idempotency record cannot be decoded") from None


def _decode_item(item: str, seq: int) -> StoredMessage:
    """Split a stored list element ``"<created_at> <json>"`` back into a message."""
    stamp, _, body = item.partition(" ")
    try:
        created_at = float(stamp)
    except ValueError:
        raise CorruptRecordError(f"message {seq} cannot be decoded") from None
    return StoredMessage(seq=seq, message=decode_document(body, f"message {seq}"),
                         created_at=created_at)


def _connect(url: str, socket_timeout: float | None) -> Redis:
    """A client for ``url`` that has answered a PING and never re-sends a command itself."""
    try:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ImportError as exc:
        raise StoreUnavailable(
            "RedisStore needs the redis package: pip install 'contextwright[redis]'") from exc
    try:
        client = redis.Redis.from_url(url, decode_responses=True, socket_connect_timeout=5,
                                      socket_timeout=socket_timeout,
                                      retry=Retry(NoBackoff(), 0))
    except ValueError:
        raise StoreError("the redis URL is malformed") from None
    with _errors():
        client.ping()
    return client


@contextmanager
def _errors(*, write: bool = False) -> Iterator[None]:
    """Map redis errors onto the store's error tree, without the driver's text.

    A write whose answer was lost (a timeout, a dropped connection) may have been applied, or
    may be applied later: ``OutcomeUnknown``.
    """
    import redis.exceptions as rex

    try:
        yield
    except (rex.ConnectionError, rex.TimeoutError) as exc:
        if write:
            raise OutcomeUnknown(
                f"redis store: no answer to a write ({type(exc).__name__}); it may still be "
                "applied (retry with the same idempotency_key)") from exc
        raise StoreUnavailable(f"redis store unavailable ({type(exc).__name__})") from exc
    except rex.RedisError as exc:
        raise StoreError(f"redis store failed ({type(exc).__name__})") from exc
