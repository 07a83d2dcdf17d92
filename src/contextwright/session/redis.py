"""``RedisStore``: sessions in Redis, shared by many processes and machines.

Every write is one Lua script, so assigning seqs (the list length) and pushing the messages happen
atomically for all clients; reads that depend on the length are scripts too. Retention is Redis's
own: each write sets the same ``PEXPIRE`` deadline on the session's keys, so they vanish together
and an expired session reads as absent without any purge. The per-user index sets do not expire
(their entries are how ``purge_expired`` counts what Redis removed); ``purge_expired`` trims them,
so run it now and then. The key layout, scripts and encodings live in ``redis_common``, shared
with ``AsyncRedisStore``. The ``redis`` package is imported only when a store is created (it is an
extra).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from contextwright.checks import optional_seconds
from contextwright.errors import InvalidInputError, StoreError
from contextwright.session.redis_common import (
    SCRIPTS,
    UNKNOWN_URL_OPTION,
    RedisLayout,
    appended,
    decoded_items,
    epoch_of,
    read_args,
    redis_errors,
    redis_module,
    session_infos,
    span_args,
    span_items,
    state_record,
    stored_index,
    write_seqs,
)
from contextwright.session.store import (
    Appended,
    Clock,
    SessionInfo,
    SessionKey,
    StateRecord,
    StateWrite,
    StoredIndex,
    StoredMessage,
    sorted_infos,
    validate_address,
    validate_conditions,
    validate_index_part,
    validate_messages,
    validate_read_args,
    validate_spans,
    validate_stored_id,
)

if TYPE_CHECKING:
    from redis import Redis


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
        self._layout = RedisLayout(prefix, ttl_seconds)
        self._clock = clock
        self._redis = _connect(validate_address(url, "url"),
                               optional_seconds(socket_timeout, "socket_timeout"))
        self._closed = False
        self._scripts = {name: self._redis.register_script(text)
                         for name, text in SCRIPTS.items()}

    def append(self, key: SessionKey, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Append all ``messages`` in one script; return their seqs."""
        return self.append_if(key, messages).seqs

    def append_if(
        self, key: SessionKey, messages: Sequence[Mapping[str, Any]], *,
        last_seq: int | None = None, epoch: str | None = None,
        idempotency_key: str | None = None, state: StateWrite | None = None,
    ) -> Appended:
        """Append ``messages`` (and put ``state``) in one script if the conditions hold."""
        validate_messages(key, messages)
        validate_conditions(last_seq, epoch, idempotency_key)
        args = self._layout.write_args(key, messages, self._clock(), last_seq=last_seq,
                                       epoch=epoch, idempotency_key=idempotency_key,
                                       state=state)
        return appended(self._run("write", self._layout.keys(key), args, write=True))

    def epoch(self, key: SessionKey) -> str | None:
        """The live session's incarnation, or ``None``."""
        with redis_errors():
            return epoch_of(self._client().hmget(self._layout.key("meta", key),
                                              ["created_at", "epoch"]))

    def find_write(self, key: SessionKey, idempotency_key: str) -> list[int] | None:
        """The seqs stored by the write with ``idempotency_key``, if the session has it."""
        validate_conditions(None, None, idempotency_key)
        with redis_errors():
            done = self._client().hget(self._layout.key("writes", key), idempotency_key)
        return None if done is None else write_seqs(str(done))

    def read(
        self, key: SessionKey, *, after: int = 0, last: int | None = None
    ) -> list[StoredMessage]:
        """Messages with ``seq > after``, only the newest ``last`` of them, oldest first."""
        validate_read_args(after, last)
        return decoded_items(self._run("read", [self._layout.key("msgs", key)],
                                       read_args(after, last)))

    def count(self, key: SessionKey) -> int:
        """Number of messages in the session."""
        with redis_errors():
            return int(self._client().llen(self._layout.key("msgs", key)))

    def get_state(self, key: SessionKey) -> StateRecord | None:
        """The session's state document, if any."""
        with redis_errors():
            return state_record(self._client().hmget(self._layout.key("state", key),
                                                  ["version", "data", "updated_at"]))

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
        users = [validate_stored_id(user_id, "user_id")] if user_id is not None else sorted(
            self._members(self._layout.users))
        infos: list[SessionInfo] = []
        for user in users:
            keys = [SessionKey(user_id=user, session_id=s)
                    for s in self._members(self._layout.user_index(user))]
            infos.extend(self._infos(keys))
        return sorted_infos(infos)

    def append_index(self, key: SessionKey, part: str, *, epoch: str,
                     replace: bool = False) -> bool:
        """Append a part of the recall index if ``epoch`` is live (one script); False if not."""
        validate_index_part(key, part, epoch)
        return bool(self._run("index_append", self._layout.index_keys(key),
                    [epoch, "1" if replace else "", part], write=True))

    def read_index(self, key: SessionKey) -> StoredIndex | None:
        """The live session's epoch and recall index parts (one script)."""
        return stored_index(self._run("index_read", self._layout.index_keys(key), []))

    def read_spans(self, key: SessionKey, spans: Sequence[tuple[int, int]], *,
                   epoch: str) -> list[StoredMessage] | None:
        """The live session's messages in ``spans`` (seqs, inclusive); None if not ``epoch``.

        One script: the epoch check and the reads see the same session.
        """
        merged = validate_spans(spans, epoch)
        reply = self._run("read_spans", self._layout.span_keys(key), span_args(epoch, merged))
        return span_items(reply, merged)

    def erase_session(self, key: SessionKey) -> bool:
        """Remove the session; ``True`` if it was live."""
        # write=True: an erase whose answer is lost may still run, after later appends too.
        return bool(self._run("erase", self._layout.keys(key), [key.user_id, key.session_id],
                              write=True))

    def erase_user(self, user_id: str) -> int:
        """Remove every session of exactly ``user_id``; return how many were live."""
        validate_stored_id(user_id, "user_id")
        keys = [SessionKey(user_id=user_id, session_id=s)
                for s in self._members(self._layout.user_index(user_id))]
        # One script per session: a session appended concurrently is either erased or kept
        # whole, never split; erase_user racing new sessions of the same user may miss those.
        return sum(self.erase_session(key) for key in keys)

    def purge_expired(self) -> int:
        """Drop index entries of sessions Redis has expired; return how many sessions that was."""
        dropped = 0
        for user in self._members(self._layout.users):
            for session in self._members(self._layout.user_index(user)):
                key = SessionKey(user_id=user, session_id=session)
                dropped += int(self._run("forget", self._layout.keys(key), [user, session],
                                         write=True))
        return dropped

    def close(self) -> None:
        """Close the connection pool; later calls raise ``StoreError``, as on every store.

        (redis-py would otherwise reconnect on the next command: a shutdown that closes the
        store before its workers stop would go on writing.)
        """
        self._closed = True
        self._redis.close()

    # -- helpers ------------------------------------------------------------------------------

    def _client(self) -> Redis:
        """The client, unless the store is closed."""
        if self._closed:
            raise StoreError("the store is closed")
        return self._redis

    def _run(self, script: str, keys: list[str], args: list[Any], *, write: bool = False) -> Any:
        self._client()
        with redis_errors(write=write):
            return self._scripts[script](keys=keys, args=args)

    def _members(self, name: str) -> list[str]:
        with redis_errors():
            return list(self._client().smembers(name))  # type: ignore[arg-type]

    def _infos(self, keys: list[SessionKey]) -> list[SessionInfo]:
        with redis_errors():
            pipe = self._client().pipeline(transaction=False)
            for key in keys:
                pipe.hmget(self._layout.key("meta", key), ["created_at", "updated_at"])
                pipe.llen(self._layout.key("msgs", key))
            return session_infos(keys, pipe.execute())


def _connect(url: str, socket_timeout: float | None) -> Redis:
    """A client for ``url`` that has answered a PING and never re-sends a command itself."""
    redis = redis_module()
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    try:
        client: Redis = redis.Redis.from_url(
            url, decode_responses=True, socket_connect_timeout=5,
            socket_timeout=socket_timeout, retry=Retry(NoBackoff(), 0))
    except ValueError:
        raise StoreError("the redis URL is malformed") from None
    try:
        with redis_errors():
            client.ping()
    except TypeError:
        client.close()
        raise InvalidInputError(UNKNOWN_URL_OPTION) from None
    return client
