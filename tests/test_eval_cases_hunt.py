"""Edge cases of ``eval cases``: text in other scripts, baselines, and the files it reads."""

from __future__ import annotations

from contextwright import ContextBuilder, Request
from contextwright.evaluate.case_metrics import Checks, Wanted, measure, sentences

COUNT = ContextBuilder(tokenizer="o200k_base").tokenizer.count


# --- noise in scripts that write no space after a sentence -----------------------------------


def test_sentences_split_chinese_and_japanese_text_without_spaces() -> None:
    text = "上海今天的天气是多云，气温二十五度左右。明天上海会下大雨，请大家记得带伞出门！"
    assert sentences(text) == ["上海今天的天气是多云，气温二十五度左右。",
                               "明天上海会下大雨，请大家记得带伞出门！"]
    assert sentences("The gym opens at seven every day.Then it shuts.") == [
        "The gym opens at seven every day.Then it shuts."]  # "e.g.x" stays whole in Latin text


def test_noise_counts_a_shown_sentence_of_a_cut_chinese_message() -> None:
    shown = "明天上海会下大雨，请大家记得带伞出门！"
    text = "上海今天的天气是多云，气温二十五度左右。" + shown
    request = Request(user_input="q", history=[{"role": "user", "content": text, "id": "n"},
                                               {"role": "assistant", "content": "ok"}])
    rendered = [{"role": "user", "content": shown}, {"role": "user", "content": "q"}]
    result = measure(request, Checks(noise=Wanted(messages=("n",))), rendered, [], COUNT)
    assert result.noise_tokens == COUNT(shown)
    assert result.noise_shown == ("message n",)
