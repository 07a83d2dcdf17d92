"""Turn JSON tool results into compact readable text (SPEC R-TOOL-1, seed 004 §4.1).

``{"code":200,"data":{"city":"北京","temp":25}}`` becomes ``Tool result (weather): city: 北京,
temp: 25``. Success envelopes (``code: 200``, ``status: "ok"``) are dropped, a lone ``data`` wrapper
is unwrapped, nested objects become dotted paths, and every scalar value is kept verbatim, so ids,
numbers and dates survive. ``fields`` keeps only the named top-level fields.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

MAX_COMPACT_CHARS = 200_000
"""Larger results are not parsed (that alone would cost too much); they are cut as text."""

_ENVELOPE_OK = {
    "code": (0, 200, "0", "200", "OK", "ok"),
    "status": ("ok", "OK", "success", "SUCCESS", 200, "200"),
    "status_code": (200, "200"),
    "success": (True,),
    "msg": ("ok", "OK", "success", ""),
    "message": ("ok", "OK", "success", ""),
    "error": (None, ""),
}


def compact_tool_result(tool_name: str | None, content: str,
                        fields: Sequence[str] | None = None) -> str | None:
    """Compact text for a JSON result, or None if ``content`` is not a JSON object or array."""
    return _compact_cached(tool_name, content, None if fields is None else tuple(fields))


@lru_cache(maxsize=65_536)
def _compact_cached(tool_name: str | None, content: str, fields: tuple[str, ...] | None
                    ) -> str | None:
    stripped = content.strip()
    if not stripped or stripped[0] not in "{[" or len(stripped) > MAX_COMPACT_CHARS:
        return None
    try:
        return _compact_value(tool_name, json.loads(stripped), fields)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python recurses
        return None


def _compact_value(tool_name: str | None, value: Any, fields: tuple[str, ...] | None) -> str:
    value = _unwrap(value)
    if fields is not None and isinstance(value, Mapping):
        value = {key: value[key] for key in fields if key in value}
    body = ", ".join(_flatten(value, ""))
    prefix = f"Tool result ({tool_name})" if tool_name else "Tool result"
    compact = f"{prefix}: {body}" if body else f"{prefix}: (empty)"
    minified = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    # Readable text is the goal, but never at a higher price than the minified JSON.
    return compact if len(compact) <= len(minified) + len(prefix) + 2 else f"{prefix}: {minified}"


def _unwrap(value: Any) -> Any:
    """Drop success-envelope fields and a lone ``data``/``result`` wrapper."""
    if not isinstance(value, Mapping):
        return value
    kept = {k: v for k, v in value.items() if not _is_ok_envelope(k, v)}
    if len(kept) == 1:
        (only_key, only_value), = kept.items()
        if only_key in ("data", "result", "results", "response") and isinstance(
            only_value, Mapping | list
        ):
            return _unwrap(only_value)
    return kept


def _is_ok_envelope(key: str, value: Any) -> bool:
    accepted = _ENVELOPE_OK.get(key)
    return accepted is not None and value in accepted


def _flatten(value: Any, path: str) -> Iterable[str]:
    if isinstance(value, Mapping):
        for key, child in value.items():
            yield from _flatten(child, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        if _is_table(value):
            yield _table(value, path)
        elif all(not isinstance(child, Mapping | list) for child in value):
            rendered = "; ".join(_scalar(child) for child in value)
            yield f"{path}: [{rendered}]" if path else f"[{rendered}]"
        else:
            for index, child in enumerate(value):
                yield from _flatten(child, f"{path}[{index}]")
    else:
        yield f"{path}: {_scalar(value)}" if path else _scalar(value)


def _is_table(value: list[Any]) -> bool:
    """A list of at least two flat objects with the same keys."""
    if len(value) < 2 or not all(isinstance(row, Mapping) for row in value):
        return False
    keys = list(value[0].keys())
    return all(
        list(row.keys()) == keys and not any(isinstance(v, Mapping | list) for v in row.values())
        for row in value
    )


def _table(rows: list[Mapping[str, Any]], path: str) -> str:
    """``path (n rows) [a, b]: (1, 2); (3, 4)`` — column names once, then the rows."""
    columns = ", ".join(str(key) for key in rows[0])
    body = "; ".join("(" + ", ".join(_scalar(v) for v in row.values()) + ")" for row in rows)
    return f"{path or 'rows'} ({len(rows)} rows) [{columns}]: {body}"


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
