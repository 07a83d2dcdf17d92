"""``PreparedContext``: what ``ContextManager.prepare`` returns for one model call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from contextwright.core.final import FinalContext
from contextwright.core.providers import ProviderFormat
from contextwright.core.report import BuildReport
from contextwright.modes.router import RouteDecision
from contextwright.session.state import ModeSwitch
from contextwright.session.store import SessionKey


class AnsweredContext(Protocol):
    """What ``record(context=…)`` reads of the context an answer is to: its session and epoch.

    A ``PreparedContext``; the HTTP service makes one from the epoch a client sends back with
    ``record`` (every ``prepare`` answer carries it).
    """

    @property
    def key(self) -> SessionKey:
        """The session the context was prepared for."""
        ...

    @property
    def epoch(self) -> str:
        """The incarnation of the session the answered message is in (``Store.epoch``)."""
        ...


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
    """The router's decision for this message (None when continuing a turn, or when a retry
    with the message's idempotency key answers it: it was routed when first stored). A build
    with ``text=None`` right after a message whose ``prepare`` failed before routing it routes
    it, and says so here."""
    switch: ModeSwitch | None
    """The hand-off this message caused, if any."""
    user_seq: int
    """Sequence number of the user message this context answers."""
    epoch: str
    """The incarnation of the session that message is in (``Store.epoch``). ``record(...,
    context=this)`` stores the answer only into it: once the session is erased, expired or
    begun again, the answer raises ``SessionGone`` instead of starting a session of its own."""

    @property
    def report(self) -> BuildReport:
        """Every decision of the build."""
        return self.context.report

    def to_messages(self, fmt: ProviderFormat = "openai", *, reasoning: bool = False
                    ) -> list[dict[str, Any]]:
        """Messages for the provider (see ``FinalContext.to_messages``).

        ``reasoning`` (``openai`` only): the open tool loop's assistant messages keep their
        reasoning as ``thinking_blocks``, for a framework whose model may be Anthropic's.
        """
        return self.context.to_messages(fmt, reasoning=reasoning)

    def to_request(self, fmt: ProviderFormat = "openai", **settings: Any) -> dict[str, Any]:
        """Keyword arguments for the provider's SDK call.

        ``settings``: ``model``, ``max_tokens``, ``tool_choice``, ``parallel_tool_calls`` (see
        ``FinalContext.to_request``).
        """
        return self.context.to_request(fmt, **settings)

    def to_text(self) -> str:
        """A plain prompt (see ``FinalContext.to_text``)."""
        return self.context.to_text()
