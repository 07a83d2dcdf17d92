"""Text in every script is counted, written and cut as its readers see it.

The ``estimate`` tokenizer errs high for each script (it stands in for a model whose tokenizer
is unknown, so counting low would let a build run past the window), while its English and
Chinese estimates stay what they were.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.compress.tool_results import (
    dropped_tool_result,
    one_line_tool_result,
    reduce_tool_result,
)
from contextwright.core.cutting import _Counts, _kept, _pieces, _Text
from contextwright.core.digest import DigestCost
from contextwright.core.fence import language_of, short_label
from contextwright.core.gather import Costing
from contextwright.sources.history_digest import omitted_digest
from contextwright.tokens import get_tokenizer
from contextwright.tokens._base import whole_clusters
from contextwright.tokens._estimate import estimate_from_parts, estimate_parts, estimate_tokens

# Sentences written for these tests: a shopping errand, a support request, chat.
SENTENCES = {
    "russian": "Сегодня утром я пошёл в магазин, чтобы купить хлеб, молоко и несколько яблок "
               "на выходные. Номер заказа A1B2C3, доставка ожидается в пятницу.",
    "ukrainian": "Будь ласка, перевірте, чи правильно вказана адреса доставки, бо посилка досі "
                 "не прийшла.",
    "kazakh": "Бүгін таңертең мен дүкенге нан мен сүт сатып алуға бардым. Тапсырыс нөмірі "
              "A1B2C3.",
    "mongolian": "Өнөө өглөө би дэлгүүрт талх, сүү авахаар очсон. Захиалгын дугаар A1B2C3.",
    "greek": "Σήμερα το πρωί πήγα στο μαγαζί να αγοράσω ψωμί, γάλα και μερικά μήλα για το "
             "Σαββατοκύριακο. Ο αριθμός παραγγελίας είναι A1B2C3.",
    "arabic": "من فضلك تحقق من حالة طلبي، فقد وعد المندوب بالاتصال قبل الظهر "
              "لكنه لم يتصل حتى الآن.",
    "arabic with harakat": "ذَهَبْتُ هٰذَا الصَّبَاحَ إِلَى المَتْجَرِ لِشِرَاءِ الخُبْزِ وَالحَلِيبِ.",
    "persian": "امروز صبح به فروشگاه رفتم تا برای آخر هفته نان، شیر و چند سیب بخرم.",
    "urdu": "براہ کرم میرے آرڈر کی صورتحال چیک کریں، کورئیر نے دوپہر سے پہلے "
            "فون کرنے کا وعدہ کیا تھا۔",
    "hebrew": "הבוקר הלכתי לחנות לקנות לחם, חלב וכמה תפוחים לסוף השבוע. מספר ההזמנה הוא A1B2C3.",
    "hebrew with points": "בְּרֵאשִׁית בָּרָא אֱלֹהִים אֵת הַשָּׁמַיִם וְאֵת הָאָרֶץ",
    "hindi": "कृपया मेरे ऑर्डर की स्थिति जाँचें, कूरियर ने दोपहर से पहले फ़ोन करने का वादा किया "
             "था लेकिन अभी तक कॉल नहीं आया।",
    "sanskrit": "धर्मक्षेत्रे कुरुक्षेत्रे समवेता युयुत्सवः। मामकाः पाण्डवाश्चैव किमकुर्वत सञ्जय॥",
    "bengali": "দয়া করে আমার অর্ডারের অবস্থা দেখুন, কুরিয়ার দুপুরের আগে ফোন করবে বলেছিল।",
    "tamil": "தயவுசெய்து என் ஆர்டரின் நிலையைச் சரிபார்க்கவும், கூரியர் மதியத்திற்கு முன் "
             "அழைப்பதாகச் சொன்னார்.",
    "telugu": "ఈ రోజు ఉదయం వారాంతం కోసం రొట్టె, పాలు మరియు కొన్ని ఆపిల్స్ కొనడానికి దుకాణానికి "
              "వెళ్ళాను.",
    "gujarati": "આજે સવારે હું સપ્તાહના અંત માટે બ્રેડ, દૂધ અને થોડા સફરજન ખરીદવા દુકાને ગયો.",
    "odia": "ଆଜି ସକାଳେ ମୁଁ ସପ୍ତାହାନ୍ତ ପାଇଁ ରୁଟି, କ୍ଷୀର ଓ କିଛି ସେଓ କିଣିବାକୁ ଦୋକାନକୁ ଗଲି।",
    "sinhala": "අද උදේ මම සති අන්තය සඳහා පාන්, කිරි සහ ඇපල් කිහිපයක් මිලදී ගැනීමට කඩයට ගියෙමි.",
    "thai": "กรุณาตรวจสอบสถานะคำสั่งซื้อของฉัน พนักงานส่งของสัญญาว่าจะโทรมาก่อนเที่ยงแต่ยังไม่ได้โทรมาเลย",
    "lao": "ເຊົ້ານີ້ຂ້ອຍໄປຮ້ານເພື່ອຊື້ເຂົ້າຈີ່ ນົມ ແລະ ໝາກແອັບເປີ້ນຈຳນວນໜຶ່ງສຳລັບທ້າຍອາທິດ",
    "khmer": "ព្រឹកនេះខ្ញុំបានទៅហាងដើម្បីទិញនំបុ័ង ទឹកដោះគោ និងផ្លែប៉ោមមួយចំនួនសម្រាប់ចុងសប្តាហ៍",
    "burmese": "ဒီနေ့မနက် ကျွန်တော် စနေတနင်္ဂနွေအတွက် ပေါင်မုန့်၊ နို့နဲ့ ပန်းသီးအနည်းငယ် ဝယ်ဖို့ "
               "ဆိုင်ကို သွားခဲ့တယ်။",
    "tibetan": "དེ་རིང་ཞོགས་པ་ང་ཚོང་ཁང་ལ་བག་ལེབ་དང་འོ་མ་ཉོ་བར་ཕྱིན།",
    "georgian": "გთხოვთ, შეამოწმოთ ჩემი შეკვეთის სტატუსი, კურიერმა შუადღემდე დარეკვა დამპირდა.",
    "armenian": "Խնդրում եմ ստուգել իմ պատվերի կարգավիճակը, առաքիչը խոստացել էր զանգահարել "
                "մինչև կեսօր։",
    "amharic": "እባክዎን የትዕዛዜን ሁኔታ ያረጋግጡ፣ አድራሹ ከቀትር በፊት እንደሚደውል ቃል ገብቶ ነበር።",
    "korean": "오늘 공원에서 산책했는데 날씨가 정말 좋았어요. 강아지도 신나서 뛰어다녔어요.",
    "korean chat": "ㅋㅋㅋ 진짜? 나도 어제 그 영화 봤는데 완전 재밌더라 ㅎㅎ",
    "japanese kana": "きょうはこうえんでさんぽしました。いぬもうれしそうにはしりまわっていました。",
    "vietnamese": "Vui lòng kiểm tra trạng thái đơn hàng của tôi, người giao hàng hứa sẽ gọi "
                  "trước buổi trưa nhưng vẫn chưa gọi.",
    "yoruba": "Ní àárọ̀ yìí, mo lọ sí ṣọ́ọ̀bù láti ra búrẹ́dì, wàrà àti àwọn èso ápù díẹ̀.",
    "combining accents": "Ce matin, je suis alle\u0301 au cafe\u0301 pre\u0300s de l'e\u0301cole.",
    "stacked marks": "z\u0338\u0322\u031ba\u0337\u0327\u035dl\u0335\u0328\u031bg\u0336\u0321"
                     "\u0360o\u0334\u0322\u0358",
    "mathematics": "∀x ∈ ℝ: x² ≥ 0 ⇒ √(x²) = |x| ≈ 3.14 → ∞ ≠ ∅ ∑ ∫ ∂ ∇ ⊂ ⊆ ∪ ∩ ≤ ≥ ± × ÷",
    "symbols": "✓ done ✗ failed → next ★★★☆☆ ♥ ☎ ✉ ☀ ☂ ♫ € £ ¥ © ® ™ § ¶ • … «guillemets»",
    "box drawing": "┌──────┬──────┐\n│ name │ qty  │\n├──────┼──────┤\n│ milk │ 2    │\n"
                   "└──────┴──────┘",
    "code with a russian comment": "def get_user(id):\n    # Получить пользователя по "
                                   "идентификатору\n    return db.query(User).get(id)",
    "hindi mixed with english": "मेरा order ID A1B2C3 है, delivery कब तक होगी? Please जल्दी बताइए।",
}


@pytest.mark.parametrize("name", sorted(SENTENCES))
def test_the_estimate_is_at_least_both_openai_counts_in_every_script(name: str) -> None:
    text = SENTENCES[name]
    for repeat in (1, 20):
        sample = (text + "\n") * repeat
        real = max(get_tokenizer(encoding).count(sample)
                   for encoding in ("o200k_base", "cl100k_base"))
        assert get_tokenizer("estimate").count(sample) >= real


@pytest.mark.parametrize(("text", "estimate"), [
    ("The quick brown fox jumps over the lazy dog. " * 100, 1125),
    ("上下文工程管的是这一整坨东西怎么组织、怎么裁剪、怎么排序。" * 30, 870),
    ("他说：“订单 A1B2C3 明天到——别急……” 金额￥1,299.00，共3件。", 23),
    ("She said: “It’s fine — really…” and paid $1,299.00 for 3 items.", 16),
    ("\U0001f389 party " * 10, 48),
])
def test_english_and_chinese_estimates_are_what_they_were(text: str, estimate: int) -> None:
    assert estimate_tokens(text) == estimate


_MIXED = st.text(alphabet=st.sampled_from(
    "ab \n。中한글кирΣαעבربहिंथา\u0301\u200d€✓─\U0001f600ệ" + "".join(SENTENCES["kazakh"][:8])),
    max_size=40)


@given(pieces=st.lists(_MIXED, max_size=6))
def test_estimate_parts_add_up_over_a_concatenation(pieces: list[str]) -> None:
    total = [0, 0, 0]
    for piece in pieces:
        total = [sum(pair) for pair in zip(total, estimate_parts(piece), strict=True)]
    whole = "".join(pieces)
    assert tuple(total) == estimate_parts(whole)
    assert estimate_from_parts(*total) == estimate_tokens(whole)


def test_a_span_of_any_script_counted_by_running_parts_is_counted_as_the_whole() -> None:
    tokenizer = get_tokenizer("estimate")
    rng = random.Random("scripts")
    lines = [text for text in SENTENCES.values() if "\n" not in text]
    text = "\n".join(rng.choice(lines) for _ in range(60))
    spans = _pieces(text)
    cut = _Text(text, False, spans, [0] * len(spans))
    counts = _Counts(cut, tokenizer)
    for _ in range(200):
        low, high = sorted((rng.randrange(len(spans)), rng.randrange(len(spans))))
        whole = tokenizer.count(_kept(cut, low, high))
        assert counts.kept(low, high) == whole
        assert counts.fits(low, high, whole) and not counts.fits(low, high, whole - 1)


# --- the command line writes UTF-8 whatever the console's encoding ---------------------------

_CLI = [sys.executable, "-c", "from contextwright.cli import main; main()"]
_ASKED = "我的订单 ＡＢ１２ 到哪儿了？👋 Ελληνικά, ありがとう"
_REQUEST = {"system": "你是客服助手。", "user_input": _ASKED,
            "history": [{"role": "user", "content": "你好 🙂"},
                        {"role": "assistant", "content": "您好！请问有什么可以帮您？"}]}


def _run(args: list[str], encoding: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONIOENCODING": encoding}
    return subprocess.run([*_CLI, *args], capture_output=True, env=env, timeout=120, check=False)


@pytest.mark.parametrize("encoding", ["cp1252", "cp936", "ascii"])
@pytest.mark.parametrize("fmt", ["text", "openai"])
def test_build_writes_utf8_json_whatever_the_console_encoding(
        tmp_path: Path, encoding: str, fmt: str) -> None:
    request = tmp_path / "request.json"
    request.write_text(json.dumps(_REQUEST, ensure_ascii=False), "utf-8")
    completed = _run(["build", "--request", str(request), "--format", fmt], encoding)
    assert completed.returncode == 0, completed.stderr.decode("utf-8", "replace")
    output = json.loads(completed.stdout.decode("utf-8"))
    shown = json.dumps(output, ensure_ascii=False)
    assert _ASKED in shown and "你好 🙂" in shown


@pytest.mark.parametrize("encoding", ["cp1252", "cp936"])
def test_a_failure_naming_user_text_is_one_utf8_error_line(tmp_path: Path, encoding: str) -> None:
    missing = tmp_path / "请求 🙂.json"
    completed = _run(["build", "--request", str(missing)], encoding)
    assert completed.returncode == 2
    assert completed.stdout == b""
    lines = completed.stderr.decode("utf-8").splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "请求 🙂.json" in lines[0]


# --- cuts keep what a reader sees as one character whole -------------------------------------

_FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"
_CONJUNCT = "क्षत्रिय"


def _reduced_head(text: str) -> str:
    reduced = reduce_tool_result("track_order", text)
    return reduced.split(": ", 1)[1].split(" … ")[0]


@pytest.mark.parametrize("before", range(94, 101))
@pytest.mark.parametrize("joined", [_FAMILY, _CONJUNCT, "🇯🇵🇰🇷", "cafe\u0301"])
def test_a_reduced_tool_result_never_shows_part_of_a_character(before: int, joined: str) -> None:
    text = "x" * before + joined + " order ORD-5512 shipped " + "धन्यवाद " * 30
    head = _reduced_head(text)
    flat = " ".join(text.split())
    assert flat.startswith(head)
    assert whole_clusters(flat, head) == head  # the next character starts a new one


def test_a_reduced_tool_result_still_lists_the_facts_its_head_leaves_out() -> None:
    text = "x" * 96 + " ORD-5512 " + _FAMILY + " " + "शिपमेंट रवाना " * 20 + "ORD-7788"
    reduced = reduce_tool_result("track_order", text)
    assert "ORD-5512" in reduced and "ORD-7788" in reduced


@pytest.mark.parametrize("before", range(94, 100))
@pytest.mark.parametrize("joined", [_FAMILY, _CONJUNCT, "🇯🇵🇰🇷"])
def test_a_short_label_never_ends_in_part_of_a_character(before: int, joined: str) -> None:
    label = "x" * before + joined + " 退货政策"
    short = short_label(label, 100)
    assert len(short) <= 100 and short.endswith("…")
    kept = short[:-1]
    assert label.startswith(kept) and whole_clusters(label, kept) == kept


# --- labels and the library's own words follow the build's language --------------------------

@pytest.mark.parametrize(("text", "language"), [
    ("返品の期限は何日ですか？", "en"),                   # kanji and kana: Japanese
    ("ありがとう！ほかにもききたいことがあります", "en"),  # kana only
    ("東京タワーに行きたい", "en"),
    ("ｱﾘｶﾞﾄｳ 東京", "en"),                                # half-width katakana
    ("帮我查一下订单 ORD-2024-001", "zh"),
    ("我在读列夫・托尔斯泰的书", "zh"),                    # the katakana middle dot is no kana
    ("我要退货，订单号是 A1B2C3。", "zh"),
])
def test_text_with_kana_is_not_labelled_chinese(text: str, language: str) -> None:
    assert language_of(text) == language


def test_a_japanese_build_has_english_labels_every_call() -> None:
    builder = ContextBuilder()
    plan = BuildPlan.named("chat")
    renders = []
    for question in ("返品の期限は何日ですか？", "ありがとう！ほかにもききたいことがあります"):
        request = Request(user_input=question, system="サポート担当です。",
                          history=[{"role": "user", "content": "注文番号はA1B2C3です。"},
                                   {"role": "assistant", "content": "確認しました。"}])
        text = builder.build(plan, request, target="text").to_text()
        assert "=== System ===" in text and "系统" not in text
        again = builder.build(plan, request, target="text").to_text()
        renders.append(text)
        assert again == text
    assert renders[0].split("\n", 1)[0] == renders[1].split("\n", 1)[0]


_JSON_RESULT = '{"order": "A1B2C3", "eta": "2024-12-03", "note": "leave at the door"}'
_TEXT_RESULT = " ".join(f"Order ORD-{n:04d} shipped from the Hangzhou warehouse." for n in range(9))


def test_reduced_tool_results_say_their_own_words_in_english_as_before() -> None:
    assert reduce_tool_result("track", _JSON_RESULT) == (
        "Tool result (track), key facts: order: A1B2C3; eta: 2024-12-03")
    assert reduce_tool_result(None, "{}") == "Tool result, key facts: (none)"
    assert reduce_tool_result("track", _TEXT_RESULT).startswith(
        "Tool result (track), key facts: Order ORD-0000 shipped")
    assert one_line_tool_result("track", _JSON_RESULT) == (
        "Earlier tool result (track): A1B2C3 2024-12-03")
    assert one_line_tool_result(None, _TEXT_RESULT, 31) == (
        "Earlier tool result: ORD-0000 (+8 more)")
    assert dropped_tool_result(None) == "[earlier result of a tool omitted]"


def test_reduced_tool_results_say_their_own_words_in_chinese_in_a_chinese_build() -> None:
    assert reduce_tool_result("track", _JSON_RESULT, language="zh") == (
        "工具结果（track），关键事实: order: A1B2C3; eta: 2024-12-03")
    assert reduce_tool_result(None, "{}", language="zh") == "工具结果，关键事实: （无）"
    assert one_line_tool_result("track", _JSON_RESULT, language="zh") == (
        "较早的工具结果（track）: A1B2C3 2024-12-03")
    assert one_line_tool_result("track", _TEXT_RESULT, 28, language="zh") == (
        "较早的工具结果（track）: ORD-0000（另有 8 项）")
    assert dropped_tool_result("track", language="zh") == "[已省略track的较早结果]"
    with pytest.raises(ValueError, match="labels language"):
        reduce_tool_result("track", _JSON_RESULT, language="ja")


def _digest(language: str) -> str:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "我的订单号是 A1B2C3，寄到杭州。"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "track", "arguments": '{"order": "A1B2C3"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"eta": "2024-12-03"}'},
        {"role": "assistant", "content": "预计 2024-12-03 送达。"}]
    cost = DigestCost(Costing(get_tokenizer("o200k_base"), language), 2_001)
    item = omitted_digest(messages, "history", "", {}, [], 2_000, cost, language=language)
    assert item is not None
    return item.message.content


def test_a_digest_says_its_own_words_in_the_build_language() -> None:
    assert _digest("en") == (
        "Digest of 4 earlier message(s) left out for space: exact values first seen in them, "
        "not shown elsewhere.\n- user, history[0]: A1B2C3\n- tool track, history[2]: 2024-12-03")
    assert _digest("zh") == (
        "因篇幅省略了 4 条较早的消息，以下是其中首次出现、别处未显示的确切值。\n"
        "- 用户, history[0]: A1B2C3\n- 工具 track, history[2]: 2024-12-03")
