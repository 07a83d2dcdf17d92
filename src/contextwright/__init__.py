"""contextwright decides what an LLM agent sees on every call.

Sources contribute items; a plan says which, in what order and with what share of the token
budget; the builder gathers, de-duplicates, allocates, cuts (knowing what it cut), orders, fences
untrusted text and reports every decision.
"""

from contextwright.builder import ContextBuilder, clear_caches
from contextwright.compress.summarize import (
    ExtractiveSummarizer,
    Summarizer,
    Summary,
)
from contextwright.compress.summary_llm import LLMSummarizer
from contextwright.compress.tool_results import ToolTiers
from contextwright.convert import chat_messages
from contextwright.core.cache import CachePolicy, CacheReport, Fingerprint
from contextwright.core.caches import CacheStats, cache_stats, set_cache_limits
from contextwright.core.final import FinalContext
from contextwright.core.images import ImagePart
from contextwright.core.items import ContextItem, Layer, Message, ToolCall
from contextwright.core.plan import Budget, BuildPlan, SourceSpec
from contextwright.core.report import BuildReport, Decision, SourceReport
from contextwright.core.request import Document, Request
from contextwright.core.source import ContextSource
from contextwright.errors import (
    AccessDenied,
    BudgetError,
    ClassifierError,
    ConfigurationError,
    ConflictError,
    ContextwrightError,
    CorruptRecordError,
    DatasetError,
    InvalidInputError,
    KeyConflictError,
    LLMError,
    ManagerClosed,
    OutcomeUnknown,
    PlanError,
    SessionGone,
    SourceError,
    StoreError,
    StoreUnavailable,
    SummaryError,
    TokenizerError,
    ValidationError,
)
from contextwright.llm import OpenAIChatClient
from contextwright.manager import ContextManager, PreparedContext
from contextwright.modes import (
    CentroidClassifier,
    ModeClassifier,
    ModesConfig,
    ModeSettings,
    RouteDecision,
    Router,
)
from contextwright.plans import select_plan
from contextwright.recall import LexicalTurnRecaller, RecallTurn, TurnRecaller
from contextwright.session import (
    MemoryStore,
    PostgresStore,
    RedisStore,
    SessionKey,
    SqliteStore,
    Store,
    open_store,
)
from contextwright.session.state import SessionState
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
from contextwright.sources.tools import LexicalToolScorer, ToolScorer

__version__ = "0.1.0"

__all__ = [
    "AccessDenied",
    "Budget",
    "BudgetError",
    "BuildPlan",
    "BuildReport",
    "CachePolicy",
    "CacheReport",
    "CacheStats",
    "CentroidClassifier",
    "ClassifierError",
    "ConfigurationError",
    "ConflictError",
    "ContextBuilder",
    "ContextItem",
    "ContextManager",
    "ContextSource",
    "ContextwrightError",
    "CorruptRecordError",
    "DatasetError",
    "Decision",
    "Document",
    "DocumentSource",
    "EnvInfoSource",
    "ExamplesSource",
    "ExtractiveSummarizer",
    "FinalContext",
    "Fingerprint",
    "HistorySource",
    "ImagePart",
    "InvalidInputError",
    "KeyConflictError",
    "LLMError",
    "LLMSummarizer",
    "Layer",
    "LexicalToolScorer",
    "LexicalTurnRecaller",
    "ManagerClosed",
    "MemoryStore",
    "Message",
    "ModeClassifier",
    "ModeSettings",
    "ModesConfig",
    "NotesSource",
    "OpenAIChatClient",
    "OutcomeUnknown",
    "PlanError",
    "PostgresStore",
    "PreparedContext",
    "RecallTurn",
    "RedisStore",
    "Request",
    "RouteDecision",
    "Router",
    "SessionGone",
    "SessionKey",
    "SessionState",
    "SourceError",
    "SourceReport",
    "SourceSpec",
    "SqliteStore",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "Summarizer",
    "Summary",
    "SummaryError",
    "SystemPromptSource",
    "TokenizerError",
    "ToolCall",
    "ToolDefinitionSource",
    "ToolResultSource",
    "ToolScorer",
    "ToolTiers",
    "TurnRecaller",
    "UserInputSource",
    "ValidationError",
    "__version__",
    "cache_stats",
    "chat_messages",
    "clear_caches",
    "open_store",
    "select_plan",
    "set_cache_limits",
]
