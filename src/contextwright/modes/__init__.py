"""Context modes: settings, the router, zones and the session memory source."""

from contextwright.modes.centroid import CentroidClassifier
from contextwright.modes.config import (
    RAG_ENHANCED,
    SLIDING_WINDOW,
    STRUCTURED,
    ModesConfig,
    ModeSettings,
    OutputRules,
    RecallSettings,
    RouteRule,
)
from contextwright.modes.router import Classification, ModeClassifier, RouteDecision, Router
from contextwright.modes.zones import Task, ToolRecord, Zones

__all__ = [
    "RAG_ENHANCED",
    "SLIDING_WINDOW",
    "STRUCTURED",
    "CentroidClassifier",
    "Classification",
    "ModeClassifier",
    "ModeSettings",
    "ModesConfig",
    "OutputRules",
    "RecallSettings",
    "RouteDecision",
    "RouteRule",
    "Router",
    "Task",
    "ToolRecord",
    "Zones",
]
