"""``RedisSink``: snapshots in Redis, next to a fleet's sessions (the ``redis`` extra).

Bodies live in one hash (``<prefix>:snapshots:body``), their times in a sorted set
(``<prefix>:snapshots:time``), so a time range is one ``ZRANGEBYSCORE`` and retention is a range
removal on the set plus ``HDEL`` of the same ids, in one transaction. The connection is made as
the ``RedisStore`` makes it (a PING first, no silent re-sends) and errors map the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextwright.errors import InvalidInputError
from contextwright.observe.sinks import SnapshotQuery, newest, not_found
from contextwright.observe.snapshot import Snapshot
from contextwright.session.redis import _connect
from contextwright.session.redis_common import redis_errors as _errors


class RedisSink:
    """A ``SnapshotSink`` in Redis under ``prefix``."""

    def __init__(self, url: str, *, prefix: str = "contextwright",
                 socket_timeout: float | None = 10.0) -> None:
        if not prefix or any(c in prefix for c in " \n\r*?[]"):
            raise InvalidInputError("the redis prefix must be a plain, non-empty name")
        self._client: Any = _connect(url, socket_timeout)
        self._time = f"{prefix}:snapshots:time"
        self._body = f"{prefix}:snapshots:body"

    def write(self, snapshots: Sequence[Snapshot]) -> None:
        """Add the batch in one MULTI/EXEC."""
        with _errors(write=True):
            pipe = self._client.pipeline(transaction=True)
            pipe.hset(self._body, mapping={s.id: s.to_json() for s in snapshots})
            pipe.zadd(self._time, {s.id: s.created_at for s in snapshots})
            pipe.execute()

    def read(self, query: SnapshotQuery | None = None) -> list[Snapshot]:
        """Ids in the time range from the sorted set, then their bodies; filtered here."""
        query = query or SnapshotQuery()
        low = "-inf" if query.since is None else query.since
        high = "+inf" if query.until is None else f"({query.until}"
        with _errors():
            ids = self._client.zrangebyscore(self._time, low, high)
            bodies = self._client.hmget(self._body, ids) if ids else []
        return newest([Snapshot.from_json(b) for b in bodies if b is not None], query)

    def get(self, snapshot_id: str) -> Snapshot:
        """One snapshot by id."""
        with _errors():
            body = self._client.hget(self._body, snapshot_id)
        if body is None:
            raise not_found(snapshot_id)
        return Snapshot.from_json(body)

    def purge(self, *, older_than: float | None = None, keep_last: int | None = None) -> int:
        """Remove by age, then all but the newest ``keep_last``."""
        with _errors(write=True):
            doomed: list[str] = []
            if older_than is not None:
                doomed += self._client.zrangebyscore(self._time, "-inf", f"({older_than}")
            if keep_last is not None:
                doomed += self._client.zrange(self._time, 0, -keep_last - 1)
            doomed = sorted(set(doomed))
            if not doomed:
                return 0
            pipe = self._client.pipeline(transaction=True)
            pipe.zrem(self._time, *doomed)
            pipe.hdel(self._body, *doomed)
            removed, _ = pipe.execute()
        return int(removed)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()
