"""A reply cache that another program holds locked is said to be in use, never called foreign.

The cache of a judged run is a SQLite file, shared by default between runs. While another
program holds it locked (a second run, the ``sqlite3`` shell in a transaction), a run must say
so and leave the file alone: "not a contextwright reply cache (move it away)" would have the
user discard every stored reply.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from contextwright.errors import StoreError
from contextwright.evaluate.judge import ReplyCache
from fakes.openai_server import FakeOpenAIServer
from test_eval_judge_endpoint import answer_or_grade, cases_file, judged_cases


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold ``path`` locked as another program's open write transaction does."""
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_a_locked_reply_cache_is_in_use_not_foreign_and_a_rerun_resumes(
        tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cases = cases_file(tmp_path, 2)
    with FakeOpenAIServer(responder=answer_or_grade) as fake:
        assert judged_cases(fake.base_url, cases, cache).exit_code == 0
        sent = len(fake.requests)
        with locked(cache / "replies.sqlite"):
            blocked = judged_cases(fake.base_url, cases, cache)
        assert blocked.exit_code == 2
        assert "is in use by another program" in blocked.stderr
        assert "not a contextwright reply cache" not in blocked.stderr
        assert "Traceback" not in blocked.stderr
        again = judged_cases(fake.base_url, cases, cache)
        assert again.exit_code == 0, again.stderr
        assert len(fake.requests) == sent  # every reply was kept: nothing asked again


def test_a_write_to_a_locked_reply_cache_is_a_store_error(tmp_path: Path) -> None:
    cache = ReplyCache(tmp_path / "replies.sqlite")
    try:
        with locked(cache.path), pytest.raises(StoreError, match="is in use by another program"):
            cache.put("k", kind="answer", model="m", request="r", reply="{}")
    finally:
        cache.close()
