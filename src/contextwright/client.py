"""``Client`` and ``AsyncClient``: the HTTP service with the method names of ``ContextManager``.

Moving an agent from in-process to the service is one line: ``ContextManager(store)`` becomes
``Client(url, api_key=key)``; ``prepare``, ``record``, ``state``, ``erase_session`` and
``erase_user`` take the same arguments (``prepare`` also the rendering wanted: ``format``,
``model``, ``max_tokens``, ...). Both clients share one sans-I/O core (``_Call``: what to send,
how to read the answer) and differ only in how they send. Writes carry an idempotency key (a
fresh one unless given), so a retry after a timeout, a lost connection or a 503 stores nothing
twice; retries back off and honour ``Retry-After``. When they give up, the error carries the key
as ``idempotency_key``, for the caller's own retry. Problems come back as the library's errors
(``BudgetError`` with its report, ``ConflictError``, ``InvalidInputError``...). Needs ``httpx``
(the ``client`` or ``server`` extra).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from numbers import Integral, Real
from types import TracebackType
from typing import Any, Literal

try:
    import httpx
except ImportError as missing:  # pragma: no cover - depends on the installed extras
    raise ImportError("contextwright.client needs httpx: pip install 'contextwright[client]'"
                      ) from missing

from contextwright.checks import seconds, whole_number
from contextwright.convert import chat_messages, log_left_out
from contextwright.core.cache import cache_report_from_dict
from contextwright.core.images import image_from_part
from contextwright.core.report import BuildReport, Decision, SourceReport
from contextwright.core.request import Request
from contextwright.errors import (
    AccessDenied,
    BudgetError,
    ClassifierError,
    ConflictError,
    ContextwrightError,
    CorruptRecordError,
    InvalidInputError,
    KeyConflictError,
    ManagerClosed,
    OutcomeUnknown,
    PlanError,
    SessionGone,
    StoreUnavailable,
    TokenizerError,
    ValidationError,
)
from contextwright.modes.router import RouteDecision
from contextwright.session.state import ModeSwitch, SessionState

__all__ = ["AsyncClient", "Client", "RateLimited", "RemoteContext", "ServiceError",
           "SessionView", "TokenizerUnavailable"]

Format = Literal["openai", "openai-responses", "anthropic", "text"]
logger = logging.getLogger("contextwright.client")


class ServiceError(ContextwrightError):
    """The service refused a call for a reason the library has no error for."""

    def __init__(self, message: str, *, status: int, problem: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.status = status
        self.problem = problem


class RateLimited(ServiceError):
    """429: the tenant's request rate is spent; ``retry_after`` says for how many seconds."""

    def __init__(self, message: str, *, status: int, problem: Mapping[str, Any],
                 retry_after: float) -> None:
        super().__init__(message, status=status, problem=problem)
        self.retry_after = retry_after


class TokenizerUnavailable(ServiceError, TokenizerError):
    """501: the tokenizer asked for needs a package the service does not have installed.

    The service's installation is at fault, not the call: retrying changes nothing until its
    operator installs ``package`` (the module that could not be imported, when the service
    named it); another tokenizer may be asked for meanwhile. A ``TokenizerError``, as the same
    failure is in process.
    """

    def __init__(self, message: str, *, status: int, problem: Mapping[str, Any],
                 package: str | None) -> None:
        super().__init__(message, status=status, problem=problem)
        self.package = package


_LIBRARY_ERRORS: dict[str, type[ContextwrightError]] = {cls.__name__: cls for cls in (
    AccessDenied, ClassifierError, ConflictError, CorruptRecordError, InvalidInputError,
    KeyConflictError, ManagerClosed, OutcomeUnknown, PlanError, SessionGone, StoreUnavailable,
    TokenizerError, ValidationError)}
_RETRY_STATUSES = frozenset({429, 502, 503, 504})
CALL_SETTINGS = ("model", "max_tokens", "tool_choice", "parallel_tool_calls")
"""The request settings ``prepare`` and ``build`` send; the service renders with them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteContext:
    """A context the service built: its rendering, the report and (for ``prepare``) the route.

    The rendering is the one asked for (``format`` and the request settings of ``prepare`` or
    ``build``); ``to_request``, ``to_messages`` and ``to_text`` return it.
    """

    format: Format
    """The rendering the service returned."""
    request: Mapping[str, Any] | None
    """Keyword arguments for the provider's SDK call (``None`` for the text format)."""
    text: str | None
    """The plain prompt (only for the text format)."""
    total_tokens: int
    """Tokens of the built context."""
    report: BuildReport
    """Every decision of the build."""
    mode: str | None = None
    """The mode it was built in (sessions only)."""
    user_seq: int | None = None
    """Sequence number of the user message it answers (sessions only)."""
    route: RouteDecision | None = None
    """The router's decision for this message (None when continuing a turn)."""
    switch: ModeSwitch | None = None
    """The hand-off this message caused, if any."""
    epoch: str | None = None
    """The incarnation of the session the message is in (sessions only): ``record(...,
    context=this)`` sends it back, so an answer to a session erased meanwhile is refused."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """The request settings the call gave (``model``, ``max_tokens``, ``tool_choice``,
    ``parallel_tool_calls``): the service rendered with them."""

    def to_request(self, fmt: Format | None = None, **settings: Any) -> dict[str, Any]:
        """The provider request; ``fmt`` and ``settings`` must be the ones asked for.

        Code written for ``FinalContext.to_request`` keeps working when the settings it passes
        here are the ones it gave the call (``None`` leaves one out); another value cannot be
        honoured, since the service already rendered the request, and is refused.
        """
        self._check(fmt, settings)
        if self.request is None:
            raise ValueError("this context was rendered as text: use to_text()")
        return dict(self.request)

    def to_messages(self, fmt: Format | None = None, *,
                    reasoning: bool = False) -> list[dict[str, Any]]:
        """The messages of the provider request (without Anthropic's and Responses' system).

        Takes ``PreparedContext.to_messages``'s arguments. ``reasoning=True`` (the open tool
        loop's ``thinking_blocks`` in OpenAI chat dicts) is refused with a ``ValueError``: the
        service renders the provider's request, which never carries them.
        """
        if reasoning:
            raise ValueError("to_messages(reasoning=True) cannot be honoured: the service "
                             "renders the provider request, which carries no thinking_blocks; "
                             "build in process (ContextManager) for them")
        body = self.to_request(fmt)
        return list(body["input"] if self.format == "openai-responses" else body["messages"])

    def to_text(self) -> str:
        """The plain prompt (ask for ``format="text"``)."""
        if self.text is None:
            raise ValueError(f"this context was rendered for {self.format}: ask for "
                             "format='text'")
        return self.text

    def _check(self, fmt: Format | None, settings: Mapping[str, Any]) -> None:
        if fmt is not None and fmt != self.format:
            raise ValueError(f"the service rendered {self.format}; pass format={fmt!r} to the "
                             "call to get that rendering")
        differ = sorted(name for name, value in settings.items()
                        if value is not None and (name not in CALL_SETTINGS
                                                  or self.settings.get(name) != value))
        if differ:
            raise ValueError(f"to_request cannot change {', '.join(differ)}: request settings "
                             f"({', '.join(CALL_SETTINGS)}) are given to the call, which renders "
                             "on the service")


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredEntry:
    """One message of a session's log, as the service returns it."""

    seq: int
    """1-based position in the session."""
    message: Mapping[str, Any]
    """The stored message."""
    created_at: float
    """Unix seconds when it was appended."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionView:
    """What ``GET`` on a session returns."""

    state: SessionState
    """Mode, mode history, summary, zones."""
    message_count: int
    """Messages in the log."""
    messages: tuple[StoredEntry, ...] = ()
    """The newest messages asked for, oldest first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Call:
    """One call: what to send, and whether a 404 ``session-not-found`` is an answer."""

    method: str
    path: str
    body: Mapping[str, Any] | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    missing_ok: bool = False


def _session_path(user_id: str, session_id: str) -> str:
    return f"/v1/sessions/{_segment(user_id)}/{_segment(session_id)}"


def _segment(value: str) -> str:
    if not isinstance(value, str) or not value or "/" in value:
        raise InvalidInputError("ids must be non-empty strings without '/' to be named in a URL")
    from urllib.parse import quote

    try:
        encoded = quote(value, safe="")
    except UnicodeEncodeError:  # as the stores refuse it in process: UTF-8 has no such text
        raise InvalidInputError("ids must be valid Unicode text: this one contains a lone "
                                "surrogate") from None
    # "." and ".." are dot segments, which httpx removes from a URL as RFC 3986 says: the call
    # would go to another path. Percent-encoded they are plain data the service decodes back.
    if encoded in (".", ".."):
        return encoded.replace(".", "%2E")
    return encoded


_JSON_HEADERS = {"Content-Type": "application/json"}


def _body_bytes(body: Mapping[str, Any] | None) -> bytes | None:
    """A call's body as the JSON sent; ``InvalidInputError`` (nothing sent) if JSON cannot carry it.

    UTF-8, as the service counts ``--max-body-bytes`` (escaped, CJK text would take twice the
    bytes). Text with a lone surrogate, which UTF-8 has no bytes for, goes escaped: the
    service refuses it naming the field, as ``ContextManager`` does. Numbers of any real type
    (numpy's, ``Fraction``), which the library takes in process (a document's ``score``), go
    as JSON numbers.
    """
    if body is None:
        return None
    try:
        return _json_text(body, ascii_only=False).encode("utf-8")
    except UnicodeEncodeError:
        return _json_text(body, ascii_only=True).encode("ascii")


def _json_text(body: Mapping[str, Any], *, ascii_only: bool) -> str:
    try:
        return json.dumps(body, ensure_ascii=ascii_only, allow_nan=False, separators=(",", ":"),
                          default=_json_number)
    except (TypeError, ValueError) as exc:  # ValueError: NaN, an infinity, a cycle
        raise InvalidInputError(f"the call's arguments are not JSON data ({exc}); nothing "
                                "was sent") from None


def _json_number(value: object) -> int | float:
    """A number JSON's encoder does not know (numpy's, ``Fraction``) as an int or float."""
    if isinstance(value, Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, Real):
        return float(value)
    raise TypeError(f"a {type(value).__name__} is not JSON data")


def _plain(value: object) -> Any:
    """Documents, tools and the like as JSON data (dataclasses → dicts)."""
    if is_dataclass(value) and not isinstance(value, type):
        return _json_data(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def _json_data(value: object) -> Any:
    """``value`` with every dataclass and ``Mapping`` in it as a dict, every sequence a list.

    Field by field rather than ``dataclasses.asdict``, which deep-copies what it meets and so
    fails on a read-only mapping (``MappingProxyType``) that a ``Request`` may hold as ``env``.
    """
    if is_dataclass(value) and not isinstance(value, type):
        return {item.name: _json_data(getattr(value, item.name)) for item in fields(value)}
    if isinstance(value, Mapping):
        return {key: _json_data(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_data(item) for item in value]
    return value


def _messages(value: object, where: str, left_out: dict[str, int]) -> list[dict[str, Any]]:
    """SDK objects (OpenAI, Anthropic, Responses) as chat dicts, as ``record`` reads them.

    ``left_out`` counts, by type, the parts no chat message carries (a hosted tool's items).
    """
    return chat_messages(value, where, left_out=left_out)


def _assistant(value: object, left_out: dict[str, int]) -> Any:
    if value is None or isinstance(value, str | Mapping):
        return _plain(value)
    converted = _messages(value, "assistant", left_out)
    return converted[0] if len(converted) == 1 else converted


def _tool_results(results: Sequence[object], left_out: dict[str, int]) -> list[dict[str, Any]]:
    if isinstance(results, str | bytes | Mapping):
        raise InvalidInputError("tool_results must be a list of message objects")
    out: list[dict[str, Any]] = []
    for index, result in enumerate(results):
        out += [dict(result)] if isinstance(result, Mapping) else _messages(
            result, f"tool_results[{index}]", left_out)
    return out


def _other_messages(messages: Sequence[object], left_out: dict[str, int]) -> list[Any]:
    """``record``'s ``messages``: dicts as given, SDK objects as every chat message they make.

    One object may make no message (an Anthropic answer holding only a server tool's blocks)
    or several, as ``ContextManager.record`` reads it.
    """
    out: list[Any] = []
    for index, message in enumerate(messages):
        out += [_plain(message)] if isinstance(message, Mapping) else _messages(
            message, f"messages[{index}]", left_out)
    return out


def _image_parts(images: Sequence[object]) -> list[dict[str, Any]]:
    """Images as the OpenAI ``image_url`` parts the service reads (checked here first)."""
    return [image_from_part(image, f"images[{index}]").to_chat_part()
            for index, image in enumerate(images)]


def _prepare_call(user_id: str, session_id: str, text: str | None,
                  options: Mapping[str, Any]) -> _Call:
    body = {key: _plain(value) for key, value in options.items() if value is not None}
    for name in ("tools", "documents"):
        body[name] = [_plain(item) for item in options.get(name) or ()]
    if text is not None:
        body["text"] = text
        body.setdefault("idempotency_key", uuid.uuid4().hex)
    return _Call(method="POST", path=_session_path(user_id, session_id) + "/prepare", body=body)


def _record_call(user_id: str, session_id: str, assistant: object,
                 tool_results: Sequence[object], messages: Sequence[object],
                 idempotency_key: str | None, context: RemoteContext | None) -> _Call:
    left_out: dict[str, int] = {}
    body = {"assistant": _assistant(assistant, left_out),
            "tool_results": _tool_results(tool_results, left_out),
            "messages": _other_messages(messages, left_out),
            "idempotency_key": idempotency_key or uuid.uuid4().hex}
    if left_out:
        log_left_out(logger, user_id, session_id, left_out)
    if context is not None:
        if context.epoch is None:
            raise InvalidInputError("record: context is no prepare's answer (it has no epoch)")
        body["epoch"] = context.epoch
    return _Call(method="POST", path=_session_path(user_id, session_id) + "/record", body=body)


def _build_call(request: object, options: Mapping[str, Any]) -> _Call:
    images = _image_parts(request.images) if isinstance(request, Request) else None
    fields = _plain(request)
    if not isinstance(fields, dict):
        raise InvalidInputError("request must be a Request or a dict of the request schema")
    fields = {key: value for key, value in fields.items() if value not in (None, (), [], {})}
    if "documents" in fields:
        fields["documents"] = [
            {k: v for k, v in _plain(doc).items() if v is not None} for doc in fields["documents"]]
    for name in ("history", "turn", "tools", "examples", "notes", "images"):
        if name in fields:
            fields[name] = [_plain(item) for item in fields[name]]
    if images:
        fields["images"] = images
    body = {**fields, **{key: _plain(value) for key, value in options.items()
                         if value is not None}}
    return _Call(method="POST", path="/v1/build", body=body)


def _report(data: Mapping[str, Any]) -> BuildReport:
    return BuildReport(
        plan=data["plan"], tokenizer=data["tokenizer"], exact_tokens=data["exact_tokens"],
        available=data["available"], total_tokens=data["total_tokens"],
        sources=tuple(SourceReport(**row) for row in data["sources"]),
        decisions=tuple(Decision(**row) for row in data["decisions"]),
        warnings=tuple(data.get("warnings", ())),
        cache=cache_report_from_dict(data["cache"]) if data.get("cache") else None)


def _context(data: Mapping[str, Any], options: Mapping[str, Any]) -> RemoteContext:
    """The service's answer, with the request settings of the call (``options``) it used."""
    route, switch = data.get("route"), data.get("switch")
    settings = {name: _plain(options[name]) for name in CALL_SETTINGS
                if options.get(name) is not None}
    return RemoteContext(
        settings=settings,
        format=data["format"], request=data.get("request"), text=data.get("text"),
        total_tokens=data["total_tokens"], report=_report(data["report"]),
        mode=data.get("mode"), user_seq=data.get("user_seq"),
        route=RouteDecision(**route) if route else None,
        switch=ModeSwitch(**switch) if switch else None, epoch=data.get("epoch"))


def _view(data: Mapping[str, Any]) -> SessionView:
    return SessionView(
        state=SessionState.from_dict(data["state"]), message_count=data["message_count"],
        messages=tuple(StoredEntry(seq=m["seq"], message=m["message"],
                                   created_at=m["created_at"]) for m in data["messages"]))


def _problem_error(response: httpx.Response) -> ContextwrightError:
    """The error a problem response stands for."""
    try:
        problem = response.json()
    except ValueError:
        problem = {}
    if not isinstance(problem, dict):
        problem = {}
    detail = str(problem.get("detail") or problem.get("title") or f"HTTP {response.status_code}")
    name = problem.get("error")
    error: ContextwrightError
    if response.status_code == 429:
        error = RateLimited(detail, status=429, problem=problem,
                            retry_after=_retry_after(response) or 1.0)
    elif _is_kind(problem, "tokenizer-unavailable"):
        package = problem.get("package")
        error = TokenizerUnavailable(detail, status=response.status_code, problem=problem,
                                     package=package if isinstance(package, str) else None)
    elif name == "BudgetError" and isinstance(problem.get("report"), dict):
        error = BudgetError(detail, _report(problem["report"]))
    elif isinstance(name, str) and name in _LIBRARY_ERRORS:
        error = _LIBRARY_ERRORS[name](detail)
    elif response.status_code == 401:
        error = AccessDenied(detail)
    else:
        error = ServiceError(detail, status=response.status_code, problem=problem)
    if isinstance(problem.get("stored_seq"), int):
        error.stored_seq = problem["stored_seq"]
    return error


def _is_kind(problem: Mapping[str, Any], slug: str) -> bool:
    """Whether ``problem``'s ``type`` is the service's problem ``slug``."""
    kind = problem.get("type", "")
    return isinstance(kind, str) and kind.endswith(":" + slug)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "")
    return float(value) if value.isdigit() else None


def _missing(call: _Call, response: httpx.Response) -> bool:
    if not call.missing_ok or response.status_code != 404:
        return False
    try:
        problem = response.json()
    except ValueError:
        return False
    return isinstance(problem, dict) and _is_kind(problem, "session-not-found")


class _Base:
    """Settings and the retry policy both clients share."""

    def __init__(self, base_url: str, *, api_key: str, timeout: float, retries: int,
                 backoff: float, max_retry_wait: float) -> None:
        _check_retry_settings(retries=retries, backoff=backoff, max_retry_wait=max_retry_wait)
        _check_api_key(api_key)
        self.base_url = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json"}
        self._timeout = timeout
        self._retries = retries
        self._backoff = backoff
        self._max_retry_wait = max_retry_wait

    def _wait(self, attempt: int, response: httpx.Response | None) -> float | None:
        """Seconds to wait before retry ``attempt`` (None: do not retry)."""
        if attempt > self._retries:
            return None
        if response is not None:
            if response.status_code not in _RETRY_STATUSES:
                return None
            told = _retry_after(response)
            if told is not None:
                return told if told <= self._max_retry_wait else None
        return min(self._backoff * 2.0 ** (attempt - 1), self._max_retry_wait)

    def _answer(self, call: _Call, response: httpx.Response) -> Any:
        if _missing(call, response):
            return None
        if response.status_code >= 400:
            raise _with_key(_problem_error(response), call)
        if not response.content and response.status_code == 204:
            return {}
        return _service_answer(response, call)


def _service_answer(response: httpx.Response, call: _Call) -> dict[str, Any]:
    """A success's JSON object; ``ServiceError`` when something else answered.

    A redirect (an ``http://`` URL of a service served over https, say) is not followed: a
    write must not be sent twice to places the caller did not name. A body that is not a JSON
    object comes from something other than the service (a web page on that address).
    """
    status = response.status_code
    if 300 <= status < 400:
        where = response.headers.get("location", "another address")
        raise _with_key(ServiceError(f"the service answered with a redirect (HTTP {status}) to "
                                     f"{where}: give that as base_url", status=status,
                                     problem={}), call)
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise _with_key(ServiceError(f"the answer (HTTP {status}) is not the service's JSON: "
                                     "is base_url a contextwright service?", status=status,
                                     problem={}), call)
    return data


def _check_api_key(api_key: str) -> None:
    """``InvalidInputError`` for a key no ``Authorization`` header can carry as it is.

    HTTP sends header values as ASCII: a key with another character (a typographic quote
    pasted with it) failed with a ``UnicodeEncodeError``, and a line break with a protocol
    error after the call was counted as sent. The message never shows the key.
    """
    if not isinstance(api_key, str) or not api_key or api_key != api_key.strip() or not (
            api_key.isascii() and api_key.isprintable()):
        raise InvalidInputError("api_key must be non-empty printable ASCII without spaces "
                                "around it (as contextwright api-key makes them)")


def _check_retry_settings(*, retries: int, backoff: float, max_retry_wait: float) -> None:
    """``InvalidInputError`` for settings the retries could not run with.

    Checked when the client is made: a negative wait would otherwise fail only at the first
    retry, in the middle of a call, with an error that names no setting.
    """
    whole_number(retries, "retries")
    for name, value in (("backoff", backoff), ("max_retry_wait", max_retry_wait)):
        seconds(value, name, zero=True)


def _log_retry(call: _Call, why: str, wait: float) -> None:
    logger.info("retrying %s %s in %.2f s after %s", call.method, call.path.split("/")[2],
                wait, why, extra={"contextwright": {"event": "client_retry", "why": why}})


# Failures after which the request was never sent: nothing can have been stored.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def _transport_error(error: httpx.TransportError, call: _Call,
                     maybe_sent: bool) -> ContextwrightError:
    """The error a call ends in when its last attempt got no answer.

    ``maybe_sent``: some attempt may have reached the service, so a write may have landed.
    Only a write's outcome is unknown: a build, a read or a ``prepare`` without a message
    stores nothing, and has no idempotency key to retry with.
    """
    name = type(error).__name__
    if not maybe_sent:
        return StoreUnavailable(f"the service cannot be reached ({name}); nothing was sent")
    if _write_key(call) is not None:
        return OutcomeUnknown(f"the service did not answer ({name}); retry with the same "
                              "idempotency key")
    if call.method == "DELETE":
        return OutcomeUnknown(f"the service did not answer ({name}); the erase may have been "
                              "done: erasing again is safe")
    return StoreUnavailable(f"the service did not answer ({name}); the call stores no message: "
                            "send it again")


def _write_key(call: _Call) -> str | None:
    """The idempotency key a write carries (None for calls that store nothing)."""
    key = call.body.get("idempotency_key") if call.body is not None else None
    return key if isinstance(key, str) else None


def _with_key(error: ContextwrightError, call: _Call) -> ContextwrightError:
    """``error`` of a write, carrying its idempotency key as ``idempotency_key``.

    A write the caller cannot tell landed (``OutcomeUnknown``, or a build that timed out after
    the message was stored) is retried safely only with the same key, and the client made the
    key when the caller gave none: the error hands it over, and its message names it.
    """
    key = _write_key(call)
    if key is None:
        return error
    if _timed_out(error):
        stored_seq = error.stored_seq
        error = OutcomeUnknown(f"{error} (the message may be stored)")
        error.stored_seq = stored_seq
    if isinstance(error, OutcomeUnknown):
        error.args = (f"{error.args[0] if error.args else error}; idempotency_key={key!r}",)
    error.idempotency_key = key
    return error


def _timed_out(error: ContextwrightError) -> bool:
    return (isinstance(error, ServiceError) and error.status == 503
            and _is_kind(error.problem, "build-timeout"))


class Client(_Base):
    """The service, called synchronously (thread-safe, one connection pool)."""

    def __init__(self, base_url: str, *, api_key: str, timeout: float = 60.0, retries: int = 3,
                 backoff: float = 0.2, max_retry_wait: float = 5.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(base_url, api_key=api_key, timeout=timeout, retries=retries,
                         backoff=backoff, max_retry_wait=max_retry_wait)
        self._http = httpx.Client(base_url=self.base_url, headers=self._headers,
                                  timeout=timeout, transport=transport)

    def _send(self, call: _Call) -> Any:
        attempt, maybe_sent = 0, False
        content = _body_bytes(call.body)
        while True:
            attempt += 1
            try:
                response = self._http.request(
                    call.method, call.path, content=content, params=dict(call.params),
                    headers=_JSON_HEADERS if content is not None else None)
            except httpx.TransportError as error:
                maybe_sent = maybe_sent or not isinstance(error, _NOT_SENT)
                wait = self._wait(attempt, None)
                if wait is None:
                    raise _with_key(_transport_error(error, call, maybe_sent), call) from None
                _log_retry(call, type(error).__name__, wait)
            else:
                wait = self._wait(attempt, response)
                if wait is None:
                    return self._answer(call, response)
                _log_retry(call, f"HTTP {response.status_code}", wait)
            time.sleep(wait)

    def prepare(self, user_id: str, session_id: str, text: str | None = None, *,
                images: Sequence[object] = (),
                tools: Sequence[Mapping[str, Any]] = (), documents: Sequence[Any] = (),
                env: Mapping[str, str] | None = None, system: str | None = None,
                target: Literal["chat", "text"] | None = None,
                idempotency_key: str | None = None, format: Format = "openai",
                model: str | None = None, max_tokens: int | None = None,
                tool_choice: str | Mapping[str, Any] | None = None,
                parallel_tool_calls: bool | None = None) -> RemoteContext:
        """``ContextManager.prepare`` on the service, rendered as ``format`` asks."""
        options = {"images": _image_parts(images), "tools": tools, "documents": documents,
                   "env": env, "system": system,
                   "target": target, "idempotency_key": idempotency_key, "format": format,
                   "model": model, "max_tokens": max_tokens, "tool_choice": tool_choice,
                   "parallel_tool_calls": parallel_tool_calls}
        return _context(self._send(_prepare_call(user_id, session_id, text, options)), options)

    def record(self, user_id: str, session_id: str, *, assistant: object = None,
               tool_results: Sequence[object] = (), messages: Sequence[object] = (),
               idempotency_key: str | None = None,
               context: RemoteContext | None = None) -> list[int]:
        """``ContextManager.record`` on the service: the seqs stored.

        ``context``: the ``prepare`` answer this answers; the service refuses the record
        (``SessionGone``) if that session was erased, expired or begun again since.
        """
        call = _record_call(user_id, session_id, assistant, tool_results, messages,
                            idempotency_key, context)
        return list(self._send(call)["seqs"])

    def state(self, user_id: str, session_id: str) -> SessionState:
        """The session's mode, mode history, summary and zones (empty when there is none)."""
        view = self.session(user_id, session_id, last=0)
        return view.state if view is not None else SessionState()

    def session(self, user_id: str, session_id: str, *, last: int = 20) -> SessionView | None:
        """State, message count and the newest ``last`` messages; None if there is no session."""
        data = self._send(_Call(method="GET", path=_session_path(user_id, session_id),
                                params={"last": last}, missing_ok=True))
        return _view(data) if data is not None else None

    def erase_session(self, user_id: str, session_id: str) -> bool:
        """Erase one session; True if it existed (a retried erase may find it gone: False)."""
        data = self._send(_Call(method="DELETE", path=_session_path(user_id, session_id),
                                missing_ok=True))
        return data is not None

    def erase_user(self, user_id: str) -> int:
        """Erase every session of ``user_id``; how many there were."""
        data = self._send(_Call(method="DELETE", path=f"/v1/users/{_segment(user_id)}"))
        return int(data["erased"])

    def build(self, request: object, *, plan: str | Mapping[str, Any] | None = None,
              format: Format = "openai", model: str | None = None,
              tokenizer: str | None = None, window: int | None = None,
              reserved_output: int | None = None, budget: int | None = None,
              max_tokens: int | None = None,
              tool_choice: str | Mapping[str, Any] | None = None,
              parallel_tool_calls: bool | None = None) -> RemoteContext:
        """A stateless build: ``request`` (a ``Request`` or the request schema as a dict).

        ``format`` and the request settings (``model``, ``max_tokens``, ``tool_choice``,
        ``parallel_tool_calls``) are those of ``FinalContext.to_request``: the service renders.
        """
        options = {"plan": _plain(plan), "format": format, "model": model,
                   "tokenizer": tokenizer, "window": window, "reserved_output": reserved_output,
                   "budget": budget, "max_tokens": max_tokens, "tool_choice": tool_choice,
                   "parallel_tool_calls": parallel_tool_calls}
        return _context(self._send(_build_call(request, options)), options)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


class AsyncClient(_Base):
    """The service, called from an event loop.

    ``aprepare`` / ``arecord`` as on ``ContextManager``, and every method under its plain name.
    """

    def __init__(self, base_url: str, *, api_key: str, timeout: float = 60.0, retries: int = 3,
                 backoff: float = 0.2, max_retry_wait: float = 5.0,
                 transport: httpx.AsyncBaseTransport | None = None,
                 limits: httpx.Limits | None = None) -> None:
        super().__init__(base_url, api_key=api_key, timeout=timeout, retries=retries,
                         backoff=backoff, max_retry_wait=max_retry_wait)
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=self._headers,
                                       timeout=timeout, transport=transport,
                                       limits=limits or httpx.Limits(max_connections=100))

    async def _send(self, call: _Call) -> Any:
        attempt, maybe_sent = 0, False
        content = _body_bytes(call.body)
        while True:
            attempt += 1
            try:
                response = await self._http.request(
                    call.method, call.path, content=content, params=dict(call.params),
                    headers=_JSON_HEADERS if content is not None else None)
            except httpx.TransportError as error:
                maybe_sent = maybe_sent or not isinstance(error, _NOT_SENT)
                wait = self._wait(attempt, None)
                if wait is None:
                    raise _with_key(_transport_error(error, call, maybe_sent), call) from None
                _log_retry(call, type(error).__name__, wait)
            else:
                wait = self._wait(attempt, response)
                if wait is None:
                    return self._answer(call, response)
                _log_retry(call, f"HTTP {response.status_code}", wait)
            await asyncio.sleep(wait)

    async def prepare(self, user_id: str, session_id: str, text: str | None = None, *,
                      images: Sequence[object] = (),
                      tools: Sequence[Mapping[str, Any]] = (), documents: Sequence[Any] = (),
                      env: Mapping[str, str] | None = None, system: str | None = None,
                      target: Literal["chat", "text"] | None = None,
                      idempotency_key: str | None = None, format: Format = "openai",
                      model: str | None = None, max_tokens: int | None = None,
                      tool_choice: str | Mapping[str, Any] | None = None,
                      parallel_tool_calls: bool | None = None) -> RemoteContext:
        """``Client.prepare``, awaited."""
        options = {"images": _image_parts(images), "tools": tools, "documents": documents,
                   "env": env, "system": system,
                   "target": target, "idempotency_key": idempotency_key, "format": format,
                   "model": model, "max_tokens": max_tokens, "tool_choice": tool_choice,
                   "parallel_tool_calls": parallel_tool_calls}
        return _context(await self._send(_prepare_call(user_id, session_id, text, options)),
                        options)

    async def record(self, user_id: str, session_id: str, *, assistant: object = None,
                     tool_results: Sequence[object] = (), messages: Sequence[object] = (),
                     idempotency_key: str | None = None,
                     context: RemoteContext | None = None) -> list[int]:
        """``Client.record``, awaited."""
        call = _record_call(user_id, session_id, assistant, tool_results, messages,
                            idempotency_key, context)
        return list((await self._send(call))["seqs"])

    aprepare = prepare
    arecord = record

    async def state(self, user_id: str, session_id: str) -> SessionState:
        """``Client.state``, awaited."""
        view = await self.session(user_id, session_id, last=0)
        return view.state if view is not None else SessionState()

    async def session(self, user_id: str, session_id: str, *,
                      last: int = 20) -> SessionView | None:
        """``Client.session``, awaited."""
        data = await self._send(_Call(method="GET", path=_session_path(user_id, session_id),
                                      params={"last": last}, missing_ok=True))
        return _view(data) if data is not None else None

    async def erase_session(self, user_id: str, session_id: str) -> bool:
        """``Client.erase_session``, awaited."""
        data = await self._send(_Call(method="DELETE", path=_session_path(user_id, session_id),
                                      missing_ok=True))
        return data is not None

    async def erase_user(self, user_id: str) -> int:
        """``Client.erase_user``, awaited."""
        data = await self._send(_Call(method="DELETE", path=f"/v1/users/{_segment(user_id)}"))
        return int(data["erased"])

    async def build(self, request: object, *, plan: str | Mapping[str, Any] | None = None,
                    format: Format = "openai", model: str | None = None,
                    tokenizer: str | None = None, window: int | None = None,
                    reserved_output: int | None = None, budget: int | None = None,
                    max_tokens: int | None = None,
                    tool_choice: str | Mapping[str, Any] | None = None,
                    parallel_tool_calls: bool | None = None) -> RemoteContext:
        """``Client.build``, awaited."""
        options = {"plan": _plain(plan), "format": format, "model": model,
                   "tokenizer": tokenizer, "window": window, "reserved_output": reserved_output,
                   "budget": budget, "max_tokens": max_tokens, "tool_choice": tool_choice,
                   "parallel_tool_calls": parallel_tool_calls}
        return _context(await self._send(_build_call(request, options)), options)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.aclose()
