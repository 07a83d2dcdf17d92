"""Reading a dataset folder: required files, JSON / JSON Lines, typed field access.

Every problem becomes a ``DatasetError`` naming the folder, file, line or field — never the
content — so a folder that is not laid out like ``../shared/data/<set>`` fails with a message
that says what to fix.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from contextwright.errors import DatasetError

T = TypeVar("T")
Row = Mapping[str, Any]


def require_files(folder: Path, names: Sequence[str], layout: str) -> None:
    """Raise unless ``folder`` is a directory holding every file in ``names``."""
    if not folder.is_dir():
        raise DatasetError(f"{folder} is not a directory (expected a folder laid out like "
                           f"{layout})")
    missing = [name for name in names if not (folder / name).is_file()]
    if missing:
        raise DatasetError(f"{folder} is not laid out like {layout}: missing "
                           f"{', '.join(missing)}")


def read_json(path: Path) -> Any:
    """The parsed JSON document at ``path``."""
    try:
        return json.loads(path.read_text("utf-8"))
    except UnicodeDecodeError:
        raise DatasetError(f"{path} is not UTF-8") from None
    except ValueError as exc:
        raise DatasetError(f"{path} is not valid JSON (line {_line(exc)})") from None


def read_jsonl(path: Path) -> list[Row]:
    """The objects of a JSON Lines file (blank lines skipped)."""
    rows: list[Row] = []
    try:
        lines = path.read_text("utf-8").splitlines()
    except UnicodeDecodeError:
        raise DatasetError(f"{path} is not UTF-8") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise DatasetError(f"{path}:{number} is not valid JSON") from None
        if not isinstance(row, dict):
            raise DatasetError(f"{path}:{number} is not a JSON object")
        rows.append(row)
    return rows


def get(row: Row, name: str, kind: type[T] | tuple[type, ...], where: str) -> T:
    """``row[name]``, checked to be of ``kind``; ``where`` names the row in the error."""
    if not isinstance(row, Mapping) or name not in row:
        raise DatasetError(f"{where}: field {name!r} is missing")
    value = row[name]
    # bool is an int in Python; a true/false where a number belongs is a schema error.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise DatasetError(f"{where}: field {name!r} has the wrong type")
    return value  # type: ignore[return-value]


def _line(exc: ValueError) -> object:
    return getattr(exc, "lineno", "?")


def spread(items: Sequence[T], limit: int | None) -> tuple[T, ...]:
    """``limit`` items spread evenly over ``items`` (first and order kept); all when ``None``.

    Sets are stored grouped (LoCoMo by conversation, early evidence first), so the first N
    cases would not be a fair sample; evenly spread ones are, and stay the same on every run.
    """
    if limit is None or limit >= len(items):
        return tuple(items)
    return tuple(items[i * len(items) // limit] for i in range(limit))
