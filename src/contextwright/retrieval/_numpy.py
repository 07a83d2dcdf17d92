"""numpy, imported once with a clear error when the ``retrieval`` extra is not installed."""

from __future__ import annotations

import importlib
from typing import Any

from contextwright.errors import ContextwrightError


def _load() -> Any:
    try:
        return importlib.import_module("numpy")
    except ImportError:
        raise ContextwrightError(
            "retrieval needs numpy: pip install 'contextwright[retrieval]'") from None


np: Any = _load()
