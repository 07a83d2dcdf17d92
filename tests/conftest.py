"""Test configuration: Hypothesis profiles and the ``shared_data`` fixture.

``.ci/run`` selects the ``ci`` profile (``CONTEXTWRIGHT_HYPOTHESIS_PROFILE=ci``): the same
examples on every run, so CI is repeatable; locally the default profile explores new examples
on every run.

``shared_data`` is ``../shared/data`` (the development datasets: LoCoMo, τ-bench, HotpotQA),
for tests marked ``data``; it skips the test, saying why, when the folder is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data``; skips the test when the folder is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"needs the development datasets in ../shared/data ({SHARED_DATA} is absent)")
    return SHARED_DATA


settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("CONTEXTWRIGHT_HYPOTHESIS_PROFILE", "default"))
