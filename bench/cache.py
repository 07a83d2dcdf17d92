"""Prompt-cache stability: replay real conversations call by call and price the repeated prefix.

    python bench/cache.py --data ../shared/data [--limit 20] [--step 0.25] [--recall-share 0]
        [--head-share 0.3] [--min-recall-coverage 0.65] [--objective balanced|fill|cost]
        [--no-recall-tail] [--statement-tail true|false|facts] [--min-recall-focus 0.15]
        [--diffuse-tail questions] [--recall-cuts questions|any] [--explain]
        [--skip tau|locomo]

For consecutive calls of one conversation, from the rendered requests themselves (OpenAI chat
form, tools then messages, the order providers cache in):

* hit share: tokens of the longest run of leading messages identical to the previous call's
  ÷ input tokens — for the whole request and for the part after the system prompt and tools;
* reused after system: tokens after the system prompt of messages the previous call sent too,
  wherever they sat ÷ those input tokens — the most any order of the same messages could cache,
  so what a method loses to new content and what it loses to order are told apart;
* effective input cost at Anthropic prices (cache reads 0.1×, writes 1.25×, from 1,024 tokens)
  and OpenAI prices (cached input 0.1×, from 1,024 tokens in 128-token steps), summed over the
  conversation and shown as a ratio to LangChain ``trim_messages`` at the same budget;
* quality at the same budgets: τ-bench id-fact survival at the dataset's cut points, LoCoMo
  strict evidence recall of every question asked after the conversation.

Methods, side by side: contextwright today (no ``previous``), contextwright with ``previous``
(``CachePolicy``), LangChain ``trim_messages`` (exact counts, last messages that fit), and the
OpenAI Agents SDK's session trimming (the last N items of a session) when ``openai-agents`` is
installed. τ-bench replays every model call of each agent trajectory with the ``tool_heavy`` plan
(history and this turn's results each capped at the budget); LoCoMo makes each turn of speaker A
a call with the ``chat`` plan at a total budget. Both are also replayed through
``ContextManager`` (every mode on the same plan, the session in a store), cache on and off.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.core.cache import PRICE_MODELS, CachePolicy
from contextwright.evaluate.locomo import evidence_scores, load_locomo
from contextwright.evaluate.metrics import message_tokens
from contextwright.evaluate.tau import (
    SLACK,
    budget_plan,
    load_tau,
    split_conversation,
    tau_scores,
)
from peers import _lc_to_openai_dict, langchain_trim_exact

Msg = dict[str, Any]
Count = Callable[[str], int]


@dataclass
class Tally:
    """Sums over the consecutive calls of every replayed conversation."""

    calls: int = 0
    input_tokens: int = 0
    prefix_tokens: int = 0
    after_system_input: int = 0
    after_system_prefix: int = 0
    after_system_reused: int = 0
    """Tokens after system of messages the previous call also sent, wherever they sat: no
    order of the same messages could cache more, so it bounds the hit share of this content."""
    cost: dict[str, float] = field(default_factory=lambda: {m.name: 0.0 for m in PRICE_MODELS})
    pairs_ok: int = 0
    quality: list[tuple[float, int]] = field(default_factory=list)
    """(found, out of): pooled, so a τ-bench cut with no facts weighs nothing (it is not a 0)."""
    lost: dict[str, list[int]] = field(default_factory=dict)
    """Per kind of call (``WithPrevious.kind``): [calls, tokens after system not cached]."""

    def add(self, previous: list[Msg] | None, current: list[Msg], count: Count,
            kind: str | None = None) -> None:
        """Count one call against the one before it (the first call of a conversation too)."""
        sizes = [message_tokens(m, count) for m in current]
        total = sum(sizes)
        system = sum(s for m, s in zip(current, sizes, strict=True) if m["role"] == "system")
        prefix = 0
        reused = 0
        if previous is not None:
            for old, new, size in zip(previous, current, sizes, strict=False):
                if _canonical(old) != _canonical(new):
                    break
                prefix += size
            reused = _reused(previous, current, sizes)
        self.calls += 1
        self.input_tokens += total
        self.prefix_tokens += prefix
        self.after_system_input += total - system
        self.after_system_prefix += max(prefix - system, 0)
        self.after_system_reused += reused
        for model in PRICE_MODELS:
            self.cost[model.name] += model.relative_cost(prefix, total) * total
        self.pairs_ok += int(_pairs_intact(current))
        if kind is not None:
            entry = self.lost.setdefault(kind, [0, 0])
            entry[0] += 1
            entry[1] += (total - system) - max(prefix - system, 0)

    def row(self) -> dict[str, float]:
        """The tally's ratios."""
        return {
            "hit": self.prefix_tokens / max(self.input_tokens, 1),
            "hit_after_system": self.after_system_prefix / max(self.after_system_input, 1),
            "reused_after_system": self.after_system_reused / max(self.after_system_input, 1),
            **{f"cost_{name}": cost for name, cost in self.cost.items()},
            "pairs": self.pairs_ok / max(self.calls, 1),
            "quality": (sum(found for found, _ in self.quality)
                        / max(sum(total for _, total in self.quality), 1)
                        if self.quality else float("nan")),
            "calls": self.calls,
        }


def _canonical(message: Msg) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False)


def _reused(previous: Sequence[Msg], current: Sequence[Msg], sizes: Sequence[int]) -> int:
    """Tokens of ``current``'s non-system messages that ``previous`` sent too (as a multiset)."""
    sent = Counter(_canonical(m) for m in previous if m["role"] != "system")
    reused = 0
    for message, size in zip(current, sizes, strict=True):
        key = _canonical(message)
        if message["role"] != "system" and sent[key] > 0:
            sent[key] -= 1
            reused += size
    return reused


def _pairs_intact(messages: Sequence[Msg]) -> bool:
    """Every tool result answers a call before it, and every call has its results."""
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            if message.get("tool_call_id") not in open_calls:
                return False
            open_calls.discard(message["tool_call_id"])
        elif open_calls:
            return False
        for call in message.get("tool_calls") or []:
            open_calls.add(call["id"])
    return not open_calls


# --- methods -------------------------------------------------------------------------------


class Method:
    """One way of building the calls of a conversation."""

    name = ""

    def start(self) -> None:
        """A new conversation begins."""

    def call(self, plan: BuildPlan, request: Request, budget: int) -> list[Msg]:
        """The rendered messages of one call."""
        raise NotImplementedError


class Today(Method):
    name = "contextwright (no previous)"

    def __init__(self, builder: ContextBuilder) -> None:
        self.builder = builder

    def call(self, plan: BuildPlan, request: Request, budget: int) -> list[Msg]:
        return self.builder.build(plan, request).to_messages("openai")


class WithPrevious(Method):
    name = "contextwright (previous)"

    def __init__(self, builder: ContextBuilder, policy: CachePolicy) -> None:
        self.builder = builder
        self.policy = policy
        self.previous: Any = None
        self.advances = 0
        self.builds = 0
        self.kind = "first call"
        """What kind of call the last build was (``_kind``)."""

    def start(self) -> None:
        self.previous = None

    def call(self, plan: BuildPlan, request: Request, budget: int) -> list[Msg]:
        ctx = self.builder.build(plan, request, previous=self.previous, cache=self.policy)
        self.previous = ctx.fingerprint
        self.builds += 1
        self.advances += bool(ctx.report.cache and ctx.report.cache.advanced)
        self.kind = _kind(ctx.report.cache)
        return ctx.to_messages("openai")


def _kind(report: Any) -> str:
    """What kind of call a build with ``previous`` was, from its cache report."""
    if report is None or not report.previous:
        return "first call"
    why = report.reason or ""
    if "plan changed" in why:
        return "new cache line: the plan changed (a mode switch)"
    if "cut advanced" in why:  # a cut that broke the prefix (one after it is not a break)
        if ("no longer fits its grant" in why or "window passed" in why
                or "appended since outgrew it" in why):
            return "cut: the run outgrew its grant"
        if "recalled for this input" in why:
            return "cut: this input's recall"
        return "cut: other (the list or the plan changed)"
    if report.transient:
        return "continued, recalled turns shown after the run"
    if "repeated whole" in why:
        return "continued, after a part that changes every call (summary, zones)"
    return "continued (appends only)"


class TrimMessages(Method):
    name = "LangChain trim_messages"

    def call(self, plan: BuildPlan, request: Request, budget: int) -> list[Msg]:
        messages = _conversation(request)
        return [_lc_to_openai_dict(m) for m in langchain_trim_exact(messages, budget)]


class AgentsSessionLastN(Method):
    """The Agents SDK's ``SQLiteSession.get_items(limit=N)``, N the most items that fit."""

    name = "OpenAI Agents SDK session (last N items)"

    def __init__(self, count: Count) -> None:
        self.count = count

    def call(self, plan: BuildPlan, request: Request, budget: int) -> list[Msg]:
        import asyncio

        from agents import SQLiteSession

        messages = _conversation(request)
        system, rest = messages[:1], messages[1:]
        session = SQLiteSession("bench")
        asyncio.run(session.add_items(rest))  # type: ignore[arg-type]
        room = budget - sum(message_tokens(m, self.count) for m in system)
        limit, used = 0, 0
        for message in reversed(rest):  # the N a caller would set to fit the budget
            used += message_tokens(message, self.count)
            if used > room:
                break
            limit += 1
        items = asyncio.run(session.get_items(limit=limit)) if limit else []
        return [*system, *(dict(item) for item in items)]  # type: ignore[call-overload]


def _conversation(request: Request) -> list[Msg]:
    system = [{"role": "system", "content": request.system}] if request.system else []
    return [*system, *map(dict, request.history), {"role": "user", "content": request.user_input},
            *map(dict, request.turn)]


# --- replays -------------------------------------------------------------------------------


def tau_calls(traj: Sequence[Msg]) -> Iterator[tuple[int, tuple[Msg, ...], str, tuple[Msg, ...]]]:
    """Every model call of a trajectory: (position, history, user input, this turn)."""
    for position in range(2, len(traj)):
        if traj[position].get("role") != "assistant":
            continue
        conversation = traj[1:position]
        if not any(m.get("role") == "user" for m in conversation):
            continue
        yield (position, *split_conversation(conversation))


def replay_tau(folder: Path, methods: list[Method], budgets: Sequence[int], limit: int | None,
               count: Count) -> dict[int, dict[str, Tally]]:
    data = load_tau(folder, limit)
    trajectories = json.loads((folder / "gpt-4o-airline-dev.json").read_text("utf-8"))
    cuts = {case.traj_index: case for case in data.cases}
    results: dict[int, dict[str, Tally]] = {b: {m.name: Tally() for m in methods}
                                            for b in budgets}
    for budget in budgets:
        for traj_index, case in sorted(cuts.items()):
            traj = trajectories[traj_index]["traj"]
            cut = len(case.conversation) + 1
            calls = [c for c in tau_calls(traj) if c[0] <= cut]
            longest = max(count(user) for _, _, user, _ in calls) + 8
            available = count(data.policy) + longest + 2 * budget + SLACK
            plan = budget_plan(BuildPlan.named("tool_heavy"), budget, budget, available)
            for method in methods:
                method.start()
                tally = results[budget][method.name]
                previous = None
                last: list[Msg] = []
                for _, history, user, turn in calls:
                    request = Request(user_input=user, system=data.policy, history=history,
                                      turn=turn)
                    last = method.call(plan, request, _total(budget, data.policy, user, count))
                    tally.add(previous, last, count, getattr(method, "kind", None))
                    previous = last
                # The dataset's cut is the last call replayed: score what that call showed.
                scores = tau_scores(case, last, count)["fact_survival"]
                tally.quality.append((scores.numerator, scores.denominator))
    return results


MANAGED_CACHED = "ContextManager (cache on)"


def manager_calls(traj: Sequence[Msg], cut: int, plan: BuildPlan, system: str,
                  cache: bool) -> list[tuple[list[Msg], str]]:
    """Every model call of a trajectory through ``ContextManager`` (each mode on ``plan``).

    A user message is stored by the ``prepare`` of the call that answers it; the agent's
    calls and their results are recorded as they were made, then the turn continues with
    ``prepare(text=None)``.
    """
    from contextwright import ContextManager, ModesConfig

    modes = ModesConfig.default().modes
    manager = ContextManager(system=system, plans=dict.fromkeys(modes, plan),
                             background=False, cache=MANAGER_POLICY if cache else False)
    calls: list[tuple[list[Msg], str]] = []  # each call's messages and kind (``_kind``)
    pending: str | None = None
    position = 1
    try:
        while position <= min(cut, len(traj) - 1):  # the call at ``cut`` sees the case
            message = traj[position]
            position += 1
            if message["role"] == "user":
                pending = str(message.get("content") or "")
                continue
            if message["role"] != "assistant":
                continue
            prepared = manager.prepare("u", "s", pending)
            pending = None
            calls.append((prepared.to_messages("openai"), _kind(prepared.report.cache)))
            results = []
            while position < len(traj) and traj[position]["role"] == "tool":
                results.append(traj[position])
                position += 1
            manager.record("u", "s", assistant=message, tool_results=results)
    finally:
        manager.close()
    return calls


def replay_tau_manager(folder: Path, budgets: Sequence[int], limit: int | None,
                       count: Count) -> dict[int, dict[str, Tally]]:
    """τ-bench through ``ContextManager``: the fingerprint kept in the session state."""
    data = load_tau(folder, limit)
    trajectories = json.loads((folder / "gpt-4o-airline-dev.json").read_text("utf-8"))
    names = {False: "ContextManager (cache off)", True: MANAGED_CACHED}
    results: dict[int, dict[str, Tally]] = {b: {n: Tally() for n in names.values()}
                                            for b in budgets}
    for budget in budgets:
        for case in data.cases:
            traj = trajectories[case.traj_index]["traj"]
            cut = len(case.conversation) + 1
            longest = max(count(str(m.get("content") or "")) for m in traj
                          if m["role"] == "user") + 8
            available = count(data.policy) + longest + 2 * budget + SLACK
            plan = budget_plan(BuildPlan.named("tool_heavy"), budget, budget, available)
            for cache, name in names.items():
                tally = results[budget][name]
                previous = None
                calls = manager_calls(traj, cut, plan, data.policy, cache)
                for current, kind in calls:
                    tally.add(previous, current, count, kind if cache else None)
                    previous = current
                if calls:
                    scores = tau_scores(case, calls[-1][0], count)["fact_survival"]
                    tally.quality.append((scores.numerator, scores.denominator))
    return results


def _total(budget: int, system: str, user: str, count: Count) -> int:
    """A whole-request budget for the peers: system, input, history and this turn's share."""
    return count(system) + count(user) + 2 * budget


def replay_locomo(folder: Path, methods: list[Method], budgets: Sequence[int],
                  limit: int | None, count: Count, questions: int | None
                  ) -> dict[int, dict[str, Tally]]:
    data = load_locomo(folder)
    results: dict[int, dict[str, Tally]] = {b: {m.name: Tally() for m in methods}
                                            for b in budgets}
    conversations = list(data.conversations.values())[:limit] if limit else list(
        data.conversations.values())
    for budget in budgets:
        plan = BuildPlan.named("chat").with_budget(available_override=budget)
        for conversation in conversations:
            history = conversation.history
            asks = [c for c in data.cases if c.sample_id == conversation.sample_id]
            if questions is not None:
                asks = asks[:questions]
            for method in methods:
                method.start()
                tally = results[budget][method.name]
                previous = None
                for position, message in enumerate(history):
                    if message["role"] != "user" or position == 0:
                        continue
                    request = Request(user_input=str(message["content"]),
                                      history=history[:position])
                    current = method.call(plan, request, budget)
                    tally.add(previous, current, count, getattr(method, "kind", None))
                    previous = current
                state = getattr(method, "previous", None)
                for case in asks:  # each question continues from the conversation's last call
                    if isinstance(method, WithPrevious):
                        method.previous = state
                    request = Request(user_input=case.question, history=history)
                    messages = method.call(plan, request, budget)
                    evidence = [conversation.turns[dia_id] for dia_id in case.evidence]
                    tally.quality.append(
                        (evidence_scores(evidence, messages, count)["strict_recall"].numerator, 1))
    return results


def _seconds(stamp: object, default: float) -> float:
    """Unix seconds of an ISO 8601 timestamp (``default`` when there is none)."""
    from datetime import UTC, datetime

    if not isinstance(stamp, str):
        return default
    moment = datetime.fromisoformat(stamp)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


class _Clock:
    """The manager's clock: the time of the message being said (LoCoMo's session dates)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


MANAGER_POLICY = CachePolicy()
"""The managers' policy when their cache is on: the default, but for ``--diffuse-tail``,
``--recall-cuts``, ``--min-recall-coverage``, ``--head-growth`` and ``--statement-tail``."""


def _manager(plan: BuildPlan, cache: bool, clock: _Clock, store: Any = None) -> Any:
    from contextwright import ContextManager, ModesConfig

    modes = ModesConfig.default().modes
    return ContextManager(store, plans=dict.fromkeys(modes, plan), background=False,
                          cache=MANAGER_POLICY if cache else False, clock=clock)


def replay_locomo_manager(folder: Path, budgets: Sequence[int], limit: int | None,
                          count: Count, questions: int | None) -> dict[int, dict[str, Tally]]:
    """LoCoMo through ``ContextManager`` (every mode on ``chat``), the session in its store.

    Each speaker-A turn is a ``prepare`` (the store keeps it); speaker B's turns are recorded.
    Each question is asked of a copy of the session as the conversation left it (messages and
    state, fingerprint included; the copy's recall index is built anew), so questions do not
    see each other.
    """
    from contextwright.session.memory import MemoryStore
    from contextwright.session.store import SessionKey

    data = load_locomo(folder)
    names = {False: "ContextManager (cache off)", True: MANAGED_CACHED}
    results: dict[int, dict[str, Tally]] = {b: {n: Tally() for n in names.values()}
                                            for b in budgets}
    conversations = list(data.conversations.values())[:limit] if limit else list(
        data.conversations.values())
    key = SessionKey(user_id="u", session_id="s")
    for budget in budgets:
        plan = BuildPlan.named("chat").with_budget(available_override=budget)
        for conversation in conversations:
            asks = [c for c in data.cases if c.sample_id == conversation.sample_id]
            asks = asks[:questions] if questions is not None else asks
            for cache, name in names.items():
                tally, clock = results[budget][name], _Clock()
                manager = _manager(plan, cache, clock)
                previous: list[Msg] | None = None
                for position, message in enumerate(conversation.history):
                    clock.now = _seconds(message.get("timestamp"), clock.now)
                    if message["role"] == "user" and position > 0:  # calls as the builder's
                        current = manager.prepare("u", "s", str(message["content"]))
                        current_messages = current.to_messages("openai")
                        tally.add(previous, current_messages, count,
                                  _kind(current.report.cache) if cache else None)
                        previous = current_messages
                    else:
                        manager.record("u", "s", messages=[dict(message)])
                stored = [m.message for m in manager.store.read(key)]
                state = manager.store.get_state(key)
                manager.close()
                for case in asks:
                    copy = MemoryStore()
                    copy.append(key, stored)
                    if state is not None:
                        copy.put_state(key, state.data, expected_version=None)
                    asker = _manager(plan, cache, clock, copy)
                    messages = asker.prepare("u", "s", case.question).to_messages("openai")
                    asker.close()
                    evidence = [conversation.turns[dia_id] for dia_id in case.evidence]
                    tally.quality.append(
                        (evidence_scores(evidence, messages, count)["strict_recall"].numerator, 1))
    return results


# --- output --------------------------------------------------------------------------------


def print_table(title: str, results: dict[int, dict[str, Tally]], quality: str,
                reference: dict[int, dict[str, Tally]] | None = None) -> None:
    """One row per budget and method; costs as a ratio to ``trim_messages`` at that budget."""
    print(f"\n## {title}\n")
    print(f"| budget | method | calls | hit share | hit share after system | "
          f"reused after system | cost vs trim (Anthropic) | cost vs trim (OpenAI) | "
          f"tool pairs | {quality} |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for budget, tallies in results.items():
        trim = (reference or results)[budget].get(TrimMessages.name)
        for name, tally in tallies.items():
            row = tally.row()
            ratio = {m.name: row[f"cost_{m.name}"] / trim.row()[f"cost_{m.name}"]
                     if trim else float("nan") for m in PRICE_MODELS}
            print(f"| {budget} | {name} | {row['calls']} | {row['hit']:.3f} | "
                  f"{row['hit_after_system']:.3f} | {row['reused_after_system']:.3f} | "
                  f"{ratio['anthropic']:.2f} | "
                  f"{ratio['openai']:.2f} | {row['pairs']:.3f} | {row['quality']:.3f} |")


def print_losses(title: str, results: dict[int, dict[str, Tally]],
                 method: str = WithPrevious.name) -> None:
    """Where the uncached tokens (after system) of ``method``'s cached calls come from."""
    print(f"\n## {title}: where the uncached history tokens come from\n")
    print("| budget | kind of call | calls | share of the uncached tokens |")
    print("|---|---|---|---|")
    for budget, tallies in results.items():
        lost = tallies[method].lost
        total = sum(tokens for _, tokens in lost.values()) or 1
        for kind, (calls, tokens) in sorted(lost.items(), key=lambda item: -item[1][1]):
            print(f"| {budget} | {kind} | {calls} | {tokens / total:.2f} |")


def _statement_tail(text: str) -> bool | str:
    return {"true": True, "false": False}.get(text, text)


def _growth(text: str) -> float | None:
    return None if text == "off" else float(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="folder holding the datasets")
    parser.add_argument("--limit", type=int, default=None,
                        help="τ-bench cut points / LoCoMo conversations to replay")
    parser.add_argument("--questions", type=int, default=None,
                        help="LoCoMo questions per conversation (default: all)")
    parser.add_argument("--step", type=float, default=CachePolicy().step)
    parser.add_argument("--recall-share", type=float, default=CachePolicy().recall_share)
    parser.add_argument("--head-share", type=float, default=CachePolicy().head_share)
    parser.add_argument("--head-growth", type=_growth, default=CachePolicy().head_growth,
                        help="a share, or 'off' for a head fixed at --head-share")
    parser.add_argument("--min-recall-coverage", type=float,
                        default=CachePolicy().min_recall_coverage)
    parser.add_argument("--min-recall-focus", type=float,
                        default=CachePolicy().min_recall_focus)
    parser.add_argument("--objective", choices=["balanced", "fill", "cost"],
                        default=CachePolicy().objective)
    parser.add_argument("--recall-cuts", choices=["questions", "any"],
                        default=CachePolicy().recall_cuts,
                        help="which inputs may cut the run for their recall (managers too)")
    parser.add_argument("--diffuse-tail", choices=["always", "questions", "never"],
                        default=CachePolicy().diffuse_tail,
                        help="which diffuse inputs get the recall tail (managers too)")
    parser.add_argument("--no-recall-tail", action="store_true",
                        help="cut afresh instead of showing missing recalled turns after the run")
    parser.add_argument("--statement-tail", type=_statement_tail,
                        default=CachePolicy().statement_tail,
                        help="true, false or facts: which inputs that ask nothing get a recall "
                             "tail (managers too)")
    parser.add_argument("--explain", action="store_true",
                        help="say where the uncached tokens of the builds with previous go")
    parser.add_argument("--tau-budgets", type=int, nargs="*", default=[1000, 2000, 4000])
    parser.add_argument("--locomo-budgets", type=int, nargs="*", default=[4000, 8000])
    parser.add_argument("--skip", choices=["tau", "locomo"], default=None)
    args = parser.parse_args()
    builder = ContextBuilder()
    count = builder.tokenizer.count
    policy = CachePolicy(step=args.step, recall_share=args.recall_share,
                         head_share=args.head_share, head_growth=args.head_growth,
                         min_recall_coverage=args.min_recall_coverage,
                         min_recall_focus=args.min_recall_focus,
                         objective=args.objective, recall_tail=not args.no_recall_tail,
                         diffuse_tail=args.diffuse_tail, recall_cuts=args.recall_cuts,
                         statement_tail=args.statement_tail)
    global MANAGER_POLICY
    MANAGER_POLICY = CachePolicy(diffuse_tail=args.diffuse_tail, recall_cuts=args.recall_cuts,
                                 min_recall_coverage=args.min_recall_coverage,
                                 head_growth=args.head_growth,
                                 statement_tail=args.statement_tail)
    methods: list[Method] = [Today(builder), WithPrevious(builder, policy), TrimMessages()]
    try:
        import agents  # noqa: F401

        methods.append(AgentsSessionLastN(count))
    except ImportError:
        print("openai-agents is not installed: its session trimming is left out")
    print(f"cache policy: {policy}")
    if args.skip != "tau":
        tau = replay_tau(args.data / "tau-bench-airline-dev", methods, args.tau_budgets,
                         args.limit, count)
        print_table("τ-bench dev trajectories (tool_heavy; budget = history cap and turn cap)",
                    tau, "fact survival")
        if args.explain:
            print_losses("τ-bench", tau)
        managed = replay_tau_manager(args.data / "tau-bench-airline-dev", args.tau_budgets,
                                     args.limit, count)
        print_table("τ-bench dev trajectories through ContextManager (every mode on the same "
                    "tool_heavy plan)", managed, "fact survival", reference=tau)
        if args.explain:
            print_losses("τ-bench through ContextManager", managed, MANAGED_CACHED)
    if args.skip != "locomo":
        locomo = replay_locomo(args.data / "locomo-dev", methods, args.locomo_budgets,
                               args.limit, count, args.questions)
        print_table("LoCoMo dev conversations (chat; budget = total)", locomo,
                    "strict evidence recall")
        if args.explain:
            print_losses("LoCoMo", locomo)
        managed_chat = replay_locomo_manager(args.data / "locomo-dev", args.locomo_budgets,
                                             args.limit, count, args.questions)
        print_table("LoCoMo dev conversations through ContextManager (every mode on the same "
                    "chat plan)", managed_chat, "strict evidence recall", reference=locomo)
        if args.explain:
            print_losses("LoCoMo through ContextManager", managed_chat, MANAGED_CACHED)


if __name__ == "__main__":
    main()
