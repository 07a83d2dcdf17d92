"""The shape a snapshot record must have before ``Snapshot.from_dict`` trusts it.

A snapshot comes back from a file, a sink line or another process, so its fields are checked
for the types every reader (views, diff, replay, queries, metrics) relies on: a field of the
wrong type is a ``CorruptRecordError`` naming the field, never a ``TypeError`` three calls
later. Nested rows are checked only for the keys readers use; other keys pass, so a record
written by a newer version stays readable. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from contextwright.errors import CorruptRecordError

Check = Callable[[object], bool]


def _is_int(value: object) -> bool:
    return type(value) is int  # a bool is an int to Python, never to a snapshot


def _is_number(value: object) -> bool:
    return type(value) in (int, float)


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


def _is_mapping(value: object) -> bool:
    return isinstance(value, Mapping)


def _is_list(value: object) -> bool:
    return isinstance(value, list | tuple)


def _list_of(check: Check) -> Check:
    return lambda value: isinstance(value, list | tuple) and all(map(check, value))


def _or_none(check: Check) -> Check:
    return lambda value: value is None or check(value)


def _is_text(value: object) -> bool:
    """A text as a snapshot keeps it: the text itself, or (redacted) its hash and size."""
    return isinstance(value, str | Mapping)


def _is_session(value: object) -> bool:
    """A manager's session: its user and session ids (hashed or not).

    Views, queries, sink indexes and span attributes all read both as strings.
    """
    return (isinstance(value, Mapping) and isinstance(value.get("user_id"), str)
            and isinstance(value.get("session_id"), str))


def _is_image(value: object) -> bool:
    """An image as a snapshot records it: diff tells images apart by their ``digest``."""
    return isinstance(value, Mapping) and isinstance(value.get("digest"), str)


_TOP_LEVEL: dict[str, tuple[Check, str]] = {
    "id": (_is_str, "a string"),
    "created_at": (_is_number, "a number"),
    "status": (lambda v: v in ("ok", "budget_error"), "ok or budget_error"),
    "plan": (_is_str, "a string"),
    "plan_hash": (_is_str, "a string"),
    "tokenizer": (_is_str, "a string"),
    "exact_tokens": (_is_bool, "true or false"),
    "library_version": (_is_str, "a string"),
    "window": (_is_int, "an integer"),
    "available": (_is_int, "an integer"),
    "total_tokens": (_is_int, "an integer"),
    "build_ms": (_is_number, "a number"),
    "redacted": (_is_bool, "true or false"),
    "sources": (_is_list, "a list"),
    "decisions": (_is_list, "a list"),
    "messages": (_is_list, "a list"),
    "request": (_is_mapping, "an object"),
    "tools": (_or_none(_is_list), "a list or null"),
    "plan_spec": (_is_mapping, "an object"),
    "warnings": (_list_of(_is_str), "a list of strings"),
    "mode": (_or_none(_is_str), "a string or null"),
    "route": (_or_none(_is_mapping), "an object or null"),
    "switch": (_or_none(_is_mapping), "an object or null"),
    "session": (_or_none(_is_session), "an object of user_id and session_id strings, or null"),
    "hashing": (_or_none(_is_mapping), "an object or null"),
    "cache": (_or_none(_is_mapping), "an object or null"),
    "target": (lambda v: v in (None, "chat", "text"), "chat, text or null"),
    "image_rule": (_or_none(_is_str), "a string or null"),
    "error": (_or_none(_is_str), "a string or null"),
    "labels": (_is_mapping, "an object"),
}
"""Each field of the record that is present, and what it must be (absent required fields are
found when the snapshot is made)."""

_ROW_KEYS: dict[str, tuple[dict[str, Check], dict[str, Check]]] = {
    "sources": (
        {"source": _is_str, **dict.fromkeys(
            ("budget", "tokens", "items", "truncated", "compacted", "dropped"), _is_int)},
        {"error": _or_none(_is_str), "cuttable": _is_bool, "weight": _is_number}),
    "decisions": (
        dict.fromkeys(("source", "key", "action", "reason"), _is_str),
        {**dict.fromkeys(("tokens_before", "tokens_after", "count"), _is_int),
         "detail": _or_none(_is_text)}),
    "messages": (
        {},
        {"role": _is_str, "section": _is_str, "tokens": _is_int, "content": _is_text,
         "id": _is_str, "name": _is_str, "label": _is_str, "item": _is_str,
         "recalled": _is_bool,
         "tool_calls": _list_of(_is_mapping), "thinking": _list_of(_is_mapping),
         "images": _list_of(_is_image)}),
    "tools": ({"name": _is_str, "tokens": _is_int, "sha256": _is_str}, {}),
}
"""Per list field: the keys every row must have and the keys a row may have, with their types."""


def check_snapshot_fields(data: Mapping[str, Any]) -> None:
    """``CorruptRecordError`` naming the first field of ``data`` that readers could not use."""
    for name, (check, expected) in _TOP_LEVEL.items():
        if name in data and not check(data[name]):
            raise CorruptRecordError(f"a snapshot record's {name} is not {expected}")
    for name, (required, optional) in _ROW_KEYS.items():
        for index, row in enumerate(data.get(name) or ()):
            _check_row(f"{name}[{index}]", row, required, optional)


def _check_row(where: str, row: object, required: Mapping[str, Check],
               optional: Mapping[str, Check]) -> None:
    if not isinstance(row, Mapping):
        raise CorruptRecordError(f"a snapshot record's {where} is not an object")
    for key, check in required.items():
        if key not in row:
            raise CorruptRecordError(f"a snapshot record's {where} lacks {key}")
        if not check(row[key]):
            raise CorruptRecordError(f"a snapshot record's {where}.{key} has the wrong type")
    for key, check in optional.items():
        if key in row and not check(row[key]):
            raise CorruptRecordError(f"a snapshot record's {where}.{key} has the wrong type")
