"""Hostile and careless files get a typed error, bounded work, and never a traceback.

Every file the library or the CLI reads — plans, modes configs, requests, dataset files, in each
format they may come in — is fed an alias bomb, invalid UTF-8 and nesting deep enough to exhaust
the stack. The library answers with its own error type; the CLI with exit code 2 and one line.
The session commands print hostile ids escaped, refuse a SQLite file that does not exist instead
of creating it, and fail cleanly on an export they cannot write or a session that is not there.
"""

from __future__ import annotations

import json
import shutil
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwright.cli import app
from contextwright.cli_eval import eval_app
from contextwright.core.parsing import MAX_DEPTH
from contextwright.core.plan import MAX_CONFIG_BYTES, BuildPlan
from contextwright.errors import DatasetError, PlanError
from contextwright.evaluate._files import read_json, read_jsonl
from contextwright.modes.config import ModesConfig
from contextwright.session import SqliteStore
from contextwright.session.store import SessionKey

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "request.json"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "eval"
SECRET = "sk-SECRET-5a1"

# Nine levels of nine aliases each: 9**9 (about 387 million) nodes from well under a kilobyte.
ALIAS_BOMB = "\n".join(
    ["name: bomb", "sources:", "  - source: user", "    options:",
     '      l0: &l0 ["lol"]']
    + [f"      l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]
) + "\n"

def nested(depth: int) -> str:
    """JSON (also TOML and YAML flow syntax) of ``depth`` nested lists around one string."""
    return "[" * depth + '"leaf"' + "]" * depth


def deep_text(fmt: str, depth: int) -> str:
    """A plan-shaped document whose option ``deep`` nests ``depth`` lists.

    The option belongs to a source no class is registered for (a builder's own), so the plan
    loads without checking it against an options model.
    """
    if fmt == "json":
        return ('{"name": "p", "sources": [{"source": "probe", "options": {"deep": '
                + nested(depth) + '}}, {"source": "user"}]}')
    if fmt == "toml":
        return (f'name = "p"\n[[sources]]\nsource = "probe"\noptions.deep = {nested(depth)}\n'
                '[[sources]]\nsource = "user"\n')
    return (f"name: p\nsources:\n  - source: probe\n    options:\n      deep: {nested(depth)}\n"
            "  - source: user\n")


def bad_utf8(fmt: str) -> bytes:
    text = {"json": '{"name": "p\udcff", "sources": [{"source": "user"}]}',
            "toml": 'name = "p\udcff"\n[[sources]]\nsource = "user"\n',
            "yaml": "name: p\udcff\nsources:\n  - source: user\n"}[fmt]
    return text.encode("utf-8", "surrogateescape")  # a lone 0xFF byte in the name


SUFFIXES = {"yaml": ".yaml", "yml": ".yml", "json": ".json", "toml": ".toml"}
FORMATS = {"yaml": "yaml", "yml": "yaml", "json": "json", "toml": "toml"}
LOADERS: dict[str, Callable[[Path], object]] = {"plan": BuildPlan.load,
                                                "modes config": ModesConfig.load}


def peak_bytes(call: Callable[[], object]) -> int:
    """Peak bytes allocated while ``call`` runs: the work it did, without timing it.

    An alias bomb that expanded, or a file read past the bound, would allocate far more than
    a refusal; a clock would also say so, but flakily on a loaded machine.
    """
    tracemalloc.start()
    try:
        call()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def refused(loader: Callable[[Path], object], path: Path) -> Callable[[], object]:
    """A call that loads ``path`` and expects a ``PlanError``."""
    def call() -> object:
        with pytest.raises(PlanError) as error:
            loader(path)
        return error
    return call


WORK_BOUND = 16 * MAX_CONFIG_BYTES
"""What refusing any hostile file may allocate at most: a few copies of the largest file read."""


def hostile_files(tmp_path: Path) -> dict[str, Path]:
    """Every hostile document in every suffix, written as files."""
    files: dict[str, Path] = {}
    for suffix, fmt in FORMATS.items():
        cases: dict[str, bytes] = {"bad-utf8": bad_utf8(fmt),
                                   "deep": deep_text(fmt, 100_000).encode(),
                                   "just-too-deep": deep_text(fmt, MAX_DEPTH + 1).encode()}
        if fmt == "yaml":
            cases["alias-bomb"] = ALIAS_BOMB.encode()
        for case, data in cases.items():
            path = tmp_path / f"{case}{SUFFIXES[suffix]}"
            path.write_bytes(data)
            files[f"{case}{SUFFIXES[suffix]}"] = path
    return files


@pytest.mark.parametrize("loader", list(LOADERS), ids=list(LOADERS))
def test_hostile_plan_and_modes_files_are_plan_errors_in_bounded_time(
        tmp_path: Path, loader: str) -> None:
    for name, path in hostile_files(tmp_path).items():
        with pytest.raises(PlanError) as error:
            LOADERS[loader](path)
        assert "\n" not in str(error.value), name
        assert peak_bytes(refused(LOADERS[loader], path)) < WORK_BOUND, name


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB, "utf-8")
    with pytest.raises(PlanError, match=r"line 6: YAML aliases \(\*name\) are not allowed"):
        BuildPlan.load(path)
    # Expanded, the bomb would be 9**9 list entries: gigabytes, not the few MiB of reading it.
    assert peak_bytes(refused(BuildPlan.load, path)) < WORK_BOUND


def test_nesting_up_to_the_limit_still_loads(tmp_path: Path) -> None:
    for suffix, fmt in FORMATS.items():
        path = tmp_path / f"plan{SUFFIXES[suffix]}"
        # The options mapping and the sources list take levels of their own.
        path.write_text(deep_text(fmt, MAX_DEPTH - 5), "utf-8")
        assert [s.source for s in BuildPlan.load(path).sources] == ["probe", "user"]


def test_plain_yaml_plans_with_anchors_but_no_aliases_load(tmp_path: Path) -> None:
    path = tmp_path / "anchor.yaml"
    path.write_text("name: p\nsources:\n  - &u {source: user}\n", "utf-8")
    assert BuildPlan.load(path).sources[0].source == "user"


@pytest.mark.parametrize("name", ["bad-utf8.json", "deep.json", "just-too-deep.json"])
def test_hostile_dataset_json_is_a_dataset_error(tmp_path: Path, name: str) -> None:
    path = hostile_files(tmp_path)[name]
    with pytest.raises(DatasetError):
        read_json(path)
    lines = tmp_path / "rows.jsonl"
    lines.write_bytes(b'{"ok": 1}\n' + path.read_bytes().replace(b"\n", b" ") + b"\n")
    with pytest.raises(DatasetError):
        read_jsonl(lines)


def one_line_exit_2(result: Any) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    return str(lines[0])


def test_cli_build_with_a_hostile_plan_is_exit_2_with_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    for name, path in hostile_files(tmp_path).items():
        result = runner.invoke(app, ["build", "--request", str(EXAMPLE), "--plan", str(path)])
        line = one_line_exit_2(result)
        assert "PlanError" in line, name


@pytest.mark.parametrize("data", [
    b'{"user_input": "hi \xff ' + SECRET.encode() + b'"}',
    ('{"user_input": "hi", "history": ' + nested(100_000) + "}").encode(),
    ('{"user_input": "hi", "notes": ' + nested(MAX_DEPTH + 1) + "}").encode(),
    b'{"user_input": "' + SECRET.encode() + b'",\n\n "notes": [1,,]}',
], ids=["bad-utf8", "deep", "just-too-deep", "multi-line-syntax-error"])
def test_cli_build_with_a_hostile_request_is_exit_2_with_one_line(tmp_path: Path,
                                                                  data: bytes) -> None:
    path = tmp_path / "request.json"
    path.write_bytes(data)
    line = one_line_exit_2(CliRunner().invoke(app, ["build", "--request", str(path)]))
    assert "InvalidInputError" in line and SECRET not in line


def test_cli_build_with_a_missing_request_file_is_exit_2_with_one_line(tmp_path: Path) -> None:
    absent = tmp_path / "absent.json"
    result = CliRunner().invoke(app, ["build", "--request", str(absent)])
    assert f"cannot read request file {absent}: " in one_line_exit_2(result)


@pytest.mark.parametrize("case", ["bad-utf8", "deep"])
def test_cli_eval_with_a_hostile_dataset_file_is_exit_2_with_one_line(tmp_path: Path,
                                                                      case: str) -> None:
    folder = tmp_path / "tau"
    shutil.copytree(FIXTURES / "tau", folder)
    trajectories = folder / "gpt-4o-airline-dev.json"
    trajectories.write_bytes(hostile_files(tmp_path)[f"{case}.json"].read_bytes())
    result = CliRunner().invoke(eval_app, ["tau", "--data", str(folder)])
    assert "DatasetError" in one_line_exit_2(result)


# --- session commands ------------------------------------------------------------------------

HOSTILE_IDS = ["evil\x1b[2J\x1b[31mred", "two\nU999\tS999\t999 messages", "bell\x07\u202eltr"]


def seed(path: Path, user: str = "U1", session: str = "S1") -> str:
    store = SqliteStore(path)
    store.append(SessionKey(user_id=user, session_id=session), [{"role": "user", "content": "hi"}])
    store.close()
    return f"sqlite:///{path}"


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
def test_session_list_escapes_ids_so_they_cannot_forge_rows_or_drive_the_terminal(
        tmp_path: Path, hostile: str) -> None:
    url = seed(tmp_path / "s.db", user=hostile, session=hostile)
    result = CliRunner().invoke(app, ["session", "list", "--store", url])
    assert result.exit_code == 0, result.output
    rows = result.stdout.splitlines()
    assert len(rows) == 1
    assert rows[0].count("\t") == 2
    assert all(c.isprintable() or c == "\t" for c in rows[0])
    assert rows[0].endswith("\t1 messages")
    listed = json.loads(CliRunner().invoke(
        app, ["session", "list", "--store", url, "--json"]).stdout)
    assert listed[0]["user_id"] == hostile  # JSON keeps the id exact


def test_session_show_escapes_the_ids_it_prints(tmp_path: Path) -> None:
    hostile = HOSTILE_IDS[0]
    url = seed(tmp_path / "s.db", user=hostile, session="S1")
    result = CliRunner().invoke(app, ["session", "show", "--store", url, "--user", hostile,
                                      "--session", "S1"])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\\x1b[2J" in result.stdout


@pytest.mark.parametrize("command", [
    ["list"], ["show", "--user", "U1", "--session", "S1"],
    ["export", "--user", "U1", "--session", "S1"], ["erase", "--user", "U1", "--yes"]],
    ids=["list", "show", "export", "erase"])
def test_session_commands_refuse_a_sqlite_file_that_does_not_exist(tmp_path: Path,
                                                                   command: list[str]) -> None:
    typo = tmp_path / "typo.db"
    result = CliRunner().invoke(app, ["session", *command, "--store", f"sqlite:///{typo}"])
    assert "no SQLite database at" in one_line_exit_2(result)
    assert not typo.exists()


def test_session_export_into_a_missing_folder_is_exit_2_with_one_line(tmp_path: Path) -> None:
    url = seed(tmp_path / "s.db")
    out = tmp_path / "no" / "such" / "folder" / "export.json"
    result = CliRunner().invoke(app, ["session", "export", "--store", url, "--user", "U1",
                                      "--session", "S1", "--out", str(out)])
    assert "cannot write" in one_line_exit_2(result)


@pytest.mark.parametrize("out", [False, True], ids=["stdout", "file"])
def test_exporting_a_session_that_does_not_exist_is_exit_2(tmp_path: Path, out: bool) -> None:
    url = seed(tmp_path / "s.db")
    target = tmp_path / "export.json"
    args = ["session", "export", "--store", url, "--user", "U1", "--session", "nope"]
    result = CliRunner().invoke(app, [*args, *(["--out", str(target)] if out else [])])
    assert "no such session U1/nope" in one_line_exit_2(result)
    assert not target.exists()


def test_every_library_error_in_a_command_is_one_line(tmp_path: Path) -> None:
    """A store id the library refuses is a typed error, shown on one line with exit code 2."""
    url = seed(tmp_path / "s.db")
    result = CliRunner().invoke(app, ["session", "show", "--store", url, "--user", "x" * 600,
                                      "--session", "S1"])
    line = one_line_exit_2(result)
    assert line.startswith("error: InvalidInputError:")


@pytest.mark.parametrize("loader", list(LOADERS), ids=list(LOADERS))
def test_an_endless_or_huge_config_file_is_read_only_up_to_a_bound(tmp_path: Path,
                                                                   loader: str) -> None:
    huge = tmp_path / "huge.yaml"
    huge.write_text("name: p\nsources:\n  - source: user\n" + "# padding\n" * 200_000, "utf-8")
    with pytest.raises(PlanError, match="larger than"):
        LOADERS[loader](huge)
    endless = tmp_path / "endless.yaml"
    endless.symlink_to("/dev/zero")
    with pytest.raises(PlanError, match="larger than"):
        LOADERS[loader](endless)
    assert peak_bytes(refused(LOADERS[loader], endless)) < WORK_BOUND


def test_a_folder_given_as_a_plan_file_is_a_plan_error(tmp_path: Path) -> None:
    folder = tmp_path / "plan.yaml"
    folder.mkdir()
    with pytest.raises(PlanError, match=r"cannot read plan file .*/plan\.yaml"):
        BuildPlan.load(folder)
