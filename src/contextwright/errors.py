"""The one error tree of contextwright.

Every error the library raises on purpose is a ``ContextwrightError``::

    ContextwrightError
    ├── PlanError            a plan is malformed (message names the field)
    ├── InvalidInputError    bad request: unknown role, orphan tool result, bad JSON, bad Unicode
    ├── KeyConflictError     two items claim one key and the build is strict
    ├── SourceError          a required source raised while building
    ├── BudgetError          the parts that may not be cut do not fit (carries the report)
    ├── TokenizerError       a tokenizer cannot be loaded or used
    ├── ValidationError      the final message list breaks a format rule (a bug, never shipped)
    ├── StoreError
    │   ├── StoreUnavailable
    │   │   └── OutcomeUnknown   a write was sent but never answered: it may land, now or later
    │   ├── ConflictError
    │   ├── SessionGone      the session a write was meant for was erased (or expired) meanwhile
    │   ├── CorruptRecordError
    │   └── StoreUsageError  a blocking call on an async store, or one async store on two loops
    ├── AccessDenied
    ├── SummaryError         a summariser failed, returned nothing usable or lost a fact
    ├── LLMError             a chat-completions call failed (transport, status, empty reply)
    ├── ConfigurationError   the deployment's setting is unusable (an empty fence secret)
    └── DatasetError         an evaluation folder is not laid out like ../shared/data/<set>

Messages never echo user payloads: they name the field, index or key, not the content.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from contextwright.core.report import BuildReport

__all__ = [
    "AccessDenied",
    "BudgetError",
    "ConfigurationError",
    "ConflictError",
    "ContextwrightError",
    "CorruptRecordError",
    "DatasetError",
    "InvalidInputError",
    "KeyConflictError",
    "LLMError",
    "OutcomeUnknown",
    "PlanError",
    "SessionGone",
    "SourceError",
    "StoreError",
    "StoreUnavailable",
    "StoreUsageError",
    "SummaryError",
    "TokenizerError",
    "ValidationError",
]


class ContextwrightError(Exception):
    """Base of every error contextwright raises on purpose."""

    stored_seq: int | None = None
    """Set by ``ContextManager.prepare`` when it fails after storing the user's message: that
    message's seq. The message was said and stays stored; build again with ``text=None``
    instead of sending it again."""
    idempotency_key: str | None = None
    """Set by the service client on the error of a write it gave up on: the key the call was
    sent with. Retry with ``idempotency_key=`` that key and the write is stored once."""


class PlanError(ContextwrightError):
    """A build plan is malformed; the message names the offending field."""


class InvalidInputError(ContextwrightError):
    """The request is malformed (role, tool pairing, JSON, Unicode, size)."""


class KeyConflictError(ContextwrightError):
    """Two context items claim the same key and the build runs in strict mode."""


class SourceError(ContextwrightError):
    """A required source failed while building its items."""


class BudgetError(ContextwrightError):
    """The parts that may never be cut do not fit into the available budget."""

    def __init__(self, message: str, report: BuildReport) -> None:
        super().__init__(message)
        self.report = report


class TokenizerError(ContextwrightError):
    """A tokenizer could not be loaded, or refused its input."""


class ValidationError(ContextwrightError):
    """A rendered message list breaks a rule of its target format.

    Inputs are checked before a build, so this names a rule the checks let through; the service
    answers it as 422 ``unrenderable``.
    """


class StoreError(ContextwrightError):
    """A session store failed."""


class StoreUnavailable(StoreError):
    """The store cannot be reached."""


class OutcomeUnknown(StoreUnavailable):
    """A write was sent but its answer never came (a timeout, a lost connection).

    It may have been applied, or may still be applied later: retry with the same
    ``idempotency_key`` and it is stored once either way.
    """


class ConflictError(StoreError):
    """A concurrent write conflicted."""


class SessionGone(StoreError):
    """The session a write was meant for was erased (or expired) while the call ran.

    Nothing of the call is kept: erasure wins over any write that read the erased session.
    """


class CorruptRecordError(StoreError):
    """A stored record cannot be decoded."""


class StoreUsageError(StoreError):
    """A store was used in a way its kind does not allow.

    A blocking call (``ContextManager.prepare``) on an async store (use ``aprepare``), or an
    async store used from a second event loop (its connections belong to the first).
    """


class AccessDenied(ContextwrightError):
    """The caller may not access this tenant, user or session."""


class SummaryError(ContextwrightError):
    """A summary could not be made or failed its check; the previous summary must stay."""


class ClassifierError(ContextwrightError):
    """The mode classifier raised: the message names it and the error; the cause is chained.

    Routing does not guess past a classifier that fails (the rules would route the message
    as if none were configured, hiding the failure); the caller sees it, and a ``prepare``
    that stored the message first says so with ``stored_seq``.
    """


class ManagerClosed(ContextwrightError):
    """The ``ContextManager`` was closed (``close`` / ``aclose``): it stores nothing more.

    Raised before anything is written, so a request that arrives while a server shuts down
    fails whole rather than storing a message whose summary update could not be scheduled.
    """


class ConfigurationError(ContextwrightError):
    """A setting of the deployment cannot be used as given (an empty fence secret, say).

    Raised when the object that reads it is made, so a misconfigured process fails at once
    rather than running on a default it was not meant to.
    """


class LLMError(ContextwrightError):
    """A chat-completions call failed: unreachable, refused, timed out or answered nothing.

    ``kind`` says which (``config``, ``request``: one that cannot be sent, such as text that is
    not valid Unicode, ``timeout``, ``connection``, ``status``, ``response``, ``empty``) and
    ``status_code`` carries the HTTP status of a ``status`` failure, so a caller can decide
    whether to try again later without parsing the message.
    """

    def __init__(self, message: str, *, kind: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status_code = status_code


class DatasetError(ContextwrightError):
    """An evaluation data folder lacks a file or breaks its set's schema (names file and field)."""
