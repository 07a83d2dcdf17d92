"""Running summaries that never lose an exact fact.

A ``Summary`` keeps what a hand-over between modes needs — the user's original need, what the user
said must or must not hold, the confirmed key facts (a value a correction replaced marked so), what
is still open — plus conclusions marked as corrected and a few short notes. A
``Summarizer`` merges only the *new* messages into the previous summary; nothing is ever
re-summarised from the start. ``ExtractiveSummarizer`` does it offline by rules; ``LLMSummarizer``
(``summary_llm``) asks an OpenAI-compatible model for the same five fields as JSON and parses it
strictly; the user's constraints and the values a correction replaced are taken by rule in
both (``statements``, which reads what messages say for either; its public names, and the
patterns the hand-off uses, are importable from here too). ``verified`` runs either and
refuses (``SummaryError``) a result that is empty or lost a fact it had to keep, so a caller can
keep the previous summary and the original messages.

No I/O of its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from contextwright.analysis import analyzer, split_identifiers
from contextwright.compress.facts import (
    extract_facts,
    fact_key,
    looks_like_fence_marker,
    missing_facts,
    without_framing,
)
from contextwright.compress.statements import (
    _ASKS,
    _CLIP,
    _CUT_MARK,
    _CUT_TAIL,
    _clip,
    _cut_points,
    _first_sentence,
    _grounded_keys,
    _is_greeting_shaped,
    _is_substantive,
    _need_of,
    _sentences,
    facts_of_messages,
    is_correction,
    user_statements,
)
from contextwright.compress.statements import (
    _CHANGE_REQUEST as _CHANGE_REQUEST,
)
from contextwright.compress.statements import (
    _CORRECTION as _CORRECTION,
)
from contextwright.compress.statements import (
    MAX_CONSTRAINTS as MAX_CONSTRAINTS,
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


# ----- the library's own labels ---------------------------------------------------------------

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
# ... and said as a report of what happened in this conversation: someone did it ("I refunded",
# "we've sent"), it has been or now is so ("has been refunded", "Order 20241010 is cancelled",
# "It's done"), or the answer opens with the deed ("Refunded $50 to your card", "Done."). A
# description of how things go ("Cancelled orders are refunded within 5 business days to the
# original card", "退款一般会在3天内完成") reports nothing, whatever verbs it shares with a step.
_PAST = r"(?:\w+ed|sent|paid|made|put|set|got|done|bought|told|wrote|gave|given|taken|took|kept)"
_DONE_REPORT = re.compile(
    r"\b(?:i|we)(?:'ve| have| had)?(?: (?:just|now|already|also|successfully))? " + _PAST
    + r"\b|\b(?:has|have|had) been \w+|\b(?:is|was|were|'s)(?: (?:now|already|successfully|just|"
    r"all|been))? (?:" + _PAST + r"|complete|through)\b|\bare (?:now|already|all) \w+|"
    r"^(?:all )?done\b|\ball set\b|\bsuccessfully\b|"
    r"^(?:done|sent|emailed|booked|reserved|cancell?ed|refunded|completed|submitted|scheduled|"
    r"updated|ordered|paid|created|confirmed|placed|added|removed|changed|moved|notified|"
    r"forwarded|issued|processed)[:,]? (?:it|them|your|the|that|this|a|an|\d|[$€£¥])|"
    r"已|了|搞定|办好|订好|发好", re.IGNORECASE)
_GENERAL_STATEMENT = re.compile(
    r"\b(?:usually|typically|normally|generally|policy|policies|whenever|if|within)\b|"
    r"通常|一般|如果|若|一旦|政策|规定|会在|会于", re.IGNORECASE)


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
    """The assistant reports a step done: a completed action about most of its words.

    Reported as what happened here, not described as what happens in general: a policy that
    names the step's verb and words leaves the step open.
    """
    return (item.kind == "step" and _DONE_CLAIM.search(statement) is not None
            and _DONE_REPORT.search(statement) is not None
            and _NOT_DONE_CLAIM.search(statement) is None
            and _GENERAL_STATEMENT.search(statement) is None
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
        constraints, superseded = user_statements(base, messages, state.need)
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
    if not state.need or (_is_greeting_shaped(state.need) and not _is_greeting_shaped(content)):
        # What it says first corrects nothing said before; and a first message that was only
        # a greeting in some language (a short exclamation) gives way to the first request.
        state.need = _need_of(content)
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
