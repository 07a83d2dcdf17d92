"""Reading a session's log as rounds: a round starts at each user message.

Pure helpers over the store's ``StoredMessage`` lists; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextwright.core.items import Message, parse_message
from contextwright.session.store import StoredMessage


def split_rounds(messages: Sequence[StoredMessage]) -> list[list[StoredMessage]]:
    """Group messages into rounds; messages before the first user message form a round too."""
    rounds: list[list[StoredMessage]] = []
    for stored in messages:
        if stored.message.get("role") == "user" or not rounds:
            rounds.append([stored])
        else:
            rounds[-1].append(stored)
    return rounds


def last_user_index(messages: Sequence[StoredMessage]) -> int | None:
    """Position of the newest user message, or None if there is none."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].message.get("role") == "user":
            return index
    return None


def as_messages(messages: Sequence[StoredMessage], where: str = "session") -> list[Message]:
    """Parsed messages (``InvalidInputError`` names the bad one by its seq)."""
    return [parse_message(stored.message, f"{where}[seq {stored.seq}]") for stored in messages]


def plain(messages: Sequence[StoredMessage]) -> list[Mapping[str, Any]]:
    """The stored message dicts, as a request's history or turn."""
    return [stored.message for stored in messages]
