"""The quality metrics, loaders, baselines and runner of ``evaluate``.

Metrics are checked on hand-made contexts, including wrong ones they must not credit; loaders
on the hand-made folders of ``tests/fixtures/eval``; a real case or two of ``../shared/data``
runs under the ``data`` marker and is skipped when that folder is absent.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder
from contextwright.errors import DatasetError, PlanError
from contextwright.evaluate import (
    Ratio,
    evaluate_ranker,
    load_beir,
    load_hotpotqa,
    load_locomo,
    load_suite,
    load_tau,
    resolve_plan,
    run_suite,
)
from contextwright.evaluate.baseline import in_order, recency
from contextwright.evaluate.hotpotqa import hotpot_request, in_order_messages, sentence_scores
from contextwright.evaluate.locomo import evidence_scores, locomo_request, recency_messages
from contextwright.evaluate.metrics import (
    context_tokens,
    locate,
    ndcg_at_k,
    pair_problems,
    recall_at_k,
    relative_position,
)
from contextwright.evaluate.records import pool
from contextwright.evaluate.tau import tau_scores

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "eval"
DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
COUNT = ContextBuilder(tokenizer="o200k_base").tokenizer.count
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is absent")


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def call(call_id: str, arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": arguments}}


# --------------------------------------------------------------------------- metrics


def test_a_turn_is_present_only_as_a_whole_verbatim_copy() -> None:
    turn = "Ada: I named her Pebble because she sleeps like a stone."
    assert locate(turn, [user("hi"), assistant(turn)]) == (1, 0)
    cut = [assistant("Ada: I named her Pebble because she sleeps")]
    assert locate(turn, cut) is None
    assert locate(turn, [assistant("Ada: I called her Pebble because she sleeps like a stone.")]) \
        is None
    assert locate("", [assistant("")]) is None


def test_strict_recall_needs_every_evidence_turn_lenient_counts_the_share() -> None:
    a, b = "Ada: I made a blue bowl on Tuesday.", "Ada: Pebble knocked my tea off the desk."
    both = evidence_scores([a, b], [assistant(a), assistant(b), user("q?")], COUNT)
    one = evidence_scores([a, b], [assistant(a), user("q?")], COUNT)
    none = evidence_scores([a, b], [assistant("Ada: something else"), user("q?")], COUNT)
    assert (both["strict_recall"].numerator, both["lenient_recall"].numerator) == (1.0, 1.0)
    assert (one["strict_recall"].numerator, one["lenient_recall"].numerator) == (0.0, 0.5)
    assert (none["strict_recall"].numerator, none["lenient_recall"].numerator) == (0.0, 0.0)


def test_density_is_evidence_tokens_over_context_tokens() -> None:
    evidence = "Ada: I made a blue bowl on Tuesday."
    filler = "Ben: " + "words that do not help " * 20
    messages = [assistant(filler), assistant(evidence), user("What did Ada make?")]
    scores = evidence_scores([evidence], messages, COUNT)
    expected = COUNT(evidence) / context_tokens(messages, COUNT)
    assert scores["density"].numerator == pytest.approx(expected)
    assert scores["tokens"].numerator == context_tokens(messages, COUNT)
    lean = evidence_scores([evidence], [assistant(evidence), user("What did Ada make?")], COUNT)
    assert lean["density"].numerator > scores["density"].numerator


def test_position_says_whether_evidence_sits_at_the_head_or_the_tail() -> None:
    evidence = "Ada: the key fact."
    filler = [assistant("Ben: " + "padding " * 40) for _ in range(5)]
    head = evidence_scores([evidence], [assistant(evidence), *filler, user("q")], COUNT)
    tail = evidence_scores([evidence], [*filler, assistant(evidence), user("q")], COUNT)
    assert head["head"] == Ratio(numerator=1, denominator=1)
    assert head["tail"].numerator == 0
    assert tail["tail"] == Ratio(numerator=1, denominator=1)
    assert head["position"].numerator < 0.2 < 0.8 < tail["position"].numerator
    absent = evidence_scores(["Ada: missing"], [*filler, user("q")], COUNT)
    assert absent["position"].denominator == 0


def test_relative_position_counts_text_before_the_match_inside_a_message() -> None:
    messages = [assistant("x " * 50 + "FACT")]
    assert relative_position((0, 0), messages, COUNT) == 0
    assert relative_position((0, 100), messages, COUNT) > 0.8


def test_pair_check_catches_orphan_results_and_unanswered_calls() -> None:
    good = [user("q"), {"role": "assistant", "content": None, "tool_calls": [call("a")]},
            {"role": "tool", "tool_call_id": "a", "content": "r"}]
    assert pair_problems(good) == []
    assert pair_problems([user("q"), {"role": "tool", "tool_call_id": "a", "content": "r"}])
    assert pair_problems(good[:2])
    moved = [good[1], user("between"), good[2]]
    assert pair_problems(moved)


def test_pair_check_pairs_reused_ids_by_position() -> None:
    messages = [{"role": "assistant", "content": None, "tool_calls": [call("x")]},
                {"role": "tool", "tool_call_id": "x", "content": "first"},
                {"role": "assistant", "content": None, "tool_calls": [call("x")]},
                {"role": "tool", "tool_call_id": "x", "content": "second"}]
    assert pair_problems(messages) == []
    assert pair_problems(messages[:3])


def test_fact_survival_reads_contents_and_call_arguments_only_verbatim() -> None:
    case = load_tau(FIXTURES / "tau").cases[0]
    assert set(case.facts) == {"QX7Y2Z", "ada_pebble_42", "HAT205", "2024-05-21"}
    arguments = json.dumps({"user_id": "ada_pebble_42"})
    messages = [user("QX7Y2Z and HAT205"),
                {"role": "assistant", "content": None, "tool_calls": [call("c", arguments)]},
                {"role": "tool", "tool_call_id": "c", "content": "2024-05-2"}]
    scores = tau_scores(case, messages, COUNT)
    assert scores["fact_survival"] == Ratio(numerator=3, denominator=4)
    assert scores["pair_integrity"].numerator == 1.0
    broken = tau_scores(case, messages[:2], COUNT)
    assert broken["pair_integrity"].numerator == 0.0
    assert tau_scores(case, messages, COUNT, ok=False)["pair_integrity"].numerator == 0.0


def test_ndcg_and_recall_at_k() -> None:
    relevance = {"a": 1.0, "b": 1.0}
    assert ndcg_at_k(["a", "b", "c"], relevance) == pytest.approx(1.0)
    assert ndcg_at_k(["b", "a"], relevance) == pytest.approx(1.0)
    ideal = 1 + 1 / math.log2(3)
    assert ndcg_at_k(["c", "a", "b"], relevance) == pytest.approx(
        (1 / math.log2(3) + 1 / math.log2(4)) / ideal)
    assert ndcg_at_k(["a", "a", "a"], relevance) == pytest.approx(1 / ideal)
    assert ndcg_at_k(["c", "d"], relevance) == 0.0
    assert ndcg_at_k([f"x{i}" for i in range(10)] + ["a"], relevance, k=10) == 0.0
    # A repeated id is one document: the relevant one after it is at rank 2, not 11.
    assert ndcg_at_k(["x"] * 10 + ["a"], relevance, k=10) == pytest.approx(
        (1 / math.log2(3)) / ideal)
    assert recall_at_k(["a", "c"], relevance, 2) == 0.5
    assert recall_at_k(["c", "a"], relevance, 1) == 0.0


def test_pool_sums_numerators_and_denominators() -> None:
    cases = [{"m": Ratio(numerator=1, denominator=2)}, {"m": Ratio(numerator=3, denominator=4)},
             {"n": Ratio(numerator=0, denominator=0)}]
    assert pool(cases, ["m", "n"]) == {"m": 4 / 6, "n": None}


def test_baselines_stop_at_the_first_piece_that_does_not_fit() -> None:
    sizes = [5, 1, 3, 2]
    assert recency(sizes, 5, lambda s: s) == [3, 2]
    assert recency(sizes, 4, lambda s: s) == [2]
    assert in_order(sizes, 6, lambda s: s) == [5, 1]
    assert in_order(sizes, 4, lambda s: s) == []
    assert recency(sizes, 0, lambda s: s) == []


# --------------------------------------------------------------------------- loaders


def test_locomo_loader_turns_every_turn_into_a_message_with_id_and_timestamp() -> None:
    data = load_locomo(FIXTURES / "locomo")
    conversation = data.conversations["conv-fx"]
    assert len(conversation.history) == 8
    first = conversation.history[0]
    assert first == {"role": "user", "content": "Ada: Hi Ben, I finally adopted a grey cat last "
                     "week.", "id": "D1:1", "timestamp": "2023-03-03T09:05:00"}
    assert conversation.history[4]["role"] == "assistant"
    assert conversation.history[4]["timestamp"] == "2023-04-17T18:40:00"
    # Category 5 and the question without evidence are skipped.
    assert [case.qa_index for case in data.cases] == [0, 1, 2]
    assert data.cases[1].evidence == ("D2:4", "D2:2")
    request = locomo_request(conversation, data.cases[0])
    assert request.user_input == "What is the name of Ada's cat?"
    request.validate()


def test_limit_spreads_the_cases_over_the_set() -> None:
    data = load_locomo(FIXTURES / "locomo", limit=2)
    assert [case.qa_index for case in data.cases] == [0, 1]
    assert [c.traj_index for c in load_tau(FIXTURES / "tau", limit=1).cases] == [0]
    assert len(load_hotpotqa(FIXTURES / "hotpotqa", limit=5)) == 2


def test_tau_loader_splits_the_conversation_at_the_last_user_message() -> None:
    first, second = load_tau(FIXTURES / "tau").cases
    assert first.has_cut and len(first.conversation) == 9
    assert first.user_input == "Please move me to HAT205 on 2024-05-21."
    assert [m["role"] for m in first.turn] == ["assistant", "tool"]
    assert len(first.history) == 6
    assert not second.has_cut and second.user_input == "Yes." and second.turn == ()
    assert second.facts == ("ZZ1A2B", "ben_cello_7")


def test_hotpotqa_loader_shuffles_deterministically_and_keeps_reachable_support() -> None:
    first = load_hotpotqa(FIXTURES / "hotpotqa")[0]
    again = load_hotpotqa(FIXTURES / "hotpotqa")[0]
    assert [p.title for p in first.paragraphs] == [p.title for p in again.paragraphs]
    assert {p.title for p in first.paragraphs} == {"Glass Owl", "Marrow Vale", "Rye bread",
                                                  "Lerr (river)"}
    # The missing paragraph leaves the denominator.
    assert first.supporting == ("The Glass Owl is a bakery founded in Marrow Vale in 1911.",
                                "The river Lerr flows through Marrow Vale.")
    request = hotpot_request(first)
    assert [d.source for d in request.documents] == [p.title for p in first.paragraphs]
    assert all(d.score is None for d in request.documents)


def test_sentence_recall_counts_supporting_sentences_present_verbatim() -> None:
    case = load_hotpotqa(FIXTURES / "hotpotqa")[0]
    half = sentence_scores(case, [user("The river Lerr flows through Marrow Vale.")])
    assert half["sentence_recall"] == Ratio(numerator=0.5, denominator=1.0)
    assert half["pooled_recall"] == Ratio(numerator=1, denominator=2)
    wrong = sentence_scores(case, [user("The river Lerr flows through Marrow")])
    assert wrong["sentence_recall"].numerator == 0.0


def test_in_order_baseline_keeps_whole_sentences_in_the_shuffled_order() -> None:
    case = load_hotpotqa(FIXTURES / "hotpotqa")[1]
    everything = in_order_messages(case, 10_000, COUNT)
    assert sentence_scores(case, everything)["sentence_recall"].numerator == 1.0
    assert in_order_messages(case, 0, COUNT) == [user(case.question)]


def test_beir_loader_and_ranking_skip_queries_without_gold_in_the_pool() -> None:
    pool_ = load_beir(FIXTURES / "hotpotqa" / "beir_pool")
    assert len(pool_.corpus) == 6 and pool_.qrels["fx-q1"] == {"Glass Owl": 1.0,
                                                              "Marrow Vale": 1.0}

    class Perfect:
        def rank(self, query: str, k: int) -> list[str]:
            qid = next(q for q, text in pool_.queries.items() if text == query)
            return sorted(pool_.qrels[qid])[:k]

    class Wrong:
        def rank(self, query: str, k: int) -> list[str]:
            return ["Tin Tower", "Rye bread"]

    assert evaluate_ranker(pool_, lambda corpus: Perfect()) == {"ndcg@10": 1.0,
                                                                "recall@10": 1.0, "queries": 2}
    assert evaluate_ranker(pool_, lambda corpus: Wrong())["ndcg@10"] == 0.0


# --------------------------------------------------------------------------- bad folders


def copy_fixture(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target)
    return target


def test_a_folder_without_the_sets_files_is_a_dataset_error_naming_them(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"missing locomo-dev\.json, qa_index\.jsonl"):
        load_locomo(tmp_path)
    with pytest.raises(DatasetError, match="not a directory"):
        load_tau(tmp_path / "nowhere")
    with pytest.raises(DatasetError, match=r"laid out like \.\./shared/data/hotpotqa-dev"):
        load_hotpotqa(FIXTURES / "tau")


SECRET = "sk-SECRET-4a1f"


def test_a_malformed_row_names_file_line_and_field_never_the_content(tmp_path: Path) -> None:
    folder = copy_fixture(tmp_path, "locomo")
    rows = (folder / "qa_index.jsonl").read_text().splitlines()
    bad = json.loads(rows[1])
    bad["category"] = SECRET
    rows[1] = json.dumps(bad)
    (folder / "qa_index.jsonl").write_text("\n".join(rows))
    with pytest.raises(DatasetError, match=r"qa_index\.jsonl:2: field 'category'") as info:
        load_locomo(folder)
    assert SECRET not in str(info.value)


def test_invalid_json_unknown_evidence_and_bad_dates_are_dataset_errors(tmp_path: Path) -> None:
    folder = copy_fixture(tmp_path, "locomo")
    (folder / "qa_index.jsonl").write_text('{"sample_id": "conv-fx", \n')
    with pytest.raises(DatasetError, match=r"qa_index\.jsonl:1 is not valid JSON"):
        load_locomo(folder)
    row = {"sample_id": "conv-fx", "qa_index": 0, "question": "q", "category": 4,
           "evidence": ["D9:9"]}
    (folder / "qa_index.jsonl").write_text(json.dumps(row))
    with pytest.raises(DatasetError, match="evidence id 'D9:9' is no turn of conv-fx"):
        load_locomo(folder)
    conversations = json.loads((folder / "locomo-dev.json").read_text())
    conversations[0]["conversation"]["session_1_date_time"] = SECRET
    (folder / "locomo-dev.json").write_text(json.dumps(conversations))
    with pytest.raises(DatasetError, match="session_1_date_time is not like") as info:
        load_locomo(folder)
    assert SECRET not in str(info.value)


def write_hotpot_rows(folder: Path, *rows: dict[str, Any]) -> None:
    (folder / "hotpotqa_dev100.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in rows), "utf-8")


def hotpot_row(facts: list[Any], context: list[Any] | None = None) -> dict[str, Any]:
    return {"_id": "x", "question": "q", "supporting_facts": facts,
            "context": context if context is not None else [["Owl", ["One.", " Two."]]]}


@pytest.mark.parametrize(("facts", "context", "message"), [
    ([["Owl", 2]], None, r"supporting_facts\[0\] sentence index 2"),
    ([["Owl", 0], ["Owl", -1]], None, r"supporting_facts\[1\] sentence index -1"),
    ([["Owl", True]], None, r"supporting_facts\[0\] is not \[title, index\]"),
    ([], None, "supporting_facts is empty"),
    ([["Owl", 0]], [["Owl", ["One."]], ["Owl", ["Other."]]], r"context\[1\] repeats"),
], ids=["past-the-end", "negative", "bool", "no-facts", "repeated-title"])
def test_hotpotqa_facts_that_name_no_sentence_are_dataset_errors(
        tmp_path: Path, facts: list[Any], context: list[Any] | None, message: str) -> None:
    """Such facts were skipped without a word, shrinking the recall's denominator (and a
    question left with none was counted in the table but not in the averages)."""
    hotpot = copy_fixture(tmp_path, "hotpotqa")
    write_hotpot_rows(hotpot, hotpot_row([["Owl", 0]]), hotpot_row(facts, context))
    with pytest.raises(DatasetError, match=r"hotpotqa_dev100\.jsonl:2: " + message):
        load_hotpotqa(hotpot)


def test_hotpotqa_questions_with_nothing_to_recall_are_not_cases(tmp_path: Path) -> None:
    """A question whose supporting paragraphs are all missing was a case of the table's count
    but of no average; when every question was such, the metrics printed None and the run
    passed."""
    hotpot = copy_fixture(tmp_path, "hotpotqa")
    missing = hotpot_row([["Elsewhere", 0]])
    write_hotpot_rows(hotpot, hotpot_row([["Owl", 1]]), missing)
    assert [case.supporting for case in load_hotpotqa(hotpot)] == [("Two.",)]
    write_hotpot_rows(hotpot, missing, missing)
    with pytest.raises(DatasetError, match="no question has a supporting sentence"):
        load_hotpotqa(hotpot)


def test_tau_and_hotpotqa_schema_errors(tmp_path: Path) -> None:
    tau = copy_fixture(tmp_path, "tau")
    (tau / "required_facts.jsonl").write_text(json.dumps({"traj_index": 7, "cut_index": None,
                                                          "facts": []}))
    with pytest.raises(DatasetError, match="traj_index is outside"):
        load_tau(tau)
    hotpot = copy_fixture(tmp_path, "hotpotqa")
    (hotpot / "hotpotqa_dev100.jsonl").write_text(json.dumps(
        {"_id": "x", "question": "q", "supporting_facts": [], "context": [["title", SECRET]]}))
    with pytest.raises(DatasetError, match=r"context\[0\] is not \[title, \[sentences\]\]"):
        load_hotpotqa(hotpot)
    (hotpot / "beir_pool" / "qrels" / "test.tsv").write_text("q\td\n")
    with pytest.raises(DatasetError, match="expected query-id, corpus-id, score"):
        load_beir(hotpot / "beir_pool")


# --------------------------------------------------------------------------- runner


def run(name: str, budgets: list[int] | None = None, plan: str | None = None) -> Any:
    build_plan, label = resolve_plan(plan, name)
    suite = load_suite(name, FIXTURES / name, plan=build_plan)
    return run_suite(suite, budgets, plan_label=label, tokenizer="o200k_base")


def test_locomo_suite_finds_recent_evidence_and_misses_what_cannot_fit() -> None:
    result = run("locomo", [2000, 40])
    roomy, tiny = result.budgets
    assert roomy.cases == 3 and roomy.failures == 0
    assert roomy.contextwright["strict_recall"] == 1.0
    assert roomy.baseline["strict_recall"] == 1.0
    assert roomy.targets == {"strict_recall": 0.65}
    # 40 tokens hold the question and at most a turn or two: not every question's evidence.
    assert tiny.contextwright["strict_recall"] is not None
    assert tiny.contextwright["strict_recall"] < 1.0
    assert tiny.baseline["strict_recall"] < 1.0


def test_a_build_that_fails_is_counted_with_its_reason_and_zero_metrics() -> None:
    result = run("locomo", [5])
    row = result.budgets[0]
    assert row.failures == 3 and result.failures == 3
    assert row.contextwright["strict_recall"] == 0.0
    assert row.errors and row.errors[0].startswith("build failed: BudgetError")


def test_tau_suite_keeps_every_pair_and_reports_fact_survival() -> None:
    result = run("tau")
    assert [row.budget for row in result.budgets] == [500, 1000, 2000]
    for row in result.budgets:
        assert row.failures == 0
        assert row.contextwright["pair_integrity"] == 1.0
        assert row.contextwright["fact_survival"] == 1.0
    assert result.plan.startswith("tool_heavy")  # the shipped plan: compression is on in it
    history = BuildPlan.named("tool_heavy").spec("history")
    assert history is not None and history.options["digest_share"] > 0


def test_hotpotqa_suite_packs_documents_and_measures_the_retriever() -> None:
    result = run("hotpotqa", [1024])
    row = result.budgets[0]
    assert row.contextwright["sentence_recall"] == 1.0
    assert row.baseline["sentence_recall"] == 1.0
    assert result.extra["queries"] == 2
    assert isinstance(result.extra["ndcg@10"], float) and result.extra["ndcg@10"] > 0.5


def test_a_limited_hotpotqa_run_measures_the_retriever_on_its_questions_only() -> None:
    """``--limit`` chose the questions of the packing step, but the retrieval step was still
    measured over every query of the pool."""
    plan, _ = resolve_plan(None, "hotpotqa")
    suite = load_suite("hotpotqa", FIXTURES / "hotpotqa", plan=plan, limit=1)
    assert [case.id for case in suite.cases] == ["fx-q1"]
    assert run_suite(suite, [1024]).extra["queries"] == 1


def test_a_plan_without_a_document_source_is_a_plan_error() -> None:
    plan = BuildPlan.builder("no_documents").add("system").add("user").build()
    suite = load_suite("hotpotqa", FIXTURES / "hotpotqa", plan=plan)
    with pytest.raises(PlanError, match="needs one of the sources rag"):
        run_suite(suite, [256])


def test_a_shipped_plan_without_a_document_source_gets_one() -> None:
    suite = load_suite("hotpotqa", FIXTURES / "hotpotqa", plan=BuildPlan.named("chat"))
    row = run_suite(suite, [256]).budgets[0]
    assert row.failures == 0
    assert row.contextwright["sentence_recall"] == 1.0


def test_the_dump_carries_the_rendered_messages_of_every_case() -> None:
    build_plan, _ = resolve_plan(None, "locomo")
    suite = load_suite("locomo", FIXTURES / "locomo", plan=build_plan)
    seen = []
    run_suite(suite, [2000], on_outcome=seen.append)
    assert [o.case_id for o in seen] == [["conv-fx", 0], ["conv-fx", 1], ["conv-fx", 2]]
    assert seen[0].messages[-1] == user("What is the name of Ada's cat?")


def test_baseline_budget_is_the_same_total_as_contextwright() -> None:
    data = load_locomo(FIXTURES / "locomo")
    conversation, case = data.conversations["conv-fx"], data.cases[0]
    for budget in (30, 60, 200):
        kept = recency_messages(conversation, case, budget, COUNT)
        assert context_tokens(kept, COUNT) <= budget


# --------------------------------------------------------------------------- real data


@pytest.mark.data
@needs_data
def test_real_locomo_cases_render_and_score() -> None:
    plan, _ = resolve_plan(None, "locomo")
    suite = load_suite("locomo", DATA / "locomo-dev", plan=plan, limit=2)
    outcomes = list(suite.outcomes(8000))
    assert [o.case_id[0] for o in outcomes] == ["conv-26", "conv-30"]
    for outcome in outcomes:
        assert outcome.error is None
        assert context_tokens(outcome.messages, COUNT) <= 8000
        assert 0 <= outcome.contextwright["lenient_recall"].numerator <= 1


@pytest.mark.data
@needs_data
def test_real_tau_and_hotpotqa_cases_keep_pairs_and_score() -> None:
    plan, _ = resolve_plan(None, "tau")
    tau = load_suite("tau", DATA / "tau-bench-airline-dev", plan=plan, limit=2)
    for outcome in tau.outcomes(1000):
        assert outcome.error is None and not pair_problems(outcome.messages)
        assert outcome.contextwright["fact_survival"].denominator > 0
    plan, _ = resolve_plan(None, "hotpotqa")
    hotpot = load_suite("hotpotqa", DATA / "hotpotqa-dev", plan=plan, limit=2)
    outcomes = list(hotpot.outcomes(512))
    assert all(o.error is None and isinstance(o.case_id, str) for o in outcomes)


def test_hybrid_recall_without_an_embedder_is_an_error_not_a_silent_lexical_run() -> None:
    from contextwright.errors import ContextwrightError

    with pytest.raises(ContextwrightError, match="needs an embedder"):
        load_suite("locomo", FIXTURES / "locomo", plan=BuildPlan.named("chat"),
                   recaller="hybrid")
