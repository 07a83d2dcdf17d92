"""Checks of numeric settings that constructors and configs share: whole numbers and seconds.

One rule and one wording everywhere: a bool is no number (``True`` would read as 1), seconds
are finite (NaN compares false with everything, so it slips past a plain ``> 0``), and the
message names the setting and what it takes. ``error`` makes the exception a caller raises for
its kind of setting (``InvalidInputError`` unless given: a plan's ``PlanError``, the LLM
client's ``LLMError`` of kind ``config``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeGuard

from contextwright.errors import InvalidInputError

ErrorFor = Callable[[str], Exception]
"""Makes the exception to raise from the message."""


def whole_number(value: object, field: str, *, minimum: int = 0,
                 error: ErrorFor = InvalidInputError) -> int:
    """``value`` if it is an ``int`` (not a bool) of at least ``minimum``, else ``error``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise error(f"{field} must be a whole number >= {minimum}")
    return value


def seconds(value: object, field: str, *, zero: bool = False,
            error: ErrorFor = InvalidInputError) -> float:
    """``value`` as seconds if it is a finite number > 0 (>= 0 with ``zero``), else ``error``."""
    if not _is_seconds(value, zero=zero):
        raise error(f"{field} must be a number of seconds {'>= 0' if zero else '> 0'}")
    return float(value)


def optional_seconds(value: object, field: str, *,
                     error: ErrorFor = InvalidInputError) -> float | None:
    """``seconds``, or None when ``value`` is None (no limit)."""
    if value is None:
        return None
    if not _is_seconds(value, zero=False):
        raise error(f"{field} must be None or a number of seconds > 0")
    return float(value)


def _is_seconds(value: object, *, zero: bool) -> TypeGuard[int | float]:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return False
    return value >= 0 if zero else value > 0
