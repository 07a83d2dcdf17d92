"""``inspect --html``: one self-contained file, checked in a real headless Chromium.

The browser is Debian's ``chromium`` (``.ci/run`` installs it): ``--dump-dom`` gives the DOM
the browser built from the file, ``--screenshot`` what it painted. Without it these tests FAIL,
so CI cannot pass by skipping them; ``CONTEXTWRIGHT_SKIP_BROWSER=1`` skips them instead.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from observe_helpers import pressured
from typer.testing import CliRunner

from contextwright import ContextBuilder
from contextwright.cli import app
from contextwright.observe import Snapshot, SnapshotRecorder, SqliteSink, render_html
from contextwright.observe.replay import snapshot_of

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SKIP_BROWSER = os.environ.get("CONTEXTWRIGHT_SKIP_BROWSER") == "1"
needs_chromium = pytest.mark.skipif(CHROMIUM is None and SKIP_BROWSER,
                                    reason="no chromium and CONTEXTWRIGHT_SKIP_BROWSER=1")
_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
          "--no-first-run", "--disable-extensions", "--disable-background-networking"]


def _chromium(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:  # CI must not pass by skipping: .ci/run installs the browser
        pytest.fail("chromium is not installed (.ci/run installs it); set "
                    "CONTEXTWRIGHT_SKIP_BROWSER=1 to skip these tests", pytrace=False)
    return subprocess.run([CHROMIUM, *_FLAGS, f"--user-data-dir={home}", *args],
                          capture_output=True, text=True, timeout=120, check=True)


class _Collector(HTMLParser):
    """Elements of the DOM dump, by tag with their attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def having(self, tag: str, cls: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.elements if t == tag and cls in (a.get("class") or "").split()]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A snapshot database holding the demo's pressured build, recorded as a user would."""
    path = tmp_path_factory.mktemp("html") / "snapshots.db"
    recorder = SnapshotRecorder(SqliteSink(path), redact=False)
    plan, request = pressured()
    ContextBuilder(snapshots=recorder).build(plan, request)
    recorder.close()
    return path


def _latest(path: Path) -> Snapshot:
    sink = SqliteSink(path)
    try:
        return sink.read()[-1]
    finally:
        sink.close()


@needs_chromium
def test_the_pressured_build_renders_in_chromium_with_every_source_and_decision(
        recorded: Path, tmp_path: Path) -> None:
    out = tmp_path / "build.html"
    result = CliRunner().invoke(app, ["inspect", "latest", "--sink", f"sqlite:///{recorded}",
                                      "--html", str(out)])
    assert result.exit_code == 0, result.output
    snapshot = _latest(recorded)
    page = out.read_text("utf-8")
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing from a network
    assert "<script" not in page
    dom = _chromium("--dump-dom", out.as_uri(), home=tmp_path / "profile").stdout
    parsed = _Collector()
    parsed.feed(dom)
    rows = parsed.having("tr", "source-row")
    assert [r["data-source"] for r in rows] == [s["source"] for s in snapshot.sources]
    bars = parsed.having("g", "source-bar")
    assert [b["data-source"] for b in bars] == [s["source"] for s in snapshot.sources]
    decisions = parsed.having("tr", "decision")
    assert len(decisions) == len(snapshot.decisions) > 20  # the budget left out a lot
    assert [d["data-key"] for d in decisions] == [d["key"] for d in snapshot.decisions]
    assert len(parsed.having("li", "message")) == len(snapshot.messages)
    assert len(parsed.having("li", "role-tool")) == sum(
        1 for m in snapshot.messages if m["role"] == "tool")
    assert len(parsed.having("span", "fence")) >= 2  # tool results are fenced as data


@needs_chromium
def test_the_page_paints_something(recorded: Path, tmp_path: Path) -> None:
    from PIL import Image

    out = tmp_path / "build.html"
    out.write_text(render_html(_latest(recorded)), encoding="utf-8")
    shot = tmp_path / "shot.png"
    _chromium(f"--screenshot={shot}", "--window-size=1000,900", out.as_uri(),
              home=tmp_path / "profile")
    image = Image.open(shot).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20) or []
    assert image.size == (1000, 900) and len(colours) > 20
    dark = sum(count for count, (r, g, b) in colours if r + g + b < 200)
    assert dark > 1000  # text, not a blank page
    blue = sum(count for count, rgb in colours if rgb == (0x1F, 0x7A, 0xE0))
    assert blue > 100  # the "used" bars of the chart


@needs_chromium
def test_the_diff_view_of_two_builds_renders(tmp_path: Path) -> None:
    plan, request = pressured()
    a = snapshot_of(plan, request)
    b = snapshot_of(plan.with_budget(window=8192), request)
    out = tmp_path / "diff.html"
    out.write_text(render_html(a, b), encoding="utf-8")
    parsed = _Collector()
    parsed.feed(_chromium("--dump-dom", out.as_uri(), home=tmp_path / "profile").stdout)
    assert parsed.having("tr", "item-change")
    assert len(parsed.having("tr", "source-delta")) == len(a.sources)


def test_content_is_escaped_and_recalled_turns_are_marked() -> None:
    from dataclasses import replace

    plan, request = pressured()
    snap = snapshot_of(plan, request)
    messages = list(snap.messages)
    at = next(i for i, m in enumerate(messages)
              if m["role"] == "user" and m.get("section") == "history")
    messages[at] = {**messages[at], "content": "<script>alert(1)</script>", "recalled": True}
    page = render_html(replace(snap, messages=tuple(messages)))
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page
    assert 'class="message role-user section-history recalled"' in page


def test_a_redacted_build_shows_hashes_not_text() -> None:
    plan, request = pressured()
    page = render_html(snapshot_of(plan, request, redact=True))
    assert "上海" not in page and "sha256" in page


def test_turns_brought_back_by_recall_are_marked_in_the_snapshot_and_the_page(
        tmp_path: Path) -> None:
    from contextwright import ContextManager

    recorder = SnapshotRecorder(SqliteSink(tmp_path / "s.db"), redact=True)
    manager = ContextManager(snapshots=recorder, background=False,
                             budget={"window": 2048, "reserved_output": 256})
    for index in range(40):
        manager.prepare("ada_quist_31", "s", f"question {index}: where is parcel KST{index} "
                        f"and what is the weather in city{index}?")
        manager.record("ada_quist_31", "s", assistant=f"answer {index}: parcel KST{index} "
                       f"is on its way, city{index} is sunny. " * 3)
    prepared = manager.prepare("ada_quist_31", "s", "what about parcel KST3 again?")
    assert any("recalled" in d.key for d in prepared.report.decisions)
    recorder.close()
    snapshot = _latest(tmp_path / "s.db")
    recalled = [m for m in snapshot.messages if m.get("recalled")]
    assert recalled and all(m["section"] == "history" for m in recalled)
    page = render_html(snapshot)
    assert page.count(" recalled\"") == len(recalled)


class _Texts(HTMLParser):
    """The text of each element of one class in a DOM dump (one level: spans, tags)."""

    def __init__(self, cls: str) -> None:
        super().__init__()
        self.cls = cls
        self.texts: list[str] = []
        self._open = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.cls in (dict(attrs).get("class") or "").split():
            self.texts.append("")
            self._open = True

    def handle_endtag(self, tag: str) -> None:
        self._open = False

    def handle_data(self, data: str) -> None:
        if self._open:
            self.texts[-1] += data


@needs_chromium
def test_a_label_with_angle_brackets_is_fenced_and_a_call_counts_its_tokens(
        tmp_path: Path) -> None:
    from contextwright import BuildPlan, Request

    call = {"id": "c1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Lyon"}'}}
    request = Request(user_input="and tomorrow?", documents=[{"id": "d<1>", "text": "Sunny."}],
                      history=[{"role": "user", "content": "weather?"},
                               {"role": "assistant", "content": None, "tool_calls": [call]},
                               {"role": "tool", "tool_call_id": "c1", "content": "25C"}])
    snapshot = snapshot_of(BuildPlan.named("tool_heavy"), request)
    out = tmp_path / "build.html"
    out.write_text(render_html(snapshot), encoding="utf-8")
    dom = _chromium("--dump-dom", out.as_uri(), home=tmp_path / "profile").stdout
    fences = _Texts("fence")
    fences.feed(dom)
    document = next(m for m in snapshot.messages if m.get("document"))
    head = document["content"].splitlines()[0]
    assert head.endswith(" d<1>>>") and head in fences.texts
    assert document["content"].splitlines()[-1] in fences.texts
    (calling,) = [m for m in snapshot.messages if m.get("tool_calls")]
    assert calling["content"] == "" and calling["tokens"] > 0
    tags = _Texts("tag")
    tags.feed(dom)
    assert f"{calling['tokens']} tokens" in tags.texts and "0 tokens" not in tags.texts
