"""``SessionFlows``: what ``ContextManager`` does, written once over store calls as data.

``prepare`` checks its arguments, appends the user's message, routes it to a mode (handing off
explicitly when the mode changes), and builds the context from the session's summary, zones and
recent messages, with older turns relevant to the message recalled when the mode asks for it;
``record`` checks and appends the model's answer and tool results with the zones they update;
the summary update, the state read and the erasures complete the set. Each is a flow
(``contextwright.session.flow``): it yields store calls and computations and does no I/O, so
``ContextManager`` runs the same logic over a sync store (``prepare``) and an async one
(``aprepare``). All state lives in the store (what is kept in process is derived from it and
checked against it), so any number of managers in any number of processes can serve the same
sessions.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Literal

from contextwright.builder import ContextBuilder, cache_policy, check_target, session_cache_key
from contextwright.checks import whole_number
from contextwright.compress.summarize import ExtractiveSummarizer, Summarizer, Summary
from contextwright.convert import log_left_out
from contextwright.core.cache import CachePolicy, Fingerprint
from contextwright.core.covering import request_parts
from contextwright.core.fence import language_of
from contextwright.core.final import FinalContext
from contextwright.core.items import check_text, parse_message
from contextwright.core.plan import BuildPlan
from contextwright.core.request import Request
from contextwright.core.source import ContextSource, registered_sources
from contextwright.errors import (
    ConfigurationError,
    ConflictError,
    ContextwrightError,
    InvalidInputError,
    PlanError,
    SessionGone,
)
from contextwright.manager.batches import RECORD_TAIL, recorded_messages
from contextwright.manager.checks import checked_parts, image_parts
from contextwright.manager.handoff import hand_off, note_user_message, record_turn_in_zones
from contextwright.manager.plans import mode_plans, plan_with_session
from contextwright.manager.prepared import AnsweredContext, PreparedContext
from contextwright.manager.recall import (
    RecallIndexes,
    SessionHistorySource,
    SessionTurns,
    recall_tokens,
    session_recall,
)
from contextwright.manager.summaries import (
    MAX_COMMIT_ATTEMPTS,
    Outcome,
    SummaryJob,
    rounds_due,
    summary_update,
)
from contextwright.manager.turns import last_user_index, plain
from contextwright.modes.config import ModesConfig, ModeSettings, RecallSettings
from contextwright.modes.router import ModeClassifier, RouteDecision, Router
from contextwright.modes.sources import SessionMemorySource
from contextwright.modes.zones import facts_shown, open_task_text
from contextwright.observe.recorder import SnapshotRecorder, as_recorder
from contextwright.observe.sinks import SnapshotSink
from contextwright.recall import LexicalTurnRecaller, RecallExpansion, TurnRecaller
from contextwright.session import flow
from contextwright.session.flow import Flow
from contextwright.session.state import ModeSwitch, SessionState, change_state, read_state
from contextwright.session.store import (
    MAX_IDEMPOTENCY_KEY_BYTES,
    Appended,
    SessionKey,
    StateRecord,
    StateWrite,
    StoredMessage,
    validate_conditions,
)
from contextwright.sources.conversation import HistorySource, read_blocks_backward
from contextwright.tokens import CountingTokenizer, Tokenizer, get_tokenizer

logger = logging.getLogger("contextwright.session")

MAX_STATE_ATTEMPTS = 8
"""Optimistic state updates retried this often under contention before giving up."""
MESSAGE_CACHE_SIZE = 50_000
"""Stored message dicts remembered by (session, seq) so the builder's per-object caches hit."""
QUIET_SESSIONS = 10_000
"""Sessions whose last ``prepare`` is remembered for skipping a summary update that cannot be
due (``SessionFlows._summary_may_be_due``), at most."""

Target = Literal["chat", "text"]
RECORD_KEY_PREFIX = "record:"
PREPARE_KEY_PREFIX = "prepare:"
MAX_WRITE_KEY = 256
"""The longest idempotency key the stores take."""


def _check_count(name: str, value: object, *, minimum: int) -> None:
    """Refuse a count the manager could only fail on later, after storing a user's message.

    ``max_read_messages=0`` read no message to answer, ``summary_max_tokens=0`` failed every
    summary update, and a count of the wrong type failed inside a store call that does not
    name the argument.
    """
    whole_number(value, name, minimum=minimum)


def _check_parts(*, modes: object, plans: object, sources: object, summarizer: object,
                 recaller: object, clock: object) -> None:
    """Refuse, when the manager is made, a part of the wrong kind (``ConfigurationError``).

    Each had failed later with a plain Python error, or not at all: a summariser or recaller
    that cannot be called failed every summary update or recall quietly (logged only), and a
    clock that is not a function failed every ``prepare``.
    """
    if modes is not None and not isinstance(modes, ModesConfig | str | Path):
        hint = (" (for settings as data: modes=modes_from_mapping(...), from "
                "contextwright.modes.config)" if isinstance(modes, Mapping) else "")
        raise ConfigurationError(f"modes must be a ModesConfig or a config file's path, not "
                                 f"{type(modes).__name__}{hint}")
    if plans is not None and not (isinstance(plans, Mapping) and all(
            isinstance(plan, BuildPlan | str | Path) for plan in plans.values())):
        raise ConfigurationError("plans must map mode names to a BuildPlan, a shipped plan's "
                                 "name or a plan file's path")
    if isinstance(sources, str | bytes | Mapping) or not isinstance(sources, Iterable):
        raise ConfigurationError(f"sources must be a list of sources, not "
                                 f"{type(sources).__name__}")
    for name, given, method in (("summarizer", summarizer, "summarize"),
                                ("recaller", recaller, "rank")):
        if given is not None and not callable(getattr(given, method, None)):
            raise ConfigurationError(f"{name} must have a {method}() method, not "
                                     f"{type(given).__name__}")
    if not callable(clock):
        raise ConfigurationError(f"clock must be a function returning the time, not "
                                 f"{type(clock).__name__}")


def _check_sources(sources: tuple[object, ...]) -> None:
    for index, source in enumerate(sources):
        if not isinstance(source, ContextSource):
            raise ConfigurationError(f"sources[{index}] must be a source (a namespace and "
                                     f"build()), not {type(source).__name__}")


def _check_answered(context: object) -> None:
    """Refuse a ``record(context=…)`` that is not a prepared context (its session and epoch).

    The context's ``to_request`` body or its ``FinalContext`` are easy to pass by mistake.
    """
    key = getattr(context, "key", None)
    if not isinstance(key, SessionKey) or not isinstance(getattr(context, "epoch", None), str):
        raise InvalidInputError(
            f"record: context must be the PreparedContext prepare returned, not "
            f"{type(context).__name__}")


def _up_to(seq: int, messages: list[StoredMessage]) -> list[StoredMessage]:
    """``messages`` up to the one stored as ``seq`` (all of them when it is not among them).

    A call that stored a user message answers that message: what other calls stored after it
    (a concurrent prepare on the session, or the messages since, for a retry that replays
    its idempotency key) belongs to their contexts, not to this one.
    """
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].seq == seq:
            return messages[:index + 1]
    return messages


@dataclass(frozen=True, slots=True, kw_only=True)
class _Answering:
    """The incarnation of a session this manager's newest ``prepare`` (or ``record``) of it saw."""

    epoch: str
    pending: bool
    """A ``prepare`` not answered by a ``record`` yet: its answer goes into ``epoch`` or nowhere."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Quiet:
    """What a session's last ``prepare`` read, for ``SessionFlows._summary_may_be_due``."""

    epoch: str
    last_seq: int
    """The session's newest message then."""
    basis: tuple[SessionState, list[StoredMessage]] | None = None
    """The state and every message after its summary, as read (None: already found quiet)."""


def record_write_key(idempotency_key: str) -> str:
    """The key a ``record`` write is stored under: apart from ``prepare``'s keys.

    An agent may name a turn once and pass that name to both calls of the turn; the answer is
    then another write than the question, not a retry of it. A key too long to prefix within
    the stores' limit is hashed (still one key per caller's key).
    """
    validate_conditions(None, None, idempotency_key)
    return _prefixed_key(RECORD_KEY_PREFIX, idempotency_key)


def prepare_write_key(idempotency_key: str) -> str:
    """The key a ``prepare`` write is stored under: never one a ``record`` key is stored under.

    A caller's key is kept as it is (so keys stored before stay valid) unless it begins as the
    stored keys of the two calls do, ``record:`` or ``prepare:``: those are prefixed, so a
    prepare key ``record:7`` and a record key ``7`` stay two writes.
    """
    validate_conditions(None, None, idempotency_key)
    if idempotency_key.startswith((RECORD_KEY_PREFIX, PREPARE_KEY_PREFIX)):
        return _prefixed_key(PREPARE_KEY_PREFIX, idempotency_key)
    return idempotency_key


def _prefixed_key(prefix: str, idempotency_key: str) -> str:
    prefixed = prefix + idempotency_key
    if (len(prefixed) <= MAX_WRITE_KEY
            and len(prefixed.encode("utf-8")) <= MAX_IDEMPOTENCY_KEY_BYTES):
        return prefixed
    digest = hashlib.blake2b(idempotency_key.encode("utf-8"), digest_size=16).hexdigest()
    return f"{prefix}#{digest}"


class SessionFlows:
    """The manager's configuration, in-process caches and flows; no store, no threads, no loop.

    The arguments are ``ContextManager``'s (see there).
    """

    def __init__(self, *, modes: ModesConfig | str | Path | None = None,
                 plans: Mapping[str, BuildPlan | str] | None = None,
                 router: Router | None = None, classifier: ModeClassifier | None = None,
                 system: str | None = None, tokenizer: str | Tokenizer = "o200k_base",
                 sources: Iterable[ContextSource] = (), summarizer: Summarizer | None = None,
                 budget: Mapping[str, Any] | None = None, summary_max_tokens: int = 300,
                 max_read_messages: int = 400, recaller: TurnRecaller | None = None,
                 recall_cache_messages: int = 100_000, cache: CachePolicy | bool = True,
                 clock: Callable[[], float] = time.time,
                 snapshots: SnapshotRecorder | SnapshotSink | None = None) -> None:
        _check_parts(modes=modes, plans=plans, sources=sources, summarizer=summarizer,
                     recaller=recaller, clock=clock)
        self.snapshots = as_recorder(snapshots)
        _check_count("max_read_messages", max_read_messages, minimum=1)
        _check_count("summary_max_tokens", summary_max_tokens, minimum=1)
        _check_count("recall_cache_messages", recall_cache_messages, minimum=0)
        if router is not None and (modes is not None or classifier is not None):
            raise PlanError("give modes and classifier to the Router, or pass them without one")
        if router is not None and not (callable(getattr(router, "route", None))
                                       and isinstance(getattr(router, "config", None),
                                                      ModesConfig)):
            raise ConfigurationError(f"router must be a Router (route() and a ModesConfig "
                                     f"config), not {type(router).__name__}")
        config = modes if isinstance(modes, ModesConfig) else (
            ModesConfig.load(modes) if modes is not None else ModesConfig.default())
        self.router = router or Router(config, classifier)
        self.modes = self.router.config
        self.system = system
        self.tokenizer: CountingTokenizer = get_tokenizer(tokenizer)
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self._sources = tuple(sources)
        _check_sources(self._sources)
        unknown = sorted(set(plans or {}) - set(self.modes.modes))
        if unknown:
            raise PlanError(f"plans given for unknown modes: {unknown}")
        given = mode_plans(self.modes, plans)
        self._recall: dict[str, RecallSettings] = {
            name: session_recall(settings, given[name])
            for name, settings in self.modes.modes.items()}
        self._plans = {name: plan_with_session(given[name], settings, budget)
                       for name, settings in self.modes.modes.items()}
        # Which request part each source shows (a source without one always has content).
        self._parts_of = {name: part for part, name, _ in request_parts(
            {**registered_sources(), **{s.namespace: s for s in self._sources}})}
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
        self._quiet: OrderedDict[SessionKey, _Quiet] = OrderedDict()
        """Per session, what its last ``prepare`` read: whether a summary update can be due."""
        self._answering: OrderedDict[SessionKey, _Answering] = OrderedDict()
        """Per session, the incarnation this manager last served it in: a ``record`` answering
        a ``prepare`` made before an erase must not start a session of its own. It holds no
        content, and an erase keeps it (the answer racing the erase is what it refuses)."""
        self._lock = threading.Lock()
        self._erasures = 0
        """Erases this manager has begun: a call that saw it change drops what it cached."""

    # ----- prepare -----

    def _prepare_flow(self, user_id: str, session_id: str, text: str | None, *,
                      images: Sequence[object], tools: Sequence[Mapping[str, Any]],
                      documents: Sequence[Any],
                      env: Mapping[str, str] | None, system: str | None, target: Target,
                      idempotency_key: str | None) -> Flow[PreparedContext]:
        key = SessionKey(user_id=user_id, session_id=session_id)
        check_target(target)
        parts = checked_parts(tools=tools, documents=documents, env=env,
                              system=system or self.system)
        if text is not None:
            check_text(text, "text")
        parts_of_images = image_parts(images)
        if parts_of_images and text is None:
            raise InvalidInputError("images go with a user message: pass text (it may be '')")
        erasures = self._erasures
        appended = ((yield from self._append_user(key, text, idempotency_key, parts_of_images))
                    if text is not None else None)
        try:
            prepared = yield from self._prepare_stored(key, text, appended, parts, target)
        except SessionGone as error:
            self._settle_answering(key)
            error.add_note("the session was erased while this call ran; the user message was "
                           "erased with it" if text is not None else
                           "the session was erased (or expired) since this manager last served "
                           "it: the turn it continued is gone")
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
        self._note_answering(key, prepared.epoch, pending=True)
        return prepared

    def _prepare_stored(self, key: SessionKey, text: str | None, appended: Appended | None,
                        parts: Request, target: Target) -> Flow[PreparedContext]:
        # The incarnation read, taken first: the fingerprint may go only into it.
        epoch = appended.epoch if appended is not None else (yield from flow.epoch(key))
        if appended is None and epoch is None and self._served_epoch(key) is not None:
            # Continuing a turn of a session this manager served, now absent: an agent loop
            # cut off by an erase or expiry. (A session begun again may be continued: another
            # worker may have begun it, and this call builds only what is in it.)
            raise SessionGone("the session was erased or expired since this manager served it")
        record, read_after, read, recent = yield from self._read_recent(key)
        if (yield from flow.epoch(key)) != epoch:
            # Erased (and maybe begun again) between the reads: the state and the log read may
            # be of two incarnations, and a context of the erased one's summary or messages
            # must not be built. What is read after this is read by seq under the epoch.
            raise SessionGone("the session was erased while this call read it")
        # A replay of a message the session has moved on from answers that message, but must
        # not leave its layout as the one the session's next build continues.
        keeps_layout = appended is None or not appended.replayed or not read or (
            read[-1].seq <= appended.seqs[-1])
        if appended is not None:
            read, recent = _up_to(appended.seqs[-1], read), _up_to(appended.seqs[-1], recent)
            state, version, route, switch = yield from self._route(
                key, text, appended, recent, record, moved_on=not keeps_layout)
        else:
            state, version, route, switch = yield from self._route_unrouted(
                key, epoch, recent, record)
        self._note_read(key, epoch, read_after, state, read)
        user_index = last_user_index(recent)
        if user_index is None:
            raise InvalidInputError("the session has no user message to answer; pass text")
        settings = self._settings(state.mode)
        filled = self._filled(parts, has_turn=user_index + 1 < len(recent))
        session_history = partial(self._session_history, key, settings, read,
                                  recent[:user_index + 1], filled)
        history = yield from session_history()
        stored = recent[user_index]
        asked = parse_message(stored.message, f"session[seq {stored.seq}]").content
        if history is not None:  # the turns it will recall, read before the build
            history = yield from self._read_recalled(
                key, history, (yield from flow.compute(partial(history.unread_spans, asked))),
                asked, session_history)
        build = partial(self._build, key, state, settings, recent, user_index, parts, target,
                        route, switch, read_after)
        context = yield from flow.compute(partial(build, history))
        if history is not None and history.unread:
            # Turns the ranking did not name (an earlier call's layout shows them again):
            # read them too and build again, so the context is what any worker would build.
            history = yield from self._read_recalled(key, history, sorted(history.unread),
                                                     asked, session_history)
            context = yield from flow.compute(partial(build, history))
        if keeps_layout:
            yield from self._keep_fingerprint(key, context, epoch, (version, state))
        assert epoch is not None  # a session with a user message exists
        return PreparedContext(context=context, key=key, mode=settings.name, route=route,
                               switch=switch, user_seq=recent[user_index].seq, epoch=epoch)

    def _read_recalled(self, key: SessionKey, history: SessionHistorySource,
                       spans: list[tuple[int, int]], asked: str,
                       again: Callable[[], Flow[SessionHistorySource | None]],
                       ) -> Flow[SessionHistorySource | None]:
        """``history`` with its turns in ``spans`` read from the store's log.

        When they cannot be read as the loaded index describes them, the session's history is
        made again (``again``: indexed from its messages, or loaded afresh after an erase) and
        the turns it ranks for ``asked`` are read. After three attempts the source is used as
        it is: what it cannot show is left out, and logged.
        """
        for _ in range(3):
            if not spans:
                history.unread.clear()
                return history
            if (yield from self._recall_indexes.read_turns(key, history.turns, spans)):
                history.unread.clear()
                return history
            remade = yield from again()
            if remade is None:
                return None
            history = remade
            spans = yield from flow.compute(partial(history.unread_spans, asked))
        logger.warning("recalled turns not read user=%s session=%s", key.user_id,
                       key.session_id, extra={"contextwright": {
                           "event": "recall_unread", "user_id": key.user_id,
                           "session_id": key.session_id}})
        return history

    def _append_user(self, key: SessionKey, text: str, idempotency_key: str | None,
                     images: list[dict[str, Any]]) -> Flow[Appended]:
        content: str | list[dict[str, Any]] = text
        if images:
            content = [{"type": "text", "text": text}, *images] if text else images
        message = {"role": "user", "content": content, "timestamp": self._now_iso()}
        appended = yield from flow.append_if(
            key, [message],
            idempotency_key=None if idempotency_key is None else prepare_write_key(
                idempotency_key))
        if appended.replayed:
            yield from _check_replay(key, appended.seqs, [message], "prepare")
        return appended

    def _read_recent(self, key: SessionKey) -> Flow[
            tuple[StateRecord | None, int, list[StoredMessage], list[StoredMessage]]]:
        # Where the summary ends, the messages after it, newest ``max_read`` of them (as
        # read), and the same from a whole round on (as shown).
        record, state = yield from read_state(key)
        last = self._max_read
        while True:
            read = yield from flow.read(key, after=state.summary_upto, last=last)
            whole = not read or read[0].seq == state.summary_upto + 1  # seqs have no gaps
            if whole or any(m.message.get("role") == "user" for m in read):
                break
            # One turn longer than the window (an agent's long tool loop): read back to the
            # question it answers, or the turn could not be built.
            last *= 2
        start = 0 if whole and not state.summary_upto else next(
            (i for i, m in enumerate(read) if m.message.get("role") == "user"), 0)
        # From the session's first message on, what comes before its first question (an
        # assistant's greeting) is shown; after a summary or a cut read, a partial round is not.
        return (record, state.summary_upto, read,
                [self._remembered(key, stored) for stored in read[start:]])

    def _remembered(self, key: SessionKey, stored: StoredMessage) -> StoredMessage:
        # The same dict object is handed to the builder every time, so its caches hit. The
        # log is append-only, but an erased session starts again at seq 1, possibly within the
        # same clock tick: only a message equal to the one read is handed back, never what an
        # earlier incarnation of the session held there.
        cache_key = (key.user_id, key.session_id, stored.seq, stored.created_at)
        with self._lock:
            known = self._messages.get(cache_key)
            if known is None or known != stored.message:
                self._messages[cache_key] = stored.message
                self._messages.move_to_end(cache_key)
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
               recent: list[StoredMessage], record: StateRecord | None, *, moved_on: bool
               ) -> Flow[tuple[SessionState, int | None, RouteDecision | None,
                               ModeSwitch | None]]:
        # The routed state is written only into the incarnation of the session the message
        # went into: after an erase, nothing derived from the message may come back. Also
        # returns the version the state is stored at (None: none stored), so a later write of
        # this call need not read it again. A replayed message (a retry with its idempotency
        # key, a duplicated delivery) was routed when it was first stored: routing it again
        # would count its kept turn again, release the mode early, or plan its task afresh
        # over the steps recorded since. It is built from the state as stored, with the
        # switch it caused, when the state says its routing changed it (``routed_upto``) or
        # newer messages followed it. Otherwise the first call may have ended between storing
        # and routing (``OutcomeUnknown``, the case idempotency keys are for), so it is routed
        # now; had it been routed without changing the state, routing it again against that
        # same state changes nothing either.
        for attempt in range(MAX_STATE_ATTEMPTS):
            if attempt:
                record = yield from flow.get_state(key)
            state = SessionState.from_dict(record.data) if record else SessionState()
            version = record.version if record else None
            if text is None or appended is None:
                return state, version, None, None
            seq = appended.seqs[0]
            if appended.replayed and (moved_on or seq <= state.routed_upto):
                return state, version, None, _switch_at(state, seq)
            # On a worker thread even without a classifier: the rules take microseconds, but
            # a mode switch condenses the old window (fact extraction over every message in
            # it, large tool results included) and a structured mode extracts facts from the
            # message itself, which may take seconds.
            route, new_state, switch = yield from flow.compute(
                partial(self._decide_route, state, text, seq, recent))
            if new_state != state:
                new_state = replace(new_state, routed_upto=seq)
            if new_state == state:
                _log_route(key, route, state.mode)
                return state, version, route, None
            try:
                written = yield from flow.put_state(key, new_state.to_dict(),
                                                    expected_version=version,
                                                    epoch=appended.epoch)
            except ConflictError:
                continue
            _log_route(key, route, state.mode)
            if switch is not None:
                _log_switch(key, switch)
            return new_state, written, route, switch
        raise ConflictError("session state kept changing under this prepare; try again")

    def _route_unrouted(self, key: SessionKey, epoch: str | None, recent: list[StoredMessage],
                        record: StateRecord | None) -> Flow[
            tuple[SessionState, int | None, RouteDecision | None, ModeSwitch | None]]:
        """Continuing a turn: route its user message if the call that stored it could not.

        A ``prepare`` that stored the message and then failed (lost the state race under
        contention, a failing classifier, a lost connection) says to build again with
        ``text=None``; that call routes the message, as a retry with its idempotency key
        would, when nothing followed it and the state does not show it routed
        (``routed_upto``). A routing that changed nothing changes nothing again.
        """
        newest = recent[-1] if recent else None
        if (epoch is None or newest is None or newest.message.get("role") != "user"
                or (record is not None and newest.seq <= SessionState.from_dict(
                    record.data).routed_upto)):
            state = SessionState.from_dict(record.data) if record else SessionState()
            return state, record.version if record else None, None, None
        said = parse_message(newest.message, f"session[seq {newest.seq}]").content
        state, version, route, switch = yield from self._route(
            key, said, Appended(seqs=[newest.seq], epoch=epoch, replayed=True), recent, record,
            moved_on=False)
        return state, version, route, switch if route is not None else None

    def _decide_route(self, state: SessionState, text: str, seq: int,
                      recent: list[StoredMessage]
                      ) -> tuple[RouteDecision, SessionState, ModeSwitch | None]:
        # A stored mode this manager does not configure (removed, or another worker's
        # config) is routed from afresh and handed off from, not an error on every call.
        known = state.mode if state.mode in self.modes.modes else None
        route = self.router.route(text, known, kept_turns=state.kept_turns,
                                  task_done=state.zones.task.closed,
                                  open_task=open_task_text(state.zones.task))
        new_state, switch = self._apply_route(state, route, text, seq, recent)
        return route, new_state, switch

    def _apply_route(self, state: SessionState, route: RouteDecision, text: str, seq: int,
                     recent: list[StoredMessage]) -> tuple[SessionState, ModeSwitch | None]:
        language = _session_language(state.language, text, seq, recent)
        state = state if state.language == language else replace(state, language=language)
        switch = None
        if route.mode != state.mode:
            switch = ModeSwitch(old_mode=state.mode, new_mode=route.mode, trigger=route.trigger,
                                basis=route.basis, at_seq=seq, at=self._clock())
            state = hand_off(state, switch, [m for m in recent if m.seq <= seq],
                             window_size=self._settings(state.mode).window_size
                             if state.mode else 0,
                             tokenizer=self.tokenizer)
        kept = state.kept_turns + 1 if route.basis == "kept" else 0
        if kept != state.kept_turns:
            state = replace(state, kept_turns=kept)
        settings = self._settings(state.mode)
        return note_user_message(state, text, settings), switch

    def _build(self, key: SessionKey, state: SessionState, settings: ModeSettings,
               recent: list[StoredMessage], user_index: int, parts: Request, target: Target,
               route: RouteDecision | None, switch: ModeSwitch | None, read_after: int,
               history: SessionHistorySource | None) -> FinalContext:
        language = state.language or "en"
        memory = SessionMemorySource(settings=settings, zones=state.zones,
                                     summary_text=_summary_text(state, language),
                                     language=language,
                                     unread=None if history is not None else _unread_run(
                                         read_after, recent, self._max_read))
        stored = recent[user_index]
        user = parse_message(stored.message, f"session[seq {stored.seq}]")
        request = replace(parts, user_input=user.content, images=user.images,
                          history=plain(recent[:user_index]),
                          turn=plain(recent[user_index + 1:]))
        builder = ContextBuilder(self.tokenizer, sources=(
            *self._sources, memory, *([history] if history is not None else [])),
            snapshots=self.snapshots and self.snapshots.labelled(
                session=key, mode=settings.name, route=route, switch=switch))
        if self._cache is None:
            return builder.build(self._plans[settings.name], request, target=target)
        return builder.build(self._plans[settings.name], request, target=target,
                             previous=_previous(key, state), cache=self._cache,
                             cache_key=session_cache_key(key.user_id, key.session_id))

    def _keep_fingerprint(self, key: SessionKey, context: FinalContext, epoch: str | None,
                          known: tuple[int | None, SessionState]) -> Flow[None]:
        # The next build of this session, on any worker, continues this one's layout. Only
        # into the incarnation of the session that was read: an erased session stays erased.
        if self._cache is None or context.stable_fingerprint is None:
            return
        fingerprint = context.stable_fingerprint.to_dict()
        if epoch is None:  # no session was there when the call began
            return
        try:
            yield from change_state(key, lambda s: replace(s, cache=fingerprint), epoch=epoch,
                                    known=known)
        except ConflictError:  # a hint only: the next build starts a new cache line
            logger.warning("prompt-cache fingerprint not saved (state kept changing) user=%s "
                           "session=%s", key.user_id, key.session_id,
                           extra={"contextwright": {"event": "fingerprint_conflict",
                                                    "user_id": key.user_id,
                                                    "session_id": key.session_id}})

    def _filled(self, parts: Request, *, has_turn: bool) -> Callable[[str], bool]:
        """Whether a source of the plan has something to show in this call.

        Its request part is given (this turn's results: messages follow the user's); a source
        that shows no request part (the session's summary, a retriever) always counts.
        """
        def filled(source: str) -> bool:
            part = self._parts_of.get(source)
            if part is None:
                return True
            return has_turn if part == "turn" else bool(getattr(parts, part, None))
        return filled

    def _session_history(self, key: SessionKey, settings: ModeSettings,
                         read: list[StoredMessage], shown: list[StoredMessage],
                         filled: Callable[[str], bool]) -> Flow[SessionHistorySource | None]:
        # ``shown`` is the request's history and the user message: older turns are recalled.
        recall = self._recall[settings.name]
        if not recall.enabled or self._plans[settings.name].spec("history") is None:
            return None
        turns: SessionTurns | None = yield from self._recall_indexes.turns_before(
            key, shown[0].seq, read)
        if turns is None:
            return None
        calls = sum(1 for stored in shown if stored.message.get("tool_calls"))
        said = shown[-1].message.get("timestamp")
        return SessionHistorySource(
            history=self._history, turns=turns, recaller=self.recaller, recall=recall,
            max_tokens=recall_tokens(self._plans[settings.name], recall, filled),
            begin=shown[0].seq,
            recent_calls=calls, anchor=settings.window_size,
            now=said if isinstance(said, str) else None)

    # ----- record -----

    def _record_flow(self, user_id: str, session_id: str, *, assistant: object,
                     tool_results: Sequence[object], messages: Sequence[object],
                     idempotency_key: str | None, context: AnsweredContext | None = None,
                     ) -> Flow[tuple[list[int], bool]]:
        """The seqs ``record`` returns, and whether it stored them (then a summary is due)."""
        key = SessionKey(user_id=user_id, session_id=session_id)
        if context is not None:
            _check_answered(context)
            if context.key != key:
                raise InvalidInputError("record: context is another session's PreparedContext")
        left_out: dict[str, int] = {}
        batch = recorded_messages(assistant, tool_results, messages, self._now_iso(), left_out)
        if left_out:
            log_left_out(logger, key.user_id, key.session_id, left_out)
        if not batch:
            raise InvalidInputError("record needs an assistant message, tool results or messages")
        if idempotency_key is not None:
            idempotency_key = record_write_key(idempotency_key)
            done = yield from flow.find_write(key, idempotency_key)
            if done is not None:
                yield from _check_replay(key, done, batch, "record")
                return done, False
        try:
            appended = yield from self._append_turn(key, batch, idempotency_key,
                                                    self._answered_epoch(key, context))
        except SessionGone as error:
            self._settle_answering(key)
            error.add_note("the session the answer belongs to was erased (or expired, or begun "
                           "again) since its prepare: nothing is stored")
            raise
        except InvalidInputError:
            # The first try of this call may have landed meanwhile: its results are answered.
            done = ((yield from flow.find_write(key, idempotency_key))
                    if idempotency_key is not None else None)
            if done is None:
                raise
            yield from _check_replay(key, done, batch, "record")
            return done, False
        if appended.replayed:
            yield from _check_replay(key, appended.seqs, batch, "record")
        self._note_answering(key, appended.epoch, pending=False)
        with self._lock:
            quiet = self._quiet.get(key)
        # Checking the rounds a prepare read counts their tokens: a worker thread's job.
        may_be_due = yield from flow.compute(
            partial(self._summary_may_be_due, key, batch, appended),
            where="cpu" if quiet is not None and quiet.basis is not None else "loop")
        return appended.seqs, may_be_due

    def _note_read(self, key: SessionKey, epoch: str | None, read_after: int,
                   state: SessionState, read: list[StoredMessage]) -> None:
        """Remember what this ``prepare`` read, when it is every message after the summary.

        ``read_after``: the seq ``read`` starts after (the summary's end as first read).
        """
        complete = epoch is not None and bool(read) and read[0].seq == read_after + 1
        with self._lock:
            self._quiet.pop(key, None)
            if complete and state.summary_upto == read_after:
                self._quiet[key] = _Quiet(epoch=epoch or "", last_seq=read[-1].seq,
                                          basis=(state, read))
                if len(self._quiet) > QUIET_SESSIONS:
                    self._quiet.popitem(last=False)

    def _note_answering(self, key: SessionKey, epoch: str, *, pending: bool) -> None:
        with self._lock:
            self._answering[key] = _Answering(epoch=epoch, pending=pending)
            self._answering.move_to_end(key)
            if len(self._answering) > QUIET_SESSIONS:
                self._answering.popitem(last=False)

    def _settle_answering(self, key: SessionKey) -> None:
        """After ``SessionGone``: no answer is pending any more.

        The caller knows, and may begin the session again with an assistant's greeting; the
        served incarnation stays known, so a cut-off agent loop keeps getting ``SessionGone``.
        """
        with self._lock:
            known = self._answering.get(key)
            if known is not None:
                self._answering[key] = replace(known, pending=False)

    def _served_epoch(self, key: SessionKey) -> str | None:
        """The incarnation this manager last served ``key`` in (None: not remembered)."""
        with self._lock:
            known = self._answering.get(key)
        return None if known is None else known.epoch

    def _answered_epoch(self, key: SessionKey, context: AnsweredContext | None) -> str | None:
        """The incarnation a ``record`` answers: its context's, or this manager's pending prepare's.

        None: not known (a greeting, or a prepare that ran on another worker).
        """
        if context is not None:
            return context.epoch
        with self._lock:
            known = self._answering.get(key)
        return known.epoch if known is not None and known.pending else None

    @staticmethod
    def _refuse_if_gone(live: str | None, expected: str | None) -> None:
        if expected is not None and live != expected:
            raise SessionGone("the session was erased or expired (or begun again) since "
                              "the prepare this call follows")

    def _summary_may_be_due(self, key: SessionKey, batch: list[dict[str, Any]],
                            appended: Appended) -> bool:
        """Whether the summary update after this ``record`` may find anything to do.

        Only a new round can make older rounds due: a record that appends to the round the last
        ``prepare`` read in full (nothing stored in between, no user message in it) leaves them
        as that ``prepare`` read them, so when none was due then, none is now, and the update
        (three or four store reads) is skipped. Anything else runs it as usual.
        """
        with self._lock:
            quiet = self._quiet.pop(key, None)
        if (quiet is None or quiet.epoch != appended.epoch
                or appended.seqs[0] != quiet.last_seq + 1
                or any(message.get("role") == "user" for message in batch)):
            return True
        if quiet.basis is not None:
            state, read = quiet.basis
            job = self._summary_job(key, state)
            if job.settings.enable_summary and rounds_due(read, job):
                return True
        with self._lock:  # a further record of the same round is as quiet
            self._quiet[key] = _Quiet(epoch=quiet.epoch, last_seq=appended.seqs[-1])
        return False

    def _append_turn(self, key: SessionKey, batch: list[dict[str, Any]],
                     idempotency_key: str | None, answers: str | None) -> Flow[Appended]:
        """Check ``batch`` against the session and append it with its zones in one write.

        ``answers``: the incarnation the answered ``prepare`` saw (None: not known); the batch
        goes into it or nowhere (``SessionGone``). The write is conditioned on what the check
        read (the epoch, the last seq when there are tool results, the state's version); if
        anything moved, check again.
        """
        for _ in range(MAX_STATE_ATTEMPTS):
            epoch = yield from flow.epoch(key)  # read first: what follows is of it or later
            self._refuse_if_gone(epoch, answers)
            record, state = yield from read_state(key)
            # Results that answer no call of a session this manager served, now absent or
            # begun again, were cut off by an erase, not sent by mistake.
            served = self._served_epoch(key)
            last_seq = yield from self._check_results_answer_open_calls(
                key, batch, cut_off=served is not None and served != epoch)
            settings = self._settings(state.mode)
            # Zones extract facts from every tool result (seconds for large ones): off the loop.
            new_state = yield from flow.compute(
                partial(record_turn_in_zones, state, batch, settings),
                where="cpu" if settings.zones else "loop")
            write = None if new_state == state else StateWrite(
                data=new_state.to_dict(), expected_version=record.version if record else None)
            try:
                return (yield from flow.append_if(key, batch, last_seq=last_seq, epoch=epoch,
                                                  idempotency_key=idempotency_key, state=write))
            except ConflictError:
                continue
        raise ConflictError("the session kept changing under this record; try again")

    def _check_results_answer_open_calls(self, key: SessionKey, batch: list[dict[str, Any]],
                                         *, cut_off: bool = False) -> Flow[int | None]:
        """Refuse tool results that answer no call just before them, in the batch or stored.

        Stored, such a result would make every later build of the session fail (a result must
        follow the assistant message whose call it answers, as in the chat formats). Returns
        the last seq the check read (None when the batch has no results): the batch may only be
        appended right after it.
        """
        if not any(message["role"] == "tool" for message in batch):
            return None
        tail = yield from flow.read(key, last=RECORD_TAIL)
        if len(tail) == RECORD_TAIL and all(m.message.get("role") == "tool" for m in tail):
            tail = yield from flow.read(key, last=self._max_read)
        stored = [m.message for m in tail]
        start = len(stored)
        while start > 0 and stored[start - 1].get("role") == "tool":
            start -= 1  # the results already recorded for the newest call ...
        start = max(start - 1, 0)  # ... and the message before them: a block starts there
        try:
            for _ in read_blocks_backward([*stored[start:], *batch], "record"):
                pass
        except InvalidInputError:
            if cut_off:
                raise SessionGone(
                    "record: no call for these tool results to answer: the session was erased "
                    "or expired since this manager served it") from None
            raise InvalidInputError(
                "record: a tool result must answer a call of the assistant message just before "
                "it (in this batch, or the session's newest one), each call once") from None
        return tail[-1].seq if tail else 0

    # ----- state, summaries, erasure -----

    def _state_flow(self, user_id: str, session_id: str) -> Flow[SessionState]:
        _, state = yield from read_state(SessionKey(user_id=user_id, session_id=session_id))
        return state

    def _summary_flow(self, key: SessionKey, *, force: bool = False,
                      catch_up: bool = False) -> Flow[Outcome]:
        """One summary update; ``catch_up``: until the summary is up to date.

        A catch-up that another update superseded (one ``record`` scheduled, committed while
        this one merged) starts again from what that one committed.
        """
        outcome = yield from summary_update(partial(self._summary_job, key), key, force=force,
                                            catch_up=catch_up)
        for _ in range(MAX_COMMIT_ATTEMPTS if catch_up else 0):
            if outcome != "superseded":
                break
            outcome = yield from summary_update(partial(self._summary_job, key), key,
                                                force=force, catch_up=True)
        return outcome

    def _summary_job(self, key: SessionKey, state: SessionState) -> SummaryJob:
        """The summary update of ``key`` as the mode ``state`` names summarises."""
        settings = self._settings(state.mode)
        plan = self._plans[settings.name]
        return SummaryJob(
            key=key, settings=settings, summarizer=self.summarizer, tokenizer=self.tokenizer,
            max_tokens=self._summary_max_tokens,
            threshold_tokens=int(plan.budget.available * settings.summary_threshold_ratio))

    def _erase_session_flow(self, user_id: str, session_id: str) -> Flow[bool]:
        key = SessionKey(user_id=user_id, session_id=session_id)
        self._begin_erase()
        self._forget_cached(user_id, session_id)
        existed = yield from flow.erase_session(key)
        self._forget_cached(user_id, session_id)
        return existed

    def _erase_user_flow(self, user_id: str) -> Flow[int]:
        self._begin_erase()
        self._forget_cached(user_id)
        erased = yield from flow.erase_user(user_id)
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

    def _now_iso(self) -> str:
        return datetime.fromtimestamp(self._clock(), UTC).isoformat(timespec="seconds")


def _switch_at(state: SessionState, seq: int) -> ModeSwitch | None:
    """The mode switch the user message ``seq`` caused, as the state's history keeps it."""
    return next((switch for switch in reversed(state.mode_history) if switch.at_seq == seq),
                None)


def _session_language(current: str | None, text: str, seq: int,
                      recent: Sequence[StoredMessage]) -> str:
    """The session's language once the user said ``text`` (stored at ``seq``).

    The first message sets it; one message in another language (a greeting, a quoted name)
    keeps it; two user messages in a row in another language move it, so a session that opened
    with "你好" and went on in English is not summarised and labelled in Chinese for good.
    """
    said = language_of(text)
    if current is None or said == current:
        return said
    before = next((m for m in reversed(recent)
                   if m.seq < seq and m.message.get("role") == "user"), None)
    if before is None:
        return current
    text = parse_message(before.message, f"session[seq {before.seq}]").content
    return said if text and language_of(text) == said else current


def _summary_text(state: SessionState, language: str) -> str:
    """The running summary as a build shows it: without the facts the facts zone shows.

    The session offers the zone before the summary, so a budget keeps (or cuts) the zone before
    it reaches the summary. The stored summary keeps every fact for the next merge and check.
    """
    if not state.summary:
        return ""
    summary = Summary.from_dict(state.summary)
    return summary.without_facts(facts_shown(state.zones)).render(language)


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


def _unread_run(summary_upto: int, recent: list[StoredMessage], max_read: int
                ) -> tuple[int, int, str] | None:
    """The stored messages between the summary's end and the first one shown, if any.

    Neither the running summary nor the verbatim rounds hold them (summaries off or behind, and
    more messages since than ``max_read_messages``), and no session recall can bring them back:
    the build reports them as one run rather than leaving them out silently.
    """
    if not recent or recent[0].seq <= summary_upto + 1:
        return None
    return (summary_upto + 1, recent[0].seq - 1,
            f"not summarised and older than the newest {max_read} messages read "
            "(max_read_messages): turn summaries or recall on, or raise it, to show them")


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


_WHEN = frozenset(("timestamp",))
"""Fields a retry of the same write makes anew: not part of what the key names."""


def _check_replay(key: SessionKey, seqs: Sequence[int], wanted: Sequence[Mapping[str, Any]],
                  call: str) -> Flow[None]:
    """Refuse a replayed idempotency key whose first write stored other messages.

    A key names one write: a retry sends the same messages again. The same key with another
    message (a new question, another answer) is a caller's mistake that would otherwise be
    answered as if the first message had been sent, so it is an ``InvalidInputError``, as
    payment APIs refuse a reused key with other parameters. Messages the session no longer
    holds (retention) cannot be compared and are not refused.
    """
    if not seqs:
        return
    wrote = set(seqs)
    stored = yield from flow.read(key, after=seqs[0] - 1)
    shown = [m.message for m in stored if m.seq in wrote]
    if len(shown) != len(seqs):
        return
    if len(shown) != len(wanted) or any(
            _without(before, _WHEN) != _without(now, _WHEN)
            for before, now in zip(shown, wanted, strict=False)):
        raise InvalidInputError(
            f"{call}: this idempotency_key was used for other messages in this session "
            f"(seq {seqs[0]}); a retry must send the same messages, a new one a new key")


def _without(message: Mapping[str, Any], names: frozenset[str]) -> Any:
    """``message`` without ``names``, as JSON reads it back (a store keeps JSON)."""
    return json.loads(json.dumps({name: value for name, value in message.items()
                                  if name not in names}, sort_keys=True, default=str))
