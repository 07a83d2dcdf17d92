"""Shared helpers of the observe tests: the demo's pressured build, a sink that always fails."""

from __future__ import annotations

from typing import Any

from contextwright import BuildPlan, Request
from contextwright.demo import (
    EXTRA_TOOLS,
    SYSTEM,
    TOOLS,
    USER_INPUT,
    WEATHER_CALL,
    WEATHER_RESULT,
    pressure_history,
)


def pressured() -> tuple[BuildPlan, Request]:
    """The demo's pressured build: 40 rounds, six tools, a 4,096-token window."""
    plan = BuildPlan.named("tool_heavy").with_budget(window=4096, reserved_output=512)
    request = Request(user_input=USER_INPUT, system=SYSTEM, history=pressure_history(),
                      turn=[WEATHER_CALL, WEATHER_RESULT], tools=TOOLS + EXTRA_TOOLS)
    return plan, request


class RaisingSink:
    """A sink whose every call fails, as a dead database would."""

    def __init__(self) -> None:
        self.calls = 0

    def write(self, snapshots: Any) -> None:
        self.calls += 1
        raise OSError("disk full")

    def read(self, query: Any = None) -> list[Any]:
        raise OSError("disk full")

    def get(self, snapshot_id: str) -> Any:
        raise OSError("disk full")

    def purge(self, *, older_than: float | None = None, keep_last: int | None = None) -> int:
        raise OSError("disk full")

    def close(self) -> None:
        pass
