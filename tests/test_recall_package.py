"""Recall has one implementation: every public path names the same objects.

Code written against ``contextwright.sources.recall``, ``contextwright.retrieval.recall`` or the
top-level names keeps working, and gets the classes of ``contextwright.recall``.
"""

from __future__ import annotations

import contextwright
import contextwright.recall as recall
import contextwright.retrieval as retrieval
import contextwright.retrieval.recall as retrieval_recall
import contextwright.sources.recall as sources_recall
import contextwright.sources.recall_bm25 as sources_bm25
from contextwright.core.items import parse_message
from contextwright.recall import bm25, hybrid, lexical, turns


def test_every_import_path_names_the_one_recall_turn_and_protocol() -> None:
    assert contextwright.RecallTurn is retrieval.RecallTurn is recall.RecallTurn
    assert sources_recall.RecallTurn is retrieval_recall.RecallTurn is turns.RecallTurn
    assert contextwright.TurnRecaller is retrieval.TurnRecaller is recall.TurnRecaller
    assert sources_recall.TurnRecaller is retrieval_recall.TurnRecaller is turns.TurnRecaller


def test_every_import_path_names_the_one_recaller_classes() -> None:
    assert retrieval.HybridTurnRecaller is retrieval_recall.HybridTurnRecaller
    assert recall.HybridTurnRecaller is hybrid.HybridTurnRecaller is retrieval.HybridTurnRecaller
    assert contextwright.LexicalTurnRecaller is sources_recall.LexicalTurnRecaller
    assert recall.LexicalTurnRecaller is lexical.LexicalTurnRecaller
    assert sources_recall.RecallExpansion is recall.RecallExpansion is lexical.RecallExpansion
    assert sources_recall.TurnIndex is recall.TurnIndex is turns.TurnIndex
    assert sources_recall.turn_index is recall.turn_index
    assert sources_bm25.TurnPostings is bm25.TurnPostings


def test_both_recallers_satisfy_the_protocol() -> None:
    assert isinstance(recall.LexicalTurnRecaller(), recall.TurnRecaller)
    assert isinstance(recall.HybridTurnRecaller(), recall.TurnRecaller)


def test_an_unknown_name_of_the_package_is_an_attribute_error() -> None:
    try:
        recall.NoSuchRecaller  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as error:
        assert "NoSuchRecaller" in str(error)
    else:
        raise AssertionError("an unknown name resolved")


def test_the_index_closes_a_turn_at_the_next_user_message_and_on_close() -> None:
    index = recall.TurnIndex()
    messages = [{"role": "system", "content": "be brief"},
                {"role": "user", "content": "book Lisbon", "id": "u1"},
                {"role": "assistant", "content": "",
                 "tool_calls": [{"id": "c1", "type": "function",
                                 "function": {"name": "book", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                {"role": "user", "content": "and Porto?"},
                {"role": "assistant", "content": "Porto too."}]
    for position, raw in enumerate(messages):
        index.add(parse_message(raw, f"m[{position}]"), position)
    assert [(t.index, t.key) for t in index.turns] == [(1, "u1")], "a system message opens none"
    assert index.ends == [4] and index.calls == 1 and index.open_start == 4
    index.close(len(messages))
    assert [t.index for t in index.turns] == [1, 4] and index.ends == [4, 6]
    assert index.turns[1].text == "and Porto?\nPorto too."
    assert index.calls_newer_than(0) == 0 and index.open_start is None
    view = index.view(extra_calls=2)
    assert view.turns is index.turns and view.calls_newer_than(0) == 2
