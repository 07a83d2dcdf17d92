"""HotpotQA: supporting-sentence recall when packing shuffled paragraphs into a small budget.

Metric 3 of ``../shared/data/README.md``. A folder is laid out like ``hotpotqa-dev``:
``hotpotqa_dev100.jsonl`` and, for the retrieval step, ``beir_pool/`` (see ``beir``), measured on
the pool queries of the questions evaluated (all, or ``--limit`` of them).

Case → request: the question is the user input; the 10 paragraphs, shuffled with a fixed seed
per case (so the given order says nothing about relevance), are the documents, each with its
title as id and source label and its sentences joined as text. The budget B is the documents'
budget: the plan's ``rag`` source is capped at B (call framing and fences included) and
``available`` is set well above so only the cap binds.

Metrics on the rendered messages, per question then averaged: ``sentence_recall`` = supporting
sentences present verbatim / supporting sentences whose paragraph is among the 10 (questions
with none are left out, as LoCoMo's questions without evidence are; a fact naming a sentence its
paragraph does not have, an empty ``supporting_facts`` or a repeated title is a ``DatasetError``
naming the line); ``pooled_recall`` pools the same counts over all questions. The
baseline packs whole sentences in the shuffled order until the next one does not fit B
(sentence tokens only, so it pays no framing).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from contextwright.builder import ContextBuilder
from contextwright.core.covering import covering
from contextwright.core.plan import BuildPlan
from contextwright.core.request import Document, Request
from contextwright.errors import DatasetError, PlanError
from contextwright.evaluate import baseline
from contextwright.evaluate._files import Row, get, line_of, read_jsonl_lines, require_files, spread
from contextwright.evaluate.beir import (
    BeirPool,
    RankerFactory,
    evaluate_ranker,
    load_beir,
    with_queries,
)
from contextwright.evaluate.metrics import MESSAGE_COST, Count, Msg, locate
from contextwright.evaluate.records import CaseOutcome, ExpectedAnswer, Ratio, Scores
from contextwright.evaluate.render import build_messages

LAYOUT = "../shared/data/hotpotqa-dev"
FILES = ("hotpotqa_dev100.jsonl",)
POOL = "beir_pool"
SEED = 4
"""Seed of the per-case paragraph shuffle (any fixed value; the point is that it is fixed)."""
DOCUMENT_SOURCES = ("rag",)
"""Plan sources that carry the paragraphs and are capped at the budget."""
METRICS = ("sentence_recall", "pooled_recall")
BUDGETS = (256, 512, 1024)
TARGETS: Mapping[int, Mapping[str, float]] = MappingProxyType({
    256: {"sentence_recall": 0.60}, 512: {"sentence_recall": 0.80},
    1024: {"sentence_recall": 0.95},
})
SLACK = 4096
LIBRARY_RANKER = "contextwright.retrieval.Retriever, BM25 only"


@dataclass(frozen=True, slots=True, kw_only=True)
class Paragraph:
    """One retrieved paragraph."""

    title: str
    """Wikipedia title: document id and source label."""
    sentences: tuple[str, ...]
    """Its sentences, as given (they carry their own leading spaces)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HotpotCase:
    """One question with its shuffled paragraphs."""

    id: str
    """HotpotQA ``_id``."""
    question: str
    """The question (the user input)."""
    paragraphs: tuple[Paragraph, ...]
    """The 10 paragraphs in shuffled order."""
    supporting: tuple[str, ...]
    """Supporting sentences whose paragraph is among the 10."""
    answer: str = ""
    """The reference answer ('' when the row has none); a judge compares with it."""


def load_hotpotqa(folder: Path, limit: int | None = None) -> tuple[HotpotCase, ...]:
    """Load ``hotpotqa_dev100.jsonl`` of a folder laid out like ``hotpotqa-dev``.

    Every row is checked; the questions with a supporting sentence among their paragraphs are
    the cases (``limit``: that many, spread). ``DatasetError`` names a broken row, or says
    that no question can be scored.
    """
    require_files(folder, FILES, LAYOUT)
    path = folder / FILES[0]
    cases = [_case(row, line_of(path, line)) for line, row in read_jsonl_lines(path)]
    # A question with nothing to recall has no recall: counted, it would inflate the table's
    # case count while the averages left it out.
    scorable = [case for case in cases if case.supporting]
    if not scorable:
        raise DatasetError(f"{FILES[0]}: no question has a supporting sentence among its "
                           "paragraphs, so there is nothing to measure")
    return spread(scorable, limit)


def _case(row: Row, where: str) -> HotpotCase:
    case_id = get(row, "_id", str, where)
    paragraphs = _paragraphs(row, where)
    answer = row.get("answer")
    return HotpotCase(id=case_id, question=get(row, "question", str, where),
                      paragraphs=shuffled(paragraphs, case_id),
                      supporting=_supporting(row, paragraphs, where),
                      answer=answer if isinstance(answer, str) else "")


def _paragraphs(row: Row, where: str) -> list[Paragraph]:
    """The row's ``context``, one paragraph per distinct title.

    The title is the document id, so a repeated one would leave one of the two paragraphs out
    of every context without a word.
    """
    paragraphs: list[Paragraph] = []
    titles: set[str] = set()
    for index, entry in enumerate(get(row, "context", list, where)):
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], list) and all(isinstance(s, str) for s in entry[1])):
            raise DatasetError(f"{where}: context[{index}] is not [title, [sentences]]")
        if entry[0] in titles:
            raise DatasetError(f"{where}: context[{index}] repeats an earlier paragraph's title")
        titles.add(entry[0])
        paragraphs.append(Paragraph(title=entry[0], sentences=tuple(entry[1])))
    return paragraphs


def _supporting(row: Row, paragraphs: list[Paragraph], where: str) -> tuple[str, ...]:
    """The supporting sentences of the row's paragraphs, each fact checked.

    A fact naming a paragraph that is not among them leaves the denominator (the metric's
    definition: the set's paragraphs are retrieved, and retrieval misses some). One naming a
    sentence its paragraph does not have is a broken row: skipped, it would shrink the
    denominator without a word.
    """
    by_title = {p.title: p for p in paragraphs}
    facts = get(row, "supporting_facts", list, where)
    if not facts:
        raise DatasetError(f"{where}: supporting_facts is empty (every question has some)")
    supporting = []
    for index, fact in enumerate(facts):
        # bool is an int to Python, but True is no sentence index.
        if not (isinstance(fact, list) and len(fact) == 2 and isinstance(fact[0], str)
                and isinstance(fact[1], int) and not isinstance(fact[1], bool)):
            raise DatasetError(f"{where}: supporting_facts[{index}] is not [title, index]")
        paragraph = by_title.get(fact[0])
        if paragraph is None:
            continue
        if not 0 <= fact[1] < len(paragraph.sentences):
            raise DatasetError(f"{where}: supporting_facts[{index}] sentence index {fact[1]} is "
                               f"not one of its paragraph's {len(paragraph.sentences)}")
        supporting.append(paragraph.sentences[fact[1]].strip())
    return tuple(supporting)


def shuffled(paragraphs: Sequence[Paragraph], case_id: str) -> tuple[Paragraph, ...]:
    """The paragraphs in an order fixed by ``SEED`` and the case id (same on every run)."""
    order = list(paragraphs)
    random.Random(f"{SEED}:{case_id}").shuffle(order)
    return tuple(order)


def hotpot_request(case: HotpotCase) -> Request:
    """The question as input, the shuffled paragraphs as unscored documents."""
    documents = tuple(Document(id=p.title, text="".join(p.sentences).strip(), source=p.title)
                      for p in case.paragraphs)
    return Request(user_input=case.question, documents=documents)


def covered(plan: BuildPlan, request: Request) -> BuildPlan:
    """``plan`` with the sources the build would add for ``request`` (so they can be capped)."""
    return covering(plan, request) if plan.add_missing_sources else plan


def document_plan(base: BuildPlan, budget: int, question_tokens: int) -> BuildPlan:
    """``base`` with every document source capped at ``budget`` and a large ``available``."""
    if not base.add_missing_sources and not any(spec.source in DOCUMENT_SOURCES
                                                for spec in base.sources):
        raise PlanError(f"plan {base.name}: the hotpotqa eval needs one of the sources "
                        f"{', '.join(DOCUMENT_SOURCES)}")
    sources = tuple(replace(spec, max_tokens=budget) if spec.source in DOCUMENT_SOURCES else spec
                    for spec in base.sources)
    available = 4 * budget + 4 * (question_tokens + MESSAGE_COST) + SLACK
    return replace(base, sources=sources).with_budget(available_override=available)


def in_order_messages(case: HotpotCase, budget: int, count: Count) -> list[Msg]:
    """Baseline: whole sentences in the shuffled order until the next does not fit."""
    pieces = [(p.title, s) for p in case.paragraphs for s in p.sentences]
    kept = baseline.in_order(pieces, budget, lambda piece: count(piece[1]))
    texts: dict[str, str] = {}
    for title, sentence in kept:
        texts[title] = texts.get(title, "") + sentence
    # Scoring stand-ins only: the metric reads content, so the role does not matter here.
    return [{"role": "user", "content": case.question},
            *({"role": "user", "content": text} for text in texts.values())]


def sentence_scores(case: HotpotCase, messages: Sequence[Msg]) -> Scores:
    """The metrics of one question's context (see the module docstring)."""
    if not case.supporting:
        return {}
    present = sum(locate(sentence, messages) is not None for sentence in case.supporting)
    return {"sentence_recall": Ratio.of(present / len(case.supporting)),
            "pooled_recall": Ratio(numerator=present, denominator=len(case.supporting))}


@dataclass(frozen=True, slots=True, kw_only=True)
class HotpotSuite:
    """HotpotQA supporting-sentence recall under document budgets (default plan ``rag_qa``)."""

    cases: tuple[HotpotCase, ...]
    """The loaded questions."""
    builder: ContextBuilder
    """Builds contextwright's contexts; its tokenizer also counts the baseline."""
    plan: BuildPlan
    """The plan; its document source is capped at the budget."""
    pool: BeirPool | None = None
    """The BEIR pool for the retrieval step, when the folder has one."""
    ranker: RankerFactory | None = None
    """The ranker measured on the pool (``None``: not measured, and the result says so)."""
    ranker_label: str = LIBRARY_RANKER
    """What the ranker is, for the result."""
    name: ClassVar[str] = "hotpotqa"
    """Suite name."""
    metrics: ClassVar[tuple[str, ...]] = METRICS
    """Metric names in display order."""
    default_budgets: ClassVar[tuple[int, ...]] = BUDGETS
    """Document budgets of the issue."""
    targets: ClassVar[Mapping[int, Mapping[str, float]]] = TARGETS
    """Targets of the issue."""
    baseline: ClassVar[str] = "whole sentences in the shuffled order until the budget is full"
    """What the baseline does."""
    budget_rule: ClassVar[str] = "document budget (rag max_tokens)"
    """How a budget is applied to the plan."""

    def __len__(self) -> int:
        """Number of cases."""
        return len(self.cases)

    def outcomes(self, budget: int) -> Iterator[CaseOutcome]:
        """One outcome per question at ``budget``."""
        count = self.builder.tokenizer.count
        for case in self.cases:
            request = hotpot_request(case)
            plan = document_plan(covered(self.plan, request), budget, count(case.question))
            messages, error = build_messages(self.builder, plan, request)
            yield CaseOutcome(case_id=case.id, budget=budget,
                              contextwright=sentence_scores(case, messages),
                              baseline=sentence_scores(case, in_order_messages(case, budget,
                                                                               count)),
                              messages=messages, error=error,
                              expected=ExpectedAnswer(question=case.question, answer=case.answer)
                              if case.answer else None)

    def extra(self) -> dict[str, float | str | None]:
        """nDCG@10 and Recall@10 of the retrieval step, or why it was not measured.

        Measured on the pool's queries of the questions evaluated (a pool query's id is its
        question's ``_id``), so a ``--limit`` run measures the same questions in both steps.
        """
        if self.pool is None:
            return {"retrieval": f"not measured: the folder has no {POOL}/"}
        if self.ranker is None:
            return {"retrieval": "not measured: no ranker given"}
        pool = with_queries(self.pool, (case.id for case in self.cases))
        if not pool.queries:
            return {"retrieval": f"not measured: no question evaluated is a query of {POOL}/"}
        scores: dict[str, Any] = evaluate_ranker(pool, self.ranker)
        return {"retrieval": self.ranker_label, **scores}


def load_pool(folder: Path) -> BeirPool | None:
    """The folder's ``beir_pool/`` when present (it is optional for sentence recall)."""
    return load_beir(folder / POOL) if (folder / POOL).exists() else None
