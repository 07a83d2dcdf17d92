"""``RedisSink``: snapshots in Redis, next to a fleet's sessions (the ``redis`` extra).

Bodies live in one hash (``<prefix>:snapshots:body``), their times in a sorted set
(``<prefix>:snapshots:time``), so a time range is one ``ZRANGEBYSCORE`` and retention is a range
removal on the set plus ``HDEL`` of the same ids, in one transaction. A snapshot is also in its
plan's sorted set (``<prefix>:snapshots:by:plan:<plan>``, the plan it grew from) and, for a
manager's build, in one per form its user and session ids are kept in
(``...:by:user_id:<form>``, ``...:by:session_id:<form>``), so a query by plan, user or session
reads those snapshots only; which sets hold a snapshot is kept beside it
(``<prefix>:snapshots:refs``) for retention to remove it from them. A query with a
``limit`` reads ids newest first, page by page, and stops once it has enough: ``snapshots
list --limit 10`` on a store of millions reads a few bodies, not all of them.

Snapshots written before these sets existed are indexed once, when a sink of this version
first opens the prefix (``<prefix>:snapshots:indexed`` marks it done). A writer of an older
version still running beside it does not index what it writes: upgrade the writers first.
The connection is made as the ``RedisStore`` makes it (a PING first, no silent re-sends) and
errors map the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from contextwright.errors import CorruptRecordError, InvalidInputError
from contextwright.observe.sinks import (
    SnapshotQuery,
    UnreadableRows,
    newest,
    not_found,
    stored_snapshot,
)
from contextwright.observe.snapshot import Snapshot
from contextwright.session.redis import _connect
from contextwright.session.redis_common import redis_errors as _errors

PAGE = 256
"""Ids read per round trip when a query reads newest first."""
_BODY_BATCH = 32
"""Bodies fetched at a time at least, when a query's filters are read from the bodies."""
_SESSION_FIELDS = ("user_id", "session_id")
_INDEX_VERSION = "1"
_AS_BYTES: dict[str, object] = {"NEVER_DECODE": ()}
"""Options of a command whose answer stays bytes (redis-py's ``NEVER_DECODE``): the client
decodes every answer as UTF-8, and one body that is not (damaged, or written by another
program) made the whole answer raise ``UnicodeDecodeError``, failing every read that reached
it and the first open of its prefix. Bodies are read as bytes and parsed one by one."""


class RedisSink:
    """A ``SnapshotSink`` in Redis under ``prefix``.

    A body that is not a snapshot this version reads (damaged, or of a newer layout) is skipped
    by reads with a warning and listed by ``unreadable_rows``; ``get`` of it raises
    ``CorruptRecordError`` naming it.
    """

    def __init__(self, url: str, *, prefix: str = "contextwright",
                 socket_timeout: float | None = 10.0) -> None:
        if not prefix or any(c in prefix for c in " \n\r*?[]"):
            raise InvalidInputError("the redis prefix must be a plain, non-empty name")
        self._client: Any = _connect(url, socket_timeout)
        self._time = f"{prefix}:snapshots:time"
        self._body = f"{prefix}:snapshots:body"
        self._refs = f"{prefix}:snapshots:refs"
        self._by = f"{prefix}:snapshots:by"
        self._indexed = f"{prefix}:snapshots:indexed"
        self._unreadable = UnreadableRows()
        self._index_stored()

    def write(self, snapshots: Sequence[Snapshot]) -> None:
        """Add the batch, with its plan, user and session entries, in one MULTI/EXEC."""
        with _errors(write=True):
            pipe = self._client.pipeline(transaction=True)
            self._add(pipe, snapshots)
            pipe.execute()

    def _add(self, pipe: Any, snapshots: Iterable[Snapshot]) -> None:
        bodies: dict[str, str] = {}
        times: dict[str, float] = {}
        refs: dict[str, str] = {}
        for snapshot in snapshots:
            bodies[snapshot.id] = snapshot.to_json()
            times[snapshot.id] = snapshot.created_at
            keys = self._index_keys(snapshot)
            for key in keys:
                pipe.zadd(key, {snapshot.id: snapshot.created_at})
            if keys:
                refs[snapshot.id] = "\n".join(keys)
        if bodies:
            pipe.hset(self._body, mapping=bodies)
            pipe.zadd(self._time, times)
        if refs:
            pipe.hset(self._refs, mapping=refs)

    def _index_keys(self, snapshot: Snapshot) -> list[str]:
        """The sorted sets that index ``snapshot``: its plan's, its user's and its session's."""
        session = snapshot.session or {}
        return [self._index_key("plan", _base_plan(snapshot.plan)),
                *(self._index_key(name, str(session[name]))
                  for name in _SESSION_FIELDS if session.get(name))]

    def _index_key(self, name: str, form: str) -> str:
        return f"{self._by}:{name}:{form}"

    def _index_stored(self) -> None:
        """Index the snapshots stored before this version kept plan, user and session sets."""
        with _errors(write=True):
            if self._client.get(self._indexed) == _INDEX_VERSION:
                return
            for batch in self._stored_batches():
                pipe = self._client.pipeline(transaction=True)
                self._add(pipe, batch)
                pipe.execute()
            self._client.set(self._indexed, _INDEX_VERSION)

    def _stored_batches(self) -> Iterator[list[Snapshot]]:
        """The stored snapshots in batches; a body that does not parse is left unindexed.

        It cannot be matched by user or session; a read that reaches it (by time) skips and
        lists it, ``get`` raises ``CorruptRecordError``, and retention removes it.
        """
        batch: list[Snapshot] = []
        cursor = None
        while cursor != 0:
            cursor, page = self._client.execute_command(
                "HSCAN", self._body, cursor or 0, "COUNT", PAGE, **_AS_BYTES)
            for body in page.values():
                try:
                    batch.append(Snapshot.from_json(body))
                except CorruptRecordError:
                    continue
                if len(batch) >= PAGE:
                    yield batch
                    batch = []
        if batch:
            yield batch

    def read(self, query: SnapshotQuery | None = None) -> list[Snapshot]:
        """The ids the query's time range and ids select, then their bodies; filtered here.

        With a ``limit``, ids are read newest first and bodies fetched page by page until
        that many match.
        """
        query = query or SnapshotQuery()
        with _errors():
            if query.limit is None:
                return newest(self._bodies([i for i, _ in self._ids(query)]), query)
            return self._newest(query, query.limit)

    def _newest(self, query: SnapshotQuery, limit: int) -> list[Snapshot]:
        """The newest ``limit`` matches, reading as few bodies as the filters allow.

        Bodies are what a read pays for (a snapshot holds its messages): when every selected
        id matches, exactly the missing number is fetched; when the plan, mode or status must
        be read from the body, a few more at a time.
        """
        found: list[Snapshot] = []
        slack = _BODY_BATCH if _filters_bodies(query) else 0
        for page in self._newest_pages(query):
            start = 0
            while start < len(page) and len(found) < limit:
                chunk = page[start:start + max(limit - len(found), slack)]
                found += [s for s in self._bodies(chunk) if query.matches(s)]
                start += len(chunk)
            if len(found) >= limit:
                break
        return newest(found, query)

    def _newest_pages(self, query: SnapshotQuery) -> Iterator[list[str]]:
        """Ids the query selects, newest first (ties by id, as ``newest`` orders), in pages.

        One sorted set (the time set, or a plan's) is read page by page; the ids of several
        (a user's or session's forms, crossed with a plan) are merged in memory.
        """
        if query.by_session:
            ranked = sorted(self._ids(query), key=lambda entry: (entry[1], entry[0]),
                            reverse=True)
            for start in range(0, len(ranked), PAGE):
                yield [i for i, _ in ranked[start:start + PAGE]]
            return
        key = self._time if query.plan is None else self._index_key("plan",
                                                                   _base_plan(query.plan))
        low, high = _range(query)
        start = 0
        while True:
            page = self._client.zrevrangebyscore(key, high, low, start=start, num=PAGE)
            if not page:
                return
            yield page
            start += len(page)

    def _ids(self, query: SnapshotQuery) -> list[tuple[str, float]]:
        """(id, time) of the snapshots in the query's range, of its plan, user and session.

        A plan's set holds the builds grown from it too (``simple_qa+history``): ``matches``
        tells them apart on the body.
        """
        low, high = _range(query)
        if not _indexed(query):
            return list(self._client.zrangebyscore(self._time, low, high, withscores=True))
        plans = frozenset() if query.plan is None else frozenset((_base_plan(query.plan),))
        chosen: dict[str, float] | None = None
        for name, forms in (("plan", plans), ("user_id", query.user_forms),
                            ("session_id", query.session_forms)):
            if not forms:
                continue
            pipe = self._client.pipeline(transaction=False)
            for form in sorted(forms):
                pipe.zrangebyscore(self._index_key(name, form), low, high, withscores=True)
            matched = {i: score for rows in pipe.execute() for i, score in rows}
            chosen = matched if chosen is None else {
                i: score for i, score in chosen.items() if i in matched}
        return list((chosen or {}).items())

    def _bodies(self, ids: list[str]) -> list[Snapshot]:
        """The snapshots of ``ids`` (those gone meanwhile, or not readable, skipped)."""
        bodies = self._client.execute_command("HMGET", self._body, *ids,
                                              **_AS_BYTES) if ids else []
        return self._unreadable.parse((snapshot_id, body) for snapshot_id, body
                                      in zip(ids, bodies, strict=True) if body is not None)

    def unreadable_rows(self) -> list[tuple[str, str]]:
        """The snapshots reads skipped because their bodies are not snapshots: id, why."""
        return self._unreadable.listed()

    def get(self, snapshot_id: str) -> Snapshot:
        """One snapshot by id; ``CorruptRecordError`` naming it when it cannot be read."""
        with _errors():
            body = self._client.execute_command("HGET", self._body, snapshot_id, **_AS_BYTES)
        if body is None:
            raise not_found(snapshot_id)
        return stored_snapshot(snapshot_id, body)

    def purge(self, *, older_than: float | None = None, keep_last: int | None = None) -> int:
        """Remove by age, then all but the newest ``keep_last``, from every set that holds them."""
        with _errors(write=True):
            doomed: list[str] = []
            if older_than is not None:
                doomed += self._client.zrangebyscore(self._time, "-inf", f"({older_than}")
            if keep_last is not None:
                doomed += self._client.zrange(self._time, 0, -keep_last - 1)
            doomed = sorted(set(doomed))
            if not doomed:
                return 0
            refs = self._client.hmget(self._refs, doomed)
            pipe = self._client.pipeline(transaction=True)
            pipe.zrem(self._time, *doomed)
            pipe.hdel(self._body, *doomed)
            pipe.hdel(self._refs, *doomed)
            for snapshot_id, keys in zip(doomed, refs, strict=True):
                for key in (keys or "").split("\n"):
                    if key:
                        pipe.zrem(key, snapshot_id)
            removed = pipe.execute()[0]
        self._unreadable.purged()
        return int(removed)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()


def _indexed(query: SnapshotQuery) -> bool:
    """Whether the query names a plan, user or session (each has its sorted sets)."""
    return query.plan is not None or query.by_session


def _base_plan(plan: str) -> str:
    """The plan a build's plan grew from (``simple_qa`` of ``simple_qa+history``)."""
    return plan.split("+", 1)[0]


def _filters_bodies(query: SnapshotQuery) -> bool:
    """Whether some of the query's filters can only be checked on a snapshot's body.

    A plan's set holds its own builds and those grown from it: a query for a grown plan
    (``simple_qa+history``) is told apart on the body.
    """
    return (query.mode is not None or query.status is not None
            or (query.plan is not None and query.plan != _base_plan(query.plan)))


def _range(query: SnapshotQuery) -> tuple[str | float, str]:
    """``ZRANGEBYSCORE`` bounds of the query's time range (``until`` is exclusive)."""
    low = "-inf" if query.since is None else query.since
    high = "+inf" if query.until is None else f"({query.until}"
    return low, high

