"""Parsing of plan, modes, request and dataset files with bounded work: bytes in, plain data out.

Such files may come from a careless or hostile hand, so parsing never raises anything but
``MalformedDocument``, with a one-line message that names the line or byte, not the content:
invalid UTF-8, a syntax error, YAML aliases (one 448-byte alias bomb expands to gigabytes; plain
data has no use for them) and nesting deeper than ``MAX_DEPTH`` (which would otherwise end in a
``RecursionError`` in the parser or in whatever walks the data next). Callers turn it into their
own typed error (``PlanError``, ``InvalidInputError``, ``DatasetError``). Pure: no file access.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Hashable
from typing import Any, Literal

import yaml
from yaml.nodes import Node

MAX_DEPTH = 100
"""Deepest nesting of lists and mappings accepted (real plans and requests need under 10)."""

Format = Literal["yaml", "json", "toml"]


class MalformedDocument(ValueError):
    """A document cannot be parsed safely; the message is one line without the content."""


def decode_utf8(data: bytes) -> str:
    """``data`` as text; ``MalformedDocument`` naming the first bad byte if it is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedDocument(f"not valid UTF-8 (byte {exc.start})") from None


def parse_document(data: bytes | str, fmt: Format, *, finite: bool = False) -> Any:
    """The plain data (dicts, lists, scalars) of a YAML, JSON or TOML document.

    ``finite`` (JSON only): refuse ``NaN``, ``Infinity`` and numbers too large for a float.
    Python's ``json`` reads them, but they are not JSON: data sent on as JSON (the service's
    bodies, rendered into provider requests) could not be written back out.
    """
    text = decode_utf8(data) if isinstance(data, bytes) else data
    try:
        value = _parse_json(text, finite=True) if finite and fmt == "json" else _PARSERS[fmt](text)
    except RecursionError:
        raise MalformedDocument(f"nested deeper than {MAX_DEPTH} levels") from None
    check_depth(value)
    return value


def check_depth(value: object, limit: int = MAX_DEPTH) -> None:
    """Raise ``MalformedDocument`` if lists and mappings in ``value`` nest deeper than ``limit``.

    Iterative, so it cannot itself run out of stack on the input it is there to refuse.
    """
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: list[Any] = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            raise MalformedDocument(f"nested deeper than {limit} levels")
        stack.extend((child, depth + 1) for child in children)


def _parse_json(text: str, *, finite: bool = False) -> Any:
    hooks: dict[str, Any] = FINITE_NUMBERS if finite else {}
    try:
        return json.loads(text, object_pairs_hook=unique_keys, **hooks)
    except json.JSONDecodeError as exc:
        raise MalformedDocument(f"line {exc.lineno}: {exc.msg}") from None
    except MalformedDocument:
        raise
    except ValueError:
        # ``int()`` refuses an integer past ``sys.get_int_max_str_digits()`` (4300 digits).
        raise MalformedDocument("a number has too many digits to read") from None


def _no_constant(name: str) -> Any:
    raise MalformedDocument(f"{name} is not a JSON number (send finite numbers only)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise MalformedDocument("a number is too large for a float (send finite numbers only)")
    return value


FINITE_NUMBERS: dict[str, Any] = {"parse_constant": _no_constant, "parse_float": _finite_float}
"""``json.loads`` hooks that refuse what strict JSON parsers and the providers refuse (``NaN``,
``Infinity``, a number too large for a float) with ``MalformedDocument``."""


class DuplicateKeyError(MalformedDocument):
    """A JSON object names a key twice: ``json`` would silently keep the last value."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A ``json.loads`` object hook: the object; ``DuplicateKeyError`` when a key repeats."""
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(f"key {key!r} appears twice in one object")
            seen.add(key)
    return data


def _parse_toml(text: str) -> Any:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MalformedDocument(" ".join(str(exc).split())) from None


def _parse_yaml(text: str) -> Any:
    loader = _PlainDataLoader(text)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        where = f"line {exc.problem_mark.line + 1}: " if exc.problem_mark else ""
        raise MalformedDocument(f"{where}{exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise MalformedDocument(" ".join(str(exc).split())) from None
    finally:
        loader.dispose()


_PARSERS = {"yaml": _parse_yaml, "json": _parse_json, "toml": _parse_toml}


class _PlainDataLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses aliases and stops composing past ``MAX_DEPTH``.

    Refusing at composition means an alias bomb costs nothing and deep nesting never
    reaches the recursion limit.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        """Compose one node, refusing an alias and counting the nesting depth."""
        if self.check_event(yaml.AliasEvent):
            event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
            line = event.start_mark.line + 1 if event.start_mark else "?"
            raise MalformedDocument(f"line {line}: YAML aliases (*name) are not allowed")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise MalformedDocument(f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """A mapping, refused when a key repeats: the later one would silently win."""
        self.flatten_mapping(node)  # merge keys (<<) first, as the base class does
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, Hashable) and key in seen:
                raise MalformedDocument(
                    f"line {key_node.start_mark.line + 1}: key {key!r} appears twice")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)
