"""``ConnectionPool``: a sync store's connections, lent out for one operation at a time.

A store used from many threads (a thread per request, timers, executors that recycle their
threads) must not keep a connection for every thread it ever served: a thread that ends would keep
its connection, and its slot on the database server, until the store is closed, and the server
soon refuses new clients. So no connection belongs to a thread: each operation borrows one and
gives it back when it is done, and the next operation, on whatever thread, takes it again.

Idle connections wait on a stack (the newest on top, so a single thread keeps reusing one warm
connection), at most ``max_idle`` of them; one given back to a full stack, or unusable (closed,
broken, left inside a transaction), is closed instead; an idle one that ``alive`` finds dead (the
server dropped it meanwhile: a restart, a failover) is closed when it is taken, and the next one
tried, so a dropped pool costs no call an error. No operation ever waits for a connection:
the open connections are at most the operations running at once plus ``max_idle``.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Generic, TypeVar

from contextwright.checks import whole_number
from contextwright.errors import StoreError

C = TypeVar("C")

DEFAULT_MAX_IDLE = 16
"""Idle connections a sync store keeps: the service's default worker threads, so a busy service
reuses its connections instead of reopening them."""


_POOLS: weakref.WeakSet[ConnectionPool[object]] = weakref.WeakSet()
"""Every pool alive in this process, so a forked child can give each a lock of its own."""


def _unlock_in_child() -> None:
    """Give every pool a fresh lock in a forked child.

    A fork copies a lock as it stands: one another thread of the parent held at that moment
    stays held in the child, whose copy of that thread never runs to release it, so the
    child's first store call would wait for ever. What the lock guarded is of no use to the
    child anyway: its first call sets the parent's connections aside
    (``_leave_parents_connections``).
    """
    for pool in list(_POOLS):
        pool._lock = threading.Lock()


os.register_at_fork(after_in_child=_unlock_in_child)


class ConnectionPool(Generic[C]):
    """Connections opened on demand, lent for one operation, kept idle up to ``max_idle``."""

    def __init__(self, connect: Callable[[], C], *, usable: Callable[[C], bool],
                 close: Callable[[C], None], max_idle: int = DEFAULT_MAX_IDLE,
                 alive: Callable[[C], bool] | None = None) -> None:
        """``connect`` opens one, ``usable`` says if one given back may be lent again.

        ``alive`` (cheap: it runs before every lending of an idle connection) says if an idle
        one is still connected; None trusts every idle one.
        """
        whole_number(max_idle, "max_idle_connections", minimum=1)
        self._connect = connect
        self._usable = usable
        self._alive = alive
        self._close_one = close
        self._max_idle = max_idle
        self._idle: list[C] = []
        self._open = 0
        self._lock = threading.Lock()
        self._closed = False
        self._pid = os.getpid()
        self._inherited: list[C] = []
        """Idle connections a forked child found: its parent's, kept unused and never closed."""
        _POOLS.add(self)  # type: ignore[arg-type]  # any connection type: only its lock is reset

    @property
    def open_connections(self) -> int:
        """Connections open now, lent out or idle."""
        with self._lock:
            return self._open

    def check_open(self) -> None:
        """Raise ``StoreError`` if the pool is closed (for a call that needs no connection)."""
        if self._closed:
            raise StoreError("the store is closed")

    def lease(self) -> Lease[C]:
        """A connection for the caller alone until the ``with`` block ends, then given back."""
        return Lease(self)

    def close(self) -> None:
        """Close the idle connections now, and each lent one when it is given back."""
        with self._lock:
            self._leave_parents_connections()
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            self._discard(connection)

    def take(self) -> C:
        """A connection lent to the caller, who gives it back with ``give_back``."""
        while True:
            with self._lock:
                if self._closed:
                    raise StoreError("the store is closed")
                self._leave_parents_connections()
                if not self._idle:
                    self._open += 1  # one being opened already counts against the bound
                    break
                idle = self._idle.pop()
            if self._is_alive(idle):
                return idle
            self._discard(idle)
        try:
            # Outside the lock: a slow connect must not hold up calls that find one idle.
            return self._connect()
        except BaseException:
            with self._lock:
                self._open -= 1
            raise

    def give_back(self, connection: C) -> None:
        """Keep ``connection`` for the next call if it is usable and has room; else close it."""
        usable = self._is_usable(connection)
        with self._lock:
            self._leave_parents_connections()
            if usable and not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(connection)
                return
        self._discard(connection)

    def _leave_parents_connections(self) -> None:
        """In a process forked since the connections were opened, set its parent's aside.

        A child shares their sockets (and SQLite's file locks) with its parent: using one
        would mix two processes' statements and answers on one connection, and closing one
        (also by garbage collection) would end the parent's session. So the child keeps them,
        untouched, and opens its own. Called with the lock held.
        """
        if self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._inherited.extend(self._idle)
        self._idle = []
        self._open = 0

    def _is_usable(self, connection: C) -> bool:
        try:
            return self._usable(connection)
        except Exception:  # a connection that cannot even say its state is not lent again
            return False

    def _is_alive(self, connection: C) -> bool:
        if self._alive is None:
            return True
        try:
            return self._alive(connection)
        except Exception:
            return False

    def _discard(self, connection: C) -> None:
        with self._lock:
            self._open -= 1
        try:
            self._close_one(connection)
        except Exception:  # closing a broken connection may fail; it is gone either way
            pass


class Lease(Generic[C]):
    """``with pool.lease() as connection``: taken on entry, given back on exit, even on error.

    A class rather than ``@contextmanager``: it wraps every store call, and a generator costs
    more.
    """

    __slots__ = ("_connection", "_pool")

    def __init__(self, pool: ConnectionPool[C]) -> None:
        self._pool = pool

    def __enter__(self) -> C:
        self._connection = self._pool.take()
        return self._connection

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._pool.give_back(self._connection)
