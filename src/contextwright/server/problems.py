"""RFC 9457 problem details: how every failure of the service is answered.

A library error becomes a problem by its place in the error tree (``errors.py``); the service's
own refusals (authentication, size, rate, timeout) are problems too. The body names the error
class and says what is wrong in the library's words, which never echo the payload; it never
carries a traceback. Unexpected exceptions are logged here with their traceback and answered with
a bare 500.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from starlette.responses import JSONResponse

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
    PlanError,
    SessionGone,
    StoreUnavailable,
    TokenizerError,
    ValidationError,
)

logger = logging.getLogger("contextwright.server")

PROBLEM_TYPE = "urn:contextwright:problem:"
"""Prefix of every problem ``type``; the rest is the slug below."""
MEDIA_TYPE = "application/problem+json"


def json_bytes(content: Any) -> bytes:
    """``content`` as compact ASCII JSON; ``ValueError`` if it holds NaN or an infinity."""
    return json.dumps(content, ensure_ascii=True, allow_nan=False,
                      separators=(",", ":")).encode("ascii")


class Json(JSONResponse):
    """A JSON response in ASCII: stored text may hold lone surrogates, which UTF-8 cannot."""

    def render(self, content: Any) -> bytes:
        """``content`` as compact ASCII JSON (bytes: already encoded by ``json_bytes``)."""
        return content if isinstance(content, bytes) else json_bytes(content)


@dataclass(frozen=True, slots=True, kw_only=True)
class Kind:
    """One kind of problem: its HTTP status, ``type`` slug and ``title``."""

    status: int
    slug: str
    title: str
    error: str | None = None
    """The library error class this kind stands for, if any: the problem's ``error`` when
    the service refuses a call itself (a body that fails validation before the library reads
    it is still an ``InvalidInputError`` to the caller)."""


BAD_INPUT = Kind(status=400, slug="invalid-input", title="The request is malformed",
                 error=InvalidInputError.__name__)
BAD_PLAN = Kind(status=400, slug="invalid-plan", title="The plan is malformed",
                error=PlanError.__name__)
UNAUTHENTICATED = Kind(status=401, slug="unauthenticated",
                       title="A valid API key is required (Authorization: Bearer <key>)")
FORBIDDEN = Kind(status=403, slug="access-denied", title="Access denied")
NOT_FOUND = Kind(status=404, slug="not-found", title="No such resource")
SESSION_NOT_FOUND = Kind(status=404, slug="session-not-found", title="No such session")
METHOD = Kind(status=405, slug="method-not-allowed", title="Method not allowed")
CONFLICT = Kind(status=409, slug="conflict", title="A concurrent change conflicted; try again")
GONE = Kind(status=409, slug="session-gone",
            title="The session was erased while the call ran")
TOO_LARGE = Kind(status=413, slug="payload-too-large", title="The request body is too large")
MEDIA = Kind(status=415, slug="unsupported-media-type", title="Send application/json")
BUDGET = Kind(status=422, slug="budget-exceeded",
              title="The parts that may not be cut do not fit the budget")
UNRENDERABLE = Kind(status=422, slug="unrenderable",
                   title="The request cannot be rendered as a valid provider request")
RATE = Kind(status=429, slug="rate-limited", title="Too many requests for this tenant")
TOKENIZER_UNAVAILABLE = Kind(status=501, slug="tokenizer-unavailable",
                             title="The tokenizer asked for needs a package this service lacks")
INTERNAL = Kind(status=500, slug="internal", title="Internal error")
CORRUPT = Kind(status=500, slug="corrupt-record", title="A stored record cannot be decoded")
UNAVAILABLE = Kind(status=503, slug="store-unavailable",
                   title="The session store cannot be reached")
TIMEOUT = Kind(status=503, slug="build-timeout", title="The call took too long")
CLASSIFIER = Kind(status=503, slug="classifier-failed",
                  title="The mode classifier failed; build again with text=None")
CLOSING = Kind(status=503, slug="shutting-down",
               title="The service is shutting down; try again (another worker may answer)")

_BY_ERROR: tuple[tuple[type[ContextwrightError], Kind], ...] = (
    # Most specific first: SessionGone is a StoreError beside ConflictError.
    (BudgetError, BUDGET),
    (SessionGone, GONE),
    (ConflictError, CONFLICT),
    (KeyConflictError, CONFLICT),
    (StoreUnavailable, UNAVAILABLE),
    (CorruptRecordError, CORRUPT),
    (PlanError, BAD_PLAN),
    (InvalidInputError, BAD_INPUT),
    (TokenizerError, BAD_INPUT),
    (AccessDenied, FORBIDDEN),
    # Both fail for a reason outside the request: worth a retry (a failed classification left
    # the message stored: ``stored_seq`` says so).
    (ClassifierError, CLASSIFIER),
    (ManagerClosed, CLOSING),
    # The validator refuses what the caller's messages render into (two tool calls of one
    # assistant message sharing an id, say): a request the caller must change, never a 500.
    (ValidationError, UNRENDERABLE),
)

RETRY_AFTER_UNAVAILABLE = 1
"""Seconds a client is told to wait after a store outage or a build timeout."""


class Problem(Exception):
    """A refusal of the service itself (not of the library), answered as a problem."""

    def __init__(self, kind: Kind, detail: str, *, retry_after: str | None = None,
                 **extensions: Any) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.retry_after = retry_after
        self.extensions = extensions


def kind_of(error: ContextwrightError) -> Kind:
    """The problem kind of a library error (500 for a kind the service cannot help with)."""
    if _missing_module(error) is not None:
        return TOKENIZER_UNAVAILABLE
    return next((kind for cls, kind in _BY_ERROR if isinstance(error, cls)), INTERNAL)


def _missing_module(error: ContextwrightError) -> ImportError | None:
    """The failed import behind a ``TokenizerError`` (None: the tokenizer failed otherwise).

    The tokenizers raise ``TokenizerError`` both for a name the caller got wrong and for a
    package missing from this installation; only the chained ``ImportError`` tells them
    apart, and the second is the service's to fix, not the caller's.
    """
    cause = error.__cause__
    return cause if isinstance(error, TokenizerError) and isinstance(cause, ImportError) else None


def problem_response(kind: Kind, detail: str, *, retry_after: str | None = None,
                     **extensions: Any) -> JSONResponse:
    """The ``application/problem+json`` response for ``kind``."""
    body: dict[str, Any] = {"type": PROBLEM_TYPE + kind.slug, "title": kind.title,
                            "status": kind.status, "detail": detail}
    if kind.error is not None:
        body["error"] = kind.error
    body.update(extensions)  # a library error names its own class (PlanError is a 400)
    headers = {"Retry-After": retry_after} if retry_after is not None else None
    return Json(body, status_code=kind.status, headers=headers, media_type=MEDIA_TYPE)


def library_problem(error: ContextwrightError) -> JSONResponse:
    """The problem answering a library error."""
    kind = kind_of(error)
    if kind is INTERNAL:
        logger.error("request failed with %s", type(error).__name__, exc_info=error)
    elif kind is UNRENDERABLE:  # the input is the caller's, but the renderer may be at fault
        logger.warning("a rendering failed validation: %s", error, exc_info=error)
    extensions: dict[str, Any] = {"error": type(error).__name__}
    if error.stored_seq is not None:
        extensions["stored_seq"] = error.stored_seq
    if isinstance(error, BudgetError):
        extensions["report"] = report_without_content(error.report.to_dict())
    retry = str(RETRY_AFTER_UNAVAILABLE) if kind.status == 503 else None
    detail = str(error) if kind is not INTERNAL else "the request failed; see the server log"
    if kind is TOKENIZER_UNAVAILABLE:
        detail, extensions["package"] = _missing_package(error)
    return problem_response(kind, detail, retry_after=retry, **extensions)


def _missing_package(error: ContextwrightError) -> tuple[str, str | None]:
    """The detail of a tokenizer-unavailable problem and the module missing (logged too)."""
    missing = _missing_module(error)
    module = missing.name if missing is not None else None
    logger.error("a build asked for a tokenizer this installation cannot load: %s (module %s "
                 "not importable)", error, module or "unknown")
    return (f"{error} on this service: its operator must install it, or ask for another "
            "tokenizer", module)


def report_without_content(report: dict[str, Any]) -> dict[str, Any]:
    """A report's table and decisions, without the original text some decisions keep."""
    decisions = [{**decision, "detail": None} for decision in report.get("decisions", ())]
    return {**report, "decisions": decisions}


def unexpected_problem(error: BaseException) -> JSONResponse:
    """A bare 500 for an exception nobody raised on purpose (logged with its traceback)."""
    logger.error("unexpected error while serving a request", exc_info=error)
    return problem_response(INTERNAL, "the request failed; see the server log",
                            error="InternalError")
