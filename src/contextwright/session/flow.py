"""Store calls as data, so that one piece of session logic runs over sync and async stores.

A *flow* is a generator that yields steps and is sent each step's result: a ``StoreCall`` (a
store method's name and its arguments) or a ``Compute`` (CPU work such as a build or a summary).
The logic lives in the flow and does no I/O itself; ``run_flow`` drives it over a ``Store`` (each
call made in turn, each computation inline), ``arun_flow`` over an ``AsyncStore`` (each call
awaited, heavy computations on worker threads so the event loop keeps running). A store call's
error is thrown into the flow at the step that made it, so ``try`` / ``except`` / ``finally`` in
a flow behave as in plain code. Flows compose with ``yield from``; the typed helpers here
(``read``, ``append_if``, ...) give each step its result type.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Callable, Generator, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from contextwright.errors import StoreUsageError
from contextwright.session.store import (
    Appended,
    SessionInfo,
    SessionKey,
    StateRecord,
    StateWrite,
    StoredIndex,
    StoredMessage,
)

if TYPE_CHECKING:
    from contextwright.session.store import AsyncStore, Store

T = TypeVar("T")

StoreMethod = Literal["append", "append_if", "read", "epoch", "find_write", "count",
                      "get_state", "put_state", "list_sessions", "erase_session",
                      "erase_user", "purge_expired", "append_index", "read_index",
                      "read_spans"]


@dataclass(frozen=True, slots=True)
class StoreCall:
    """One call of a store method, made by whichever driver runs the flow."""

    method: StoreMethod
    """The ``Store`` / ``AsyncStore`` method."""
    args: tuple[Any, ...] = ()
    """Its positional arguments."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Its keyword arguments."""


Where = Literal["cpu", "thread", "loop"]
"""Where the async driver runs a computation: ``cpu``, CPU work that may take long enough to
stall an event loop (a build, recall indexing), on the driver's CPU executor; ``thread``, work
that may also wait on I/O (a pluggable summariser calling a model), on a thread of the loop's
default executor, so it never holds up the CPU executor; ``loop``, bounded bookkeeping, inline,
where a thread hop would only cost time."""


@dataclass(frozen=True, slots=True)
class Compute:
    """Work of a flow that is not a store call: inline for the sync driver (see ``Where``)."""

    work: Callable[[], Any]
    """The work; its return value is sent back into the flow."""
    where: Where = "cpu"
    """Where the async driver runs it."""


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


async def arun_flow(flow: Flow[T], store: AsyncStore, *, cpu: Executor | None = None) -> T:
    """Drive ``flow`` to its end over an async store, without blocking the event loop.

    ``cpu`` runs the flow's CPU work (None: the loop's default executor). Under the GIL a few
    threads give all the throughput there is, and each more makes the loop wait longer for
    its turn, so a small executor (one thread) keeps the loop responsive.
    """
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = flow.send(result) if error is None else flow.throw(error)
        except StopIteration as stop:
            return cast(T, stop.value)
        result, error = None, None
        try:
            if not isinstance(step, Compute):
                result = await getattr(store, step.method)(*step.args, **step.kwargs)
            elif step.where == "loop":
                result = step.work()
            else:
                result = await _off_loop(step.work, cpu if step.where == "cpu" else None)
        except BaseException as exc:  # cancellation too: the flow's ``finally`` blocks run
            error = exc
        del step


async def _off_loop(work: Callable[[], T], executor: Executor | None) -> T:
    """``work`` on ``executor`` (None: the default one), in this task's context (as to_thread)."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(
        executor, functools.partial(context.run, work))


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

    def release(self) -> None:
        """Forget the loop: the first connect failed, so nothing is bound to it yet.

        A store whose first call found the server down can then be used from a later loop
        (the next ``asyncio.run``), rather than refusing a loop it never connected on.
        """
        self._loop = None


# ----- typed steps -----


def compute(work: Callable[[], T], *, where: Where = "cpu") -> Flow[T]:
    """Run ``work`` as a step of the flow (see ``Compute``); returns its result."""
    return cast(T, (yield Compute(work, where)))


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


def read_index(key: SessionKey) -> Flow[StoredIndex | None]:
    """``IndexStore.read_index`` as a step (``AttributeError`` from a store without it)."""
    return cast("StoredIndex | None", (yield StoreCall("read_index", (key,))))


def read_spans(key: SessionKey, spans: Sequence[tuple[int, int]], *, epoch: str
               ) -> Flow[list[StoredMessage] | None]:
    """``IndexStore.read_spans`` as a step (``AttributeError`` from a store without it)."""
    return cast("list[StoredMessage] | None", (yield StoreCall(
        "read_spans", (key, spans), {"epoch": epoch})))


def append_index(key: SessionKey, part: str, *, epoch: str, replace: bool = False
                 ) -> Flow[bool]:
    """``IndexStore.append_index`` as a step (``AttributeError`` from a store without it)."""
    return cast(bool, (yield StoreCall("append_index", (key, part), {
        "epoch": epoch, "replace": replace})))


def erase_session(key: SessionKey) -> Flow[bool]:
    """``Store.erase_session`` as a step."""
    return cast(bool, (yield StoreCall("erase_session", (key,))))


def erase_user(user_id: str) -> Flow[int]:
    """``Store.erase_user`` as a step."""
    return cast(int, (yield StoreCall("erase_user", (user_id,))))
