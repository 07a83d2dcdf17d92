"""``render_html``: one build (or two, diffed) as a single self-contained HTML file.

No script, no font, no stylesheet from anywhere: the CSS is inline and the budget chart is
inline SVG, so the file opens offline and reads the same in any browser. It shows, in order:
the build's header (plan, hash, tokens, window, mode, route, cache, warnings), a chart of budget
vs use per source, the per-source table with the framing row that makes it add up to the total,
the offered tool schemas, the rendered messages (roles, sections, fence markers and recalled
turns highlighted; images as a line naming them, tool calls, reasoning), every decision with its
reason (and a cut item's original text, folded), and, given a snapshot to compare with, the diff
from it to this build. Every text is escaped; content of a redacted snapshot shows as its hash
and size.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping

from contextwright.observe.diff import (
    SnapshotDiff,
    counting_note,
    diff_snapshots,
    divergence_text,
)
from contextwright.observe.snapshot import (
    FRAMING_NOTE,
    Snapshot,
    hashing_note,
    image_line,
    recorded_hasher,
    shown_hash,
)

_FENCE = re.compile(
    r"^(&lt;&lt;data [0-9a-f]{12}(?: [^\n]*?)?&gt;&gt;|&lt;&lt;end [0-9a-f]{12}&gt;&gt;)$",
    re.MULTILINE)
"""A fence marker line, escaped. A marker is a whole line (``fence`` writes it so) and a
label may hold ``<`` and ``>`` (``d<1>``, escaped as entities), so the head runs to the
``>>`` that ends its line, not to the first ``&``."""
_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2430;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #dde}
.meta{color:#556;margin:2px 0}.meta b{color:#1d2430}
table{border-collapse:collapse;width:100%}th,td{border:1px solid #dde;padding:3px 6px;
text-align:left;vertical-align:top}th{background:#f2f4f8}td.n{text-align:right}
.message{border:1px solid #dde;border-left:6px solid #99a;margin:6px 0;padding:4px 8px;
list-style:none}.message pre{white-space:pre-wrap;word-break:break-word;margin:4px 0}
.role-system{border-left-color:#7a4bd1}.role-user{border-left-color:#1f7ae0}
.role-assistant{border-left-color:#1b9e5a}.role-tool{border-left-color:#d98b00}
.recalled{background:#fff8d8}.fence{background:#ffe2cc;color:#8a3b00;font-weight:600}
.tag{display:inline-block;font-size:12px;padding:0 6px;border-radius:8px;background:#eef;
margin-right:4px}.action-dropped,.action-conflict,.action-deduplicated,.action-failed{
background:#fdecec}.action-truncated,.action-compacted{background:#fff4e0}
.change-added{background:#e8f7ee}.change-removed{background:#fdecec}
.change-changed{background:#fff4e0}svg text{font:12px system-ui,sans-serif}
.message pre,.tool-call,.thinking,.image,.tag,td,th{overflow-wrap:anywhere}
.image{color:#556;font-style:italic}details.cut-text pre{white-space:pre-wrap;margin:4px 0}
.tag{max-width:100%;box-sizing:border-box}
"""
"""The last two rules: a long unbroken run (a base64 argument, a document's URL, an id) wraps
inside its box at any character instead of running off the page."""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def render_html(snapshot: Snapshot, compare: Snapshot | None = None, *,
                title: str | None = None, fence_secret: str | bytes | None = None) -> str:
    """The HTML page of ``snapshot``; with ``compare``, also the diff from ``compare`` to it.

    ``compare`` is the build this one is compared with (an earlier call, the original of a
    replay): the diff reads as what changed on the way to ``snapshot``.

    ``fence_secret`` (default ``CONTEXTWRIGHT_FENCE_SECRET``) is read only for a redacted
    snapshot hashed with a deployment's key, to match its hashed ids (``diff_snapshots``).
    """
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title or f'contextwright build {snapshot.id}')}</title>",
        f"<style>{_CSS}</style></head><body>",
        _header(snapshot),
        "<h2>Budget vs use per source</h2>", _chart(snapshot), _source_table(snapshot),
        f"<h2>Offered tools ({len(snapshot.tools or ())})</h2>", _tools(snapshot),
        f"<h2>Rendered messages ({len(snapshot.messages)})</h2>",
        _messages(snapshot, fence_secret),
        f"<h2>Decisions ({len(snapshot.decisions)})</h2>", _decisions(snapshot),
    ]
    if compare is not None:
        parts += [_diff(diff_snapshots(compare, snapshot, fence_secret=fence_secret))]
    parts.append("</body></html>")
    return "\n".join(parts)


def _header(s: Snapshot) -> str:
    rows = [
        ("plan", f"{s.plan} ({s.plan_hash})"), ("status", s.status),
        ("tokens", f"{s.total_tokens} of {s.available} available, window {s.window} "
                   f"({s.window_share:.0%})"),
        ("tokenizer", f"{s.tokenizer}{'' if s.exact_tokens else ' (estimated)'}"),
        ("build", f"{s.build_ms:.2f} ms, contextwright {s.library_version}"),
    ]
    if s.mode is not None:
        rows.append(("mode", s.mode))
    if s.route is not None:
        rows.append(("route", ", ".join(f"{k}={v}" for k, v in s.route.items())))
    if s.session is not None:
        rows.append(("session", f"{s.session['user_id']} / {s.session['session_id']}"))
    if s.cache is not None:
        rows.append(("cache", ", ".join(f"{k}={v}" for k, v in s.cache.items())))
    if s.error:
        rows.append(("error", s.error))
    if s.redacted:
        rows.append(("content", "redacted: texts are shown as hashes and sizes"))
        rows.append(("hashing", hashing_note(s)))
    lines = "".join(f'<p class="meta" data-field="{_e(k)}"><b>{_e(k)}</b>: {_e(v)}</p>'
                    for k, v in rows)
    warnings = "".join(f"<li>{_e(w)}</li>" for w in s.warnings)
    return (f'<header id="build" data-snapshot="{_e(s.id)}"><h1>Build {_e(s.id)}</h1>{lines}'
            + (f'<ul id="warnings">{warnings}</ul>' if warnings else "") + "</header>")


def _chart(s: Snapshot) -> str:
    rows = list(s.sources)
    scale = max([int(r["budget"]) for r in rows] + [int(r["tokens"]) for r in rows] + [1])
    width, bar, gap, left = 640, 12, 10, 110
    height = len(rows) * (2 * bar + gap) + 30
    shapes = []
    for index, row in enumerate(rows):
        y = 10 + index * (2 * bar + gap)
        budget = int(row["budget"]) * (width - left - 90) / scale
        used = int(row["tokens"]) * (width - left - 90) / scale
        shapes.append(
            f'<g class="source-bar" data-source="{_e(row["source"])}">'
            f'<text x="0" y="{y + bar + 4}">{_e(row["source"])}</text>'
            f'<rect class="budget" x="{left}" y="{y}" width="{budget:.1f}" height="{bar}" '
            f'fill="#c9d3e6"><title>budget {_e(row["budget"])}</title></rect>'
            f'<rect class="used" x="{left}" y="{y + bar}" width="{used:.1f}" height="{bar}" '
            f'fill="#1f7ae0"><title>used {_e(row["tokens"])}</title></rect>'
            f'<text x="{left + max(budget, used) + 6:.1f}" y="{y + bar + 4}">'
            f'{_e(row["tokens"])} / {_e(row["budget"])}</text></g>')
    legend = (f'<g><rect x="{left}" y="{height - 14}" width="10" height="10" fill="#c9d3e6"/>'
              f'<text x="{left + 14}" y="{height - 5}">granted</text>'
              f'<rect x="{left + 80}" y="{height - 14}" width="10" height="10" fill="#1f7ae0"/>'
              f'<text x="{left + 94}" y="{height - 5}">used</text></g>')
    return (f'<svg id="budget-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
            f'height="{height}" role="img" aria-label="budget vs use per source">'
            + "".join(shapes) + legend + "</svg>")


def _source_table(s: Snapshot) -> str:
    head = ("<tr><th>source</th><th>share</th><th>granted</th><th>used</th><th>items</th>"
            "<th>truncated</th><th>compacted</th><th>dropped</th><th>never cut</th>"
            "<th>error</th></tr>")
    rows = "".join(
        f'<tr class="source-row" data-source="{_e(r["source"])}"><td>{_e(r["source"])}</td>'
        + "".join(f'<td class="n">{_e(r[f])}</td>' for f in (
            "share", "budget", "tokens", "items", "truncated", "compacted", "dropped"))
        + f'<td>{"yes" if not r.get("cuttable", True) else ""}</td>'
        f'<td>{_e(r.get("error") or "")}</td></tr>' for r in s.sources)
    return f'<table id="sources">{head}{rows}{_framing_rows(s)}</table>'


def _framing_rows(s: Snapshot) -> str:
    """The rows that make the table add up: framing, then the total."""
    framing = s.framing_tokens
    if framing is None:
        return ""
    used = sum(int(r["tokens"]) for r in s.sources)
    return (f'<tr class="framing-row"><td>framing</td><td></td><td></td>'
            f'<td class="n">{framing}</td><td colspan="6">{_e(FRAMING_NOTE)}</td></tr>'
            f'<tr class="total-row"><td>total</td><td></td><td></td>'
            f'<td class="n">{s.total_tokens}</td><td colspan="6">sources {used} + framing '
            f"{framing} = {s.total_tokens}</td></tr>")


def recalled_ids(s: Snapshot) -> frozenset[str]:
    """Ids of rendered messages a recall decision names (``history.recalled.<id>``)."""
    keys = {str(d["key"]) for d in s.decisions if "recalled" in str(d["key"])}
    return frozenset(key.rsplit(".", 1)[-1] for key in keys)


def _content(value: object) -> str:
    if isinstance(value, Mapping):
        return f'<span class="hash">{_e(shown_hash(value))}</span>'
    return _FENCE.sub(r'<span class="fence">\1</span>', _e(value))


def _messages(s: Snapshot, fence_secret: str | bytes | None) -> str:
    recalled = recalled_ids(s)
    hasher = recorded_hasher(s, fence_secret) if s.redacted and recalled else None
    if hasher is not None:  # decision keys name a message as the build did; its id is hashed
        recalled |= frozenset(hasher.identifier(i) for i in recalled)
    items = []
    for index, m in enumerate(s.messages):
        is_recalled = bool(m.get("recalled")) or str(m.get("id", "")) in recalled
        classes = (f"message role-{_e(m.get('role'))} section-{_e(m.get('section'))}"
                   + (" recalled" if is_recalled else ""))
        tags = [f'<span class="tag">#{index}</span>',
                f'<span class="tag">{_e(m.get("role"))}</span>',
                f'<span class="tag">{_e(m.get("section"))}</span>',
                f'<span class="tag">{_e(m.get("tokens", 0))} tokens</span>']
        for name in ("label", "id", "name", "tool_call_id"):
            if m.get(name):
                tags.append(f'<span class="tag">{name} {_e(m[name])}</span>')
        if is_recalled:
            tags.append('<span class="tag">recalled</span>')
        calls = "".join(
            f'<div class="tool-call">call {_e(c.get("name"))}({_content(c.get("arguments"))})'
            f' id {_e(c.get("id"))}</div>' for c in m.get("tool_calls", ()))
        # The reasoning sent back opens the message, as the provider receives it.
        thinking = "".join(
            f'<div class="thinking">{_e(t.get("type"))} ({_e(t.get("tokens", 0))} tokens): '
            f'{_content(t.get("text", ""))}</div>' for t in m.get("thinking", ()))
        images = "".join(f'<div class="image">{_e(image_line(i))}</div>'
                         for i in m.get("images", ()))
        items.append(f'<li class="{classes}" data-index="{index}">{"".join(tags)}{thinking}'
                     f'<pre>{_content(m.get("content", ""))}</pre>{images}{calls}</li>')
    return f'<ol id="messages">{"".join(items)}</ol>'


def _tools(s: Snapshot) -> str:
    """The offered tool schemas: name, tokens and hash, in the order providers read them."""
    rows = "".join(
        f'<tr class="offered-tool" data-tool="{_e(t.get("name"))}"><td>{_e(t.get("name"))}</td>'
        f'<td class="n">{_e(t.get("tokens", 0))}</td>'
        f'<td>{_e(str(t.get("sha256", ""))[:16])}</td></tr>' for t in s.tools or ())
    return ('<table id="offered-tools"><tr><th>tool</th><th>tokens</th><th>schema sha256</th>'
            f"</tr>{rows}</table>")


def _decisions(s: Snapshot) -> str:
    head = ("<tr><th>#</th><th>source</th><th>key</th><th>fate</th><th>reason</th>"
            "<th>tokens</th><th>count</th></tr>")
    rows = "".join(
        f'<tr class="decision action-{_e(d["action"])}" data-key="{_e(d["key"])}">'
        f'<td class="n">{index}</td><td>{_e(d["source"])}</td><td>{_e(d["key"])}</td>'
        f'<td>{_e(d["action"])}</td><td>{_e(d["reason"])}{_cut_text(d)}</td>'
        f'<td class="n">{_e(d.get("tokens_before", 0))}→{_e(d.get("tokens_after", 0))}</td>'
        f'<td class="n">{_e(d.get("count", 1))}</td></tr>'
        for index, d in enumerate(s.decisions))
    return f'<table id="decisions">{head}{rows}</table>'


def _cut_text(decision: Mapping[str, object]) -> str:
    """The original text of a truncated or compacted item, folded (no script: ``details``)."""
    detail = decision.get("detail")
    if detail is None:
        return ""
    return (f'<details class="cut-text"><summary>original text</summary>'
            f"<pre>{_content(detail)}</pre></details>")


def _diff(d: SnapshotDiff) -> str:
    where = divergence_text(d)
    counting = counting_note(d)
    sources = "".join(
        f'<tr class="source-delta" data-source="{_e(r.source)}"><td>{_e(r.source)}</td>'
        f'<td class="n">{r.tokens_a}</td><td class="n">{r.tokens_b}</td>'
        f'<td class="n">{r.delta:+d}</td><td class="n">{r.budget_a}→{r.budget_b}</td></tr>'
        for r in d.sources)
    items = "".join(
        f'<tr class="item-change change-{_e(c.change)}" data-key="{_e(c.key)}">'
        f'<td>{_e(c.change)}</td><td>{_e(c.source)}</td><td>{_e(c.key)}</td>'
        f'<td>{_e(c.before or "—")}</td><td>{_e(c.after or "—")}</td>'
        f'<td class="n">{c.tokens_before}→{c.tokens_after}</td></tr>' for c in d.items)
    warnings = "".join(
        f'<li class="warning-only-{side.lower()}">only in {side}: {_e(w)}</li>'
        for side, found in (("A", d.warnings_only_a), ("B", d.warnings_only_b)) for w in found)
    return (f'<section id="diff" data-a="{_e(d.a)}" data-b="{_e(d.b)}">'
            f"<h2>Diff {_e(d.a)} → {_e(d.b)} (from the compared build to this one)</h2>"
            f'<p class="meta">plans {_e(d.plans[0])} → {_e(d.plans[1])}; tokens '
            f"{d.total_tokens[0]} → {d.total_tokens[1]}; {_e(where)}</p>"
            + (f'<p class="meta" id="diff-counting">{_e(counting)}</p>' if counting else "")
            + '<table id="diff-sources"><tr><th>source</th><th>tokens A</th><th>tokens B</th>'
            f"<th>delta</th><th>granted</th></tr>{sources}</table>"
            f'<h2>Items changed ({len(d.items)})</h2><table id="diff-items"><tr><th>change</th>'
            "<th>source</th><th>key</th><th>before</th><th>after</th><th>tokens</th></tr>"
            f"{items}</table>"
            + (f'<h2>Warnings that differ</h2><ul id="diff-warnings">{warnings}</ul>'
               if warnings else "") + "</section>")
