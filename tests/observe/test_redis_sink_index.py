"""The Redis sink reads what a query asks for, not the whole store: user and session sets, and
newest-first pages for a limit. Real Redis, a fresh prefix per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from observe_helpers import pressured

from conftest import REDIS_URL, _service_or_fail
from contextwright.errors import CorruptRecordError
from contextwright.observe import JsonlSink, Snapshot, SnapshotQuery
from contextwright.observe.replay import snapshot_of
from contextwright.observe.sinks import newest
from contextwright.observe.sinks_redis import PAGE, RedisSink


@pytest.fixture(scope="module")
def base() -> Snapshot:
    plan, request = pressured()
    return snapshot_of(plan, request, redact=True)


@pytest.fixture
def prefix() -> Iterator[str]:
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    _service_or_fail("Redis", client.ping)
    name = f"cwtest-{uuid.uuid4().hex}"
    yield name
    for key in client.scan_iter(match=f"{name}:*", count=1000):
        client.delete(key)
    client.close()


@pytest.fixture
def raw(prefix: str) -> Iterator[Any]:
    import redis

    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    yield client
    client.close()


def _of(base: Snapshot, index: int, user: str | None = None, session: str | None = None,
        at: float | None = None) -> Snapshot:
    ids = None if user is None else {"user_id": user, "session_id": session or f"{user}-s"}
    return replace(base, id=f"{index:05d}snap", created_at=1000.0 + index if at is None else at,
                   session=ids, plan="chat" if index % 2 else "tool_heavy")


def _corrupt(raw: Any, prefix: str, snapshot_ids: list[str]) -> None:
    raw.hset(f"{prefix}:snapshots:body", mapping=dict.fromkeys(snapshot_ids, "{not json"))


def test_a_session_query_reads_that_sessions_bodies_only(base: Snapshot, prefix: str,
                                                          raw: Any) -> None:
    sink = RedisSink(REDIS_URL, prefix=prefix)
    ada = [_of(base, i, "ada") for i in range(0, 40, 2)]
    bob = [_of(base, i, "bob") for i in range(1, 40, 2)]
    sink.write([*ada, *bob])
    _corrupt(raw, prefix, [s.id for s in bob])
    assert sink.read(SnapshotQuery(user_id="ada")) == ada
    assert sink.read(SnapshotQuery(session_id="ada-s", since=1010, until=1020)) == [
        s for s in ada if 1010 <= s.created_at < 1020]
    assert sink.read(SnapshotQuery(user_id="ada", session_id="ada-s", limit=3)) == ada[-3:]
    assert sink.read(SnapshotQuery(user_id="ada", session_id="bob-s")) == []
    assert sink.read(SnapshotQuery(user_id="nobody")) == []
    assert sink.unreadable_rows() == []  # no read above reached bob's bodies
    assert sink.read() == ada  # reading everything reaches them, and skips them
    assert [i for i, _ in sink.unreadable_rows()] == [s.id for s in bob]
    sink.close()


def test_a_plan_query_reads_that_plans_bodies_only(base: Snapshot, prefix: str,
                                                    raw: Any) -> None:
    sink = RedisSink(REDIS_URL, prefix=prefix)
    series = [_of(base, i) for i in range(20)]
    grown = replace(_of(base, 20), plan="chat+history")
    sink.write([*series, grown])
    _corrupt(raw, prefix, [s.id for s in series if s.plan == "tool_heavy"])
    chat = [s for s in series if s.plan == "chat"]
    assert sink.read(SnapshotQuery(plan="chat")) == [*chat, grown]
    assert sink.read(SnapshotQuery(plan="chat", limit=2)) == [chat[-1], grown]
    assert sink.read(SnapshotQuery(plan="chat+history")) == [grown]
    assert sink.unreadable_rows() == []  # no tool_heavy body was read
    sink.close()


def test_a_limit_reads_the_newest_pages_only(base: Snapshot, prefix: str, raw: Any) -> None:
    sink = RedisSink(REDIS_URL, prefix=prefix)
    series = [_of(base, i) for i in range(3 * PAGE)]
    sink.write(series)
    _corrupt(raw, prefix, [s.id for s in series[:PAGE]])  # the oldest page
    assert sink.read(SnapshotQuery(limit=5)) == series[-5:]
    assert sink.read(SnapshotQuery(limit=4, plan="chat")) == [
        s for s in series if s.plan == "chat"][-4:]
    assert sink.read(SnapshotQuery(limit=PAGE + 3, until=1000.0 + 2 * PAGE + 10)) == (
        series[PAGE + 7:2 * PAGE + 10])
    assert sink.unreadable_rows() == []  # no read above reached the oldest page
    assert sink.read() == series[PAGE:]
    assert len(sink.unreadable_rows()) == PAGE
    sink.close()


def test_reads_match_a_scan_of_every_snapshot(base: Snapshot, prefix: str,
                                              tmp_path: Path) -> None:
    # Ties of time are ordered by id, across page ends and session sets alike.
    series = [_of(base, i, ("ada", "bob", None)[i % 3], at=1000.0 + i // 7)
              for i in range(2 * PAGE + 11)]
    sink, jsonl = RedisSink(REDIS_URL, prefix=prefix), JsonlSink(tmp_path / "all.jsonl")
    for target in (sink, jsonl):
        target.write(series[::-1])
    for query in (SnapshotQuery(), SnapshotQuery(limit=1), SnapshotQuery(limit=PAGE + 1),
                  SnapshotQuery(limit=9, user_id="bob"), SnapshotQuery(since=1010, limit=20),
                  SnapshotQuery(plan="chat", limit=PAGE), SnapshotQuery(session_id="ada-s"),
                  SnapshotQuery(user_id="ada", until=1030, limit=7)):
        scanned = newest(list(series), query)
        assert sink.read(query) == scanned, query
        assert jsonl.read(query) == scanned, query
    sink.close()


def test_snapshots_stored_before_the_sets_are_indexed_when_a_sink_opens(
        base: Snapshot, prefix: str, raw: Any) -> None:
    older = [_of(base, i, "ada" if i % 2 else "bob") for i in range(6)]
    # As an earlier version wrote them: bodies and times only.
    raw.hset(f"{prefix}:snapshots:body", mapping={s.id: s.to_json() for s in older})
    raw.zadd(f"{prefix}:snapshots:time", {s.id: s.created_at for s in older})
    raw.hset(f"{prefix}:snapshots:body", "broken", "{not json")
    raw.zadd(f"{prefix}:snapshots:time", {"broken": 2000.0})
    sink = RedisSink(REDIS_URL, prefix=prefix)
    assert sink.read(SnapshotQuery(user_id="ada")) == older[1::2]
    assert raw.get(f"{prefix}:snapshots:indexed") == "1"
    with pytest.raises(CorruptRecordError, match="snapshot broken cannot be read"):
        sink.get("broken")  # left for a read to report, and for retention to remove
    assert sink.purge(older_than=1004.0) == 4
    sink.close()


def test_retention_removes_snapshots_from_their_plan_user_and_session_sets(
        base: Snapshot, prefix: str, raw: Any) -> None:
    sink = RedisSink(REDIS_URL, prefix=prefix)
    sink.write([_of(base, i, "ada") for i in range(5)])
    assert sink.purge(keep_last=2) == 3
    assert sorted(raw.hkeys(f"{prefix}:snapshots:refs")) == ["00003snap", "00004snap"]
    for name in ("user_id:ada", "session_id:ada-s"):
        assert raw.zrange(f"{prefix}:snapshots:by:{name}", 0, -1) == ["00003snap", "00004snap"]
    plans = {key: raw.zrange(key, 0, -1)
             for key in raw.scan_iter(match=f"{prefix}:snapshots:by:plan:*")}
    assert plans == {f"{prefix}:snapshots:by:plan:chat": ["00003snap"],
                     f"{prefix}:snapshots:by:plan:tool_heavy": ["00004snap"]}
    assert [s.id for s in sink.read(SnapshotQuery(user_id="ada"))] == ["00003snap",
                                                                       "00004snap"]
    sink.close()
