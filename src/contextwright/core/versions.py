"""Versions of one document: ISO 8601 version times and the order of versions.

One rule for the built-in ``DocumentSource`` and the retriever: the version number first (none
is older than any), then the time, compared as an instant (naive means UTC; undated is the
oldest). Here in ``core`` and numpy-free because the built-in sources may not need the
``retrieval`` extra.
"""

from __future__ import annotations

from datetime import UTC, datetime

from contextwright.errors import InvalidInputError

UNDATED = datetime.min.replace(tzinfo=UTC)
"""The version time of a document without a timestamp: older than any dated version."""

VersionKey = tuple[int, datetime]
"""What orders versions of one document: (version or -1, time or ``UNDATED``)."""


def parse_time(value: str | None, where: str) -> datetime | None:
    """An ISO 8601 time as an aware datetime (naive means UTC); None stays None.

    Anything else is an ``InvalidInputError`` naming ``where``, never echoing the value.
    """
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInputError(f"{where} is not an ISO 8601 time") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def version_key(version: int | None, timestamp: str | None, where: str) -> VersionKey:
    """The order of one version among the versions of its document (greater is newer)."""
    return (-1 if version is None else version, parse_time(timestamp, where) or UNDATED)
