"""Reading a dataset folder: required files, JSON / JSON Lines, typed field access.

Every problem becomes a ``DatasetError`` naming the folder, file, line or field — never the
content — so a folder that is not laid out like ``../shared/data/<set>`` fails with a message
that says what to fix. Documents are parsed with bounded work (``core.parsing``), so invalid
UTF-8 or nesting deep enough to exhaust the stack is a ``DatasetError`` too.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from contextwright.core.parsing import MalformedDocument, decode_utf8, parse_document
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
        return parse_document(_read_bytes(path), "json")
    except MalformedDocument as exc:
        raise DatasetError(f"{path} is not valid JSON: {exc}") from None


def read_jsonl(path: Path) -> list[Row]:
    """The objects of a JSON Lines file (blank lines skipped)."""
    return [row for _, row in read_jsonl_lines(path)]


def read_jsonl_lines(path: Path) -> list[tuple[int, Row]]:
    """The objects of a JSON Lines file with the line each is on (from 1; blank lines skipped).

    The number is the line an editor opens at, so a message about a row should name
    ``f"{path}:{line}"`` (``line_of``), not the row's count among the rows.
    """
    rows: list[tuple[int, Row]] = []
    try:
        # Only "\n" ends a line: JSON allows U+2028, U+2029 and U+0085 raw inside a string
        # (json.dumps with ensure_ascii=False writes them), and splitlines() would cut there.
        lines = decode_utf8(_read_bytes(path)).split("\n")
    except MalformedDocument as exc:
        raise DatasetError(f"{path} is {exc}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = parse_document(line, "json")
        except MalformedDocument:
            raise DatasetError(f"{path}:{number} is not valid JSON") from None
        if not isinstance(row, dict):
            raise DatasetError(f"{path}:{number} is not a JSON object")
        rows.append((number, row))
    return rows


def line_of(path: Path, line: int) -> str:
    """How a message names a row of a JSON Lines file: ``path:line``."""
    return f"{path}:{line}"


def get(row: Row, name: str, kind: type[T] | tuple[type, ...], where: str) -> T:
    """``row[name]``, checked to be of ``kind``; ``where`` names the row in the error."""
    if not isinstance(row, Mapping) or name not in row:
        raise DatasetError(f"{where}: field {name!r} is missing")
    value = row[name]
    # bool is an int in Python; a true/false where a number belongs is a schema error.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise DatasetError(f"{where}: field {name!r} has the wrong type")
    return value  # type: ignore[return-value]


def _read_bytes(path: Path) -> bytes:
    """The file's bytes without a leading UTF-8 byte order mark (a file saved by Notepad)."""
    try:
        return path.read_bytes().removeprefix(codecs.BOM_UTF8)
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc.strerror}") from None


def read_text(path: Path) -> str:
    """The UTF-8 text of ``path`` (a leading byte order mark dropped)."""
    try:
        return decode_utf8(_read_bytes(path))
    except MalformedDocument as exc:
        raise DatasetError(f"{path} is {exc}") from None


def spread(items: Sequence[T], limit: int | None) -> tuple[T, ...]:
    """``limit`` items spread evenly over ``items`` (first and order kept); all when ``None``.

    Sets are stored grouped (LoCoMo by conversation, early evidence first), so the first N
    cases would not be a fair sample; evenly spread ones are, and stay the same on every run.
    """
    if limit is None or limit >= len(items):
        return tuple(items)
    return tuple(items[i * len(items) // limit] for i in range(limit))
