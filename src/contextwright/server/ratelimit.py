"""Per-tenant request rates: a GCRA token bucket, in Redis (shared by every worker) or in process.

Each tenant may make ``requests_per_minute`` requests, in bursts of up to ``burst``. The
generic cell rate algorithm keeps one number per tenant, the theoretical arrival time (TAT) of
its next request: a request is allowed when the TAT is at most ``burst - 1`` intervals ahead of
now, and moves the TAT one interval on. In Redis the check and the update are one Lua script on
the server's clock (``TIME``), so workers on many machines share one limit without agreeing on
clocks; the key expires when the bucket is full again.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from contextwright.errors import InvalidInputError, StoreUnavailable

if TYPE_CHECKING:
    from redis import Redis


@dataclass(frozen=True, slots=True, kw_only=True)
class Rate:
    """A request rate: ``requests_per_minute``, in bursts of up to ``burst``."""

    requests_per_minute: int
    """Sustained requests per minute (more than 0)."""
    burst: int
    """Requests allowed at once after a quiet spell (at least 1)."""

    @property
    def interval_us(self) -> int:
        """Microseconds between two requests at the sustained rate."""
        return max(1, round(60_000_000 / self.requests_per_minute))


class RateLimiter(Protocol):
    """Decides whether one more request of ``tenant`` may run now."""

    def acquire(self, tenant: str, rate: Rate) -> float:
        """0 if the request may run (and counts it), else the seconds to wait before retrying."""
        ...

    def ping(self) -> None:
        """Raise ``StoreUnavailable`` if the limiter's backend cannot be reached."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


def _decide(tat_us: int, now_us: int, rate: Rate) -> tuple[int | None, int]:
    """GCRA step: (new TAT, or None when refused; microseconds to wait when refused)."""
    tat = max(tat_us, now_us)
    tolerance = rate.interval_us * (rate.burst - 1)
    if tat - now_us > tolerance:
        return None, tat - now_us - tolerance
    return tat + rate.interval_us, 0


class LocalRateLimiter:
    """The limit kept in this process: right for one worker, per worker with several."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tat: dict[str, int] = {}
        self._lock = threading.Lock()

    def acquire(self, tenant: str, rate: Rate) -> float:
        """See ``RateLimiter.acquire``."""
        now = int(self._clock() * 1_000_000)
        with self._lock:
            new_tat, wait_us = _decide(self._tat.get(tenant, now), now, rate)
            if new_tat is None:
                return wait_us / 1_000_000
            self._tat[tenant] = new_tat
            return 0.0

    def ping(self) -> None:
        """Always reachable."""

    def close(self) -> None:
        """Nothing to release."""


# KEYS[1]: the tenant's TAT. ARGV: interval, tolerance (microseconds).
# Returns 0 when allowed, else the microseconds to wait.
_GCRA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
if tat - now > tolerance then return tat - now - tolerance end
local new_tat = tat + interval
local ttl_ms = math.ceil((new_tat - now) / 1000) + 1
redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', ttl_ms)
return 0
"""


class RedisRateLimiter:
    """The limit kept in Redis, shared by every worker that uses the same ``prefix``."""

    def __init__(self, url: str, *, prefix: str = "contextwright",
                 socket_timeout: float = 2.0) -> None:
        import redis

        self._prefix = prefix
        try:
            self._redis: Redis = redis.Redis.from_url(
                url, socket_timeout=socket_timeout, socket_connect_timeout=socket_timeout)
        except ValueError:  # a scheme, port or database redis cannot read
            raise InvalidInputError("the rate limiter's Redis URL is malformed (redis://, "
                                    "rediss:// or unix://)") from None
        self._script = self._redis.register_script(_GCRA)
        self.ping()

    @staticmethod
    def from_url(url: str) -> RedisRateLimiter:
        """A limiter on ``url``; a ``?prefix=…`` in it (as store URLs carry) prefixes the keys."""
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        prefix = next((value for key, value in query if key == "prefix"), "contextwright")
        rest = urlencode([(key, value) for key, value in query if key != "prefix"])
        return RedisRateLimiter(urlunsplit(parts._replace(query=rest)), prefix=prefix)

    def acquire(self, tenant: str, rate: Rate) -> float:
        """See ``RateLimiter.acquire``; ``StoreUnavailable`` if Redis does not answer."""
        args: list[Any] = [rate.interval_us, rate.interval_us * (rate.burst - 1)]
        wait_us = self._call(lambda: self._script(keys=[self._key(tenant)], args=args))
        return int(wait_us) / 1_000_000

    def ping(self) -> None:
        """Raise ``StoreUnavailable`` unless Redis answers."""
        self._call(self._redis.ping)

    def close(self) -> None:
        """Close the connection pool."""
        self._redis.close()

    def _key(self, tenant: str) -> str:
        return f"{self._prefix}:ratelimit:{tenant}"

    def _call(self, work: Callable[[], Any]) -> Any:
        import redis

        try:
            return work()
        except redis.RedisError as exc:
            raise StoreUnavailable(
                f"the rate limiter's Redis cannot be reached ({type(exc).__name__})") from None


def retry_after_header(seconds: float) -> str:
    """``Retry-After`` in whole seconds, rounded up (a client waiting that long gets in)."""
    return str(max(1, math.ceil(seconds)))
