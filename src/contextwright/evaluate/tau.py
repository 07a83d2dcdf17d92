"""τ-bench airline: tool-pair integrity and id-fact survival under a history budget.

Metric 2 of ``../shared/data/README.md`` (``bench/tau_pairs.py`` runs it with plan variants). A
folder is laid out like ``tau-bench-airline-dev``: ``airline_policy_wiki.md``,
``gpt-4o-airline-dev.json`` and ``required_facts.jsonl``.

Case → request: the conversation is ``traj[1:cut_index]`` (``traj[1:]`` when ``cut_index`` is
null); its last user message is the user input, the messages before it the history, the tool
calls and results after it this turn; the policy is the system prompt. The budget B covers the
conversation: the plan's ``tool_results`` is capped at B minus the user input, a probe build
measures what this turn takes, and ``history`` is capped at what is left; ``available`` is set
well above so the weighted shares never bind.

Metrics on the rendered messages: ``fact_survival`` (id-like facts first seen in a user or tool
message whose value appears verbatim, pooled over all facts), ``pair_integrity`` (share of
builds whose every tool result directly follows its call and every call has a result),
``placeholders`` (placeholder results per build) and ``tokens`` (conversation tokens, system
prompt excluded, counted alike for both sides). The baseline keeps the system prompt and the
most recent whole messages of the conversation that fit B.

Choices. The library needs a user input, so the conversation's last user message is it (the
agent's next call answers it). 21 rows have no ``cut_index`` (the agent never performed the
write); their whole trajectory is used, and ``bench/tau_pairs.py`` also reports the 39 rows that
have one. No tool schemas are passed (the file has none). A placeholder result for a call whose
result was lost counts as intact (it is reported in ``placeholders``). About the data README's
reference (recency ≈ 0.74 @1,000 and 0.93 @2,000, chars/4 estimate): the baseline here gives
about 0.56 / 0.71 with o200k_base, and a chars/4 count of the same rule about 0.63 / 0.78, so the
reference was computed some other way; compare with the baseline column.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from contextwright.builder import ContextBuilder
from contextwright.core.covering import covering
from contextwright.core.final import FinalContext
from contextwright.core.plan import BuildPlan, FrozenOptions
from contextwright.core.request import Request
from contextwright.errors import ContextwrightError, DatasetError
from contextwright.evaluate import baseline
from contextwright.evaluate._files import (
    Row,
    get,
    line_of,
    read_json,
    read_jsonl_lines,
    read_text,
    require_files,
    spread,
)
from contextwright.evaluate.metrics import (
    MESSAGE_COST,
    Count,
    Msg,
    context_text,
    context_tokens,
    message_tokens,
    pair_problems,
)
from contextwright.evaluate.records import CaseOutcome, ExpectedCall, Ratio, Scores
from contextwright.evaluate.render import failure, render
from contextwright.sources.conversation import MISSING_RESULT

LAYOUT = "../shared/data/tau-bench-airline-dev"
FILES = ("airline_policy_wiki.md", "gpt-4o-airline-dev.json", "required_facts.jsonl")
FACT_ROLES = frozenset(("user", "tool"))
METRICS = ("fact_survival", "pair_integrity", "placeholders", "tokens")
BUDGETS = (500, 1000, 2000)
TARGETS: Mapping[int, Mapping[str, float]] = MappingProxyType({
    500: {"pair_integrity": 1.0},
    1000: {"fact_survival": 0.97, "pair_integrity": 1.0},
    2000: {"pair_integrity": 1.0},
})
# Room above system + 2·B + user input so the plan's weighted shares never bind, only the caps.
SLACK = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class TauCase:
    """One trajectory prepared for a build."""

    traj_index: int
    """Index of the trajectory in ``gpt-4o-airline-dev.json``."""
    has_cut: bool
    """Whether ``cut_index`` was given (else the whole trajectory is the conversation)."""
    conversation: tuple[Msg, ...]
    """``traj[1:cut]``: what both contextwright and the baseline draw on."""
    history: tuple[Msg, ...]
    """Messages before the last user message."""
    user_input: str
    """The last user message's text."""
    turn: tuple[Msg, ...]
    """Tool calls and results after the last user message."""
    facts: tuple[str, ...]
    """Values of the id-like facts first seen in a user or tool message."""
    expected_call: ExpectedCall | None = None
    """The write the agent should make next (at ``cut_index``): the row's ground-truth action
    of that name (``gt_actions``), else the recorded call itself; None without a cut."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TauSet:
    """The loaded folder."""

    policy: str
    """The system prompt."""
    cases: tuple[TauCase, ...]
    """One case per row of ``required_facts.jsonl``."""
    tools: tuple[Mapping[str, Any], ...] = ()
    """Tool schemas inferred from every call and ground-truth action of the folder (the file
    has none); sent with the context when a model is asked for the next call."""


def load_tau(folder: Path, limit: int | None = None) -> TauSet:
    """Load a folder laid out like ``tau-bench-airline-dev``; ``limit``: that many rows, spread.

    Every row is checked (they all feed the inferred tool schemas); a ``DatasetError`` names a
    row of ``required_facts.jsonl`` by its path and line, a trajectory by its index.
    """
    require_files(folder, FILES, LAYOUT)
    policy = read_text(folder / FILES[0])
    trajectories_path = folder / FILES[1]
    trajectories = read_json(trajectories_path)
    if not isinstance(trajectories, list):
        raise DatasetError(f"{trajectories_path}: expected a list of trajectories")
    facts_path = folder / FILES[2]
    rows = read_jsonl_lines(facts_path)
    cases = tuple(_case(row, line_of(facts_path, line), trajectories, trajectories_path)
                  for line, row in rows)
    return TauSet(policy=policy, cases=spread(cases, limit),
                  tools=infer_tools(trajectories, [row for _, row in rows]))


def _case(row: Row, where: str, trajectories: Sequence[Any], trajectories_path: Path
          ) -> TauCase:
    index = get(row, "traj_index", int, where)
    if not 0 <= index < len(trajectories):
        raise DatasetError(f"{where}: traj_index is outside {FILES[1]} (it holds "
                           f"{len(trajectories)} trajectories, from 0)")
    traj = get(trajectories[index], "traj", list, f"{trajectories_path}[{index}]")
    cut = _cut_index(row, len(traj), where)
    conversation = tuple(traj[1:cut] if cut is not None else traj[1:])
    history, user_input, turn = split_conversation(conversation, where)
    facts = tuple(str(get(fact, "value", (str, int, float), f"{where}: facts[{i}]"))
                  for i, fact in enumerate(_objects(row, "facts", where, required=True))
                  if fact.get("id_like") and fact.get("first_msg_role") in FACT_ROLES)
    _objects(row, "gt_actions", where)  # checked for every row: all of them feed the tools
    return TauCase(traj_index=index, has_cut=cut is not None, conversation=conversation,
                   history=history, user_input=user_input, turn=turn, facts=facts,
                   expected_call=None if cut is None else _expected_call(row, traj, cut, where))


def _cut_index(row: Row, length: int, where: str) -> int | None:
    """The row's ``cut_index``: None, or the index of a message of its trajectory.

    It must come after the system prompt and exist: a negative one would count from the end,
    and one past the end would cut nothing while the row claims a cut.
    """
    cut = row.get("cut_index")
    if cut is None:
        return None
    if not isinstance(cut, int) or isinstance(cut, bool):
        raise DatasetError(f"{where}: field 'cut_index' has the wrong type")
    if not 1 <= cut < length:
        raise DatasetError(f"{where}: cut_index must be 1 or more and below the trajectory's "
                           f"{length} messages")
    return cut


def _objects(row: Row, name: str, where: str, *, required: bool = False) -> list[Row]:
    """``row[name]``, a list of JSON objects (an empty one when absent and not required)."""
    if not required and row.get(name) is None:
        return []
    items: list[Any] = get(row, name, list, where)
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise DatasetError(f"{where}: {name}[{index}] is not an object")
    return items


def _expected_call(row: Row, traj: Sequence[Any], cut: int, where: str) -> ExpectedCall | None:
    """The ground-truth action named like the call at ``cut`` (else that call's arguments)."""
    message = traj[cut]
    calls = message.get("tool_calls") if isinstance(message, Mapping) else None
    if not calls or not isinstance(calls[0], Mapping):
        return None
    function = calls[0].get("function") or {}
    name = function.get("name")
    if not isinstance(name, str):
        raise DatasetError(f"{where}: the call at cut_index has no function name")
    for index, action in enumerate(_objects(row, "gt_actions", where)):
        if action.get("name") == name:
            kwargs = action.get("kwargs")
            if not isinstance(kwargs, Mapping):
                raise DatasetError(f"{where}: gt_actions[{index}].kwargs is not an object")
            return ExpectedCall(name=name, arguments=dict(kwargs))
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:
        raise DatasetError(f"{where}: the call at cut_index has arguments that are not "
                           "JSON") from None
    return ExpectedCall(name=name, arguments=arguments if isinstance(arguments, dict) else {})


def infer_tools(trajectories: Sequence[Any], rows: Sequence[Row]) -> tuple[dict[str, Any], ...]:
    """OpenAI tool schemas for every function the folder calls or names as a ground truth.

    Each has the argument names seen, typed by the values seen (the file ships no schemas).
    """
    seen: dict[str, dict[str, Any]] = {}
    for name, arguments in _calls_seen(trajectories, rows):
        properties = seen.setdefault(name, {})
        for key, value in arguments.items():
            properties.setdefault(str(key), json_schema_of(value))
    return tuple({"type": "function", "function": {
        "name": name, "description": f"{name} (argument names and types as seen in the data)",
        "parameters": {"type": "object", "properties": properties}}}
        for name, properties in sorted(seen.items()))


def _calls_seen(trajectories: Sequence[Any], rows: Sequence[Row]
                ) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for trajectory in trajectories:
        messages = trajectory.get("traj") if isinstance(trajectory, Mapping) else None
        for message in messages if isinstance(messages, list) else ():
            calls = message.get("tool_calls") if isinstance(message, Mapping) else None
            for call in calls if isinstance(calls, list) else ():
                function = call.get("function") if isinstance(call, Mapping) else None
                if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                    yield function["name"], _json_object(function.get("arguments"))
    for row in rows:
        for action in row.get("gt_actions") or ():
            if isinstance(action, Mapping) and isinstance(action.get("name"), str):
                kwargs = action.get("kwargs")
                yield action["name"], kwargs if isinstance(kwargs, Mapping) else {}


def _json_object(text: object) -> Mapping[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def json_schema_of(value: Any) -> dict[str, Any]:
    """A JSON schema of ``value``'s shape: objects and arrays recursively.

    An array is typed by its first item: OpenAI's function schemas need ``items`` on every array.
    """
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, Mapping):
        return {"type": "object",
                "properties": {str(k): json_schema_of(v) for k, v in value.items()}}
    if isinstance(value, list):
        return {"type": "array", "items": json_schema_of(value[0]) if value else {}}
    return {"type": "string"}


def split_conversation(conversation: Sequence[Msg], where: str = "conversation"
                       ) -> tuple[tuple[Msg, ...], str, tuple[Msg, ...]]:
    """(messages before the last user message, its text, messages after it)."""
    users = [i for i, m in enumerate(conversation) if isinstance(m, Mapping)
             and m.get("role") == "user"]
    if not users:
        raise DatasetError(f"{where}: the conversation has no user message")
    last = users[-1]
    content = conversation[last].get("content")
    return tuple(conversation[:last]), str(content or ""), tuple(conversation[last + 1:])


COMPRESSION_KEYS = ("tool_full", "tool_reduced", "tool_early", "tool_line_chars", "digest_share")
"""Options of the shipped ``tool_heavy`` that compress (tiers, digest of omitted turns)."""


def without_compression(base: BuildPlan) -> BuildPlan:
    """``base`` with the compressing options removed from history and this turn's results."""
    sources = tuple(
        replace(spec, options=FrozenOptions(
            {k: v for k, v in spec.options.items() if k not in COMPRESSION_KEYS}))
        if spec.source in ("history", "tool_results") else spec
        for spec in base.sources
    )
    return replace(base, sources=sources)


def with_history_options(base: BuildPlan, options: Mapping[str, Any]) -> BuildPlan:
    """``base`` with ``options`` added to its history and this turn's tool-result options.

    The tiers apply to both: an agent loop may make many calls in one turn. Recall options
    (``recall_*``) only concern history.
    """
    turn_options = {k: v for k, v in options.items() if not k.startswith("recall_")}
    added = {"history": options, "tool_results": turn_options}
    sources = tuple(
        replace(spec, options=FrozenOptions({**spec.options, **added[spec.source]}))
        if spec.source in added else spec
        for spec in base.sources
    )
    return replace(base, sources=sources)


def budget_plan(base: BuildPlan, history_max: int, turn_max: int, available: int) -> BuildPlan:
    """``base`` with the history and turn caps set (where present) and a large ``available``."""
    caps = {"history": history_max, "tool_results": turn_max}
    sources = tuple(
        replace(spec, max_tokens=caps[spec.source]) if spec.source in caps else spec
        for spec in base.sources
    )
    return replace(base, sources=sources).with_budget(available_override=available)


def build_tau(builder: ContextBuilder, base: BuildPlan, system: str, case: TauCase,
              budget: int) -> FinalContext:
    """The contextwright build of ``case``: user input and turn first, history in what is left."""
    request = Request(user_input=case.user_input, system=system, history=case.history,
                      turn=case.turn)
    return builder.build(history_budget_plan(builder, base, request, budget), request)


def history_budget_plan(builder: ContextBuilder, base: BuildPlan, request: Request,
                        budget: int) -> BuildPlan:
    """``base`` capped so the conversation of ``request`` (all but its system) fits ``budget``.

    This turn's input and tool activity are measured first (a probe build); history gets what
    is left. A function of the request alone, so a framework integration given it as its plan
    builds exactly what ``build_tau`` builds.
    """
    if base.add_missing_sources:  # the sources a build would add are capped like the others
        base = covering(base, request)
    count = builder.tokenizer.count
    user_tokens = count(request.user_input) + MESSAGE_COST
    available = count(request.system or "") + user_tokens + 2 * budget + SLACK
    turn_max = max(budget - user_tokens, 0)
    turn_tokens = 0
    if request.turn:
        probe = builder.build(
            budget_plan(base, 0, turn_max, available),
            Request(user_input=request.user_input, system=request.system, turn=request.turn),
        )
        turn_tokens = sum(row.tokens for row in probe.report.sources
                          if row.source == "tool_results")
    return budget_plan(base, max(turn_max - turn_tokens, 0), turn_max, available)


def recency_messages(system: str, case: TauCase, budget: int, count: Count) -> list[Msg]:
    """Baseline: the system prompt and the most recent whole messages that fit ``budget``."""
    kept = baseline.recency(case.conversation, budget, lambda m: message_tokens(m, count))
    return [{"role": "system", "content": system}, *kept]


def tau_scores(case: TauCase, messages: Sequence[Msg], count: Count, ok: bool = True) -> Scores:
    """The metrics of one trajectory's context (see the module docstring)."""
    text = context_text(messages)
    conversation = [m for m in messages if m.get("role") != "system"]
    placeholders = sum(1 for m in messages
                       if m.get("role") == "tool" and MISSING_RESULT in str(m.get("content")))
    return {
        "fact_survival": Ratio(numerator=sum(value in text for value in case.facts),
                               denominator=len(case.facts)),
        "pair_integrity": Ratio.of(float(ok and not pair_problems(messages))),
        "placeholders": Ratio.of(placeholders),
        "tokens": Ratio.of(context_tokens(conversation, count)),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class TauSuite:
    """τ-bench fact survival and pair integrity under history budgets (default ``tool_heavy``)."""

    data: TauSet
    """The loaded folder."""
    builder: ContextBuilder
    """Builds contextwright's contexts; its tokenizer also counts the baseline."""
    plan: BuildPlan
    """The plan; ``history`` and ``tool_results`` are capped per build."""
    name: ClassVar[str] = "tau"
    """Suite name."""
    metrics: ClassVar[tuple[str, ...]] = METRICS
    """Metric names in display order."""
    default_budgets: ClassVar[tuple[int, ...]] = BUDGETS
    """History budgets of the issue."""
    targets: ClassVar[Mapping[int, Mapping[str, float]]] = TARGETS
    """Targets of the issue."""
    baseline: ClassVar[str] = "system prompt + most recent whole messages within the budget"
    """What the baseline does."""
    budget_rule: ClassVar[str] = "history budget (user input + turn + history caps)"
    """How a budget is applied to the plan."""

    def __len__(self) -> int:
        """Number of cases."""
        return len(self.data.cases)

    def outcomes(self, budget: int) -> Iterator[CaseOutcome]:
        """One outcome per trajectory at ``budget``."""
        count = self.builder.tokenizer.count
        for case in self.data.cases:
            try:
                messages, error = render(
                    build_tau(self.builder, self.plan, self.data.policy, case, budget))
            except ContextwrightError as exc:
                messages, error = [], failure("build", exc)
            base = recency_messages(self.data.policy, case, budget, count)
            yield CaseOutcome(case_id=case.traj_index, budget=budget,
                              contextwright=tau_scores(case, messages, count, error is None),
                              baseline=tau_scores(case, base, count),
                              messages=messages, error=error, expected=case.expected_call,
                              tools=self.data.tools if case.expected_call else ())

    def extra(self) -> dict[str, float | str | None]:
        """Nothing budget-independent."""
        return {}
