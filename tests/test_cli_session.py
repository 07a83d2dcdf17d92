"""``contextwright session list|show|export|erase`` over a real SQLite store."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from contextwright.cli import app
from contextwright.session import SqliteStore
from contextwright.session.state import ModeSwitch, SessionState
from contextwright.session.store import SessionKey

runner = CliRunner()


def _seed(path: Path) -> str:
    store = SqliteStore(path)
    for user, session in (("U001", "S001"), ("U001", "S002"), ("U0010", "S001")):
        key = SessionKey(user_id=user, session_id=session)
        store.append(key, [{"role": "user", "content": f"订单 20241001 from {user}/{session}"},
                           {"role": "assistant", "content": "lone \ud800 surrogate and \x00"}])
        state = SessionState(mode="rag_enhanced", language="zh", mode_history=(ModeSwitch(
            old_mode=None, new_mode="rag_enhanced", trigger="订单", basis="rule", at_seq=1,
            at=0.0),))
        store.put_state(key, state.to_dict(), expected_version=None)
    store.close()
    return f"sqlite:///{path}"


def test_list_show_export_erase(tmp_path: Path) -> None:
    url = _seed(tmp_path / "s.db")
    listed = runner.invoke(app, ["session", "list", "--store", url, "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert [(r["user_id"], r["session_id"], r["messages"]) for r in rows] == [
        ("U001", "S001", 2), ("U001", "S002", 2), ("U0010", "S001", 2)]

    shown = runner.invoke(app, ["session", "show", "--store", url, "--user", "U001",
                                "--session", "S001"])
    assert shown.exit_code == 0, shown.output
    assert "mode rag_enhanced" in shown.stdout and "None -> rag_enhanced" in shown.stdout

    out = tmp_path / "export.json"
    exported = runner.invoke(app, ["session", "export", "--store", url, "--user", "U001",
                                   "--session", "S001", "--out", str(out)])
    assert exported.exit_code == 0, exported.output
    document = json.loads(out.read_text("ascii"))
    assert document["messages"][1]["message"]["content"] == "lone \ud800 surrogate and \x00"
    assert document["state"]["mode"] == "rag_enhanced"

    erased = runner.invoke(app, ["session", "erase", "--store", url, "--user", "U001", "--yes"])
    assert erased.exit_code == 0 and "erased 2 session(s)" in erased.stdout
    left = json.loads(runner.invoke(app, ["session", "list", "--store", url, "--json"]).stdout)
    assert [(r["user_id"], r["session_id"]) for r in left] == [("U0010", "S001")]


def test_store_url_from_the_environment(tmp_path: Path) -> None:
    url = _seed(tmp_path / "env.db")
    result = runner.invoke(app, ["session", "list"], env={"CONTEXTWRIGHT_STORE": url})
    assert result.exit_code == 0
    assert "U0010\tS001\t2 messages" in result.stdout


def test_show_missing_session_and_bad_store_url(tmp_path: Path) -> None:
    url = _seed(tmp_path / "m.db")
    missing = runner.invoke(app, ["session", "show", "--store", url, "--user", "nobody",
                                  "--session", "x"])
    assert missing.exit_code == 2 and "no such session" in missing.output
    bad = runner.invoke(app, ["session", "list", "--store", "ftp://nowhere"])
    assert bad.exit_code == 2 and "unknown store URL scheme" in bad.output


def test_erase_asks_first(tmp_path: Path) -> None:
    url = _seed(tmp_path / "a.db")
    declined = runner.invoke(app, ["session", "erase", "--store", url, "--user", "U001"],
                             input="n\n")
    assert declined.exit_code == 1
    assert len(json.loads(runner.invoke(app, ["session", "list", "--store", url,
                                              "--json"]).stdout)) == 3


def test_show_prints_calls_images_summary_and_zones(tmp_path: Path) -> None:
    from contextwright.compress.summarize import Summary
    from contextwright.modes.zones import Zones

    store = SqliteStore(tmp_path / "z.db")
    key = SessionKey(user_id="U1", session_id="S1")
    store.append(key, [
        {"role": "user", "content": [{"type": "text", "text": "what is this?"},
                                     {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "track_order", "arguments": '{"order_id": "20241001"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'}])
    summary = Summary(need="Track order 20241001", facts=("20241001",))
    state = SessionState(mode="structured", language="en", summary=summary.to_dict(),
                         zones=Zones(facts=("20241001",)))
    store.put_state(key, state.to_dict(), expected_version=None)
    store.close()
    shown = runner.invoke(app, ["session", "show", "--store", f"sqlite:///{tmp_path / 'z.db'}",
                                "--user", "U1", "--session", "S1"])
    assert shown.exit_code == 0, shown.output
    assert "#1 user: what is this? [image]" in shown.stdout
    assert '#2 assistant: → track_order({"order_id": "20241001"})' in shown.stdout
    assert "summary:\n  Original need: Track order 20241001" in shown.stdout
    assert "zone facts:\n  - 20241001" in shown.stdout
