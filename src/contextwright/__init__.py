"""contextwright decides what an LLM agent sees on every call.

Sources contribute items; a plan says which, in what order and with what share of the token
budget; the builder gathers, de-duplicates, allocates, cuts (knowing what it cut), orders, fences
untrusted text and reports every decision.
"""

from contextwright.builder import ContextBuilder, clear_caches
from contextwright.core.final import FinalContext
from contextwright.core.items import ContextItem, Layer, Message, ToolCall
from contextwright.core.plan import Budget, BuildPlan, SourceSpec
from contextwright.core.report import BuildReport, Decision, SourceReport
from contextwright.core.request import Document, Request
from contextwright.core.source import ContextSource
from contextwright.errors import (
    BudgetError,
    ContextwrightError,
    InvalidInputError,
    KeyConflictError,
    PlanError,
    SourceError,
    TokenizerError,
    ValidationError,
)
from contextwright.plans import select_plan
from contextwright.sources import (
    DocumentSource,
    EnvInfoSource,
    ExamplesSource,
    HistorySource,
    NotesSource,
    SystemPromptSource,
    ToolDefinitionSource,
    ToolResultSource,
    UserInputSource,
)

__version__ = "0.1.0"

__all__ = [
    "Budget",
    "BudgetError",
    "BuildPlan",
    "BuildReport",
    "ContextBuilder",
    "ContextItem",
    "ContextSource",
    "ContextwrightError",
    "Decision",
    "Document",
    "DocumentSource",
    "EnvInfoSource",
    "ExamplesSource",
    "FinalContext",
    "HistorySource",
    "InvalidInputError",
    "KeyConflictError",
    "Layer",
    "Message",
    "NotesSource",
    "PlanError",
    "Request",
    "SourceError",
    "SourceReport",
    "SourceSpec",
    "SystemPromptSource",
    "TokenizerError",
    "ToolCall",
    "ToolDefinitionSource",
    "ToolResultSource",
    "UserInputSource",
    "ValidationError",
    "__version__",
    "clear_caches",
    "select_plan",
]
