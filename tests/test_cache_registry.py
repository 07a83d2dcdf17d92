"""Every process-wide cache is registered, and ``clear_caches()`` empties every one.

A cache that is not registered is memory ``clear_caches()`` cannot free and state a benchmark's
cold build silently keeps; this test walks every module of the library to find one.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from types import ModuleType

import contextwright
from contextwright import BuildPlan, ContextBuilder, Request, clear_caches
from contextwright.core.caches import (
    BoundedCache,
    cache_stats,
    register_cache,
    registered_caches,
)

EMPTY_BY_DESIGN: frozenset[str] = frozenset()
"""Module-level empty dicts that are no caches (none today)."""


def modules() -> list[ModuleType]:
    found = []
    for info in pkgutil.walk_packages(contextwright.__path__, "contextwright."):
        found.append(importlib.import_module(info.name))
    return found


def unregistered(module: ModuleType) -> list[str]:
    """Module-level caches of ``module`` not in the registry: ``BoundedCache`` objects,
    ``lru_cache`` (and ``memoized``) functions defined there, and dicts that are empty at
    import under a constant's name (``_SEEN``)."""
    registered = {id(cache) for cache in registered_caches().values()}
    found = []
    for name, value in vars(module).items():
        if isinstance(value, BoundedCache):
            is_cache = True
        elif callable(getattr(value, "cache_clear", None)) and not isinstance(value, type):
            is_cache = getattr(value, "__module__", None) == module.__name__
        else:
            is_cache = isinstance(value, dict) and not value and name.lstrip("_").isupper()
        where = f"{module.__name__}.{name}"
        if is_cache and id(value) not in registered and where not in EMPTY_BY_DESIGN:
            found.append(where)
    return found


def test_every_module_level_cache_is_registered() -> None:
    missing = [where for module in modules() for where in unregistered(module)]
    assert not missing, f"caches not registered with core.caches.register_cache: {missing}"


def test_the_check_finds_an_unregistered_cache() -> None:
    probe = ModuleType("contextwright_probe")

    @functools.lru_cache(maxsize=8)
    def remembered(text: str) -> str:
        return text

    remembered.__module__ = probe.__name__
    probe.remembered = remembered  # type: ignore[attr-defined]
    probe._SEEN = {}  # type: ignore[attr-defined]
    probe._TABLE = {"a": 1}  # type: ignore[attr-defined]  # a constant, not a cache
    probe._BOUNDED = BoundedCache(  # type: ignore[attr-defined]
        "tests.registry.bounded", max_entries=8, share=0.01, size=lambda _, __: 1)
    assert unregistered(probe) == ["contextwright_probe.remembered", "contextwright_probe._SEEN",
                                   "contextwright_probe._BOUNDED"]
    register_cache("tests.registry.bounded", probe._BOUNDED)  # type: ignore[attr-defined]
    register_cache("tests.registry.seen", probe._SEEN)  # type: ignore[attr-defined]
    assert unregistered(probe) == ["contextwright_probe.remembered"]


def test_clear_caches_empties_every_registered_cache() -> None:
    history = [{"role": "user" if i % 2 == 0 else "assistant",
                "content": f"turn {i} about order ORD-{1000 + i}"} for i in range(60)]
    ContextBuilder().build(BuildPlan.named("chat"), Request(user_input="ORD-1010?",
                                                            history=history))
    filled = [name for name, stats in cache_stats().items() if stats.entries]
    assert "core.items.parsed" in filled and "tokens.counts.o200k_base" in filled
    clear_caches()
    left = [name for name, stats in cache_stats().items() if stats.entries]
    assert set(cache_stats()) == set(registered_caches())  # every cache reports its entries
    assert not left, f"not emptied by clear_caches(): {left}"


def test_a_name_is_registered_once() -> None:
    cache: dict[str, int] = {}
    register_cache("tests.registry.probe", cache)
    register_cache("tests.registry.probe", cache)  # the same object again: fine
    import pytest

    with pytest.raises(ValueError, match="already registered"):
        register_cache("tests.registry.probe", {})
    with pytest.raises(TypeError):
        register_cache("tests.registry.other", 42)
