"""The registry of the library's process-wide caches, so one call clears every one of them.

Long histories are cheap to re-read because parses, items, renderings and token counts are
remembered across builds. Each module-level cache registers itself where it is defined
(``register_cache``), so ``contextwright.clear_caches()`` needs no list of private names that
goes stale, and a test fails when a module adds a cache without registering it. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

__all__ = ["clear_registered_caches", "register_cache", "register_clear", "registered_caches"]

T = TypeVar("T")

_REGISTRY: dict[str, tuple[object, Callable[[], None]]] = {}


def register_cache(name: str, cache: T) -> T:
    """Register ``cache`` (a dict-like with ``clear`` or an ``lru_cache``) and return it.

    ``name`` is ``module.what``; registering another object under a taken name is an error
    (re-registering the same object, as a reloaded module does, is not).
    """
    clear = getattr(cache, "cache_clear", None) or getattr(cache, "clear", None)
    if not callable(clear):
        raise TypeError(f"cache {name!r} has neither cache_clear() nor clear()")
    return _register(name, cache, clear)


def register_clear(name: str, owner: T, clear: Callable[[], None]) -> T:
    """Register a cache that needs its own way of clearing (a lock, several parts)."""
    return _register(name, owner, clear)


def _register(name: str, cache: T, clear: Callable[[], None]) -> T:
    known = _REGISTRY.get(name)
    if known is not None and known[0] is not cache:
        raise ValueError(f"a different cache is already registered as {name!r}")
    _REGISTRY[name] = (cache, clear)
    return cache


def registered_caches() -> Mapping[str, object]:
    """The registered caches by name."""
    return {name: cache for name, (cache, _) in _REGISTRY.items()}


def clear_registered_caches() -> None:
    """Clear every registered cache."""
    for _, clear in list(_REGISTRY.values()):
        clear()
