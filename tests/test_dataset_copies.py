"""``bench/check_no_dataset_copies.py``: no repository file shares 200 characters with the datasets.

The check itself is tested on made-up folders (it finds plain, re-escaped and re-wrapped copies
of 200 characters and ignores 199); the test marked ``data`` runs it on every tracked file
against ``../shared/data`` (a few seconds; skipped when the folder is absent).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "check_no_dataset_copies", ROOT / "bench" / "check_no_dataset_copies.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


check = load_check()

TEXT = " ".join(f"Sentence {n} of an invented dataset, about nobody in particular; it goes "
                f"on for a while so that runs can be cut from it." for n in range(40))


def made_up_data(root: Path) -> Path:
    data = root / "data"
    for name in check.DATASETS:
        (data / name).mkdir(parents=True)
    rows = [{"id": n, "text": TEXT[n * 300:(n + 1) * 300]} for n in range(len(TEXT) // 300)]
    (data / "tau-bench-airline-dev" / "rows.json").write_text(json.dumps(rows), "utf-8")
    (data / "locomo-dev" / "notes.md").write_text("Tea at five, then ‘quiet’ reading.\n" * 20)
    return data


def test_finds_plain_escaped_and_rewrapped_copies_of_200_characters(tmp_path: Path) -> None:
    data = made_up_data(tmp_path)
    repo = tmp_path / "repo"
    repo.mkdir()
    run = TEXT[1000:1200]
    files = {
        "plain.txt": f"#{run}#",
        "escaped.py": f"X = {json.dumps(json.dumps({'t': run}))}\n",  # JSON inside a string
        "wrapped.md": run.replace(" ", "\n", 6).replace(" ", "  ", 3),  # re-wrapped
        "quotes.json": json.dumps("Tea at five, then ‘quiet’ reading. " * 7),  # \\u2018 escapes
        "short.txt": f"#{TEXT[1000:1199]}#",
        "other.txt": f"{TEXT[1000:1150]}#{TEXT[1150:1300]}",  # two runs of 150
    }
    for name, text in files.items():
        (repo / name).write_text(text, "utf-8")
    report = check.check(data, repo, paths=sorted(files))
    found = {m.repo_file for m in report.matches}
    assert found == {"plain.txt", "escaped.py", "wrapped.md", "quotes.json"}
    assert all(m.length >= check.WINDOW for m in report.matches)
    assert "4 file(s)" in check.format_report(report)


def test_a_missing_dataset_folder_is_an_error(tmp_path: Path) -> None:
    data = made_up_data(tmp_path)
    (data / "hotpotqa-dev").rmdir()
    with pytest.raises(FileNotFoundError, match="hotpotqa-dev"):
        check.check(data, tmp_path, paths=[])
    assert check.main(["--data", str(data)]) == 2


@pytest.mark.data
def test_no_tracked_file_copies_the_datasets(shared_data: Path) -> None:
    report = check.check(shared_data, ROOT)
    assert report.repo_count > 100 and report.dataset_count >= 9
    assert report.matches == [], check.format_report(report)
