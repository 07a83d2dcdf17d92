"""Built-in context sources; each owns one namespace and never touches the message list."""

from contextwright.core.fence import register_labels
from contextwright.core.source import ContextSource, register_source
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


BUILTIN_SOURCE_CLASSES: tuple[
    type[SystemPromptSource | ToolDefinitionSource | HistorySource | UserInputSource
         | ToolResultSource | DocumentSource | EnvInfoSource | ExamplesSource | NotesSource], ...
] = (
    SystemPromptSource, ToolDefinitionSource, HistorySource, UserInputSource, ToolResultSource,
    DocumentSource, EnvInfoSource, ExamplesSource, NotesSource,
)
"""The built-in source classes, registered (``register_source``) when this package loads."""

for _cls in BUILTIN_SOURCE_CLASSES:
    register_source(_cls)
    register_labels(_cls.namespace, _cls.traits.labels)


def builtin_sources() -> dict[str, ContextSource]:
    """A fresh registry of the built-in sources by namespace."""
    sources: list[ContextSource] = [
        SystemPromptSource(), ToolDefinitionSource(), HistorySource(), UserInputSource(),
        ToolResultSource(), DocumentSource(), EnvInfoSource(), ExamplesSource(), NotesSource(),
    ]
    return {source.namespace: source for source in sources}
