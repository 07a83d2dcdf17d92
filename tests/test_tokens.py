"""Exact counts for OpenAI encodings and Hugging Face tokenizer.json files, a CJK-aware
estimate marked inexact, long input counted in pieces, prefixes that fit, and counts cached by
content so a long session is never re-tokenised.
"""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.tokens import CountingTokenizer, Tokenizer, estimate_tokens, get_tokenizer
from contextwright.tokens._base import split_into_pieces

OPENAI = ("o200k_base", "cl100k_base")


def bpe_encoding(name: str) -> Any:
    """The ``bpe_openai`` encoding itself (its import warns about a deprecated stdlib call)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        return bpe_openai.get_encoding(name)

MIXED = [
    "",
    "Hello, world!",
    "今天上海天气怎么样，顺便帮我记下来",
    "The weather in 上海 is 多云, 25°C (humidity 60%). 明天 will be sunny ☀️.",
    "def f(x):\n    return x ** 2  # 平方\n\n\n\tindented\r\nwindows line",
    "订单号 A-1001，金额 ¥1,299.00；address: 1600 Amphitheatre Pkwy, Mountain View, CA",
    "<|endoftext|> special tokens are <|im_start|>system plain text in content",
    "🙂👍🏽 emoji, combining e\u0301, ＦＵＬＬＷＩＤＴＨ, Ελληνικά, русский, 한국어, 日本語",
]


@pytest.mark.parametrize("name", OPENAI)
@pytest.mark.parametrize("text", MIXED, ids=range(len(MIXED)))
def test_openai_counts_equal_the_bpe_openai_encoding(name: str, text: str) -> None:
    encoding = bpe_encoding(name)
    tokenizer = get_tokenizer(name)
    assert tokenizer.exact
    assert tokenizer.name == name
    assert tokenizer.count(text) == len(encoding.encode_ordinary(text))


def test_the_two_openai_encodings_differ() -> None:
    text = MIXED[3] * 20
    assert get_tokenizer("o200k_base").count(text) != get_tokenizer("cl100k_base").count(text)


LINE = "The quick brown fox 快速的狐狸 jumps over 12345 lazy dogs; 天气多云。\n"


@pytest.mark.parametrize("name", OPENAI)
def test_input_over_200k_tokens_is_counted_in_pieces(name: str) -> None:
    encoding = bpe_encoding(name)
    text = LINE * 16_000
    pieces = split_into_pieces(text)
    assert len(pieces) > 1
    assert "".join(pieces) == text
    expected = sum(len(encoding.encode_ordinary(piece)) for piece in pieces)
    assert expected > 200_000
    assert get_tokenizer(name).inner.count(text) == expected
    assert get_tokenizer(name).count(text) == expected
    # Lines end in a line break, so the pieces cost exactly what the lines do.
    assert expected == 16_000 * len(encoding.encode_ordinary(LINE))


@pytest.mark.parametrize("name", OPENAI)
def test_long_text_without_line_breaks_is_counted_in_pieces(name: str) -> None:
    encoding = bpe_encoding(name)
    text = "word " * 250_000
    pieces = split_into_pieces(text)
    assert len(pieces) > 1
    assert get_tokenizer(name).count(text) == sum(len(encoding.encode_ordinary(p))
                                                  for p in pieces)


@pytest.mark.parametrize("name", OPENAI)
def test_count_up_to_is_exact_below_the_limit_and_above_it_beyond(name: str) -> None:
    tokenizer = get_tokenizer(name)
    text = LINE * 2_000
    exact = tokenizer.inner.count(text)
    assert tokenizer.count_up_to(text, exact) == exact
    assert tokenizer.count_up_to(text, exact // 10) > exact // 10


# --- truncate --------------------------------------------------------------------------------

TRUNCATE_TEXTS = [LINE * 50, "今天上海天气多云，二十五摄氏度。" * 100, MIXED[3] * 40, "x" * 5000]


@pytest.mark.parametrize("name", [*OPENAI, "estimate"])
@pytest.mark.parametrize("limit", [0, 1, 7, 64, 500])
@pytest.mark.parametrize("text", TRUNCATE_TEXTS, ids=["lines", "chinese", "mixed", "one-run"])
def test_truncate_returns_a_prefix_within_the_limit(name: str, limit: int, text: str) -> None:
    tokenizer = get_tokenizer(name)
    prefix = tokenizer.truncate(text, limit)
    assert text.startswith(prefix)
    assert tokenizer.count(prefix) <= limit
    # Not a needlessly short prefix either.
    assert tokenizer.count(prefix) >= min(limit, tokenizer.count(text)) - 2


@pytest.mark.parametrize("name", [*OPENAI, "estimate"])
def test_truncate_keeps_text_that_fits(name: str) -> None:
    tokenizer = get_tokenizer(name)
    assert tokenizer.truncate(MIXED[3], 10_000) == MIXED[3]


@pytest.mark.parametrize("name", OPENAI)
@pytest.mark.parametrize("limit", [1_000, 150_000, 250_000])
def test_truncate_long_input_returns_a_prefix_within_the_limit(name: str, limit: int) -> None:
    tokenizer = get_tokenizer(name)
    text = LINE * 16_000  # over 200,000 tokens in either encoding
    prefix = tokenizer.truncate(text, limit)
    assert text.startswith(prefix)
    assert tokenizer.count(prefix) <= limit
    assert tokenizer.count(prefix) >= limit - 50


@settings(max_examples=80, deadline=None)
@given(text=st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=400),
       limit=st.integers(min_value=0, max_value=120),
       name=st.sampled_from([*OPENAI, "estimate"]))
def test_truncate_property(text: str, limit: int, name: str) -> None:
    tokenizer = get_tokenizer(name)
    prefix = tokenizer.truncate(text, limit)
    assert text.startswith(prefix)
    assert tokenizer.count(prefix) <= limit


# --- the estimator ---------------------------------------------------------------------------

# Texts written as the characters a reader sees, each one cluster of code points.
CLUSTERED = [
    ["F", "a", "m", "i", "l", "y", ":", " ", "👨\u200d👩\u200d👧\u200d👦", " ", "o", "k", " ",
     "👩\u200d💻", "!"],
    ["F", "l", "a", "g", "s", " ", "🇫🇷", "🇩🇪", "🇯🇵", "🇺🇸", " ", "o", "k"],
    ["T", "o", "n", "e", " ", "👋🏽", "👋🏽", "👋🏿", " ", "1\ufe0f\u20e3", "2\ufe0f\u20e3",
     "❤\ufe0f"],
    ["न", "म", "स्ते", " ", "दु", "नि", "या", " ", "कि", "ता", "ब", " ", "प", "ढ़ि", "ए", " "],
    ["c", "a", "f", "e\u0301", " ", "n", "a", "i\u0308", "v", "e", " ", "Å", "n", "g", "s", "t"],
]


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base", "estimate"])
@pytest.mark.parametrize("clusters", CLUSTERED, ids=["zwj", "flags", "modifiers", "devanagari",
                                                     "combining"])
def test_truncate_never_ends_inside_a_character_as_a_reader_sees_it(
        name: str, clusters: list[str]) -> None:
    tokenizer = get_tokenizer(name)
    text = "".join(clusters) * 3
    bounds = set(itertools.accumulate(len(cluster) for cluster in clusters * 3)) | {0}
    for limit in range(1, tokenizer.count(text) + 1):
        prefix = tokenizer.truncate(text, limit)
        assert text.startswith(prefix) and tokenizer.count(prefix) <= limit
        assert len(prefix) in bounds, (limit, prefix[-4:])


def test_a_long_run_of_combining_marks_is_cut_where_the_tokenizer_cut_it() -> None:
    tokenizer = get_tokenizer("o200k_base")
    text = "a" + "\u0301" * 500
    assert 0 < len(tokenizer.truncate(text, 20)) < len(text)


def test_estimator_is_marked_inexact() -> None:
    tokenizer = get_tokenizer("estimate")
    assert tokenizer.exact is False
    ctx = ContextBuilder(tokenizer="estimate").build(BuildPlan.named("simple_qa"),
                                                      Request(user_input="hi"))
    assert ctx.report.exact_tokens is False
    assert "(estimated)" in ctx.report.format_debug()


def test_exact_tokenizers_are_reported_exact() -> None:
    ctx = ContextBuilder().build(BuildPlan.named("simple_qa"), Request(user_input="hi"))
    assert ctx.report.exact_tokens is True
    assert "(estimated)" not in ctx.report.format_debug()


@pytest.mark.parametrize("text", ["今天上海天气多云二十五摄氏度" * 50, "中" * 10_000,
                                  "こんにちは世界" * 30])
def test_estimator_counts_about_one_token_per_cjk_character(text: str) -> None:
    wide = sum(1 for ch in text if not ch.isspace())
    assert 0.9 * wide <= get_tokenizer("estimate").count(text) <= 1.2 * len(text)


def test_estimator_counts_about_four_characters_per_token_for_english() -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 100
    estimate = get_tokenizer("estimate").count(text)
    assert len(text) / 5 <= estimate <= len(text) / 3
    exact = get_tokenizer("o200k_base").count(text)
    assert 0.5 * exact <= estimate <= 2 * exact


def test_estimator_is_close_to_exact_counts_for_chinese() -> None:
    text = "上下文工程管的是这一整坨东西怎么组织、怎么裁剪、怎么排序。" * 30
    exact = get_tokenizer("o200k_base").count(text)
    assert 0.5 * exact <= estimate_tokens(text) <= 2 * exact


# --- the count cache -------------------------------------------------------------------------

_fake_names = itertools.count()


class CountingFake:
    """A ``Tokenizer`` that records what it is asked to count (one token per character)."""

    exact = True

    def __init__(self) -> None:
        # The count cache is keyed by tokenizer name, so each fake gets a fresh one.
        self.name = f"counting-fake-{next(_fake_names)}"
        self.calls: list[str] = []

    def count(self, text: str) -> int:
        self.calls.append(text)
        return len(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        return text[:max_tokens]


def test_fake_follows_the_tokenizer_protocol() -> None:
    assert isinstance(CountingFake(), Tokenizer)


def test_second_count_of_the_same_content_does_not_call_the_tokenizer() -> None:
    fake = CountingFake()
    tokenizer = get_tokenizer(fake)
    assert isinstance(tokenizer, CountingTokenizer)
    text = "今天上海天气多云，25摄氏度"
    assert tokenizer.count(text) == len(text)
    assert tokenizer.count(text) == len(text)
    assert tokenizer.count_up_to(text, 1_000) == len(text)
    assert fake.calls == [text]


def test_cache_is_keyed_by_content() -> None:
    fake = CountingFake()
    tokenizer = get_tokenizer(fake)
    for text in ["a", "b", "a", "ab", "b"]:
        tokenizer.count(text)
    assert fake.calls == ["a", "b", "ab"]


def test_a_repeated_build_does_not_re_tokenise() -> None:
    fake = CountingFake()
    builder = ContextBuilder(tokenizer=fake)
    request = Request(user_input="next?", system="Be brief.", history=session(20))
    builder.build(BuildPlan.named("chat"), request)
    assert fake.calls
    fake.calls.clear()
    builder.build(BuildPlan.named("chat"), request)
    assert fake.calls == []


def session(rounds: int) -> list[dict[str, str]]:
    messages = []
    for i in range(rounds):
        messages += [{"role": "user", "content": f"question {i} about the weather on day {i}"},
                     {"role": "assistant", "content": f"answer {i}: cloudy, 25 degrees. " * 3}]
    return messages


def test_a_growing_session_tokenises_only_what_is_new() -> None:
    fake = CountingFake()
    builder = ContextBuilder(tokenizer=fake)
    plan = BuildPlan.named("chat")
    builder.build(plan, Request(user_input="question 20", system="Be brief.",
                                history=session(20)))
    old_contents = {m["content"] for m in session(20)}
    fake.calls.clear()
    builder.build(plan, Request(user_input="question 21", system="Be brief.",
                                history=session(21)))
    assert fake.calls
    assert not old_contents & set(fake.calls)


def test_same_name_shares_one_counting_tokenizer() -> None:
    assert get_tokenizer("o200k_base") is get_tokenizer("o200k_base")
    wrapped = get_tokenizer("cl100k_base")
    assert get_tokenizer(wrapped) is wrapped


# --- Hugging Face tokenizer.json -------------------------------------------------------------

VOCAB = {"[UNK]": 0, "hello": 1, "world": 2, "the": 3, "weather": 4, "is": 5, "cloudy": 6,
         ".": 7, "天气": 8, "多云": 9, ",": 10}


@pytest.fixture(scope="module")
def word_level_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tokenizer = tokenizers.Tokenizer(WordLevel(VOCAB, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    tokenizer.save(str(path))
    return path


@pytest.mark.parametrize(("text", "tokens"), [
    ("", 0),
    ("hello world", 2),
    ("the weather is cloudy .", 5),
    ("hello, unknown words here", 5),
    ("天气 多云", 2),
])
def test_hugging_face_tokenizer_json_counts_words(word_level_json: Path, text: str,
                                                  tokens: int) -> None:
    tokenizer = get_tokenizer(str(word_level_json))
    assert not tokenizer.exact  # text is exact; the chat framing is not read from a template
    assert tokenizer.name.startswith("hf:")
    assert tokenizer.count(text) == tokens


def test_hugging_face_tokenizer_counts_long_text_in_pieces(word_level_json: Path) -> None:
    tokenizer = get_tokenizer(str(word_level_json))
    text = "hello world the weather is cloudy .\n" * 20_000
    assert tokenizer.count(text) == 7 * 20_000


def test_hugging_face_tokenizer_truncates_to_a_prefix(word_level_json: Path) -> None:
    tokenizer = get_tokenizer(str(word_level_json))
    text = "hello world the weather is cloudy ." * 3
    for limit in (0, 1, 3, 10, 100):
        prefix = tokenizer.truncate(text, limit)
        assert text.startswith(prefix)
        assert tokenizer.count(prefix) <= limit
    assert tokenizer.truncate(text, 3) == "hello world the"


def test_hugging_face_tokenizer_drives_a_build(word_level_json: Path) -> None:
    ctx = ContextBuilder(tokenizer=str(word_level_json)).build(
        BuildPlan.named("simple_qa"), Request(user_input="hello world"))
    assert ctx.report.tokenizer.startswith("hf:")
    assert not ctx.report.exact_tokens  # no chat template read: the framing is estimated
    assert "(estimated)" in ctx.report.format_debug()
    assert ctx.total_tokens == ctx.recount()


def test_hugging_face_tokenizer_accepts_a_path_object(word_level_json: Path) -> None:
    tokenizer = get_tokenizer(word_level_json)  # type: ignore[arg-type]
    assert tokenizer.count("hello world") == 2


def test_unknown_tokenizer_and_bad_file_are_tokenizer_errors(tmp_path: Path) -> None:
    from contextwright import TokenizerError

    with pytest.raises(TokenizerError):
        get_tokenizer("no_such_encoding")
    with pytest.raises(TokenizerError):
        get_tokenizer(str(tmp_path / "absent.json"))
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}", "utf-8")
    with pytest.raises(TokenizerError):
        get_tokenizer(str(bad))


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
@pytest.mark.parametrize("seed", range(8))
def test_long_text_counted_in_pieces_equals_the_whole_text_count(name: str, seed: int) -> None:
    # Pieces are cut only at pre-token boundaries, so the sum is exact, not an estimate.
    import random

    rng = random.Random(seed)
    words = ["hello", "world", "今天", "天气", "多云", "\n", "\n\n", "  ", "。", "，", "—", "123",
             "x.y", "don't", "\t", " ", "<|x|>", "/", "./", ".\n/"]
    text = "".join(rng.choice(words) + (" " if rng.random() < 0.5 else "")
                   for _ in range(40_000))
    assert len(split_into_pieces(text)) > 2
    whole = len(bpe_encoding(name).encode(text, disallowed_special=()))
    assert get_tokenizer(name).count(text) == whole


@pytest.mark.parametrize("text", [
    "，。！？、；：（）《》" * 50,                                       # CJK punctuation
    "ＡＢＣ１２３４５６７８９０" * 50,                                    # full-width forms
    "𠀀𠀁𠀂𪚥𰻞" * 50,                                                  # beyond the basic plane
    "您好，您的订单号是２０２４１００１，金额￥１，２９９．００，预计5月3日送达！" * 10,
    "The order 4471 shipped yesterday; tracking SF1234567890. " * 20,
])
def test_the_estimate_does_not_fall_far_below_a_real_count(text: str) -> None:
    # An estimate stands in for a model whose tokenizer is unknown: counting low would let a
    # build run past the model's window.
    real = get_tokenizer("o200k_base").count(text)
    assert get_tokenizer("estimate").count(text) >= 0.75 * real
