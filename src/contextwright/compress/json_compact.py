"""Turn JSON tool results into compact readable text.

``{"code":200,"data":{"city":"北京","temp":25}}`` becomes ``Tool result (weather): city: 北京,
temp: 25``. Success envelopes (``code: 200``, ``status: "ok"``) are dropped, a lone ``data`` wrapper
is unwrapped, nested objects become dotted paths, and every other value is kept verbatim (``null``
and ``""`` included: ``error: null`` says the call did not fail), so ids, numbers and dates survive.
A value, key or table cell that holds the separators around it (``Doe, Jane`` in a row,
``refund done, status: refunded`` among fields, ``1,200`` in a row) is quoted as JSON, so no value
can read as another cell, row or field.

``fields`` keeps only the named fields: dotted paths into the result after the success envelope and
a lone ``data`` wrapper are removed. ``items[].name`` takes ``name`` from every element of the list
``items``; ``[].flight_number`` does the same when the result itself is a list; ``*`` matches every
key of an object (``payment_methods.*.id``). An ``error``/``errors`` field that reports something
(not null, false or empty) is always kept, at any depth and inside list items, so a field list never
hides a failure. When no listed field is present the whole result is compacted (the caller reports
it): showing nothing would hide what the tool said.

Numbers are shown as the tool wrote them (``19.90``, ``1e400``, ``0.123456789012345678``), never
as Python re-prints a float. A result with a duplicate key is not compacted: it is shown as given,
so neither value is lost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from json.encoder import encode_basestring
from typing import Any

from contextwright.core.caches import call_bytes, memoized, register_cache
from contextwright.core.parsing import unique_keys

MAX_COMPACT_CHARS = 200_000
"""Larger results are not parsed (that alone would cost too much); they are cut as text."""

_ENVELOPE_OK = {
    "code": (0, 200, "0", "200", "OK", "ok"),
    "status": ("ok", "OK", "success", "SUCCESS", 200, "200"),
    "status_code": (200, "200"),
    "success": (True,),
    "msg": ("ok", "OK", "success"),
    "message": ("ok", "OK", "success"),
}


def compact_tool_result(tool_name: str | None, content: str,
                        fields: Sequence[str] | None = None) -> str | None:
    """Compact text for a JSON result, or None if ``content`` is not a JSON object or array."""
    return _compact_cached(tool_name, content, None if fields is None else tuple(fields))


@memoized("compress.json_compact.compact", max_entries=65_536, share=0.05, size=call_bytes)
def _compact_cached(tool_name: str | None, content: str, fields: tuple[str, ...] | None
                    ) -> str | None:
    stripped = content.strip()
    if not stripped or stripped[0] not in "{[" or len(stripped) > MAX_COMPACT_CHARS:
        return None
    try:
        value = parse_json_verbatim(stripped)
        return without_lone_surrogates(_compact_value(tool_name, value, fields), stripped)
    except (ValueError, RecursionError):  # not JSON (or a duplicate key), or nested too deep
        return None


class JsonNumber(str):
    """A JSON number as its text wrote it (``19.90``, ``1e400``), kept to be shown verbatim.

    Through a Python float, ``0.123456789012345678`` would lose digits, ``19.90`` its zero,
    ``1e400`` would read ``inf`` and ``1e-400`` ``0.0``: a tool's amounts and ids must reach the
    model exactly. A ``str``, so it prints as itself and compares equal to its text.
    """

    __slots__ = ()


def parse_json_verbatim(text: str) -> Any:
    """``text`` parsed as JSON, numbers as ``JsonNumber``s (``NaN`` and ``Infinity`` too).

    Raises ``ValueError`` for text that is not JSON, and ``core.parsing.DuplicateKeyError`` (a
    ``ValueError``) for an object with a key twice: a dict would silently keep one of the values.
    """
    return json.loads(text, parse_float=JsonNumber, parse_int=JsonNumber,
                      parse_constant=JsonNumber, object_pairs_hook=unique_keys)


_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def without_lone_surrogates(shown: str, source: str) -> str:
    r"""``shown`` (text made from the JSON ``source``) with each lone surrogate as its escape.

    ``"\ud83d"`` is valid JSON text, but it decodes to half an emoji, which no UTF-8 request
    can carry (the SDKs raise ``UnicodeEncodeError``). Shown as the escape the tool wrote, the
    value stays visible and the request stays sendable. Such a character can only come from a
    ``\u`` escape (the source text itself is valid Unicode), so most texts skip the search.
    """
    if shown.isascii() or "\\u" not in source:
        return shown
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", shown)


def _compact_value(tool_name: str | None, value: Any, fields: tuple[str, ...] | None) -> str:
    value = _unwrap(value)
    if fields is not None:
        value = select_fields(value, fields)
    prefix = f"Tool result ({tool_name})" if tool_name else "Tool result"
    minified = _minified(value)
    # Readable text is the goal, but never at a higher price than the minified JSON: the
    # fields are flattened only until they pass its length (a nested result's dotted paths
    # often do, early on).
    body = _fields_within(value, len(minified))
    if body is None:
        return f"{prefix}: {minified}"
    compact = f"{prefix}: {body}" if body else f"{prefix}: (empty)"
    return compact if len(compact) <= len(minified) + len(prefix) + 2 else f"{prefix}: {minified}"


def _fields_within(value: Any, limit: int) -> str | None:
    """``", ".join(_flatten(value, ""))`` if it is at most ``limit`` characters long, else None.

    Flattening stops as soon as the fields pass ``limit`` (room for each field and the ", "
    after it), so a result whose minified JSON is shorter is not flattened whole.
    """
    parts: list[str] = []
    if _flatten_into(value, "", parts, limit + 2) < 0:
        return None
    return ", ".join(parts)


def _flatten_into(value: Any, path: str, parts: list[str], room: int) -> int:
    """``_flatten(value, path)`` appended to ``parts`` while ``room`` lasts; the room left.

    Each field takes its length and two (its separator). Negative: the fields passed the room,
    and the rest were not made. A plain recursive call per level rather than nested
    generators: a field deep in a result no longer passes up through a generator per level.
    """
    kind = type(value)
    if kind is dict or (kind is not list and not isinstance(value, str)
                        and isinstance(value, Mapping)):
        if not value and path:
            room -= _appended(parts, f"{path}: {{}}")
        for key, child in value.items():
            if room < 0:
                return room
            name = quoted_key(str(key))
            room = _flatten_into(child, f"{path}.{name}" if path else name, parts, room)
        return room
    if kind is list or (not isinstance(value, str) and isinstance(value, list)):
        if _is_table(value) or all(not isinstance(child, Mapping | list) for child in value):
            return room - _appended(parts, next(iter(_flatten(value, path))))
        for index, child in enumerate(value):
            if room < 0:
                return room
            room = _flatten_into(child, f"{path}[{index}]", parts, room)
        return room
    return room - _appended(parts, f"{path}: {_scalar(value, field=True)}" if path
                            else _scalar(value, field=True))


def _appended(parts: list[str], part: str) -> int:
    """Append ``part``; the room it takes (its length and its separator)."""
    parts.append(part)
    return len(part) + 2


def _minified(value: Any) -> str:
    """``value`` as JSON without spaces, numbers as written (``json.dumps`` re-prints floats)."""
    kind = type(value)
    if kind is dict:  # what parsing makes: tried before the (slower) abstract types
        return "{" + ",".join(f"{encode_basestring(key)}:{_minified(child)}"
                              for key, child in value.items()) + "}"
    if kind is list:
        return "[" + ",".join(_minified(child) for child in value) + "]"
    if isinstance(value, str):
        return value if isinstance(value, JsonNumber) else encode_basestring(value)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{encode_basestring(key)}:{_minified(child)}"
                              for key, child in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_minified(child) for child in value) + "]"
    return _scalar(value)  # null, true, false


_MISSING: Any = object()
_FAILURE_KEYS = frozenset(("error", "errors"))


def select_fields(value: Any, paths: Sequence[str]) -> Any:
    """The parts of ``value`` named by ``paths`` (see the module docstring), in the result's order.

    Returns ``value`` unchanged when none of the paths is present.
    """
    split = [_split_path(path) for path in paths]
    if all(_project(value, [parts], keep_failures=False) is _MISSING for parts in split):
        return value
    return _project(value, split, keep_failures=True)


def _split_path(path: str) -> list[str]:
    """``items[].name`` -> ``["items", "[]", "name"]``; ``[].id`` -> ``["[]", "id"]``."""
    parts: list[str] = []
    for segment in path.split("."):
        name = segment.rstrip("[]")
        if name:
            parts.append(name)
        parts.extend(["[]"] * ((len(segment) - len(name)) // 2))
    return parts


def _project(value: Any, paths: list[list[str]], *, keep_failures: bool) -> Any:
    """``value`` keeping only what ``paths`` reach (``_MISSING`` when they reach nothing).

    With ``keep_failures`` every ``error``/``errors`` field that reports something is kept too,
    wherever it is: the walk goes on below parts no path reaches to look for one.
    """
    if any(not parts for parts in paths):
        return value  # a path ends here: the whole value is wanted
    if not paths and not keep_failures:
        return _MISSING
    if isinstance(value, list):
        rest = [parts[1:] for parts in paths if parts[0] == "[]"]
        kept = [p for p in (_project(child, rest, keep_failures=keep_failures)
                            for child in value) if p is not _MISSING]
        return kept if kept else _MISSING
    if not isinstance(value, Mapping):
        return _MISSING
    projected = {}
    for key, child in value.items():
        if keep_failures and key in _FAILURE_KEYS and _reports_failure(child):
            projected[key] = child
            continue
        rest = [parts[1:] for parts in paths if parts[0] in (key, "*")]
        if (picked := _project(child, rest, keep_failures=keep_failures)) is not _MISSING:
            projected[key] = picked
    return projected if projected else _MISSING


def _reports_failure(value: Any) -> bool:
    """Whether an ``error``/``errors`` value reports a failure (null, false, "", [], {} do not)."""
    return value is not None and value is not False and value not in ("", [], {})


def _unwrap(value: Any) -> Any:
    """Drop success-envelope fields and a lone ``data``/``result`` wrapper."""
    if type(value) is not dict and not isinstance(value, Mapping):
        return value
    kept = {k: v for k, v in value.items() if not _is_ok_envelope(k, v)}
    if not kept:  # nothing but the envelope: it is the whole answer ("success: true"), not {}
        return value
    if len(kept) == 1:
        (only_key, only_value), = kept.items()
        if only_key in ("data", "result", "results", "response") and isinstance(
            only_value, Mapping | list
        ):
            return _unwrap(only_value)
    return kept


def _is_ok_envelope(key: str, value: Any) -> bool:
    accepted = _ENVELOPE_OK.get(key)
    # Not ``value in accepted``: False == 0 and True == 1, so ``code: false`` would pass as 0.
    return accepted is not None and any(
        isinstance(value, bool) is isinstance(ok, bool) and value == ok for ok in accepted)


def _flatten(value: Any, path: str) -> Iterable[str]:
    if isinstance(value, str):  # a field's value, most often: no abstract type to try
        yield f"{path}: {_scalar(value, field=True)}" if path else _scalar(value, field=True)
    elif type(value) is dict or isinstance(value, Mapping):
        if not value and path:
            yield f"{path}: {{}}"  # as an empty list shows as []: the key itself says something
        for key, child in value.items():
            name = quoted_key(str(key))
            yield from _flatten(child, f"{path}.{name}" if path else name)
    elif isinstance(value, list):
        if _is_table(value):
            yield _table(value, path)
        elif all(not isinstance(child, Mapping | list) for child in value):
            rendered = "; ".join(_scalar(child, listed=True) for child in value)
            yield f"{path}: [{rendered}]" if path else f"[{rendered}]"
        else:
            for index, child in enumerate(value):
                yield from _flatten(child, f"{path}[{index}]")
    else:
        yield f"{path}: {_scalar(value, field=True)}" if path else _scalar(value, field=True)


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
    columns = ", ".join(quoted_key(str(key)) for key in rows[0])
    body = "; ".join("(" + ", ".join(_scalar(v, cell=True) for v in row.values()) + ")"
                     for row in rows)
    return f"{path or 'rows'} ({len(rows)} rows) [{columns}]: {body}"


_LITERALS = frozenset(("null", "true", "false"))
_FORGES_FIELD = re.compile(r"[,;]\s*[^\s,;:][^,;:]*:(?:\s|$)")
"""A separator and a ``key:`` after it: in a list of fields, a new field would seem to begin."""
_FORGES_CELL = re.compile(r"[,;]\s|[()\[\]]|\d[,;]\d")
"""A separator of cells or rows, a row's bracket, or a comma between digits ("1,200" would read as
the cells "1" and "200")."""
_FORGES_KEY = re.compile(r"[,;\[\]]|:(?:\s|$)|^$|^\s|\s$")


def quoted_key(key: str) -> str:
    """A key as shown before its value or among column names; quoted when it would misread.

    That is when it holds a separator, a square bracket or a colon that reads as its end
    (``{"a, b: c": 1}`` must not read as two fields), is empty or has outer spaces.
    """
    return encode_basestring(key) if _FORGES_KEY.search(key) else key


def quoted_value(text: str, *, cell: bool) -> str:
    """A string as shown among others: quoted (as JSON) when it would read as something else.

    ``cell``: it stands in a row or a list, between ", " and "; " and inside brackets, so any of
    those, or a comma between digits, would split it. Otherwise it is a field's value, and only
    a separator followed by what reads as a new ``key:`` would. Either way the strings "null",
    "true" and "false", an empty string and one with outer spaces are quoted.
    """
    forges = _FORGES_CELL if cell else _FORGES_FIELD
    if text in _LITERALS or not text or text != text.strip() or forges.search(text):
        return encode_basestring(text)
    return text


def _scalar(value: Any, *, listed: bool = False, field: bool = False, cell: bool = False
            ) -> str:
    """A JSON scalar as shown; a string that would read as something else is quoted.

    The string ``"null"`` is not ``null``; in a list, a string holding the list's separator
    (``"Doe; Jane"``), an empty one or one with outer spaces would read as other items; in a
    table row (``cell``) or among fields (``field``), see ``quoted_value``.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, str) or isinstance(value, JsonNumber):
        return str(value)
    if cell or field:
        return quoted_value(value, cell=cell)
    if value in _LITERALS or (listed and ("; " in value or value != value.strip()
                                          or not value)):
        return encode_basestring(value)
    return value


register_cache("compress.json_compact.compact", _compact_cached)
