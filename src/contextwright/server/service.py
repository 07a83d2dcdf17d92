"""What the service does for one call, over the same objects as the Python API.

``Service`` owns one worker's store, ``ContextManager``, keys file, rate limiter and thread pool.
Every method takes the caller's tenant and scopes the user id with it before the store sees it,
so no call can name another tenant's data. Builds and store calls run on the pool, never on the
event loop; rate checks never wait behind them (``Service._acquire``). Results are plain JSON
data (``prepare``'s already encoded, see there). HTTP lives in ``server.app``.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

from contextwright.builder import ContextBuilder
from contextwright.core.fence import deployment_fence_key
from contextwright.core.final import FinalContext
from contextwright.core.items import TOOL_NAME
from contextwright.core.plan import SHIPPED_PLANS, BuildPlan, plan_from_mapping
from contextwright.core.providers import allowed_tools
from contextwright.core.report import BuildReport, Decision, SourceReport
from contextwright.core.request import Request
from contextwright.errors import ContextwrightError, InvalidInputError, PlanError
from contextwright.manager import ContextManager, PreparedContext
from contextwright.models import model_profile
from contextwright.server.bodies import (
    BUILD_OPTION_FIELDS,
    BuildOptions,
    PrepareBody,
    RecordBody,
    Rendering,
    check_count,
    validated,
)
from contextwright.server.config import ServerConfig
from contextwright.server.problems import (
    RATE,
    SESSION_NOT_FOUND,
    TIMEOUT,
    UNAUTHENTICATED,
    UNAVAILABLE,
    Problem,
    json_bytes,
)
from contextwright.server.ratelimit import (
    LocalRateLimiter,
    Rate,
    RateLimiter,
    RedisRateLimiter,
    retry_after_header,
)
from contextwright.server.tenants import KeysFile, Tenant, scoped_user
from contextwright.session.flow import is_async_store
from contextwright.session.state import load_state
from contextwright.session.store import SessionKey, Store, open_store

T = TypeVar("T")
PROBE = SessionKey(user_id="readyz", session_id="probe")
"""What ``/readyz`` reads; no tenant's user is stored under an id without ``/``."""
MAX_LAST = 1000
"""Most messages ``GET`` on a session returns."""
_BUILDERS = 32
"""Builders (one per tokenizer, model, window and reserve asked for) kept per worker."""


if TYPE_CHECKING:
    from contextwright.observe.metrics import PrometheusMetrics
    from contextwright.observe.recorder import SnapshotRecorder


class Service:
    """One worker's state.

    ``store``, ``manager`` and ``limiter`` may be given (tests, embedding); the service closes
    only what it opened. A manager given brings its store: the service reads sessions where
    the manager writes them (``config.store`` is not opened), and a ``store`` given beside it
    must be that one.
    """

    def __init__(self, config: ServerConfig, *, store: Store | None = None,
                 manager: ContextManager | None = None,
                 limiter: RateLimiter | None = None) -> None:
        # A blank fence secret is refused here, at start, not as a 500 on the first build.
        deployment_fence_key()
        self.config = config
        self.limits = config.limits
        self.keys = KeysFile(config.keys, check_every=config.keys_check_every)
        self._owned: list[Callable[[], None]] = []
        if manager is not None:
            store = _managers_store(config, manager, store)
        self.store = store if store is not None else self._own(open_store(config.store))
        self.metrics: PrometheusMetrics | None = None
        if manager is None:
            manager = ContextManager(self.store, modes=config.modes,
                                     snapshots=self._recorder(config.snapshots))
            self._owned.append(manager.close)
        self.manager = manager
        self.limiter = limiter if limiter is not None else self._own_limiter()
        self.pool = ThreadPoolExecutor(max_workers=config.threads,
                                       thread_name_prefix="cw-serve")
        self._admission = _admission_pool(self.limiter, config.threads)
        # Readiness asks whether the store answers, not whether a build thread is free: a busy
        # worker that reported itself not ready would be taken out of rotation under load.
        self._probe = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cw-probe")
        self._builders: OrderedDict[tuple[Any, ...], ContextBuilder] = OrderedDict()
        self._builders_lock = threading.Lock()  # the build threads share the builders

    def _recorder(self, url: str | None) -> SnapshotRecorder | None:
        """A recorder on the snapshot sink, counting builds for ``/metrics`` (None: no sink)."""
        if url is None:
            return None
        from contextwright.observe.metrics import PrometheusMetrics
        from contextwright.observe.recorder import SnapshotRecorder
        from contextwright.observe.sinks import open_sink

        self.metrics = PrometheusMetrics()
        recorder = SnapshotRecorder(open_sink(url), observers=[self.metrics])
        self.metrics.watch_recorder(lambda: recorder.stats)
        self._owned.append(recorder.close)
        return recorder

    def _own(self, store: Store) -> Store:
        self._owned.append(store.close)
        return store

    def _own_limiter(self) -> RateLimiter:
        url = self.config.rate_store_url()
        limiter: RateLimiter = (RedisRateLimiter.from_url(url) if url is not None
                                else LocalRateLimiter())
        self._owned.append(limiter.close)
        return limiter

    def close(self) -> None:
        """Finish pending work and release what the service opened (newest first)."""
        self.pool.shutdown(wait=True)
        if self._admission is not None:
            self._admission.shutdown(wait=True)
        self._probe.shutdown(wait=True)
        for close in reversed(self._owned):
            close()

    async def run(self, work: Callable[[], T], *, within: float | None = None) -> T:
        """``work()`` on the pool; ``within`` seconds at most (then a 503 problem)."""
        future = asyncio.get_running_loop().run_in_executor(self.pool, work)
        if within is None:
            return await future
        try:
            return await asyncio.wait_for(future, within)
        except TimeoutError:
            raise Problem(TIMEOUT, f"the call did not finish within {within:g} s; retry (a "
                          "message sent again with its idempotency key is stored once)",
                          retry_after="1") from None

    # ----- who is calling -----

    async def admit(self, authorization: str | None) -> Tenant:
        """The tenant of the call's bearer key, once its rate allows the call (401, 429)."""
        tenant = self._authenticate(authorization)
        rate = self._rate(tenant)
        if rate is not None:
            wait = await self._acquire(tenant, rate)
            if wait > 0:
                raise Problem(RATE, f"more than {rate.requests_per_minute} requests per minute",
                              retry_after=retry_after_header(wait))
        return tenant

    async def _acquire(self, tenant: Tenant, rate: Rate) -> float:
        """``limiter.acquire``, never queued behind the builds on ``pool``.

        A refusal must be answered while every build thread is busy: that is when a tenant
        over its rate matters most. The in-process limiter takes a lock for a few dict
        operations and runs on the event loop; any other (Redis: a network round trip) runs on
        a pool of its own.
        """
        if self._admission is None:
            return self.limiter.acquire(tenant.name, rate)
        return await asyncio.get_running_loop().run_in_executor(
            self._admission, self.limiter.acquire, tenant.name, rate)

    def _authenticate(self, authorization: str | None) -> Tenant:
        scheme, _, key = (authorization or "").partition(" ")
        key = key.strip()
        if scheme.lower() != "bearer" or not key:
            raise Problem(UNAUTHENTICATED, "send Authorization: Bearer <api key>")
        tenant = self.keys.tenant_for(key)
        if tenant is None:
            raise Problem(UNAUTHENTICATED, "the API key is not valid")
        return tenant

    def _rate(self, tenant: Tenant) -> Rate | None:
        per_minute = (tenant.requests_per_minute if tenant.requests_per_minute is not None
                      else self.limits.requests_per_minute)
        if not per_minute:
            return None
        return Rate(requests_per_minute=per_minute, burst=self.limits.burst_for(per_minute))

    def ready(self) -> None:
        """Raise ``StoreUnavailable`` unless the store and the rate limiter answer."""
        self.store.count(PROBE)
        self.limiter.ping()

    async def probe_ready(self, within: float) -> None:
        """``ready`` on the probe's own thread, never behind builds (a 503 after ``within``)."""
        future = asyncio.get_running_loop().run_in_executor(self._probe, self.ready)
        try:
            await asyncio.wait_for(future, within)
        except TimeoutError:
            raise Problem(UNAVAILABLE, f"the store did not answer within {within:g} s",
                          retry_after="1") from None

    # ----- sessions -----

    def prepare(self, tenant: Tenant, user_id: str, session_id: str, data: Any,
                idempotency_key: str | None) -> bytes:
        """``ContextManager.prepare`` for the tenant's session, rendered as asked (as JSON).

        The answer is encoded here, not by the response: a failure to encode it comes after
        the message was stored, and must say so like every other failure after that point.
        """
        body = validated(PrepareBody, data)
        body.checked_rendering()
        check_count("tools", body.tools, self.limits.max_messages)
        check_tool_names(body.tools)
        check_count("documents", body.documents, self.limits.max_messages)
        check_count("images", body.images, self.limits.max_messages)
        target = body.target or ("text" if body.format == "text" else "chat")
        prepared = self.manager.prepare(
            scoped_user(tenant.name, user_id), session_id, body.text, images=body.images,
            tools=body.tools,
            documents=body.documents, env=body.env, system=body.system, target=target,
            idempotency_key=_one_key(body.idempotency_key, idempotency_key))
        try:
            return encoded(prepared_json(prepared, body))
        except ContextwrightError as error:
            # The rendering is refused after the message was stored (a ``tool_choice`` with no
            # tools, a text rendering over the budget, an answer JSON cannot carry): say so, as
            # ``prepare``'s own errors do, so a corrected call continues with ``text=None``
            # instead of storing it twice.
            if body.text is not None and error.stored_seq is None:
                error.stored_seq = prepared.user_seq
                error.add_note(f"the user message is stored as seq {prepared.user_seq}: "
                               "prepare again with text=None, do not resend it")
            raise

    def record(self, tenant: Tenant, user_id: str, session_id: str, data: Any,
               idempotency_key: str | None) -> dict[str, Any]:
        """``ContextManager.record`` for the tenant's session: the seqs stored."""
        body = validated(RecordBody, data)
        check_count("assistant + tool_results + messages",
                    [*_assistant_messages(body.assistant), *body.tool_results, *body.messages],
                    self.limits.max_messages)
        user = scoped_user(tenant.name, user_id)
        answered = (None if body.epoch is None else _Answered(
            key=SessionKey(user_id=user, session_id=session_id), epoch=body.epoch))
        seqs = self.manager.record(
            user, session_id, assistant=body.assistant,
            tool_results=body.tool_results, messages=body.messages,
            idempotency_key=_one_key(body.idempotency_key, idempotency_key), context=answered)
        return {"seqs": seqs}

    def session(self, tenant: Tenant, user_id: str, session_id: str,
                last: int) -> dict[str, Any]:
        """The session's state and newest ``last`` messages (404 when it does not exist)."""
        if not 0 <= last <= MAX_LAST:
            raise InvalidInputError(f"last must be between 0 and {MAX_LAST}")
        key = SessionKey(user_id=scoped_user(tenant.name, user_id), session_id=session_id)
        messages = self.store.read(key, last=last) if last else []
        # Three store reads, with writes possibly in between: the count is the newest message
        # returned when there is one, so a caller reading on from seq message_count + 1 neither
        # skips nor repeats a message.
        count = messages[-1].seq if messages else self.store.count(key)
        record, state = load_state(self.store, key)
        if count == 0 and record is None:
            raise Problem(SESSION_NOT_FOUND, "this tenant has no such session")
        return {"message_count": count, "state": state.to_dict(),
                "messages": [{"seq": m.seq, "created_at": m.created_at, "message": m.message}
                             for m in messages]}

    def erase_session(self, tenant: Tenant, user_id: str, session_id: str) -> None:
        """Erase the tenant's session (404 when it did not exist)."""
        if not self.manager.erase_session(scoped_user(tenant.name, user_id), session_id):
            raise Problem(SESSION_NOT_FOUND, "this tenant has no such session")

    def erase_user(self, tenant: Tenant, user_id: str) -> dict[str, Any]:
        """Erase every session of the tenant's user; how many there were."""
        return {"erased": self.manager.erase_user(scoped_user(tenant.name, user_id))}

    # ----- stateless builds -----

    def build(self, data: Any) -> dict[str, Any]:
        """``ContextBuilder.build`` of a request body (the request schema plus options)."""
        if not isinstance(data, dict):
            raise InvalidInputError("the body must be a JSON object")
        options = validated(BuildOptions, {k: v for k, v in data.items()
                                           if k in BUILD_OPTION_FIELDS})
        options.checked_rendering()
        fields = {k: v for k, v in data.items() if k not in BUILD_OPTION_FIELDS}
        # History and turn are one conversation: the limit holds for both together, as it does
        # for what ``record`` appends; every other list of the request has it on its own.
        check_count("history + turn", [*_listed(fields, "history"), *_listed(fields, "turn")],
                    self.limits.max_messages)
        for name in ("tools", "documents", "images", "examples", "notes"):
            check_count(name, _listed(fields, name), self.limits.max_messages)
        check_tool_names(_listed(fields, "tools"))
        check_env_values(fields)
        request = Request.from_dict(fields)
        builder = self._builder(options)
        plan = builder.effective_plan(_plan(options.plan, request))
        if options.budget is not None:
            plan = plan.with_budget(available_override=options.budget)
        context = builder.build(plan, request,
                                target="text" if options.format == "text" else "chat")
        return {**rendered(context, options), "total_tokens": context.total_tokens,
                "report": report_json(context.report)}

    def _builder(self, options: BuildOptions) -> ContextBuilder:
        """The builder for ``options``' tokenizer, model, window and reserve.

        The least recently used goes when more than ``_BUILDERS`` are kept, so the builder
        most calls use keeps what it remembers while rare configurations come and go.
        """
        key = (options.tokenizer, options.model, options.window, options.reserved_output)
        with self._builders_lock:
            builder = self._builders.get(key)
            if builder is not None:
                self._builders.move_to_end(key)
                return builder
        if options.model is not None:
            _check_model(options.model)
        made = ContextBuilder(tokenizer=options.tokenizer, model=options.model,
                              window=options.window, reserved_output=options.reserved_output)
        with self._builders_lock:  # another thread may have made one meanwhile: one wins
            builder = self._builders.setdefault(key, made)
            self._builders.move_to_end(key)
            while len(self._builders) > _BUILDERS:
                self._builders.popitem(last=False)
        return builder


def _admission_pool(limiter: RateLimiter, threads: int) -> ThreadPoolExecutor | None:
    """The threads rate checks run on, apart from the builds' (None: on the event loop).

    Only ``LocalRateLimiter`` is known to answer without blocking; a limiter of another kind
    may wait on the network, which the event loop must not.
    """
    if type(limiter) is LocalRateLimiter:
        return None
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="cw-admit")


def _managers_store(config: ServerConfig, manager: ContextManager,
                    store: Store | None) -> Store:
    """The store a given manager writes to, which the service must read sessions from.

    The config's ``modes`` and ``snapshots`` are refused beside it rather than ignored.
    Reading another (``config.store``) would answer 404 for every session the manager
    stored, and ``/readyz`` would probe a store no call uses.
    """
    if config.modes is not None or config.snapshots is not None:
        # Both configure the manager the service makes; one given was made without them.
        raise InvalidInputError("modes and snapshots configure the manager the service makes: "
                                "with a manager of your own, give them to ContextManager")
    if store is not None and store is not manager.store:
        raise InvalidInputError("store and manager.store differ: the service would read "
                                "sessions from another store than the manager writes them to")
    if is_async_store(manager.store):
        raise InvalidInputError("the manager's store must be a blocking Store, not an "
                                "AsyncStore: the service calls the manager from its threads")
    return manager.store  # type: ignore[return-value]  # not an AsyncStore, so a Store


@dataclass(frozen=True, slots=True)
class _Answered:
    """The prepared context a record answers, as the client names it: its session and epoch."""

    key: SessionKey
    epoch: str


def _assistant_messages(assistant: str | dict[str, Any] | list[dict[str, Any]] | None
                        ) -> list[Any]:
    """The messages ``record``'s ``assistant`` stands for: a list is one message per entry."""
    if assistant is None:
        return []
    return assistant if isinstance(assistant, list) else [assistant]


def _listed(fields: dict[str, Any], name: str) -> list[Any]:
    """A list field of a build request, for counting.

    A field of another type counts as ``[]``: the request schema refuses it later, with its
    own message.
    """
    value = fields.get(name, [])
    return value if isinstance(value, list) else []


def _one_key(in_body: str | None, in_header: str | None) -> str | None:
    if in_body is not None and in_header is not None and in_body != in_header:
        raise InvalidInputError("the Idempotency-Key header and the body's idempotency_key "
                                "differ")
    return in_body if in_body is not None else in_header


def check_tool_names(tools: Sequence[Any]) -> None:
    """``InvalidInputError`` for a tool name the providers refuse, or one given twice.

    The library checks the same before a build, and names the tool; a problem never echoes
    the body, so these messages give the tool's index only.
    """
    first: dict[str, int] = {}
    for index, schema in enumerate(tools):
        function = schema.get("function") if isinstance(schema, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            continue  # the library refuses a tool without a name, naming nothing
        if not TOOL_NAME.fullmatch(name):
            raise InvalidInputError(f"tools[{index}]: the tool name must be 1 to 64 ASCII "
                                    "letters, digits, '_' or '-' (the providers' rule)")
        earlier = first.setdefault(name, index)
        if earlier != index:
            raise InvalidInputError(f"tools[{index}] repeats the name of tools[{earlier}]")


def check_env_values(fields: Mapping[str, Any]) -> None:
    """``InvalidInputError`` for an ``env`` whose values are not all text.

    ``Request.from_dict`` refuses the same and names the ``env`` key, which is the caller's
    data; a problem never echoes the body, so this message shows it as ``<key>``. (A field the
    schema does not define is named: that tells a client which of its fields is misspelt.)
    """
    env = fields.get("env")
    if isinstance(env, dict) and not all(isinstance(value, str) for value in env.values()):
        raise InvalidInputError("invalid request: env.<key>: Input should be a valid string")


def _check_model(name: str) -> None:
    """``PlanError`` for a model the service has no profile of, without echoing its name."""
    try:
        model_profile(name)
    except PlanError:
        raise PlanError("model names no model this service knows: give a registered model, "
                        "or leave it out and send window and tokenizer") from None


def _plan(plan: str | dict[str, Any] | None, request: Request) -> BuildPlan:
    # Plan files are the server's to read, never a caller's: by name or inline only.
    if plan is None:
        from contextwright.plans import select_plan

        return select_plan(request)
    if isinstance(plan, str):
        if plan not in SHIPPED_PLANS:
            raise PlanError(f"plan names no shipped plan; choose one of {SHIPPED_PLANS} or "
                            "send the plan inline")
        return BuildPlan.named(plan)
    return plan_from_mapping(plan, origin="inline plan")


def rendered(context: FinalContext | PreparedContext, rendering: Rendering) -> dict[str, Any]:
    """The rendering asked for: ``{"format", "request"}`` or ``{"format", "text"}``."""
    if rendering.format == "text":
        return {"format": "text", "text": context.to_text()}
    final = context.context if isinstance(context, PreparedContext) else context
    body = context.to_request(rendering.format, model=rendering.model,
                              max_tokens=rendering.max_tokens,
                              tool_choice=checked_tool_choice(rendering.tool_choice,
                                                              final.tool_schemas),
                              parallel_tool_calls=rendering.parallel_tool_calls)
    return {"format": rendering.format, "request": body}


def checked_tool_choice(choice: str | dict[str, Any] | None,
                        schemas: Sequence[Mapping[str, Any]]) -> str | dict[str, Any] | None:
    """The caller's ``tool_choice``, checked against the tools the built context offers.

    Refused here, before rendering, with messages that name neither the choice nor the tool:
    a problem never echoes the body. A named tool goes on as its name alone, which is all any
    format renders of it.
    """
    if choice is None or choice in ("auto", "none"):
        return choice  # with or without tools: without, they are simply not sent
    offered = {schema.get("function", {}).get("name") for schema in schemas}
    allowed = allowed_tools(choice)
    if allowed is not None:  # OpenAI's allowed_tools: rendered per format as given
        if not offered or not set(allowed.names) <= offered:
            raise InvalidInputError("tool_choice allows a tool that is not among the request's "
                                    "tools")
        return choice
    name = None if choice == "required" else _named_tool(choice)
    if not offered:
        raise InvalidInputError("tool_choice required or naming a tool needs tools, and this "
                                "request has none")
    if name is not None and name not in offered:
        raise InvalidInputError("tool_choice names a tool that is not among the request's tools")
    return choice if name is None else {"type": "function", "function": {"name": name}}


def _named_tool(choice: str | dict[str, Any]) -> str:
    """The tool a ``tool_choice`` names: a bare name, OpenAI's or Anthropic's object form."""
    if isinstance(choice, str):
        return choice
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else choice.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInputError("tool_choice must be auto, none, required or name a tool "
                                "({\"type\": \"function\", \"function\": {\"name\": ...}})")
    return name


def encoded(answer: dict[str, Any]) -> bytes:
    """``answer`` as the JSON the service sends; ``InvalidInputError`` if JSON cannot carry it.

    Bodies with NaN or an infinity are refused when read, so this holds only for values that
    reached the answer another way.
    """
    try:
        return json_bytes(answer)
    except ValueError:
        raise InvalidInputError("the answer holds a number JSON cannot carry (NaN or an "
                                "infinity)") from None


def prepared_json(prepared: PreparedContext, body: PrepareBody) -> dict[str, Any]:
    """A ``PreparedContext`` as the service returns it (no store key: it is tenant-scoped)."""
    return {
        **rendered(prepared, body),
        "mode": prepared.mode,
        "user_seq": prepared.user_seq,
        "epoch": prepared.epoch,
        "route": asdict(prepared.route) if prepared.route is not None else None,
        "switch": asdict(prepared.switch) if prepared.switch is not None else None,
        "total_tokens": prepared.context.total_tokens,
        "report": report_json(prepared.report),
    }


def report_json(report: BuildReport) -> dict[str, Any]:
    """``report.to_dict()``, made field by field.

    ``dataclasses.asdict`` deep-copies every value of every decision, the largest cost of
    answering a call; the fields here are all scalars (and a tuple of strings), so a shallow
    copy is the same data.
    """
    return {
        "plan": report.plan, "tokenizer": report.tokenizer,
        "exact_tokens": report.exact_tokens, "available": report.available,
        "total_tokens": report.total_tokens,
        "sources": [{name: getattr(row, name) for name in _SOURCE_FIELDS}
                    for row in report.sources],
        "decisions": [{name: getattr(decision, name) for name in _DECISION_FIELDS}
                      for decision in report.decisions],
        "warnings": list(report.warnings),
        "cache": report.cache.to_dict() if report.cache is not None else None,
    }


_SOURCE_FIELDS = tuple(f.name for f in fields(SourceReport))
_DECISION_FIELDS = tuple(f.name for f in fields(Decision))
