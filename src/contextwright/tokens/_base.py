"""The ``Tokenizer`` protocol, the content-keyed count cache and tokenizer lookup by name."""

from __future__ import annotations

import os
import re
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol, runtime_checkable

from contextwright.core.caches import BoundedCache, register_cache, text_bytes
from contextwright.errors import TokenizerError

# Pieces this long (in characters) stay far below the 200,000-token limit of bpe-openai's encode,
# even for text that costs several tokens per character.
PIECE_CHARS = 32_000
_CACHE_LIMIT = 2_000_000
_CACHE_SHARE = 0.13
"""Each tokenizer's counts may hold this share of the caches' byte budget (``core.caches``).
A long-running server's counts estimated 28-37 MB (their keys' texts, mostly held by the
other caches too) over 10,000-30,000 builds of ``bench/memory_flat.py``: 0.13 is 33 MB."""


@runtime_checkable
class Tokenizer(Protocol):
    """What a tokenizer must offer: a name, whether counts are exact, count and cut."""

    @property
    def name(self) -> str:
        """Stable name, part of the cache key (e.g. ``o200k_base``)."""
        ...

    @property
    def exact(self) -> bool:
        """True when counts are the model's real token counts, False for estimates."""
        ...

    def count(self, text: str) -> int:
        """Number of tokens of ``text`` (any length)."""
        ...

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` of at most ``max_tokens`` tokens."""
        ...


def split_into_pieces(text: str, piece_chars: int = PIECE_CHARS) -> list[str]:
    """Cut long text into pieces that can be encoded alone and whose counts add up exactly.

    Cuts fall only where the OpenAI encodings' pre-tokenizer splits anyway — after a line break
    followed by a non-space other than "/", or before a space that follows a non-space and
    precedes a letter — so no token spans a cut. Only a text with no such point in a whole piece
    (32,000 characters without a space or line break) is cut hard, and may then be off by a
    token at that cut.
    """
    return list(iter_pieces(text, piece_chars))


def iter_pieces(text: str, piece_chars: int = PIECE_CHARS) -> Iterator[str]:
    """The pieces of ``split_into_pieces``, each found only when the one before is used up.

    A caller that stops early (``count_up_to`` past its limit) never looks at the rest.
    """
    start = 0
    while len(text) - start > piece_chars:
        cut = _piece_end(text, start, piece_chars)
        yield text[start:cut]
        start = cut
    yield text[start:]


def _piece_end(text: str, start: int, piece_chars: int) -> int:
    """Where the piece from ``start`` ends.

    At the last boundary in its upper half, else in its lower half, else ``piece_chars`` on
    (a hard cut).
    """
    end = start + piece_chars
    middle = start + piece_chars // 2
    upper = _safe_cut(text, middle, end)
    if upper is not None:
        return upper
    # No boundary in the upper half: only the lower half is left to search (line starts first).
    line = _last_line_start(text, start + 1, min(middle + 1, end))
    if line is not None:
        return line
    word = _last_word_start(text, start + 2, min(middle + 2, end))
    return end if word is None else word


def splits_after_line_break(text: str, at: int) -> bool:
    r"""Whether no token spans ``at``, the position right after a line break of ``text``.

    o200k glues punctuation, line breaks and slashes into one token (".\n/"), so a break
    followed by "/" (or by more white space) is no boundary.
    """
    following = text[at]
    return not following.isspace() and following != "/"


def splits_before_space(text: str, space: int) -> bool:
    """Whether no token spans ``space``, a space of ``text`` with a character on each side.

    It does when a non-space precedes it and a letter follows (the space opens the word).
    """
    return not text[space - 1].isspace() and text[space + 1].isalpha()


def _safe_cut(text: str, low: int, high: int) -> int | None:
    """The last pre-token boundary in ``(low, high)``, if any: a line start before a space.

    The rules of ``splits_after_line_break`` and ``splits_before_space``.
    """
    line = _last_line_start(text, low, high)
    return line if line is not None else _last_word_start(text, low + 1, high)


# Boundaries are searched for without a Python step per line break or space: long tool
# output (indented JSON, logs, padded tables) has a space every few characters and hardly a
# boundary. ASCII text is mapped to one class letter per character and searched with
# ``bytes.rfind``; other text with a regex that backs off from the window's end.
_CLASSES = bytes(
    ord("n") if code == 10 else ord("p") if code == 32 else ord("s") if chr(code).isspace()
    else ord("/") if code == 47 else ord("a") if chr(code).isalpha() else ord("x")
    for code in range(128)) + bytes(128)
"""Per ASCII character: ``n`` line break, ``p`` space, ``s`` other white space, ``/``,
``a`` letter, ``x`` anything else."""
_LINE_STARTS = (b"na", b"nx")
"""A line break before a non-space other than "/"."""
_WORD_STARTS = (b"apa", b"xpa", b"/pa")
"""A space between a non-space and a letter."""
_LETTER_CLASS = r"[^\W\d_]"
"""Word characters but digits and ``_``: the letters, and numeric characters that are no
digits (``²``, ``½``, ``Ⅻ``, ``①``). A space before one of those opens no word."""
_NUMERIC_BLOCKS = ((0x00, 0xFF), (0x2070, 0x209F), (0x2150, 0x218F), (0x2460, 0x24FF),
                   (0x2776, 0x2793), (0x3007, 0x3007), (0x3021, 0x303A), (0x3192, 0x3195),
                   (0x3220, 0x325F), (0x3280, 0x32BF))
"""Where the numeric characters people type sit (Latin-1, super- and subscripts, number forms,
enclosed and circled numbers, CJK numerals)."""
_NUMERIC_LOOKALIKES = "".join(
    char for low, high in _NUMERIC_BLOCKS for char in map(chr, range(low, high + 1))
    if re.fullmatch(_LETTER_CLASS, char) and not char.isalpha())
_LAST_LINE_START = re.compile(r"(?s:.*)\n(?=[^\s/])")
_LAST_WORD_START = re.compile(r"(?s:.*) (?<=\S )(?=" + _LETTER_CLASS + ")(?![" + re.escape(
    _NUMERIC_LOOKALIKES) + "])")
"""A space that opens a word; the common numeric characters are left out here, the rest are
left out by checking ``str.isalpha`` on what it finds."""


def _last_line_start(text: str, pos: int, endpos: int) -> int | None:
    """The start of the last line that opens a pre-token, its break at ``pos..endpos - 2``."""
    window = text[pos:endpos]
    if window.isascii():
        classes = window.encode("ascii").translate(_CLASSES)
        found = max(classes.rfind(pair) for pair in _LINE_STARTS)
        return None if found < 0 else pos + found + 1
    line = _LAST_LINE_START.match(text, pos, endpos)
    return None if line is None else line.end()


def _last_word_start(text: str, pos: int, endpos: int) -> int | None:
    """The last space at ``pos..endpos - 2`` that opens a word (``pos`` at least 1)."""
    window = text[pos - 1:endpos]
    if window.isascii():
        classes = window.encode("ascii").translate(_CLASSES)
        found = max(classes.rfind(triple) for triple in _WORD_STARTS)
        return None if found < 0 else pos + found
    while (word := _LAST_WORD_START.match(text, pos, endpos)) is not None:
        space = word.end() - 1
        if text[space + 1].isalpha():
            return space
        endpos = space + 1
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatFrame:
    """Tokens a chat rendering adds around each message's content, and to prime the reply.

    The defaults are OpenAI's published counting (3 tokens of framing per message plus the
    role, 3 to prime the reply). A Hugging Face tokenizer with a chat template measures its own
    (``tokens._chat_template``); a tokenizer offers one as its ``chat_frame`` attribute.
    """

    system: int = 4
    user: int = 4
    assistant: int = 4
    tool: int = 4
    reply: int = 3
    """Tokens before the reply (the template's generation prompt) and at the very start."""
    tools_exact: bool = True
    """Whether tool calls, tool results and tool schemas are framed as counted (False: the
    counts of contexts that hold them are estimates)."""

    def message(self, role: str) -> int:
        """Framing of one message of ``role``."""
        if role == "user":
            return self.user
        if role == "assistant":
            return self.assistant
        return self.system if role == "system" else self.tool


OPENAI_CHAT_FRAME = ChatFrame()
"""OpenAI's framing, used for every tokenizer that brings none of its own."""


class CountingTokenizer:
    """A tokenizer with a process-wide count cache keyed by (tokenizer name, content).

    Thread-safe: the cache is a dict whose single get/set operations are atomic, and a count is a
    pure function of its key, so a race only computes one count twice.
    """

    _caches: ClassVar[dict[str, BoundedCache[str, int]]] = {}
    _caches_lock = threading.Lock()

    def __init__(self, inner: Tokenizer) -> None:
        self.inner = inner
        frame = getattr(inner, "chat_frame", None)
        self.frame: ChatFrame = frame if isinstance(frame, ChatFrame) else OPENAI_CHAT_FRAME
        """How chat messages are framed for this tokenizer's model."""
        warning = getattr(inner, "warning", None)
        self.warning: str | None = warning if isinstance(warning, str) else None
        """Why the tokenizer counts less exactly than it could (put in every build's report)."""
        with self._caches_lock:
            known = self._caches.get(inner.name)
            self._cache = known if known is not None else self._new_cache(inner.name)

    @classmethod
    def _new_cache(cls, name: str) -> BoundedCache[str, int]:
        """The counts of tokenizer ``name``, shared by every instance of that name."""
        cache: BoundedCache[str, int] = BoundedCache(
            f"tokens.counts.{name}", max_entries=_CACHE_LIMIT, share=_CACHE_SHARE,
            size=lambda text, _: text_bytes(text) + 60)
        cls._caches[name] = register_cache(cache.name, cache)
        return cache

    @property
    def name(self) -> str:
        """Name of the wrapped tokenizer."""
        return self.inner.name

    @property
    def exact(self) -> bool:
        """Whether the wrapped tokenizer's counts are exact."""
        return self.inner.exact

    def count(self, text: str) -> int:
        """Token count of ``text``, computed once per distinct content."""
        cache = self._cache
        cached = cache.get(text)
        if cached is not None:
            return cached
        cached = cache.revive(text)
        if cached is not None:
            return cached
        if len(text) > PIECE_CHARS:  # sum of piece counts, so count_up_to agrees exactly
            value = sum(self.count(piece) for piece in split_into_pieces(text))
        else:
            value = self.inner.count(text)
        return cache.put(text, value)

    def count_up_to(self, text: str, limit: int) -> int:
        """Exact count if it is at most ``limit``; otherwise a number above ``limit``.

        Lets a build reject a 10 MB message after counting only its first pieces. Long text is
        counted piece by piece (each piece cached) and the sum stops at the first piece that
        passes ``limit``, so the answer depends only on the text and the limit, never on what
        was counted before.
        """
        if len(text) <= PIECE_CHARS:
            return self.count(text)
        total = 0
        for piece in iter_pieces(text):
            total += self.count(piece)
            if total > limit:
                return total
        return total

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` within ``max_tokens`` tokens.

        It ends between characters as a reader sees them (``whole_clusters``).
        """
        if max_tokens <= 0:
            return ""
        cut = self.inner.truncate(text, max_tokens)
        prefix = whole_clusters(text, cut)
        # The tokenizer's own prefix fits; one moved back to a cluster's start is counted again,
        # since a shorter text may merge otherwise.
        while prefix is not cut and prefix and self.count(prefix) > max_tokens:
            prefix = whole_clusters(text, prefix[:-1])
        return prefix


_ZWJ = "\u200d"
_VIRAMA = 9
"""The canonical combining class of a virama (Devanagari ``्``), which joins two consonants."""
_LONGEST_CLUSTER = 32
"""Characters a cut backs off at most to keep a cluster whole; a longer run of marks (text
stacked with combining marks on purpose) is cut where the tokenizer cut it."""


def whole_clusters(text: str, prefix: str) -> str:
    """``prefix`` (a prefix of ``text``) without a last character that ``text`` goes on to join.

    A token boundary may fall inside what a reader sees as one character: a letter and its
    combining marks (Devanagari ``कि``, ``é`` written as ``e`` and an accent), a conjunct
    (``स्त``), an emoji and its
    skin tone, variation selector or keycap, emoji joined by a zero-width joiner (a family),
    the two regional indicators of a flag. Cutting there changes the text (``कि`` becomes
    ``क``, a family a lone parent), so the cut moves back to the cluster's start.
    """
    end = len(prefix)
    if end == 0 or end >= len(text) or not _may_join(text, end):
        return prefix
    start, stop = end, end
    while start > 0 and stop - start < _LONGEST_CLUSTER and _joins(text, start):
        start -= 1
    while stop < len(text) - 1 and stop - start < _LONGEST_CLUSTER and _joins(text, stop + 1):
        stop += 1
    return prefix if stop - start >= _LONGEST_CLUSTER else prefix[:start]


def _may_join(text: str, at: int) -> bool:
    """Cheap first look: non-ASCII on either side of ``at``."""
    return not (text[at].isascii() and text[at - 1].isascii())


def _joins(text: str, at: int) -> bool:
    """Whether ``text[at - 1]`` and ``text[at]`` belong to one cluster (0 < at < len(text))."""
    after, before = text[at], text[at - 1]
    if before == _ZWJ or _extends(after):
        return True
    if unicodedata.combining(before) == _VIRAMA and unicodedata.category(after) == "Lo":
        return True  # a conjunct: a consonant, a virama and the consonant it joins (स्त)
    return _is_regional(after) and _is_regional(before) and _regionals_before(text, at) % 2 == 1


def _extends(char: str) -> bool:
    """A character that attaches to the one before it."""
    code = ord(char)
    return (unicodedata.category(char) in ("Mn", "Mc", "Me") or char == _ZWJ
            or 0xFE00 <= code <= 0xFE0F or 0x1F3FB <= code <= 0x1F3FF
            or 0xE0020 <= code <= 0xE007F or 0xE0100 <= code <= 0xE01EF)


def _is_regional(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def _regionals_before(text: str, at: int) -> int:
    """Regional indicators in a row ending at ``at`` (a flag is a pair of them)."""
    count = 0
    while at > 0 and _is_regional(text[at - 1]):
        count, at = count + 1, at - 1
    return count


def get_tokenizer(spec: str | os.PathLike[str] | Tokenizer | CountingTokenizer = "o200k_base",
                  ) -> CountingTokenizer:
    """Resolve a tokenizer by name or wrap a tokenizer object.

    Names: ``o200k_base``, ``cl100k_base``, ``estimate``, or a path to a Hugging Face
    ``tokenizer.json``; an object that follows the protocol is wrapped as is.
    """
    if isinstance(spec, CountingTokenizer):
        return spec
    if isinstance(spec, os.PathLike):
        return _cached_by_name(os.fspath(spec))
    if isinstance(spec, str):
        return _cached_by_name(spec)
    if not isinstance(spec, Tokenizer):
        raise TokenizerError("a tokenizer must be a name, a tokenizer.json path or a Tokenizer")
    return CountingTokenizer(spec)


_by_name: dict[str, CountingTokenizer] = {}
_by_name_lock = threading.Lock()


def _cached_by_name(spec: str) -> CountingTokenizer:
    with _by_name_lock:
        found = _by_name.get(spec)
        if found is None:
            found = CountingTokenizer(_load(spec))
            _by_name[spec] = found
        return found


def _load(spec: str) -> Tokenizer:
    from contextwright.tokens._estimate import EstimateTokenizer
    from contextwright.tokens._hf import HuggingFaceTokenizer
    from contextwright.tokens._openai import OPENAI_ENCODINGS, OpenAITokenizer

    if spec in OPENAI_ENCODINGS:
        return OpenAITokenizer(spec)
    if spec == "estimate":
        return EstimateTokenizer()
    if spec.endswith(".json") or os.sep in spec or "/" in spec:
        if not Path(spec).is_file():
            raise TokenizerError(f"tokenizer file not found: {spec}")
        return HuggingFaceTokenizer(spec)
    raise TokenizerError(
        "unknown tokenizer: use o200k_base, cl100k_base, estimate or a path to tokenizer.json"
    )

