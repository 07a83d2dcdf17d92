"""Every script makes terms: a question in any language finds the turn, passage or paragraph
that answers it, and English terms stay what they were."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright.analysis import ENGLISH_STOPWORDS, analyzer, light_stem
from contextwright.core.cutting import cut_around_keywords, query_keywords
from contextwright.recall import LexicalTurnRecaller, RecallTurn
from contextwright.recall.dates import WHEN, turn_date_terms
from contextwright.retrieval import Retriever, SourceDocument
from contextwright.retrieval.text import search_tokens
from contextwright.tokens import get_tokenizer

TOKENIZER = get_tokenizer("o200k_base")

# (a fact told once, the question about it later, filler said in between), per language.
CONVERSATIONS = {
    "ko": ("우리 강아지 이름은 초코예요.", "강아지 이름이 뭐였죠?", "오늘 회의는 길었어요."),
    "ru": ("Нашу собаку зовут Барсик.", "Как зовут собаку?", "Сегодня было долгое совещание."),
    "el": ("Ο σκύλος μας λέγεται Μπάρμπας.", "Πώς λέγεται ο σκύλος;",
           "Σήμερα η σύσκεψη ήταν μεγάλη."),
    "ar": ("اسم كلبنا بارسيك.", "ما اسم كلبنا؟", "كان الاجتماع طويلا اليوم."),
    "he": ("לכלב שלנו קוראים ברסיק.", "איך קוראים לכלב שלנו?", "הפגישה היום הייתה ארוכה."),
    "hi": ("हमारे कुत्ते का नाम बार्सिक है।", "कुत्ते का नाम क्या है?", "आज की बैठक लंबी थी।"),
    "bn": ("আমাদের কুকুরের নাম বারসিক।", "কুকুরের নাম কী?", "আজকের মিটিং লম্বা ছিল।"),
    "ta": ("எங்கள் நாயின் பெயர் பார்சிக்.", "நாயின் பெயர் என்ன?", "இன்றைய கூட்டம் நீண்டது."),
    "th": ("สุนัขของเราชื่อบาร์ซิก", "สุนัขชื่ออะไรนะ", "วันนี้ประชุมนานมาก"),
    "lo": ("ໝາຂອງພວກເຮົາຊື່ບາຊິກ", "ໝາຊື່ຫຍັງ", "ມື້ນີ້ປະຊຸມດົນຫຼາຍ"),
    "km": ("ឆ្កែរបស់យើងឈ្មោះបាស៊ីក", "ឆ្កែឈ្មោះអ្វី", "ការប្រជុំថ្ងៃនេះយូរណាស់"),
    "my": ("ကျွန်ုပ်တို့ခွေးနာမည်ဘာစစ်", "ခွေးနာမည်ဘာလဲ", "ဒီနေ့အစည်းအဝေးကြာတယ်"),
    "ja": ("うちのワンちゃんはポチという名前です。", "ワンちゃんの名前は何だっけ？",
           "今日の会議は長かったです。"),
    "vi": ("Con chó của chúng tôi tên là Bánh Mì.", "Con chó tên là gì?",
           "Hôm nay cuộc họp kéo dài."),
    "fr": ("Notre chienne s'appelle Église.", "Comment s'appelle la chienne ?",
           "La réunion était très longue aujourd'hui."),
}


@pytest.mark.parametrize("lang", sorted(CONVERSATIONS))
@pytest.mark.parametrize("name", ["recall", "cutting", "search"])
def test_a_question_in_any_script_shares_terms_with_its_answer(name: str, lang: str) -> None:
    fact, question, filler = CONVERSATIONS[lang]
    terms = analyzer(name).term_set
    assert terms(question), f"{lang}: the question makes no terms"
    assert terms(question) & terms(fact), f"{lang}: the question shares no term with its answer"
    assert len(terms(question) & terms(filler)) < len(terms(question) & terms(fact))


@pytest.mark.parametrize("lang", sorted(CONVERSATIONS))
def test_history_recall_finds_the_turn_in_any_script(lang: str) -> None:
    fact, question, filler = CONVERSATIONS[lang]
    texts = [filler] * 30
    texts[3] = fact
    turns = [RecallTurn(index=i, key=f"t{i}", text=text) for i, text in enumerate(texts)]
    ranked = LexicalTurnRecaller().rank(question, turns, limit=3)
    assert ranked and ranked[0][0] == 3


def test_indic_words_keep_their_vowel_signs() -> None:
    for name in ("recall", "search", "cutting"):
        assert analyzer(name).terms("किताब की वापसी नीति") == ["किताब", "की", "वापसी", "नीति"]
        assert analyzer(name).terms("চট্টগ্রাম বন্দর") == ["চট্টগ্রাম", "বন্দর"]


def test_accented_latin_words_stay_whole() -> None:
    assert analyzer("recall").terms("café naïve résumé Paraíba") == [
        "café", "naïve", "résumé", "paraíba"]
    assert query_keywords("Où est le café ?") >= {"café"}


def test_thai_is_cut_into_pairs_of_letters_with_their_marks() -> None:
    terms = search_tokens("คืนเงินภายในกี่วัน")
    assert "คืน" in terms and "วัน" in terms
    assert all(not unicodedata.category(term[0]).startswith("M") for term in terms)
    assert all(len(term) > 1 for term in terms), "no lone consonant is a term"


def test_korean_particles_do_not_hide_the_word() -> None:
    question = analyzer("recall").term_set("서울 날씨")
    assert question and question <= analyzer("recall").term_set("서울의 날씨는 맑아요")


def test_composed_and_decomposed_text_make_the_same_terms() -> None:
    typed = "Tiếng Việt, café"
    decomposed = unicodedata.normalize("NFD", typed)
    assert decomposed != typed
    for name in ("recall", "search", "cutting"):
        assert analyzer(name).terms(decomposed) == analyzer(name).terms(typed)


def test_optional_points_and_stress_marks_do_not_split_a_word_from_itself() -> None:
    recall = analyzer("recall")
    assert recall.terms("שָׁלוֹם") == recall.terms("שלום") == ["שלום"]
    assert recall.terms("السَّلَامُ عَلَيْكُمْ") == recall.terms("السلام عليكم") == ["السلام", "عليكم"]
    assert recall.terms("Па́вел") == recall.terms("Павел") == ["павел"]


def test_retrieval_keeps_unrelated_indic_and_thai_passages_out() -> None:
    documents = {
        "hi": ["रिफंड नीति: सामान लौटाने के 7 दिनों के भीतर पैसा वापस मिलेगा।",
               "शिपिंग: ऑर्डर दो से तीन कार्यदिवस में भेजा जाता है।",
               "करियर: हमारी कंपनी में इंजीनियर के लिए नौकरियाँ खुली हैं।"],
        "th": ["นโยบายการคืนเงิน: คืนเงินภายใน 7 วันหลังจากได้รับสินค้าคืน",
               "การจัดส่ง: สินค้าจะถูกจัดส่งภายในสองถึงสามวันทำการ",
               "ร่วมงานกับเรา: บริษัทเปิดรับสมัครวิศวกรและนักออกแบบ"],
    }
    questions = {"hi": ("रिफंड कितने दिनों में मिलेगा?", "मैं अपना पासवर्ड कैसे बदलूँ?"),
                 "th": ("คืนเงินภายในกี่วัน", "ฉันจะเปลี่ยนรหัสผ่านได้อย่างไร")}
    for lang, texts in documents.items():
        retriever = Retriever()
        retriever.add([SourceDocument(id=f"d{i}", text=text) for i, text in enumerate(texts)])
        covered, uncovered = questions[lang]
        assert [hit.doc_id for hit in retriever.search(covered)][:1] == ["d0"]
        assert retriever.search(uncovered) == [], f"{lang}: an unrelated passage matched"


def test_a_cut_centres_on_the_paragraph_a_russian_question_is_about() -> None:
    paragraphs = ["Сегодня мы обсуждали планы на отпуск и погоду в горах." for _ in range(6)]
    paragraphs[4] = "Пароль от домашнего роутера записан на обратной стороне коробки."
    kept = cut_around_keywords("\n\n".join(paragraphs), "Где записан пароль от роутера?", 30,
                               TOKENIZER)
    assert "Пароль от домашнего роутера" in kept


_OLD_RECALL_WORDS = re.compile(r"[a-z0-9_\-]{2,}")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80))
def test_english_text_makes_the_terms_it_always_made(text: str) -> None:
    """Guard: ASCII text keeps its terms under the words of any script (stored indexes and
    tuned rankings rest on them)."""
    before = [light_stem(word) for word in _OLD_RECALL_WORDS.findall(text.lower())
              if word not in ENGLISH_STOPWORDS and word != "_"]
    assert analyzer("recall").terms(text) == before


@pytest.mark.parametrize("text", [
    "他是个聪明天才", "过去年代的歌", "日本周边游很热门", "目前天气不错", "晚上周围很安静",
    "我们等一下周报", "基本月薪很低"])
def test_chinese_time_words_inside_other_words_date_nothing(text: str) -> None:
    terms = turn_date_terms(text, "2024-12-10T10:00:00")
    assert terms == ["@d2024-12-10", "@m2024-12", "@y2024", "@mon12"]


@pytest.mark.parametrize(("text", "expected"), [
    ("我明天去北京", "@d2024-12-11"),
    ("他说明天来", "@d2024-12-11"),
    ("明天下午见", "@d2024-12-11"),
    ("今天天气不错", WHEN),
    ("本周末去爬山", WHEN),
    ("下周到货", "@m2024-12"),
    ("去年年底搬的家", "@y2023"),
    ("至今天为止", WHEN),
])
def test_chinese_time_words_standing_alone_still_date_the_turn(text: str, expected: str) -> None:
    assert expected in turn_date_terms(text, "2024-12-10T10:00:00")
