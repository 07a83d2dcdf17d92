"""Benchmark: tool-pair integrity and fact survival on τ-bench airline trajectories.

Metric 2 of ``../shared/data/README.md``. For each of the 60 GPT-4o airline trajectories in
``gpt-4o-airline-dev.json`` and its ``required_facts.jsonl`` row (matched by ``traj_index``):

* system prompt = ``airline_policy_wiki.md``;
* the *conversation* = ``traj[1:cut_index]`` (everything the agent had seen before its first
  required write action). 21 rows have ``cut_index = null`` (the agent never performed the write);
  for those the whole trajectory ``traj[1:]`` is used. Both the 60-row set and the 39 rows that
  have a ``cut_index`` are reported.

How the conversation becomes a ``Request`` (a choice, since the library needs a user input):
the **last user message** of the conversation is ``user_input`` (the agent's next call answers
it); the messages **before** it are ``history``; the assistant tool calls and tool results
**after** it (the agent's work on that message so far) are ``turn``, which the library renders
after the user input. No tool schemas are passed (the file has none).

The budget. A "history budget" B covers the whole conversation, exactly like the recency
baseline below, so both sides spend the same tokens on ``traj[1:cut]``: the never-cut user input
(U tokens) and the current turn come first, and the history source gets what is left. Concretely,
the shipped ``tool_heavy`` plan is copied with ``tool_results.max_tokens = B - U``; a first build
without history measures the tokens T the turn actually took, and the measured build sets
``history.max_tokens = B - U - T`` (when the turn is empty that first build is skipped and the
history gets ``B - U``). ``available`` is set (``available_override``) well above
system + 2·B + U, so the weighted shares never bind and only these caps do. The tokens
reported for contextwright are the library's own count of the user, turn and history sections
(content + 4 per message, tool calls with their name, arguments and 8 tokens of framing, tool
results fenced), so they are a little stricter than the baseline's count.

Measured per budget (500 / 1,000 / 2,000):

* pair integrity: ``ctx.to_messages("openai")`` (the library's validator) must not raise, and an
  independent check here must pass: every tool message sits in a block of tool messages directly
  after an assistant message whose tool calls contain its ``tool_call_id`` (paired by position,
  since some trajectories reuse ids), and every call has a result. A placeholder result for a
  call whose result was lost counts as intact but is reported.
* fact survival: share of the ``id_like`` facts first seen in a user or tool message whose
  ``value`` appears verbatim in the rendered context (all message contents and tool-call
  arguments, concatenated).
* the recency baseline, recounted with the same tokenizer: keep the most recent whole messages
  of the conversation that fit B (each message costs its content tokens + 4, plus its tool-call
  arguments), plus the system prompt; its fact survival and its pair integrity (same check).
* the mean conversation tokens actually used.

Run from the repo root::

    .venv/bin/python bench/tau_pairs.py [--data DIR] [--tokenizer o200k_base] [--json] \
        [--no-compression] [--options '{"digest_share": 0.2}']

The plan is the shipped ``tool_heavy``, whose history keeps the newest two call blocks' results
whole, reduces the next three to key facts and older ones to a line of identifiers, and, when
turns do not fit, spends 30% of its budget (and of this turn's) on a digest of the exact values
first seen in what was left out; ``--no-compression`` removes those options.

The exit status is 1 when any contextwright build fails or breaks a tool pair.

About the README's reference (recency ≈ 0.74 @1,000 and 0.93 @2,000, chars/4 estimate): this
script's baseline, as specified above, gives about 0.56 / 0.71 with o200k_base; a chars/4 count
of the same rule gives about 0.63 / 0.78, so the reference was computed some other way and the
baseline column here, not the README figure, is the comparison to use.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from contextwright import BuildPlan, ContextBuilder, FinalContext, Request
from contextwright.core.items import Message
from contextwright.core.plan import FrozenOptions
from contextwright.errors import ContextwrightError
from contextwright.sources.conversation import MISSING_RESULT

BUDGETS = (500, 1000, 2000)
MESSAGE_COST = 4
"""Per-message framing the baseline adds to each message (the library uses the same)."""
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO_ROOT / ".." / "shared" / "data" / "tau-bench-airline-dev"
FACT_ROLES = frozenset(("user", "tool"))
DATA_FILES = ("airline_policy_wiki.md", "gpt-4o-airline-dev.json", "required_facts.jsonl")

Msg = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Case:
    """One trajectory prepared for a build."""

    traj_index: int
    has_cut: bool
    conversation: tuple[Msg, ...]
    """``traj[1:cut]``: what both contextwright and the baseline draw on."""
    history: tuple[Msg, ...]
    user_input: str
    turn: tuple[Msg, ...]
    facts: tuple[str, ...]
    """Values of the id-like facts first seen in a user or tool message."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one build (contextwright or baseline) kept."""

    intact: bool
    problems: tuple[str, ...]
    survived: int
    facts: int
    tokens: int
    placeholders: int = 0


@dataclass(slots=True)
class Tally:
    """Aggregate over the builds of one budget and one subset."""

    builds: int = 0
    cw_intact: int = 0
    cw_validator_errors: int = 0
    cw_build_errors: int = 0
    cw_placeholders: int = 0
    cw_survived: int = 0
    cw_tokens: list[int] = field(default_factory=list)
    base_intact: int = 0
    base_survived: int = 0
    base_tokens: list[int] = field(default_factory=list)
    facts: int = 0

    def add(self, cw: Outcome, base: Outcome, validator_error: bool, build_error: bool) -> None:
        """Count one trajectory."""
        self.builds += 1
        self.cw_intact += cw.intact
        self.cw_validator_errors += validator_error
        self.cw_build_errors += build_error
        self.cw_placeholders += cw.placeholders
        self.cw_survived += cw.survived
        self.cw_tokens.append(cw.tokens)
        self.base_intact += base.intact
        self.base_survived += base.survived
        self.base_tokens.append(base.tokens)
        self.facts += cw.facts

    def summary(self) -> dict[str, Any]:
        """JSON-ready numbers."""
        def share(part: int, whole: int) -> float:
            return round(part / whole, 4) if whole else 0.0

        return {
            "builds": self.builds,
            "facts": self.facts,
            "contextwright": {
                "fact_survival": share(self.cw_survived, self.facts),
                "pair_integrity": share(self.cw_intact, self.builds),
                "broken_builds": self.builds - self.cw_intact,
                "validator_errors": self.cw_validator_errors,
                "build_errors": self.cw_build_errors,
                "placeholder_results": self.cw_placeholders,
                "mean_conversation_tokens": _mean(self.cw_tokens),
            },
            "baseline": {
                "fact_survival": share(self.base_survived, self.facts),
                "pair_integrity": share(self.base_intact, self.builds),
                "broken_builds": self.builds - self.base_intact,
                "mean_conversation_tokens": _mean(self.base_tokens),
            },
        }


def _mean(values: list[int]) -> float:
    return round(statistics.fmean(values), 1) if values else 0.0


# --------------------------------------------------------------------------- data


def load_cases(data: Path) -> tuple[str, list[Case]]:
    """The policy text and one case per trajectory (rows of ``required_facts.jsonl``)."""
    policy = (data / "airline_policy_wiki.md").read_text("utf-8")
    trajectories = json.loads((data / "gpt-4o-airline-dev.json").read_text("utf-8"))
    cases = []
    with (data / "required_facts.jsonl").open(encoding="utf-8") as rows:
        for line in rows:
            if line.strip():
                row = json.loads(line)
                cases.append(make_case(row, trajectories[row["traj_index"]]["traj"]))
    return policy, cases


def make_case(row: Mapping[str, Any], traj: Sequence[Msg]) -> Case:
    """Split ``traj[1:cut]`` into history, current user input and current turn."""
    cut = row["cut_index"]
    conversation = tuple(traj[1:cut] if cut is not None else traj[1:])
    history, user_input, turn = split_conversation(conversation)
    facts = tuple(
        str(fact["value"]) for fact in row["facts"]
        if fact["id_like"] and fact["first_msg_role"] in FACT_ROLES
    )
    return Case(traj_index=row["traj_index"], has_cut=cut is not None, conversation=conversation,
                history=history, user_input=user_input, turn=turn, facts=facts)


def split_conversation(conversation: Sequence[Msg]
                       ) -> tuple[tuple[Msg, ...], str, tuple[Msg, ...]]:
    """(messages before the last user message, its text, messages after it)."""
    last = max((i for i, m in enumerate(conversation) if m.get("role") == "user"), default=None)
    if last is None:
        raise ValueError("the conversation has no user message")
    content = conversation[last].get("content")
    return tuple(conversation[:last]), str(content or ""), tuple(conversation[last + 1:])


# --------------------------------------------------------------------------- checks


def pair_problems(messages: Sequence[Msg]) -> list[str]:
    """Independent OpenAI tool-pair check; an empty list means every pair is intact.

    A block of tool messages must directly follow an assistant message with tool calls; each
    result answers one still-unanswered call with its id (the first such call, i.e. by
    position, because ids may be reused); every call must be answered.
    """
    problems: list[str] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if message.get("role") == "tool":
            problems.append(f"messages[{index - 1}] is a tool result that follows no call")
            continue
        calls = (message.get("tool_calls") or []) if message.get("role") == "assistant" else []
        if not calls:
            continue
        pending = [str(call.get("id")) for call in calls]
        while index < len(messages) and messages[index].get("role") == "tool":
            call_id = messages[index].get("tool_call_id")
            if call_id in pending:
                pending.remove(call_id)
            else:
                problems.append(f"messages[{index}] answers no call of the assistant before it")
            index += 1
        if pending:
            problems.append(f"{len(pending)} call(s) before messages[{index}] have no result")
    return problems


def context_text(messages: Iterable[Msg]) -> str:
    """All message contents and tool-call arguments, concatenated."""
    parts: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        for call in message.get("tool_calls") or []:
            arguments = call.get("function", {}).get("arguments", "")
            parts.append(arguments if isinstance(arguments, str) else json.dumps(arguments))
    return "\n".join(parts)


def survived(facts: Sequence[str], text: str) -> int:
    """How many fact values appear verbatim in ``text``."""
    return sum(value in text for value in facts)


# --------------------------------------------------------------------------- builds


COMPRESSION_KEYS = ("tool_full", "tool_reduced", "tool_early", "tool_line_chars", "digest_share")
"""Options of the shipped ``tool_heavy`` that compress (tiers, digest of omitted turns); the
``--no-compression`` run removes them from history and this turn."""


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
    """``base`` with the history and turn caps set and a large ``available``."""
    caps = {"history": history_max, "tool_results": turn_max}
    sources = tuple(
        replace(spec, max_tokens=caps[spec.source]) if spec.source in caps else spec
        for spec in base.sources
    )
    return replace(base, sources=sources).with_budget(available_override=available)


def section_tokens(ctx: FinalContext, *names: str) -> int:
    """Tokens the build report gives the named sources."""
    return sum(row.tokens for row in ctx.report.sources if row.source in names)


def build_cw(builder: ContextBuilder, base: BuildPlan, system: str, case: Case,
             budget: int) -> FinalContext:
    """The contextwright build of ``case``: user input and turn first, history in what is left."""
    count = builder.tokenizer.count
    user_tokens = count(case.user_input) + MESSAGE_COST
    available = count(system) + user_tokens + 2 * budget + 4096
    turn_max = max(budget - user_tokens, 0)
    turn_tokens = 0
    if case.turn:
        probe = builder.build(
            budget_plan(base, 0, turn_max, available),
            Request(user_input=case.user_input, system=system, turn=case.turn),
        )
        turn_tokens = section_tokens(probe, "tool_results")
    plan = budget_plan(base, max(turn_max - turn_tokens, 0), turn_max, available)
    request = Request(user_input=case.user_input, system=system, history=case.history,
                      turn=case.turn)
    return builder.build(plan, request)


def openai_dicts(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Our own OpenAI-format view of built messages (used when the library's rendering fails)."""
    rendered: list[dict[str, Any]] = []
    for message in messages:
        item: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.tool_calls:
            item["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments}}
                for c in message.tool_calls
            ]
        if message.role == "tool":
            item["tool_call_id"] = message.tool_call_id
        rendered.append(item)
    return rendered


def measure_cw(builder: ContextBuilder, base: BuildPlan, system: str, case: Case,
               budget: int) -> tuple[Outcome, bool, bool]:
    """(outcome, validator raised, build raised) for the contextwright build."""
    try:
        ctx = build_cw(builder, base, system, case, budget)
    except ContextwrightError as exc:
        problem = f"build failed: {type(exc).__name__}: {exc}"
        return Outcome(False, (problem,), 0, len(case.facts), 0), False, True
    validator_error = False
    problems: list[str] = []
    try:
        messages = ctx.to_messages("openai")
    except ContextwrightError as exc:
        validator_error = True
        problems.append(f"library validator: {exc}")
        messages = openai_dicts(ctx.messages)
    problems += pair_problems(messages)
    used = section_tokens(ctx, "user", "history", "tool_results")
    placeholders = sum(
        1 for m in messages if m.get("role") == "tool" and MISSING_RESULT in str(m.get("content"))
    )
    outcome = Outcome(
        intact=not problems, problems=tuple(problems),
        survived=survived(case.facts, context_text(messages)), facts=len(case.facts),
        tokens=used, placeholders=placeholders,
    )
    return outcome, validator_error, False


def message_cost(message: Msg, count: Callable[[str], int]) -> int:
    """Baseline cost: content tokens + 4, tool-call arguments included."""
    content = message.get("content")
    tokens = count(content if isinstance(content, str) else "") + MESSAGE_COST
    for call in message.get("tool_calls") or []:
        arguments = call.get("function", {}).get("arguments", "")
        tokens += count(arguments if isinstance(arguments, str) else json.dumps(arguments))
    return tokens


def recency_baseline(conversation: Sequence[Msg], budget: int,
                     count: Callable[[str], int]) -> tuple[list[Msg], int]:
    """The most recent whole messages that fit ``budget`` (stops at the first that does not)."""
    kept: list[Msg] = []
    used = 0
    for message in reversed(conversation):
        cost = message_cost(message, count)
        if used + cost > budget:
            break
        kept.append(message)
        used += cost
    kept.reverse()
    return kept, used


def measure_baseline(system: str, case: Case, budget: int,
                     count: Callable[[str], int]) -> Outcome:
    """Outcome of the recency baseline (system prompt plus the kept messages)."""
    kept, used = recency_baseline(case.conversation, budget, count)
    messages: list[Msg] = [{"role": "system", "content": system}, *kept]
    problems = pair_problems(messages)
    return Outcome(intact=not problems, problems=tuple(problems),
                   survived=survived(case.facts, context_text(messages)),
                   facts=len(case.facts), tokens=used)


# --------------------------------------------------------------------------- report


def run(data: Path, tokenizer: str, budgets: Sequence[int],
        history_options: Mapping[str, Any] | None = None,
        compression: bool = True) -> dict[str, Any]:
    """Every build; returns the JSON-ready result.

    The shipped ``tool_heavy`` (compression on: tiers and the digest of omitted turns), without
    its compressing options when ``compression`` is false; ``history_options`` are added to its
    history and turn options (one variable at a time).
    """
    system, cases = load_cases(data)
    builder = ContextBuilder(tokenizer=tokenizer)
    base = BuildPlan.named("tool_heavy")
    if not compression:
        base = without_compression(base)
    if history_options:
        base = with_history_options(base, history_options)
    count = builder.tokenizer.count
    subsets: dict[str, Callable[[Case], bool]] = {
        "all": lambda case: True, "with_cut": lambda case: case.has_cut,
    }
    results: dict[str, dict[str, Any]] = {name: {} for name in subsets}
    failures: list[dict[str, Any]] = []
    for budget in budgets:
        tallies = {name: Tally() for name in subsets}
        for case in cases:
            cw, validator_error, build_error = measure_cw(builder, base, system, case, budget)
            baseline = measure_baseline(system, case, budget, count)
            if not cw.intact:
                failures.append({"traj_index": case.traj_index, "budget": budget,
                                 "problems": list(cw.problems)})
            for name, keep in subsets.items():
                if keep(case):
                    tallies[name].add(cw, baseline, validator_error, build_error)
        for name, tally in tallies.items():
            results[name][str(budget)] = tally.summary()
    return {
        "benchmark": "tau-bench airline: tool-pair integrity and fact survival",
        "data": str(data),
        "tokenizer": builder.tokenizer.name,
        "plan": "tool_heavy (history and tool_results capped so user + turn + history <= budget)",
        "history_options": dict(history_options or {}),
        "compression": compression,
        "trajectories": len(cases),
        "with_cut_index": sum(c.has_cut for c in cases),
        "budgets": list(budgets),
        "results": results,
        "contextwright_failures": failures,
    }


def format_table(result: Mapping[str, Any]) -> str:
    """Plain-text tables, one per subset."""
    titles = {"all": f"all {result['trajectories']} trajectories (cut_index null -> traj[1:])",
              "with_cut": f"the {result['with_cut_index']} trajectories with a cut_index"}
    header = (f"{'budget':>6} | {'cw survival':>11} | {'baseline survival':>17} | "
              f"{'pairs cw':>8} | {'pairs baseline':>14} | {'mean tokens cw / baseline':>25}")
    options = result.get("history_options") or "none added"
    shipped = "as shipped" if result.get("compression", True) else "without compression"
    lines = [f"tau-bench airline, tokenizer {result['tokenizer']}, plan tool_heavy ({shipped}), "
             f"history options: {options}"]
    for name, title in titles.items():
        lines += ["", title, header, "-" * len(header)]
        for budget, row in result["results"][name].items():
            cw, base = row["contextwright"], row["baseline"]
            cw_tokens, base_tokens = (cw["mean_conversation_tokens"],
                                      base["mean_conversation_tokens"])
            tokens = f"{cw_tokens:.1f} / {base_tokens:.1f}"
            lines.append(
                f"{budget:>6} | {cw['fact_survival']:>11.3f} | {base['fact_survival']:>17.3f} | "
                f"{cw['pair_integrity']:>8.1%} | {base['pair_integrity']:>14.1%} | {tokens:>25}"
            )
        facts = next(iter(result["results"][name].values()))["facts"]
        lines.append(f"({facts} id-like facts first seen in user/tool messages)")
    if result["contextwright_failures"]:
        lines += ["", "contextwright failures:"]
        lines += [f"  traj {f['traj_index']} @ {f['budget']}: {'; '.join(f['problems'])}"
                  for f in result["contextwright_failures"]]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, run, print; 1 when contextwright broke a pair or failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="folder of the tau-bench airline dev set")
    parser.add_argument("--tokenizer", default="o200k_base",
                        help="tokenizer for the library and the baseline (default o200k_base)")
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    parser.add_argument("--no-compression", action="store_true",
                        help="run the shipped plan without its tiers and digest of omitted turns")
    parser.add_argument("--options", type=json.loads, default=None,
                        help='JSON object added to history and turn options, e.g. '
                             '\'{"digest_share": 0.2}\'')
    args = parser.parse_args(argv)
    data = args.data.resolve()
    missing = [name for name in DATA_FILES if not (data / name).is_file()]
    if missing:
        parser.error(f"{data} lacks {', '.join(missing)} (pass --data DIR)")
    result = run(data, args.tokenizer, BUDGETS, args.options, not args.no_compression)
    print(json.dumps(result, indent=2) if args.json else format_table(result))
    return 1 if result["contextwright_failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
