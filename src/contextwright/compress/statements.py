"""What a conversation's messages state, read by rule: the reading both summarisers share.

A message's sentences, and whether it says more than a greeting or small talk (in any language:
a short greeting-shaped first message is no need of its own); a one-line clip of it that is never
cut inside an exact fact; the exact facts of messages (``facts_of_messages``); whether a user
corrects something said before (``is_correction``); and the user's own statements a summary keeps
in their words — the constraints that hold for the whole conversation and the values a
correction replaced (``user_statements``). ``summarize`` and ``summary_llm`` build on it; its names
stay importable from ``summarize``.

Pure functions of their input; no I/O, no model.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from contextwright.analysis import HAN, cjk_class, is_cjk_char
from contextwright.compress.facts import (
    extract_facts,
    fact_key,
    fact_kind,
    inside_facts,
    looks_like_fence_marker,
    without_framing,
)
from contextwright.core.fence import language_of
from contextwright.core.items import Message
from contextwright.tokens._base import whole_clusters

if TYPE_CHECKING:
    from contextwright.compress.summarize import Summary

__all__ = ["MAX_CONSTRAINTS", "facts_of_messages", "is_correction", "user_statements"]

# ----- greetings, sentences, clipping ---------------------------------------------------------

_CLIP = 120

# Greetings of other languages, as a whole message or in front of one ("¡Hola! Quiero…"). Those
# of scripts written without spaces may run straight on ("สวัสดีครับผมต้องการ…").
_SPACED_GREETINGS = (
    "hola|buenos días|buenas tardes|buenas noches|buenas|hallo|guten (?:tag|morgen|abend)|moin|"
    "servus|grüß gott|grüezi|bonjour|bonsoir|salut|coucou|ciao|buongiorno|buonasera|olá|"
    "bom dia|boa tarde|boa noite|hej|hei|hoi|goedemorgen|goedendag|ahoj|cześć|dzień dobry|"
    "merhaba|selam|xin chào|chào|привет|здравствуйте|здравствуй|здрасьте|добрый (?:день|вечер)|"
    "доброе утро|안녕하세요|안녕|여보세요|नमस्ते|नमस्कार|مرحبا|السلام عليكم|أهلا|שלום|"
    "γεια σας|γεια σου|γεια")
_UNSPACED_GREETINGS = ("こんにちは|こんばんは|おはようございます|おはよう|もしもし|"
                       "สวัสดี(?:ครับ|ค่ะ|คะ)?|哈囉|您好|你好")
# Acknowledgements and thanks of other languages: a message of only one says nothing new.
_ACKNOWLEDGEMENTS = (
    "はい|ええ|うん|わかりました|了解です|了解|承知しました|ありがとうございます|ありがとう|"
    "네|예|알겠습니다|좋아요|감사합니다|고맙습니다|хорошо|да|ладно|понятно|конечно|спасибо|"
    "sí|claro|vale|de acuerdo|gracias|gern|gerne|ja|genau|klar|danke|oui|d'accord|bien sûr|"
    "merci|certo|va bene|grazie|sim|obrigad[oa]|tak|dobrze|evet|tamam|धन्यवाद|شكرا|תודה|"
    "ขอบคุณ(?:ครับ|ค่ะ)?|cảm ơn|謝謝|好的呢")
_GREETING = re.compile(
    r"^[¡¿]?(?:你好|您好|嗨|哈喽|在吗|谢谢|多谢|好的|好|嗯|当然|是的|对|行|可以|收到|ok|okay|hi|hello|"
    r"hey|thanks|thank you|yes|no|sure|certainly|of course|great|" + _SPACED_GREETINGS + "|"
    + _UNSPACED_GREETINGS + "|" + _ACKNOWLEDGEMENTS + r")[\s!！。.,，、~？?]*$",
    re.IGNORECASE)


_SENTENCE_END = re.compile(r"(?<=[。！？；।॥])|(?<=[!?;؟])(?=\s|$)|(?<=\.)\s|\n")
"""Where a sentence ends: after CJK or Devanagari end punctuation, or after ASCII ``. ! ? ;``
(or the Arabic ``؟``) followed by white space (a ``?`` inside a URL ends nothing)."""


def _clip(text: str, limit: int = _CLIP) -> str:
    """One line: framing removed, whitespace collapsed, cut at a sentence end when long.

    Without a sentence end far enough in, it is cut between words, never inside an exact fact
    (``_cut_points``): "receipt 4471829930" loses the whole number, never its last digits, so
    no clipped value reads as another one (the facts line shows it whole). A text with no
    break between words that far in is cut between two characters as a reader sees them
    (grapheme clusters), still outside any fact.
    """
    flat = " ".join(without_framing(text).split())
    if len(flat) <= limit:
        return flat
    cut = 0
    for match in _SENTENCE_END.finditer(flat, 0, limit):
        cut = match.start()
    if cut >= limit // 3:
        return flat[:cut].strip()
    head = flat[:limit * 4]
    points = [p for p in _cut_points(head) if p <= limit - 1] or [
        p for p in _cut_points(head, anywhere=True) if p <= limit - 1]
    if not points:
        return _CUT_MARK
    return flat[:max(points)].rstrip(_CUT_TAIL) + _CUT_MARK


_CUT_MARK = "…"


_CUT_TAIL = " ,，;；:：、-"


def _cut_points(text: str, *, anywhere: bool = False) -> list[int]:
    """Where ``text`` may be cut: between words, never inside a fact ``extract_facts`` finds.

    Between words is at a space, next to a CJK character (Chinese has no spaces), or between
    two characters of a script written without spaces (Thai, Lao, Khmer, Burmese) where no
    mark joins them. ``anywhere``: between any two characters as a reader sees them.
    """
    inside = inside_facts(text)
    if anywhere:
        return [p for p in range(1, len(text)) if not inside[p] and _between_clusters(text, p)]
    return [p for p in range(1, len(text)) if not inside[p] and (
        text[p].isspace() or text[p - 1].isspace() or is_cjk_char(text[p - 1])
        or is_cjk_char(text[p])
        or (_unspaced(text[p - 1]) and _unspaced(text[p]) and _between_clusters(text, p)))]


# Scripts written without spaces between words, which have no CJK-like one-character words.
_UNSPACED = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff]")
_CLUSTER_REACH = 16
"""Characters either side of a cut that decide whether it splits a grapheme cluster."""


def _unspaced(char: str) -> bool:
    return _UNSPACED.match(char) is not None


def _between_clusters(text: str, at: int) -> bool:
    """Whether cutting ``text`` at ``at`` leaves every grapheme cluster whole."""
    start = max(at - _CLUSTER_REACH, 0)
    window = text[start:at + _CLUSTER_REACH]
    return len(whole_clusters(window, window[:at - start])) == at - start


_ASKS = re.compile(r"[?？]|[吗呢么][\s。！!]*$")


def _sentences(text: str) -> list[str]:
    flat = " ".join(text.split())
    return [s.strip() for s in _SENTENCE_END.split(flat) if s.strip()]


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    match = _SENTENCE_END.search(flat, 1)
    return _clip(flat[:match.start()] if match else flat)


_LEADING_GREETING = re.compile(
    r"^[¡¿]?(?:(?:你好|您好|嗨|哈喽|hi|hello|hey|good (?:morning|afternoon|evening)|"
    + _SPACED_GREETINGS + r")(?:\s+there)?[呀啊哈]?(?:[\s!！。.,，、~]+|(?=[" + cjk_class(HAN)
    + r"])|$)|(?:" + _UNSPACED_GREETINGS + r")[\s!！。.,，、~]*)",
    re.IGNORECASE)


# Small talk asks nothing of the agent: "how are you?" is not the user's need.
_SMALL_TALK = (r"(?:how are you(?: doing)?(?: today)?|how's it going|how is it going|what's up|"
               r"最近(?:怎么样|好吗|还好吗|如何)|还好吗|在吗|好久不见)")


_ONLY_SMALL_TALK = re.compile(r"^" + _SMALL_TALK + r"[\s!！。.,，~？?]*$", re.IGNORECASE)


_LEADING_SMALL_TALK = re.compile(r"^" + _SMALL_TALK + r"[!！。.,，~？?]+\s*(?=\S)",
                                 re.IGNORECASE)


def _without_pleasantries(text: str) -> str:
    """``text`` without a greeting and small talk in front ("Hi there, how are you? I…")."""
    rest = _LEADING_GREETING.sub("", text.strip(), count=1)
    return _LEADING_SMALL_TALK.sub("", rest, count=1)


def _need_of(text: str) -> str:
    """The request without a greeting in front ("你好我想…" → "我想…")."""
    return _clip(_without_pleasantries(text) or text)


_EXCLAMATION_TAIL = "!！。.~～…"


def _is_greeting_shaped(text: str) -> bool:
    """A short exclamation that may be a greeting no list here names ("Grüezi!", "Καλημέρα!").

    A word or two of letters, some outside ASCII and outside Chinese, ending in "!" or "." if
    in anything. A need said so gives way to the next request; English and Chinese greetings
    are known by name, so a short English or Chinese request stays the need.
    """
    flat = text.strip().lstrip("¡¿").rstrip(_EXCLAMATION_TAIL).strip()
    words = flat.split()
    return (0 < len(words) <= 2 and len(flat) <= 16
            and all(ch.isalpha() or unicodedata.category(ch)[0] == "M" or ch in "'’-"
                    for ch in "".join(words))
            and any(not ch.isascii() and not is_cjk_char(ch, HAN) for ch in flat))


def _is_substantive(text: str) -> bool:
    """Whether the message says more than a greeting or small talk."""
    flat = text.strip()
    if len(flat) < 2 or _GREETING.match(flat):
        return False
    rest = _LEADING_GREETING.sub("", flat, count=1)
    return bool(rest) and not (_GREETING.match(rest) or _ONLY_SMALL_TALK.match(rest))


# ----- exact facts of messages ----------------------------------------------------------------

def facts_of_messages(messages: Iterable[Message],
                      grounding: Iterable[Message] | None = None) -> tuple[str, ...]:
    """Exact facts of user, assistant and tool messages, tool-call arguments included.

    A value shaped like a fence marker that only the assistant wrote — in no user or tool
    message of ``grounding`` (default: ``messages``) — is left out: it is the library's own
    framing that the model copied back, not a fact of the conversation.
    """
    messages = list(messages)
    found: dict[str, str] = {}
    echoed: set[str] = set()
    for message in messages:
        if message.role == "system":
            continue  # instructions, not conversation: they are never summarised away
        texts = [message.content, *(call.arguments for call in message.tool_calls)]
        for text in texts:
            for fact in extract_facts(text):
                found.setdefault(fact_key(fact), fact)
                if message.role == "assistant" and looks_like_fence_marker(fact):
                    echoed.add(fact_key(fact))
    if echoed:
        echoed -= _grounded_keys(messages if grounding is None else grounding)
    return tuple(fact for key, fact in found.items() if key not in echoed)


def _grounded_keys(messages: Iterable[Message]) -> set[str]:
    """Fact keys of what users and tools wrote (what the model could have read, not made)."""
    return {fact_key(fact) for m in messages if m.role in ("user", "tool")
            for fact in extract_facts(m.content)}


# ----- what the user states: constraints, replaced values -------------------------------------

MAX_CONSTRAINTS = 12
"""User constraints kept without a cap (the newest); each is one clipped sentence."""


# English alternatives share one leading \b: a pattern tried branch by branch at every
# position costs several times more, and this runs on every message of every merge.
_CORRECTION = re.compile(
    r"\b(?:actually|correction|that'?s (?:wrong|not right|incorrect)|not\b.{1,40}\bbut|"
    r"i (?:meant|mean)\b(?!,)|should be|incorrect|(?:is|was|are|were) wrong\b(?! with)|"
    r"wrong (?:number|email|address|date|day|time|name|one|id|code|digits?|flight|order|card)|"
    r"mistaken|typos?|mistyped|misspoke|oops|my (?:bad|mistake)|scratch that|"
    r"disregard (?:that|my last)|forget what i (?:said|wrote))\b|"
    r"[,，]\s*not\s+(?:the\s+|on\s+|at\s+|in\s+)?(?=(?-i:[A-Z0-9$¥€£])|[a-z]+day\b)|"
    r"不对|错了|说错|搞错|弄错|打错|写错|输错|记错|填错|口误|笔误|不是[^，,。！？!?]{1,30}(?:而|[，,]\s*)是|"
    r"更正|纠正|应该是|其实是|我是说|我的意思是", re.IGNORECASE)


_CHANGE_REQUEST = re.compile(
    r"\b(?:instead|(?:change|switch|move|update|push|bump|reschedule) (?:it|that|this|"
    r"(?:the|my) \w+)(?: \w+)? to)\b|(?:^|[.!?,]\s*)make it\b(?! to\b| work\b| happen\b)|"
    r"改成|改为|换成|改到|换到|挪到|调到|推迟到|提前到|延后到|改在", re.IGNORECASE)
"""A user asking for a value to be changed ("地址改成…", "make it 9pm instead") corrects it; an
assistant saying so ("已改为…", "I moved it to 9pm instead") only confirms the change."""


def is_correction(text: str) -> bool:
    """Whether a user's message corrects or changes something said before.

    "Actually …", "Sorry, typo: 8:30pm, not 7:30pm", "Make it Tuesday instead", "I mean
    Tuesday", "Scratch that…", "My email is wrong, use …", "不是7:30pm，是8:30pm", "换到周二吧".
    """
    return bool(_CORRECTION.search(text) or _CHANGE_REQUEST.search(text))


# A user statement of something that must or must not hold for the rest of the conversation:
# a condition (allergy, diet, disability), a limit (budget, at most, only), a rule ("never …",
# "don't …", "make sure …") or a preference. Kept whatever else the message does.
_CONSTRAINT = re.compile(
    r"\b(?:allerg(?:ic|y|ies)|intoleran(?:t|ce)|vegetarian|vegan|halal|kosher|pescatarian|"
    r"gluten[- ]free|dairy[- ]free|lactose|celiac|coeliac|diabetic|pregnant|wheelchair|"
    r"disabled|disability|teetotal|keep in mind|remember that|for the record|"
    r"(?:i|we)(?: really| absolutely)? (?:can(?:'|’)?t|cannot|can not|don(?:'|’)?t|do not|never|"
    r"won(?:'|’)?t|will not|must not|mustn(?:'|’)?t) (?:eat|drink|take|use|fly|travel|walk|"
    r"afford|stand|tolerate|want|like|need|do|go|sit|pay|stay|work|smoke|handle)|"
    r"(?:i|we)(?:'d| would)? (?:always|only|prefer|rather|hate|dislike|need to avoid)|"
    r"(?:must|has to|have to|needs to) (?:be|include|arrive|leave|depart|stay|avoid)|"
    r"(?:must|has to|have to|needs to) have(?! (?:been|left|lost|forgot\w*|\w+ed)\b)|"
    r"no more than|no later than|no earlier than|not (?:more|later|earlier) than|at most|"
    r"at least|budget|maximum|minimum)\b|"
    r"^(?:please\s+)?(?:don(?:'|’)?t|do not|never|avoid|only|always|make sure)\b|"
    r"过敏|忌口|吃素|素食|不吃|不喝|清真|怀孕|孕妇|糖尿病|不耐受|轮椅|行动不便|"
    r"(?<!要)不要|别给|千万别|一定要|必须|务必|只要|只能|只吃|只喝|只坐|只订|只住|(?<![能可])不能|不想|"
    r"预算|不超过|最多|至少|以内|偏好|更喜欢|讨厌|受不了|记住|记得|注意", re.IGNORECASE)


# A value right after one of these is the one a correction replaces: "8:30pm, not 7:30pm",
# "May 7 instead of May 6", "from 7:30pm to 8:30pm", "不是7:30pm，是8:30pm".
_OLD_VALUE_BEFORE = re.compile(
    r"(?:\bnot|\binstead of|\brather than|\bfrom|\bwas|\bwere|"
    r"不是|而非|而不是|原来是|原先是|之前是|从)\s*(?:the |on |at |for |to |是)?\s*$", re.IGNORECASE)


_IDENTIFIER_KINDS = frozenset(("id", "code", "number"))


def user_statements(previous: Summary, messages: Sequence[Message],
                    need: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The user's constraints and the replaced values, ``previous``'s merged with the new ones.

    Read by rule from the user's own messages, for either summariser: a constraint is kept in
    the user's words (``need`` already holding it whole, it is not repeated), and a correction
    that names a new value of the same kind as a fact said before supersedes that fact.
    """
    constraints = list(previous.constraints)
    superseded = list(previous.superseded)
    seen: dict[str, str] = {fact_key(f): f for f in previous.facts}
    recent: list[str] = []  # facts since the last user message, that message included
    for message in messages:
        if message.role == "system":
            continue
        facts = facts_of_messages([message])
        if message.role == "user" and _is_substantive(message.content):
            constraints += [c for c in _constraints_of(message.content) if c not in need]
            if is_correction(message.content):
                pairs, named = _replaced_values(message.content, facts, recent, seen)
                # A value the correction names as holding is not stale (any more), and a value
                # replaced again is replaced by the newest.
                gone = named | {fact_key(old) for old, _ in pairs}
                superseded = [p for p in superseded if fact_key(p[0]) not in gone] + pairs
            recent = []
        recent += facts
        for fact in facts:
            seen.setdefault(fact_key(fact), fact)
    return tuple(dict.fromkeys(constraints))[-MAX_CONSTRAINTS:], tuple(superseded)


def _constraints_of(content: str) -> list[str]:
    """The sentences of a user's message that state a constraint, clipped.

    A sentence that asks keeps only its clauses that state one ("I'm allergic to peanuts, what
    can I snack on?" keeps the allergy).
    """
    if not _CONSTRAINT.search(content):
        return []  # most messages: one search, no sentence split
    found = []
    for sentence in _sentences(content):
        if not _CONSTRAINT.search(sentence):
            continue
        if _ASKS.search(sentence):
            clauses = [c for c in _CLAUSE.split(sentence)
                       if _CONSTRAINT.search(c) and not _ASKS.search(c)]
            sentence = "，".join(clauses) if language_of(sentence) == "zh" else ", ".join(
                clauses)
        if _is_substantive(sentence):
            found.append(_clip(sentence))
    return found


_CLAUSE = re.compile(r"\s*[,，;；]\s*")


def _replaced_values(correction: str, facts: Sequence[str], recent: Sequence[str],
                     seen: Mapping[str, str]) -> tuple[list[tuple[str, str]], set[str]]:
    """Pairs ``(old, new)`` of the values ``correction`` replaces, and the keys it holds.

    The keys are those of every value it names but the old ones. The old value is the one the
    correction names after "not", "instead of", "不是"…; failing that, the only fact of the
    same kind (an id of the same shape) in the round before, or else in everything said
    before. Two candidates and none is marked: a wrong mark would call a value that holds
    stale. A value said before ("…, and the card is still 4242") is restated, not new, unless
    the correction names what it replaces ("7:30pm after all, not 8:30pm").
    """
    olds = [f for f in facts if _OLD_VALUE_BEFORE.search(correction[:max(correction.find(f), 0)])]
    news = [f for f in facts if f not in olds]
    keys = {fact_key(f) for f in facts}
    earlier = [f for key, f in seen.items() if key not in keys]
    pairs = []
    for new in news:
        group = _value_group(new)
        if not group:
            continue
        restated = fact_key(new) in seen
        for pool in (olds, [] if restated else [f for f in recent if fact_key(f) not in keys],
                     [] if restated else earlier):
            same = list(dict.fromkeys(f for f in pool if _value_group(f) == group))
            if same:
                if len(same) == 1:
                    pairs.append((same[0], new))
                break
    return pairs, {fact_key(f) for f in news}


def _value_group(fact: str) -> str:
    """What a fact must share with another to replace it: its kind, and for ids their shape."""
    kind = fact_kind(fact)
    if kind not in _IDENTIFIER_KINDS:
        return kind
    shape = re.sub(r"[A-Za-z]", "a", re.sub(r"\d", "9", fact_key(fact)))
    return f"id:{shape}"
