"""A build's notes for its report, kept apart from the items (``core.notes``)."""

from __future__ import annotations

import threading

from contextwright.core.notes import build_notes, note_recall_score, with_recall_score


def test_a_score_noted_outside_a_build_goes_nowhere() -> None:
    note_recall_score("history.m1", 2.5)
    with build_notes() as scores:
        assert scores == {}


def test_each_build_has_its_own_notebook_even_nested_or_in_another_thread() -> None:
    seen: dict[str, dict[str, float]] = {}

    def other() -> None:
        with build_notes() as scores:
            note_recall_score("history.m9", 9.0)
            seen["thread"] = dict(scores)

    with build_notes() as outer:
        note_recall_score("history.m1", 1.0)
        with build_notes() as inner:
            note_recall_score("history.m2", 2.0)
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
        note_recall_score("history.m3", 3.0)
    assert outer == {"history.m1": 1.0, "history.m3": 3.0}
    assert inner == {"history.m2": 2.0}
    assert seen["thread"] == {"history.m9": 9.0}


def test_a_reason_gets_the_score_noted_for_its_item_only() -> None:
    scores = {"history.m1": 1.234}
    assert with_recall_score("recalled", scores, "history.m1") == "recalled; score 1.23"
    assert with_recall_score("recalled", scores, "history.m2") == "recalled"
