"""Structured-mode zones: facts, task, tools, output, each its rule.

- facts: write once. A fact, once written, is never changed or removed (only erasing the session
  removes it); a fact a later correction replaces is marked as no longer valid, with the value
  that replaced it. Mode hand-offs add their condensed summaries here.
- task: the goal, the steps done and the steps still to do; updated every turn. They are the
  user's words as said; a value corrected since is marked where it is shown, as in facts.
- tools: the last ``keep`` tool calls with a compact result; cleared on a mode switch.
- output: format, tone and constraints, set by the developer in the mode config.

Zones are plain immutable data with pure update functions; the session layer stores them.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import reduce
from typing import Any

from contextwright.analysis import is_cjk_char
from contextwright.compress.facts import extract_facts, fact_key, inside_facts
from contextwright.core.items import reports_failure
from contextwright.modes.config import (
    EN_FIRST,
    EN_NOT_BY_USER,
    EN_ORDINAL_FIRST,
    EN_ORDINAL_LATER,
    EN_SELF,
    ZH_FIRST,
    ZH_ORDINAL_FIRST,
    ZH_ORDINAL_LATER,
    ZH_THEN,
    OutputRules,
)
from contextwright.tokens._base import whole_clusters

MAX_FACTS = 200
"""Facts beyond this many are not added (the zone would crowd out the conversation)."""
MAX_FACTS_PER_MESSAGE = 20
"""One message adds at most this many facts (its first): a pasted list of 250 order ids is data
the message itself keeps in history, not key facts, and would fill the write-once zone for
good, leaving no room for the email the user gives next."""
MAX_STEPS = 20
"""Planned steps kept."""
GOAL_CHARS = 200
"""The task's goal and each planned step are cut to one line of this many characters."""
MAX_DONE = 8
"""Done steps kept (the newest): the zone says where the task stands, not its whole log."""
TOOL_RESULT_CHARS = 300
"""A tool result in the tools zone is cut to this many characters (its exact values first)."""
PENDING_RESULT = "…"
"""The result shown for a call whose result has not been recorded yet."""

ZONE_LABELS: Mapping[str, Mapping[str, str]] = {
    "en": {"facts": "[Facts]", "task": "[Task]", "tools": "[Tools]", "output": "[Output]",
           "goal": "Goal", "done": "Done", "next": "Next", "handoff": "Earlier",
           "format": "Format", "tone": "Tone", "constraints": "Constraints"},
    "zh": {"facts": "[事实区]", "task": "[任务区]", "tools": "[工具区]", "output": "[输出区]",
           "goal": "目标", "done": "已完成", "next": "待执行", "handoff": "此前",
           "format": "格式", "tone": "语气", "constraints": "约束"},
}
SUPERSEDED_MARK: Mapping[str, str] = {
    "en": "{old} (no longer valid: corrected to {new})",
    "zh": "{old}（已失效，更正为 {new}）",
}
"""How the facts zone shows a fact a correction replaced: never as a value to act on."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRecord:
    """One tool call in the tools zone."""

    name: str
    """Tool name."""
    arguments: str
    """Arguments as compact JSON."""
    result: str
    """The result, compacted and cut to ``TOOL_RESULT_CHARS`` (``PENDING_RESULT`` until known)."""
    call_id: str = ""
    """The call's id, so a result recorded later can find it ('' in zones stored before ids)."""
    step: str = ""
    """While the result is pending: the line this call added to the task's done steps ('' for
    none), so a failure recorded later takes it off again (``fill_tool_results``)."""
    planned: str = ""
    """While the result is pending: the planned step this call took off the task's next ones
    ('' for none), which such a failure puts back first."""

    def to_dict(self) -> dict[str, str]:
        """Plain JSON data for a store."""
        data = {"name": self.name, "arguments": self.arguments, "result": self.result}
        # Each left out when empty, so a document without them reads the same in older versions.
        optional = {"call_id": self.call_id, "step": self.step, "planned": self.planned}
        return {**data, **{name: value for name, value in optional.items() if value}}


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """The task zone."""

    goal: str = ""
    """What the user wants done."""
    done: tuple[str, ...] = ()
    """Steps completed, oldest first."""
    next: tuple[str, ...] = ()
    """Steps still to do, in order."""
    closed: bool = False
    """The task is done: every planned step ran (or tools ran without a plan) and the
    assistant answered without calling another tool. The next request starts a new task."""
    last_call: tuple[str, str] | None = None
    """(name, arguments) of the last tool call: one repeated with the same arguments is the
    same step, whether or not the tools zone keeps any call (``tool_zone_keep: 0``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Zones:
    """All zones of one session."""

    facts: tuple[str, ...] = ()
    """Confirmed key facts, write once."""
    superseded: tuple[tuple[str, str], ...] = ()
    """(fact, the value that replaced it) for listed facts the user corrected, oldest first."""
    handoffs: tuple[str, ...] = ()
    """The condensed hand-off summary of the earlier modes (at most one, merged)."""
    task: Task = field(default_factory=Task)
    """Goal and steps."""
    tools: tuple[ToolRecord, ...] = ()
    """The last tool calls, oldest first."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data for a store."""
        return {
            "facts": list(self.facts), "handoffs": list(self.handoffs),
            "task": {"goal": self.task.goal, "done": list(self.task.done),
                     "next": list(self.task.next), "closed": self.task.closed,
                     **({"last_call": list(self.task.last_call)} if self.task.last_call
                        else {})},
            "tools": [record.to_dict() for record in self.tools],
            # Left out when empty, so a document without corrections reads as before.
            **({"superseded": [list(pair) for pair in self.superseded]}
               if self.superseded else {}),
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Zones:
        """Inverse of ``to_dict``; ``TypeError`` / ``ValueError`` for a document of another shape.

        A text where a list of texts belongs would be read character by character (a facts
        zone of letters), and a call of another length fail with an untyped ``IndexError``:
        both are refused, so the state reads as malformed (``CorruptRecordError``).
        """
        task = data.get("task") or {}
        last = task.get("last_call")
        if last and (not isinstance(last, list | tuple) or len(last) != 2):
            raise ValueError("task.last_call must be a (name, arguments) pair")
        return Zones(
            facts=_texts(data, "facts"), handoffs=_texts(data, "handoffs"),
            task=Task(goal=task.get("goal", ""), done=_texts(task, "done"),
                      next=_texts(task, "next"), closed=bool(task.get("closed", False)),
                      last_call=(str(last[0]), str(last[1])) if last else None),
            tools=tuple(ToolRecord(**record) for record in data.get("tools", ())),
            superseded=tuple((str(old), str(new)) for old, new in data.get("superseded", ())),
        )

    def replacement(self, fact: str) -> str | None:
        """The value that now stands for ``fact`` (after every later correction), or None."""
        replaced = dict(self.superseded)
        current, seen = fact, {fact}
        while current in replaced and replaced[current] not in seen:
            current = replaced[current]
            seen.add(current)
        return None if current == fact else current


def _texts(data: Mapping[str, Any], name: str) -> tuple[str, ...]:
    """The list of texts ``data[name]`` (none when absent), or ``TypeError``."""
    value = data.get(name) or ()
    if not isinstance(value, list | tuple) or not all(isinstance(text, str) for text in value):
        raise TypeError(f"{name} must be a list of texts")
    return tuple(value)


def add_facts(zones: Zones, facts: Iterable[str]) -> Zones:
    """Append one message's facts not already present, at most ``MAX_FACTS_PER_MESSAGE``.

    Existing facts are never touched (write once).
    """
    known = set(zones.facts)
    new = [f for f in dict.fromkeys(facts) if f and f not in known]
    room = max(0, min(MAX_FACTS - len(zones.facts), MAX_FACTS_PER_MESSAGE))
    if not new or not room:
        return zones
    return replace(zones, facts=zones.facts + tuple(new[:room]))


def facts_shown(zones: Zones) -> tuple[str, ...]:
    """The facts the facts zone shows: its list, then the exact facts of its hand-off lines.

    What a part rendered next to the zone (the running summary) need not list again.
    """
    return tuple(dict.fromkeys(
        (*zones.facts, *(fact for text in zones.handoffs for fact in extract_facts(text)))))


def add_handoff(zones: Zones, condensed: str | None) -> Zones:
    """Clear the tools and task zones at a mode switch; the hand-off summary goes to facts.

    The task belonged to the mode that is left: what was still open of it is in the hand-off
    summary, and a later return to a mode with zones starts the task its first request asks
    for, rather than carrying the left task's goal and steps into it (or letting its
    completion release another mode).

    ``condensed`` replaces the earlier hand-off text (it was merged into it); None keeps it,
    and '' leaves none (the merged hand-off says nothing the zone does not already list).
    """
    if condensed is None:
        handoffs = zones.handoffs
    else:
        handoffs = (condensed,) if condensed else ()
    return replace(zones, handoffs=handoffs, tools=(), task=Task())


def add_tool_calls(zones: Zones, records: Sequence[ToolRecord], keep: int) -> Zones:
    """Append tool calls, keep the last ``keep``, and mark as many planned steps done.

    A call whose result (recorded with it) reports a failure (``(tool error)``: Anthropic's
    ``is_error``, LangChain's ``status="error"``) does no step: the step stays next, and the
    call that retries it does it.
    """
    if not records:
        return zones
    task = zones.task
    if task.last_call is None and zones.tools:  # a state stored before calls were kept apart
        task = replace(task, last_call=(zones.tools[-1].name, zones.tools[-1].arguments))
    noted = []
    for record in records:
        if reports_failure(record.result):
            task = replace(task, closed=False)  # work on the task goes on
            noted.append(record)
            continue
        before = task
        task = replace(_complete_step(task, record), last_call=(record.name, record.arguments))
        noted.append(_with_step(record, before, task) if record.result == PENDING_RESULT
                     else record)
    tools = (*zones.tools, *noted)[-keep:] if keep else ()
    return replace(zones, tools=tools, task=task)


def _with_step(record: ToolRecord, before: Task, after: Task) -> ToolRecord:
    """``record`` (its result pending) noting the step its call did: ``before`` → ``after``.

    A line that was done already (the same call without a plan, once more) is no step of
    this call's: a failure of this one must not take the earlier call's off.
    """
    added = after.done[-1] if after.done and after.done[-1] not in before.done else ""
    planned = before.next[0] if len(after.next) < len(before.next) else ""
    return replace(record, step=added, planned=planned) if added else record


def fill_tool_results(zones: Zones, results: Mapping[str, str],
                      compact: Callable[[str, str], str]) -> Zones:
    """Give pending calls in the tools zone their results, matched by call id.

    ``results`` maps call id → raw result text; ``compact(tool name, text)`` shortens it, then
    it is cut to ``TOOL_RESULT_CHARS``. A result whose call has left the zone (older than the
    last ``keep``, or cleared by a mode switch) is not added: the zone keeps only its last calls.
    """
    tools, task = list(zones.tools), zones.task
    for call_id, content in results.items():
        index = _newest_pending(tools, call_id)
        if index is not None:
            record = tools[index]
            result = cut_result(compact(record.name, content))
            if record.step and reports_failure(result):
                task = _undone(task, record)
            tools[index] = replace(record, result=result, step="", planned="")
    filled = tuple(tools)
    if filled == zones.tools and task == zones.task:
        return zones
    return replace(zones, tools=filled, task=task)


def _undone(task: Task, record: ToolRecord) -> Task:
    """``task`` without the step ``record``'s call did, its call having failed.

    The planned step goes back first among the next ones; the last call is forgotten, so the
    call that retries it (the same tool, the same arguments) does the step, not repeats it.
    """
    done = tuple(line for line in task.done if line != record.step)
    upcoming = (record.planned, *task.next) if record.planned else task.next
    return replace(task, done=done, next=upcoming, closed=False, last_call=None)


def _newest_pending(tools: Sequence[ToolRecord], call_id: str) -> int | None:
    # Newest first: some clients reuse ids ("call_0") every turn, and the result recorded now
    # answers the latest call with that id. A record without an id (stored before ids were
    # kept) is never matched; one that has its result is not overwritten.
    for index in range(len(tools) - 1, -1, -1):
        record = tools[index]
        if call_id and record.call_id == call_id and record.result == PENDING_RESULT:
            return index
    return None


def _complete_step(task: Task, record: ToolRecord) -> Task:
    # Steps run in order: a tool call completes the next planned step. A call repeated with the
    # same arguments is the same step (retries, polling), not progress: with a plan, the call
    # just before it completed that step already; without one, the call itself is recorded as
    # a done step, once. With a plan, the tool that just did a step called again with other
    # arguments is still that step (weather for a second city, a search redone after the user
    # corrected its date), unless the next step names one of its arguments ("…, then get the
    # weather in London"): it is no sign that the next step, planned for another tool, ran.
    if task.next:
        if task.done and task.last_call is not None and task.last_call[0] == record.name and (
                task.last_call[1] == record.arguments
                or not _names_an_argument(task.next[0], record.arguments)):
            return replace(task, closed=False)
        step = f"{task.next[0]} ({record.name})"
        return replace(task, done=_done(task.done, step), next=task.next[1:], closed=False)
    step = record.name if record.arguments in ("", "{}") else f"{record.name}({record.arguments})"
    return replace(task, done=_done(task.done, _one_line(step, 120)), closed=False)


def _names_an_argument(step: str, arguments: str) -> bool:
    """Whether ``step`` mentions a value of a call's JSON arguments (a distinctive one)."""
    try:
        data: object = json.loads(arguments)
    except json.JSONDecodeError:
        return False
    wanted = _folded(step)
    return any(_distinctive(value) and value in wanted
               for value in map(_folded, _scalars(data)))


def _distinctive(value: str) -> bool:
    """Long enough to name something in a step: three characters, or two with a CJK one.

    "en" or "10" turn up in any step; a Chinese city or person is mostly two characters
    ("上海", "张三"), as distinctive as "London".
    """
    return len(value) >= 3 or (len(value) == 2 and any(map(is_cjk_char, value)))


def _scalars(data: object) -> Iterable[str]:
    if isinstance(data, Mapping):
        for value in data.values():
            yield from _scalars(value)
    elif isinstance(data, list):
        for value in data:
            yield from _scalars(value)
    elif isinstance(data, str | int | float) and not isinstance(data, bool):
        yield str(data)


def _folded(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _done(done: tuple[str, ...], step: str) -> tuple[str, ...]:
    return (*(d for d in done if d != step), step)[-MAX_DONE:]


def close_task(zones: Zones) -> Zones:
    """The assistant answered without a tool call: a task whose steps have all run is done."""
    task = zones.task
    if task.closed or not task.goal or task.next or not task.done:
        return zones
    return replace(zones, task=replace(task, closed=True))


def note_answer(zones: Zones, answer: str) -> Zones:
    """The assistant answered in text, calling no tool: the steps it did in words are done.

    An answer that asks the user something ("Shall I send it?", "要订吗？") finishes nothing:
    the task goes on with the reply. Otherwise the next steps that ask the assistant to say
    something ("then tell me whether …", "然后总结一下") are done by the answer, and the task
    closes once no step is left (``close_task``). A closing offer of more help ("Anything else?")
    asks nothing about the task.
    """
    task = zones.task
    if not task.goal or task.closed or asks_user(answer):
        return zones
    told = 0
    while told < len(task.next) and _TOLD_STEP.match(task.next[told]):
        told += 1
    if told:
        done = reduce(_done, task.next[:told], task.done)
        zones = replace(zones, task=replace(task, done=done, next=task.next[told:]))
    return close_task(zones)


_ASKS = re.compile(r"[?？](?=\s|$|[\"'”’)）])|？|[吗呢么][\s。！!…~]*$")
_OFFER = re.compile(
    r"\banything else\b|\bsomething else\b|\bany other questions?\b|\bany more questions?\b|"
    r"还有(?:什么|其他|别的)|还需要(?:什么|其他|别的)|其他(?:问题|需要|需求)", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[。！？])|(?<=[.!?])\s|\n")


def asks_user(answer: str) -> bool:
    """Whether an answer asks the user something (not only offers more help)."""
    return any(_ASKS.search(sentence) and not _OFFER.search(sentence)
               for sentence in (s.strip() for s in _SENTENCE_END.split(answer)) if sentence)


# A step done by saying something: telling, summarising, comparing, recommending.
_TOLD_STEP = re.compile(
    r"^(?:(?:please|and|also|just|you|then|finally|帮我|给我|请|麻烦|你|再|最后|然后)\s*)*"
    r"(?:tell|let me know|inform me|summari[sz]e|sum up|explain|compare|recommend|suggest|"
    r"advise|answer|describe|report back|say|give me (?:a |an |the |your |my )?(?:summary|"
    r"overview|recommendation|answer|estimate|suggestion|verdict)|告诉|告知|说说|说一下|说明|"
    r"讲讲|讲一下|总结|概括|汇报|解释|比较|对比|推荐|建议|回答|回复我|给(?:我|出)(?:一个|个)?"
    r"(?:建议|总结|结论|答复|推荐))", re.IGNORECASE)


def open_task_text(task: Task) -> str:
    """The goal and steps of a task under way ('' when none is: no goal, done, or not begun).

    What a message must speak of to count as part of that task (``Router.route``).
    """
    if not task.goal or task.closed or not (task.next or task.done):
        return ""
    return "\n".join((task.goal, *task.done, *task.next))


def update_task(zones: Zones, user_text: str) -> Zones:
    """Update the task zone from a new user message.

    The first substantive request is the goal; a message that plans steps, or any substantive
    request after the task was done, starts a new task (goal, no done steps, its own plan), so
    the zone never carries a finished task's goal and log into the next one.
    """
    task = zones.task
    steps = plan_steps(user_text)
    substantive = _is_request(user_text)
    if steps or (task.closed and substantive):
        # A step is a line of the zone, as the goal is: the steps of a message that pastes a
        # file after "first …, then fix this:" would otherwise hold the whole paste.
        task = Task(goal=_one_line(user_text, GOAL_CHARS),
                    next=tuple(_one_line(step, GOAL_CHARS) for step in steps[:MAX_STEPS]))
    elif not task.goal and substantive:
        task = replace(task, goal=_one_line(user_text, GOAL_CHARS))
    return zones if task == zones.task else replace(zones, task=task)


_ACKNOWLEDGEMENT = re.compile(
    r"^\W*(?:thanks?(?: you)?|thx|ok(?:ay)?|great|cool|got it|sure|yes|no|hi|hello|hey|bye|"
    r"谢谢(?:你)?|多谢|好的?|嗯+|行|可以|你好|您好|再见|收到)\W*$", re.IGNORECASE)


def _is_request(text: str) -> bool:
    """Whether a message asks for something (not a greeting, thanks or a bare yes)."""
    flat = text.strip()
    return len(flat) >= 2 and not _ACKNOWLEDGEMENT.match(flat)


# Ordinal steps ("Second, …", "Step 2: …", "第二步…") are later steps only once the plan's first
# is there ("First, …", "Step 1", "第一步", "先…"): ``EN_ORDINAL_LATER``, ``ZH_ORDINAL_LATER``.
_ZH_FIRST_STEP = rf"{ZH_FIRST}|{ZH_ORDINAL_FIRST}"
_ZH_STEP = re.compile(rf"{ZH_FIRST}|{ZH_THEN}")
_ZH_ORDINAL_STEP = re.compile(rf"{_ZH_FIRST_STEP}|{ZH_THEN}|{ZH_ORDINAL_LATER}")
# "再" alone is too common ("再见", "不再") to signal a plan; one of these must be present.
_ZH_PLAN = re.compile(rf"{_ZH_FIRST_STEP}|然后|接着|(?<!求)其次|之后(?!再说)|最后|完成后")
# "First of all" / "first off" open a plan as "first" does: "of all" is no step.
_EN_FIRST_WORDS = rf"{EN_FIRST}(?:\s+of\s+all\b|\s+off\b)?"
# The "and" before a later-step word ("…, and finally …") is part of the word, not of the step
# before it.
_EN_THEN_WORDS = rf"\b(?:and\s+)?(?:then|next|after that|finally)\b{EN_NOT_BY_USER}"
_EN_STEP = re.compile(rf"(?:{_EN_FIRST_WORDS}|{_EN_THEN_WORDS})[,:]?", re.IGNORECASE)
_EN_ORDINAL_STEP = re.compile(
    rf"(?:{_EN_FIRST_WORDS}|{EN_ORDINAL_FIRST}|{_EN_THEN_WORDS}|{EN_ORDINAL_LATER}"
    rf"{EN_NOT_BY_USER})[,:]?",
    re.IGNORECASE)
_EN_ORDINAL_OPENER = re.compile(rf"{EN_FIRST}|{EN_ORDINAL_FIRST}", re.IGNORECASE)
# A piece the user does themselves ("I'll think about it", "Let me try it") is no step.
_BY_USER = re.compile(rf"^(?:{EN_SELF})", re.IGNORECASE)
# Words that open a plan: what comes before them is the request's preamble ("Could you first
# …", "我先…", "Please do this. Step 1: …"), not a step. Before any other step word ("check
# stock, then …") it is step one.
_OPENER = re.compile(rf"{ZH_FIRST}|{ZH_ORDINAL_FIRST}|first(?:\s+of\s+all|\s+off)?|"
                     r"step\s*(?:1|one)[.:)]?", re.IGNORECASE)
_STEP_EDGES = " ，,。.；;、!！?？:：\n"
# The marker of the next item of a numbered or bulleted plan, left at the end of a piece
# ("1. First check the stock\n2. Then …" leaves "check the stock\n2"): not part of the step.
_LIST_MARK = re.compile(
    r"(?:\n[ \t]*(?:[-*•·]|\(?\d{1,3}[.)、:：]|\(?[A-Za-z][.)])|"
    r"(?:\n|(?<=[.;])[ \t]|(?<=[。；]))[ \t]*(?:step\s*\d{1,3}|第[一二三四五六七八九十\d]{1,3}步)"
    r"[:：.]?)[ \t]*$", re.IGNORECASE)


def plan_steps(text: str) -> list[str]:
    """Split a multi-step request ("先查库存再调用供应商接口" / "first X, then Y") into steps.

    A step is the text after a step word; the text before the first one is a step too unless
    that word opens the plan ("Could you first check …": "Could you" is no step), except when
    the word ends its clause ("check stock first, then …"). Pieces without a letter, digit or
    character ("?", "!") are never steps, nor is a thanks or a greeting ("First of all, thanks!
    Then …": "First of all" opens the plan as "first" does), nor are steps the user takes on
    themselves ("我先想想，明天再来问你", "Let me try it first, then I'll get back to you",
    "At first I thought …").
    Returns an empty list for a message that does not plan more than one step ("What should I
    do next?", "OK then!", "我先走了").
    """
    splitter = _step_splitter(text)
    first = splitter.search(text)
    if first is None:
        return []
    head, *pieces = (_LIST_MARK.sub("", p).strip(_STEP_EDGES) for p in splitter.split(text))
    if _is_step(head) and (not _OPENER.fullmatch(first.group().strip().rstrip(",:"))
                           or not _is_step(pieces[0])):
        pieces.insert(0, head)
    # A thanks or a greeting between the step words ("First of all, thanks! Then …") is none.
    steps = [p for p in pieces if _is_step(p) and not _BY_USER.match(p) and _is_request(p)]
    return steps if len(steps) >= 2 else []


def _step_splitter(text: str) -> re.Pattern[str]:
    """The step words ``text`` is split at: Chinese or English, ordinals once a first opens."""
    if _ZH_PLAN.search(text):
        return _ZH_ORDINAL_STEP if re.search(_ZH_FIRST_STEP, text) else _ZH_STEP
    return _EN_ORDINAL_STEP if _EN_ORDINAL_OPENER.search(text) else _EN_STEP


def _is_step(piece: str) -> bool:
    return any(char.isalnum() for char in piece)


_CUT_MARK = "…"
_FACT_REACH = 100
"""How far past a line's limit a fact it cuts may end and still be found whole."""
_CUT_TAIL = " ,，;；:：、-"


def _one_line(text: str, limit: int) -> str:
    """``text`` on one line of at most ``limit`` characters, cut with "…" when longer.

    The cut never falls inside an exact fact (``extract_facts``) or a grapheme cluster: a cut id
    ("ORD-2024-…") reads as another value, a cut cluster as another character (a family emoji
    as a lone parent). A fact the limit falls in is left out whole (the facts zone lists it),
    unless the text opens with it: then it is kept whole past the limit, if it is not far too
    long to show (a pasted link), rather than leave nothing but "…".
    """
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    # Facts are found in what can be shown and a little past it, where one the limit falls
    # in ends: bounded work however long the text (finding facts is the cost here).
    head = flat[: limit + _FACT_REACH]
    cut = _cut_at(head, limit - 1)
    if cut >= len(head):
        return _CUT_MARK
    return flat[:cut].rstrip(_CUT_TAIL) + _CUT_MARK


def _cut_at(text: str, end: int) -> int:
    """Where to cut ``text``: at or before ``end``, else after the fact ``text`` opens with.

    Between words in the last half if it can be, else at any point outside facts and clusters.
    """
    inside = inside_facts(text)
    safe = 0  # the last point outside facts and clusters
    for at in range(end, 0, -1):
        if safe and at < end // 2:
            return safe
        if inside[at] or len(whole_clusters(text, text[:at])) != at:
            continue
        if _between_words(text, at):
            return at
        safe = safe or at
    return safe or next((at for at in range(end + 1, len(text)) if not inside[at]), len(text))




def _between_words(text: str, at: int) -> bool:
    """At a space, or next to a CJK character (Chinese has no spaces between words)."""
    before, after = text[at - 1], text[at]
    return (before.isspace() or after.isspace() or is_cjk_char(before)
            or is_cjk_char(after))


def render_zone(name: str, zones: Zones, language: str,
                output: OutputRules | None = None, *, heading: bool = True) -> str:
    """The text of one zone under its label (``[Facts] …`` / ``[事实区] …``); '' if empty.

    ``heading=False`` leaves the label out, for parts the builder heads itself.
    """
    labels = ZONE_LABELS[language if language in ZONE_LABELS else "en"]
    lines = _zone_lines(name, zones, labels, output, language)
    if not lines:
        return ""
    return "\n".join([labels[name], *lines] if heading else lines)


def _zone_lines(name: str, zones: Zones, labels: Mapping[str, str],
                output: OutputRules | None, language: str) -> list[str]:
    if name == "facts":
        lines = [f"- {_fact_line(zones, fact, language)}" for fact in zones.facts]
        return lines + [f"{labels['handoff']}: {text}" for text in zones.handoffs]
    if name == "task":
        return _task_lines(zones, labels, language)
    if name == "tools":
        return [f"- {t.name}({t.arguments}) → {t.result}" for t in zones.tools]
    if name == "output" and output is not None:
        lines = [f"{labels['format']}: {output.format}"] if output.format else []
        lines += [f"{labels['tone']}: {output.tone}"] if output.tone else []
        return lines + [f"{labels['constraints']}: {c}" for c in output.constraints]
    return []


def _task_lines(zones: Zones, labels: Mapping[str, str], language: str) -> list[str]:
    # The goal and steps are the user's words, kept as said; a value the user has corrected
    # since is marked where it is shown, as in the facts zone, so that neither the goal nor
    # a step still to run asks for it ("5月7日（已失效，更正为 5月8日）"). A done step is
    # marked too: what it did was done with a value that no longer holds.
    task, mark = zones.task, _corrections_marker(zones, language)
    lines = [f"{labels['goal']}: {mark(task.goal)}"] if task.goal else []
    lines += [f"{labels['done']}: {mark(step)}" for step in task.done]
    return lines + [f"{labels['next']}: {mark(step)}" for step in task.next]


def _corrections_marker(zones: Zones, language: str) -> Callable[[str], str]:
    """A function marking the corrected values in a text (the identity without corrections)."""
    if not zones.superseded:
        return lambda text: text
    template = SUPERSEDED_MARK.get(language, SUPERSEDED_MARK["en"])
    # By fact_key: the goal is the message with its white space collapsed.
    current = {fact_key(old): new for old in dict(zones.superseded)
               if (new := zones.replacement(old)) is not None}

    def mark(text: str) -> str:
        found = sorted((fact for fact in extract_facts(text) if fact_key(fact) in current),
                       key=len, reverse=True)
        if not found:
            return text
        # One pass, so a value shown inside a mark is not marked again; not inside a longer
        # number or word ("5月7日" in "15月7日").
        pattern = re.compile("(?<![0-9A-Za-z])(?:" + "|".join(map(re.escape, found))
                             + ")(?![0-9A-Za-z])")
        return pattern.sub(lambda m: template.format(old=m.group(),
                                                     new=current[fact_key(m.group())]), text)
    return mark


def _fact_line(zones: Zones, fact: str, language: str) -> str:
    new = zones.replacement(fact) if zones.superseded else None
    if new is None:
        return fact
    return SUPERSEDED_MARK.get(language, SUPERSEDED_MARK["en"]).format(old=fact, new=new)


def cut_result(text: str) -> str:
    """A tool result short enough for the zone, on one line."""
    return _one_line(text, TOOL_RESULT_CHARS)
