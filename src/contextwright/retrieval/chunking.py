"""Chunking: documents into ~200-token pieces on paragraph, then sentence, boundaries.

Paragraphs are packed whole while they fit; a paragraph longer than a chunk is split at sentence
ends (English ``.!?;`` and Chinese ``。！？；``), and a sentence longer than a chunk is cut by
tokens. Lines that break in mid-sentence (text wrapped at a fixed width) are packed as
sentences, so a chunk never ends inside a sentence that fits in one. Every chunk remembers
where it came from — document id and title, the paragraphs (lines) it spans, its character
span, the document's version and timestamp — so the context can say ``refund_policy.md §2``
and adjacent chunks can be merged back into one passage. Token counts come from the exact
tokenizer the build uses.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from contextwright.analysis import is_cjk_char
from contextwright.errors import InvalidInputError
from contextwright.tokens import CountingTokenizer

DEFAULT_CHUNK_TOKENS = 200
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*|\n")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])\s*")


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceDocument:
    """A document to index."""

    id: str
    """Stable id; a document indexed again under the same id replaces its old chunks."""
    text: str
    """The full text."""
    title: str | None = None
    """Human label (file name, URL, heading); also what ties versions of one document."""
    timestamp: str | None = None
    """Version time (ISO 8601); newer versions beat older ones, and recency adds to the rank."""
    version: int | None = None
    """Explicit version number; compared before the timestamp."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Chunk:
    """One piece of a document, with its provenance."""

    doc_id: str
    """Id of the document it was cut from."""
    index: int
    """Position among the document's chunks (0-based); adjacent chunks differ by one."""
    text: str
    """The chunk text, exactly ``document.text[start:end]``."""
    start: int
    """Character offset of the chunk in the document."""
    end: int
    """Character offset just past the chunk."""
    paragraph_start: int
    """Index (0-based) of the first paragraph the chunk covers."""
    paragraph_end: int
    """Index (0-based) of the last paragraph the chunk covers."""
    tokens: int
    """Token count of ``text`` with the build's tokenizer."""


@dataclass(frozen=True, slots=True)
class _Span:
    start: int
    end: int
    paragraph: int
    last_paragraph: int = -1
    """The paragraph the span ends in (-1: the one it starts in)."""

    @property
    def final_paragraph(self) -> int:
        return self.paragraph if self.last_paragraph < 0 else self.last_paragraph


def paragraph_spans(text: str) -> list[_Span]:
    """Character spans of the non-blank paragraphs of ``text`` (line breaks separate them)."""
    spans: list[_Span] = []
    position = 0
    for match in [*_PARAGRAPH_BREAK.finditer(text), None]:
        end = match.start() if match is not None else len(text)
        segment = text[position:end]
        if segment.strip():
            lead = len(segment) - len(segment.lstrip())
            spans.append(_Span(position + lead, position + len(segment.rstrip()), len(spans)))
        if match is not None:
            position = match.end()
    return spans


def _sentence_spans(text: str, span: _Span) -> list[_Span]:
    pieces: list[_Span] = []
    position = span.start
    body = text[span.start : span.end]
    for match in [*_SENTENCE_END.finditer(body), None]:
        end = span.start + (match.start() if match is not None else len(body))
        if end > position:
            pieces.append(_Span(position, end, span.paragraph))
        if match is not None:
            position = span.start + match.end()
    return pieces


_CHARS_PER_TOKEN_GUESS = 8
"""A first window of this many characters per token holds ``limit`` tokens of almost any text;
a window that turns out to fit whole is doubled."""


def _token_spans(text: str, span: _Span, limit: int, tokenizer: CountingTokenizer) -> list[_Span]:
    """Cut one over-long sentence into prefixes of at most ``limit`` tokens.

    Each prefix is taken from a window a few times its size, not from the rest of the
    sentence: a tokenizer reads what it is given, and a long run without sentence ends (base64,
    minified JSON, Chinese without punctuation) would be read once per chunk, quadratic time.
    """
    pieces: list[_Span] = []
    position = span.start
    while position < span.end:
        head = _head(text[position : span.end], limit, tokenizer) or text[position]
        pieces.append(_Span(position, position + len(head), span.paragraph))
        position += len(head)
    return pieces


def _head(rest: str, limit: int, tokenizer: CountingTokenizer) -> str:
    """The longest prefix of at most ``limit`` tokens of a window of ``rest``.

    The window is one the prefix does not fill, or the whole of ``rest`` when that fits.
    """
    window = limit * _CHARS_PER_TOKEN_GUESS
    while True:
        piece = rest[:window]
        head = tokenizer.truncate(piece, limit)
        if len(head) < len(piece) or len(piece) == len(rest):
            return head
        window *= 2


# A line that ends a sentence (closing quotes and brackets may follow its mark).
_ENDS_SENTENCE = re.compile(r"""[.!?;:。！？；：…]["'’”」』)\]）]*$""")


def _blocks(text: str, lines: list[_Span]) -> list[list[_Span]]:
    """The lines in runs that make one stretch of prose.

    A line runs on into the next when no blank line parts them and it ends no sentence: text
    wrapped at a fixed width, as a PDF's or an e-mail's lines are, breaks lines in the middle
    of sentences.
    """
    blocks: list[list[_Span]] = []
    for line in lines:
        if blocks and _runs_on(text, blocks[-1][-1], line):
            blocks[-1].append(line)
        else:
            blocks.append([line])
    return blocks


def _runs_on(text: str, line: _Span, following: _Span) -> bool:
    """Whether ``line``'s sentence goes on in ``following``.

    Only a line that ends no sentence, followed after one line break by text that reads as
    the rest of a sentence: a lower-case word or a number (not a numbered list's "2."), or,
    in Chinese or Japanese, which wrap without spaces, more of the same script. A table row,
    a list item or a heading's next line starts otherwise and stays a line of its own.
    """
    if (text.count("\n", line.end, following.start) != 1
            or _ENDS_SENTENCE.search(text, line.start, line.end)):
        return False
    first = text[following.start]
    if first.islower():
        return True
    if first.isdigit():
        return _LIST_NUMBER.match(text, following.start) is None
    return is_cjk_char(first) and is_cjk_char(text[line.end - 1])


_LIST_NUMBER = re.compile(r"\d+[.)]\s")


def _units(text: str, limit: int, tokenizer: CountingTokenizer) -> list[_Span]:
    """Paragraphs that fit a chunk, else their sentences, else token-cut pieces.

    Lines wrapped in mid-sentence are read as sentences, each whole while it fits a chunk
    (else cut at its line ends first): their paragraphs are not known.
    """
    units: list[_Span] = []
    for block in _blocks(text, paragraph_spans(text)):
        whole = _Span(block[0].start, block[-1].end, block[0].paragraph, block[-1].paragraph)
        if len(block) == 1 and tokenizer.count(text[whole.start : whole.end]) <= limit:
            units.append(whole)
            continue
        line_ends = [line.end for line in block]
        for sentence in _sentence_spans(text, whole):
            pieces = _lines_of(sentence, block, line_ends)
            if len(pieces) > 1 and tokenizer.count(text[sentence.start : sentence.end]) <= limit:
                units.append(_Span(sentence.start, sentence.end, pieces[0].paragraph,
                                   pieces[-1].paragraph))
                continue
            for piece in pieces:
                if tokenizer.count(text[piece.start : piece.end]) <= limit:
                    units.append(piece)
                else:
                    units.extend(_token_spans(text, piece, limit, tokenizer))
    return units


def _lines_of(sentence: _Span, block: list[_Span], line_ends: list[int]) -> list[_Span]:
    """The parts of ``sentence`` in each line of ``block`` it spans, each with its paragraph.

    ``line_ends`` are the lines' ends, for a binary search: a long wrapped text is one block
    of thousands of lines and sentences.
    """
    parts = []
    index = bisect.bisect_right(line_ends, sentence.start)
    while index < len(block) and block[index].start < sentence.end:
        line = block[index]
        parts.append(_Span(max(line.start, sentence.start), min(line.end, sentence.end),
                           line.paragraph))
        index += 1
    return parts


def chunk_document(document: SourceDocument, tokenizer: CountingTokenizer, *,
                   chunk_size: int = DEFAULT_CHUNK_TOKENS) -> list[Chunk]:
    """Cut ``document`` into chunks of at most ``chunk_size`` tokens, packing whole units."""
    if chunk_size < 8:
        raise InvalidInputError("chunk_size must be at least 8 tokens")
    text = document.text
    chunks: list[Chunk] = []
    group: list[_Span] = []
    for unit in _units(text, chunk_size, tokenizer):
        candidate = [*group, unit]
        if group and tokenizer.count(text[group[0].start : unit.end]) > chunk_size:
            chunks.append(_make_chunk(document, text, group, len(chunks), tokenizer))
            candidate = [unit]
        group = candidate
    if group:
        chunks.append(_make_chunk(document, text, group, len(chunks), tokenizer))
    return chunks


def _make_chunk(document: SourceDocument, text: str, group: list[_Span], index: int,
                tokenizer: CountingTokenizer) -> Chunk:
    start, end = group[0].start, group[-1].end
    body = text[start:end]
    return Chunk(doc_id=document.id, index=index, text=body, start=start, end=end,
                 paragraph_start=group[0].paragraph, paragraph_end=group[-1].final_paragraph,
                 tokens=tokenizer.count(body))
