"""Test configuration: Hypothesis profiles.

``.ci/run`` selects the ``ci`` profile (``CONTEXTWRIGHT_HYPOTHESIS_PROFILE=ci``): the same
examples on every run, so CI is repeatable; locally the default profile explores new examples
on every run.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("CONTEXTWRIGHT_HYPOTHESIS_PROFILE", "default"))
