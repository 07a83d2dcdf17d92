"""Request settings in a body are read strictly, as the Python API reads them.

``to_request`` refuses ``max_tokens=True`` and ``parallel_tool_calls="yes"``; over HTTP the
same values were coerced (``true`` became a one-token output limit) and rendered without a
word. They are 400 problems naming the field, and a refused ``prepare`` stores nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_helpers import KEYS, Running

from contextwright.builder import ContextBuilder
from contextwright.core.plan import BuildPlan
from contextwright.core.request import Request
from contextwright.errors import InvalidInputError

LOOSE: list[dict[str, Any]] = [
    {"max_tokens": True}, {"max_tokens": 64.0}, {"max_tokens": "64"},
    {"parallel_tool_calls": "yes"}, {"parallel_tool_calls": 1},
]


@pytest.fixture
def http(tmp_path: Path, serve_app: Callable[..., Running]) -> Iterator[httpx.Client]:
    running = serve_app(f"sqlite:///{tmp_path / 's.db'}")
    headers = {"Authorization": f"Bearer {KEYS['acme']}"}
    with httpx.Client(base_url=running.url, headers=headers) as client:
        yield client


@pytest.mark.parametrize("setting", LOOSE, ids=lambda s: f"{next(iter(s))}={s[next(iter(s))]!r}")
def test_a_setting_of_another_type_is_refused_as_in_process(http: httpx.Client,
                                                            setting: dict[str, Any]) -> None:
    name = next(iter(setting))
    context = ContextBuilder().build(BuildPlan.named("simple_qa"), Request(user_input="Hi"))
    with pytest.raises(InvalidInputError, match=name):
        context.to_request("openai", **setting)
    prepared = http.post("/v1/sessions/u/s/prepare", json={"text": "Hi", **setting})
    built = http.post("/v1/build", json={"user_input": "Hi", **setting})
    for answer in (prepared, built):
        assert answer.status_code == 400, answer.text
        assert answer.json()["detail"].startswith(f"invalid body: {name}: ")
    assert http.get("/v1/sessions/u/s").status_code == 404  # nothing was stored


@pytest.mark.parametrize("option", [{"window": True}, {"budget": 512.0},
                                    {"reserved_output": "100"}], ids=lambda o: next(iter(o)))
def test_a_build_option_of_another_type_is_400(http: httpx.Client,
                                               option: dict[str, Any]) -> None:
    answer = http.post("/v1/build", json={"user_input": "Hi", **option})
    assert answer.status_code == 400 and next(iter(option)) in answer.json()["detail"]


def test_settings_of_their_own_type_still_render(http: httpx.Client) -> None:
    answer = http.post("/v1/sessions/u/s/prepare", json={
        "text": "Hi", "max_tokens": 64, "parallel_tool_calls": None, "format": "openai"})
    assert answer.status_code == 200
    assert answer.json()["request"]["max_completion_tokens"] == 64
