"""Property tests of whole builds: the builder's promises (the budget, what is kept and cut,
order, determinism, security, the report), checked on random realistic requests
(tests/strategies.py) under shipped and custom plans with random budgets.

Token counts are recomputed here from scratch with ``bpe_openai`` (not the library's cache), and
the OpenAI message list is validated here, independently of ``contextwright.core.validate``.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import re
import warnings
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, Phase, assume, given, note, settings
from hypothesis import strategies as st

from contextwright import (
    BudgetError,
    BuildPlan,
    ContextBuilder,
    Decision,
    Document,
    FinalContext,
    InvalidInputError,
    Request,
    ValidationError,
)
from contextwright.core.covering import covering
from contextwright.core.providers import ANTHROPIC_LEAD
from contextwright.sources.conversation import MISSING_RESULT
from contextwright.sources.history_digest import LABEL as DIGEST_LABEL
from strategies import UNTRUSTED_TAG, Scenario, scenarios


def _load_encoding_and_builder() -> tuple[Any, ContextBuilder]:
    # bpe-openai 0.1 loads its BPE files with the deprecated importlib.resources.open_binary;
    # under filterwarnings=error a first load outside the library would fail the run.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        return bpe_openai.get_encoding("o200k_base"), ContextBuilder(tokenizer="o200k_base")


ENCODING, BUILDER = _load_encoding_and_builder()
# No "explain" phase: on a failure it re-runs the test many times to list the lines involved,
# which costs more than the shrinking itself for builds this size.
PROPERTY = settings(max_examples=150, deadline=None,
                    phases=[phase for phase in Phase if phase is not Phase.explain],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
LEFT_OUT = frozenset(("dropped", "deduplicated", "conflict"))
CHANGED = frozenset(("truncated", "compacted"))
# Each message costs its content + 4; each call its name + arguments + 8; each schema its
# compact JSON + 8; the reply is primed with 3 (contextwright.core.accounting).
MESSAGE_OVERHEAD, CALL_OVERHEAD, SCHEMA_OVERHEAD, REPLY_PRIMING = 4, 8, 8, 3
TAG = re.compile(re.escape(UNTRUSTED_TAG) + r"-\d{4}")
RECALL_MARK = re.compile(r"\[recalled( \d{4}-\d{2}-\d{2})?\]\n")
SPEAKERS = {"en": ("User", "Assistant", "Tool"), "zh": ("用户", "助手", "工具")}


# ------------------------------------------------------------------------------------ helpers

def count(text: str) -> int:
    """Exact o200k_base count, straight from the encoder."""
    return len(ENCODING.encode(text, disallowed_special=()))


def schema_json(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def openai_tokens(request: Mapping[str, Any]) -> int:
    """Tokens of an OpenAI chat request: messages, their tool calls and the tool schemas."""
    total = REPLY_PRIMING
    for message in request["messages"]:
        total += count(message.get("content") or "") + MESSAGE_OVERHEAD
        for call in message.get("tool_calls") or ():
            function = call["function"]
            total += count(function["name"]) + count(function["arguments"]) + CALL_OVERHEAD
    for schema in request.get("tools", ()):
        total += count(schema_json(schema)) + SCHEMA_OVERHEAD
    return total


def never_cut_tokens(plan: BuildPlan, request: Request) -> int:
    """The smallest context a build may produce: the system prompt and the user's input."""
    total = REPLY_PRIMING + count(request.user_input) + MESSAGE_OVERHEAD
    if request.system and plan.spec("system") is not None:
        total += count(request.system) + MESSAGE_OVERHEAD
    return total


def build(scenario: Scenario) -> FinalContext | BudgetError:
    """Build the scenario; a ``BudgetError`` is returned, anything else raised."""
    note(f"plan: {scenario.plan}")
    try:
        return BUILDER.build(scenario.plan, scenario.request)
    except BudgetError as exc:
        return exc


def built(scenario: Scenario) -> FinalContext | None:
    """The context, or None when the build raised ``BudgetError`` (checked on its own)."""
    result = build(scenario)
    return None if isinstance(result, BudgetError) else result


def decisions_by_key(decisions: Sequence[Decision]) -> dict[str, list[Decision]]:
    by_key: dict[str, list[Decision]] = defaultdict(list)
    for decision in decisions:
        by_key[decision.key].append(decision)
    return by_key


def arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def normalised(message: Mapping[str, Any]) -> tuple[str, str, tuple[tuple[str, str, str], ...]]:
    """(role, content text, calls) of an OpenAI message dict, input or output."""
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(part["text"] for part in content)
    calls = tuple(
        (call["id"], call["function"]["name"],
         arguments_text(call["function"].get("arguments", "{}")))
        for call in message.get("tool_calls") or ()
    )
    return message["role"], content or "", calls


def is_placeholder(message: Mapping[str, Any]) -> bool:
    return message["role"] == "tool" and MISSING_RESULT in (message.get("content") or "")


def is_digest(message: Mapping[str, Any], decisions: Mapping[str, list[Decision]],
              source: str) -> bool:
    """The source's digest of what it left out: a message of its own, reported as a decision."""
    return (f"{source}.digest" in decisions and message["role"] == "assistant"
            and "left out for space" in (message.get("content") or ""))


def _matches(raw: Mapping[str, Any], out: Mapping[str, Any], decisions: list[Decision]) -> bool:
    """Does output message ``out`` render input message ``raw``?

    Tool results are fenced (and maybe compacted or cut), so they match by call id and by the
    tag their text carries, or by a decision saying how their text was changed.
    """
    role, content, calls = normalised(raw)
    out_role, out_content, out_calls = normalised(out)
    if role != out_role:
        return False
    changed = {d.action for d in decisions} & CHANGED
    if role == "tool":
        tag = TAG.search(content)
        return out.get("tool_call_id") == raw["tool_call_id"] and (
            bool(changed) or (tag is not None and tag.group() in out_content))
    return calls == out_calls and (content == out_content or "truncated" in changed)


RECALLED_RANGE = re.compile(r"history\[(\d+):(\d+)\]")


UNREAD_RUN = re.compile(r"not read \((?:history|turn)\.m(\d+)–m(\d+)\)")


def unread_indexes(decisions: Sequence[Decision], source: str) -> set[int]:
    """The messages the report says were never read (one decision per run, naming it)."""
    unread: set[int] = set()
    for decision in decisions:
        match = UNREAD_RUN.search(decision.reason or "") if decision.key == f"{source}.*" else None
        if match:
            first, last = int(match.group(1)), int(match.group(2))
            assert decision.count == last - first + 1, "the count is the run's length"
            unread.update(range(first, last + 1))
    return unread


def recalled_ranges(decisions: Sequence[Decision], source: str) -> list[tuple[int, int]]:
    """(start, end) of the recalled turns kept, oldest first (a ``kept`` decision names each)."""
    found = [RECALLED_RANGE.search(d.reason or "") for d in decisions
             if d.source == source and d.action == "kept"]
    return sorted((int(m.group(1)), int(m.group(2))) for m in found if m)


class Account:
    """Which input messages of one source (history or turn) are in the output.

    Output messages are matched from the newest back (kept conversation is a newest-first run),
    skipping input messages the report says were left out. Recalled older turns (reported as
    kept, by range) must be among the matches, so a recalled turn is never mistaken for a newer
    copy of its text; a source's digest stands for left-out messages and matches none.
    """

    def __init__(self, ctx: FinalContext, raw: Sequence[Mapping[str, Any]], source: str) -> None:
        rendered = ctx.to_messages("openai")
        self.decisions = decisions_by_key(ctx.report.decisions)
        self.source = source
        self.unread = unread_indexes(ctx.report.decisions, source)
        self.kept: dict[int, int] = {}
        self.unmatched: list[int] = []
        outputs = [i for i, s in enumerate(ctx.sections) if s == source
                   and not is_placeholder(rendered[i])
                   and not is_digest(rendered[i], self.decisions, source)]
        # Recalled turns are kept whole (a kept decision names each); their opening message
        # carries a marker line unless a cut took it.
        self.recalled = {i for start, end in recalled_ranges(ctx.report.decisions, source)
                         for i in range(start, end) if not self.left_out(i)}
        shown = [dict(rendered[i]) for i in outputs]
        marked = []
        for out in shown:
            mark = RECALL_MARK.match(out.get("content") or "")
            marked.append(mark is not None)
            if mark:
                out["content"] = out["content"][mark.end():]
        # A recalled turn opens with its marker and is shown whole, in its own order; where it
        # sits among the other messages is the build's layout (a stable-prefix build shows
        # recalled turns after its pinned head, or after its kept run for one call), so each
        # marked turn is matched on its own and the other outputs in input order.
        turns = self._marked_turns(shown, raw, marked, recalled_ranges(ctx.report.decisions,
                                                                       source))
        in_turns = {j: index for turn in turns for j, index in turn.items()}
        plain = [j for j in range(len(shown)) if j not in in_turns]
        matches = self._align([shown[j] for j in plain], raw,
                              self.recalled - set(in_turns.values()))
        if matches is None:  # no alignment: report the outputs the greedy match cannot place
            self.unmatched = [outputs[j] for j in self._greedy(shown, raw)]
            return
        self.kept = {index: outputs[j] for j, index in (*zip(plain, matches, strict=True),
                                                          *in_turns.items())}

    def _marked_turns(self, shown: list[dict[str, Any]], raw: Sequence[Mapping[str, Any]],
                      marked: list[bool], ranges: list[tuple[int, int]]
                      ) -> list[dict[int, int]]:
        """Each marked recalled turn shown: output position → input index, in turn order."""
        turns, used = [], set()
        for j, is_marked in enumerate(marked):
            if not is_marked:
                continue
            for start, end in ranges:
                if start in used or not self._fits(raw, start, shown[j]):
                    continue
                turn, k = {j: start}, j + 1
                for index in range(start + 1, end):
                    if k < len(shown) and not marked[k] and self._fits(raw, index, shown[k]):
                        turn[k] = index
                        k += 1
                used.add(start)
                turns.append(turn)
                break
        return turns

    def _fits(self, raw: Sequence[Mapping[str, Any]], index: int, out: Mapping[str, Any]
              ) -> bool:
        return not self.left_out(index) and _matches(raw[index], out,
                                                     self.decisions.get(self.key(index), []))

    def _align(self, shown: list[dict[str, Any]], raw: Sequence[Mapping[str, Any]],
               recalled: set[int], allowed: set[int] | None = None) -> list[int] | None:
        """Input index of each output (outputs are in input order), newest first where there
        is a choice, placing every message of ``recalled``; None if no such alignment exists.

        ``allowed``: the only indexes outputs may take (None: any).
        """
        required = sorted(recalled)

        @functools.cache
        def place(j: int, position: int) -> tuple[int, ...] | None:
            # outputs[: j + 1] into indices <= position
            floor = max((r for r in required if r <= position), default=-1)
            if j < 0:
                return () if floor < 0 else None
            for index in range(position, max(floor, 0) - 1, -1):
                if (allowed is None or index in allowed) and self._fits(raw, index, shown[j]):
                    rest = place(j - 1, index - 1)
                    if rest is not None:
                        return (*rest, index)
            return None

        found = place(len(shown) - 1, len(raw) - 1)
        return None if found is None else list(found)

    def _greedy(self, shown: list[dict[str, Any]], raw: Sequence[Mapping[str, Any]]
                ) -> list[int]:
        unmatched, position = [], len(raw) - 1
        for j in range(len(shown) - 1, -1, -1):
            index = position
            while index >= 0 and not self._fits(raw, index, shown[j]):
                index -= 1
            if index < 0:
                unmatched.append(j)
                continue
            position = index - 1
        return unmatched

    def key(self, index: int) -> str:
        return f"{self.source}.m{index}"

    def left_out(self, index: int) -> list[Decision]:
        return [d for d in self.decisions.get(self.key(index), []) if d.action in LEFT_OUT]

    def has(self, index: int, action: str) -> bool:
        return any(d.action == action for d in self.decisions.get(self.key(index), []))


def check_openai_tool_pairing(messages: Sequence[Mapping[str, Any]]) -> None:
    """Every tool message sits in the block right after the assistant message that called it;
    every call of that message is answered exactly once in that block."""
    index = 0
    while index < len(messages):
        message = messages[index]
        assert message["role"] != "tool", f"messages[{index}] is a tool result after no call"
        index += 1
        pending = [call["id"] for call in message.get("tool_calls") or ()]
        if not pending:
            continue
        assert message["role"] == "assistant", f"messages[{index - 1}] calls tools"
        while index < len(messages) and messages[index]["role"] == "tool":
            call_id = messages[index]["tool_call_id"]
            assert call_id in pending, f"messages[{index}] answers no call of its block"
            pending.remove(call_id)
            index += 1
        assert not pending, f"calls {pending} before messages[{index}] have no result"


def check_newest_first_run(account: Account, size: int) -> int | None:
    """The kept messages are the newest ones, without holes (duplicates aside); returns the
    index of the oldest kept message."""
    recent = [i for i in account.kept if i not in account.recalled]
    if not recent:
        return None
    oldest = min(recent)
    holes = [i for i in range(oldest, size) if i not in account.kept
             and i not in account.recalled and not account.has(i, "deduplicated")]
    assert not holes, f"kept {account.source} from m{oldest} has holes at {holes}"
    return oldest


# ------------------------------------------------------------------------------ the budget

@PROPERTY
@given(scenarios())
def test_context_never_exceeds_available(scenario: Scenario) -> None:
    ctx = built(scenario)
    if ctx is None:
        return
    available = scenario.plan.budget.available
    tokens = openai_tokens(ctx.to_request("openai"))
    assert tokens <= available, f"OpenAI rendering costs {tokens} > available {available}"
    assert ctx.available == available


@PROPERTY
@given(scenarios())
def test_text_rendering_never_exceeds_available(scenario: Scenario) -> None:
    # A build counted for the text prompt fits as text, counted whole.
    try:
        ctx = BUILDER.build(scenario.plan, scenario.request, target="text")
    except BudgetError:
        return
    assert count(ctx.to_text()) <= scenario.plan.budget.available
    assert ctx.total_tokens == count(ctx.to_text())


@PROPERTY
@given(scenarios())
def test_text_rendering_of_a_chat_build_fits_or_says_so(scenario: Scenario) -> None:
    # A build counted for chat may not fit as text (escapes and separators cost more); then
    # to_text() refuses with ValidationError instead of returning an over-budget prompt.
    ctx = built(scenario)
    if ctx is None:
        return
    try:
        text = ctx.to_text()
    except ValidationError:
        return
    assert count(text) <= scenario.plan.budget.available


def anthropic_request(ctx: FinalContext) -> dict[str, Any] | None:
    """The Anthropic request of ``ctx``, or None when it is refused as a prefill.

    A plan that places the caller's own messages after the question can end the request with
    the assistant's: a prefill for Anthropic, refused as bad input (never fenced data), not sent.
    """
    try:
        return ctx.to_request("anthropic", max_tokens=1024)
    except InvalidInputError:
        shown = [i for i, m in enumerate(ctx.messages) if m.role != "system" and (
            m.role != "assistant" or m.tool_calls or m.content.strip() or ctx.documents[i])]
        last = shown[-1]
        assert ctx.messages[last].role == "assistant"
        assert not ctx.documents[last] and not ctx.fenced[last]
        return None


@PROPERTY
@given(scenarios())
def test_anthropic_rendering_is_valid_and_fits(scenario: Scenario) -> None:
    ctx = built(scenario)
    if ctx is None:
        return
    request = anthropic_request(ctx)  # ValidationError if it is bad
    if request is None:
        return
    messages = request["messages"]
    assert messages and messages[0]["role"] == "user" and messages[-1]["role"] == "user"
    for before, after in itertools.pairwise(messages):
        assert before["role"] != after["role"], "Anthropic roles must alternate"
    for message in messages:
        for block in message["content"]:
            assert block["type"] != "tool_use" or isinstance(block["input"], dict)
    assert request.get("system", "x").strip(), "an empty system is left out"
    for message in messages:
        assert message["content"], "no empty content"
        assert all(b["type"] != "text" or b["text"].strip() for b in message["content"])
    opening = messages[0]["content"][0] if messages else {}
    lead = (count(ANTHROPIC_LEAD) + MESSAGE_OVERHEAD
            if opening.get("text") == ANTHROPIC_LEAD else 0)
    assert openai_tokens(ctx.to_request("openai")) + lead <= scenario.plan.budget.available


@PROPERTY
@given(scenarios())
def test_budget_error_only_when_never_cut_parts_do_not_fit(scenario: Scenario) -> None:
    result = build(scenario)
    if not isinstance(result, BudgetError):
        return
    needed = never_cut_tokens(scenario.plan, scenario.request)
    available = scenario.plan.budget.available
    assert result.report is not None
    assert needed > available, (
        f"BudgetError ({result}) although system prompt + user input need only {needed} "
        f"of {available} tokens")


@PROPERTY
@given(scenarios())
def test_no_source_exceeds_its_max_tokens(scenario: Scenario) -> None:
    ctx = built(scenario)
    if ctx is None:
        return
    for row in ctx.report.sources:
        spec = ctx.plan.spec(row.source)
        assert spec is not None
        if spec.cuttable and spec.max_tokens is not None:
            assert row.tokens <= spec.max_tokens, f"{row.source} uses {row.tokens} tokens"


# ------------------------------------------------------------------ what is kept, what is cut

@PROPERTY
@given(scenarios())
def test_system_prompt_and_user_input_are_never_cut(scenario: Scenario) -> None:
    ctx = built(scenario)
    if ctx is None:
        return
    messages = ctx.to_messages("openai")
    request = scenario.request
    if request.system and ctx.plan.spec("system") is not None:
        assert messages[0]["role"] == "system"
        assert request.system in messages[0]["content"]
    assert any(m["role"] == "user" and m["content"] == request.user_input for m in messages)


def _check_every_message_accounted(ctx: FinalContext, plan: BuildPlan,
                                   raw: Sequence[Mapping[str, Any]], part: str, source: str
                                   ) -> None:
    if not raw:
        return
    if plan.spec(source) is None:
        assert any(f"request.{part}" in w for w in ctx.report.warnings), (
            f"request.{part} was left out without a warning")
        return
    account = Account(ctx, raw, source)
    assert not account.unmatched, (
        f"{source} output messages {account.unmatched} match no input message that is not "
        "reported as left out")
    for index in range(len(raw)):
        if index in account.kept or index in account.unread:
            continue
        left_out = account.left_out(index)
        assert left_out, (
            f"{account.key(index)} is neither in the context nor covered by a decision "
            f"(its decisions: {account.decisions.get(account.key(index), [])})")
        assert all(d.reason for d in left_out)


@PROPERTY
@given(scenarios())
def test_every_history_and_turn_message_is_kept_or_reported(scenario: Scenario) -> None:
    ctx = built(scenario)
    if ctx is None:
        return
    request = scenario.request
    _check_every_message_accounted(ctx, ctx.plan, request.history, "history", "history")
    _check_every_message_accounted(ctx, ctx.plan, request.turn, "turn", "tool_results")


@PROPERTY
@given(scenarios())
def test_every_document_and_tool_definition_is_kept_or_reported(scenario: Scenario) -> None:
    ctx = built(scenario)
    if ctx is None:
        return
    plan, request = ctx.plan, scenario.request
    decisions = decisions_by_key(ctx.report.decisions)
    left_out = {key for key, ds in decisions.items() if any(d.action in LEFT_OUT for d in ds)}
    if request.tools and plan.spec("tools") is not None:
        kept = {schema["function"]["name"] for schema in ctx.tool_schemas}
        for schema in request.tools:
            name = schema["function"]["name"]
            assert name in kept or f"tools.{name}" in left_out or "tools.*" in decisions, (
                f"tool {name} neither offered nor reported")
    if request.documents and plan.spec("rag") is not None:
        rendered = ctx.to_messages("openai")
        kept_ids = [message for message, section in zip(rendered, ctx.sections, strict=True)
                    if section == "rag" and message["role"] == "assistant"]
        ranks_left_out = {key.split(".")[1] for key in left_out if key.startswith("rag.")}
        if "rag.*" not in decisions:
            assert len(kept_ids) + len(ranks_left_out) == len(request.documents), (
                f"{len(request.documents)} documents, {len(kept_ids)} kept, "
                f"{len(ranks_left_out)} reported left out")


@PROPERTY
@given(scenarios())
def test_tool_call_never_separated_from_its_result(scenario: Scenario) -> None:
    ctx = built(scenario)
    if ctx is None:
        return
    check_openai_tool_pairing(ctx.to_messages("openai"))


def _in_a_tool_round(history: Sequence[Mapping[str, Any]], index: int) -> bool:
    """Whether the round holding ``history[index]`` has tool calls or results."""
    begin = index
    while begin > 0 and history[begin].get("role") != "user":
        begin -= 1
    end = index + 1
    while end < len(history) and history[end].get("role") != "user":
        end += 1
    return any(m.get("role") == "tool" or m.get("tool_calls") for m in history[begin:end])


@PROPERTY
@given(scenarios())
def test_history_is_dropped_oldest_first(scenario: Scenario) -> None:
    ctx = built(scenario)
    if ctx is None:
        return
    spec = ctx.plan.spec("history")
    history = scenario.request.history
    if spec is None or not history:
        return
    account = Account(ctx, history, "history")
    oldest = check_newest_first_run(account, len(history))
    partial = spec.options.get("partial_rounds", "tool_rounds")
    if oldest is None or partial is True:
        return
    start = oldest  # whole rounds (but for an agent round with tool_rounds): it opens a round
    while start > 0 and account.has(start - 1, "deduplicated"):
        start -= 1
    if partial == "tool_rounds" and _in_a_tool_round(history, start):
        return
    assert start == 0 or history[start]["role"] == "user", (
        f"kept history starts inside a round (m{oldest}, a {history[oldest]['role']} message)")


@PROPERTY
@given(scenarios())
def test_latest_tool_results_are_kept_first(scenario: Scenario) -> None:
    ctx = built(scenario)
    turn = scenario.request.turn
    if ctx is None or ctx.plan.spec("tool_results") is None or not turn:
        return
    check_newest_first_run(Account(ctx, turn, "tool_results"), len(turn))


@PROPERTY
@given(scenarios())
def test_parts_follow_the_plan_order(scenario: Scenario) -> None:
    # The merged system message first, then each source's messages where the plan
    # puts the source (the question repeated at the very end when the plan asks for it).
    ctx = built(scenario)
    if ctx is None:
        return
    positions: dict[str, float] = {spec.source: i for i, spec in enumerate(ctx.plan.sources)}
    sections = list(ctx.sections)
    labels = list(ctx.labels)
    if sections and ctx.messages[0].role == "system":
        sections, labels = sections[1:], labels[1:]
    if ctx.plan.repeat_question and len(sections) > 1 and sections[-1] == "user":
        sections = sections[:-1]
    # A digest that is all its source shows after the question goes just before the question:
    # last, it would end the request in the assistant's voice.
    for section, label in zip(sections, labels, strict=False):
        if (label == DIGEST_LABEL and sections.count(section) == 1
                and positions[section] > positions["user"]):
            positions[section] = positions["user"] - 0.5
    order = [positions[s] for s in sections]
    assert order == sorted(order), f"sections out of plan order: {sections}"


# ------------------------------------------------------------------------------ determinism

def _fingerprint(result: FinalContext | BudgetError) -> tuple[str, str]:
    if isinstance(result, BudgetError):
        return str(result), json.dumps(result.report.to_dict(), ensure_ascii=False)
    return (json.dumps(result.to_messages("openai"), ensure_ascii=False),
            json.dumps(result.report.to_dict(), ensure_ascii=False))


@PROPERTY
@given(scenarios())
def test_same_input_gives_byte_identical_output(scenario: Scenario) -> None:
    first = _fingerprint(build(scenario))
    again = _fingerprint(build(scenario))
    fresh = _fingerprint(build(Scenario(scenario.plan, copy.deepcopy(scenario.request))))
    assert first[0] == again[0] == fresh[0], "messages differ between identical builds"
    assert first[1] == again[1] == fresh[1], "reports differ between identical builds"


@PROPERTY
@given(scenarios(), st.data())
def test_rebuild_after_editing_the_request_in_place_matches_a_fresh_build(
        scenario: Scenario, data: st.DataObject) -> None:
    # An agent loop keeps one history list and appends to it (or fixes a message in place);
    # whatever the library remembers between builds must not leak the old state.
    request = scenario.request
    build(scenario)
    history = cast(list[dict[str, Any]], request.history)
    # A plan without history gets one added for the request (add_missing_sources), with recall.
    plan = covering(scenario.plan, request) if scenario.plan.add_missing_sources else scenario.plan
    history_spec = plan.spec("history")
    recall = history_spec is not None and bool(history_spec.options.get("recall_share"))
    # The recall index is documented to notice replaced messages but not dicts edited in place
    # (checking every old message on every build would cost what the index saves).
    kinds = ("append", "retool") if recall else ("append", "edit", "retool")
    edits = data.draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=3), label="edits")
    for edit in edits:
        if edit == "append":
            history += [{"role": "user", "content": "And what about tomorrow?"},
                        {"role": "assistant", "content": "Tomorrow looks sunny."}]
        elif edit == "edit" and history:
            index = data.draw(st.integers(0, len(history) - 1), label="edited message")
            if history[index]["role"] in ("user", "assistant") and history[index].get("content"):
                history[index]["content"] = "(edited) " + normalised(history[index])[1]
        elif edit == "retool" and request.tools:
            request.tools[0]["function"]["description"] = "Edited: looks up anything at all."
    assert _fingerprint(build(scenario)) == _fingerprint(
        build(Scenario(scenario.plan, copy.deepcopy(request))))


# --------------------------------------------------------------------------------- security

@PROPERTY
@given(scenarios())
def test_untrusted_text_never_in_system_or_user_role(scenario: Scenario) -> None:
    ctx = built(scenario)
    if ctx is None:
        return
    for index, message in enumerate(ctx.to_messages("openai")):
        if message["role"] in ("system", "user"):
            assert UNTRUSTED_TAG not in (message["content"] or ""), (
                f"untrusted text in messages[{index}] ({message['role']})")
    anthropic = anthropic_request(ctx)
    if anthropic is None:
        return
    assert UNTRUSTED_TAG not in anthropic.get("system", "")
    for message in anthropic["messages"]:  # a digest is fenced data in the assistant's voice
        for block in message["content"]:
            if block["type"] == "text" and message["role"] == "user":
                assert UNTRUSTED_TAG not in block["text"]


@PROPERTY
@given(scenarios())
def test_untrusted_text_is_fenced_and_cannot_close_its_fence(scenario: Scenario) -> None:
    ctx = built(scenario)
    if ctx is None:
        return
    for index, message in enumerate(ctx.to_messages("openai")):
        if message["role"] != "tool":
            continue
        head, _, rest = message["content"].partition("\n")
        assert head.startswith("<<data ") and head.endswith(">>"), f"messages[{index}] unfenced"
        marker = head.split()[1]
        body, _, tail = rest.rpartition("\n")
        assert tail == f"<<end {marker}>>", f"messages[{index}] fence not closed"
        assert f"<<end {marker}>>" not in body, f"messages[{index}] closes its own fence early"
        assert "<|" not in body, f"messages[{index}] keeps a special-token look-alike"


@PROPERTY
@given(scenarios())
def test_content_cannot_forge_a_separator_or_speaker_in_the_text_rendering(
        scenario: Scenario) -> None:
    ctx = built(scenario)
    if ctx is None:
        return
    try:
        text = ctx.to_text()
    except ValidationError as exc:  # over budget: test_text_rendering_never_exceeds_available
        assume("over the available" not in str(exc))
        raise
    runs = [s for i, s in enumerate(p.section for p in ctx.system_parts)
            if i == 0 or ctx.system_parts[i - 1].section != s]
    bodies = [s for m, s in zip(ctx.messages, ctx.sections, strict=True) if m.role != "system"]
    runs += ["tools"] * bool(ctx.schema_jsons)
    runs += [s for i, s in enumerate(bodies) if i == 0 or bodies[i - 1] != s]
    lines = [line.strip() for line in text.splitlines()]
    separators = [line for line in lines if line.startswith("===")]
    assert len(separators) == len(runs), f"separators {separators} for parts {runs}"
    speaker = re.compile(rf"^(?:{'|'.join(SPEAKERS[ctx.language])})\s*[:：]", re.IGNORECASE)
    speakers = [line for line in lines if speaker.match(line)]
    assert len(speakers) == len(bodies), f"{len(speakers)} speaker lines for {len(bodies)} messages"


# ------------------------------------------------------------------------------- the report

@PROPERTY
@given(scenarios())
def test_report_agrees_with_the_context(scenario: Scenario) -> None:
    ctx = built(scenario)
    if ctx is None:
        return
    tokens = openai_tokens(ctx.to_request("openai"))
    assert ctx.total_tokens == ctx.report.total_tokens == tokens
    rows = {row.source: row for row in ctx.report.sources}
    for source in ("history", "tool_results", "rag"):
        if source in rows:
            assert rows[source].items == ctx.sections.count(source), source
    if "tools" in rows:
        assert rows["tools"].items == len(ctx.tool_schemas)
    for decision in ctx.report.decisions:
        assert decision.reason, f"decision without a reason: {decision}"


@PROPERTY
@given(scenarios())
def test_well_formed_input_has_no_key_conflicts(scenario: Scenario) -> None:
    # Built-in sources over a well-formed request never produce one key twice: a strict plan
    # must not raise, and no conflict may be reported.
    ctx = built(scenario)
    if ctx is None:
        return
    conflicts = [d for d in ctx.report.decisions if d.action == "conflict"]
    assert not conflicts, f"spurious key conflicts: {conflicts}"


# ------------------------------------------------ examples: minimal cases of what the properties
# found (they state the spec, so they fail until the library is fixed)

def _call(call_id: str, name: str = "get_weather") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def test_call_with_a_missing_result_keeps_its_place_in_history() -> None:
    history = [
        {"role": "user", "content": "weather in Paris and Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1"), _call("c2")]},
        {"role": "tool", "tool_call_id": "c1", "content": "Paris: sunny"},
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": "you're welcome"},
    ]
    ctx = BUILDER.build(BuildPlan.named("chat"),
                        Request(user_input="and tomorrow?", system="Be brief.", history=history))
    messages = ctx.to_messages("openai")
    assert [m["role"] for m in messages] == [
        "system", "user", "assistant", "tool", "tool", "user", "assistant", "user"]
    assert MISSING_RESULT in messages[4]["content"]
    assert not [d for d in ctx.report.decisions if d.action == "conflict"]
    assert not ctx.report.warnings


def test_rounds_beyond_max_rounds_are_reported() -> None:
    history = []
    for i in range(6):
        history += [{"role": "user", "content": f"question {i}"},
                    {"role": "assistant", "content": f"answer {i}"}]
    plan = (BuildPlan.builder("four_rounds").add("system", 0.2)
            .add("history", 0.5, options={"max_rounds": 4}).add("user", 0.3).build())
    ctx = BUILDER.build(plan, Request(user_input="hi", system="Be brief.", history=history))
    contents = [m["content"] for m in ctx.to_messages("openai")]
    assert "question 1" not in contents
    decisions = decisions_by_key(ctx.report.decisions)
    unread = sum(d.count for d in ctx.report.decisions if d.key == "history.*")
    for index in range(4):
        assert index < unread or decisions.get(f"history.m{index}"), (
            f"history.m{index} left out without a decision")
    row = next(r for r in ctx.report.sources if r.source == "history")
    assert row.dropped == 4


def test_report_does_not_depend_on_earlier_builds() -> None:
    # A tool result long enough to be counted in pieces (> 32,000 characters).
    text = "\n".join(f"line {i}: the refund for order A-{i:05d} was approved."
                     for i in range(4000))
    turn = [{"role": "assistant", "content": None, "tool_calls": [_call("c1", "search_orders")]},
            {"role": "tool", "tool_call_id": "c1", "content": text}]
    request = Request(user_input="which refunds were approved?", system="Be brief.", turn=turn)
    small = BuildPlan.named("tool_heavy").with_budget(available_override=600)
    large = BuildPlan.named("tool_heavy").with_budget(available_override=200_000)
    before = _fingerprint(BUILDER.build(small, copy.deepcopy(request)))
    BUILDER.build(large, copy.deepcopy(request))
    after = _fingerprint(BUILDER.build(small, copy.deepcopy(request)))
    assert before == after


@pytest.mark.parametrize("plan_name", ["chat", "rag_qa"])
def test_build_succeeds_when_exactly_the_never_cut_parts_fit(plan_name: str) -> None:
    # The build fails only if system prompt + input alone exceed the budget. Here
    # they fit exactly; everything else (a document that cannot fit, for rag_qa) is dropped.
    request = Request(user_input="What is the refund window?", system="Answer briefly.",
                      documents=[Document(id="d1", text="Refunds within 30 days. " * 200)])
    plan = BuildPlan.named(plan_name)
    needed = never_cut_tokens(plan, request)
    ctx = BUILDER.build(plan.with_budget(available_override=needed), request)
    assert [m["content"] for m in ctx.to_messages("openai")] == [
        request.system, request.user_input]


def test_text_rendering_of_a_markdown_document_fits_available() -> None:
    headings = "\n".join(f"# {i} Refund policy" for i in range(300))
    request = Request(user_input="What does the refund policy say?", system="Be brief.",
                      documents=[Document(id="policy.md", text=headings)])
    ctx = BUILDER.build(BuildPlan.named("doc_analysis").with_budget(available_override=1000),
                        request, target="text")
    assert count(ctx.to_text()) <= 1000
    chat = BUILDER.build(BuildPlan.named("doc_analysis").with_budget(available_override=1000),
                         request)
    with pytest.raises(ValidationError):
        chat.to_text()


def test_unread_history_is_counted_even_when_what_was_read_is_a_duplicate() -> None:
    # The newest history message repeats the input (a double injection) and is de-duplicated; the
    # greeting before it is never read. The report must say one message was not read.
    request = Request(user_input="What is my order status?", system="Be brief.", history=[
        {"role": "assistant", "content": "Hello! How can I help you today with your order?"},
        {"role": "user", "content": "What is my order status?"},
    ])
    ctx = BUILDER.build(BuildPlan.named("chat").with_budget(available_override=32), request)
    decisions = decisions_by_key(ctx.report.decisions)
    assert [d.action for d in decisions["history.m1"]] == ["deduplicated"]
    unread = sum(d.count for d in decisions.get("history.*", []))
    assert unread == 1 or decisions.get("history.m0"), "history.m0 left out without a count"


def test_anthropic_tool_use_input_is_an_object() -> None:
    # Anthropic requires tool_use.input to be an object; JSON arguments that are not an object
    # must be refused at the input (a typed error) or rendered as an object.
    turn = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": "null"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "10:00"}]
    try:
        ctx = BUILDER.build(BuildPlan.named("tool_heavy"), Request(user_input="time?", turn=turn))
    except InvalidInputError:
        return
    blocks = [b for m in ctx.to_request("anthropic")["messages"] for b in m["content"]]
    assert all(isinstance(b["input"], dict) for b in blocks if b["type"] == "tool_use")
