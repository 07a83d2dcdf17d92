"""Errors about a dataset folder's rows name the file and the line an editor opens at.

A JSON Lines file may hold blank lines (a row deleted by hand, a trailing gap); a row's place
is then its line in the file, not its count among the rows. Rows of the wrong shape are
``DatasetError``s naming the field, never a Python exception from deep inside the loader.
"""

from __future__ import annotations

import codecs
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwright.cli_eval import eval_app
from contextwright.errors import DatasetError
from contextwright.evaluate import load_hotpotqa, load_locomo, load_tau
from contextwright.evaluate.beir import load_beir

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "eval"


def copy_fixture(tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(FIXTURES / name, tmp_path / name))


def tau_rows(folder: Path) -> list[dict[str, Any]]:
    text = (folder / "required_facts.jsonl").read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n", "utf-8")


def test_a_bad_tau_row_after_blank_lines_is_named_by_its_file_line(tmp_path: Path) -> None:
    tau = copy_fixture(tmp_path, "tau")
    first, *_ = tau_rows(tau)
    bad = {**first, "traj_index": "zero"}
    write_lines(tau / "required_facts.jsonl", [json.dumps(first), "", "", json.dumps(bad)])
    where = re.escape(f"{tau / 'required_facts.jsonl'}:4")
    with pytest.raises(DatasetError, match=rf"^{where}: field 'traj_index' has the wrong type$"):
        load_tau(tau)


def test_a_bad_tau_row_is_named_by_its_file_line_under_limit(tmp_path: Path) -> None:
    tau = copy_fixture(tmp_path, "tau")
    rows = tau_rows(tau)
    bad = {**rows[-1], "traj_index": 99}
    write_lines(tau / "required_facts.jsonl",
                [json.dumps(rows[0]), "", json.dumps(bad), "", json.dumps(rows[0])])
    where = re.escape(f"{tau / 'required_facts.jsonl'}:3")
    with pytest.raises(DatasetError, match=rf"^{where}: traj_index is outside "):
        load_tau(tau, limit=2)


def test_the_cli_names_the_tau_row_by_path_and_line(tmp_path: Path) -> None:
    tau = copy_fixture(tmp_path, "tau")
    first, *_ = tau_rows(tau)
    write_lines(tau / "required_facts.jsonl",
                ["", json.dumps({**first, "cut_index": "10"})])
    result = CliRunner().invoke(eval_app, ["tau", "--data", str(tau), "--budget", "500"])
    assert result.exit_code == 2
    assert f"{tau / 'required_facts.jsonl'}:2: field 'cut_index' has the wrong type" \
        in result.stderr


@pytest.mark.parametrize(("change", "message"), [
    ({"facts": ["QX7Y2Z"]}, r"facts\[0\] is not an object"),
    ({"facts": [{"id_like": True, "first_msg_role": "user"}]},
     r"facts\[0\]: field 'value' is missing"),
    ({"gt_actions": 5}, r"field 'gt_actions' has the wrong type"),
    ({"gt_actions": [{"name": "book", "kwargs": {}}, "book"]},
     r"gt_actions\[1\] is not an object"),
    ({"cut_index": True}, r"field 'cut_index' has the wrong type"),
    ({"cut_index": -2}, r"cut_index must be 1 or more"),
    ({"cut_index": 99}, r"cut_index must be 1 or more and below the trajectory's 12 messages"),
    ({"gt_actions": [{"name": "update_reservation_flights", "kwargs": []}]},
     r"gt_actions\[0\].kwargs is not an object"),
])
def test_a_tau_row_of_the_wrong_shape_is_a_dataset_error_naming_the_field(
        tmp_path: Path, change: dict[str, Any], message: str) -> None:
    tau = copy_fixture(tmp_path, "tau")
    first, *_ = tau_rows(tau)
    write_lines(tau / "required_facts.jsonl", ["", json.dumps({**first, **change})])
    where = re.escape(f"{tau / 'required_facts.jsonl'}:2")
    with pytest.raises(DatasetError, match=rf"^{where}: {message}"):
        load_tau(tau)


def jsonl_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def test_a_bad_locomo_question_after_a_blank_line_is_named_by_its_file_line(
        tmp_path: Path) -> None:
    locomo = copy_fixture(tmp_path, "locomo")
    path = locomo / "qa_index.jsonl"
    first, *_ = jsonl_rows(path)
    write_lines(path, [json.dumps(first), "", json.dumps({**first, "category": "one"})])
    where = re.escape(f"{path}:3")
    with pytest.raises(DatasetError, match=rf"^{where}: field 'category' has the wrong type$"):
        load_locomo(locomo)


def test_a_locomo_evidence_id_that_is_no_string_is_a_dataset_error(tmp_path: Path) -> None:
    locomo = copy_fixture(tmp_path, "locomo")
    path = locomo / "qa_index.jsonl"
    first, *_ = jsonl_rows(path)
    write_lines(path, [json.dumps({**first, "evidence": [["D1:1"]]})])
    where = re.escape(f"{path}:1")
    with pytest.raises(DatasetError, match=rf"^{where}: evidence\[0\] is not a string$"):
        load_locomo(locomo)


def test_a_bad_hotpotqa_row_after_a_blank_line_is_named_by_its_file_line(
        tmp_path: Path) -> None:
    hotpot = copy_fixture(tmp_path, "hotpotqa")
    path = hotpot / "hotpotqa_dev100.jsonl"
    first, *_ = jsonl_rows(path)
    write_lines(path, ["", json.dumps(first), "", json.dumps({**first, "question": 7})])
    where = re.escape(f"{path}:4")
    with pytest.raises(DatasetError, match=rf"^{where}: field 'question' has the wrong type$"):
        load_hotpotqa(hotpot)


@pytest.mark.parametrize("name", ["corpus.jsonl", "queries.jsonl"])
def test_a_bad_beir_row_after_a_blank_line_is_named_by_its_file_line(
        tmp_path: Path, name: str) -> None:
    pool = copy_fixture(tmp_path, "hotpotqa") / "beir_pool"
    path = pool / name
    first, *_ = jsonl_rows(path)
    write_lines(path, [json.dumps(first), "", json.dumps({**first, "text": None})])
    where = re.escape(f"{path}:3")
    with pytest.raises(DatasetError, match=rf"^{where}: field 'text' has the wrong type$"):
        load_beir(pool)


def test_a_beir_document_without_title_or_text_is_a_dataset_error(tmp_path: Path) -> None:
    pool = copy_fixture(tmp_path, "hotpotqa") / "beir_pool"
    path = pool / "corpus.jsonl"
    first, *_ = jsonl_rows(path)
    write_lines(path, [json.dumps({"_id": first["_id"]})])
    where = re.escape(f"{path}:1")
    with pytest.raises(DatasetError, match=rf"^{where}: field 'text' is missing$"):
        load_beir(pool)


def test_dataset_files_saved_with_a_byte_order_mark_load_as_without(tmp_path: Path) -> None:
    tau = copy_fixture(tmp_path, "tau")
    for name in ("required_facts.jsonl", "gpt-4o-airline-dev.json", "airline_policy_wiki.md"):
        path = tau / name
        path.write_bytes(codecs.BOM_UTF8 + path.read_bytes())
    loaded = load_tau(tau)
    assert loaded == load_tau(copy_fixture(tmp_path / "plain", "tau"))
    assert not loaded.policy.startswith("\ufeff")


def test_a_policy_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    tau = copy_fixture(tmp_path, "tau")
    (tau / "airline_policy_wiki.md").write_bytes(b"Policy \xff")
    with pytest.raises(DatasetError, match=r"airline_policy_wiki\.md is not valid UTF-8"):
        load_tau(tau)


def test_a_locomo_conversation_id_given_twice_is_named_not_blamed_on_a_question(
        tmp_path: Path) -> None:
    locomo = copy_fixture(tmp_path, "locomo")
    path = locomo / "locomo-dev.json"
    conversations = json.loads(path.read_text("utf-8"))
    other = json.loads(json.dumps(conversations[0]))
    for turns in other["conversation"].values():
        if isinstance(turns, list):
            for turn in turns:
                turn["dia_id"] = "X" + turn["dia_id"]
    path.write_text(json.dumps([*conversations, other]), "utf-8")
    where = re.escape(f"{path}[1]")
    with pytest.raises(DatasetError, match=rf"^{where}: sample_id 'conv-fx' is also the "
                                           r"sample_id of \[0\]$"):
        load_locomo(locomo)


def test_qrels_skip_blank_lines_and_name_a_bad_row_by_its_file_line(tmp_path: Path) -> None:
    pool = copy_fixture(tmp_path, "hotpotqa") / "beir_pool"
    path = pool / "qrels" / "test.tsv"
    header, first, *rest = path.read_text("utf-8").splitlines()
    path.write_text("\n".join([header, "", first, *rest, "", ""]) + "\n", "utf-8")
    assert load_beir(pool).qrels == load_beir(copy_fixture(tmp_path / "plain", "hotpotqa")
                                              / "beir_pool").qrels
    path.write_text("\n".join([header, "", first, "fx-q2\tCopper Bridge\tvery"]) + "\n",
                    "utf-8")
    where = re.escape(f"{path}:4")
    with pytest.raises(DatasetError, match=rf"^{where}: score is not a number$"):
        load_beir(pool)


def test_qrels_with_a_byte_order_mark_read_the_header_and_refuse_a_score_of_nan(
        tmp_path: Path) -> None:
    pool = copy_fixture(tmp_path, "hotpotqa") / "beir_pool"
    path = pool / "qrels" / "test.tsv"
    text = path.read_text("utf-8")
    path.write_bytes(codecs.BOM_UTF8 + text.encode("utf-8"))
    assert load_beir(pool).qrels == load_beir(copy_fixture(tmp_path / "plain", "hotpotqa")
                                              / "beir_pool").qrels
    path.write_text(text + "fx-q2\tGlass Owl\tnan\n", "utf-8")
    with pytest.raises(DatasetError, match=r"test\.tsv:\d+: score is not a finite number$"):
        load_beir(pool)
