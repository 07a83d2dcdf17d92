"""Built-in context sources; each owns one namespace and never touches the message list."""

from contextwright.core.source import ContextSource
from contextwright.sources.conversation import HistorySource, ToolResultSource
from contextwright.sources.documents import DocumentSource
from contextwright.sources.simple import (
    EnvInfoSource,
    ExamplesSource,
    NotesSource,
    SystemPromptSource,
    UserInputSource,
)
from contextwright.sources.tools import ToolDefinitionSource

__all__ = [
    "DocumentSource",
    "EnvInfoSource",
    "ExamplesSource",
    "HistorySource",
    "NotesSource",
    "SystemPromptSource",
    "ToolDefinitionSource",
    "ToolResultSource",
    "UserInputSource",
    "builtin_sources",
]


def builtin_sources() -> dict[str, ContextSource]:
    """A fresh registry of the built-in sources by namespace."""
    sources: list[ContextSource] = [
        SystemPromptSource(), ToolDefinitionSource(), HistorySource(), UserInputSource(),
        ToolResultSource(), DocumentSource(), EnvInfoSource(), ExamplesSource(), NotesSource(),
    ]
    return {source.namespace: source for source in sources}
