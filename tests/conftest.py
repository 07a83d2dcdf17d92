"""Test configuration: Hypothesis profiles and the ``shared_data`` and ``rendered`` fixtures.

``.ci/run`` selects the ``ci`` profile (``CONTEXTWRIGHT_HYPOTHESIS_PROFILE=ci``): the same
examples on every run, so CI is repeatable; locally the default profile explores new examples
on every run.

``shared_data`` is ``../shared/data`` (the development datasets: LoCoMo, τ-bench, HotpotQA),
for tests marked ``data``; it skips the test, saying why, when the folder is absent.

``rendered`` lists the key of every item the builder renders (and counts) from then on, so a
test can check that a message is rendered once and then reused.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from contextwright.core import gather

SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data``; skips the test when the folder is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"needs the development datasets in ../shared/data ({SHARED_DATA} is absent)")
    return SHARED_DATA


@pytest.fixture
def rendered(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Keys of the items the builder renders from now on, in order (repeats kept)."""
    keys: list[str] = []
    render = gather.render_candidate

    def counting(item: Any, costing: Any, limit: int) -> Any:
        keys.append(item.key)
        return render(item, costing, limit)

    monkeypatch.setattr(gather, "render_candidate", counting)
    return keys


settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("CONTEXTWRIGHT_HYPOTHESIS_PROFILE", "default"))
