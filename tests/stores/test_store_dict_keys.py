"""A message or state whose dicts have keys that are not strings is refused, on every store.

JSON object keys are strings: ``json.dumps`` turns ``{1: "a"}`` into ``{"1": "a"}`` without a
word, so a read gave back another document than the one appended, and ``{1: "x", "1": "y"}``
came back with one of its two entries. Every store (sync and async) refuses such a document
with ``InvalidInputError`` naming where the key is, and writes nothing of the call.
"""

from __future__ import annotations

from typing import Any

import pytest

from contextwright.errors import InvalidInputError
from contextwright.session import SessionKey, StateWrite, Store

K = SessionKey(user_id="keys", session_id="s1")


def _msg(**extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": "hi", **extra}


BAD_MESSAGES = [
    pytest.param(_msg(meta={1: "a"}), r'message 0 has a non-string key at \$\.meta\[1\] \(int\)',
                 id="int"),
    pytest.param(_msg(meta={1: "x", "1": "y"}), r"\$\.meta\[1\] \(int\)", id="int-and-its-text"),
    pytest.param({"role": "user", "content": "hi", 2.5: "f"}, r"\$\[2\.5\] \(float\)",
                 id="float-top-level"),
    pytest.param(_msg(flags={True: 1}), r"\$\.flags\[True\] \(bool\)", id="bool"),
    pytest.param(_msg(parts=[{"ok": 1}, {"x": {None: 0}}]),
                 r"\$\.parts\[1\]\.x\[None\] \(NoneType\)", id="none-in-a-list"),
    pytest.param(_msg(**{"a b": ({("t", 1): 0},)}), r'\$\["a b"\]\[0\]\[<tuple>\] \(tuple\)',
                 id="tuple-in-a-tuple"),
]


@pytest.mark.parametrize(("message", "where"), BAD_MESSAGES)
def test_a_message_with_a_non_string_key_is_refused_and_nothing_is_written(
        store: Store, message: dict[Any, Any], where: str) -> None:
    with pytest.raises(InvalidInputError, match=where):
        store.append(K, [message])
    assert store.count(K) == 0
    assert store.list_sessions() == []


def test_one_bad_message_of_a_batch_writes_none_of_it(store: Store) -> None:
    assert store.append(K, [_msg()]) == [1]
    with pytest.raises(InvalidInputError, match=r"message 2 has a non-string key at \$\.m\[7\]"):
        store.append(K, [_msg(), _msg(), _msg(m={7: "seven"})])
    assert [m.seq for m in store.read(K)] == [1]


def test_a_state_with_a_non_string_key_is_refused_and_the_old_one_kept(store: Store) -> None:
    assert store.put_state(K, {"zones": {"facts": ["a"]}}, expected_version=None) == 1
    with pytest.raises(InvalidInputError, match=r"state has a non-string key at \$\.zones\[3\]"):
        store.put_state(K, {"zones": {3: ["b"]}}, expected_version=1)
    with pytest.raises(InvalidInputError, match=r"state has a non-string key at \$\[0\]"):
        store.append_if(K, [_msg()], state=StateWrite(data={0: "x"}, expected_version=1))
    record = store.get_state(K)
    assert record is not None
    assert (record.version, record.data) == (1, {"zones": {"facts": ["a"]}})
    assert store.count(K) == 0


def test_string_keys_of_every_kind_still_round_trip(store: Store) -> None:
    message = _msg(meta={"1": "a", "": "empty", "\ud800": "lone surrogate", "é": [{"x": {}}]})
    assert store.append(K, [message]) == [1]
    assert store.read(K)[0].message == message


def test_a_shared_subtree_is_fine_and_a_cycle_is_still_refused(store: Store) -> None:
    shared = {"k": "v"}
    assert store.append(K, [_msg(a=shared, b=[shared, shared])]) == [1]
    looped: dict[str, Any] = {"role": "user", "content": "hi"}
    looped["self"] = [looped]
    with pytest.raises(InvalidInputError, match="message 0 is not JSON-encodable"):
        store.append(K, [looped])
    assert store.count(K) == 1
