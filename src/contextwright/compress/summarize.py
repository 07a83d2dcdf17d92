"""Running summaries that never lose an exact fact.

A ``Summary`` keeps what a hand-over between modes needs — the user's original need, what the user
said must or must not hold, the confirmed key facts (a value a correction replaced marked so), what
is still open — plus conclusions marked as corrected and a few short notes. A
``Summarizer`` merges only the *new* messages into the previous summary; nothing is ever
re-summarised from the start. ``ExtractiveSummarizer`` does it offline by rules; ``LLMSummarizer``
(``summary_llm``) asks an OpenAI-compatible model for the same five fields as JSON and parses it
strictly; the user's constraints and the values a correction replaced are taken by rule in
both. ``verified`` runs either and refuses (``SummaryError``) a result that is empty or lost a
fact it had to keep, so a caller can keep the previous summary and the original messages.

No I/O of its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from contextwright.analysis import HAN, analyzer, cjk_class, is_cjk_char, split_identifiers
from contextwright.compress.facts import (
    extract_facts,
    fact_key,
    fact_kind,
    looks_like_fence_marker,
    missing_facts,
    without_framing,
)
from contextwright.core.fence import fenced_body, language_of
from contextwright.core.items import Message, reports_failure
from contextwright.errors import SummaryError
from contextwright.tokens import Tokenizer

__all__ = [
    "ExtractiveSummarizer",
    "Summarizer",
    "Summary",
    "capped_summary",
    "check_summary",
    "condense_for_handoff",
    "confirmed_facts",
    "detect_language",
    "facts_of_messages",
    "fit_summary",
    "is_correction",
    "verified",
]

MAX_NOTES = 12
"""Notes kept by the extractive summariser without a cap (the newest); they matter least."""
MAX_CONSTRAINTS = 12
"""User constraints kept without a cap (the newest); each is one clipped sentence."""
_CLIP = 120
_LABELS = {
    "en": ("Original need", "User constraints", "Key facts", "Unresolved", "Corrected", "Notes"),
    "zh": ("原始需求", "用户约束", "关键事实", "待解决", "已更正", "备注"),
}
_LIST_FIELDS = ("facts", "unresolved", "corrected", "notes")
"""The list fields a summary model writes (``constraints`` and ``superseded`` are kept by rule)."""
_SUPERSEDED_MARK = {"en": ("{old} (superseded by {new})", "{old} (now {new})"),
                    "zh": ("{old}（已由 {new} 取代）", "{old}（现为 {new}）")}
"""How a replaced value reads in the facts line and in the need."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """A running summary of the conversation older than the verbatim window."""

    need: str = ""
    """The user's original need: the first substantive request, kept across merges."""
    constraints: tuple[str, ...] = ()
    """What the user said must or must not hold, in their words, one sentence each (an allergy,
    a diet, a budget, "never …", "only …", a preference), oldest first: it holds for the whole
    conversation, so it is kept across merges (the newest ``MAX_CONSTRAINTS``)."""
    facts: tuple[str, ...] = ()
    """Confirmed key facts, exact strings as written (ids, numbers, addresses…), oldest first."""
    unresolved: tuple[str, ...] = ()
    """What is still open: unanswered questions, failed tool calls, pending problems."""
    corrected: tuple[str, ...] = ()
    """Conclusions that were corrected, as ``X (corrected: was Y)``."""
    notes: tuple[str, ...] = ()
    """Other short points worth keeping (assistant conclusions)."""
    superseded: tuple[tuple[str, str], ...] = ()
    """``(old, new)``: a listed fact a user's correction replaced by another value. Both stay
    in ``facts`` (exact, as said); the rendering marks the old one wherever it is shown."""
    truncated_facts: int = 0
    """How many older facts were left out, in total, to fit a token cap."""
    unconfirmed: tuple[str, ...] = ()
    """The facts of ``facts`` that only a tool printed (no one stood behind them), kept across
    merges so a cap still gives them up before what the user said merges ago. Not shown."""
    dropped: tuple[str, ...] = field(default=(), compare=False, repr=False)
    """The facts ``fit_summary`` gave up in the call that made this summary (not stored):
    ``verified`` excuses a lost required fact only when the cap itself dropped it."""

    def is_empty(self) -> bool:
        """True when the summary says nothing at all."""
        return not (self.need or self.constraints or self.facts or self.unresolved
                    or self.corrected or self.notes)

    def render(self, language: str = "en") -> str:
        """Labelled text, one line per non-empty part, labels in ``en``, ``zh`` or ``auto``.

        A fact a correction replaced reads "7:30pm (superseded by 8:30pm)" in the facts line
        and "7:30pm (now 8:30pm)" in the need, so no shown value passes for the current one.
        """
        lang = _language(language, self._text())
        need, constraints, facts, unresolved, corrected, notes = _LABELS[lang]
        sep = "；" if lang == "zh" else "; "
        current = _current_values(self.superseded)
        lines = [f"{need}: {_marked_need(self.need, current, lang)}"] if self.need else []
        for label, values in ((constraints, self.constraints),
                              (facts, _marked_facts(self.facts, current, lang)),
                              (unresolved, self.unresolved),
                              (corrected, self.corrected), (notes, self.notes)):
            if values:
                lines.append(f"{label}: {sep.join(values)}")
        if self.truncated_facts:
            lines.append(f"（另有 {self.truncated_facts} 条较早的事实未列出）" if lang == "zh"
                         else f"({self.truncated_facts} older facts left out)")
        return "\n".join(lines)

    def without_facts(self, shown: Iterable[str]) -> Summary:
        """This summary without the facts in ``shown`` (compared as ``fact_key``).

        For rendering it next to a text that already shows them, so each fact is shown once;
        the summary to store and merge into keeps them all.
        """
        keys = {fact_key(fact) for fact in shown}
        facts = tuple(fact for fact in self.facts if fact_key(fact) not in keys)
        return self if len(facts) == len(self.facts) else replace(self, facts=facts)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data for a store."""
        return {"need": self.need, "constraints": list(self.constraints),
                "facts": list(self.facts), "superseded": [list(p) for p in self.superseded],
                "unresolved": list(self.unresolved), "corrected": list(self.corrected),
                "notes": list(self.notes), "truncated_facts": self.truncated_facts,
                "unconfirmed": list(self.unconfirmed)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Summary:
        """Read ``to_dict``'s output back; ``SummaryError`` names a malformed field.

        A record stored before a field existed reads as that field empty.
        """
        if not isinstance(data, Mapping):
            raise SummaryError("a summary record must be an object")
        unknown = sorted(set(data) - {"need", "truncated_facts", "superseded", *_KEPT_LISTS})
        if unknown:
            raise SummaryError(f"unknown summary field: {unknown[0]}")
        need = data.get("need", "")
        truncated = data.get("truncated_facts", 0)
        if not isinstance(need, str):
            raise SummaryError("summary field need must be a string")
        if not isinstance(truncated, int) or isinstance(truncated, bool) or truncated < 0:
            raise SummaryError("summary field truncated_facts must be a non-negative integer")
        lists = {name: _strings(data.get(name, ()), name) for name in _KEPT_LISTS}
        return cls(need=need, truncated_facts=truncated,
                   superseded=_pairs(data.get("superseded", ())), **lists)

    def _text(self) -> str:
        return " ".join((self.need, *self.constraints, *self.facts, *self.unresolved,
                         *self.corrected, *self.notes))


_KEPT_LISTS = (*_LIST_FIELDS, "constraints", "unconfirmed")


def _strings(value: object, name: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise SummaryError(f"summary field {name} must be a list of strings")
    return tuple(value)


def _pairs(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list | tuple) or not all(
            isinstance(pair, list | tuple) and len(pair) == 2
            and all(isinstance(v, str) for v in pair) for pair in value):
        raise SummaryError("summary field superseded must be a list of [old, new] pairs")
    return tuple((old, new) for old, new in value)


def _current_values(superseded: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Each replaced fact (by ``fact_key``) to the value that holds now, chains followed."""
    new_of = {fact_key(old): new for old, new in superseded}
    current: dict[str, str] = {}
    if not new_of:
        return current
    for key, new in new_of.items():
        seen = {key}
        while fact_key(new) in new_of and fact_key(new) not in seen:
            seen.add(fact_key(new))
            new = new_of[fact_key(new)]
        if fact_key(new) != key:
            current[key] = new
    return current


def _marked_facts(facts: tuple[str, ...], current: Mapping[str, str],
                  lang: str) -> tuple[str, ...]:
    if not current:
        return facts
    mark = _SUPERSEDED_MARK[lang][0]
    return tuple(mark.format(old=f, new=current[fact_key(f)]) if fact_key(f) in current else f
                 for f in facts)


def _marked_need(need: str, current: Mapping[str, str], lang: str) -> str:
    """``need`` with each replaced value it names followed by the one that holds now."""
    if not current:
        return need
    mark = _SUPERSEDED_MARK[lang][1]
    for fact in extract_facts(need):
        if fact_key(fact) in current:
            need = need.replace(fact, mark.format(old=fact, new=current[fact_key(fact)]), 1)
    return need


class Summarizer(Protocol):
    """Merges new messages into the previous summary."""

    def summarize(self, previous: Summary | None, messages: Sequence[Message], *,
                  language: str, max_tokens: int | None = None,
                  tokenizer: Tokenizer | None = None) -> Summary:
        """The previous summary with ``messages`` (only those since it) merged in.

        ``language`` is ``en``, ``zh`` or ``auto``; with ``max_tokens`` the rendering must fit
        (counted with ``tokenizer``). Raises ``SummaryError`` when no summary can be made.
        """
        ...


# ----- language -----------------------------------------------------------------------------

detect_language = language_of
"""``zh`` or ``en`` for ``language="auto"``: the library's one rule (``core.fence.language_of``)."""


def _language(language: str, text: str) -> str:
    if language == "auto":
        return detect_language(text)
    if language not in _LABELS:
        raise SummaryError("language must be en, zh or auto")
    return language


# ----- what a message says ------------------------------------------------------------------

_GREETING = re.compile(
    r"^(?:你好|您好|嗨|哈喽|在吗|谢谢|多谢|好的|好|嗯|当然|是的|对|行|可以|收到|ok|okay|hi|hello|"
    r"hey|thanks|thank you|yes|no|sure|certainly|of course|great)[\s!！。.,，~？?]*$",
    re.IGNORECASE)
_QUESTION = re.compile(
    r"[?？]|[吗呢么][\s。！!]*$|怎么|如何|什么|多少|几[点天个号]|哪|是否|能否|能不能|可不可以|有没有|"
    r"帮我|请|麻烦|我想|我要|^(?:what|when|where|why|how|which|who|can|could|would|will|is|are|"
    r"do|does|did|please)\b|\b(?:please|help me|i want|i'd like|i need)\b", re.IGNORECASE)
# "Still" and "outstanding" open an item only where they say something is missing: "UA837 is
# still on time" and "your feedback was outstanding" leave nothing open.
_OPEN = re.compile(
    r"还没|尚未|仍未|未(?:收到|到|解决|处理|完成|发货|退款|更新|到账)|待(?:处理|确认|解决|定|办|发货)|"
    r"(?:仍然|依然|仍旧)(?:没|未|不|无|在等|卡|失败|报错|出错|有问题)|还是没|没有?收到|怎么还|一直没|"
    r"\bstill\s+(?:not|no|nothing|(?:has|have|is|are|was|were|do|does|did|can|could|wo)n[\'’]t|"
    r"cannot|waiting|pending|missing|broken|failing|down|stuck|unable|wrong|unpaid|unresolved|"
    r"open|the same (?:problem|issue|error))\b|"
    r"\bnot yet\b|\bpending\b|\bwaiting for\b|\bunresolved\b|"
    r"\boutstanding\s+(?:balance|amount|issues?|items?|payments?|invoices?|tasks?|requests?|"
    r"orders?|tickets?|bills?|charges?|debts?|questions?|problems?|fees?)\b|"
    r"\b(?:still|remains?|remained) outstanding\b|hasn't arrived|haven't (?:received|got)",
    re.IGNORECASE)
_RESOLVED = re.compile(
    r"解决了|已解决|搞定|好了|可以了|没问题了|收到了|已送达|已到账|已退款|已完成|\bresolved\b|"
    r"\bfixed\b|works now|got it|that's all|all set|\bdelivered\b|\brefunded\b", re.IGNORECASE)
_PENDING = re.compile(
    r"稍等|请稍候|稍候|我(?:来|先|帮您|帮你)?查(?:一下|询)|正在(?:查询|处理|为您)|马上|"
    r"\blet me (?:check|look|see)\b|\bone moment\b|\bplease wait\b|\bi'll (?:check|look)\b|"
    r"\bchecking\b", re.IGNORECASE)
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
_ACKNOWLEDGEMENT = re.compile(
    r"^(?:noted|got it|understood|will do|sure thing|absolutely|perfect|alright|all right|"
    r"no problem|sounds good|i see|i understand|记住了|记下了|明白了?|了解了?|知道了|没问题|好嘞|"
    r"好的呢|没问题的)[\s!！。.,，~]*$", re.IGNORECASE)
"""An answer's opening that only acknowledges ("Noted.", "记住了。"): no note of its own."""
_TOOL_ERROR = re.compile(
    r"\berror\b|\bfailed\b|\bfailure\b|\bexception\b|not found|\btimed? ?out\b|错误|失败|异常|超时",
    re.IGNORECASE)
_NO_ERROR = re.compile(
    r"\b(?:no|without|zero|0)\s+(?:errors?|failures?|exceptions?)\b|\berrors?\W{0,3}(?:none|null|"
    r"0)\b|无错误|没有错误|未出错|无异常", re.IGNORECASE)
"""Phrases that name an error to say there was none ("no errors", "error: none", "无错误")."""
_ERROR_KEYS = frozenset(("error", "errors", "err", "errmsg", "error_message", "exception",
                         "failure", "fault"))
_FAILED_STATUS = re.compile(r"^(?:error|errored|fail|failed|failure|exception|timeout|"
                            r"timed out|not found|错误|失败|异常|超时)$", re.IGNORECASE)
_STATUS_KEYS = frozenset(("status", "state", "result", "outcome"))
_SENTENCE_END = re.compile(r"(?<=[。！？；])|(?<=[!?;])(?=\s|$)|(?<=\.)\s|\n")
"""Where a sentence ends: after CJK end punctuation, or after ASCII ``. ! ? ;`` followed by
white space (a ``?`` inside a URL ends nothing)."""


def _clip(text: str, limit: int = _CLIP) -> str:
    """One line: framing removed, whitespace collapsed, cut at a sentence end when long.

    Without a sentence end far enough in, it is cut between words, never inside an exact fact
    (``_cut_points``): "receipt 4471829930" loses the whole number, never its last digits, so
    no clipped value reads as another one (the facts line shows it whole).
    """
    flat = " ".join(without_framing(text).split())
    if len(flat) <= limit:
        return flat
    cut = 0
    for match in _SENTENCE_END.finditer(flat, 0, limit):
        cut = match.start()
    if cut >= limit // 3:
        return flat[:cut].strip()
    points = [p for p in _cut_points(flat[:limit * 4]) if p <= limit - 1]
    if not points:
        return _CUT_MARK
    return flat[:max(points)].rstrip(_CUT_TAIL) + _CUT_MARK


_ASKS = re.compile(r"[?？]|[吗呢么][\s。！!]*$")


def _sentences(text: str) -> list[str]:
    flat = " ".join(text.split())
    return [s.strip() for s in _SENTENCE_END.split(flat) if s.strip()]


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    match = _SENTENCE_END.search(flat, 1)
    return _clip(flat[:match.start()] if match else flat)


_LEADING_GREETING = re.compile(
    r"^(?:你好|您好|嗨|哈喽|hi|hello|hey|good (?:morning|afternoon|evening))(?:\s+there)?"
    r"[呀啊哈]?(?:[\s!！。.,，~]+|(?=[" + cjk_class(HAN) + r"])|$)",
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


def _is_substantive(text: str) -> bool:
    """Whether the message says more than a greeting or small talk."""
    flat = text.strip()
    if len(flat) < 2 or _GREETING.match(flat):
        return False
    rest = _LEADING_GREETING.sub("", flat, count=1)
    return bool(rest) and not (_GREETING.match(rest) or _ONLY_SMALL_TALK.match(rest))


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


def without_echoed_framing(summary: Summary, messages: Sequence[Message],
                           previous: Summary | None = None) -> Summary:
    """``summary`` without the library's framing: fences, recalled-turn markers, labels.

    The zone and summary labels go from its texts (not its facts). Marker-shaped facts are
    dropped unless a user or tool message of ``messages`` or the ``previous`` summary holds
    them: a summary model copies what its context showed it, fences and labels included.
    """
    grounded = _grounded_keys(messages)
    if previous is not None:
        grounded |= {fact_key(f) for f in previous.facts}
    facts = _unframed(f for f in summary.facts
                      if not (looks_like_fence_marker(f) and fact_key(f) not in grounded))

    def unlabelled(values: Iterable[str]) -> tuple[str, ...]:
        return _unframed(without_library_labels(value) for value in values)

    return replace(
        summary, need=" ".join(without_framing(without_library_labels(summary.need)).split()),
        facts=facts, unresolved=unlabelled(summary.unresolved),
        corrected=unlabelled(summary.corrected), notes=unlabelled(summary.notes))


def _unframed(values: Iterable[str]) -> tuple[str, ...]:
    """``values`` without framing, whitespace collapsed, each once; empty ones go.

    A value that was only framing ("<<data …>>") leaves nothing, and one framing was glued to
    ("<<data …>>ORD1") becomes the value it wraps, the same as its plain copy.
    """
    flat = (" ".join(without_framing(value).split()) for value in values)
    return tuple(dict.fromkeys(value for value in flat if value))


def _grounded_keys(messages: Iterable[Message]) -> set[str]:
    """Fact keys of what users and tools wrote (what the model could have read, not made)."""
    return {fact_key(fact) for m in messages if m.role in ("user", "tool")
            for fact in extract_facts(m.content)}


def confirmed_facts(previous: Summary, messages: Iterable[Message]) -> tuple[str, ...]:
    """Facts someone stood behind, not just a tool printed.

    Those the user or the assistant wrote, or a tool call used as an argument, in ``messages``;
    the facts of ``previous`` it does not mark ``unconfirmed``; and those it marks that its
    other parts (need, open items, corrections, notes) name.
    """
    messages = list(messages)
    spoken = [m for m in messages if m.role in ("user", "assistant")]
    found = facts_of_messages(spoken, grounding=messages)
    context = fact_key(" ".join((previous.need, *previous.unresolved, *previous.corrected,
                                 *previous.notes)))
    printed = {fact_key(f) for f in previous.unconfirmed}
    carried = [f for f in previous.facts if fact_key(f) not in printed or fact_key(f) in context]
    return _merge_facts(carried, found)


def marking_unconfirmed(summary: Summary, confirmed: Iterable[str]) -> Summary:
    """``summary`` with its facts that are not in ``confirmed`` marked ``unconfirmed``."""
    keys = {fact_key(f) for f in confirmed}
    return replace(summary, unconfirmed=tuple(f for f in summary.facts if fact_key(f) not in keys))


def _merge_facts(old: Iterable[str], new: Iterable[str]) -> tuple[str, ...]:
    merged: dict[str, str] = {}
    for fact in (*old, *new):
        merged.setdefault(fact_key(fact), fact)
    return tuple(merged.values())


# ----- what the user states: constraints, replaced values -----------------------------------

# The labels the library writes around what it shows a model: the zone headings and zone lines
# of ``modes.zones.ZONE_LABELS`` (that module imports this package, so they are listed here; a
# test keeps the lists in step) and this module's summary labels. A model quoting its context
# copies them; like fence lines they are framing, not something anyone said. Matched as written
# (case, colon), so "as I said earlier: …" keeps its words.
_ZONE_HEADINGS = ("Facts", "Task", "Tools", "Output", "事实区", "任务区", "工具区", "输出区")
_ZONE_LINES = ("Earlier", "Goal", "Done", "Next", "Format", "Tone", "Constraints",
               "此前", "目标", "已完成", "待执行", "格式", "语气", "约束")
_LINE_LABELS = sorted({*_ZONE_LINES, *(label for labels in _LABELS.values() for label in labels)},
                      key=len, reverse=True)
_LIBRARY_LABEL = re.compile(r"\[(?:" + "|".join(map(re.escape, _ZONE_HEADINGS)) + r")\]"
                            r"|(?<!\w)(?:" + "|".join(map(re.escape, _LINE_LABELS)) + r")[:：]")


def without_library_labels(text: str) -> str:
    """``text`` (a model's words) without the zone and summary labels it copied from its context.

    For what the assistant or a summary model wrote, never for a user's text: a user who writes
    "Notes: …" said it.
    """
    return _LIBRARY_LABEL.sub("", text)


# A value right after one of these is the one a correction replaces: "8:30pm, not 7:30pm",
# "May 7 instead of May 6", "from 7:30pm to 8:30pm", "不是7:30pm，是8:30pm".
_OLD_VALUE_BEFORE = re.compile(
    r"(?:\bnot|\binstead of|\brather than|\bfrom|\bwas|\bwere|"
    r"不是|而非|而不是|原来是|原先是|之前是|从)\s*(?:the |on |at |for |to |是)?\s*$", re.IGNORECASE)
_IDENTIFIER_KINDS = frozenset(("id", "code", "number"))


def _statements(previous: Summary, messages: Sequence[Message],
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
            sentence = "，".join(clauses) if _language("auto", sentence) == "zh" else ", ".join(
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


# ----- the extractive summariser ------------------------------------------------------------

@dataclass(slots=True, kw_only=True)
class _Open:
    """An open item while the new messages are read."""

    text: str
    """How it reads in the summary."""
    kind: str
    """``request`` (answered by the next answer), ``problem`` (needs an explicit resolution),
    ``tool`` (a failed call, cleared by a later success of the same tool), ``step`` (a planned
    step a hand-off carried as not done, cleared when a tool call or the assistant does it) or
    ``carried``."""
    keys: frozenset[str] = frozenset()
    """Fact keys it mentions: an answer naming one of them resolves it."""
    tool: str | None = None
    """For ``tool`` items, the tool's name."""
    step: tuple[str, ...] = ()
    """For ``step`` items, the step's terms in order (its verb first)."""


@dataclass(slots=True, kw_only=True)
class _Merge:
    """Mutable state of one incremental merge."""

    lang: str
    need: str
    open: list[_Open]
    corrected: list[str]
    notes: list[str]
    calls: dict[str, str] = field(default_factory=dict)
    call_terms: dict[str, set[str]] = field(default_factory=dict)
    """Each tool call's id to the terms of its name and arguments."""
    answered_upto: int = 0


_TOOL_ITEM = re.compile(r"^(?:tool (\S+) failed|工具 (\S+) 失败):")
_STEP_ITEM = re.compile(r"^(?:not done|未完成)\s*[:：]\s*(?=\S)")
"""How a hand-off carries a planned step that had not run (``manager.handoff``)."""
# The assistant saying a step is done: a completed action, not a promise or a failure.
_DONE_CLAIM = re.compile(
    r"\b(?:done|sent|emailed|mailed|booked|reserved|cancell?ed|refunded|completed|finished|"
    r"submitted|scheduled|updated|ordered|paid|created|confirmed|placed|added|removed|changed|"
    r"moved|notified|called|texted|messaged|posted|uploaded|shared|forwarded|replied|"
    r"(?:i|we)(?:'ve| have) \w+(?:ed|t))\b|"
    r"已|好了|完成|搞定|办好|订好|发好|发送了|发了|取消了|退了|付了", re.IGNORECASE)
_NOT_DONE_CLAIM = re.compile(
    r"\bnot\b|n['’]t\b|\bnever\b|\bunable\b|\bfailed\b|\bcannot\b|\bwill\b|\b(?:i|we)'ll\b|"
    r"\bgoing to\b|没|未|无法|失败|不了|还不|将", re.IGNORECASE)


def _open_item(text: str, kind: str, tool: str | None = None) -> _Open:
    keys = frozenset(fact_key(f) for f in extract_facts(text))
    step: tuple[str, ...] = ()
    if kind == "carried" and (failed := _TOOL_ITEM.match(text)):
        kind, tool = "tool", failed.group(1) or failed.group(2)  # a later success clears it
    elif kind == "carried" and (planned := _STEP_ITEM.match(text)):
        kind, step = "step", tuple(analyzer("recall").terms(text[planned.end():]))
    return _Open(text=_clip(text), kind=kind, keys=keys, tool=tool, step=step)


def _covers(terms: set[str], step: tuple[str, ...]) -> bool:
    """Whether ``terms`` hold at least half of a step's terms (none: never)."""
    wanted = set(step)
    return bool(wanted) and 2 * len(wanted & terms) >= len(wanted)


def _call_does_step(call: set[str], item: _Open) -> bool:
    """Whether a successful call does a step: it names the step's verb and half its words.

    "email the team" and ``send_email``; ``search_hotels`` books no hotel.
    """
    return item.kind == "step" and _covers(call, item.step) and item.step[0] in call


def _says_step_done(statement: str, item: _Open) -> bool:
    """The assistant states a step done: a completed action about most of its words."""
    return (item.kind == "step" and _DONE_CLAIM.search(statement) is not None
            and _NOT_DONE_CLAIM.search(statement) is None
            and _covers(analyzer("recall").term_set(statement), item.step))


class ExtractiveSummarizer:
    """The offline default: rules, no model. Deterministic for the same input."""

    def summarize(self, previous: Summary | None, messages: Sequence[Message], *,
                  language: str, max_tokens: int | None = None,
                  tokenizer: Tokenizer | None = None) -> Summary:
        """Merge ``messages`` into ``previous``; see ``Summarizer.summarize``."""
        base = previous or Summary()
        text = base._text() + " " + " ".join(m.content for m in messages)
        state = _Merge(lang=_language(language, text), need=base.need,
                       open=[_open_item(item, "carried") for item in base.unresolved],
                       corrected=list(base.corrected), notes=list(base.notes))
        state.answered_upto = len(state.open)
        for message in messages:
            _read(state, message)
        constraints, superseded = _statements(base, messages, state.need)
        summary = Summary(
            need=state.need, constraints=constraints,
            facts=_merge_facts(base.facts, facts_of_messages(messages)), superseded=superseded,
            unresolved=tuple(dict.fromkeys(item.text for item in state.open)),
            corrected=tuple(dict.fromkeys(state.corrected)),
            notes=tuple(dict.fromkeys(state.notes))[-MAX_NOTES:],
            truncated_facts=base.truncated_facts)
        return capped_summary(summary, max_tokens, tokenizer, confirmed_facts(base, messages))


def _read(state: _Merge, message: Message) -> None:
    for call in message.tool_calls:
        state.calls[call.id] = call.name
        state.call_terms[call.id] = analyzer("recall").term_set(
            split_identifiers(f"{call.name} {call.arguments}"))
    if message.role == "user":
        _read_user(state, message.content)
    elif message.role == "assistant" and message.content.strip():
        _read_assistant(state, message.content)
    elif message.role == "tool":
        _read_tool(state, message)


def _read_user(state: _Merge, content: str) -> None:
    if not _is_substantive(content):
        return
    if not state.need:
        state.need = _need_of(content)  # what it says first corrects nothing said before
    elif is_correction(content):
        _mark_corrected(state, content)
    if _RESOLVED.search(content) and not (_OPEN.search(content) or _ASKS.search(content)):
        state.open.clear()
        state.answered_upto = 0
        return
    if _OPEN.search(content):
        state.open.append(_open_item(content, "problem"))
    elif _QUESTION.search(content):
        state.open.append(_open_item(content, "request"))


def _read_assistant(state: _Merge, content: str) -> None:
    content = without_library_labels(content)  # a quoted zone is not what the model says
    if _PENDING.search(content) and len(content) < 80:
        return  # "let me check" answers nothing yet
    statements = [s for s in _sentences(content)
                  if not _ASKS.search(s) and _is_substantive(s)]
    if not statements:
        return  # only asks the user back ("What is your user id?"): nothing answered yet
    if _CORRECTION.search(content):
        _mark_corrected(state, content)
    keys = frozenset(fact_key(f) for f in extract_facts(content))
    resolves = _RESOLVED.search(content) is not None

    def still_open(index: int, item: _Open) -> bool:
        if item.kind == "step":  # only doing it clears a step, not naming its values
            return not any(_says_step_done(s, item) for s in statements)
        if item.kind == "request" and index >= state.answered_upto:
            return False  # the question just asked is what this answer answers
        if item.keys & keys and (item.kind != "problem" or resolves):
            return False
        return not (resolves and item.kind == "problem" and not item.keys)

    state.open = [item for i, item in enumerate(state.open) if still_open(i, item)]
    if _OPEN.search(content):
        state.open.append(_open_item(content, "problem"))  # listed as open, not as a note
    elif note := _note_of(statements):
        state.notes.append(note)
    state.answered_upto = len(state.open)


def _note_of(statements: Sequence[str]) -> str:
    """An answer's note: its statements but those that only acknowledge, clipped.

    Clipped at a sentence end when long, so "Noted. Monday: lentil soup…" keeps the menu.
    """
    said = [s for s in statements if not _ACKNOWLEDGEMENT.match(s)]
    if not said:
        return ""
    # Whole statements while they fit; only a first one too long is clipped itself (cheaper
    # than clipping the whole answer, the same note).
    note = said[0]
    for statement in said[1:]:
        if len(note) + 1 + len(statement) > _CLIP:
            break
        note = f"{note} {statement}"
    note = _clip(note)
    return note if _is_substantive(note) else ""


def _tool_failed(content: str) -> bool:
    """Whether a tool result says its call failed.

    Marked failed (``(tool error)``), or a JSON object whose error field holds something or
    whose status names a failure; other text that speaks of an error, unless only to say
    there was none. A JSON result's keys are not read as words: ``{"error": null}`` is a
    success.
    """
    if reports_failure(content):
        return True
    data = _json_object(content)
    if data is not None:
        return any(bool(value) and not (isinstance(value, str) and _NO_ERROR.search(value))
                   for key, value in data.items() if key.lower() in _ERROR_KEYS) or any(
            (isinstance(value, str) and _FAILED_STATUS.match(value.strip()) is not None)
            or (key.lower() == "success" and value is False)
            for key, value in data.items() if key.lower() in (*_STATUS_KEYS, "success"))
    return _TOOL_ERROR.search(_NO_ERROR.sub(" ", content)) is not None


def _json_object(content: str) -> dict[str, Any] | None:
    text = fenced_body(content).strip()
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _read_tool(state: _Merge, message: Message) -> None:
    name = message.name or state.calls.get(message.tool_call_id or "", "tool")
    if _tool_failed(message.content):
        label = f"工具 {name} 失败" if state.lang == "zh" else f"tool {name} failed"
        state.open.append(_open_item(f"{label}: {_clip(message.content, 80)}", "tool", name))
    else:
        call = state.call_terms.get(message.tool_call_id or "", set())
        state.open = [item for item in state.open
                      if not ((item.kind == "tool" and item.tool == name)
                              or _call_does_step(call, item))]


def _mark_corrected(state: _Merge, correction: str) -> None:
    """Say explicitly which earlier conclusion no longer holds.

    The newest note is taken as the one corrected only when the correction speaks of the same
    thing as the note or the need it answers (a shared value or word): "Actually my email is …"
    corrects nothing a note about a delivery said, and must not retract it; "Actually the
    flight is HAT124" retracts the gate given for the flight the need named.
    """
    new = _first_sentence(correction)
    if state.notes and _related(f"{state.need}\n{state.notes[-1]}", correction):
        old = state.notes.pop()
        marked = (f"{new}（已更正：原为 {old}）" if state.lang == "zh"
                  else f"{new} (corrected: was {old})")
    else:
        marked = f"{new}（已更正）" if state.lang == "zh" else f"{new} (corrected)"
    state.corrected.append(marked)


def _related(said: str, correction: str) -> bool:
    """Whether ``correction`` shares an exact value or a word (not a stop word) with ``said``."""
    values = {fact_key(f) for f in extract_facts(said)}
    if not values.isdisjoint(fact_key(f) for f in extract_facts(correction)):
        return True
    terms = analyzer("recall").term_set
    return not terms(said).isdisjoint(terms(correction))


# ----- fitting a cap ------------------------------------------------------------------------

def capped_summary(summary: Summary, max_tokens: int | None, tokenizer: Tokenizer | None,
                   confirmed: Iterable[str]) -> Summary:
    """A merge's summary marked with what is not ``confirmed``, then fitted to the cap."""
    confirmed = tuple(confirmed)
    return fit_summary(marking_unconfirmed(summary, confirmed), max_tokens, tokenizer,
                       confirmed=confirmed)


def fit_summary(summary: Summary, max_tokens: int | None, tokenizer: Tokenizer | None, *,
                confirmed: Iterable[str] = ()) -> Summary:
    """The summary cut until its rendering, in either language, fits ``max_tokens``.

    Order of sacrifice: notes (oldest first), unresolved (oldest first), then the need is
    shortened (cut between words and outside any exact fact, marked "…", so no piece of a
    value is shown as if it were one); corrections, then the marks of replaced values, then
    the user's constraints (each oldest first) go only when the need cut to a quarter of the
    cap does not fit beside them. Facts go only if the facts alone do not fit
    (the need then keeps at most a quarter of the cap): first those seen only in tool output
    (``unconfirmed``, across merges), then the ``confirmed`` ones — said by the user or the
    assistant, or used as tool-call arguments — each oldest first, so the newest confirmed
    facts stay; ``truncated_facts`` counts what went.
    """
    if max_tokens is None:
        return summary
    if tokenizer is None:
        raise SummaryError("max_tokens needs a tokenizer to count with")
    if max_tokens < 1:
        raise SummaryError("max_tokens must be positive")
    fitted = _fit(summary, max_tokens, tokenizer, confirmed)
    if fitted is summary:
        return summary
    shown = [*summary.facts, *extract_facts(_shown_text(summary))]
    kept = {fact_key(f) for f in fitted.facts}
    return replace(fitted, dropped=missing_facts(_shown_text(fitted), shown),
                   unconfirmed=tuple(f for f in fitted.unconfirmed if fact_key(f) in kept),
                   superseded=tuple(p for p in fitted.superseded if fact_key(p[0]) in kept))


def _fit(summary: Summary, max_tokens: int, tokenizer: Tokenizer,
         confirmed: Iterable[str]) -> Summary:

    def fits(candidate: Summary) -> bool:
        # Either language's labels: a stored summary may be rendered in the other one later.
        return all(tokenizer.count(candidate.render(lang)) <= max_tokens for lang in _LABELS)

    if fits(summary):
        return summary
    for name in ("notes", "unresolved"):
        while getattr(summary, name) and not fits(summary):
            summary = replace(summary, **{name: getattr(summary, name)[1:]})
    if fits(summary):
        return summary
    # A correction is all that says a listed value is stale ("was HAT123"), and a constraint is
    # the user's own rule that nothing else repeats (an allergy), so they outlast the need's
    # tail: they go, oldest first, only while a need cut to a quarter of the cap does not fit
    # beside them. Constraints go last: the facts line still shows a corrected value, while a
    # constraint lost is lost. All of them go before any fact.
    quarter = _cut_need(summary.need, lambda need: tokenizer.count(need) <= max_tokens // 4)
    for name in ("corrected", "superseded", "constraints"):
        while getattr(summary, name) and not fits(replace(summary, need=quarter)):
            summary = replace(summary, **{name: getattr(summary, name)[1:]})
    counted = _counting_need_facts(summary)
    if fits(replace(summary, need="")):
        return counted(replace(summary, need=_cut_need(
            summary.need, lambda need: fits(counted(replace(summary, need=need))))))
    # The facts alone are too many: the need keeps at most a quarter of the cap, facts the rest.
    keys = {fact_key(f) for f in confirmed}
    short = replace(summary, need=quarter)
    try:
        return _facts_that_fit(short, fits, keys, counted)
    except SummaryError:
        return _facts_that_fit(replace(summary, need=""), fits, keys, counted)


def _counting_need_facts(summary: Summary) -> Callable[[Summary], Summary]:
    """A function giving a cut of ``summary`` its lost need-only facts in ``truncated_facts``.

    Need-only facts are those the need names and the facts line does not: an earlier cut gave
    them up while the need still named them (not lost then). When the need is shortened now,
    such a fact goes with it and is counted like any other.
    """
    listed = {fact_key(f) for f in summary.facts}
    only_in_need = [f for f in extract_facts(summary.need) if fact_key(f) not in listed]

    def counted(cut: Summary) -> Summary:
        lost = missing_facts(_shown_text(cut), only_in_need) if only_in_need else ()
        return replace(cut, truncated_facts=cut.truncated_facts + len(lost)) if lost else cut

    return counted


_CUT_MARK = "…"
_CUT_TAIL = " ,，;；:：、-"


def _cut_need(need: str, fits: Callable[[str], bool]) -> str:
    """The longest start of ``need`` that ``fits``, cut between words, marked with "…".

    Never inside an exact fact: "the number is 4471829930" loses the whole number (the facts
    line keeps it), never its last digits, so no wrong value is shown. '' when nothing fits.
    """
    if fits(need):
        return need
    cuts = [text for text in (need[:p].rstrip(_CUT_TAIL) + _CUT_MARK for p in _cut_points(need))
            if text != _CUT_MARK]
    low, high = 0, len(cuts)  # how many of the (growing) cuts fit
    while low < high:
        middle = (low + high + 1) // 2
        if fits(cuts[middle - 1]):
            low = middle
        else:
            high = middle - 1
    return cuts[low - 1] if low else ""


def _cut_points(text: str) -> list[int]:
    """Where ``text`` may be cut: between words, never inside a fact ``extract_facts`` finds.

    Between words is at a space, or next to a CJK character (Chinese has no spaces).
    """
    inside = bytearray(len(text) + 1)
    for fact in extract_facts(text):
        start = text.find(fact)
        while start != -1:
            inside[start + 1:start + len(fact)] = b"\x01" * (len(fact) - 1)
            start = text.find(fact, start + 1)
    return [p for p in range(1, len(text)) if not inside[p] and (
        text[p].isspace() or text[p - 1].isspace() or is_cjk_char(text[p - 1])
        or is_cjk_char(text[p]))]


def _facts_that_fit(summary: Summary, fits: Callable[[Summary], bool], confirmed: set[str],
                    counted: Callable[[Summary], Summary]) -> Summary:
    facts = summary.facts
    # Positions in the order they are given up: a fact too long to fit even on its own (a
    # pasted presigned link), then tool-only facts, then confirmed ones, oldest first.
    too_long = {i for i, fact in enumerate(facts) if not fits(replace(summary, facts=(fact,)))}
    order = sorted(range(len(facts)),
                   key=lambda i: (i not in too_long, fact_key(facts[i]) in confirmed, i))

    def without(dropped: int) -> Summary:
        gone = set(order[:dropped])
        kept = replace(summary, facts=tuple(f for i, f in enumerate(facts) if i not in gone))
        # Only what the summary no longer shows at all is counted: a fact the need still
        # names is not given up, and counting it would excuse a fact that was. The counter
        # line is no place a fact is shown (its number changes with this very count).
        lost = missing_facts(_shown_text(kept), [facts[i] for i in sorted(gone)])
        return counted(replace(kept, truncated_facts=summary.truncated_facts + len(lost)))

    low, high = 1, len(facts)  # the fewest facts to give up for the rest to fit
    while low < high:
        middle = (low + high) // 2
        if fits(without(middle)):
            high = middle
        else:
            low = middle + 1
    result = without(low)
    if not fits(result):
        # Even with every fact left out (and counted) it does not fit.
        raise SummaryError("max_tokens is too small to hold the summary")
    return result


# ----- checking ----------------------------------------------------------------------------

def check_summary(summary: Summary, required_facts: Iterable[str]) -> tuple[str, ...]:
    """Required facts the summary's rendering does not contain (in the order given).

    The "(N older facts left out)" line does not count as containing a fact: a dropped fact
    "110" is not kept by a counter that happens to read 110.
    """
    return missing_facts(_shown_text(summary), required_facts)


def _shown_text(summary: Summary) -> str:
    """The rendering facts are looked up in: everything but the left-out counter line."""
    return replace(summary, truncated_facts=0).render("en")


def verified(summarizer: Summarizer, previous: Summary | None, messages: Sequence[Message], *,
             language: str, max_tokens: int | None = None,
             tokenizer: Tokenizer | None = None) -> Summary:
    """Run ``summarizer`` and return its summary only if it kept everything it had to.

    Raises:
        SummaryError: the summariser failed, returned an empty summary, or lost a fact of the
            previous summary or of the new messages — except facts beyond a token cap that the
            summary explicitly counts in ``truncated_facts``.
    """
    try:
        summary = summarizer.summarize(previous, messages, language=language,
                                       max_tokens=max_tokens, tokenizer=tokenizer)
    except SummaryError:
        raise
    except Exception as exc:  # a summariser is pluggable: any failure is a failed summary
        raise SummaryError(f"the summariser raised {type(exc).__name__}") from exc
    if not isinstance(summary, Summary) or summary.is_empty():
        raise SummaryError("the summariser returned an empty summary")
    base = previous or Summary()
    required = _merge_facts(base.facts, facts_of_messages(messages))
    lost = check_summary(summary, required)
    allowed = summary.truncated_facts - base.truncated_facts
    # Through ``fit_summary`` the cap names what it dropped: a required fact missing from that
    # was never in the summariser's summary, and a number the cap cut from the need (counted
    # too) must not pay for it.
    dropped = {fact_key(fact) for fact in summary.dropped}
    unexcused = [fact for fact in lost if fact_key(fact) not in dropped]
    if len(lost) > max(allowed, 0) or (dropped and unexcused):
        raise SummaryError(f"the summary lost {len(lost)} exact fact(s) it had to keep")
    return summary


def condense_for_handoff(previous: Summary | None, window: Sequence[Message], *,
                         tokenizer: Tokenizer, max_tokens: int = 200,
                         language: str = "auto") -> Summary:
    """What a mode switch writes into the facts zone.

    The window merged into the running summary by the extractive summariser, keeping only the
    three things a hand-over needs — the original need, the key facts, what is still open —
    plus corrections, within ``max_tokens``; notes are left out.
    """
    merged = ExtractiveSummarizer().summarize(previous, window, language=language)
    return capped_summary(replace(merged, notes=()), max_tokens, tokenizer,
                          confirmed_facts(previous or Summary(), window))
