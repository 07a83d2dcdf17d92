"""Store calls as data, so that one piece of session logic runs over sync and async stores.

A *flow* is a generator that yields steps and is sent each step's result: a ``StoreCall`` (a
store method's name and its arguments) or a ``Compute`` (CPU work such as a build or a summary).
The logic lives in the flow and does no I/O itself; ``run_flow`` drives it over a ``Store`` (each
call made in turn, each computation inline), ``arun_flow`` over an ``AsyncStore`` (each call
awaited, heavy computations on a worker thread so the event loop keeps running). A store call's
error is thrown into the flow at the step that made it, so ``try`` / ``except`` / ``finally`` in
a flow behave as in plain code. Flows compose with ``yield from``; the typed helpers here
(``read``, ``append_if``, ...) give each step its result type.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from contextwright.errors import StoreUsageError
from contextwright.session.store import (
    Appended,
    SessionInfo,
    SessionKey,
    StateRecord,
    StateWrite,
    StoredMessage,
)

if TYPE_CHECKING:
    from contextwright.session.store import AsyncStore, Store

T = TypeVar("T")

StoreMethod = Literal["append", "append_if", "read", "epoch", "find_write", "count",
                      "get_state", "put_state", "list_sessions", "erase_session",
                      "erase_user", "purge_expired"]


@dataclass(frozen=True, slots=True)
class StoreCall:
    """One call of a store method, made by whichever driver runs the flow."""

    method: StoreMethod
    """The ``Store`` / ``AsyncStore`` method."""
    args: tuple[Any, ...] = ()
    """Its positional arguments."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Its keyword arguments."""


@dataclass(frozen=True, slots=True)
class Compute:
    """CPU work of a flow: run inline by the sync driver, maybe on a thread by the async one."""

    work: Callable[[], Any]
    """The work; its return value is sent back into the flow."""
    offload: bool = True
    """Whether it may take long enough to stall an event loop (a build, a summariser, a
    pluggable classifier); ``False`` for bounded bookkeeping, which a thread hop would only
    slow down."""


Step = StoreCall | Compute
Flow = Generator[Step, Any, T]
"""A flow returning ``T``."""


# ----- the drivers -----


def run_flow(flow: Flow[T], store: Store) -> T:
    """Drive ``flow`` to its end over a sync store; return what it returns."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = flow.send(result) if error is None else flow.throw(error)
        except StopIteration as stop:
            return cast(T, stop.value)
        result, error = None, None
        try:
            if isinstance(step, Compute):
                result = step.work()
            else:
                result = getattr(store, step.method)(*step.args, **step.kwargs)
        except BaseException as exc:  # thrown into the flow, which may handle it
            error = exc
        del step  # drop the step's references (its messages) while the flow waits


async def arun_flow(flow: Flow[T], store: AsyncStore) -> T:
    """Drive ``flow`` to its end over an async store, without blocking the event loop."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = flow.send(result) if error is None else flow.throw(error)
        except StopIteration as stop:
            return cast(T, stop.value)
        result, error = None, None
        try:
            if isinstance(step, Compute):
                result = (await asyncio.to_thread(step.work)) if step.offload else step.work()
            else:
                result = await getattr(store, step.method)(*step.args, **step.kwargs)
        except BaseException as exc:  # cancellation too: the flow's ``finally`` blocks run
            error = exc
        del step


def is_async_store(store: object) -> bool:
    """Whether ``store`` follows ``AsyncStore`` (its methods are coroutine functions)."""
    return inspect.iscoroutinefunction(getattr(store, "append_if", None))


class LoopGuard:
    """Remembers the event loop an async store's connections were made on, and holds it to it.

    A connection of redis.asyncio or psycopg belongs to the loop it was opened on; used from
    another it fails in obscure ways, so the store refuses with ``StoreUsageError`` instead.
    """

    def __init__(self, store: str) -> None:
        """``store`` names the store in the error message."""
        self._store = store
        self._loop: asyncio.AbstractEventLoop | None = None

    def check(self) -> None:
        """Bind to the running loop on first use; refuse any other loop afterwards."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise StoreUsageError(
                f"this {self._store} was opened on another event loop; an async store serves "
                "one loop (make one per loop, e.g. per asyncio.run)")


# ----- typed steps -----


def compute(work: Callable[[], T], *, offload: bool = True) -> Flow[T]:
    """Run ``work`` as a step of the flow (see ``Compute``); returns its result."""
    return cast(T, (yield Compute(work, offload)))


def append_if(key: SessionKey, messages: Sequence[Mapping[str, Any]], *,
              last_seq: int | None = None, epoch: str | None = None,
              idempotency_key: str | None = None, state: StateWrite | None = None,
              ) -> Flow[Appended]:
    """``Store.append_if`` as a step."""
    return cast(Appended, (yield StoreCall("append_if", (key, messages), {
        "last_seq": last_seq, "epoch": epoch, "idempotency_key": idempotency_key,
        "state": state})))


def read(key: SessionKey, *, after: int = 0, last: int | None = None
         ) -> Flow[list[StoredMessage]]:
    """``Store.read`` as a step."""
    return cast(list[StoredMessage],
                (yield StoreCall("read", (key,), {"after": after, "last": last})))


def epoch(key: SessionKey) -> Flow[str | None]:
    """``Store.epoch`` as a step."""
    return cast("str | None", (yield StoreCall("epoch", (key,))))


def find_write(key: SessionKey, idempotency_key: str) -> Flow[list[int] | None]:
    """``Store.find_write`` as a step."""
    return cast("list[int] | None", (yield StoreCall("find_write", (key, idempotency_key))))


def count(key: SessionKey) -> Flow[int]:
    """``Store.count`` as a step."""
    return cast(int, (yield StoreCall("count", (key,))))


def get_state(key: SessionKey) -> Flow[StateRecord | None]:
    """``Store.get_state`` as a step."""
    return cast("StateRecord | None", (yield StoreCall("get_state", (key,))))


def put_state(key: SessionKey, data: Mapping[str, Any], *, expected_version: int | None,
              epoch: str | None = None) -> Flow[int]:
    """``Store.put_state`` as a step."""
    return cast(int, (yield StoreCall("put_state", (key, data), {
        "expected_version": expected_version, "epoch": epoch})))


def list_sessions(user_id: str | None = None) -> Flow[list[SessionInfo]]:
    """``Store.list_sessions`` as a step."""
    return cast(list[SessionInfo], (yield StoreCall("list_sessions", (user_id,))))


def erase_session(key: SessionKey) -> Flow[bool]:
    """``Store.erase_session`` as a step."""
    return cast(bool, (yield StoreCall("erase_session", (key,))))


def erase_user(user_id: str) -> Flow[int]:
    """``Store.erase_user`` as a step."""
    return cast(int, (yield StoreCall("erase_user", (user_id,))))
