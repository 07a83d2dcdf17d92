"""``ContextManager``: sessions, modes and summaries around the stateless builder (seed 003 §3).

``prepare`` checks its arguments, appends the user's message, routes it to a mode (handing off
explicitly when the mode changes), and builds the context from the session's summary, zones and
recent messages, with older turns relevant to the message recalled when the mode asks for it;
``record`` appends the model's answer and tool results and schedules the summary update off the
request path. All state lives in the ``Store`` (what is kept in process is derived from it and
checked against it), so any number of managers in any number of processes can serve the same
sessions.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from contextwright.builder import ContextBuilder, cache_policy, session_cache_key
from contextwright.compress.summarize import ExtractiveSummarizer, Summarizer, Summary
from contextwright.convert import chat_messages
from contextwright.core.cache import CachePolicy, Fingerprint
from contextwright.core.fence import language_of
from contextwright.core.final import FinalContext
from contextwright.core.images import image_from_part
from contextwright.core.items import check_text, parse_message
from contextwright.core.plan import SHIPPED_PLANS, BuildPlan, FrozenOptions, SourceSpec, thawed
from contextwright.core.providers import ProviderFormat
from contextwright.core.report import BuildReport
from contextwright.core.request import Request
from contextwright.core.source import ContextSource
from contextwright.errors import (
    ConflictError,
    ContextwrightError,
    InvalidInputError,
    PlanError,
    SessionGone,
)
from contextwright.manager.checks import checked_parts
from contextwright.manager.handoff import hand_off, note_user_message, record_turn_in_zones
from contextwright.manager.recall import (
    RecallIndexes,
    SessionHistorySource,
    recall_tokens,
    session_recall,
)
from contextwright.manager.summaries import SummaryJob, update_summary
from contextwright.manager.turns import last_user_index, plain
from contextwright.modes.config import ModesConfig, ModeSettings, RecallSettings
from contextwright.modes.router import ModeClassifier, RouteDecision, Router
from contextwright.modes.sources import SessionMemorySource
from contextwright.observe.recorder import SnapshotRecorder, as_recorder
from contextwright.observe.sinks import SnapshotSink
from contextwright.session.memory import MemoryStore
from contextwright.session.state import ModeSwitch, SessionState, load_state, update_state
from contextwright.session.store import (
    Appended,
    SessionKey,
    StateRecord,
    StateWrite,
    Store,
    StoredMessage,
)
from contextwright.sources.conversation import HistorySource, read_blocks_backward
from contextwright.sources.recall import LexicalTurnRecaller, RecallExpansion, TurnRecaller
from contextwright.tokens import CountingTokenizer, Tokenizer, get_tokenizer

logger = logging.getLogger("contextwright.session")

MAX_STATE_ATTEMPTS = 8
"""Optimistic state updates retried this often under contention before giving up."""
MESSAGE_CACHE_SIZE = 50_000
"""Stored message dicts remembered by (session, seq) so the builder's per-object caches hit."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedContext:
    """The context for one model call, with the routing that produced it."""

    context: FinalContext
    """The built context (messages, report)."""
    key: SessionKey
    """The session."""
    mode: str
    """The mode the context was built in."""
    route: RouteDecision | None
    """The router's decision for this message (None when continuing a turn)."""
    switch: ModeSwitch | None
    """The hand-off this message caused, if any."""
    user_seq: int
    """Sequence number of the user message this context answers."""

    @property
    def report(self) -> BuildReport:
        """Every decision of the build."""
        return self.context.report

    def to_messages(self, fmt: ProviderFormat = "openai") -> list[dict[str, Any]]:
        """Messages for the provider (see ``FinalContext.to_messages``)."""
        return self.context.to_messages(fmt)

    def to_request(self, fmt: ProviderFormat = "openai", **settings: Any) -> dict[str, Any]:
        """Keyword arguments for the provider's SDK call.

        ``settings``: ``model``, ``max_tokens``, ``tool_choice``, ``parallel_tool_calls`` (see
        ``FinalContext.to_request``).
        """
        return self.context.to_request(fmt, **settings)

    def to_text(self) -> str:
        """A plain prompt (see ``FinalContext.to_text``)."""
        return self.context.to_text()


class ContextManager:
    """Prepares each model call of many sessions; thread-safe; works with no arguments.

    ``store`` defaults to an in-memory store (pass ``SqliteStore(path)`` to keep sessions);
    ``modes`` is a ``ModesConfig`` or a config file (seed 003's values by default); ``plans``
    overrides the plan of a mode; ``router`` or ``classifier`` replace or extend the keyword
    routing. ``background=True`` runs summary updates on a worker thread, so ``prepare`` never
    waits for them (``flush()`` waits). ``recaller`` ranks a session's older turns for modes that
    recall (default: lexical BM25); their index is kept in process for the most recently served
    sessions, up to about ``recall_cache_messages`` messages in all. ``cache`` (on by default,
    or a ``CachePolicy``): every build keeps a stable prefix for the provider's prompt cache
    and its fingerprint is kept in the session state, so the next build, on any worker,
    continues it; requests then carry ``cache_control`` breakpoints (Anthropic) and a
    ``prompt_cache_key`` naming the session by a hash (OpenAI). ``False`` builds every call
    afresh. ``snapshots`` (a sink or ``SnapshotRecorder``, see ``contextwright.observe``)
    records every build with its session, mode and route, off the request path;
    ``self.snapshots`` is its recorder.
    """

    def __init__(self, store: Store | None = None, *,
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
                 snapshots: SnapshotRecorder | SnapshotSink | None = None) -> None:
        self.snapshots = as_recorder(snapshots)
        if router is not None and (modes is not None or classifier is not None):
            raise PlanError("give modes and classifier to the Router, or pass them without one")
        config = modes if isinstance(modes, ModesConfig) else (
            ModesConfig.load(modes) if modes is not None else ModesConfig.default())
        self.store: Store = store if store is not None else MemoryStore()
        self.router = router or Router(config, classifier)
        self.modes = self.router.config
        self.system = system
        self.tokenizer: CountingTokenizer = get_tokenizer(tokenizer)
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self._sources = tuple(sources)
        unknown = sorted(set(plans or {}) - set(self.modes.modes))
        if unknown:
            raise PlanError(f"plans given for unknown modes: {unknown}")
        given = {name: _resolve_plan(plan_or_name(name, settings, plans))
                 for name, settings in self.modes.modes.items()}
        self._recall: dict[str, RecallSettings] = {
            name: session_recall(settings, given[name])
            for name, settings in self.modes.modes.items()}
        self._plans = {name: _plan_with_session(given[name], settings, budget)
                       for name, settings in self.modes.modes.items()}
        self._recall_tokens = {name: recall_tokens(self._plans[name], self._recall[name])
                               for name in self._plans}
        self.recaller: TurnRecaller = (recaller if recaller is not None
                                     else LexicalTurnRecaller(expansion=RecallExpansion()))
        self._recall_indexes = RecallIndexes(recall_cache_messages)
        self._history: ContextSource = next(
            (s for s in reversed(self._sources) if s.namespace == "history"), HistorySource())
        self._cache = cache_policy(cache, None)
        self._summary_max_tokens = summary_max_tokens
        self._max_read = max_read_messages
        self._clock = clock
        self._messages: OrderedDict[tuple[str, str, int, float], Mapping[str, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._executor = (ThreadPoolExecutor(max_workers=1, thread_name_prefix="cw-summary")
                          if background else None)
        self._pending: dict[SessionKey, Future[None]] = {}
        self._outstanding: set[Future[None]] = set()
        self._erasures = 0
        """Erases this manager has begun: a call that saw it change drops what it cached."""

    # ----- the two calls of the agent loop -----

    def prepare(self, user_id: str, session_id: str, text: str | None = None, *,
                images: Sequence[object] = (),
                tools: Sequence[Mapping[str, Any]] = (),
                documents: Sequence[Any] = (), env: Mapping[str, str] | None = None,
                system: str | None = None, target: Literal["chat", "text"] = "chat",
                idempotency_key: str | None = None) -> PreparedContext:
        """Append ``text`` as the user's message (None: continue the current turn) and build.

        ``images`` go with the message (``ImagePart``s or image parts in any accepted form:
        OpenAI, Anthropic, LangChain), stored as OpenAI ``image_url`` parts.
        ``target`` is the rendering the budget is counted for: ``chat`` (``to_messages``,
        ``to_request``) or ``text`` (``to_text``, whose separators and escapes cost more).
        ``idempotency_key`` names this message: a retry with the same key (after a timeout,
        say) does not store it again, and builds the session as it is now.

        The other arguments are checked first: a call they would fail stores nothing. An error
        after the message is stored (a message too large for the budget, a failing classifier)
        carries ``stored_seq``: the message stays stored, so build again with ``text=None``
        rather than sending it again. ``SessionGone`` means the session was erased while the
        call ran: the message went with it.
        """
        key = SessionKey(user_id=user_id, session_id=session_id)
        parts = checked_parts(tools=tools, documents=documents, env=env,
                              system=system or self.system)
        if text is not None:
            check_text(text, "text")
        parts_of_images = _image_parts(images)
        if parts_of_images and text is None:
            raise InvalidInputError("images go with a user message: pass text (it may be '')")
        erasures = self._erasures
        appended = (self._append_user(key, text, idempotency_key, parts_of_images)
                    if text is not None else None)
        try:
            return self._prepare_stored(key, text, appended, parts, target)
        except SessionGone as error:
            error.add_note("the session was erased while this call ran; the user message was "
                           "erased with it")
            raise
        except ContextwrightError as error:
            if appended is not None:
                seq = appended.seqs[0]
                error.stored_seq = seq
                error.add_note(f"the user message is stored as seq {seq}: build again with "
                               "text=None (e.g. after changing the mode or budget), do not "
                               "resend it")
            raise
        finally:
            self._unless_erased_since(erasures, key)

    def _prepare_stored(self, key: SessionKey, text: str | None, appended: Appended | None,
                        parts: Request, target: Literal["chat", "text"]) -> PreparedContext:
        # The incarnation read, taken first: the fingerprint may go only into it.
        epoch = appended.epoch if appended is not None else self.store.epoch(key)
        record, read, recent = self._read_recent(key)
        state, route, switch = self._route(key, text, appended, recent, record)
        user_index = last_user_index(recent)
        if user_index is None:
            raise InvalidInputError("the session has no user message to answer; pass text")
        settings = self._settings(state.mode)
        context = self._build(key, state, settings, read, recent, user_index, parts, target,
                              route, switch)
        self._keep_fingerprint(key, context, epoch)
        return PreparedContext(context=context, key=key, mode=settings.name, route=route,
                               switch=switch, user_seq=recent[user_index].seq)

    def record(self, user_id: str, session_id: str, *,
               assistant: object = None,
               tool_results: Sequence[object] = (),
               messages: Sequence[object] = (),
               idempotency_key: str | None = None) -> list[int]:
        """Append the model's answer, tool results and further messages, atomically.

        ``assistant`` is text or a message with tool calls. The messages and the zones they
        update are one atomic store write, made only on the session as checked: tool results
        must still answer its newest call, and an erase meanwhile wins (``SessionGone``, nothing
        stored). A retry with the same ``idempotency_key`` stores nothing again and returns the
        first call's seqs. Then the summary update is scheduled.
        """
        key = SessionKey(user_id=user_id, session_id=session_id)
        batch = _recorded_messages(assistant, tool_results, messages, self._now_iso())
        if not batch:
            raise InvalidInputError("record needs an assistant message, tool results or messages")
        if idempotency_key is not None:
            done = self.store.find_write(key, idempotency_key)
            if done is not None:
                return done
        try:
            appended = self._append_turn(key, batch, idempotency_key)
        except InvalidInputError:
            # The first try of this call may have landed meanwhile: its results are answered.
            done = (self.store.find_write(key, idempotency_key)
                    if idempotency_key is not None else None)
            if done is None:
                raise
            return done
        self._schedule_summary(key)
        return appended.seqs

    def _append_turn(self, key: SessionKey, batch: list[dict[str, Any]],
                     idempotency_key: str | None) -> Appended:
        """Check ``batch`` against the session and append it with its zones in one write.

        The write is conditioned on what the check read (the epoch, the last seq when there are
        tool results, the state's version); if anything moved, check again.
        """
        for _ in range(MAX_STATE_ATTEMPTS):
            epoch = self.store.epoch(key)  # read first: what follows is of it or a later one
            record, state = load_state(self.store, key)
            last_seq = self._check_results_answer_open_calls(key, batch)
            new_state = record_turn_in_zones(state, batch, self._settings(state.mode))
            write = None if new_state == state else StateWrite(
                data=new_state.to_dict(), expected_version=record.version if record else None)
            try:
                return self.store.append_if(key, batch, last_seq=last_seq, epoch=epoch,
                                            idempotency_key=idempotency_key, state=write)
            except ConflictError:
                continue
        raise ConflictError("the session kept changing under this record; try again")

    def _check_results_answer_open_calls(self, key: SessionKey,
                                         batch: list[dict[str, Any]]) -> int | None:
        """Refuse tool results that answer no call just before them, in the batch or stored.

        Stored, such a result would make every later build of the session fail (a result must
        follow the assistant message whose call it answers, as in the chat formats). Returns
        the last seq the check read (None when the batch has no results): the batch may only be
        appended right after it.
        """
        if not any(message["role"] == "tool" for message in batch):
            return None
        tail = self.store.read(key, last=_RECORD_TAIL)
        if len(tail) == _RECORD_TAIL and all(m.message.get("role") == "tool" for m in tail):
            tail = self.store.read(key, last=self._max_read)
        stored = [m.message for m in tail]
        start = len(stored)
        while start > 0 and stored[start - 1].get("role") == "tool":
            start -= 1  # the results already recorded for the newest call ...
        start = max(start - 1, 0)  # ... and the message before them: a block starts there
        try:
            for _ in read_blocks_backward([*stored[start:], *batch], "record"):
                pass
        except InvalidInputError:
            raise InvalidInputError(
                "record: a tool result must answer a call of the assistant message just before "
                "it (in this batch, or the session's newest one), each call once") from None
        return tail[-1].seq if tail else 0

    # ----- inspection and lifecycle -----

    def state(self, user_id: str, session_id: str) -> SessionState:
        """The session's mode, mode history, summary and zones."""
        return load_state(self.store, SessionKey(user_id=user_id, session_id=session_id))[1]

    def erase_session(self, user_id: str, session_id: str) -> bool:
        """Erase one session (messages, summary, zones, mode); True if it existed.

        Erasure wins over calls racing it: their state writes are refused (``SessionGone``)
        and what they cached in this process is dropped.
        """
        key = SessionKey(user_id=user_id, session_id=session_id)
        self._begin_erase()
        self._forget_cached(user_id, session_id)
        existed = self.store.erase_session(key)
        self._forget_cached(user_id, session_id)
        return existed

    def erase_user(self, user_id: str) -> int:
        """Erase every session of ``user_id``; returns how many there were."""
        self._begin_erase()
        self._forget_cached(user_id)
        erased = self.store.erase_user(user_id)
        self._forget_cached(user_id)
        return erased

    def _begin_erase(self) -> None:
        with self._lock:
            self._erasures += 1

    def _unless_erased_since(self, erasures: int, key: SessionKey) -> None:
        """Drop what a call cached of ``key`` if an erase began while it ran.

        An erase counts itself before it forgets, so a call that cached after that forget sees
        the count changed and forgets its own entries (at worst a live session's, which are
        derived and rebuilt on the next call).
        """
        with self._lock:
            changed = self._erasures != erasures
        if changed:
            self._forget_cached(key.user_id, key.session_id)

    def _forget_cached(self, user_id: str, session_id: str | None = None) -> None:
        self._forget(lambda cached: cached[0] == user_id and (
            session_id is None or cached[1] == session_id))
        self._recall_indexes.forget(user_id, session_id)

    def _forget(self, matches: Callable[[tuple[str, str, int, float]], bool]) -> None:
        with self._lock:
            for cached in [k for k in self._messages if matches(k)]:
                del self._messages[cached]

    def flush(self, timeout: float | None = None) -> None:
        """Wait until the scheduled summary updates are done."""
        with self._lock:
            outstanding = list(self._outstanding)  # queued and running jobs alike
        wait(outstanding, timeout=timeout)

    def close(self) -> None:
        """Finish pending summaries and stop the worker (the store stays open: it is yours)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    def summarize_now(self, user_id: str, session_id: str) -> str:
        """Run the summary update for one session synchronously; returns its outcome."""
        return update_summary(self._summary_job(SessionKey(user_id=user_id,
                                                           session_id=session_id)))

    # ----- async -----

    async def aprepare(self, user_id: str, session_id: str, text: str | None = None,
                       **options: Any) -> PreparedContext:
        """``prepare`` for an event loop: same arguments, same result, the loop never waits.

        The build is CPU work and the store calls block, so both run on a worker thread
        (``asyncio.to_thread``); sessions keep the same guarantees as with ``prepare``.
        """
        return await asyncio.to_thread(self.prepare, user_id, session_id, text, **options)

    async def arecord(self, user_id: str, session_id: str, **parts: Any) -> list[int]:
        """``record`` for an event loop (see ``aprepare``)."""
        return await asyncio.to_thread(self.record, user_id, session_id, **parts)

    # ----- steps of prepare -----

    def _append_user(self, key: SessionKey, text: str, idempotency_key: str | None,
                     images: list[dict[str, Any]]) -> Appended:
        content: str | list[dict[str, Any]] = text
        if images:
            content = [{"type": "text", "text": text}, *images] if text else images
        message = {"role": "user", "content": content, "timestamp": self._now_iso()}
        return self.store.append_if(key, [message], idempotency_key=idempotency_key)

    def _read_recent(self, key: SessionKey
                     ) -> tuple[StateRecord | None, list[StoredMessage], list[StoredMessage]]:
        # The messages after the summary, newest ``max_read`` of them (as read), and the same
        # from a whole round on (as shown).
        record, state = load_state(self.store, key)
        read = self.store.read(key, after=state.summary_upto, last=self._max_read)
        start = next((i for i, m in enumerate(read) if m.message.get("role") == "user"), 0)
        return record, read, [self._remembered(key, stored) for stored in read[start:]]

    def _remembered(self, key: SessionKey, stored: StoredMessage) -> StoredMessage:
        # The log is append-only: (session, seq, created_at) names one message forever, so the
        # same dict object can be handed to the builder every time and its caches hit.
        cache_key = (key.user_id, key.session_id, stored.seq, stored.created_at)
        with self._lock:
            known = self._messages.get(cache_key)
            if known is None:
                self._messages[cache_key] = stored.message
                if len(self._messages) > MESSAGE_CACHE_SIZE:
                    self._messages.popitem(last=False)
                return stored
        return replace(stored, message=known)

    def _settings(self, mode: str | None) -> ModeSettings:
        """A session's mode settings; the default mode's for a new session.

        Also the default's for a stored mode this manager does not configure (logged; the
        next routed message hands off from it).
        """
        if mode is not None and mode not in self.modes.modes:
            logger.warning("session mode %r is not configured here; using %r", mode,
                           self.modes.default_mode,
                           extra={"contextwright": {"event": "unknown_mode", "mode": mode}})
            mode = None
        return self.modes.settings(mode or self.modes.default_mode)

    def _route(self, key: SessionKey, text: str | None, appended: Appended | None,
               recent: list[StoredMessage], record: StateRecord | None
               ) -> tuple[SessionState, RouteDecision | None, ModeSwitch | None]:
        # The routed state is written only into the incarnation of the session the message
        # went into: after an erase, nothing derived from the message may come back.
        for attempt in range(MAX_STATE_ATTEMPTS):
            if attempt:
                record = self.store.get_state(key)
            state = SessionState.from_dict(record.data) if record else SessionState()
            if text is None or appended is None:
                return state, None, None
            seq = appended.seqs[0]
            # A stored mode this manager does not configure (removed, or another worker's
            # config) is routed from afresh and handed off from, not an error on every call.
            known = state.mode if state.mode in self.modes.modes else None
            route = self.router.route(text, known, kept_turns=state.kept_turns,
                                      task_done=state.zones.task.closed)
            new_state, switch = self._apply_route(state, route, text, seq, recent)
            if new_state == state:
                _log_route(key, route, state.mode)
                return state, route, None
            try:
                self.store.put_state(key, new_state.to_dict(),
                                     expected_version=record.version if record else None,
                                     epoch=appended.epoch)
            except ConflictError:
                continue
            _log_route(key, route, state.mode)
            if switch is not None:
                _log_switch(key, switch)
            return new_state, route, switch
        raise ConflictError("session state kept changing under this prepare; try again")

    def _apply_route(self, state: SessionState, route: RouteDecision, text: str, seq: int,
                     recent: list[StoredMessage]) -> tuple[SessionState, ModeSwitch | None]:
        state = state if state.language else replace(state, language=language_of(text))
        switch = None
        if route.mode != state.mode:
            switch = ModeSwitch(old_mode=state.mode, new_mode=route.mode, trigger=route.trigger,
                                basis=route.basis, at_seq=seq, at=self._clock())
            state = hand_off(state, switch, [m for m in recent if m.seq < seq],
                             window_size=self._settings(state.mode).window_size
                             if state.mode else 0,
                             tokenizer=self.tokenizer)
        kept = state.kept_turns + 1 if route.basis == "kept" else 0
        if kept != state.kept_turns:
            state = replace(state, kept_turns=kept)
        settings = self._settings(state.mode)
        return note_user_message(state, text, settings), switch

    def _build(self, key: SessionKey, state: SessionState, settings: ModeSettings,
               read: list[StoredMessage], recent: list[StoredMessage], user_index: int,
               parts: Request, target: Literal["chat", "text"], route: RouteDecision | None = None,
               switch: ModeSwitch | None = None) -> FinalContext:
        language = state.language or "en"
        summary = Summary.from_dict(state.summary).render(language) if state.summary else ""
        memory = SessionMemorySource(settings=settings, zones=state.zones,
                                     summary_text=summary, language=language)
        stored = recent[user_index]
        user = parse_message(stored.message, f"session[seq {stored.seq}]")
        request = replace(parts, user_input=user.content, images=user.images,
                          history=plain(recent[:user_index]),
                          turn=plain(recent[user_index + 1:]))
        history = self._session_history(key, settings, read, recent[:user_index + 1])
        builder = ContextBuilder(self.tokenizer, sources=(
            *self._sources, memory, *([history] if history is not None else [])),
            snapshots=self.snapshots and self.snapshots.labelled(
                session=key, mode=settings.name, route=route, switch=switch))
        if self._cache is None:
            return builder.build(self._plans[settings.name], request, target=target)
        return builder.build(self._plans[settings.name], request, target=target,
                             previous=_previous(key, state), cache=self._cache,
                             cache_key=session_cache_key(key.user_id, key.session_id))

    def _keep_fingerprint(self, key: SessionKey, context: FinalContext,
                          epoch: str | None) -> None:
        # The next build of this session, on any worker, continues this one's layout. Only
        # into the incarnation of the session that was read: an erased session stays erased.
        if self._cache is None or context.stable_fingerprint is None:
            return
        fingerprint = context.stable_fingerprint.to_dict()
        if epoch is None:  # no session was there when the call began
            return
        try:
            update_state(self.store, key, lambda s: replace(s, cache=fingerprint),
                         epoch=epoch)
        except ConflictError:  # a hint only: the next build starts a new cache line
            logger.warning("prompt-cache fingerprint not saved (state kept changing) user=%s "
                           "session=%s", key.user_id, key.session_id,
                           extra={"contextwright": {"event": "fingerprint_conflict",
                                                    "user_id": key.user_id,
                                                    "session_id": key.session_id}})

    def _session_history(self, key: SessionKey, settings: ModeSettings,
                         read: list[StoredMessage], shown: list[StoredMessage]
                         ) -> SessionHistorySource | None:
        # ``shown`` is the request's history and the user message: older turns are recalled.
        recall = self._recall[settings.name]
        if not recall.enabled or self._plans[settings.name].spec("history") is None:
            return None
        turns = self._recall_indexes.turns_before(self.store, key, shown[0].seq, read)
        if turns is None:
            return None
        calls = sum(1 for stored in shown if stored.message.get("tool_calls"))
        return SessionHistorySource(
            history=self._history, turns=turns, recaller=self.recaller, recall=recall,
            max_tokens=self._recall_tokens[settings.name], begin=shown[0].seq,
            recent_calls=calls, anchor=settings.window_size)

    # ----- state and summaries -----

    def _summary_job(self, key: SessionKey) -> SummaryJob:
        _, state = load_state(self.store, key)
        settings = self._settings(state.mode)
        plan = self._plans[settings.name]
        return SummaryJob(
            store=self.store, key=key, settings=settings, summarizer=self.summarizer,
            tokenizer=self.tokenizer, max_tokens=self._summary_max_tokens,
            threshold_tokens=int(plan.budget.available * settings.summary_threshold_ratio),
        )

    def _schedule_summary(self, key: SessionKey) -> None:
        if self._executor is None:
            update_summary(self._summary_job(key))
            return
        with self._lock:
            if key in self._pending:
                return  # the queued job will read the newest messages when it runs
            future = self._executor.submit(self._run_summary, key)
            self._pending[key] = future
            self._outstanding.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._outstanding.discard(future)

    def _run_summary(self, key: SessionKey) -> None:
        with self._lock:
            self._pending.pop(key, None)
        try:
            update_summary(self._summary_job(key))
        except Exception:  # a background failure must be visible, not lost with the future
            logger.exception("summary update failed user=%s session=%s", key.user_id,
                             key.session_id, extra={"contextwright": {
                                 "event": "summary_failed", "user_id": key.user_id,
                                 "session_id": key.session_id}})

    def _now_iso(self) -> str:
        return datetime.fromtimestamp(self._clock(), UTC).isoformat(timespec="seconds")


def _previous(key: SessionKey, state: SessionState) -> Fingerprint | None:
    """The session's stored fingerprint; an unreadable one is logged and a new line started."""
    if state.cache is None:
        return None
    try:
        return Fingerprint.from_dict(state.cache)
    except InvalidInputError as error:
        logger.warning("stored prompt-cache fingerprint unreadable (%s) user=%s session=%s",
                       error, key.user_id, key.session_id,
                       extra={"contextwright": {"event": "fingerprint_unreadable",
                                                "user_id": key.user_id,
                                                "session_id": key.session_id}})
        return None


def plan_or_name(name: str, settings: ModeSettings,
                 plans: Mapping[str, BuildPlan | str] | None) -> BuildPlan | str:
    """The plan a mode builds with: an override from ``plans``, else its configured one."""
    return (plans or {}).get(name, settings.plan)


def _resolve_plan(plan: BuildPlan | str) -> BuildPlan:
    if isinstance(plan, BuildPlan):
        return plan
    return BuildPlan.named(plan) if plan in SHIPPED_PLANS else BuildPlan.load(plan)


def _plan_with_session(plan: BuildPlan, settings: ModeSettings,
                       budget: Mapping[str, Any] | None) -> BuildPlan:
    # The session's memory sits right after the system prompt; retrieval sources get the
    # mode's retrieval parameters.
    if budget:
        plan = plan.with_budget(**budget)
    specs: list[SourceSpec] = []
    for spec in plan.sources:
        if spec.source in ("rag", "retrieval"):
            spec = replace(spec, options=FrozenOptions(
                {**settings.retrieval_options(), **thawed(spec.options)}))
        if spec.source == "history" and (settings.enable_summary or settings.recall is not None
                                         ) and spec.options.get("recall_share"):
            # With a running summary the request holds only the rounds after it, which fit
            # the budget anyway: recall works session-wide instead (``session_recall``), as it
            # does whenever the mode sets ``recall`` itself.
            spec = replace(spec, options=FrozenOptions(
                {**thawed(spec.options), "recall_share": 0}))
        specs.append(spec)
    if plan.spec("session") is None:
        specs.insert(_after(specs, "system"),
                     SourceSpec(source="session", weight=0.2 if settings.zones else 0.12))
    # An agent loop may call tools in any mode: a plan without them would silently lose this
    # turn's results. Unused, their share flows back to the other sources.
    if plan.spec("tools") is None:
        specs.insert(_after(specs, "session"), SourceSpec(source="tools", weight=0.1))
    if plan.spec("tool_results") is None:
        specs.insert(_after(specs, "user"), SourceSpec(source="tool_results", weight=0.1))
    return replace(plan, sources=tuple(specs))


def _after(specs: list[SourceSpec], source: str) -> int:
    return next((i + 1 for i, spec in enumerate(specs) if spec.source == source), len(specs))


def _image_parts(images: object) -> list[dict[str, Any]]:
    """``prepare``'s images as OpenAI ``image_url`` parts (checked)."""
    if isinstance(images, str | bytes | Mapping) or not isinstance(images, Sequence):
        raise InvalidInputError("images must be a list of images")
    return [image_from_part(image, f"images[{index}]").to_chat_part()
            for index, image in enumerate(images)]


_RECORD_TAIL = 16
"""Stored messages ``record`` reads to check new tool results (more when all are results)."""


def _recorded_messages(assistant: object, tool_results: object, messages: object,
                       now: str) -> list[dict[str, Any]]:
    """The batch ``record`` appends, checked (``InvalidInputError`` names what is wrong).

    Each part may be an OpenAI chat dict or SDK object, an OpenAI Responses item or response, or
    an Anthropic message (``contextwright.convert.chat_messages``).
    """
    batch: list[dict[str, Any]] = []
    if isinstance(assistant, str):
        batch.append({"role": "assistant", "content": assistant})
    elif assistant is not None:
        batch += [_with_role(message, "assistant", "assistant")
                  for message in chat_messages(assistant, "assistant")]
    for index, result in enumerate(_message_list(tool_results, "tool_results")):
        where = f"tool_results[{index}]"
        batch += [_with_role(message, "tool", where) for message in chat_messages(result, where)]
    for index, message in enumerate(_message_list(messages, "messages")):
        if isinstance(message, str | bytes):
            raise InvalidInputError(f"messages[{index}] must be a message object")
        batch += chat_messages(message, f"messages[{index}]")
    for index, message in enumerate(batch):
        message.setdefault("timestamp", now)
        parse_message(message, f"record[{index}]")  # refuse what a later build could not read
    return batch


def _message_list(value: object, name: str) -> Sequence[object]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise InvalidInputError(f"{name} must be a list of message objects")
    return value


def _with_role(message: object, role: str, where: str) -> dict[str, Any]:
    """``message`` as a ``role`` message; a different role in it is refused, not obeyed."""
    if not isinstance(message, Mapping):
        raise InvalidInputError(f"{where} must be a message object")
    given = message.get("role", role)
    if given != role:
        raise InvalidInputError(f"{where}.role must be {role!r} (or left out)")
    return {**message, "role": role}


def _log_route(key: SessionKey, route: RouteDecision, previous: str | None) -> None:
    logger.info("route user=%s session=%s mode=%s basis=%s trigger=%r", key.user_id,
                key.session_id, route.mode, route.basis, route.trigger,
                extra={"contextwright": {
                    "event": "route", "user_id": key.user_id, "session_id": key.session_id,
                    "mode": route.mode, "basis": route.basis, "trigger": route.trigger,
                    "confidence": route.confidence, "previous_mode": previous}})


def _log_switch(key: SessionKey, switch: ModeSwitch) -> None:
    logger.info("mode_switch user=%s session=%s %s -> %s trigger=%r", key.user_id,
                key.session_id, switch.old_mode, switch.new_mode, switch.trigger,
                extra={"contextwright": {
                    "event": "mode_switch", "user_id": key.user_id,
                    "session_id": key.session_id, "old_mode": switch.old_mode,
                    "new_mode": switch.new_mode, "trigger": switch.trigger,
                    "basis": switch.basis, "at_seq": switch.at_seq}})


