"""``ContextManager``: sessions, modes and summaries around the stateless builder.

The two calls of an agent loop, ``prepare`` and ``record`` (and ``aprepare`` / ``arecord`` for an
event loop), with the session's state, its summary and its erasure. What each call does is written
once, as a flow in ``SessionFlows``; this class holds the store and runs the flows on it: in the
calling thread over a sync ``Store``, awaited over an ``AsyncStore`` (builds and summaries on
worker threads, so the loop keeps running), and summary updates off the request path, on a
worker thread or as asyncio tasks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from contextwright.checks import whole_number
from contextwright.compress.summarize import Summarizer
from contextwright.core.cache import CachePolicy
from contextwright.core.plan import BuildPlan
from contextwright.core.source import ContextSource
from contextwright.errors import (
    ConfigurationError,
    ManagerClosed,
    StoreUsageError,
)
from contextwright.manager.flows import SessionFlows, Target
from contextwright.manager.prepared import AnsweredContext, PreparedContext
from contextwright.modes.config import ModesConfig
from contextwright.modes.router import ModeClassifier, Router
from contextwright.observe.recorder import SnapshotRecorder
from contextwright.observe.sinks import SnapshotSink
from contextwright.recall import TurnRecaller
from contextwright.session.flow import Flow, arun_flow, is_async_store, run_flow
from contextwright.session.memory import MemoryStore
from contextwright.session.state import SessionState
from contextwright.session.store import AsyncStore, SessionKey, Store
from contextwright.tokens import Tokenizer

logger = logging.getLogger("contextwright.session")

CANCELLED_SESSIONS = 10_000
"""Sessions remembered as owing a summary update their event loop cancelled, at most."""

T = TypeVar("T")
P = ParamSpec("P")

__all__ = ["ContextManager", "PreparedContext"]


class ContextManager(SessionFlows):
    """Prepares each model call of many sessions; thread-safe; works with no arguments.

    ``store`` defaults to an in-memory store (pass ``SqliteStore(path)`` to keep sessions); an
    ``AsyncStore`` (``AsyncRedisStore``, ``AsyncPostgresStore``, ``AsyncSqliteStore``,
    ``AsyncMemoryStore``) serves the ``a…`` methods natively, and the blocking ones refuse it
    (``StoreUsageError``); over a sync store the ``a…`` methods run the call on a worker thread.
    ``modes`` is a ``ModesConfig`` or a config file (the shipped modes by default; a relative
    plan path in the file starts from its folder); ``plans`` overrides the plan of a mode (a
    relative path there starts from the working directory); ``router`` or ``classifier`` replace
    or extend the keyword routing. ``background=True`` runs summary updates off the request path
    (a worker thread for ``record``, an asyncio task for ``arecord``), so ``prepare`` never
    waits for them (``flush()`` / ``await aflush()`` wait). ``recaller`` ranks a session's older
    turns for modes that recall (default: lexical BM25); their index is kept in process for the
    most recently served sessions, up to about ``recall_cache_messages`` messages in all.
    ``cache`` (on by default, or a ``CachePolicy``): every build keeps a stable prefix for the
    provider's prompt cache and its fingerprint is kept in the session state, so the next build,
    on any worker, continues it; requests then carry ``cache_control`` breakpoints (Anthropic)
    and a ``prompt_cache_key`` naming the session by a hash (OpenAI). ``False`` builds every
    call afresh. ``snapshots`` (a sink or ``SnapshotRecorder``, see ``contextwright.observe``)
    records every build with its session, mode and route, off the request path;
    ``self.snapshots`` is its recorder. ``build_threads`` run the builds (and recall indexing)
    of the ``a…`` calls over an ``AsyncStore``: one by default, since under the GIL more add
    little throughput and make the event loop wait longer for its turn; raise it when sources
    block on I/O.
    """

    def __init__(self, store: Store | AsyncStore | None = None, *,
                 modes: ModesConfig | str | Path | None = None,
                 plans: Mapping[str, BuildPlan | str] | None = None,
                 router: Router | None = None, classifier: ModeClassifier | None = None,
                 system: str | None = None, tokenizer: str | Tokenizer = "o200k_base",
                 sources: Iterable[ContextSource] = (), summarizer: Summarizer | None = None,
                 budget: Mapping[str, Any] | None = None, summary_max_tokens: int = 300,
                 max_read_messages: int = 400, background: bool = True,
                 recaller: TurnRecaller | None = None, recall_cache_messages: int = 100_000,
                 cache: CachePolicy | bool = True,
                 clock: Callable[[], float] = time.time,
                 snapshots: SnapshotRecorder | SnapshotSink | None = None,
                 build_threads: int = 1, summary_threads: int = 1) -> None:
        if store is not None and not callable(getattr(store, "append_if", None)):
            # Found out at the first prepare, it failed with an AttributeError; a URL is the
            # likely mistake.
            hint = (" (open_store(url) / open_async_store(url) from contextwright.session "
                    "make one from a URL)" if isinstance(store, str) else "")
            raise ConfigurationError(f"store must be a Store or an AsyncStore, not "
                                     f"{type(store).__name__}{hint}")
        super().__init__(
            modes=modes, plans=plans, router=router, classifier=classifier, system=system,
            tokenizer=tokenizer, sources=sources, summarizer=summarizer, budget=budget,
            summary_max_tokens=summary_max_tokens, max_read_messages=max_read_messages,
            recaller=recaller, recall_cache_messages=recall_cache_messages, cache=cache,
            clock=clock, snapshots=snapshots)
        self.store: Store | AsyncStore = store if store is not None else MemoryStore()
        self._native_async = is_async_store(self.store)
        for name, count in (("build_threads", build_threads),
                            ("summary_threads", summary_threads)):
            whole_number(count, name, minimum=1)
        self._cpu = (_BuildThreads(max_workers=build_threads, thread_name_prefix="cw-build")
                     if self._native_async else None)
        self._background = background
        self._executor = (ThreadPoolExecutor(max_workers=summary_threads,
                                             thread_name_prefix="cw-summary")
                          if background and not self._native_async else None)
        self._pending: dict[SessionKey, Future[None]] = {}
        self._running: dict[SessionKey, bool] = {}
        """Sessions whose summary update runs on a summary thread, and whether a ``record``
        since asks for another: one update per session at a time, whatever the threads."""
        self._outstanding: set[Future[None]] = set()
        self._apending: dict[SessionKey, asyncio.Task[None]] = {}
        self._arunning: dict[SessionKey, asyncio.Task[None]] = {}
        self._atasks: set[asyncio.Task[None]] = set()
        self._acancelled: dict[SessionKey, None] = {}
        """Sessions whose summary task its loop cancelled: their next ``arecord`` catches up."""
        self._acalls: set[asyncio.Future[None]] = set()
        """``aprepare`` / ``arecord`` calls admitted and not yet done: ``aclose`` waits for them."""
        self._closed = False
        self._stopping = False
        """The worker threads are being shut down: summary updates can no longer run."""

    # ----- the two calls of the agent loop -----

    def prepare(self, user_id: str, session_id: str, text: str | None = None, *,
                images: Sequence[object] = (),
                tools: Sequence[Mapping[str, Any]] = (),
                documents: Sequence[Any] = (), env: Mapping[str, str] | None = None,
                system: str | None = None, target: Target = "chat",
                idempotency_key: str | None = None) -> PreparedContext:
        """Append ``text`` as the user's message (None: continue the current turn) and build.

        ``images`` go with the message (``ImagePart``s or image parts in any accepted form:
        OpenAI, Anthropic, LangChain), stored as OpenAI ``image_url`` parts.
        ``target`` is the rendering the budget is counted for: ``chat`` (``to_messages``,
        ``to_request``) or ``text`` (``to_text``, whose separators and escapes cost more).
        ``idempotency_key`` names this message: a retry with the same key (after a timeout,
        say) does not store it again, nor route it again (the first call did: its mode, kept
        turns and task stay as they are), and builds the session as it is now.

        The other arguments are checked first: a call they would fail stores nothing. An error
        after the message is stored (a message too large for the budget, a failing classifier)
        carries ``stored_seq``: the message stays stored, so build again with ``text=None``
        rather than sending it again (that build routes the message if the failed call could
        not, e.g. when it lost every race for the session's state: ``ConflictError``).
        ``SessionGone`` means the session was erased while the call ran: the message went
        with it.
        """
        self._check_open()
        return self._run(self._prepare_flow(
            user_id, session_id, text, images=images, tools=tools, documents=documents, env=env,
            system=system, target=target, idempotency_key=idempotency_key))

    def record(self, user_id: str, session_id: str, *,
               assistant: object = None,
               tool_results: Sequence[object] = (),
               messages: Sequence[object] = (),
               idempotency_key: str | None = None,
               context: AnsweredContext | None = None) -> list[int]:
        """Append the model's answer, tool results and further messages, atomically.

        ``assistant`` is text or a message with tool calls. The messages and the zones they
        update are one atomic store write, made only on the session as checked: tool results
        must still answer its newest call, and an erase meanwhile wins (``SessionGone``, nothing
        stored). ``context`` (the ``PreparedContext`` the answer is to) names the incarnation
        of the session the answer belongs to: erased, expired or begun again since, the record
        raises ``SessionGone``. Without it, the answer to this manager's latest ``prepare`` of
        the session is held to that prepare's incarnation the same way; an answer to no
        remembered prepare (a greeting, or a prepare on another worker: pass ``context``)
        may start a session. A retry with the same ``idempotency_key`` stores nothing again and
        returns the first call's seqs. Then the summary update is scheduled
        (``background=False``: run here; it fails nothing stored, so its error is logged as
        ``summary_failed``, not raised).
        """
        self._check_open()
        seqs, stored = self._run(self._record_flow(
            user_id, session_id, assistant=assistant, tool_results=tool_results,
            messages=messages, idempotency_key=idempotency_key, context=context))
        if stored:
            self._schedule_summary(SessionKey(user_id=user_id, session_id=session_id))
        return seqs

    async def aprepare(self, user_id: str, session_id: str, text: str | None = None, *,
                       images: Sequence[object] = (),
                       tools: Sequence[Mapping[str, Any]] = (),
                       documents: Sequence[Any] = (), env: Mapping[str, str] | None = None,
                       system: str | None = None, target: Target = "chat",
                       idempotency_key: str | None = None) -> PreparedContext:
        """``prepare`` for an event loop: same arguments, same result, the loop never waits.

        Over an ``AsyncStore`` every store call is awaited and the build runs on a worker
        thread; over a sync store the whole call does. Sessions keep the same guarantees.
        """
        self._check_open()
        async with self._in_flight():
            return await self._arun(self._prepare_flow(
                user_id, session_id, text, images=images, tools=tools, documents=documents,
                env=env, system=system, target=target, idempotency_key=idempotency_key))

    async def arecord(self, user_id: str, session_id: str, *,
                      assistant: object = None,
                      tool_results: Sequence[object] = (),
                      messages: Sequence[object] = (),
                      idempotency_key: str | None = None,
                      context: AnsweredContext | None = None) -> list[int]:
        """``record`` for an event loop; the summary update becomes an asyncio task."""
        self._check_open()
        async with self._in_flight():
            seqs, stored = await self._arun(self._record_flow(
                user_id, session_id, assistant=assistant, tool_results=tool_results,
                messages=messages, idempotency_key=idempotency_key, context=context))
            if stored:
                await self._aschedule_summary(SessionKey(user_id=user_id, session_id=session_id))
            return seqs

    # ----- inspection and lifecycle -----

    def state(self, user_id: str, session_id: str) -> SessionState:
        """The session's mode, mode history, summary and zones."""
        return self._run(self._state_flow(user_id, session_id))

    async def astate(self, user_id: str, session_id: str) -> SessionState:
        """``state`` for an event loop."""
        return await self._arun(self._state_flow(user_id, session_id))

    def erase_session(self, user_id: str, session_id: str) -> bool:
        """Erase one session (messages, summary, zones, mode); True if it existed.

        Erasure wins over calls racing it: their state writes are refused (``SessionGone``)
        and what they cached in this process is dropped.
        """
        return self._run(self._erase_session_flow(user_id, session_id))

    async def aerase_session(self, user_id: str, session_id: str) -> bool:
        """``erase_session`` for an event loop."""
        return await self._arun(self._erase_session_flow(user_id, session_id))

    def erase_user(self, user_id: str) -> int:
        """Erase every session of ``user_id``; returns how many there were."""
        return self._run(self._erase_user_flow(user_id))

    async def aerase_user(self, user_id: str) -> int:
        """``erase_user`` for an event loop."""
        return await self._arun(self._erase_user_flow(user_id))

    def summarize_now(self, user_id: str, session_id: str) -> str:
        """Bring one session's summary up to date synchronously; returns the outcome.

        Every round that is due is merged, at most 40 rounds (``MAX_BATCH_ROUNDS``) per
        summariser call, and committed once: a session imported whole is summarised in one
        call (an update after ``record`` merges one batch, so its work stays bounded). It
        tries even while automatic updates back off after repeated failures.
        """
        return self._run(self._summary_flow(SessionKey(user_id=user_id, session_id=session_id),
                                            force=True, catch_up=True))

    async def asummarize_now(self, user_id: str, session_id: str) -> str:
        """``summarize_now`` for an event loop."""
        return await self._arun(self._summary_flow(
            SessionKey(user_id=user_id, session_id=session_id), force=True, catch_up=True))

    def flush(self, timeout: float | None = None) -> None:
        """Wait until the summary updates ``record`` scheduled are done (see ``aflush``)."""
        with self._lock:
            outstanding = list(self._outstanding)  # queued and running jobs alike
        wait(outstanding, timeout=timeout)

    async def aflush(self) -> None:
        """Wait until every scheduled summary update is done: ``arecord``'s and ``record``'s."""
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                futures = [asyncio.wrap_future(f) for f in self._outstanding]
            tasks = [t for t in self._atasks if t.get_loop() is loop]
            if not futures and not tasks:
                return
            await asyncio.wait([*futures, *tasks])  # jobs log their own failures

    def close(self) -> None:
        """Finish pending summaries and stop the worker (the store stays open: it is yours).

        Later ``prepare`` and ``record`` calls raise ``ManagerClosed`` before storing anything;
        an ``aprepare`` / ``arecord`` still running on an event loop fails with ``ManagerClosed``
        at its next build step (with ``stored_seq`` when its message was stored): ``aclose`` on
        that loop lets them finish instead.
        """
        self._closed = True
        self._stopping = True
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        if self._cpu is not None:
            self._cpu.shutdown(wait=True)

    async def aclose(self) -> None:
        """``close`` for an event loop: lets the calls under way on it finish, then their summaries.

        Calls made after it began raise ``ManagerClosed`` before storing anything; the
        ``aprepare`` / ``arecord`` calls it found running on this loop finish as usual, and
        the summary updates they schedule run before it returns. The store stays open.
        """
        self._closed = True
        await self._calls_done()
        await self.aflush()
        self._stopping = True
        for executor in (self._executor, self._cpu):
            if executor is not None:
                await asyncio.to_thread(executor.shutdown, wait=True)

    def _check_open(self) -> None:
        if self._closed:
            raise ManagerClosed("this ContextManager is closed: make a new one to go on")

    @asynccontextmanager
    async def _in_flight(self) -> AsyncIterator[None]:
        """Counts an admitted async call as running until it ends (cancelled or not)."""
        done = asyncio.get_running_loop().create_future()
        self._acalls.add(done)
        try:
            yield
        finally:
            self._acalls.discard(done)
            done.set_result(None)

    async def _calls_done(self) -> None:
        """Wait for the admitted calls running on this loop (another loop's cannot be awaited)."""
        loop = asyncio.get_running_loop()
        while calls := [call for call in self._acalls if call.get_loop() is loop]:
            await asyncio.wait(calls)

    # ----- running flows -----

    def _run(self, flow: Flow[T]) -> T:
        if self._native_async:
            flow.close()
            raise StoreUsageError(
                "this ContextManager's store is async: await the a… methods (aprepare, "
                "arecord, astate, aerase_session, ...) instead of the blocking ones")
        return run_flow(flow, self._sync_store())

    async def _arun(self, flow: Flow[T]) -> T:
        if self._native_async:
            return await arun_flow(flow, self.store, cpu=self._cpu)  # type: ignore[arg-type]
        # A sync store's calls block: the whole flow runs on a worker thread, as one call.
        return await asyncio.to_thread(run_flow, flow, self._sync_store())

    def _sync_store(self) -> Store:
        assert not self._native_async
        return self.store  # type: ignore[return-value]

    # ----- summaries off the request path -----

    def _schedule_summary(self, key: SessionKey) -> None:
        if self._executor is None:
            self._run_summary_inline(key)
            return
        with self._lock:
            if key in self._pending:
                return  # the queued job will read the newest messages when it runs
            if key in self._running:
                self._running[key] = True  # its thread runs it again, on what is stored then
                return
            try:
                future = self._executor.submit(self._run_summary, key)
            except RuntimeError:  # closed by another thread after this record stored
                _log_summary_skipped(key)
                return
            self._pending[key] = future
            self._outstanding.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._outstanding.discard(future)

    def _run_summary_inline(self, key: SessionKey) -> None:
        """The summary update in ``record``'s own thread (``background=False``).

        The messages are stored by then: a failing update is logged as the background one is,
        never raised, or the caller would take the stored record for a failed one and send it
        again (stored twice). The next ``record``'s update, or ``summarize_now``, catches up.
        """
        try:
            self._run(self._summary_flow(key))
        except Exception:
            _log_summary_failure(key)

    def _run_summary(self, key: SessionKey) -> None:
        with self._lock:
            self._pending.pop(key, None)
            self._running[key] = False
        while True:
            try:
                self._run(self._summary_flow(key))
            except Exception:  # a background failure must be visible, not lost with the future
                _log_summary_failure(key)
            with self._lock:  # a record meanwhile asked for another: run it here, in turn
                if not self._running.pop(key):
                    return
                self._running[key] = False

    async def _aschedule_summary(self, key: SessionKey) -> None:
        if self._stopping:  # closed by another thread or loop after this record stored
            _log_summary_skipped(key)
            return
        if not self._background:
            await self._asummary_logged(key)
            return
        if self._executor is not None:
            # A sync store: the summary thread runs it, so an event loop that ends with the
            # call (``asyncio.run`` per request) does not cancel it.
            self._schedule_summary(key)
            return
        with self._lock:
            cancelled = key in self._acancelled
            self._acancelled.pop(key, None)
        if cancelled:
            # The last task's loop cancelled it (a loop per request would cancel every one):
            # this call catches up before it returns.
            await self._asummary_logged(key)
            return
        if key in self._apending:
            return  # the queued task will read the newest messages when it runs
        # One update per session at a time, as with the one summary thread: a task queued
        # behind a running one waits for it, then reads what it committed.
        task = asyncio.create_task(self._asummary(key, self._arunning.get(key)))
        self._apending[key] = task
        self._atasks.add(task)
        task.add_done_callback(partial(self._asummary_done, key))

    async def _asummary(self, key: SessionKey, before: asyncio.Task[None] | None) -> None:
        if before is not None:
            await asyncio.wait([before])
        task = asyncio.current_task()
        if self._apending.get(key) is task:
            del self._apending[key]
        self._arunning[key] = task  # type: ignore[assignment]
        await self._asummary_logged(key)

    def _asummary_done(self, key: SessionKey, task: asyncio.Task[None]) -> None:
        """Forget a finished summary task; one its loop cancelled is logged, not lost quietly.

        A loop that ends after each call (``asyncio.run`` per request) cancels the tasks still
        queued or running, started or not; the next update of the session merges what this
        one would have, and a cancelled task left queued would have kept it from being made.
        """
        self._atasks.discard(task)
        if self._apending.get(key) is task:
            del self._apending[key]
        if self._arunning.get(key) is task:
            del self._arunning[key]
        if task.cancelled():
            _log_summary_skipped(key, "its event loop cancelled it: await aflush() before "
                                      "the loop ends")
            with self._lock:
                self._acancelled[key] = None
                if len(self._acancelled) > CANCELLED_SESSIONS:
                    self._acancelled.pop(next(iter(self._acancelled)))

    async def _asummary_logged(self, key: SessionKey) -> None:
        """One summary update; stored already, so failing is logged, not raised."""
        try:
            await self._arun(self._summary_flow(key))
        except ManagerClosed:  # ``close`` from another thread stopped the build threads
            _log_summary_skipped(key)
        except Exception:
            _log_summary_failure(key)


class _BuildThreads(ThreadPoolExecutor):
    """The build threads of the ``a…`` calls: work offered after shutdown is ``ManagerClosed``.

    The plain executor raises ``RuntimeError``, which is no ``ContextwrightError``: a flow
    could not tell it apart from a bug, nor say which message it had stored by then.
    """

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        try:
            return super().submit(fn, *args, **kwargs)
        except RuntimeError as exc:
            raise ManagerClosed("this ContextManager was closed while the call ran") from exc


def _log_summary_skipped(key: SessionKey, why: str = "the manager is closing") -> None:
    # Nothing is lost: the summary is made from the store by the next record's update.
    logger.warning("summary update skipped (%s) user=%s session=%s", why,
                   key.user_id, key.session_id, extra={"contextwright": {
                       "event": "summary_skipped", "user_id": key.user_id,
                       "session_id": key.session_id, "reason": why}})


def _log_summary_failure(key: SessionKey) -> None:
    logger.exception("summary update failed user=%s session=%s", key.user_id,
                     key.session_id, extra={"contextwright": {
                         "event": "summary_failed", "user_id": key.user_id,
                         "session_id": key.session_id}})
