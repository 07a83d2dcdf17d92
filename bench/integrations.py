"""Framework integrations: per-turn overhead at 10,000 messages, and τ-bench fact survival.

    python bench/integrations.py [--data ../shared/data/tau-bench-airline-dev] [--messages 10000]
        [--turns 15] [--budget 1000] [--frameworks langchain,openai_agents,pydantic_ai,llama_index]

**Overhead.** Each framework runs its own agent loop with its own test model (no network) on a
``--messages`` conversation (``bench/synthetic.py``: English and Chinese, tool pairs with long
JSON results), one user turn after another; a turn is timed end to end and the median is
reported for: the loop with no context management (``alone``), with contextwright (budget
8,192), and with the framework's own trimming where it has one (LangChain: ``trim_messages``,
``strategy="last"``, ``count_tokens_approximately``, 8,192, in a model-call middleware;
LlamaIndex: ``Memory.from_defaults(token_limit=8192)``). ``overhead`` is contextwright minus
alone; the ratio divides it by the native trimming's overhead. The OpenAI Agents SDK and Pydantic
AI have no token trimming of their own. For the Agents SDK the session read is timed apart
(``ContextwrightSession`` on SQLite vs the SDK's ``SQLiteSession``, ``get_items()`` of the whole
conversation). The first turn (cold caches) is left out of the median.

**τ-bench.** For each trajectory (``--data``, read in place) the framework gets the conversation
as it would hold it and contextwright the plan ``build_tau`` uses at ``--budget`` (``tool_heavy``
capped so the conversation fits; ``evaluate.tau.history_budget_plan``); what the framework's
model received is scored like ``bench/tau_pairs.py`` (share of id-like facts verbatim, tool pairs
intact). Next to it: a direct ``build`` with the same plan, and the framework's native trimming
to the same budget (LangChain ``trim_messages`` with the same o200k count; LlamaIndex
``ChatMemoryBuffer``-style ``Memory`` with ``token_limit``; the system prompt outside the budget
for all).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from contextwright import BuildPlan, ContextBuilder, MemoryStore, SqliteStore, chat_messages
from contextwright.convert import to_langchain, to_llama_index
from contextwright.evaluate import baseline
from contextwright.evaluate.metrics import message_tokens
from contextwright.evaluate.tau import (
    TauCase,
    TauSet,
    build_tau,
    history_budget_plan,
    load_tau,
    tau_scores,
)
from synthetic import make_history

warnings.filterwarnings("ignore", category=DeprecationWarning)  # frameworks' own deprecations
SYSTEM = "You are a customer service agent. Answer briefly."
BUDGET = 8192
Msgs = list[dict[str, Any]]
Turn = Callable[[str], Any]


def median_turn(turn: Turn, turns: int) -> float:
    """Median seconds of ``turn`` over ``turns`` questions, after one untimed cold turn."""
    turn("Hello, are you there?")
    times = []
    for index in range(turns):
        start = time.perf_counter()
        turn(f"Can you check order A-{10_000 + index} for me?")
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# --- LangChain -------------------------------------------------------------------------------


def langchain_loop(history: Msgs, middleware: list[Any]) -> Turn:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage

    state = {"messages": to_langchain(history[1:])}

    def turn(text: str) -> None:
        agent = create_agent(GenericFakeChatModel(messages=iter([AIMessage("Done.")])),
                             system_prompt=SYSTEM, middleware=middleware)
        state["messages"] = agent.invoke(
            {"messages": [*state["messages"], HumanMessage(text)]})["messages"]

    return turn


def langchain_native(budget: int, counter: Any = None) -> Any:
    """LangChain's own trimming as a model-call middleware (what its docs recommend)."""
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages.utils import count_tokens_approximately, trim_messages

    class Trim(AgentMiddleware):  # type: ignore[type-arg]
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            kept = trim_messages(request.messages, max_tokens=budget, strategy="last",
                                 token_counter=counter or count_tokens_approximately,
                                 start_on="human", include_system=False, allow_partial=False)
            return handler(request.override(messages=kept))

    return Trim()


def overhead_langchain(history: Msgs, turns: int) -> dict[str, float]:
    from contextwright.integrations.langchain import ContextwrightMiddleware

    return {"alone": median_turn(langchain_loop(history, []), turns),
            "contextwright": median_turn(langchain_loop(
                history, [ContextwrightMiddleware(budget=BUDGET)]), turns),
            "native": median_turn(langchain_loop(history, [langchain_native(BUDGET)]), turns)}


# --- OpenAI Agents SDK -----------------------------------------------------------------------


def responses_items(messages: Msgs) -> Msgs:
    items: Msgs = []
    for message in messages:
        if message["role"] == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"],
                          "output": message["content"]})
        elif message.get("tool_calls"):
            items += [{"type": "function_call", "call_id": c["id"], "name": c["function"]["name"],
                       "arguments": c["function"]["arguments"]} for c in message["tool_calls"]]
        elif message["role"] != "system":
            items.append({"role": message["role"], "content": message["content"] or ""})
    return items


def agents_loop(history: Msgs, apply: Any) -> Turn:
    from agents import Agent, RunConfig, Runner
    from agents.testing import ScriptedModel, assistant_message

    items = responses_items(history)
    config = RunConfig(call_model_input_filter=apply, tracing_disabled=True)

    def turn(text: str) -> None:
        agent = Agent(name="a", instructions=SYSTEM,
                      model=ScriptedModel([[assistant_message("Done.")]]))
        result = Runner.run_sync(agent, [*items, {"role": "user", "content": text}],
                                 run_config=config)
        items[:] = result.to_input_list()

    return turn


def overhead_agents(history: Msgs, turns: int, folder: Path) -> dict[str, float]:
    from agents import SQLiteSession

    from contextwright.integrations.openai_agents import (
        ContextwrightInputFilter,
        ContextwrightSession,
    )

    items = responses_items(history)
    ours = ContextwrightSession(SqliteStore(str(folder / "cw.db")), user_id="u", session_id="s")
    theirs = SQLiteSession("s", str(folder / "sdk.db"))
    for session in (ours, theirs):
        asyncio.run(session.add_items(items))  # type: ignore[attr-defined]
    reads = {name: statistics.median(_timed(lambda s=session: asyncio.run(s.get_items()))
                                     for _ in range(turns))
             for name, session in (("session_ours", ours), ("session_sdk", theirs))}
    return {"alone": median_turn(agents_loop(history, None), turns),
            "contextwright": median_turn(agents_loop(
                history, ContextwrightInputFilter(budget=BUDGET)), turns), **reads}


def _timed(work: Callable[[], Any]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


# --- Pydantic AI -----------------------------------------------------------------------------


def pydantic_loop(history: Msgs, capabilities: list[Any]) -> Turn:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    from contextwright.integrations.pydantic_ai import to_pydantic_ai

    messages = to_pydantic_ai(history[1:])
    model = FunctionModel(lambda _messages, _info: ModelResponse(parts=[TextPart("Done.")]))
    agent: Agent[None, str] = Agent(model, instructions=SYSTEM, capabilities=capabilities)

    def turn(text: str) -> None:
        messages[:] = agent.run_sync(text, message_history=messages).all_messages()

    return turn


def overhead_pydantic(history: Msgs, turns: int) -> dict[str, float]:
    from contextwright.integrations.pydantic_ai import ContextwrightHistory

    return {"alone": median_turn(pydantic_loop(history, []), turns),
            "contextwright": median_turn(pydantic_loop(
                history, [ContextwrightHistory(budget=BUDGET)]), turns)}


# --- LlamaIndex ------------------------------------------------------------------------------


def llama_loop(memory: Any) -> Turn:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    def turn(text: str) -> None:
        async def main() -> None:
            agent = FunctionAgent(tools=[], llm=MockFunctionCallingLLM(), system_prompt=SYSTEM)
            await agent.run(text, memory=memory)

        asyncio.run(main())

    return turn


def overhead_llama(history: Msgs, turns: int, folder: Path) -> dict[str, float]:
    from llama_index.core.memory import Memory

    from contextwright.integrations.llama_index import ContextwrightMemory

    messages = to_llama_index(history[1:])
    ours = ContextwrightMemory(SqliteStore(str(folder / "li.db")), user_id="u", session_id="s",
                               budget=BUDGET)
    native = Memory.from_defaults(session_id="s", token_limit=BUDGET)
    for memory in (ours, native):
        memory.put_messages(messages)
    unlimited = Memory.from_defaults(session_id="u", token_limit=10**9)
    unlimited.put_messages(messages)
    return {"alone": median_turn(llama_loop(unlimited), turns),
            "contextwright": median_turn(llama_loop(ours), turns),
            "native": median_turn(llama_loop(native), turns)}


# --- τ-bench ---------------------------------------------------------------------------------


def tau_langchain(data: TauSet, case: TauCase, plan: Callable[..., BuildPlan]) -> Msgs:
    from langchain.agents import create_agent
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.messages.utils import convert_to_openai_messages

    from contextwright.integrations.langchain import ContextwrightMiddleware

    seen: list[Any] = []

    class Record(BaseCallbackHandler):
        def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
            seen.append(messages[0])

    agent = create_agent(GenericFakeChatModel(messages=iter([AIMessage("Done.")])),
                         system_prompt=data.policy,
                         middleware=[ContextwrightMiddleware(plan=plan)])
    agent.invoke({"messages": to_langchain(list(case.conversation))}, {"callbacks": [Record()]})
    return convert_to_openai_messages(seen[0])  # type: ignore[return-value]


def tau_langchain_native(data: TauSet, case: TauCase, budget: int, count: Any) -> Msgs:
    from langchain_core.messages.utils import convert_to_openai_messages, trim_messages

    def counter(messages: list[Any]) -> int:
        return sum(message_tokens(m, count) for m in chat_messages(messages))

    kept = trim_messages(to_langchain(list(case.conversation)), max_tokens=budget,
                         strategy="last", token_counter=counter, start_on="human",
                         include_system=False, allow_partial=False)
    return [{"role": "system", "content": data.policy}, *convert_to_openai_messages(kept)]  # type: ignore[list-item]


def tau_agents(data: TauSet, case: TauCase, plan: Callable[..., BuildPlan]) -> Msgs:
    from agents import Agent, RunConfig, Runner
    from agents.testing import ScriptedModel, assistant_message

    from contextwright.integrations.openai_agents import ContextwrightInputFilter

    model = ScriptedModel([[assistant_message("Done.")]])
    Runner.run_sync(Agent(name="a", instructions=data.policy, model=model),
                    responses_items(list(case.conversation)),
                    run_config=RunConfig(call_model_input_filter=ContextwrightInputFilter(
                        plan=plan), tracing_disabled=True))
    call = model.calls[0]
    return [{"role": "system", "content": call.system_instructions},
            *chat_messages(call.input)]


def tau_pydantic(data: TauSet, case: TauCase, plan: Callable[..., BuildPlan]) -> Msgs:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    from contextwright.integrations.pydantic_ai import (
        ContextwrightHistory,
        from_pydantic_ai,
        to_pydantic_ai,
    )

    seen: list[Any] = []

    def model(messages: list[Any], _info: Any) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart("Done.")])

    agent: Agent[None, str] = Agent(FunctionModel(model), system_prompt=data.policy,
                                    capabilities=[ContextwrightHistory(plan=plan)])
    agent.run_sync(None, message_history=to_pydantic_ai(list(case.conversation)))
    return from_pydantic_ai(seen[0])


def tau_llama(data: TauSet, case: TauCase, plan: Callable[..., BuildPlan]) -> Msgs:
    from contextwright.integrations.llama_index import ContextwrightMemory

    seen: list[Any] = []

    def respond(messages: Any, **kwargs: Any) -> Any:
        from llama_index.core.llms import ChatMessage

        seen.append(list(messages))
        return ChatMessage(role="assistant", content="Done.")

    async def main() -> None:
        from llama_index.core.agent.workflow import FunctionAgent
        from llama_index.core.llms.mock import MockFunctionCallingLLM

        memory = ContextwrightMemory(MemoryStore(), user_id="u", session_id="s",
                                     system=data.policy, plan=plan)
        agent = FunctionAgent(tools=[], llm=MockFunctionCallingLLM(response_generator=respond))
        await agent.run(chat_history=to_llama_index(list(case.conversation)), memory=memory)

    asyncio.run(main())
    return chat_messages(seen[0])


def tau_llama_native(data: TauSet, case: TauCase, budget: int, count: Any) -> Msgs:
    from llama_index.core.memory import Memory

    memory = Memory.from_defaults(session_id="s", token_limit=budget,
                                  tokenizer_fn=lambda text: [0] * count(text))
    memory.put_messages(to_llama_index(list(case.conversation)))
    return [{"role": "system", "content": data.policy}, *chat_messages(memory.get())]


def tau_table(data: TauSet, budget: int, frameworks: list[str]) -> list[str]:
    builder = ContextBuilder()
    count = builder.tokenizer.count
    base = BuildPlan.named("tool_heavy")

    def plan(request: Any) -> BuildPlan:
        return history_budget_plan(builder, base, request, budget)

    def mean(score: Callable[[TauCase], Msgs]) -> tuple[float, float]:
        facts = pairs = 0.0
        for case in data.cases:
            scores = tau_scores(case, score(case), count)
            ratio = scores["fact_survival"]
            facts += ratio.numerator / max(ratio.denominator, 1)
            pairs += scores["pair_integrity"].numerator / scores["pair_integrity"].denominator
        return facts / len(data.cases), pairs / len(data.cases)

    direct = mean(lambda case: build_tau(builder, base, data.policy, case, budget)
                  .to_messages("openai"))
    recency = mean(lambda case: [{"role": "system", "content": data.policy}, *baseline.recency(
        case.conversation, budget, lambda m: message_tokens(m, count))])
    paths = {"langchain": tau_langchain, "openai_agents": tau_agents,
             "pydantic_ai": tau_pydantic, "llama_index": tau_llama}
    natives = {"langchain": tau_langchain_native, "llama_index": tau_llama_native}
    lines = [f"τ-bench ({len(data.cases)} trajectories), history budget {budget}: direct build "
             f"facts {direct[0]:.3f} pairs {direct[1]:.3f}; recency facts {recency[0]:.3f}",
             "| framework | through the integration: facts | pairs | native trimming: facts "
             "| pairs |", "|---|---|---|---|---|"]
    for name in frameworks:
        ours = mean(lambda case, name=name: paths[name](data, case, plan))  # type: ignore[misc]
        native = (mean(lambda case, name=name: natives[name](data, case, budget, count))  # type: ignore[misc]
                  if name in natives else None)
        tail = (f"{native[0]:.3f} | {native[1]:.3f}" if native else "— (none) | —")
        lines.append(f"| {name} | {ours[0]:.3f} | {ours[1]:.3f} | {tail} |")
    return lines


def overhead_table(history: Msgs, turns: int, frameworks: list[str], folder: Path) -> list[str]:
    runs = {"langchain": lambda: overhead_langchain(history, turns),
            "openai_agents": lambda: overhead_agents(history, turns, folder),
            "pydantic_ai": lambda: overhead_pydantic(history, turns),
            "llama_index": lambda: overhead_llama(history, turns, folder)}
    lines = [f"Per turn at {len(history):,} messages (median of {turns}):",
             "| framework | loop alone | with contextwright | overhead | native trimming "
             "| native overhead | ratio |", "|---|---|---|---|---|---|---|"]
    extra = []
    for name in frameworks:
        row = runs[name]()
        ours = row["contextwright"] - row["alone"]
        if "native" in row:
            theirs = row["native"] - row["alone"]
            ratio = f"{ours / theirs:.2f}×" if theirs > 0 else "n/a (native is faster than alone)"
            tail = f"{ms(row['native'])} | {ms(theirs)} | {ratio}"
        else:
            tail = "— (none) | — | —"
        lines.append(f"| {name} | {ms(row['alone'])} | {ms(row['contextwright'])} | {ms(ours)} "
                     f"| {tail} |")
        if "session_ours" in row:
            extra.append(f"Agents SDK session get_items() of {len(history):,} items: "
                         f"ContextwrightSession(SQLite) {ms(row['session_ours'])}, "
                         f"SQLiteSession {ms(row['session_sdk'])}")
    return lines + extra


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--frameworks", default="langchain,openai_agents,pydantic_ai,llama_index")
    parser.add_argument("--skip-overhead", action="store_true")
    args = parser.parse_args()
    frameworks = args.frameworks.split(",")
    import tempfile

    if not args.skip_overhead:
        with tempfile.TemporaryDirectory() as folder:
            print("\n".join(overhead_table(make_history(args.messages), args.turns, frameworks,
                                           Path(folder))), flush=True)
    if args.data is not None:
        print("\n".join(tau_table(load_tau(args.data), args.budget, frameworks)))


if __name__ == "__main__":
    main()
