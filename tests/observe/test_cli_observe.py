"""``contextwright snapshots query|list|show|purge``, ``inspect``, ``diff``, ``replay``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from observe_helpers import pressured
from typer.testing import CliRunner

from contextwright import BuildPlan, ContextBuilder, ContextManager
from contextwright.cli import app
from contextwright.observe import SnapshotRecorder, SqliteSink, open_sink

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "request.json"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _run(runner: CliRunner, *args: str, code: int = 0) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A snapshot database with three pressured builds and one roomy one, unredacted."""
    path = tmp_path / "snapshots.db"
    recorder = SnapshotRecorder(SqliteSink(path), redact=False)
    builder = ContextBuilder(snapshots=recorder)
    plan, request = pressured()
    for _ in range(3):
        builder.build(plan, request)
    builder.build(plan.with_budget(window=32768), request)
    recorder.close()
    return f"sqlite:///{path}"


def test_query_prints_the_distribution_and_the_wasteful_sources(runner: CliRunner,
                                                               db: str) -> None:
    data = json.loads(_run(runner, "snapshots", "query", "--sink", db, "--json").stdout)
    assert data["builds"] == 4
    (heavy,) = data["lengths"]
    assert heavy["group"] == "tool_heavy" and heavy["builds"] == 4
    assert heavy["p95_tokens"] == heavy["max_tokens"] > heavy["p50_tokens"]
    assert heavy["truncated_builds"] == 3
    assert data["most_dropped"][0]["key"] == "history.*"
    assert {row["source"] for row in data["sources"]} >= {"history", "tools", "env"}
    table = _run(runner, "snapshots", "query", "--sink", db).stdout
    for title in ("context length", "granted but unused", "most cut sources",
                  "most dropped items"):
        assert title in table
    none = json.loads(_run(runner, "snapshots", "query", "--sink", db, "--plan", "chat",
                           "--json").stdout)
    assert none["builds"] == 0
    recent = json.loads(_run(runner, "snapshots", "query", "--sink", db, "--since", "1h",
                             "--json").stdout)
    assert recent["builds"] == 4


def test_list_show_and_purge(runner: CliRunner, db: str, tmp_path: Path) -> None:
    rows = json.loads(_run(runner, "snapshots", "list", "--sink", db, "--json").stdout)
    assert len(rows) == 4 and rows[-1]["window"] == 32768
    shown = _run(runner, "snapshots", "show", rows[0]["id"], "--sink", db, "--json").stdout
    saved = tmp_path / "one.json"
    saved.write_text(shown, encoding="utf-8")
    assert json.loads(shown)["id"] == rows[0]["id"]
    table = _run(runner, "snapshots", "show", "latest", "--sink", db).stdout
    assert "budget vs use per source" in table and "items and their fate" in table
    assert "removed 2" in _run(runner, "snapshots", "purge", "--sink", db, "--keep", "2").stdout
    assert len(open_sink(db).read()) == 2
    inspected = _run(runner, "inspect", str(saved)).stdout
    assert rows[0]["id"] in inspected


def test_inspect_a_request_file_shows_sources_and_item_fates(runner: CliRunner) -> None:
    out = _run(runner, "inspect", "--request", str(EXAMPLE), "--plan", "tool_heavy",
               "--messages").stdout
    assert "plan tool_heavy" in out and "tool_results" in out and "kept" in out


def test_diff_of_two_snapshots_and_of_two_plans(runner: CliRunner, db: str) -> None:
    data = json.loads(_run(runner, "diff", "latest~1", "latest", "--sink", db,
                           "--json").stdout)
    assert data["total_tokens"][1] > data["total_tokens"][0]
    assert any(item["change"] == "added" for item in data["items"])
    history = next(row for row in data["sources"] if row["source"] == "history")
    assert history["delta"] > 0
    two = json.loads(_run(runner, "diff", "--request", str(EXAMPLE), "--plan", "tool_heavy",
                          "--plan", "simple_qa", "--json").stdout)
    # Each names the plan its build used: the given one and the sources it added.
    assert [plan.split("+")[0] for plan in two["plans"]] == ["tool_heavy", "simple_qa"]
    assert "tokens per source" in _run(runner, "diff", "latest~1", "latest", "--sink",
                                       db).stdout


def test_replay_under_another_plan_shows_the_diff(runner: CliRunner, db: str,
                                                  tmp_path: Path) -> None:
    plan_file = tmp_path / "wide.json"
    plan = BuildPlan.named("tool_heavy")
    plan_file.write_text(json.dumps({"name": "wide", "sources": [
        {"source": s.source, "weight": s.weight} for s in plan.sources],
        "budget": {"window": 16384}}), encoding="utf-8")
    html = tmp_path / "replay.html"
    data = json.loads(_run(runner, "replay", "latest~3", "--plan", str(plan_file), "--sink", db,
                           "--json", "--html", str(html), "--window", "16384").stdout)
    assert data["replayed"]["plan"] == "wide" and data["replayed"]["window"] == 16384
    assert data["diff"]["plans"] == ["tool_heavy", "wide"]
    # The file leaves the output reserve at the default; the recorded build's 512 is held.
    assert [note.split(" is ")[0] for note in data["notes"]] == ["the plan's reserved_output 1024"]
    assert 'id="diff"' in html.read_text("utf-8")
    held = _run(runner, "replay", "latest~3", "--plan", str(plan_file), "--sink", db).stdout
    assert "note: the plan's window 16384 is not used" in held  # never silently


def test_a_redacted_snapshot_cannot_be_replayed(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    recorder = SnapshotRecorder(SqliteSink(path))
    ContextBuilder(snapshots=recorder).build(*pressured())
    recorder.close()
    result = _run(runner, "replay", "latest", "--plan", "chat", "--sink", f"sqlite:///{path}",
                  code=2)
    assert "redacted" in result.stderr and result.stderr.count("\n") == 1


def test_bad_input_is_one_line_and_exit_code_2(runner: CliRunner, tmp_path: Path,
                                               db: str) -> None:
    missing = f"sqlite:///{tmp_path}/nothing.db"
    for args in (["snapshots", "query", "--sink", missing],
                 ["snapshots", "show", "0123abc", "--sink", db],
                 ["snapshots", "query", "--sink", db, "--since", "yesterday"],
                 ["snapshots", "query", "--sink", db, "--group-by", "tenant"],
                 ["snapshots", "purge", "--sink", db],
                 ["diff", "latest", "--sink", db],
                 ["inspect"],
                 ["snapshots", "show", "latest~99", "--sink", db]):
        result = _run(runner, *args, code=2)
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, args
    assert not (tmp_path / "nothing.db").exists()
    for ref in ("latest~-1", "latest~abc"):  # the error says what a ref looks like
        result = _run(runner, "snapshots", "show", ref, "--sink", db, code=2)
        assert "latest~N takes a whole number" in result.stderr, ref


_DAMAGED_FIELDS: dict[str, Any] = {
    "total_tokens": "x", "window": None, "build_ms": "x", "created_at": "x",
    "sources": "x", "messages": "x", "decisions": "x", "request": None, "plan_spec": "x",
    "sources[0]": "x", "messages[0]": 5, "decisions[0]": {"source": "history"},
}


def _damaged(snapshot: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(snapshot))
    if field.endswith("[0]"):
        rows = data[field[:-3]] or [{}]
        rows[0] = value
        data[field[:-3]] = rows
    else:
        data[field] = value
    return data


@pytest.mark.parametrize("field", sorted(_DAMAGED_FIELDS))
def test_a_snapshot_file_with_a_field_of_the_wrong_type_is_one_error_line(
        runner: CliRunner, db: str, tmp_path: Path, field: str) -> None:
    good = json.loads(_run(runner, "snapshots", "show", "latest", "--sink", db, "--json").stdout)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_damaged(good, field, _DAMAGED_FIELDS[field])))
    (tmp_path / "good.json").write_text(json.dumps(good))
    for args in (["inspect", str(path)], ["replay", str(path), "--plan", "chat"],
                 ["diff", str(path), str(tmp_path / "good.json")]):
        result = _run(runner, *args, code=2)
        assert result.stderr.startswith("error: CorruptRecordError: "), args
        assert result.stderr.count("\n") == 1 and field.split("[")[0] in result.stderr, args


def test_a_sink_line_with_a_field_of_the_wrong_type_is_skipped_and_named(
        runner: CliRunner, db: str, tmp_path: Path) -> None:
    good = json.loads(_run(runner, "snapshots", "show", "latest", "--sink", db, "--json").stdout)
    damaged = {**_damaged(good, "total_tokens", "x"), "id": good["id"][:-1] + "0"}
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(damaged) + "\n")
    for command in ("query", "list"):
        result = _run(runner, "snapshots", command, "--sink", f"jsonl:///{path}")
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("warning: ")
        assert "of s.jsonl: line 2" in result.stderr and "total_tokens" in result.stderr
    listed = json.loads(_run(runner, "snapshots", "list", "--sink", f"jsonl:///{path}",
                             "--json").stdout)
    assert [row["id"] for row in listed] == [good["id"]]


def test_the_cli_reads_a_redis_sink(runner: CliRunner, redis_prefix_url: str) -> None:
    recorder = SnapshotRecorder(open_sink(redis_prefix_url))
    manager = ContextManager(snapshots=recorder, background=False)
    manager.prepare("lena_park_88", "s", "hello")
    recorder.close()
    rows = json.loads(_run(runner, "snapshots", "list", "--sink", redis_prefix_url,
                           "--json").stdout)
    assert len(rows) == 1 and rows[0]["mode"] is not None


def test_list_and_query_find_a_users_builds_by_the_id_redaction_hashed(
        runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "snapshots.db"
    recorder = SnapshotRecorder(SqliteSink(path))  # redacted: ids are kept hashed
    manager = ContextManager(snapshots=recorder, background=False)
    for user in ("ada@example.com", "bob@example.com", "ada@example.com"):
        manager.prepare(user_id=user, session_id="s1", text="hi")
    manager.close()
    recorder.close()
    sink = f"sqlite:///{path}"
    assert "ada@example.com" not in path.read_bytes().decode("utf-8", "replace")
    listed = json.loads(_run(runner, "snapshots", "list", "--sink", sink, "--user",
                             "ada@example.com", "--limit", "1", "--json").stdout)
    assert len(listed) == 1
    summary = json.loads(_run(runner, "snapshots", "query", "--sink", sink, "--user",
                              "ada@example.com", "--session", "s1", "--json").stdout)
    assert summary["builds"] == 2
    nobody = json.loads(_run(runner, "snapshots", "query", "--sink", sink, "--user",
                             "eve@example.com", "--json").stdout)
    assert nobody["builds"] == 0


def test_inspect_and_diff_read_a_request_from_standard_input(runner: CliRunner) -> None:
    raw = EXAMPLE.read_bytes()
    from_file = json.loads(_run(runner, "diff", "--request", str(EXAMPLE), "--plan",
                                "tool_heavy", "--plan", "simple_qa", "--json").stdout)
    result = runner.invoke(app, ["diff", "--request", "-", "--plan", "tool_heavy", "--plan",
                                 "simple_qa", "--json"], input=raw)
    assert result.exit_code == 0, result.output  # read once, built under both plans
    piped = json.loads(result.stdout)
    assert {k: v for k, v in piped.items() if k not in ("a", "b")} == {
        k: v for k, v in from_file.items() if k not in ("a", "b")}
    shown = runner.invoke(app, ["inspect", "--request", "-"], input=raw)
    assert shown.exit_code == 0 and "budget vs use per source" in shown.stdout
