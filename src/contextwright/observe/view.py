"""Terminal views (rich): one build, a diff, a query summary.

Every text that came from a build is printed as rich ``Text`` (never parsed as markup) and
escaped for the terminal, so content cannot forge rows or drive the terminal.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Console
from rich.table import Table
from rich.text import Text

from contextwright.observe.diff import SnapshotDiff, counting_note, divergence_text
from contextwright.observe.query import SnapshotSummary
from contextwright.observe.snapshot import (
    FRAMING_NOTE,
    Snapshot,
    hashing_note,
    image_line,
    shown_hash,
)


def _t(value: object) -> Text:
    text = str(value).encode("utf-8", "backslashreplace").decode("utf-8")
    return Text("".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text))


def print_snapshot(snapshot: Snapshot, console: Console, *, messages: bool = False) -> None:
    """Header, per-source budget vs use, then every item with its fate."""
    s = snapshot
    console.print(_t(f"build {s.id}  plan {s.plan} ({s.plan_hash})  {s.status}  "
                     f"{s.total_tokens}/{s.available} tokens, window {s.window} "
                     f"({s.window_share:.0%})  {s.build_ms:.2f} ms  {s.tokenizer}"))
    if s.mode is not None or s.route is not None:
        route = ", ".join(f"{k}={v}" for k, v in (s.route or {}).items())
        console.print(_t(f"mode {s.mode}  route {route or '-'}"))
    if s.cache is not None:
        console.print(_t("cache " + ", ".join(f"{k}={v}" for k, v in s.cache.items())))
    if s.error:
        console.print(_t(f"error: {s.error}"))
    if s.redacted:
        console.print(_t(f"redacted; hashing: {hashing_note(s)}"))
    _print_sources(s, console)
    _print_items(s, console)
    for warning in s.warnings:
        console.print(_t(f"warning: {warning}"))
    _print_tools(s, console)
    if messages:
        for index, m in enumerate(s.messages):
            _print_message(index, m, console)


def _print_sources(s: Snapshot, console: Console) -> None:
    """Budget vs use per source, then the framing, so the rows add up to the total."""
    sources = Table(title="budget vs use per source")
    for column in ("source", "granted", "used", "use", "items", "truncated", "compacted",
                   "dropped"):
        sources.add_column(column, justify="left" if column == "source" else "right")
    for row in s.sources:
        budget, used = int(row["budget"]), int(row["tokens"])
        bar = "█" * round(10 * used / budget) if budget else ""
        sources.add_row(_t(row["source"]), str(budget), str(used), _t(f"{bar:<10}"),
                        *(str(row[f]) for f in ("items", "truncated", "compacted", "dropped")))
    framing = s.framing_tokens
    if framing is not None:
        sources.add_row("(framing)", "", str(framing), "", "", "", "", "")
        sources.add_row("(total)", "", str(s.total_tokens), "", "", "", "", "")
    console.print(sources)
    if framing is not None:
        used = sum(int(row["tokens"]) for row in s.sources)
        console.print(_t(f"sources {used} + framing {framing} = total {s.total_tokens} "
                         f"(framing: {FRAMING_NOTE})"))


def _print_items(s: Snapshot, console: Console) -> None:
    items = Table(title="items and their fate")
    for column in ("source", "item", "fate", "tokens", "reason"):
        items.add_column(column)
    for m in s.messages:
        where = m.get("id") or m.get("label") or ""
        items.add_row(_t(m.get("section")), _t(f"{m.get('role')} {where}".strip()),
                      "recalled" if m.get("recalled") else "kept", str(m.get("tokens", 0)), "")
    for d in s.decisions:
        count = f" ×{d['count']}" if int(d.get("count", 1)) > 1 else ""
        items.add_row(_t(d["source"]), _t(f"{d['key']}{count}"), _t(d["action"]),
                      _t(f"{d.get('tokens_before', 0)}→{d.get('tokens_after', 0)}"),
                      _t(d["reason"]))
    console.print(items)


def _print_tools(s: Snapshot, console: Console) -> None:
    """The offered tool schemas (name, tokens, hash), as providers read them: first."""
    if s.tools:
        offered = Table(title=f"offered tools ({len(s.tools)})")
        for column in ("tool", "tokens", "schema sha256"):
            offered.add_column(column, justify="right" if column == "tokens" else "left")
        for tool in s.tools:
            offered.add_row(_t(tool.get("name")), str(tool.get("tokens", 0)),
                            _t(str(tool.get("sha256", ""))[:16]))
        console.print(offered)


def _print_message(index: int, m: Mapping[str, object], console: Console) -> None:
    """One rendered message as the provider reads it: reasoning, text, images, then calls."""
    console.print(_t(f"#{index} {m.get('role')} [{m.get('section')}] {m.get('tokens', 0)} "
                     "tokens"), style="bold")
    for block in _listed(m.get("thinking")):
        console.print(_t(f"{block.get('type')} ({block.get('tokens', 0)} tokens): "
                         f"{_content(block.get('text', ''))}"))
    console.print(_t(_content(m.get("content", ""))))
    for image in _listed(m.get("images")):
        console.print(_t(image_line(image)))
    for call in _listed(m.get("tool_calls")):
        console.print(_t(f"call {call.get('name')}({_content(call.get('arguments', ''))}) "
                         f"id {call.get('id')}"))


def _listed(value: object) -> list[Mapping[str, object]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list | tuple) else []


def _content(value: object) -> str:
    return shown_hash(value) if isinstance(value, Mapping) else str(value)


def print_diff(diff: SnapshotDiff, console: Console) -> None:
    """Token deltas per source, then every changed item with both fates."""
    where = divergence_text(diff)
    console.print(_t(f"{diff.a} → {diff.b}  plans {diff.plans[0]} → {diff.plans[1]}  tokens "
                     f"{diff.total_tokens[0]} → {diff.total_tokens[1]}  {where}"))
    counting = counting_note(diff)
    if counting is not None:
        console.print(_t(f"note: {counting}"))
    sources = Table(title="tokens per source")
    for column in ("source", "A", "B", "delta", "granted A→B"):
        sources.add_column(column, justify="left" if column == "source" else "right")
    for row in diff.sources:
        sources.add_row(_t(row.source), str(row.tokens_a), str(row.tokens_b), f"{row.delta:+d}",
                        f"{row.budget_a}→{row.budget_b}")
    console.print(sources)
    items = Table(title=f"items changed ({len(diff.items)})")
    for column in ("change", "source", "item", "A", "B", "tokens"):
        items.add_column(column)
    for item in diff.items:
        items.add_row(item.change, _t(item.source), _t(item.key), _t(item.before or "—"),
                      _t(item.after or "—"), f"{item.tokens_before}→{item.tokens_after}")
    console.print(items)
    for side, warnings in (("A", diff.warnings_only_a), ("B", diff.warnings_only_b)):
        for warning in warnings:
            console.print(_t(f"warning only in {side}: {warning}"))


def print_summary(summary: SnapshotSummary, console: Console) -> None:
    """The query's tables: lengths, unused grants, most cut sources, most dropped items."""
    console.print(f"{summary.builds} builds")
    lengths = Table(title="context length")
    for column in ("group", "builds", "p50", "p95", "max", "p95 share", "max share",
                   "over budget", "BudgetError", "truncating"):
        lengths.add_column(column, justify="left" if column == "group" else "right")
    for r in summary.lengths:
        lengths.add_row(_t(r.group), str(r.builds), f"{r.p50_tokens:.0f}", f"{r.p95_tokens:.0f}",
                        str(r.max_tokens), f"{r.p95_window_share:.0%}",
                        f"{r.max_window_share:.0%}", str(r.over_budget), str(r.budget_errors),
                        str(r.truncated_builds))
    console.print(lengths)
    sources = Table(title="granted but unused")
    for column in ("source", "builds", "granted", "used", "unused", "unused share",
                   "builds with unused"):
        sources.add_column(column, justify="left" if column == "source" else "right")
    for s in summary.sources:
        sources.add_row(_t(s.source), str(s.builds), str(s.granted), str(s.used), str(s.unused),
                        f"{s.unused_share:.0%}", str(s.builds_with_unused))
    console.print(sources)
    cut = Table(title="most cut sources")
    for column in ("source", "builds cut", "truncated", "compacted", "dropped"):
        cut.add_column(column, justify="left" if column == "source" else "right")
    for s in summary.most_cut:
        cut.add_row(_t(s.source), str(s.cut_builds), str(s.truncated), str(s.compacted),
                    str(s.dropped))
    console.print(cut)
    items = Table(title="most dropped items")
    for column in ("source", "item", "dropped", "cut"):
        items.add_column(column, justify="left" if column in ("source", "item") else "right")
    for item in summary.most_dropped:
        items.add_row(_t(item.source), _t(item.key), str(item.dropped), str(item.cut))
    console.print(items)
