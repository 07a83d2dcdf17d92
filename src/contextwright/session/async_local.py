"""``AsyncMemoryStore`` and ``AsyncSqliteStore``: the in-process stores behind an async face.

Neither has an async driver to use, so each wraps its sync store, whose semantics it keeps
exactly. The memory store's operations are short and hold only its own lock, so they run on the
loop itself, all but ``read``, which decodes every message it returns and so runs on a worker
thread; the SQLite store's block on the file, so they run on one worker thread that belongs
to the store: SQLite's rules for connections and threads hold as in a single-threaded program,
and the operations run in the order they were called. A sync and an async store on the same
SQLite file (or an ``AsyncMemoryStore`` given the ``MemoryStore`` a sync manager uses) serve the
same sessions.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Self, TypeVar, cast

from contextwright.checks import whole_number
from contextwright.errors import InvalidInputError, StoreError
from contextwright.session.memory import MemoryStore
from contextwright.session.sqlite import SYNCHRONOUS_MODES, SqliteStore, database_path
from contextwright.session.store import (
    Appended,
    Clock,
    IndexStore,
    SessionInfo,
    SessionKey,
    StateRecord,
    StateWrite,
    Store,
    StoredIndex,
    StoredMessage,
    validate_ttl,
)

T = TypeVar("T")


class _SyncBacked:
    """The ``AsyncStore`` methods, each one call of the wrapped store through ``_call``."""

    async def _call(self, work: Callable[[Store], T]) -> T:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release the store."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        """Open the store now (``StoreUnavailable`` if its file cannot be opened)."""
        await self._call(lambda store: None)
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Close the store."""
        await self.aclose()

    async def append(self, key: SessionKey, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """As ``Store.append``."""
        return await self._call(lambda store: store.append(key, messages))

    async def append_if(
        self, key: SessionKey, messages: Sequence[Mapping[str, Any]], *,
        last_seq: int | None = None, epoch: str | None = None,
        idempotency_key: str | None = None, state: StateWrite | None = None,
    ) -> Appended:
        """As ``Store.append_if``."""
        return await self._call(lambda store: store.append_if(
            key, messages, last_seq=last_seq, epoch=epoch, idempotency_key=idempotency_key,
            state=state))

    async def read(
        self, key: SessionKey, *, after: int = 0, last: int | None = None
    ) -> list[StoredMessage]:
        """As ``Store.read``."""
        return await self._call(lambda store: store.read(key, after=after, last=last))

    async def epoch(self, key: SessionKey) -> str | None:
        """As ``Store.epoch``."""
        return await self._call(lambda store: store.epoch(key))

    async def find_write(self, key: SessionKey, idempotency_key: str) -> list[int] | None:
        """As ``Store.find_write``."""
        return await self._call(lambda store: store.find_write(key, idempotency_key))

    async def count(self, key: SessionKey) -> int:
        """As ``Store.count``."""
        return await self._call(lambda store: store.count(key))

    async def get_state(self, key: SessionKey) -> StateRecord | None:
        """As ``Store.get_state``."""
        return await self._call(lambda store: store.get_state(key))

    async def put_state(
        self, key: SessionKey, data: Mapping[str, Any], *, expected_version: int | None,
        epoch: str | None = None,
    ) -> int:
        """As ``Store.put_state``."""
        return await self._call(lambda store: store.put_state(
            key, data, expected_version=expected_version, epoch=epoch))

    async def list_sessions(self, user_id: str | None = None) -> list[SessionInfo]:
        """As ``Store.list_sessions``."""
        return await self._call(lambda store: store.list_sessions(user_id))

    async def erase_session(self, key: SessionKey) -> bool:
        """As ``Store.erase_session``."""
        return await self._call(lambda store: store.erase_session(key))

    async def erase_user(self, user_id: str) -> int:
        """As ``Store.erase_user``."""
        return await self._call(lambda store: store.erase_user(user_id))

    async def purge_expired(self) -> int:
        """As ``Store.purge_expired``."""
        return await self._call(lambda store: store.purge_expired())

    async def append_index(self, key: SessionKey, part: str, *, epoch: str,
                           replace: bool = False) -> bool:
        """As ``IndexStore.append_index``."""
        return await self._call(lambda store: cast(IndexStore, store).append_index(
            key, part, epoch=epoch, replace=replace))

    async def read_index(self, key: SessionKey) -> StoredIndex | None:
        """As ``IndexStore.read_index``."""
        return await self._call(lambda store: cast(IndexStore, store).read_index(key))

    async def read_spans(self, key: SessionKey, spans: Sequence[tuple[int, int]], *,
                         epoch: str) -> list[StoredMessage] | None:
        """As ``IndexStore.read_spans``."""
        return await self._call(lambda store: cast(IndexStore, store).read_spans(
            key, spans, epoch=epoch))


class AsyncMemoryStore(_SyncBacked):
    """An ``AsyncStore`` in process memory, over a ``MemoryStore`` (its own, or one given)."""

    def __init__(self, *, ttl_seconds: float | None = None, clock: Clock = time.time,
                 store: MemoryStore | None = None) -> None:
        """A new memory store with ``ttl_seconds`` and ``clock``, or the given ``store``.

        Giving the ``MemoryStore`` a sync manager uses lets sync and async calls share its
        sessions (its own retention and clock then apply); it stays the caller's, open after
        ``aclose``.
        """
        if store is not None and (ttl_seconds is not None or clock is not time.time):
            raise InvalidInputError("give ttl_seconds and clock to the MemoryStore itself")
        self.store = store if store is not None else MemoryStore(ttl_seconds=ttl_seconds,
                                                                 clock=clock)
        """The wrapped store."""
        self._owned = store is None
        self._closed = False

    async def _call(self, work: Callable[[Store], T]) -> T:
        self._check_open()
        # Microseconds under the store's own lock: a thread hop would cost more than it saves.
        return work(self.store)

    async def read(
        self, key: SessionKey, *, after: int = 0, last: int | None = None
    ) -> list[StoredMessage]:
        """As ``Store.read``, on a worker thread: decoding a long log would stall the loop."""
        self._check_open()
        return await asyncio.to_thread(self.store.read, key, after=after, last=last)

    async def aclose(self) -> None:
        """Drop everything (unless the store was given); later calls raise ``StoreError``.

        A given store stays open for its other users; this one refuses calls all the same.
        """
        self._closed = True
        if self._owned:
            self.store.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed")


class AsyncSqliteStore(_SyncBacked):
    """An ``AsyncStore`` in one SQLite file: a ``SqliteStore`` on a thread of its own.

    A process forked from one that made it (a pre-forking server, ``multiprocessing`` with
    fork) can use it too: the child's calls run on a thread of the child's own, on connections
    of its own, and a fork waits for the call the store's thread is making.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        ttl_seconds: float | None = None,
        clock: Clock = time.time,
        busy_timeout_ms: int = 30_000,
        synchronous: str = "NORMAL",
    ) -> None:
        """Open ``path`` as ``SqliteStore`` does, on the store's thread.

        The arguments are ``SqliteStore``'s and are checked here; the file is opened on the
        thread, so a file that cannot be opened raises on the first call, and the next call
        tries again (as a new ``SqliteStore`` would).
        """
        database_path(path)
        validate_ttl(ttl_seconds)
        whole_number(busy_timeout_ms, "busy_timeout_ms")
        if synchronous not in SYNCHRONOUS_MODES:
            raise InvalidInputError("synchronous must be OFF, NORMAL, FULL or EXTRA")
        self._open_store = functools.partial(
            SqliteStore, path, ttl_seconds=ttl_seconds, clock=clock,
            busy_timeout_ms=busy_timeout_ms, synchronous=synchronous)
        self._store: SqliteStore | None = None
        """Set and read on the store's thread only."""
        self._thread = _store_thread()
        self._pid = os.getpid()
        """The process ``_thread`` runs in."""
        self._busy = threading.Lock()
        """Held while the store's thread runs a call: a fork waits for it (``_hold_for_fork``)."""
        _FORK_SAFE.add(self)
        # Opened now, in the background; a failure is raised (and opening retried) by a call.
        self._submit(self._opened)
        self._closed = False

    def _opened(self) -> SqliteStore:
        """The open store (on the store's thread), opening it if no attempt succeeded yet."""
        if self._store is None:
            self._store = self._open_store()
        return self._store

    async def _call(self, work: Callable[[Store], T]) -> T:
        if self._closed:
            raise StoreError("the store is closed")
        return await asyncio.wrap_future(self._submit(lambda: work(self._opened())))

    async def aclose(self) -> None:
        """Close the database and stop the store's thread."""
        if self._closed:
            return
        self._closed = True

        def close() -> None:
            if self._store is not None:
                self._store.close()

        await asyncio.wrap_future(self._submit(close))
        self._thread.shutdown(wait=False)
        _FORK_SAFE.discard(self)

    def _submit(self, work: Callable[[], T]) -> Future[T]:
        """Run ``work`` on the store's thread, holding ``_busy`` while it runs."""
        def run() -> T:
            with self._busy:
                return work()

        return self._worker().submit(run)

    def _worker(self) -> ThreadPoolExecutor:
        """The store's thread; in a process forked since it started, a new one.

        A forked child has none of its parent's threads, but the executor it inherited
        believes its thread is there: a call handed to it would wait for ever. The child's
        thread uses the same ``SqliteStore``, whose pool leaves the parent's connections
        alone and opens the child's own.
        """
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._thread = _store_thread()
        return self._thread


_FORK_SAFE: weakref.WeakSet[AsyncSqliteStore] = weakref.WeakSet()
"""Every ``AsyncSqliteStore`` not closed yet: a fork waits for their threads."""
_fork_holds = threading.local()
"""``locks``: the ``_busy`` locks the fork this thread makes holds (released on both sides
after it). Per thread, so two threads forking at once each release only their own."""


def _hold_for_fork() -> None:
    """Before a fork: wait until no store's thread is inside SQLite, and keep it out.

    A thread that is inside SQLite when the process forks may hold one of SQLite's own
    process-wide mutexes; the child, which has no such thread to release it, would hang in its
    first SQLite call, on any connection. A call runs for milliseconds (at most the busy
    timeout, when it waits for another process's write), so the fork waits that long.
    """
    held: list[threading.Lock] = []
    _fork_holds.locks = held
    for store in list(_FORK_SAFE):
        store._busy.acquire()
        held.append(store._busy)


def _release_after_fork() -> None:
    """After a fork, in parent and child: the stores' threads may run calls again."""
    held: list[threading.Lock] = getattr(_fork_holds, "locks", [])
    _fork_holds.locks = []
    for lock in held:
        lock.release()


if hasattr(os, "register_at_fork"):  # not on Windows, which cannot fork
    os.register_at_fork(before=_hold_for_fork, after_in_parent=_release_after_fork,
                        after_in_child=_release_after_fork)


def _store_thread() -> ThreadPoolExecutor:
    """The one thread an ``AsyncSqliteStore`` runs its calls on, in order."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="cw-sqlite")
