"""Cutting one long text to a token limit, keeping what the query is about.

``cut_around_keywords`` splits the text into paragraphs (or sentences when it is one paragraph),
keeps the paragraph with the most query keywords (or the best of its sentences when it alone is
over the limit) and grows the kept span around it while it fits, to the following side first on
a tie. Kept text is verbatim, with the text that stood between its pieces; gaps are marked with
``[…]``. Without keyword hits it keeps the head. Pure functions.

A cut never takes the line an item must open with: a recalled turn's marker, or the
``(tool error)`` mark of a failed tool result (without it the result would read, and be sent,
as a success).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from contextwright.analysis import analyzer
from contextwright.core.digest import LINE_ADDITIVE_TOKENIZERS
from contextwright.core.gather import Candidate, Costing, Unit, render_candidate
from contextwright.core.items import TOOL_ERROR_MARK, ContextItem
from contextwright.core.select import MIN_CUT_TOKENS, Cutter
from contextwright.tokens import CountingTokenizer, EstimateTokenizer
from contextwright.tokens._base import (
    PIECE_CHARS,
    splits_after_line_break,
    splits_before_space,
)
from contextwright.tokens._estimate import estimate_from_parts, estimate_parts

GAP = "[…]"
# Pieces are spans of the original text and the separators between them are whitespace, so a
# run of adjacent pieces is rebuilt by slicing the original: what a cut keeps is never rewritten.
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n|\n")
# A sentence ends at "." "!" "?" ";" followed by whitespace or the end of the text (so the dots
# in "0.35", "v2.3.1", "zhang.san@example.com" and "¥1,299.00" end nothing), at "。！？；"
# wherever they stand (Chinese puts no space after them), and at a line break. Closing quotes
# and brackets stay with the sentence they close.
_CLOSERS = "\"'”’»)\\]」』）】"
_SENTENCE_BREAK = re.compile(
    rf"[.!?;]+[{_CLOSERS}]*(?:\s+|\Z)|[。！？；]+[{_CLOSERS}]*\s*|\n\s*")
_KEYWORDS = analyzer("cutting")

_Span = tuple[int, int]


def query_keywords(query: str) -> frozenset[str]:
    """Lower-cased words of the query without stop words; CJK runs become character bigrams."""
    return frozenset(_KEYWORDS.term_set(query))


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs, or sentences when the text has a single paragraph; each verbatim."""
    return [text[start:end] for start, end in _pieces(text)] or [text]


def _pieces(text: str) -> list[_Span]:
    """Spans of the paragraphs, or of the sentences when the text has a single paragraph."""
    paragraphs = _split(text, 0, len(text), _PARAGRAPH_BREAK)
    if len(paragraphs) <= 1:
        return _split(text, 0, len(text), _SENTENCE_BREAK)
    return paragraphs


def _split(text: str, start: int, end: int, breaks: re.Pattern[str]) -> list[_Span]:
    """Spans of ``text[start:end]`` between the matches of ``breaks``, blank ones left out.

    A piece ends where the break's trailing whitespace begins, so sentence punctuation stays
    with its sentence and only whitespace lies between two pieces.
    """
    spans: list[_Span] = []
    at = start
    for match in breaks.finditer(text, start, end):
        stop = match.start() + len(match.group().rstrip())
        spans.append((at, stop))
        at = match.end()
    spans.append((at, end))
    return [(a, b) for a, b in spans if text[a:b].strip()]


def _hits(paragraph: str, keywords: frozenset[str]) -> int:
    lowered = paragraph.lower()
    return sum(1 for word in keywords if word in lowered)


@dataclass(frozen=True, slots=True)
class _Text:
    """The text a cut reads: the original's first characters, cut into pieces."""

    text: str
    """What the cut reads (a long original is read only as far as any budget could reach)."""
    complete: bool
    """Whether ``text`` is the whole original: if not, something always follows the cut."""
    spans: list[_Span]
    scores: list[int]
    """Query keywords found in each piece."""


def cut_around_keywords(text: str, query: str, max_tokens: int,
                        tokenizer: CountingTokenizer) -> str:
    """The best span of ``text`` within ``max_tokens``, centred on the query's keywords.

    What is kept is verbatim: whole pieces (paragraphs, or sentences of the best paragraph when
    it alone is over the limit) with the text that stood between them, ``[…]`` where text was
    left out. Only a single sentence over the limit is cut inside, from its head or from the
    first keyword in it.
    """
    if max_tokens <= 0:
        return ""
    window = text[: max_tokens * 64]
    keywords = query_keywords(query)
    spans = _pieces(window)
    cut = _Text(window, len(window) == len(text), spans,
                [_hits(window[a:b], keywords) for a, b in spans])
    if not spans or max(cut.scores) == 0:
        return tokenizer.truncate(text, max_tokens)
    best = _best(cut.scores, 0, len(spans))
    if tokenizer.count(_kept(cut, best, best)) > max_tokens:
        cut, best = _sentences_of(cut, best, keywords)
        if tokenizer.count(_kept(cut, best, best)) > max_tokens:
            return _cut_inside(cut, best, keywords, max_tokens, tokenizer)
    low = high = best
    counts = _Counts(cut, tokenizer)
    while (grown := _grow(cut, best, low, high, max_tokens, counts)) is not None:
        low, high = min(low, grown), max(high, grown)
    return _kept(cut, low, high)


def _best(scores: list[int], start: int, end: int) -> int:
    """The first of ``scores[start:end]`` with the most keywords."""
    return max(range(start, end), key=lambda i: (scores[i], -i))


def _sentences_of(cut: _Text, index: int, keywords: frozenset[str]) -> tuple[_Text, int]:
    """``cut`` with piece ``index`` split into its sentences, and the best of those sentences.

    A paragraph over the limit on its own would otherwise be kept from its head, which loses
    the keywords that made it the best one when they stand further in.
    """
    start, end = cut.spans[index]
    sentences = _split(cut.text, start, end, _SENTENCE_BREAK)
    spans = cut.spans[:index] + sentences + cut.spans[index + 1:]
    scores = (cut.scores[:index] + [_hits(cut.text[a:b], keywords) for a, b in sentences]
              + cut.scores[index + 1:])
    return (_Text(cut.text, cut.complete, spans, scores),
            _best(scores, index, index + len(sentences)))


def _grow(cut: _Text, best: int, low: int, high: int, max_tokens: int,
          counts: _Counts) -> int | None:
    """Next piece to add to ``low..high`` if the result still fits, or None.

    The neighbour with more keywords goes first; on a tie the side grown less so far, and the
    following piece when both sides are even. Text reads forward: what follows a match
    completes it as often as not (the answer after a question, the value after its label, the
    body after a heading), so it goes first. Taking turns after that shows a match in the
    middle of a text with context on both sides.
    """
    options: list[tuple[int, int, int, int]] = []
    if high + 1 < len(cut.spans):
        options.append((-cut.scores[high + 1], high - best, 0, high + 1))
    if low > 0:
        options.append((-cut.scores[low - 1], best - low, 1, low - 1))
    for *_, index in sorted(options):
        if counts.fits(min(low, index), max(high, index), max_tokens):
            return index
    return None


def _kept(cut: _Text, low: int, high: int) -> str:
    """Pieces ``low..high`` with the text between them, ``[…]`` on a side that loses text."""
    kept = cut.text[cut.spans[low][0]:cut.spans[high][1]]
    return _marked(kept, low > 0, _loses_after(cut, high))


def _loses_after(cut: _Text, high: int) -> bool:
    """Whether text follows piece ``high`` that a cut ending there leaves out."""
    return high < len(cut.spans) - 1 or not cut.complete


_PART_CHARS = PIECE_CHARS // 4
"""Longest part ``_Counts`` counts on its own. A text whose parts are all this short has a cut
point in every stretch ``split_into_pieces`` looks for one in, so the tokenizer's own count of
it is a sum over cuts at such points too, never over a hard cut."""


class _Counts:
    """Token counts of ``_kept(cut, low, high)``, each the tokenizer's own, as a cut grows.

    Growing a span one piece at a time and counting the whole span at each step costs the
    square of its length. With ``LINE_ADDITIVE_TOKENIZERS`` a text's count is the sum of the
    counts of its parts cut where the pre-tokenizer splits anyway: at a line start that is not
    white space or ``/``, or before a space between a non-space and a letter (where
    ``split_into_pieces`` cuts). Such a point at a piece's start is a joint; a span is counted
    as its head (up to its first joint inside it, with the marker before it), the parts between
    that and its last joint (each counted once, summed from running totals) and its tail, so a
    step costs the piece it adds. Other tokenizers, a span without a joint inside and a span
    with a part longer than ``_PART_CHARS`` are counted whole.
    """

    def __init__(self, cut: _Text, tokenizer: CountingTokenizer) -> None:
        self._cut = cut
        self._tokenizer = tokenizer
        self._additive = tokenizer.name in LINE_ADDITIVE_TOKENIZERS
        self._joints: list[int] = []
        """Positions in ``cut.text`` a span's text may be cut at for counting, ascending."""
        self._upto: list[int] = [0]
        """``_upto[i]``: joints at the starts of pieces 1..i (their indices in ``_joints``)."""
        self._long_upto: list[int] = [0]
        """``_long_upto[m]``: parts between joints before joint ``m`` over ``_PART_CHARS``."""
        self._totals: dict[int, int] = {}
        """Tokens of the parts from the first joint asked for to joint ``m``, by ``m``
        (negative before it); they cover the joints ``_lowest..._highest``."""
        self._lowest = self._highest = 0
        self._estimated: dict[int, tuple[int, int, int]] | None = None
        """For the ``estimate`` tokenizer: the parts (``estimate_parts``) of the text up to
        each piece's start and end; a span's estimate is worked out from two of them."""
        if tokenizer.name == EstimateTokenizer.name:
            self._estimated = _running_parts(cut)
        elif self._additive:
            self._find_joints()

    def _find_joints(self) -> None:
        text, spans = self._cut.text, self._cut.spans
        for start, _ in spans[1:]:
            joint = _joint(text, start)
            if joint is not None:
                if self._joints:
                    long = joint - self._joints[-1] > _PART_CHARS
                    self._long_upto.append(self._long_upto[-1] + long)
                self._joints.append(joint)
            self._upto.append(len(self._joints))

    def kept(self, low: int, high: int) -> int:
        """``tokenizer.count(_kept(cut, low, high))``, from counts of parts where that is exact."""
        cut = self._cut
        if self._estimated is not None:
            estimate, length = _estimate_of(cut, self._estimated, low, high)
            if length <= PIECE_CHARS:
                return estimate
            return self._tokenizer.count(_kept(cut, low, high))
        if not self._additive or self._upto[high] <= self._upto[low]:  # no joint inside
            return self._tokenizer.count(_kept(cut, low, high))
        first, last = self._upto[low], self._upto[high] - 1
        start, end = cut.spans[low][0], cut.spans[high][1]
        head_at, tail_at = self._joints[first], self._joints[last]
        marker = len(GAP) + 1
        if (head_at - start + marker > _PART_CHARS or end - tail_at + marker > _PART_CHARS
                or self._long_upto[last] > self._long_upto[first]):
            return self._tokenizer.count(_kept(cut, low, high))
        head = _marked(cut.text[start:head_at], low > 0, False)
        tail = _marked(cut.text[tail_at:end], False, _loses_after(cut, high))
        return (self._tokenizer.count(head) + self._total(last) - self._total(first)
                + self._tokenizer.count(tail))

    def fits(self, low: int, high: int, max_tokens: int) -> bool:
        """``self.kept(low, high) <= max_tokens``, counting the span whole only when it must.

        The tokenizer counts a text longer than ``PIECE_CHARS`` as the sum of its pieces'
        counts (``split_into_pieces``), and an estimate rounds each piece up: at least the
        estimate of the whole, at most one token a piece more. Pieces are at least half of
        ``PIECE_CHARS`` but for one after each that is shorter, so a span of ``n`` characters
        has at most ``4n / PIECE_CHARS + 2``. Only a span whose estimate is within that many
        tokens of ``max_tokens`` is counted whole.
        """
        if self._estimated is None:
            return self.kept(low, high) <= max_tokens
        estimate, length = _estimate_of(self._cut, self._estimated, low, high)
        if length <= PIECE_CHARS or estimate > max_tokens:
            return estimate <= max_tokens
        if estimate + 4 * length // PIECE_CHARS + 2 <= max_tokens:
            return True
        return self._tokenizer.count(_kept(self._cut, low, high)) <= max_tokens

    def _total(self, joint: int) -> int:
        """Tokens of the parts from the first joint asked for to ``joint``.

        The totals grow outwards one part at a time, so only the parts of the spans counted
        are counted.
        """
        totals = self._totals
        if not totals:
            totals[joint] = 0
            self._lowest = self._highest = joint
        while joint > self._highest:
            totals[self._highest + 1] = totals[self._highest] + self._part(self._highest)
            self._highest += 1
        while joint < self._lowest:
            totals[self._lowest - 1] = totals[self._lowest] - self._part(self._lowest - 1)
            self._lowest -= 1
        return totals[joint]

    def _part(self, joint: int) -> int:
        """Tokens of the text from joint ``joint`` to the next."""
        return self._tokenizer.count(
            self._cut.text[self._joints[joint]:self._joints[joint + 1]])


def _running_parts(cut: _Text) -> dict[int, tuple[int, int, int]]:
    """``estimate_parts`` of ``cut.text`` up to each piece's start and end, by position."""
    running: dict[int, tuple[int, int, int]] = {}
    wide = astral = length = 0
    at = 0
    for bound in (bound for span in cut.spans for bound in span):
        more = estimate_parts(cut.text[at:bound])
        wide, astral, length = wide + more[0], astral + more[1], length + more[2]
        running[bound], at = (wide, astral, length), bound
    return running


_MARK_BEFORE = estimate_parts(f"{GAP}\n")
_MARK_AFTER = estimate_parts(f"\n{GAP}")


def _estimate_of(cut: _Text, running: dict[int, tuple[int, int, int]], low: int,
                 high: int) -> tuple[int, int]:
    """``estimate_tokens(_kept(cut, low, high))`` and the length of that text.

    Worked out from the running parts and the markers' parts: what a tokenizer counting the
    text as one piece would say.
    """
    start, end = running[cut.spans[low][0]], running[cut.spans[high][1]]
    parts = [end[i] - start[i] for i in range(3)]
    for marked, mark in ((low > 0, _MARK_BEFORE), (_loses_after(cut, high), _MARK_AFTER)):
        if marked:
            parts = [parts[i] + mark[i] for i in range(3)]
    return estimate_from_parts(*parts), parts[2]


def _joint(text: str, start: int) -> int | None:
    """Where, at a piece starting at ``start``, no token of ``text`` spans, if anywhere.

    At the piece's start after a line break, or at the space before it, by the rules
    ``split_into_pieces`` cuts by (``splits_after_line_break``, ``splits_before_space``).
    """
    previous = text[start - 1]
    if previous == "\n" and splits_after_line_break(text, start):
        return start
    if previous == " " and start >= 2 and splits_before_space(text, start - 1):
        return start - 1
    return None


def _marked(kept: str, before: bool, after: bool) -> str:
    """``kept`` with a ``[…]`` line where text before or after it was left out."""
    return (f"{GAP}\n" if before else "") + kept + (f"\n{GAP}" if after else "")


def _cut_inside(cut: _Text, index: int, keywords: frozenset[str], max_tokens: int,
                tokenizer: CountingTokenizer) -> str:
    """Piece ``index`` (one sentence over the limit) cut to a prefix of it that fits.

    The prefix starts at the sentence's head when the first keyword is within reach of it and
    at that keyword otherwise, so the cut keeps what made the sentence the best one.
    """
    start, end = cut.spans[index]
    hit_start, hit_end = _first_hit(cut.text, start, end, keywords)
    after = index < len(cut.spans) - 1 or not cut.complete
    room = max_tokens
    begin = start
    for _ in range(4):  # the markers' tokens are known only with the text beside them
        reach = start + len(tokenizer.truncate(cut.text[start:end], room))
        begin = start if reach >= hit_end else hit_start
        kept = tokenizer.truncate(cut.text[begin:end], room)
        result = _marked(kept, index > 0 or bool(cut.text[start:begin].strip()),
                         after or bool(cut.text[begin + len(kept):end].strip()))
        excess = tokenizer.count(result) - max_tokens
        if excess <= 0:
            return result
        room -= excess
    # A limit too small for the markers: the text alone, never a marker cut in half.
    return tokenizer.truncate(cut.text[begin:end], max_tokens)


def _first_hit(text: str, start: int, end: int, keywords: frozenset[str]) -> _Span:
    """Where in ``text[start:end]`` the earliest query keyword stands (ignoring case)."""
    found = [match.span() for word in keywords
             if (match := re.compile(re.escape(word), re.IGNORECASE).search(text, start, end))]
    return min(found, default=(start, start))


def make_cutter(strategy: str, query: str, costing: Costing) -> Cutter | None:
    """A function that cuts a unit's cuttable items so the unit fits; None for ``drop``.

    The longest cuttable item is cut first, alone. When that cannot bring the unit within the
    limit (a parallel call's several large results), every cuttable item gets a fair share of
    the room (``fair_shares``) and each larger than its share is cut to it, so the unit still
    fits and no result leaves its call.
    """
    if strategy == "drop":
        return None
    tokenizer = costing.tokenizer

    def cut_text(text: str, max_tokens: int) -> str:
        if strategy == "head":
            return tokenizer.truncate(text, max_tokens)
        return cut_around_keywords(text, query, max_tokens, tokenizer)

    def cut_item(target: Candidate, max_tokens: int, count_to: int) -> Candidate | None:
        """``target`` cut to at most ``max_tokens`` tokens as rendered, or None.

        ``count_to``: how far a count of the cut goes before it stops (the unit's limit).
        """
        head, body = _kept_head(target.item)
        framing = render_candidate(_with_text(target.item, head), costing, 0).tokens
        text_budget = max_tokens - framing
        for _ in range(4):
            if text_budget < MIN_CUT_TOKENS // 2:
                return None
            text = head + cut_text(body, text_budget)
            candidate = render_candidate(_with_text(target.item, text), costing, count_to)
            if candidate.tokens <= max_tokens:
                return candidate
            text_budget -= candidate.tokens - max_tokens
        return None

    def cutter(unit: Unit, max_tokens: int) -> Unit | None:
        cuttable = [i for i, c in enumerate(unit.candidates) if c.item.truncatable]
        if not cuttable:
            return None
        index = max(cuttable, key=lambda i: unit.candidates[i].tokens)
        others = unit.tokens - unit.candidates[index].tokens
        cut = cut_item(unit.candidates[index], max_tokens - others, max_tokens)
        candidates = list(unit.candidates)
        if cut is not None:
            candidates[index] = cut
        elif len(cuttable) > 1:
            fixed = unit.tokens - sum(unit.candidates[i].tokens for i in cuttable)
            shares = fair_shares([unit.candidates[i].tokens for i in cuttable], max_tokens - fixed)
            for at, share in zip(cuttable, shares, strict=True):
                if candidates[at].tokens > share:
                    shrunk = cut_item(candidates[at], share, max_tokens)
                    if shrunk is None:
                        return None
                    candidates[at] = shrunk
        else:
            return None
        return Unit(source=unit.source, candidates=candidates, round=unit.round, rank=unit.rank)

    return cutter


def fair_shares(sizes: list[int], room: int) -> list[int]:
    """Each size's share of ``room``, the shares adding up to at most ``room``.

    Sizes within an even split keep what they are; the larger ones split what is left evenly
    (water-filling), so small results stay whole and the large ones are cut alike.
    """
    shares = list(sizes)
    pending = sorted(range(len(sizes)), key=lambda i: sizes[i])
    left = room
    while pending:
        even = left // len(pending)
        smallest = pending[0]
        if sizes[smallest] > even:
            for at in pending:
                shares[at] = even
            return shares
        left -= sizes[smallest]
        pending.pop(0)
    return shares


KEEP_HEAD = "keep_head"
"""Metadata key of a first line a cut must keep (a recalled turn's marker)."""


def split_head(item: ContextItem) -> tuple[str, str]:
    """(the line a cut keeps, the text it may cut) of ``item``'s content."""
    content = item.message.content
    head = str(item.metadata.get(KEEP_HEAD, ""))
    if head and content.startswith(head):
        return head, content[len(head):]
    return "", content


def _kept_head(item: ContextItem) -> tuple[str, str]:
    """(what a cut keeps at the head, the text it may cut): ``split_head``'s, or the mark.

    The ``TOOL_ERROR_MARK`` a failed tool result opens with is kept like a marker line. It is
    found in the text, not set as ``KEEP_HEAD``: that key also says an item is a recalled
    turn's marked opening, which a tool result never is.
    """
    head, body = split_head(item)
    if head or item.message.role != "tool" or not body.startswith(TOOL_ERROR_MARK):
        return head, body
    mark = f"{TOOL_ERROR_MARK} " if body.startswith(f"{TOOL_ERROR_MARK} ") else TOOL_ERROR_MARK
    return mark, body[len(mark):]


def _with_text(item: ContextItem, text: str) -> ContextItem:
    return replace(item, message=replace(item.message, content=text))
