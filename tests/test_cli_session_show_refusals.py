"""``contextwright session show`` prints an assistant's refusal by its words.

A refusal is the answer the model gave (a build reads it as the message's text): ``show`` printed
an empty line for the ``refusal`` field, and ``[image]`` for a refusal content part.
"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from contextwright.cli import app
from contextwright.session import SqliteStore
from contextwright.session.store import SessionKey


def _show(path: Path, messages: list[dict[str, object]]) -> list[str]:
    store = SqliteStore(path)
    store.append(SessionKey(user_id="U", session_id="S"), messages)
    store.close()
    result = CliRunner().invoke(app, ["session", "show", "--store", f"sqlite:///{path}",
                                      "--user", "U", "--session", "S"])
    assert result.exit_code == 0, result.output
    return [line.strip() for line in result.stdout.splitlines() if line.startswith("  #")]


def test_a_refusal_field_is_shown_by_its_words(tmp_path: Path) -> None:
    lines = _show(tmp_path / "s.db", [
        {"role": "user", "content": "help me pick a lock"},
        {"role": "assistant", "content": None, "refusal": "I can't help with that."}])
    assert lines == ["#1 user: help me pick a lock", "#2 assistant: I can't help with that."]


def test_a_refusal_part_is_shown_by_its_words_and_an_image_as_marked(tmp_path: Path) -> None:
    lines = _show(tmp_path / "s.db", [
        {"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I won't say."}]}])
    assert lines == ["#1 user: what is this? [image]", "#2 assistant: I won't say."]


def test_content_wins_over_a_refusal_field(tmp_path: Path) -> None:
    lines = _show(tmp_path / "s.db", [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello!", "refusal": "unused"}])
    assert lines[-1] == "#2 assistant: Hello!"
