"""A diff of two builds counted with different tokenizers says so, rather than showing items
both kept whole as changed for no reason a reader can see. Real builds, the real CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextwright import BuildPlan, Request
from contextwright.cli import app
from contextwright.observe import diff_snapshots, render_html
from contextwright.observe.replay import snapshot_of

_REQUEST = Request(user_input="什么时候到？", system="You help with orders.",
                   history=[{"role": "user", "content": "我的订单 KST418 在哪里？" * 5},
                            {"role": "assistant", "content": "已发货。"}])


def test_a_diff_across_tokenizers_names_them(tmp_path: Path) -> None:
    plan = BuildPlan.named("chat")
    first = snapshot_of(plan, _REQUEST, tokenizer="cl100k_base")
    second = snapshot_of(plan, _REQUEST, tokenizer="o200k_base")
    diff = diff_snapshots(first, second)
    # Same plan, same request, same rendering: only the counting changed.
    assert diff.plans == ("chat", "chat") and diff.first_divergence is None
    assert diff.items and all(c.before == c.after for c in diff.items)
    assert diff.tokenizers == ("cl100k_base", "o200k_base")
    assert list(diff.to_dict()["tokenizers"]) == ["cl100k_base", "o200k_base"]
    note = "A counted with cl100k_base, B with o200k_base"
    assert note in render_html(second, first).replace("→", "")

    files = []
    for name, snapshot in (("a.json", first), ("b.json", second)):
        (tmp_path / name).write_text(json.dumps(snapshot.to_dict()))
        files.append(str(tmp_path / name))
    result = CliRunner().invoke(app, ["diff", *files])
    assert result.exit_code == 0, result.output
    assert f"note: {note}" in result.output

    same = diff_snapshots(first, snapshot_of(plan, _REQUEST, tokenizer="cl100k_base"))
    assert same.tokenizers == ("cl100k_base", "cl100k_base") and not same.items
    assert "different units" not in render_html(first, first)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (.ci/run installs it)")
def test_the_html_diff_names_the_tokenizers_in_chromium(tmp_path: Path) -> None:
    plan = BuildPlan.named("chat")
    first = snapshot_of(plan, _REQUEST, tokenizer="cl100k_base")
    second = snapshot_of(plan, _REQUEST, tokenizer="o200k_base")
    page = tmp_path / "diff.html"
    page.write_text(render_html(second, first), encoding="utf-8")
    dom = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
         page.as_uri()], capture_output=True, text=True, timeout=120, check=True).stdout
    assert '<p class="meta" id="diff-counting">A counted with cl100k_base, B with o200k_base' in dom
