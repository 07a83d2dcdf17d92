"""LoCoMo: evidence recall, density and position of long conversations under a total budget.

Metric 1 of ``../shared/data/README.md``. A folder is laid out like ``locomo-dev``:
``locomo-dev.json`` (conversations) and ``qa_index.jsonl`` (questions with evidence turn ids).

Case → request: every turn is one history message ``"{speaker}: {text}"`` with ``id`` = its
``dia_id`` and ``timestamp`` = its session's date (ISO 8601); the first speaker (``speaker_a``)
takes the ``user`` role and the second the ``assistant`` role; the question is the user input.
Questions of category 5 (adversarial, unanswerable) and the few with no evidence are skipped.

Metrics, all on the rendered messages, per question then averaged over questions:

* ``strict_recall``: 1 when every evidence turn is present verbatim, else 0;
* ``lenient_recall``: the share of the question's evidence turns present verbatim;
* ``density``: tokens of the evidence turns present / tokens of the whole context (contents and
  tool-call arguments + 4 per message + 3, counted alike for contextwright and the baseline);
* ``position``: where a present evidence turn starts, as a share of the context's tokens
  (pooled over present turns); ``head`` / ``tail``: the share of present turns that start in
  the first 20 % / after 80 % of the context;
* ``tokens``: the context's tokens.

The baseline keeps the question and the most recent whole turns that fit the same total budget.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from contextwright.builder import ContextBuilder
from contextwright.core.plan import BuildPlan
from contextwright.core.request import Request
from contextwright.errors import DatasetError
from contextwright.evaluate import baseline
from contextwright.evaluate._files import (
    Row,
    get,
    line_of,
    read_json,
    read_jsonl_lines,
    require_files,
    spread,
)
from contextwright.evaluate.metrics import (
    HEAD,
    REPLY_PRIMING,
    TAIL,
    Count,
    Msg,
    context_tokens,
    locate,
    message_tokens,
    relative_position,
)
from contextwright.evaluate.records import CaseOutcome, ExpectedAnswer, Ratio, Scores
from contextwright.evaluate.render import build_messages

LAYOUT = "../shared/data/locomo-dev"
FILES = ("locomo-dev.json", "qa_index.jsonl")
EVIDENCE_CATEGORIES = frozenset((1, 2, 3, 4))
DATE_FORMAT = "%I:%M %p on %d %B, %Y"
METRICS = ("strict_recall", "lenient_recall", "density", "position", "head", "tail", "tokens")
BUDGETS = (2000, 4000, 8000)
TARGETS: Mapping[int, Mapping[str, float]] = MappingProxyType({
    2000: {"strict_recall": 0.65}, 4000: {"strict_recall": 0.80}, 8000: {"strict_recall": 0.92},
})


@dataclass(frozen=True, slots=True, kw_only=True)
class Conversation:
    """One LoCoMo conversation as request-ready history."""

    sample_id: str
    """The conversation's id (``conv-26``…)."""
    history: tuple[Mapping[str, Any], ...]
    """One OpenAI message per turn, oldest first, with ``id`` and ``timestamp``."""
    turns: Mapping[str, str]
    """Rendered text (``"{speaker}: {text}"``) of each turn by ``dia_id``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LocomoCase:
    """One question with its evidence."""

    sample_id: str
    """The conversation it asks about."""
    qa_index: int
    """Its index in ``qa_index.jsonl`` for that conversation."""
    question: str
    """The question (the user input)."""
    category: int
    """LoCoMo category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop)."""
    evidence: tuple[str, ...]
    """``dia_id`` of every evidence turn."""
    answer: str = ""
    """The reference answer ('' when the row has none); a judge compares with it."""

    @property
    def case_id(self) -> list[Any]:
        """``[sample_id, qa_index]``."""
        return [self.sample_id, self.qa_index]


@dataclass(frozen=True, slots=True, kw_only=True)
class LocomoSet:
    """The loaded folder."""

    conversations: Mapping[str, Conversation]
    """Conversations by ``sample_id``."""
    cases: tuple[LocomoCase, ...]
    """Questions with evidence (categories 1–4), in file order."""


def load_locomo(folder: Path, limit: int | None = None) -> LocomoSet:
    """Load a folder laid out like ``locomo-dev``; ``limit``: that many questions, spread."""
    require_files(folder, FILES, LAYOUT)
    path = folder / FILES[0]
    raw = read_json(path)
    if not isinstance(raw, list):
        raise DatasetError(f"{path}: expected a list of conversations")
    conversations = {}
    first_index: dict[str, int] = {}
    for index, sample in enumerate(raw):
        conversation = _conversation(sample, f"{path}[{index}]")
        if conversation.sample_id in first_index:
            # The later one would replace the first, and its questions would be blamed for
            # evidence that is no turn of the conversation they were written for.
            raise DatasetError(f"{path}[{index}]: sample_id {conversation.sample_id!r} is also "
                               f"the sample_id of [{first_index[conversation.sample_id]}]")
        first_index[conversation.sample_id] = index
        conversations[conversation.sample_id] = conversation
    cases = []
    questions = folder / FILES[1]
    for line, row in read_jsonl_lines(questions):
        case = _case(row, line_of(questions, line), conversations)
        if case is not None:
            cases.append(case)
    return LocomoSet(conversations=conversations, cases=spread(cases, limit))


def _conversation(sample: Row, where: str) -> Conversation:
    sample_id = get(sample, "sample_id", str, where)
    body = get(sample, "conversation", dict, where)
    speaker_a = get(body, "speaker_a", str, f"{where}.conversation")
    history: list[Mapping[str, Any]] = []
    turns: dict[str, str] = {}
    for number in _session_numbers(body):
        key = f"session_{number}"
        stamp = _timestamp(body, number, f"{where}.conversation")
        for position, turn in enumerate(get(body, key, list, f"{where}.conversation")):
            at = f"{where}.conversation.{key}[{position}]"
            speaker = get(turn, "speaker", str, at)
            dia_id = get(turn, "dia_id", str, at)
            text = f"{speaker}: {get(turn, 'text', str, at)}"
            turns[dia_id] = text
            history.append({"role": "user" if speaker == speaker_a else "assistant",
                            "content": text, "id": dia_id, "timestamp": stamp})
    return Conversation(sample_id=sample_id, history=tuple(history), turns=turns)


def _session_numbers(body: Row) -> list[int]:
    # Some session_<n>_date_time keys have no session: only keys holding turns count.
    numbers = [int(key.split("_")[1]) for key in body
               if key.startswith("session_") and key.split("_")[1].isdigit()
               and key.count("_") == 1]
    return sorted(numbers)


def _timestamp(body: Row, number: int, where: str) -> str:
    text = get(body, f"session_{number}_date_time", str, where)
    try:
        return datetime.strptime(text, DATE_FORMAT).isoformat()
    except ValueError:
        raise DatasetError(f"{where}.session_{number}_date_time is not like "
                           "'1:56 pm on 8 May, 2023'") from None


def _case(row: Row, where: str, conversations: Mapping[str, Conversation]) -> LocomoCase | None:
    sample_id = get(row, "sample_id", str, where)
    category = get(row, "category", int, where)
    evidence = tuple(get(row, "evidence", list, where))
    for index, dia_id in enumerate(evidence):
        if not isinstance(dia_id, str):  # a turn id, like "D1:3"
            raise DatasetError(f"{where}: evidence[{index}] is not a string")
    if category not in EVIDENCE_CATEGORIES or not evidence:
        return None
    conversation = conversations.get(sample_id)
    if conversation is None:
        raise DatasetError(f"{where}: sample_id names no conversation of {FILES[0]}")
    unknown = [dia_id for dia_id in evidence if dia_id not in conversation.turns]
    if unknown:
        raise DatasetError(f"{where}: evidence id {unknown[0]!r} is no turn of {sample_id}")
    answer = row.get("answer")
    return LocomoCase(sample_id=sample_id, qa_index=get(row, "qa_index", int, where),
                      question=get(row, "question", str, where), category=category,
                      evidence=evidence,
                      answer="" if answer is None or isinstance(answer, dict | list)
                      else str(answer))


def locomo_request(conversation: Conversation, case: LocomoCase) -> Request:
    """The request of one question: the whole conversation as history, the question as input."""
    return Request(user_input=case.question, history=conversation.history)


def recency_messages(conversation: Conversation, case: LocomoCase, budget: int,
                     count: Count) -> list[Msg]:
    """Baseline: the question and the most recent whole turns that fit ``budget`` in all."""
    question: Msg = {"role": "user", "content": case.question}
    room = budget - REPLY_PRIMING - message_tokens(question, count)
    kept = baseline.recency(conversation.history, room, lambda m: message_tokens(m, count))
    return [*kept, question]


def evidence_scores(evidence: Sequence[str], messages: Sequence[Msg], count: Count) -> Scores:
    """The metrics of one question's context (see the module docstring)."""
    located = [(text, locate(text, messages)) for text in evidence]
    present = [(text, where) for text, where in located if where is not None]
    total = context_tokens(messages, count)
    evidence_tokens = sum(count(text) for text, _ in present)
    positions = [relative_position(where, messages, count) for _, where in present]
    return {
        "strict_recall": Ratio.of(float(len(present) == len(evidence))),
        "lenient_recall": Ratio.of(len(present) / len(evidence)),
        "density": Ratio.of(evidence_tokens / total if total else 0.0),
        "position": Ratio(numerator=sum(positions), denominator=len(positions)),
        "head": Ratio(numerator=sum(p < HEAD for p in positions), denominator=len(positions)),
        "tail": Ratio(numerator=sum(p > TAIL for p in positions), denominator=len(positions)),
        "tokens": Ratio.of(total),
    }


def expected_answer(case: LocomoCase) -> ExpectedAnswer | None:
    """The question and its reference answer, for a judge (none without an answer)."""
    return ExpectedAnswer(question=case.question, answer=case.answer) if case.answer else None


@dataclass(frozen=True, slots=True, kw_only=True)
class LocomoSuite:
    """LoCoMo evidence recall under total budgets (default plan ``chat``)."""

    data: LocomoSet
    """The loaded folder."""
    builder: ContextBuilder
    """Builds contextwright's contexts; its tokenizer also counts the baseline."""
    plan: BuildPlan
    """The plan; each build sets its ``available_override`` to the budget."""
    name: ClassVar[str] = "locomo"
    """Suite name."""
    metrics: ClassVar[tuple[str, ...]] = METRICS
    """Metric names in display order."""
    default_budgets: ClassVar[tuple[int, ...]] = BUDGETS
    """Total budgets of the issue."""
    targets: ClassVar[Mapping[int, Mapping[str, float]]] = TARGETS
    """Strict-recall targets of the issue."""
    baseline: ClassVar[str] = "question + most recent whole turns that fit the same total budget"
    """What the baseline does."""
    budget_rule: ClassVar[str] = "total budget (available_override)"
    """How a budget is applied to the plan."""

    def __len__(self) -> int:
        """Number of cases."""
        return len(self.data.cases)

    def outcomes(self, budget: int) -> Iterator[CaseOutcome]:
        """One outcome per question at ``budget``."""
        plan = self.plan.with_budget(available_override=budget)
        count = self.builder.tokenizer.count
        for case in self.data.cases:
            conversation = self.data.conversations[case.sample_id]
            evidence = [conversation.turns[dia_id] for dia_id in case.evidence]
            request = locomo_request(conversation, case)
            messages, error = build_messages(self.builder, plan, request)
            base = recency_messages(conversation, case, budget, count)
            yield CaseOutcome(case_id=case.case_id, budget=budget,
                              contextwright=evidence_scores(evidence, messages, count),
                              baseline=evidence_scores(evidence, base, count),
                              messages=messages, error=error, expected=expected_answer(case))

    def extra(self) -> dict[str, float | str | None]:
        """Nothing budget-independent."""
        return {}

