"""``eval cases --baseline`` after a user edits the cases file the baseline was saved from.

A judged baseline holds grades (``judged_correct``, ``call_exact``) for the cases that expected
an answer or a call. Editing a case so that it expects nothing any more is a change of the file,
not a worse context: it is reported and passes. A case still judged whose grade fell, or that
got no grade from the judge, still fails the run.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwright.cli_eval import eval_app
from fakes.openai_server import FakeOpenAIServer
from generated_cases import generated_cases
from test_eval_judge import answerer_and_judge


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(responder=answerer_and_judge()) as fake:
        yield fake


def judged_cases(server: FakeOpenAIServer, cache: Path, *args: str) -> Any:
    return CliRunner().invoke(eval_app, [
        "cases", *args, "--judge-base-url", server.base_url, "--judge-model", "judge",
        "--answer-model", "answerer", "--cache-dir", str(cache), "--yes"])


def edit_cases(path: Path, case_id: str, drop: str) -> None:
    """Remove the field ``drop`` from the case ``case_id`` of the cases file at ``path``."""
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]
    for row in rows:
        if row["id"] == case_id:
            del row[drop]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), "utf-8")


def saved_baseline(server: FakeOpenAIServer, tmp_path: Path) -> tuple[Path, Path]:
    cases = generated_cases(tmp_path)
    saved = tmp_path / "baseline.json"
    first = judged_cases(server, tmp_path / "cache", str(cases), "--save", str(saved))
    assert first.exit_code == 0, first.stderr
    return cases, saved


@pytest.mark.parametrize(("case_id", "drop", "metric"), [
    ("vault-0", "answer", "judged_correct"),
    ("order", "expected_call", "call_exact"),
])
def test_a_case_no_longer_judged_is_reported_not_a_regression(
        server: FakeOpenAIServer, tmp_path: Path, case_id: str, drop: str, metric: str) -> None:
    cases, saved = saved_baseline(server, tmp_path)
    edit_cases(cases, case_id, drop)
    again = judged_cases(server, tmp_path / "cache", str(cases), "--baseline", str(saved))
    assert again.exit_code == 0, again.stderr
    assert "regression" not in again.stderr
    assert f"note: case {case_id}: {metric} 1.000 → not judged now" in again.stderr


def test_a_case_still_judged_that_got_worse_fails_beside_one_no_longer_judged(
        tmp_path: Path) -> None:
    with FakeOpenAIServer(responder=answerer_and_judge()) as fair:
        cases, saved = saved_baseline(fair, tmp_path)
    edit_cases(cases, "vault-0", "answer")

    def harsh_on_vault_1(reference: str, candidate: str) -> str:
        return "WRONG" if reference == "CODE-111" or reference not in candidate else "CORRECT"

    with FakeOpenAIServer(responder=answerer_and_judge(harsh_on_vault_1)) as harsh:
        again = judged_cases(harsh, tmp_path / "other", str(cases), "--baseline", str(saved))
    assert again.exit_code == 1, again.stderr
    assert "regression: case vault-1: judged_correct 1.000 → 0.000" in again.stderr
    assert "regression: case vault-0" not in again.stderr
    assert "note: case vault-0: judged_correct 1.000 → not judged now" in again.stderr


def test_a_case_still_expecting_an_answer_that_the_judge_cannot_grade_fails(
        tmp_path: Path) -> None:
    with FakeOpenAIServer(responder=answerer_and_judge()) as fair:
        cases, saved = saved_baseline(fair, tmp_path)
    with FakeOpenAIServer(responder=answerer_and_judge(lambda *_: "no idea")) as muddled:
        again = judged_cases(muddled, tmp_path / "other", str(cases), "--baseline", str(saved))
    assert again.exit_code == 1, again.stderr
    assert "regression: case vault-0: judged_correct 1.000 → no grade now" in again.stderr
    assert "not judged now" not in again.stderr


# --- checks edited since the baseline ---------------------------------------------------------


def set_field(path: Path, case_id: str, name: str, value: Any) -> None:
    """Set ``name`` of the case ``case_id`` of the cases file at ``path``."""
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]
    for row in rows:
        if row["id"] == case_id:
            row[name] = value
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), "utf-8")


def plain(*args: str) -> Any:
    return CliRunner().invoke(eval_app, ["cases", *args])


@pytest.mark.parametrize(("before", "after"), [
    (["CODE-010", "vault 0", "NOT-SHOWN"], ["CODE-010", "NOT-SHOWN"]),  # a shown fact retired
    (["CODE-010"], ["CODE-010", "NOT-SHOWN"]),  # a fact added that the context lacks
])
def test_an_edited_must_contain_is_reported_not_read_as_a_regression(
        tmp_path: Path, before: list[str], after: list[str]) -> None:
    cases = generated_cases(tmp_path)
    set_field(cases, "vault-0", "must_contain", {"documents": ["code"], "facts": before})
    saved = tmp_path / "baseline.json"
    assert plain(str(cases), "--save", str(saved)).exit_code == 0
    set_field(cases, "vault-0", "must_contain", {"documents": ["code"], "facts": after})
    again = plain(str(cases), "--baseline", str(saved))
    assert again.exit_code == 0, again.stderr
    assert "regression" not in again.stderr
    assert ("note: case vault-0: must_contain changed since the baseline: completeness, "
            "density not compared") in again.stderr


def test_reordered_checks_are_no_edit(tmp_path: Path) -> None:
    cases = generated_cases(tmp_path)
    set_field(cases, "vault-0", "must_contain", {"documents": ["code"],
                                                 "facts": ["CODE-010", "NOT-SHOWN"]})
    saved = tmp_path / "baseline.json"
    assert plain(str(cases), "--save", str(saved)).exit_code == 0
    set_field(cases, "vault-0", "must_contain", {"facts": ["NOT-SHOWN", "CODE-010"],
                                                 "documents": ["code"]})
    again = plain(str(cases), "--baseline", str(saved))
    assert again.exit_code == 0, again.stderr
    assert "changed since the baseline" not in again.stderr


def test_a_case_whose_checks_are_unchanged_is_still_compared(tmp_path: Path) -> None:
    cases = generated_cases(tmp_path)
    saved = tmp_path / "baseline.json"
    assert plain(str(cases), "--save", str(saved)).exit_code == 0
    set_field(cases, "vault-0", "noise", {})
    data = json.loads(saved.read_text("utf-8"))
    for case in data["cases"]:
        if case["id"] in ("vault-0", "vault-1"):
            case["scores"]["noise"] = 0.0  # a cleaner baseline than the run can match
    saved.write_text(json.dumps(data), "utf-8")
    again = plain(str(cases), "--baseline", str(saved))
    assert again.exit_code == 1, again.stderr
    assert "regression: case vault-1: noise 0.000 →" in again.stderr
    assert "regression: case vault-0" not in again.stderr


def test_a_corrected_reference_answer_is_reported_not_read_as_a_regression(
        server: FakeOpenAIServer, tmp_path: Path) -> None:
    cases, saved = saved_baseline(server, tmp_path)
    set_field(cases, "vault-0", "answer", "CODE-999")
    again = judged_cases(server, tmp_path / "cache", str(cases), "--baseline", str(saved))
    assert again.exit_code == 0, again.stderr
    assert "regression" not in again.stderr
    assert ("note: case vault-0: answer changed since the baseline: judged_correct not compared"
            in again.stderr)


def test_a_baseline_saved_without_fingerprints_compares_every_case(tmp_path: Path) -> None:
    cases = generated_cases(tmp_path)
    set_field(cases, "vault-0", "must_contain", {"documents": ["code"], "facts": ["CODE-010"]})
    saved = tmp_path / "baseline.json"
    assert plain(str(cases), "--save", str(saved)).exit_code == 0
    data = json.loads(saved.read_text("utf-8"))
    for case in data["cases"]:
        case.pop("checks", None)
    saved.write_text(json.dumps(data), "utf-8")
    set_field(cases, "vault-0", "must_contain", {"documents": ["code"],
                                                 "facts": ["CODE-010", "NOT-SHOWN"]})
    again = plain(str(cases), "--baseline", str(saved))
    assert again.exit_code == 1, again.stderr
    assert "regression: case vault-0: completeness 1.000 → 0.667" in again.stderr



# --- a save that cannot be finished ------------------------------------------------------------


def save_with_file_size_limit(cases: Path, saved: Path, limit: int
                              ) -> subprocess.CompletedProcess[str]:
    """``eval cases FILE --baseline SAVED --save SAVED`` in a process that may write ``limit``
    bytes per file at most: the write of the result fails part way, as on a full disk.
    """
    def limit_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failed write, not a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-c", "from contextwright.cli import main; main()", "eval", "cases",
         str(cases), "--baseline", str(saved), "--save", str(saved)],
        capture_output=True, text=True, preexec_fn=limit_files, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
             "PYTHONDONTWRITEBYTECODE": "1"})


def test_a_save_that_fails_part_way_leaves_the_baseline_whole(tmp_path: Path) -> None:
    cases = generated_cases(tmp_path)
    saved = tmp_path / "baseline.json"
    assert plain(str(cases), "--save", str(saved)).exit_code == 0
    before = saved.read_text("utf-8")
    assert len(before) > 1024
    failed = save_with_file_size_limit(cases, saved, 1024)
    assert failed.returncode == 2, failed.stderr
    assert f"cannot write {saved}" in failed.stderr
    assert saved.read_text("utf-8") == before  # the next run still has its baseline
    assert sorted(path.name for path in tmp_path.iterdir()) == ["baseline.json", "cases.jsonl"]
    assert plain(str(cases), "--baseline", str(saved)).exit_code == 0


def test_a_save_through_a_link_updates_the_file_it_links_to(tmp_path: Path) -> None:
    cases = generated_cases(tmp_path)
    real = tmp_path / "kept" / "baseline.json"
    real.parent.mkdir()
    link = tmp_path / "baseline.json"
    link.symlink_to(real)
    assert plain(str(cases), "--save", str(link)).exit_code == 0
    assert link.is_symlink() and json.loads(real.read_text("utf-8"))["cases"]


def test_a_bad_score_in_a_baseline_names_the_case_by_its_id(tmp_path: Path) -> None:
    cases = generated_cases(tmp_path)
    saved = tmp_path / "baseline.json"
    assert plain(str(cases), "--save", str(saved)).exit_code == 0
    data = json.loads(saved.read_text("utf-8"))
    data["cases"][2]["scores"]["density"] = "0.5"
    saved.write_text(json.dumps(data, indent=2), "utf-8")
    result = plain(str(cases), "--baseline", str(saved))
    assert result.exit_code == 2
    assert ("bad baseline baseline.json: cases.2 ('vault-2').scores.density: Input should be a "
            "valid number") in result.stderr


def test_a_save_onto_the_cases_file_is_refused_before_the_run(tmp_path: Path) -> None:
    cases = generated_cases(tmp_path)
    before = cases.read_text("utf-8")
    result = plain(str(cases), "--save", str(tmp_path / "." / "cases.jsonl"))
    assert result.exit_code == 2
    assert "is the cases file" in result.stderr
    assert cases.read_text("utf-8") == before


def test_a_baseline_judged_by_other_models_is_noted(server: FakeOpenAIServer,
                                                      tmp_path: Path) -> None:
    cases, saved = saved_baseline(server, tmp_path)
    again = CliRunner().invoke(eval_app, [
        "cases", str(cases), "--baseline", str(saved), "--judge-base-url", server.base_url,
        "--judge-model", "judge", "--answer-model", "answerer-2", "--cache-dir",
        str(tmp_path / "cache"), "--yes"])
    assert again.exit_code == 0, again.stderr
    assert ("note: the baseline was judged by judge with answers from answerer and this run by "
            "judge with answers from answerer-2: the grades move for that alone") in again.stderr
    same = judged_cases(server, tmp_path / "cache", str(cases), "--baseline", str(saved))
    assert "the baseline was judged by" not in same.stderr
