"""Checking ``prepare``'s arguments before anything is written.

``prepare`` appends the user's message before it builds; an argument the build would refuse must
be refused first, or the message stays stored and a retry stores it twice. The checks are the
build's own (the same functions, the same ``InvalidInputError`` messages), run up front. Pure; no
I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextwright.core.images import image_from_part
from contextwright.core.items import check_text
from contextwright.core.request import Request
from contextwright.core.versions import parse_time
from contextwright.errors import InvalidInputError
from contextwright.sources.tools import schema_json, tool_names


def checked_parts(*, tools: Sequence[Mapping[str, Any]], documents: Sequence[Any],
                  env: Mapping[str, str] | None, system: str | None) -> Request:
    """A request holding the caller's parts, each checked as the build would check it.

    ``user_input`` is left empty for the caller to fill in with ``dataclasses.replace``.
    """
    if env is not None and not isinstance(env, Mapping):
        raise InvalidInputError("env must be an object of strings")
    request = Request(user_input="", system=system, tools=tools, documents=documents,
                      env=dict(env or {}))  # list shapes and document fields are checked here
    request.validate()  # the system prompt and the documents' texts
    tool_names(request.tools)
    for schema in request.tools:
        schema_json(schema)
    for index, doc in enumerate(request.documents):
        for field in ("id", "source", "timestamp"):
            value = getattr(doc, field)
            if value is not None:
                check_text(value, f"documents[{index}].{field}")
        parse_time(doc.timestamp, f"documents[{index}].timestamp")  # the build reads it so
    for name, value in request.env.items():
        check_text(str(name), "env key")
        check_text(value, "env value")
    return request


def image_parts(images: object) -> list[dict[str, Any]]:
    """``prepare``'s images as OpenAI ``image_url`` parts (checked)."""
    if isinstance(images, str | bytes | Mapping) or not isinstance(images, Sequence):
        raise InvalidInputError("images must be a list of images")
    return [image_from_part(image, f"images[{index}]").to_chat_part()
            for index, image in enumerate(images)]
