"""One analyzer module: named tokenizers, one CJK table, one stop list per language."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from contextwright.analysis import (
    ANALYZERS,
    CHINESE_STOPWORDS,
    CJK,
    CJK_RANGES,
    ENGLISH_STOPWORDS,
    HAN,
    SEARCH_KEEPS,
    analyzer,
    cjk_class,
    is_cjk_char,
    light_stem,
)
from contextwright.core.cutting import query_keywords
from contextwright.recall import LexicalTurnRecaller, RecallTurn
from contextwright.retrieval.text import query_entities, search_tokens

SRC = Path(__file__).resolve().parents[1] / "src" / "contextwright"


def test_cjk_ranges_are_written_out_only_in_the_table() -> None:
    written = re.compile(r"\\u(?:4e00|9fff|3040|30ff|3400|4dbf|ac00|d7af|f900|faff)|0x4e00",
                         re.IGNORECASE)
    offenders = [str(path.relative_to(SRC)) for path in SRC.rglob("*.py")
                 if path.name != "analysis.py" and written.search(path.read_text("utf-8"))]
    assert not offenders, f"CJK ranges written out instead of analysis.cjk_class: {offenders}"


def test_the_table_builds_character_classes_and_tests_characters() -> None:
    assert cjk_class(HAN) == "\\u4e00-\\u9fff"
    wide = re.compile(f"[{cjk_class(CJK)}]")
    assert [bool(wide.match(c)) for c in "上かカ한A"] == [True, True, True, True, False]
    assert is_cjk_char("上", HAN) and not is_cjk_char("か", HAN) and is_cjk_char("か")
    assert set(CJK) == set(CJK_RANGES)


@pytest.mark.parametrize("name", ["recall", "cutting", "tools"])
def test_the_conversation_analyzers_drop_the_one_english_stop_list(name: str) -> None:
    terms = analyzer(name).terms(" ".join(sorted(ENGLISH_STOPWORDS)) + " lisbon")
    assert terms == ["lisbon"]


def test_search_drops_the_list_but_the_words_it_keeps() -> None:
    assert SEARCH_KEEPS < ENGLISH_STOPWORDS
    terms = search_tokens(" ".join(sorted(ENGLISH_STOPWORDS)) + " lisbon")
    assert terms == [*sorted(SEARCH_KEEPS), "lisbon"]


@pytest.mark.parametrize("name", sorted(ANALYZERS))
def test_every_analyzer_makes_chinese_bigrams(name: str) -> None:
    assert analyzer(name).terms("上海天气") == ["上海", "海天", "天气"]
    assert analyzer(name).terms("退") == ["退"]


def test_recall_stems_words_and_keeps_ids_whole() -> None:
    assert analyzer("recall").terms("Painting paintings ORD-7731 nora_vance_5172") == [
        "paint", "paint", "ord-7731", "nora_vance_5172"]


@pytest.mark.parametrize(("word", "stem"), [
    ("games", "game"), ("game", "game"), ("cities", "citi"), ("city", "citi"),
    ("hoping", "hope"), ("hopping", "hop"), ("agreed", "agree"), ("caresses", "caress"),
    ("running", "run"), ("classes", "class"), ("adopted", "adopt"), ("adopting", "adopt"),
    ("never", "never"), ("water", "water"), ("sing", "sing"), ("bring", "bring"),
    ("falling", "fall"), ("ORD-7731", "ORD-7731"), ("cafés", "cafés"), ("was", "was")])
def test_the_recall_stem_folds_inflections_only(word: str, stem: str) -> None:
    assert light_stem(word) == stem


def test_cutting_keeps_words_unstemmed() -> None:
    assert query_keywords("Painting the ORD-7731") == frozenset({"painting", "ord-7731"})


def test_tools_split_identifiers_and_fold_plurals() -> None:
    assert analyzer("tools").term_set("getWeatherForecasts list_orders x") == {
        "weather", "forecast", "list", "order"}


def test_search_and_recall_keep_any_script_and_every_cjk_block() -> None:
    assert search_tokens("Café ürün すし") == ["café", "ürün", "すし"]
    assert analyzer("recall").terms("Café ürün すし") == ["café", "ürün", "すし"]


def test_repeated_text_gives_the_same_terms_from_the_memo() -> None:
    recall = analyzer("recall")
    text = "shopping 上海天气是什么样子的呢请告诉我 shopping"
    assert recall.terms(text) == recall.terms(text)
    assert recall.term_counts(text)["shop"] == 2


def test_chinese_stop_characters_split_query_entities() -> None:
    assert "的" in CHINESE_STOPWORDS
    assert {"上海", "天气"} <= query_entities("上海的天气")


def test_an_unknown_analyzer_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="recall"):
        analyzer("nope")


@pytest.mark.parametrize("name", ["recall", "search", "tools", "cutting"])
def test_full_width_digits_and_letters_make_the_same_terms_as_ascii(name: str) -> None:
    typed = analyzer(name).terms("订单ＲＴ２０２４０５０１到哪了")
    assert typed == analyzer(name).terms("订单RT20240501到哪了")
    assert any("20240501" in term for term in typed)


def test_a_full_width_id_in_a_question_recalls_the_turn_that_names_it() -> None:
    texts = [f"闲聊第{n}句，今天天气不错" for n in range(10)]
    texts[4] = "我的订单RT20240501还没到"
    turns = [RecallTurn(index=i, key=f"t{i}", text=text) for i, text in enumerate(texts)]
    ranked = LexicalTurnRecaller().rank("ＲＴ２０２４０５０１到哪了？", turns, limit=3)
    assert ranked and ranked[0][0] == 4
