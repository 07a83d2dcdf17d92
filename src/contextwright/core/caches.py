"""The registry of the library's process-wide caches, their memory bounds and their statistics.

Long histories are cheap to re-read because parses, items, renderings and token counts are
remembered across builds. Each module-level cache registers itself where it is defined
(``register_cache``), so ``contextwright.clear_caches()`` needs no list of private names that
goes stale, and a test fails when a module adds a cache without registering it.

The caches that hold text (renderings, parses, token counts keyed by content) are
``BoundedCache`` objects, bounded by entries *and* by approximate bytes: a fixed entry count of
10,000-message histories can otherwise hold gigabytes. Each has a share of one process-wide byte
budget (``DEFAULT_TOTAL_BYTES``, the ``CONTEXTWRIGHT_CACHE_MB`` environment variable, or
``set_cache_limits``); ``cache_stats()`` reports entries, bytes, hits and misses per cache.
Pure: no I/O (the environment is read once, at import).
"""

from __future__ import annotations

import os
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from functools import update_wrapper
from typing import Any, Generic, ParamSpec, TypeVar, cast

__all__ = [
    "DEFAULT_INDEX_BYTES",
    "DEFAULT_TOTAL_BYTES",
    "BoundedCache",
    "CacheStats",
    "GrowingCache",
    "MappingCache",
    "MemoDict",
    "cache_limits",
    "cache_stats",
    "call_bytes",
    "clear_registered_caches",
    "memoized",
    "register_cache",
    "register_clear",
    "registered_caches",
    "set_cache_limits",
    "text_bytes",
]

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_TOTAL_BYTES = 256 * 2**20
"""The process-wide budget of the byte-bounded caches when nothing else is configured."""

DEFAULT_INDEX_BYTES = 256 * 2**20
"""The process-wide budget of the recall indexes (``GrowingCache``, and the recalled turns'
renderings) when nothing else is configured. Apart from the caches' budget: an index is the
working set of the sessions being served, not a memo, and the caches' shares are spent."""

ENTRY_BYTES = 160
"""What one entry costs besides its text: its hash-table slot, key and value tuples."""

_MB = 2**20
_POOLS = frozenset(("caches", "indexes"))

_REGISTRY: dict[str, tuple[object, Callable[[], None]]] = {}


# --------------------------------------------------------------------------- registry
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


# --------------------------------------------------------------------------- limits
@dataclass
class _Limits:
    total_bytes: int
    per_cache: dict[str, int]
    count_hits: bool
    index_bytes: int = DEFAULT_INDEX_BYTES

    def pool_bytes(self, pool: str) -> int:
        return self.index_bytes if pool == "indexes" else self.total_bytes


def _env_total_bytes(variable: str = "CONTEXTWRIGHT_CACHE_MB",
                     default: int = DEFAULT_TOTAL_BYTES) -> int:
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return default
    try:
        megabytes = float(raw)
    except ValueError:
        raise ValueError(f"{variable} must be a number of megabytes") from None
    if not megabytes >= 0:  # also rejects NaN
        raise ValueError(f"{variable} must be a number of megabytes, at least 0")
    return int(megabytes * _MB)


_LIMITS = _Limits(total_bytes=_env_total_bytes(), per_cache={},
                  count_hits=os.environ.get("CONTEXTWRIGHT_CACHE_STATS", "") not in ("", "0"),
                  index_bytes=_env_total_bytes("CONTEXTWRIGHT_INDEX_MB", DEFAULT_INDEX_BYTES))


def set_cache_limits(total_bytes: int | None = None, *,
                     per_cache: Mapping[str, int | None] | None = None,
                     count_hits: bool | None = None, index_bytes: int | None = None) -> None:
    """Change the memory bounds of the byte-bounded caches; each argument left None is kept.

    ``total_bytes``: the process-wide budget; each cache gets its ``share`` of it.
    ``per_cache``: byte limits by cache name, overriding the share (names as ``cache_stats``
    shows them; a name not registered yet applies when that cache is created); None for a
    name removes its override.
    ``index_bytes``: the process-wide budget of the recall indexes (the ``indexes`` pool; the
    ``CONTEXTWRIGHT_INDEX_MB`` environment variable at import).
    ``count_hits``: count every hit (a few per cent of a steady build; off by default, the
    ``CONTEXTWRIGHT_CACHE_STATS=1`` environment variable turns it on). Misses are always counted.
    A cache over its new bound drops its oldest entries at once.
    """
    total = None if total_bytes is None else _checked_bytes("total_bytes", total_bytes)
    indexes = None if index_bytes is None else _checked_bytes("index_bytes", index_bytes)
    limits = {name: None if limit is None else _checked_bytes(f"per_cache[{name!r}]", limit)
              for name, limit in (per_cache or {}).items()}  # all checked before any applies
    if total is not None:
        _LIMITS.total_bytes = total
    if indexes is not None:
        _LIMITS.index_bytes = indexes
    for name, limit in limits.items():
        if limit is None:
            _LIMITS.per_cache.pop(name, None)
        else:
            _LIMITS.per_cache[name] = limit
    if count_hits is not None:
        _LIMITS.count_hits = bool(count_hits)
    for cache in list(_LIVE):
        cache.apply_limits()
    for growing in list(_LIVE_GROWING.values()):
        growing.apply_limits()
    for memo in list(_LIVE_MEMOS.values()):
        memo.apply_limits()


def cache_limits() -> Mapping[str, Any]:
    """The limits in force: the two budgets, ``per_cache`` overrides and ``count_hits``."""
    return {"total_bytes": _LIMITS.total_bytes, "index_bytes": _LIMITS.index_bytes,
            "per_cache": dict(_LIMITS.per_cache),
            "count_hits": _LIMITS.count_hits}


def _checked_bytes(what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a whole number of bytes, at least 0")
    return value


def text_bytes(text: str) -> int:
    """Approximate memory of ``text``'s characters: one byte each if ASCII, else two.

    O(1) (``isascii`` reads a flag of the string), so it can run on every insert. Non-ASCII
    text is mostly two bytes a character in CPython (CJK); four-byte text is counted low.
    """
    return len(text) if text.isascii() else 2 * len(text)


def _shallow_bytes(value: object) -> int:
    if isinstance(value, str):
        return text_bytes(value)
    if isinstance(value, tuple | frozenset | list):
        return 56 + sum(text_bytes(v) + 50 if isinstance(v, str) else 32 for v in value)
    return 32


def call_bytes(args: tuple[Any, ...], value: object) -> int:
    """Approximate bytes of a remembered call: its text arguments and its text (or texts)."""
    return sum(map(_shallow_bytes, args)) + _shallow_bytes(value)


# --------------------------------------------------------------------------- the cache
@dataclass(frozen=True)
class CacheStats:
    """One cache's state, for observability (``cache_stats``)."""

    entries: int
    bytes: int | None
    """Approximate bytes held (None: a cache bounded by entries only)."""
    max_entries: int | None
    max_bytes: int | None
    hits: int | None
    """None when hits are not counted (see ``set_cache_limits(count_hits=...)``)."""
    misses: int | None
    evictions: int | None

    def to_dict(self) -> dict[str, int | None]:
        """The statistics as JSON-ready data (for a metrics endpoint or a log line)."""
        return {"entries": self.entries, "bytes": self.bytes, "max_entries": self.max_entries,
                "max_bytes": self.max_bytes, "hits": self.hits, "misses": self.misses,
                "evictions": self.evictions}


def _check_bounds(name: str, max_entries: int, share: float, pool: str) -> None:
    """A two-generation cache's bounds: two entries at least, a share in (0, 1], a known pool."""
    if max_entries < 2:
        raise ValueError(f"cache {name!r}: max_entries must be at least 2")
    if not 0 < share <= 1:
        raise ValueError(f"cache {name!r}: share must be in (0, 1]")
    if pool not in _POOLS:
        raise ValueError(f"cache {name!r}: pool must be one of {sorted(_POOLS)}")


class BoundedCache(Generic[K, V]):
    """A mapping bounded by entries and approximate bytes, evicting the least recently used.

    Two generations, so a hit costs exactly one C ``dict.get``: ``get`` is the bound ``get`` of
    the young generation. Entries go into the young one; when it reaches half of either bound
    it becomes the old one, and the previous old one is dropped. A lookup that misses the young
    generation calls ``revive``, which moves an old entry back into the young one. So an entry
    used since the last turnover is never evicted, and the cache never holds more than its
    bounds. Callers use::

        hit = cache.get(key)
        if hit is None:
            hit = cache.revive(key)
        if hit is None (or stale):
            hit = cache.put(key, compute())

    ``size(key, value)`` estimates an entry's bytes cheaply (string and list lengths, see
    ``text_bytes``); ``ENTRY_BYTES`` is added to it. An entry larger than a quarter of the byte
    bound is not kept (it would push out everything else). Values may not be None.

    Thread-safe in the way a dict is: every step is one dict operation under the GIL; under
    concurrent puts the byte count may drift by an entry until the next turnover resets it.
    """

    __slots__ = ("__weakref__", "_old", "_old_bytes", "_size", "_young", "_young_bytes",
                 "evictions", "get", "hits", "max_bytes", "max_entries", "misses", "name",
                 "pool", "revived", "share")

    get: Callable[[K], V | None]
    """The young generation's ``dict.get``: a hit costs what a plain dict lookup does."""

    def __init__(self, name: str, *, max_entries: int, share: float,
                 size: Callable[[K, V], int], pool: str = "caches") -> None:
        """``share`` of the ``pool``'s budget: ``caches`` (``total_bytes``) or ``indexes``."""
        _check_bounds(name, max_entries, share, pool)
        self.name = name
        self.pool = pool
        self.share = share
        self.max_entries = max_entries
        self.max_bytes = 0
        self._size = size
        self._young: dict[K, V] = {}
        self._old: dict[K, V] = {}
        self._young_bytes = 0
        self._old_bytes = 0
        self.hits = 0
        self.revived = 0
        self.misses = 0
        self.evictions = 0
        self.apply_limits()
        _LIVE.add(self)

    def apply_limits(self) -> None:
        """Take the byte bound and hit counting now configured (``set_cache_limits``)."""
        override = _LIMITS.per_cache.get(self.name)
        self.max_bytes = override if override is not None else int(
            _LIMITS.pool_bytes(self.pool) * self.share)
        self._bind_get()
        if self._young_bytes * 2 > self.max_bytes or len(self._young) * 2 > self.max_entries:
            self._turn_over()  # each generation holds at most half of the bounds
        if self._old_bytes * 2 > self.max_bytes:
            self.evictions += len(self._old)
            self._old, self._old_bytes = {}, 0

    def _bind_get(self) -> None:
        self.get = self._counting_get if _LIMITS.count_hits else self._young.get

    def _counting_get(self, key: K) -> V | None:
        value = self._young.get(key)
        if value is not None:
            self.hits += 1
        return value

    def revive(self, key: K) -> V | None:
        """The old generation's entry for ``key``, moved back to the young one (None: a miss)."""
        value = self._old.pop(key, None)
        if value is None:
            self.misses += 1
            return None
        self.revived += 1
        size = self._size(key, value) + ENTRY_BYTES
        self._old_bytes -= size
        self._insert(key, value, size)
        return value

    def lookup(self, key: K) -> V | None:
        """The entry for ``key`` from either generation (None: a miss)."""
        value = self.get(key)
        return self.revive(key) if value is None else value

    def __setitem__(self, key: K, value: V) -> None:
        self.put(key, value)

    def put(self, key: K, value: V) -> V:
        """Remember ``value`` under ``key`` (replacing what was there) and return it."""
        size = self._size(key, value) + ENTRY_BYTES
        if size * 4 > self.max_bytes:
            return value  # too big to keep: it would evict everything else
        self._insert(key, value, size)
        return value

    def _insert(self, key: K, value: V, size: int) -> None:
        replaced = self._young.get(key)
        if replaced is not None:
            self._young_bytes -= self._size(key, replaced) + ENTRY_BYTES
        elif ((self._young_bytes + size) * 2 > self.max_bytes
              or (len(self._young) + 1) * 2 > self.max_entries):
            self._turn_over()  # first, so neither generation ever holds more than half
        self._young[key] = value
        self._young_bytes += size

    def _turn_over(self) -> None:
        """The young generation becomes the old one; the old one's entries are dropped."""
        self.evictions += len(self._old)
        self._old, self._old_bytes = self._young, self._young_bytes
        self._young, self._young_bytes = {}, 0
        self._bind_get()

    def clear(self) -> None:
        """Forget every entry (the statistics are kept)."""
        self._old, self._old_bytes = {}, 0
        self._young.clear()
        self._young_bytes = 0

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def __contains__(self, key: object) -> bool:
        return key in self._young or key in self._old

    @property
    def bytes(self) -> int:
        """Approximate bytes held."""
        return max(0, self._young_bytes + self._old_bytes)

    def stats(self) -> CacheStats:
        """Entries, bytes, bounds, hits (when counted), misses and evictions."""
        return CacheStats(
            entries=len(self), bytes=self.bytes, max_entries=self.max_entries,
            max_bytes=self.max_bytes,
            hits=self.hits + self.revived if _LIMITS.count_hits else None,
            misses=self.misses, evictions=self.evictions)


class MappingCache(BoundedCache[K, V]):
    """A ``BoundedCache`` used as a plain mapping, for callers written against a dict.

    ``get`` looks in both generations; ``cache[key] = value`` puts.
    """

    def _bind_get(self) -> None:
        self.get = self.lookup

    def lookup(self, key: K) -> V | None:
        """The entry for ``key`` from either generation (None: a miss)."""
        value = self._young.get(key)
        if value is not None:
            if _LIMITS.count_hits:
                self.hits += 1
            return value
        return self.revive(key)


class GrowingCache(OrderedDict[K, V]):
    """An LRU of entries that grow after they are put, bounded by entries and approximate bytes.

    For indexes extended build after build. A ``BoundedCache`` sizes an entry once, when it is
    put; an index grows while it is held, so here each entry is sized again (``size(value)``,
    cheap: a counter the entry keeps) every time it is put back. Callers take an entry out
    (``pop``), use and extend it, put it back (``cache[key] = value``, now the most recently
    used) and call ``trim``. Unlike a ``BoundedCache`` the newest entry is always kept, however
    large: it is the one in use, and dropping it would rebuild it on every call.

    Its byte bound is ``share`` of the ``indexes`` pool (``set_cache_limits(index_bytes=...)``).
    Iteration, ``len`` and ``values`` are an ``OrderedDict``'s (least recently used first). Not
    thread-safe on its own: callers hold their lock around take, put and ``trim``.
    """

    def __init__(self, name: str, *, max_entries: int, share: float,
                 size: Callable[[V], int]) -> None:
        super().__init__()
        if max_entries < 1:
            raise ValueError(f"cache {name!r}: max_entries must be at least 1")
        if not 0 < share <= 1:
            raise ValueError(f"cache {name!r}: share must be in (0, 1]")
        self.name = name
        self.share = share
        self.max_entries = max_entries
        self.max_bytes = 0
        self.evictions = 0
        self.misses = 0
        self._size = size
        self._sizes: dict[K, int] = {}
        self._bytes = 0
        self.apply_limits()
        _LIVE_GROWING[id(self)] = self  # unhashable (a dict): kept by id

    def apply_limits(self) -> None:
        """Take the byte bound now configured (``set_cache_limits``); trim to it."""
        override = _LIMITS.per_cache.get(self.name)
        self.max_bytes = override if override is not None else int(
            _LIMITS.index_bytes * self.share)
        self.trim()

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        size = self._size(value) + ENTRY_BYTES
        self._bytes += size - self._sizes.get(key, 0)
        self._sizes[key] = size

    def __delitem__(self, key: K) -> None:
        super().__delitem__(key)
        self._bytes -= self._sizes.pop(key, 0)

    def pop(self, key: K, default: V | None = None) -> V | None:  # type: ignore[override]
        """The entry under ``key``, taken out (``default`` if none: counted as a miss)."""
        if key not in self:
            self.misses += 1
            return default
        value = super().pop(key)
        self._bytes -= self._sizes.pop(key, 0)
        return value

    def popitem(self, last: bool = True) -> tuple[K, V]:
        """Take out the newest entry (``last``) or the least recently used one."""
        key, value = super().popitem(last=last)
        self._bytes -= self._sizes.pop(key, 0)
        return key, value

    def clear(self) -> None:
        """Forget every entry (the statistics are kept)."""
        super().clear()
        self._sizes.clear()
        self._bytes = 0

    def trim(self, *, max_entries: int | None = None, max_bytes: int | None = None) -> int:
        """Drop the least recently used entries until within the bounds; how many were dropped.

        ``max_entries`` / ``max_bytes`` tighten the configured bounds for this call. The newest
        entry is always kept.
        """
        entries = self.max_entries if max_entries is None else min(max_entries,
                                                                   self.max_entries)
        limit = self.max_bytes if max_bytes is None else min(max_bytes, self.max_bytes)
        dropped = 0
        while len(self) > 1 and (len(self) > entries or self._bytes > limit):
            self.popitem(last=False)
            dropped += 1
        self.evictions += dropped
        return dropped

    @property
    def bytes(self) -> int:
        """Approximate bytes held, as of each entry's last put."""
        return max(0, self._bytes)

    def stats(self) -> CacheStats:
        """Entries, bytes, bounds, misses and evictions (hits are not counted)."""
        return CacheStats(entries=len(self), bytes=self.bytes, max_entries=self.max_entries,
                          max_bytes=self.max_bytes, hits=None, misses=self.misses,
                          evictions=self.evictions)


class MemoDict(dict[K, V]):
    """A memo read as a plain dict, bounded by entries and approximate bytes.

    For memos whose hit path is the dict's own ``__getitem__`` (a C call, often mapped over a
    whole text's words at once), where even a ``BoundedCache.get`` would cost a Python-level
    miss check per lookup. A subclass defines ``__missing__``: it asks ``revive`` for an entry
    of the old generation and otherwise computes the value and hands it to ``remember``.

    Two generations, as in a ``BoundedCache``: entries live in the dict itself; when it would
    pass half of either bound they move to the old generation (in place, so bound methods such
    as ``memo.__getitem__`` stay valid) and the previous old generation is dropped. So the memo
    never holds more than its bounds, and an entry used since the last turnover is kept.
    ``size(key, value)`` estimates an entry's bytes; ``ENTRY_BYTES`` is added to it.

    Thread-safe in the way a dict is: a memo's values are a pure function of their keys, so an
    entry lost to a concurrent turnover is only worked out again.
    """

    def __init__(self, name: str, *, max_entries: int, share: float,
                 size: Callable[[K, V], int], pool: str = "caches") -> None:
        """``share`` of the ``pool``'s budget: ``caches`` (``total_bytes``) or ``indexes``."""
        super().__init__()
        _check_bounds(name, max_entries, share, pool)
        self.name = name
        self.pool = pool
        self.share = share
        self.max_entries = max_entries
        self.max_bytes = 0
        self.misses = 0
        self.evictions = 0
        self._size = size
        self._bytes = 0
        self._old: dict[K, V] = {}
        self._old_bytes = 0
        self.apply_limits()
        _LIVE_MEMOS[id(self)] = self  # unhashable (a dict): kept by id

    def apply_limits(self) -> None:
        """Take the byte bound now configured (``set_cache_limits``)."""
        override = _LIMITS.per_cache.get(self.name)
        self.max_bytes = override if override is not None else int(
            _LIMITS.pool_bytes(self.pool) * self.share)
        if self._bytes * 2 > self.max_bytes or len(self) * 2 > self.max_entries:
            self._turn_over()
        if self._old_bytes * 2 > self.max_bytes:
            self.evictions += len(self._old)
            self._old, self._old_bytes = {}, 0

    def revive(self, key: K) -> V | None:
        """The old generation's entry for ``key``, moved back into the memo (None: a miss)."""
        value = self._old.pop(key, None)
        if value is None:
            self.misses += 1
            return None
        size = self._size(key, value) + ENTRY_BYTES
        self._old_bytes -= size
        self._insert(key, value, size)
        return value

    def remember(self, key: K, value: V) -> V:
        """Keep ``value`` under ``key`` (a key not in the memo) and return it."""
        size = self._size(key, value) + ENTRY_BYTES
        if size * 4 <= self.max_bytes:  # a bigger one would push out everything else
            self._insert(key, value, size)
        return value

    def _insert(self, key: K, value: V, size: int) -> None:
        if (self._bytes + size) * 2 > self.max_bytes or (len(self) + 1) * 2 > self.max_entries:
            self._turn_over()  # first, so neither generation ever holds more than half
        self[key] = value
        self._bytes += size

    def _turn_over(self) -> None:
        self.evictions += len(self._old)
        self._old, self._old_bytes = dict(self), self._bytes
        super().clear()
        self._bytes = 0

    def clear(self) -> None:
        """Forget every entry (the statistics are kept)."""
        super().clear()
        self._old, self._old_bytes, self._bytes = {}, 0, 0

    @property
    def bytes(self) -> int:
        """Approximate bytes held."""
        return max(0, self._bytes + self._old_bytes)

    @property
    def entries(self) -> int:
        """Entries held, in both generations."""
        return len(self) + len(self._old)

    def stats(self) -> CacheStats:
        """Entries, bytes, bounds, misses and evictions (hits run in C and are not counted)."""
        return CacheStats(entries=self.entries, bytes=self.bytes, max_entries=self.max_entries,
                          max_bytes=self.max_bytes, hits=None, misses=self.misses,
                          evictions=self.evictions)


_LIVE: weakref.WeakSet[BoundedCache[Any, Any]] = weakref.WeakSet()
"""Every cache alive, registered or not, so new limits reach each one."""
_LIVE_GROWING: weakref.WeakValueDictionary[int, GrowingCache[Any, Any]] = (
    weakref.WeakValueDictionary())
"""Likewise every ``GrowingCache`` (by id)."""
_LIVE_MEMOS: weakref.WeakValueDictionary[int, MemoDict[Any, Any]] = weakref.WeakValueDictionary()
"""Likewise every ``MemoDict`` (by id)."""


class _Memoized(Generic[P, R]):
    """A function remembered in a ``BoundedCache`` by its arguments (see ``memoized``)."""

    def __init__(self, function: Callable[P, R], cache: BoundedCache[Any, Any]) -> None:
        self.__wrapped__ = function
        self.cache = cache
        update_wrapper(self, function)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if kwargs:
            raise TypeError(f"{self.cache.name}: pass the arguments by position")
        cache = self.cache
        hit = cache.get(args)
        if hit is None:
            hit = cache.revive(args)
            if hit is None:
                value = self.__wrapped__(*args, **kwargs)  # kwargs is empty here
                cache.put(args, _NONE if value is None else value)
                return value
        return cast(R, None if hit is _NONE else hit)

    def cache_clear(self) -> None:
        self.cache.clear()


_NONE = object()
"""Stands for a remembered None (a cache's ``get`` answers None for a miss)."""


def memoized(name: str, *, max_entries: int, share: float,
             size: Callable[[tuple[Any, ...], Any], int]
             ) -> Callable[[Callable[P, R]], _Memoized[P, R]]:
    """``functools.lru_cache`` bounded by bytes too: a ``BoundedCache`` keyed by the arguments.

    ``size(args, value)`` estimates an entry's bytes. The function must be called with
    positional arguments only. Register the result like an ``lru_cache`` (it has
    ``cache_clear``).
    """
    def decorate(function: Callable[P, R]) -> _Memoized[P, R]:
        return _Memoized(function, BoundedCache(name, max_entries=max_entries, share=share,
                                                size=size))
    return decorate


# --------------------------------------------------------------------------- statistics
_Bounded = BoundedCache[Any, Any] | GrowingCache[Any, Any] | MemoDict[Any, Any]


def _bounded(cache: object) -> _Bounded | None:
    if isinstance(cache, BoundedCache | GrowingCache | MemoDict):
        return cache
    inner = getattr(cache, "cache", None)
    return inner if isinstance(inner, BoundedCache) else None


def _bounded_caches() -> dict[str, BoundedCache[Any, Any] | MemoDict[Any, Any]]:
    """The registered caches that share the caches' budget (``total_bytes``)."""
    found: dict[str, BoundedCache[Any, Any] | MemoDict[Any, Any]] = {}
    for name, (cache, _) in list(_REGISTRY.items()):
        bounded = _bounded(cache)
        if isinstance(bounded, BoundedCache | MemoDict) and bounded.pool == "caches":
            found[name] = bounded
    return found


def cache_stats() -> dict[str, CacheStats]:
    """Per registered cache: entries, approximate bytes, bounds, hits, misses, evictions.

    Byte-bounded caches report all of them; an ``lru_cache`` reports entries, hits and misses;
    any other registered cache its entries only (None for what it does not know).
    """
    found: dict[str, CacheStats] = {}
    for name, (cache, _) in list(_REGISTRY.items()):
        bounded = _bounded(cache)
        if bounded is not None:
            found[name] = bounded.stats()
            continue
        info = getattr(cache, "cache_info", None)
        if callable(info):
            i = info()
            found[name] = CacheStats(entries=i.currsize, bytes=None, max_entries=i.maxsize,
                                     max_bytes=None, hits=i.hits, misses=i.misses,
                                     evictions=None)
        elif hasattr(cache, "__len__"):
            found[name] = CacheStats(entries=len(cast(Any, cache)), bytes=None,
                                     max_entries=None, max_bytes=None, hits=None, misses=None,
                                     evictions=None)
    return found
