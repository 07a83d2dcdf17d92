"""Chunks of text wrapped at a fixed width (a PDF's or an e-mail's lines) end where sentences
end: a chunk closed at a line break in mid-sentence had shown "Refunds … are issued to the"
and left "original card within 14 business days" to a chunk no search found."""

from __future__ import annotations

import itertools
import re
import textwrap

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.core.request import Document
from contextwright.retrieval import SourceDocument, chunk_document
from contextwright.sources.retrieval import RetrievalSource
from contextwright.tokens import get_tokenizer

FILLER = ("The warehouse team inspects every parcel that arrives and logs its condition in the "
          "intake system before anything else happens to it. ")
ANSWER = ("Refunds for damaged electronics are issued to the original card within 14 business "
          "days of the inspection. ")
QUESTION = "How long do refunds for damaged electronics take?"


def wrapped(lead: int) -> str:
    return "\n".join(textwrap.wrap(FILLER * lead + ANSWER + FILLER * 30, 72))


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("lead", [7, 22])
def test_the_answer_sentence_stays_in_one_chunk(lead: int) -> None:
    chunks = chunk_document(SourceDocument(id="p", text=wrapped(lead)),
                            get_tokenizer("o200k_base"))
    holding = [c for c in chunks if "Refunds" in c.text]
    assert len(holding) == 1 and flat(ANSWER) in flat(holding[0].text)


@pytest.mark.parametrize("lead", [7, 22])
def test_a_wrapped_chunk_ends_at_a_sentence_end(lead: int) -> None:
    text = wrapped(lead)
    chunks = chunk_document(SourceDocument(id="p", text=text), get_tokenizer("o200k_base"))
    assert len(chunks) > 3
    for chunk in chunks:
        assert chunk.text == text[chunk.start : chunk.end]
        assert chunk.text.endswith(".")
        assert chunk.tokens <= 200
    lines = text.split("\n")
    assert chunks[-1].paragraph_end == len(lines) - 1
    for before, after in itertools.pairwise(chunks):
        assert after.paragraph_start >= before.paragraph_end  # lines numbered as before


def test_the_rag_plan_shows_the_whole_answer() -> None:
    builder = ContextBuilder(sources=[RetrievalSource()])
    context = builder.build(BuildPlan.named("rag_qa"), Request(
        user_input=QUESTION, documents=[Document(id="policy", text=wrapped(7))]))
    assert "14 business days" in flat(context.to_text())


def test_lines_that_end_sentences_and_lists_are_packed_as_before() -> None:
    tokenizer = get_tokenizer("o200k_base")
    items = "\n".join(f"- item {n} ships from warehouse {n % 7} on weekdays" for n in range(200))
    chunks = chunk_document(SourceDocument(id="l", text=items), tokenizer, chunk_size=60)
    for chunk in chunks:  # a list too long for a chunk is cut at its line ends, never inside
        assert re.fullmatch(r"(- item \d+ ships from warehouse \d on weekdays\n?)+", chunk.text)
        assert chunk.tokens <= 60
    assert " ".join(c.text for c in chunks).split() == items.split()


def test_table_rows_and_numbered_items_stay_lines_of_their_own() -> None:
    tokenizer = get_tokenizer("o200k_base")
    rows = "\n".join(f"| {n} | Shipped. Signed by the front desk | warehouse {n % 7} |"
                     for n in range(120))
    for chunk in chunk_document(SourceDocument(id="t", text=rows), tokenizer, chunk_size=60):
        assert chunk.text.startswith("| ") and chunk.text.endswith(" |")
    numbered = "\n".join(f"{n}. Refund order {n} to the card on file" for n in range(1, 150))
    for chunk in chunk_document(SourceDocument(id="n", text=numbered), tokenizer,
                                chunk_size=60):
        assert re.fullmatch(r"(\d+\. Refund order \d+ to the card on file\n?)+", chunk.text)


@pytest.mark.parametrize("lead", [46, 62, 78])
def test_chinese_wrapped_without_spaces_is_read_as_sentences(lead: int) -> None:
    sentence = "收到商品后七个工作日内可以申请无理由退货，运费由买家承担。"
    filler = "这是一段说明文字，用来占据篇幅。"
    body = filler * lead + sentence + filler * 60
    text = "\n".join(body[i : i + 23] for i in range(0, len(body), 23))
    chunks = chunk_document(SourceDocument(id="z", text=text), get_tokenizer("o200k_base"))
    assert any(sentence in chunk.text.replace("\n", "") for chunk in chunks)
