"""A Redis erase whose answer never comes is ``OutcomeUnknown``: it may still run.

It was reported as plain ``StoreUnavailable``, which reads as "not done"; but Redis runs the
erase once the stalled connection delivers it, after whatever the caller stored since, as
PostgreSQL reports a commit whose answer was lost.
"""

from __future__ import annotations

import time

import pytest
from test_redis_outcome_unknown import REDIS_URL, FreezingProxy, proxy

from contextwright.errors import OutcomeUnknown
from contextwright.session import RedisStore, SessionKey

__all__ = ["proxy"]  # the fixture, shared with the write tests (prefix is the conftest's)

K = SessionKey(user_id="U001", session_id="S001")


def test_an_erase_that_times_out_says_it_may_still_run(proxy: FreezingProxy,
                                                       prefix: str) -> None:
    frozen = RedisStore(f"redis://127.0.0.1:{proxy.port}/0", prefix=prefix, socket_timeout=0.5)
    direct = RedisStore(REDIS_URL, prefix=prefix)
    try:
        frozen.append(K, [{"role": "user", "content": "hello"}])
        proxy.freeze()
        with pytest.raises(OutcomeUnknown):
            frozen.erase_session(K)
        assert direct.count(K) == 1  # not yet ...
        proxy.thaw()
        deadline = time.monotonic() + 10
        while direct.count(K) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert direct.count(K) == 0  # ... but it ran
    finally:
        proxy.thaw()
        frozen.close()
        direct.close()
