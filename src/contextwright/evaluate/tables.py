"""Tables of a ``SuiteResult``: one row per budget, each metric as "contextwright / baseline".

``table_rows`` gives the cells; ``format_text`` and ``format_markdown`` lay them out (the CLI
and ``bench/quality.py`` print these). Targets sit next to the numbers they judge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from contextwright.evaluate.records import BudgetSummary, SuiteResult

COUNT_METRICS = frozenset(("tokens", "placeholders"))
"""Metrics that are amounts, not shares (shown with fewer digits)."""


def cell(value: float | None, metric: str) -> str:
    """One number as shown in a table (``-`` when nothing could be measured)."""
    if value is None:
        return "-"
    return f"{value:,.1f}" if metric in COUNT_METRICS else f"{value:.3f}"


def target_cell(row: BudgetSummary) -> str:
    """``strict_recall ≥ 0.65 met`` for each target of the row; empty when there is none."""
    parts = []
    for metric, goal in row.targets.items():
        value = row.contextwright.get(metric)
        verdict = "met" if value is not None and value >= goal - 1e-12 else "missed"
        parts.append(f"{metric} ≥ {goal:g} {verdict}")
    return "; ".join(parts)


def table_rows(result: SuiteResult) -> tuple[list[str], list[list[str]]]:
    """(headers, rows): budget, cases, failures, each metric "cw / baseline", targets."""
    headers = ["budget", "cases", "failures",
               *(f"{metric} cw / base" for metric in result.metrics), "target"]
    rows = []
    for row in result.budgets:
        metrics = [f"{cell(row.contextwright.get(m), m)} / {cell(row.baseline.get(m), m)}"
                   for m in result.metrics]
        rows.append([f"{row.budget:,}", str(row.cases), str(row.failures), *metrics,
                     target_cell(row)])
    return headers, rows


def extra_lines(extra: Mapping[str, float | str | None]) -> list[str]:
    """``name: value`` lines for the budget-independent numbers."""
    return [f"{name}: {value:.3f}" if isinstance(value, float) else f"{name}: {value}"
            for name, value in extra.items()]


def format_text(result: SuiteResult) -> str:
    """A fixed-width table with a title line and the notes below."""
    headers, rows = table_rows(result)
    widths = [max(len(line[i]) for line in [headers, *rows]) for i in range(len(headers))]
    lines = [_title(result), "", _join(headers, widths), "-+-".join("-" * w for w in widths)]
    lines += [_join(row, widths) for row in rows]
    return "\n".join([*lines, "", *_notes(result)])


def format_markdown(result: SuiteResult) -> str:
    """A Markdown table (for the README) with a title line and the notes below."""
    headers, rows = table_rows(result)
    lines = [f"**{_title(result)}**", "", _md(headers), _md(["---"] * len(headers))]
    lines += [_md(row) for row in rows]
    return "\n".join([*lines, "", *(f"- {note}" for note in _notes(result))])


def _title(result: SuiteResult) -> str:
    return f"{result.suite}: plan {result.plan}; tokenizer {result.tokenizer}"


def _notes(result: SuiteResult) -> list[str]:
    notes = [f"baseline: {result.baseline}", *extra_lines(result.extra)]
    for row in result.budgets:
        notes += [f"failure @ {row.budget}: {error}" for error in row.errors]
    return notes


def _join(cells: Sequence[str], widths: Sequence[int]) -> str:
    return " | ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


def _md(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"
