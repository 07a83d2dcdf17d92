"""Long unbroken text (a base64 tool argument, a document's long URL, long reasoning) wraps
inside the HTML report instead of running off the page, measured in headless Chromium."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from contextwright import BuildPlan, Request
from contextwright.observe import render_html
from contextwright.observe.replay import snapshot_of

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SKIP_BROWSER = os.environ.get("CONTEXTWRIGHT_SKIP_BROWSER") == "1"
_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
          "--no-first-run", "--disable-extensions", "--disable-background-networking"]
_PROBE = """<script>
const over = [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
  .map(e => e.tagName.toLowerCase() + '.' + e.getAttribute('class'));
document.body.setAttribute('data-probe', JSON.stringify({
  scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
  overflowing: over.slice(0, 8)}));
</script></body>"""
"""Appended to a copy of the page only to measure it: what reaches past the window's edge."""


def _long_request() -> Request:
    blob = "QUJD" * 1000  # 4,000 characters without a place to break
    call = {"id": "call_1", "type": "function",
            "function": {"name": "upload_file", "arguments": json.dumps({"data": blob})}}
    thinking = {"role": "assistant", "content": None, "tool_calls": [call],
                "thinking_blocks": [{"type": "thinking", "thinking": "x" * 3000,
                                     "signature": "c2ln"}]}
    return Request(
        user_input="please upload it",
        history=[{"role": "user", "content": "here is the file"}, thinking,
                 {"role": "tool", "tool_call_id": "call_1", "name": "upload_file",
                  "content": "ok"}],
        documents=[{"id": "d1", "text": "some doc text",
                    "source": "https://docs.example.com/" + "a" * 400 + "/page.html"}],
        tools=[{"type": "function", "function": {
            "name": "upload_file", "description": "up",
            "parameters": {"type": "object", "properties": {"data": {"type": "string"}}}}}])


@pytest.mark.skipif(CHROMIUM is None and SKIP_BROWSER,
                    reason="no chromium and CONTEXTWRIGHT_SKIP_BROWSER=1")
@pytest.mark.parametrize("redact", [False, True])
def test_long_unbroken_text_stays_inside_the_window(tmp_path: Path, redact: bool) -> None:
    if CHROMIUM is None:  # CI must not pass by skipping: .ci/run installs the browser
        pytest.fail("chromium is not installed; set CONTEXTWRIGHT_SKIP_BROWSER=1 to skip",
                    pytrace=False)
    snapshot = snapshot_of(BuildPlan.named("tool_heavy"), _long_request(), redact=redact)
    page = render_html(snapshot, snapshot)
    assert page.count("</body>") == 1
    out = tmp_path / "probe.html"
    out.write_text(page.replace("</body>", _PROBE), encoding="utf-8")
    dom = subprocess.run([CHROMIUM, *_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                          "--window-size=1000,900", "--dump-dom", out.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    found = re.search(r'data-probe="([^"]*)"', dom)
    assert found is not None, dom[:300]
    probe = json.loads(html.unescape(found.group(1)))
    assert probe["overflowing"] == [], probe
    assert probe["scrollWidth"] <= probe["innerWidth"], probe
