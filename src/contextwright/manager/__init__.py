"""The context-mode manager: sessions, routing, hand-offs and summaries around the builder."""

from contextwright.manager.context_manager import ContextManager, PreparedContext

__all__ = ["ContextManager", "PreparedContext"]
