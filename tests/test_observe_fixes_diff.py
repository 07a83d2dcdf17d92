"""What a diff says about an item one build dropped, or never read, and the other kept."""

from __future__ import annotations

from contextwright import BuildPlan, Request
from contextwright.observe import Snapshot, diff_snapshots, snapshot_of


def _history() -> list[dict[str, str]]:
    history = []
    for i in range(6):
        history += [
            {"role": "user", "content": f"question {i}: where is order KST{400 + i}?",
             "id": f"u{i}"},
            {"role": "assistant", "content": f"answer {i}: order KST{400 + i} shipped on day {i}.",
             "id": f"a{i}"}]
    return history


def _build(available: int) -> Snapshot:
    plan = BuildPlan.named("chat").with_budget(available_override=available)
    return snapshot_of(plan, Request(user_input="and the last one?", history=_history()),
                       tokenizer="o200k_base")


def _naming_items(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` as a build that names each message's item records it."""
    positions = {m["id"]: index for index, m in enumerate(_history())}
    data = snapshot.to_dict()
    for message in data["messages"]:
        if message.get("id") in positions:
            message["item"] = f"history.m{positions[message['id']]}"
    return Snapshot.from_dict(data)


def test_an_item_dropped_in_one_build_and_kept_in_the_other_is_one_row_with_both_fates(
        ) -> None:
    small, large = _naming_items(_build(120)), _naming_items(_build(400))
    dropped = {str(d["key"]) for d in small.decisions if d["action"] == "dropped"}
    assert "history.m4" in dropped
    diff = diff_snapshots(small, large)
    rows = {item.key: item for item in diff.items}
    assert "history.m4" not in rows  # joined with the message the larger build kept
    row = rows["message:u2"]
    assert row.change == "added" and row.tokens_after > 0
    assert row.before is not None and row.before.startswith("dropped: budget")
    assert row.after == "kept: in history as user"
    back = {item.key: item for item in diff_snapshots(large, small).items}
    assert back["message:u2"].change == "removed"
    assert back["message:u2"].after is not None and back["message:u2"].after.startswith(
        "dropped: budget")
    # Every row that says a build never saw the item is about an item it never had.
    for item in diff.items:
        if item.key.startswith("message:"):
            assert item.before is not None, item


def test_a_message_the_other_build_kept_from_a_run_this_one_never_read_gets_the_runs_fate(
        ) -> None:
    small, large = _naming_items(_build(120)), _naming_items(_build(400))
    rows = {item.key: item for item in diff_snapshots(small, large).items}
    row = rows["message:u0"]  # history.m0: older than anything the small build read
    assert row.change == "added"
    assert row.before is not None and "not read (history.m0–m" in row.before
    # The larger build read every message of that run: it is told message by message.
    assert not [key for key in rows if key.startswith("history.*")]


def test_an_item_read_and_dropped_in_one_build_gets_the_run_the_other_never_read() -> None:
    smaller, small = _build(60), _build(120)
    small_dropped = {str(d["key"]) for d in small.decisions if d["action"] == "dropped"
                     and not str(d["key"]).endswith(".*")}
    assert small_dropped
    rows = {item.key: item for item in diff_snapshots(smaller, small).items}
    for key in small_dropped:
        assert rows[key].before is not None and "not read" in rows[key].before, rows[key]


def test_a_recorded_message_names_the_item_it_renders() -> None:
    snapshot = _build(400)
    items = {m.get("id"): m.get("item") for m in snapshot.messages}
    assert items["u2"] == "history.m4"
