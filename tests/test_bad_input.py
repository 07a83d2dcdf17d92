"""Bad input gets a clear, typed error from the one error tree, and loses nothing.

Every failure is an error of ``contextwright.errors`` (never a stray ``KeyError`` or
``UnicodeEncodeError``), names the field rather than echoing the payload, and leaves the caller's
request untouched. Sources that raise are isolated when optional and fail the build when required.
Oversized input finishes well under a second with a clear outcome.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from contextwright import (
    BudgetError,
    BuildPlan,
    BuildReport,
    ContextBuilder,
    ContextItem,
    ContextwrightError,
    Document,
    InvalidInputError,
    KeyConflictError,
    Layer,
    Message,
    PlanError,
    Request,
    SourceError,
)
from contextwright import errors as error_tree
from contextwright.tokens import get_tokenizer

SECRET = "sk-SECRET-4f9a1c"
"""Put into bad input; must never show up in an error message."""
QUESTION = "What is the weather in Shanghai?"
TOOL_HEAVY = BuildPlan.named("tool_heavy")
MB = 1_000_000


def call(call_id: str = "c1", arguments: Any = '{"city": "上海"}') -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": "get_weather", "arguments": arguments}}]}


def result(content: str, call_id: str = "c1") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def expect_error(error: type[Exception], request: Request,
                 plan: BuildPlan = TOOL_HEAVY, builder: ContextBuilder | None = None
                 ) -> ContextwrightError:
    """Build, expecting ``error``; the request must come back unchanged and no secret echoed."""
    before = copy.deepcopy(request)
    with pytest.raises(error) as caught:
        (builder or ContextBuilder()).build(plan, request)
    assert isinstance(caught.value, ContextwrightError)
    assert SECRET not in str(caught.value)
    assert request == before, "a failed build changed the caller's request"
    return caught.value


def test_every_library_error_descends_from_one_root() -> None:
    for name in error_tree.__all__:
        assert issubclass(getattr(error_tree, name), error_tree.ContextwrightError)


# --- malformed messages ----------------------------------------------------------------------

BAD_MESSAGES = {
    "unknown role in history": {"history": [{"role": "admin", "content": SECRET}]},
    "unknown role in turn": {"turn": [{"role": "moderator", "content": SECRET}]},
    "missing role": {"history": [{"content": SECRET}]},
    "message that is not an object": {"history": [SECRET]},
    "tool calls on a user message": {"history": [
        {"role": "user", "content": SECRET, "tool_calls": call()["tool_calls"]}]},
    "tool message without tool_call_id": {
        "turn": [call(), {"role": "tool", "content": SECRET}]},
    "orphan tool result in history": {"history": [
        {"role": "user", "content": "hi"}, result(SECRET),
        {"role": "assistant", "content": "ok"}]},
    "tool result opening the history": {"history": [result(SECRET)]},
    "orphan tool result in turn": {"turn": [result(SECRET)]},
    "tool result answering another call": {"turn": [call("c1"), result(SECRET, "c2")]},
    "one call answered twice": {"turn": [call("c1"), result(SECRET), result(SECRET)]},
    "malformed JSON arguments in history": {"history": [
        {"role": "user", "content": "hi"}, call(arguments='{"city": "' + SECRET),
        result("cloudy")]},
    "malformed JSON arguments in turn": {"turn": [call(arguments="{city: " + SECRET + "}"),
                                                   result("cloudy")]},
    "non-string arguments": {"turn": [call(arguments=[SECRET]), result("cloudy")]},
    "non-text content part": {"history": [
        {"role": "user", "content": [{"type": "image_url", "image_url": SECRET}]}]},
}


@pytest.mark.parametrize("fields", list(BAD_MESSAGES.values()), ids=list(BAD_MESSAGES))
def test_malformed_message_is_a_typed_error_without_partial_output(fields: dict[str, Any]) -> None:
    expect_error(InvalidInputError, Request(user_input=QUESTION, **fields))


def test_unknown_role_error_names_the_message() -> None:
    error = expect_error(InvalidInputError, Request(user_input=QUESTION, history=[
        {"role": "user", "content": "hi"}, {"role": "admin", "content": SECRET}]))
    assert "history[1]" in str(error)
    assert "role" in str(error)


# --- invalid Unicode -------------------------------------------------------------------------

LONE = "\ud800"

SURROGATES = {
    "user input": {"user_input": f"{SECRET}{LONE}"},
    "system prompt": {"system": f"{SECRET}{LONE}"},
    "history content": {"history": [{"role": "user", "content": f"{SECRET}{LONE}"}]},
    "turn tool result": {"turn": [call(), result(f"{SECRET}\udfff")]},
    "tool call arguments": {"turn": [call(arguments='{"city": "x' + LONE + '"}'),
                                      result("cloudy")]},
    "content part text": {"history": [
        {"role": "user", "content": [{"type": "text", "text": f"{SECRET}{LONE}"}]}]},
}


@pytest.mark.parametrize("fields", list(SURROGATES.values()), ids=list(SURROGATES))
def test_lone_surrogate_is_rejected(fields: dict[str, Any]) -> None:
    request = Request(**{"user_input": QUESTION, **fields})
    error = expect_error(InvalidInputError, request)
    assert "Unicode" in str(error)


EVERY_SOURCE = (BuildPlan.builder("every_source").add("system").add("env").add("tools")
                .add("examples").add("notes").add("history").add("user").add("tool_results")
                .add("rag").build())

SURROGATES_ELSEWHERE = {
    "document text": {"documents": [Document(id="d", text=f"a{LONE}")]},
    "document source label": {"documents": [Document(id="d", text="a", source=f"s{LONE}")]},
    "document id": {"documents": [Document(id=f"d{LONE}", text="a")]},
    "environment value": {"env": {"city": f"上海{LONE}"}},
    "environment key": {"env": {f"city{LONE}": "上海"}},
    "note": {"notes": [f"n{LONE}"]},
    "example": {"examples": [{"input": f"i{LONE}", "output": "o"}]},
    "tool schema": {"tools": [{"type": "function", "function": {
        "name": "get_weather", "description": f"weather{LONE}"}}]},
    "tool message name": {"turn": [call(), {**result("cloudy"), "name": f"w{LONE}"}]},
}


@pytest.mark.parametrize("fields", list(SURROGATES_ELSEWHERE.values()),
                         ids=list(SURROGATES_ELSEWHERE))
def test_lone_surrogate_anywhere_in_the_request_is_rejected(fields: dict[str, Any]) -> None:
    # Whatever the field, text that cannot be encoded as UTF-8 must not reach a provider.
    expect_error(InvalidInputError, Request(user_input=QUESTION, **fields), EVERY_SOURCE)


# --- oversized input -------------------------------------------------------------------------

TEN_MB_TEXT = ("The quick brown fox jumps over the lazy dog. 敏捷的棕色狐狸跳过了懒狗。\n"
               * 200_000)[: 10 * MB]


def ten_mb_json(tag: str) -> str:
    """A 10 MB JSON tool result (unique per call, so no cache can help)."""
    entries: list[str] = []
    size = 2
    while size < 10 * MB:
        entries.append(f'"{tag}_sensor_{len(entries)}": {len(entries)}')
        size += len(entries[-1]) + 2
    return "{" + ", ".join(entries) + "}"


class TallyTokenizer:
    """The real o200k tokenizer, counting how many characters it is asked to encode.

    "Quickly" is checked as work, not seconds: an oversized message must not be tokenised
    whole (wall-clock limits belong in bench/, and fail on a loaded machine).
    """

    def __init__(self) -> None:
        self.inner = get_tokenizer("o200k_base")
        self.chars = 0

    @property
    def name(self) -> str:
        return f"o200k_base-tally-{id(self)}"

    @property
    def exact(self) -> bool:
        return True

    def count(self, text: str) -> int:
        self.chars += len(text)
        return self.inner.count(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        self.chars += min(len(text), max_tokens * 8)
        return self.inner.truncate(text, max_tokens)


WORK_LIMIT_CHARS = MB
"""An oversized part may be tokenised up to this many characters (a tenth of it)."""


@pytest.fixture
def warm_builder() -> ContextBuilder:
    return ContextBuilder(tokenizer=TallyTokenizer())


def timed_build(builder: ContextBuilder, plan: BuildPlan, request: Request) -> Any:
    """The build's outcome and the characters it tokenised."""
    tally = builder.tokenizer.inner
    assert isinstance(tally, TallyTokenizer)
    tally.chars = 0
    try:
        return builder.build(plan, request), tally.chars
    except ContextwrightError as exc:
        return exc, tally.chars


def big_history(kind: str, tag: str) -> list[dict[str, Any]]:
    older = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi!"}]
    if kind == "user message":
        return [*older, {"role": "user", "content": TEN_MB_TEXT},
                {"role": "assistant", "content": "that was long"}]
    if kind == "assistant message":
        return [*older, {"role": "user", "content": "write a lot"},
                {"role": "assistant", "content": TEN_MB_TEXT}]
    if kind == "plain tool result":
        return [*older, {"role": "user", "content": "fetch"}, call(), result(TEN_MB_TEXT),
                {"role": "assistant", "content": "fetched"}]
    return [*older, {"role": "user", "content": "readings?"}, call(),
            result(ten_mb_json(tag)), {"role": "assistant", "content": "ok"}]


@pytest.mark.parametrize("plan_name", ["chat", "tool_heavy"])
@pytest.mark.parametrize("kind", ["user message", "assistant message", "plain tool result",
                                  "JSON tool result"])
def test_ten_megabyte_history_message_is_cut_or_dropped_quickly(
        warm_builder: ContextBuilder, kind: str, plan_name: str) -> None:
    plan = BuildPlan.named(plan_name)
    request = Request(user_input=QUESTION, history=big_history(kind, plan_name))
    outcome, work = timed_build(warm_builder, plan, request)
    assert work < WORK_LIMIT_CHARS, f"tokenised {work:,} characters"
    assert not isinstance(outcome, Exception), f"{type(outcome).__name__}: {outcome}"
    cut = [d for d in outcome.report.decisions
           if d.source == "history" and d.action in ("truncated", "dropped")]
    assert cut, "the oversized message left no decision in the report"
    assert outcome.total_tokens <= plan.budget.available
    assert sum(len(m["content"] or "") for m in outcome.to_messages()) < MB


def test_ten_megabyte_tool_result_this_turn_is_cut_quickly(warm_builder: ContextBuilder) -> None:
    request = Request(user_input=QUESTION, turn=[call(), result(ten_mb_json("turn"))])
    outcome, work = timed_build(warm_builder, TOOL_HEAVY, request)
    assert work < WORK_LIMIT_CHARS, f"tokenised {work:,} characters"
    assert not isinstance(outcome, Exception), f"{type(outcome).__name__}: {outcome}"
    assert any(d.source == "tool_results" and d.action in ("truncated", "dropped")
               for d in outcome.report.decisions)


@pytest.mark.parametrize("field", ["user_input", "system"])
def test_ten_megabyte_never_cut_part_is_a_budget_error_with_the_report(
        warm_builder: ContextBuilder, field: str) -> None:
    fields = {"user_input": QUESTION, field: TEN_MB_TEXT}
    outcome, work = timed_build(warm_builder, TOOL_HEAVY, Request(**fields))
    assert work < WORK_LIMIT_CHARS, f"tokenised {work:,} characters"
    assert isinstance(outcome, BudgetError)
    assert isinstance(outcome.report, BuildReport)
    row = next(r for r in outcome.report.sources if r.source == field.split("_")[0])
    assert row.tokens > TOOL_HEAVY.budget.available
    assert TEN_MB_TEXT[:200] not in str(outcome)


def test_deeply_nested_json_tool_result_loses_nothing(warm_builder: ContextBuilder) -> None:
    # Hostile JSON (10 kB of nesting) must not take the whole history down with it.
    hostile = "[" * 5_000 + "]" * 5_000
    history = [{"role": "user", "content": "remember: my order is A-1001"},
               {"role": "assistant", "content": "Noted, order A-1001."},
               {"role": "user", "content": "fetch it"}, call(), result(hostile),
               {"role": "assistant", "content": "fetched"}]
    ctx = warm_builder.build(TOOL_HEAVY, Request(user_input=QUESTION, history=history))
    assert ctx.report.warnings == ()
    contents = [m["content"] or "" for m in ctx.to_messages()]
    assert any("A-1001" in c for c in contents)
    assert any(m["role"] == "tool" for m in ctx.to_messages())


# --- sources that fail -----------------------------------------------------------------------

class FailingSource:
    """Raises after offering one item (so a partial contribution would show)."""

    namespace = "flaky"

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterable[ContextItem]:
        yield ContextItem(key="flaky.partial", layer=Layer.NOTES,
                          message=Message(role="system", content="PARTIAL-ITEM"))
        raise RuntimeError(f"backend down ({SECRET})")


class StaticSource:
    """Offers the given items under the given namespace."""

    def __init__(self, namespace: str, items: list[ContextItem]) -> None:
        self.namespace = namespace
        self.items = items

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterable[ContextItem]:
        return list(self.items)


def note(key: str, content: str, priority: int = 0) -> ContextItem:
    return ContextItem(key=key, layer=Layer.NOTES, priority=priority,
                       message=Message(role="system", content=content))


def plan_with(source: str, required: bool = False, strict: bool = False) -> BuildPlan:
    builder = BuildPlan.builder("with_" + source).add("system").add(source, required=required)
    builder = builder.add("user")
    return (builder.strict() if strict else builder).build()


def rendered(ctx: Any) -> str:
    return json.dumps(ctx.to_messages(), ensure_ascii=False)


def test_failing_optional_source_is_isolated_and_reported() -> None:
    builder = ContextBuilder(sources=[FailingSource()])
    ctx = builder.build(plan_with("flaky"), Request(user_input=QUESTION, system="Be brief."))
    assert "PARTIAL-ITEM" not in rendered(ctx)
    assert "Be brief." in rendered(ctx)
    assert any("flaky" in warning for warning in ctx.report.warnings)
    row = next(r for r in ctx.report.sources if r.source == "flaky")
    assert row.error
    assert row.items == 0


class OptionRefusingSource:
    """Refuses its plan options, as a source checking values beyond its options model does."""

    namespace = "picky"

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterable[ContextItem]:
        raise PlanError("picky options: depth must be even")


def test_an_optional_source_refusing_its_options_fails_the_build() -> None:
    """A plan error is the caller's to fix: isolated like a backend failure, it built the
    context without that source (for rag: with no documents), the only sign a warning."""
    builder = ContextBuilder(sources=[OptionRefusingSource()])
    error = expect_error(PlanError, Request(user_input=QUESTION), plan_with("picky"), builder)
    assert "depth must be even" in str(error)


def test_failing_required_source_fails_the_build() -> None:
    builder = ContextBuilder(sources=[FailingSource()])
    error = expect_error(SourceError, Request(user_input=QUESTION),
                         plan_with("flaky", required=True), builder)
    assert "flaky" in str(error)


def test_required_source_is_declared_in_a_plan_file(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text("name: p\nsources:\n  - {source: flaky, required: true}\n"
                    "  - {source: user}\n", "utf-8")
    builder = ContextBuilder(sources=[FailingSource()])
    expect_error(SourceError, Request(user_input=QUESTION), BuildPlan.load(path), builder)


def test_keys_outside_the_source_namespace_are_rejected() -> None:
    hijack = StaticSource("custom", [note("custom.ok", "fine"),
                                     note("history.m0", "HIJACKED-HISTORY")])
    builder = ContextBuilder(sources=[hijack])
    ctx = builder.build(plan_with("custom"), Request(user_input=QUESTION))
    assert "HIJACKED-HISTORY" not in rendered(ctx)
    assert ctx.report.warnings, "the rejected key was dropped silently"
    expect_error(SourceError, Request(user_input=QUESTION),
                 plan_with("custom", required=True), builder)


@pytest.mark.parametrize("high_first", [True, False], ids=["high-first", "low-first"])
def test_key_produced_twice_keeps_the_higher_priority_with_a_warning(high_first: bool) -> None:
    low, high = note("custom.fact", "LOW-PRIORITY", 1), note("custom.fact", "HIGH-PRIORITY", 5)
    source = StaticSource("custom", [high, low] if high_first else [low, high])
    ctx = ContextBuilder(sources=[source]).build(plan_with("custom"),
                                                 Request(user_input=QUESTION))
    text = rendered(ctx)
    assert "HIGH-PRIORITY" in text
    assert "LOW-PRIORITY" not in text
    assert any("custom.fact" in warning for warning in ctx.report.warnings)
    assert any(d.action == "conflict" and d.key == "custom.fact" for d in ctx.report.decisions)


def test_key_produced_twice_in_a_strict_plan_raises() -> None:
    source = StaticSource("custom", [note("custom.fact", "a", 1), note("custom.fact", "b", 5)])
    error = expect_error(KeyConflictError, Request(user_input=QUESTION),
                         plan_with("custom", strict=True), ContextBuilder(sources=[source]))
    assert "custom.fact" in str(error)


def test_plan_naming_an_unregistered_source_fails_at_build() -> None:
    with pytest.raises(PlanError, match="nowhere"):
        ContextBuilder().build(plan_with("nowhere"), Request(user_input=QUESTION))


# --- bad plans -------------------------------------------------------------------------------

BAD_PLAN_FILES = [
    ("plan.yaml", "name: p\nsources:\n  - {source: system, weight: -1}\n", "weight"),
    ("plan.yaml", "name: p\nsources:\n  - {source: system, wieght: 1}\n", "wieght"),
    ("plan.yml", "name: p\nsources:\n  - {source: history, strategy: shred}\n", "strategy"),
    ("plan.yaml", "name: p\nsources: []\n", "sources"),
    ("plan.yaml", "name: p\nsources:\n  - {source: history, min_tokens: 50, max_tokens: 10}\n",
     "min_tokens"),
    ("plan.toml", 'name = "p"\n[budget]\nwindow = "large"\n[[sources]]\nsource = "user"\n',
     "budget.window"),
    ("plan.toml", 'name = "p"\n[budget]\nsafety_ratio = 1.5\n[[sources]]\nsource = "user"\n',
     "budget.safety_ratio"),
    ("plan.json", json.dumps({"name": "p", "sources": [{"source": "user", "cuttable": "often"}]}),
     "cuttable"),
    ("plan.json", json.dumps({"sources": [{"source": "user"}]}), "name"),
    ("plan.json", json.dumps({"name": "p", "sources": [{"source": "user"}],
                              "repeat_questions": True}), "repeat_questions"),
]


@pytest.mark.parametrize(("filename", "text", "field"), BAD_PLAN_FILES,
                         ids=[f"{n}:{f}" for n, _, f in BAD_PLAN_FILES])
def test_bad_plan_file_fails_at_load_naming_the_field(tmp_path: Path, filename: str, text: str,
                                                      field: str) -> None:
    path = tmp_path / filename
    path.write_text(text, "utf-8")
    with pytest.raises(PlanError) as caught:
        BuildPlan.load(path)
    assert field in str(caught.value)


@pytest.mark.parametrize(("filename", "text"), [
    ("plan.yaml", "name: p\nsources: [\n"),
    ("plan.toml", "name = \n"),
    ("plan.json", "{not json"),
    ("plan.ini", "[plan]\nname = p\n"),
])
def test_unreadable_plan_file_is_a_plan_error(tmp_path: Path, filename: str, text: str) -> None:
    path = tmp_path / filename
    path.write_text(text, "utf-8")
    with pytest.raises(PlanError):
        BuildPlan.load(path)


def test_missing_plan_file_is_a_plan_error(tmp_path: Path) -> None:
    with pytest.raises(PlanError):
        BuildPlan.load(tmp_path / "absent.yaml")


def test_unknown_shipped_plan_name_is_a_plan_error() -> None:
    with pytest.raises(PlanError, match="no_such_plan"):
        BuildPlan.named("no_such_plan")


def test_bad_plan_in_code_names_the_field() -> None:
    with pytest.raises(PlanError, match="weight"):
        BuildPlan.builder().add("system", weight=-2).add("user").build()


# --- Request.from_dict -----------------------------------------------------------------------

BAD_REQUESTS = [
    ({"system": SECRET}, "user_input"),
    ({"user_input": [SECRET]}, "user_input"),
    ({"user_input": "hi", "usr_input": SECRET}, "usr_input"),
    ({"user_input": "hi", "history": SECRET}, "history"),
    ({"user_input": "hi", "history": [SECRET]}, "history.0"),
    ({"user_input": "hi", "documents": [{"text": SECRET}]}, "documents.0.id"),
    ({"user_input": "hi", "documents": [{"id": "d", "text": "t", "score": SECRET}]},
     "documents.0.score"),
    ({"user_input": "hi", "env": {"time": [SECRET]}}, "env.time"),
    ({"user_input": "hi", "notes": [SECRET, 3]}, "notes.1"),
    ({"user_input": "hi", "history": [{"role": "root", "content": SECRET}]}, "history[0].role"),
    ({"user_input": "hi", "turn": [call(arguments="{" + SECRET)]}, "turn[0].tool_calls[0]"),
    ({"user_input": f"{SECRET}{LONE}"}, "user_input"),
    ({"user_input": "hi", "examples": [{"inpt": SECRET, "outptu": "4"}]}, "examples.0.inpt"),
    ({"user_input": "hi", "examples": [{"input": SECRET}]}, "examples.0.output"),
    ({"user_input": "hi", "examples": [{"input": SECRET, "output": 4}]}, "examples.0.output"),
]


@pytest.mark.parametrize(("data", "field"), BAD_REQUESTS, ids=[f for _, f in BAD_REQUESTS])
def test_request_from_dict_rejects_bad_fields_by_name(data: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        Request.from_dict(data)
    message = str(caught.value)
    assert field in message
    assert SECRET not in message
    assert "\n" not in message


@pytest.mark.parametrize("data", [None, [], SECRET, 42])
def test_request_from_dict_rejects_non_objects(data: object) -> None:
    with pytest.raises(InvalidInputError) as caught:
        Request.from_dict(data)
    assert SECRET not in str(caught.value)


def test_request_from_dict_accepts_the_example_request() -> None:
    path = Path(__file__).parent.parent / "examples" / "request.json"
    request = Request.from_dict(json.loads(path.read_text("utf-8")))
    assert request.user_input


@pytest.mark.parametrize(("fields", "message"), [
    ({"history": ({"role": "user", "content": "x"} for _ in range(1))}, "history must be a list"),
    ({"history": {"role": "user", "content": "x"}}, "history must be a list"),
    ({"turn": "not a list"}, "turn must be a list"),
    ({"notes": "one note"}, "notes must be a list"),
    ({"env": [("time", "now")]}, "env must be an object"),
    ({"documents": [{"id": "d"}]}, "documents[0]"),
])
def test_request_of_the_wrong_shape_is_refused_at_once(fields: dict[str, Any],
                                                       message: str) -> None:
    # Not an isolated source failure that silently loses the history: a typed error.
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        Request(user_input="hi", **fields)


@pytest.mark.parametrize(("example", "message"), [
    ({"inpt": "2+2", "output": "4"}, "examples[0]: unknown field 'inpt'"),
    ({"input": "2+2"}, "examples[0].output is missing"),
    ({"input": "2+2", "output": None}, "examples[0].output must be a string"),
    ("2+2 is 4", "examples[0] must be an object"),
])
def test_an_example_is_input_and_output_and_nothing_else(example: object, message: str) -> None:
    # Read leniently, a misspelt key showed the model an empty example.
    request = Request(user_input="hi", examples=[example])  # type: ignore[list-item]
    for check in (request.validate, lambda: ContextBuilder().build(BuildPlan.named("chat"),
                                                                   request)):
        with pytest.raises(InvalidInputError, match=re.escape(message)):
            check()


def test_tool_schema_that_is_not_an_object_is_invalid_input() -> None:
    with pytest.raises(InvalidInputError, match=r"tools\[0\] must be an object"):
        ContextBuilder().build(BuildPlan.named("tool_heavy"),
                               Request(user_input="hi", tools=["get_weather"]))


def test_documents_given_as_mappings_are_accepted() -> None:
    request = Request(user_input="q?", documents=[{"id": "d1", "text": "Refunds: 30 days."}])
    ctx = ContextBuilder().build(BuildPlan.named("rag_qa"), request)
    assert any("30 days" in (m["content"] or "") for m in ctx.to_messages())


def test_a_part_far_over_the_budget_is_reported_as_counted_in_part_with_an_estimate() -> None:
    text = "hello world " * 300_000  # 600,001 o200k tokens
    with pytest.raises(BudgetError) as raised:
        ContextBuilder(tokenizer="o200k_base").build(BuildPlan.named("chat"),
                                                     Request(user_input=text))
    report = raised.value.report
    user = next(row for row in report.sources if row.source == "user")
    assert user.tokens < 600_000  # counting stopped past the budget: not tokenized whole
    (warning,) = [w for w in report.warnings if "counting stopped" in w]
    estimate = int(re.search(r"about ([\d,]+) tokens", warning)[1].replace(",", ""))  # type: ignore[index]
    assert 570_000 < estimate < 630_000
    assert warning in str(raised.value)


def test_an_item_cut_or_dropped_after_its_count_stopped_reports_its_whole_size() -> None:
    log = "hello world " * 100_000  # 200,001 o200k tokens, far over the budget
    request = Request(user_input="q", history=[
        {"role": "user", "content": "show the log"}, {"role": "assistant", "content": log}])
    ctx = ContextBuilder(tokenizer="o200k_base").build(
        BuildPlan.named("chat").with_budget(available_override=2_000), request)
    (cut,) = [d for d in ctx.report.decisions if d.key == "history.m1"]
    assert cut.action in ("truncated", "dropped")
    assert 180_000 < cut.tokens_before < 220_000  # not the ~10,000 counted before stopping
    assert re.search(r"about [\d,]+ tokens in all \(estimated from its length: counting "
                     r"stopped at [\d,]+, past the budget\)", cut.reason)
