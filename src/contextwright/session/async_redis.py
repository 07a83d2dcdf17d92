"""``AsyncRedisStore``: ``RedisStore`` for an event loop, on ``redis.asyncio``.

The same keys, Lua scripts and encodings as ``RedisStore`` (``redis_common``), so a sync and an
async worker serve one session alike. Nothing connects when the store is made: the client is
created, and the server pinged, on the first call, on the loop that makes it, and the store then
serves that loop only (``LoopGuard``). As with the sync store, the client never re-sends a command
by itself: a write whose answer is lost raises ``OutcomeUnknown``. Long reads are decoded on a
worker thread, so a session's whole log read at once does not stall the loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from contextwright.checks import optional_seconds, whole_number
from contextwright.errors import InvalidInputError, StoreError
from contextwright.session.flow import LoopGuard
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
    from redis.asyncio import Redis

DECODE_INLINE = 64
"""Messages a read decodes on the loop itself; more are decoded on a worker thread."""


class AsyncRedisStore:
    """An ``AsyncStore`` in Redis; TTL by native key expiry, refreshed on every write."""

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "contextwright",
        ttl_seconds: float | None = None,
        clock: Clock = time.time,
        socket_timeout: float | None = 30.0,
        max_connections: int | None = None,
    ) -> None:
        """Check the arguments; connect on first use. Keys start with ``prefix:``.

        ``socket_timeout`` and the write semantics are ``RedisStore``'s; ``max_connections``
        caps the client's pool (concurrent calls beyond it wait; default: redis-py's).
        """
        self._layout = RedisLayout(prefix, ttl_seconds)
        self._clock = clock
        self._url = validate_address(url, "url")
        self._options: dict[str, Any] = {
            "socket_timeout": optional_seconds(socket_timeout, "socket_timeout")}
        if max_connections is not None:
            self._options["max_connections"] = whole_number(
                max_connections, "max_connections", minimum=1)
        self._guard = LoopGuard("AsyncRedisStore")
        self._redis: Redis | None = None
        self._scripts: dict[str, Any] = {}
        self._opening = asyncio.Lock()
        self._closed = False

    async def __aenter__(self) -> AsyncRedisStore:
        """Connect now (``StoreUnavailable`` if Redis does not answer)."""
        await self._client()
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Close the connection pool."""
        await self.aclose()

    async def append(self, key: SessionKey, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Append all ``messages`` in one script; return their seqs."""
        return (await self.append_if(key, messages)).seqs

    async def append_if(
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
        return appended(await self._run("write", self._layout.keys(key), args, write=True))

    async def epoch(self, key: SessionKey) -> str | None:
        """The live session's incarnation, or ``None``."""
        client = await self._client()
        with redis_errors():
            meta = await client.hmget(self._layout.key("meta", key), ["created_at", "epoch"])
        return epoch_of(meta)

    async def find_write(self, key: SessionKey, idempotency_key: str) -> list[int] | None:
        """The seqs stored by the write with ``idempotency_key``, if the session has it."""
        validate_conditions(None, None, idempotency_key)
        client = await self._client()
        with redis_errors():
            done = await client.hget(self._layout.key("writes", key), idempotency_key)
        return None if done is None else write_seqs(str(done))

    async def read(
        self, key: SessionKey, *, after: int = 0, last: int | None = None
    ) -> list[StoredMessage]:
        """Messages with ``seq > after``, only the newest ``last`` of them, oldest first."""
        validate_read_args(after, last)
        reply = await self._run("read", [self._layout.key("msgs", key)], read_args(after, last))
        if len(reply[1]) <= DECODE_INLINE:
            return decoded_items(reply)
        return await asyncio.to_thread(decoded_items, reply)

    async def count(self, key: SessionKey) -> int:
        """Number of messages in the session."""
        client = await self._client()
        with redis_errors():
            return int(await client.llen(self._layout.key("msgs", key)))

    async def get_state(self, key: SessionKey) -> StateRecord | None:
        """The session's state document, if any."""
        client = await self._client()
        with redis_errors():
            row = await client.hmget(self._layout.key("state", key),
                                     ["version", "data", "updated_at"])
        return state_record(row)

    async def put_state(
        self, key: SessionKey, data: Mapping[str, Any], *, expected_version: int | None,
        epoch: str | None = None,
    ) -> int:
        """Replace the state if it is at ``expected_version``; return the new version."""
        write = StateWrite(data=data, expected_version=expected_version)
        version = (await self.append_if(key, [], epoch=epoch, state=write)).state_version
        assert version is not None  # a StateWrite that passed its checks is always written
        return version

    async def list_sessions(self, user_id: str | None = None) -> list[SessionInfo]:
        """Live sessions, of one user or all, sorted by ``(user_id, session_id)``."""
        users = [validate_stored_id(user_id, "user_id")] if user_id is not None else sorted(
            await self._members(self._layout.users))
        infos: list[SessionInfo] = []
        for user in users:
            keys = [SessionKey(user_id=user, session_id=s)
                    for s in await self._members(self._layout.user_index(user))]
            infos.extend(await self._infos(keys))
        return sorted_infos(infos)

    async def append_index(self, key: SessionKey, part: str, *, epoch: str,
                           replace: bool = False) -> bool:
        """Append a part of the recall index if ``epoch`` is live (one script); False if not."""
        validate_index_part(key, part, epoch)
        return bool(await self._run("index_append", self._layout.index_keys(key),
                          [epoch, "1" if replace else "", part], write=True))

    async def read_index(self, key: SessionKey) -> StoredIndex | None:
        """The live session's epoch and recall index parts (one script)."""
        return stored_index(await self._run("index_read", self._layout.index_keys(key), []))

    async def read_spans(self, key: SessionKey, spans: Sequence[tuple[int, int]], *,
                         epoch: str) -> list[StoredMessage] | None:
        """The live session's messages in ``spans`` (seqs, inclusive); None if not ``epoch``.

        One script: the epoch check and the reads see the same session.
        """
        merged = validate_spans(spans, epoch)
        reply = await self._run("read_spans", self._layout.span_keys(key),
                                span_args(epoch, merged))
        return span_items(reply, merged)

    async def erase_session(self, key: SessionKey) -> bool:
        """Remove the session; ``True`` if it was live."""
        # write=True: an erase whose answer is lost may still run, after later appends too.
        return bool(await self._run("erase", self._layout.keys(key),
                                    [key.user_id, key.session_id], write=True))

    async def erase_user(self, user_id: str) -> int:
        """Remove every session of exactly ``user_id``; return how many were live."""
        validate_stored_id(user_id, "user_id")
        keys = [SessionKey(user_id=user_id, session_id=s)
                for s in await self._members(self._layout.user_index(user_id))]
        # One script per session, as in RedisStore: a racing append is erased or kept whole.
        return sum([await self.erase_session(key) for key in keys])

    async def purge_expired(self) -> int:
        """Drop index entries of sessions Redis has expired; return how many sessions that was."""
        dropped = 0
        for user in await self._members(self._layout.users):
            for session in await self._members(self._layout.user_index(user)):
                key = SessionKey(user_id=user, session_id=session)
                dropped += int(await self._run("forget", self._layout.keys(key),
                                               [user, session], write=True))
        return dropped

    async def aclose(self) -> None:
        """Close the connection pool; later calls raise ``StoreError``."""
        self._closed = True
        if self._redis is not None:
            # Its connections belong to the loop they were made on, which must close them: from
            # another one (often already ended) that fails in the driver's internals.
            self._guard.check()
        # A first call may be connecting right now: wait for it, so its client is closed too
        # rather than left connected by a store already closed.
        async with self._opening:
            client, self._redis = self._redis, None
        if client is not None:
            await client.aclose()

    # -- helpers ------------------------------------------------------------------------------

    async def _client(self) -> Redis:
        """The client, made and pinged on the first call (on this loop only)."""
        if self._closed:
            raise StoreError("the store is closed")
        self._guard.check()
        if self._redis is not None:
            return self._redis
        async with self._opening:
            if self._redis is None:
                try:
                    client = _client(self._url, self._options)
                    try:
                        with redis_errors():
                            await client.ping()
                    except TypeError:
                        await client.aclose()
                        raise InvalidInputError(UNKNOWN_URL_OPTION) from None
                except BaseException:
                    self._guard.release()
                    raise
                self._scripts = {name: client.register_script(text)
                                 for name, text in SCRIPTS.items()}
                self._redis = client
        return self._redis

    async def _run(self, script: str, keys: list[str], args: list[Any], *,
                   write: bool = False) -> Any:
        await self._client()
        with redis_errors(write=write):
            return await self._scripts[script](keys=keys, args=args)

    async def _members(self, name: str) -> list[str]:
        client = await self._client()
        with redis_errors():
            return [str(member) for member in await client.smembers(name)]

    async def _infos(self, keys: list[SessionKey]) -> list[SessionInfo]:
        client = await self._client()
        with redis_errors():
            async with client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.hmget(self._layout.key("meta", key), ["created_at", "updated_at"])
                    pipe.llen(self._layout.key("msgs", key))
                replies = await pipe.execute()
        return session_infos(keys, replies)


def _client(url: str, options: dict[str, Any]) -> Redis:
    """An asyncio client for ``url`` that never re-sends a command itself (not yet connected)."""
    redis_module()
    import redis.asyncio as aredis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    settings: dict[str, Any] = {"decode_responses": True, "socket_connect_timeout": 5,
                                "retry": Retry(NoBackoff(), 0), **options}
    try:
        if "max_connections" not in options:
            client: Redis = aredis.Redis.from_url(url, **settings)
            return client
        # The plain pool refuses a call past max_connections ("Too many connections"); this
        # one makes it wait for a connection to come back, as the store promises.
        pool = aredis.BlockingConnectionPool.from_url(url, timeout=None, **settings)
    except ValueError:
        raise StoreError("the redis URL is malformed") from None
    client = aredis.Redis(connection_pool=pool)
    client.auto_close_connection_pool = True  # the client owns it (as Redis.from_pool does)
    return client
