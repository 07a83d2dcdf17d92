"""Tool definitions (L3): OpenAI function schemas, the ones matching the input offered first."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

from contextwright.core.cutting import query_keywords
from contextwright.core.items import ContextItem, Layer, Message
from contextwright.core.request import Request
from contextwright.errors import InvalidInputError


def tool_name(schema: Mapping[str, Any], where: str) -> str:
    """The function name of an OpenAI tool schema; ``InvalidInputError`` if it has none."""
    if not isinstance(schema, Mapping):
        raise InvalidInputError(f"{where} must be an object")
    function = schema.get("function") if schema.get("type", "function") == "function" else None
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"{where} is not an OpenAI function tool with a name")
    return name


_SCHEMA_JSON: dict[int, tuple[Mapping[str, Any], dict[str, Any], str]] = {}


def schema_json(schema: Mapping[str, Any]) -> str:
    """Compact, key-sorted JSON of a tool schema.

    Remembered per schema object while it is unchanged (checked against a deep copy).
    """
    cached = _SCHEMA_JSON.get(id(schema))
    if cached is not None and cached[0] is schema and schema == cached[1]:
        return cached[2]
    try:
        text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        text.encode("utf-8")
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise InvalidInputError(f"a tool schema is not valid JSON text ({type(exc).__name__})"
                                ) from None
    if len(_SCHEMA_JSON) > 10_000:
        _SCHEMA_JSON.clear()
    _SCHEMA_JSON[id(schema)] = (schema, copy.deepcopy(dict(schema)), text)
    return text


def _relevance(schema: Mapping[str, Any], keywords: frozenset[str]) -> int:
    function = schema.get("function", {})
    text = f"{function.get('name', '')} {function.get('description', '')}".lower().replace("_", " ")
    return sum(1 for word in keywords if word in text)


class ToolDefinitionSource:
    """Tool schemas; under pressure the ones sharing words with the input are kept first.

    Options: ``always`` (tool names always offered first). Rendered in the given order.
    """

    namespace = "tools"

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """One ``tools.<name>`` item per schema, most relevant first."""
        keywords = query_keywords(request.user_input)
        always = set(options.get("always", ()))
        ranked = []
        for index, schema in enumerate(request.tools):
            name = tool_name(schema, f"tools[{index}]")
            score = (name in always, _relevance(schema, keywords))
            ranked.append((score, index, name, schema))
        ranked.sort(key=lambda entry: (-entry[0][0], -entry[0][1], entry[1]))
        for _, index, name, schema in ranked:
            text = schema_json(schema)
            yield ContextItem(key=f"tools.{name}", message=Message(role="system", content=text),
                              layer=Layer.TOOLS, order=index, metadata={"schema": schema})
