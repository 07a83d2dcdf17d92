"""τ-bench id-fact survival with the plan ``select_plan`` picks (what a user gets without
``--plan``), next to the recency baseline, per history budget.

    python bench/default_plan_tau.py --data ../shared/data/tau-bench-airline-dev [--previous]

``--previous`` scores the earlier chooser instead (``tool_heavy`` only when this turn has tool
activity, else ``chat``), for comparison. Scores are per-trajectory means of the share of
id-like facts that survive.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from contextwright import BuildPlan, ContextBuilder, Request, select_plan
from contextwright.evaluate.tau import TauCase, build_tau, load_tau, recency_messages, tau_scores


def share(case: TauCase, messages: list[dict[str, object]], count: object) -> float:
    ratio = tau_scores(case, messages, count)["fact_survival"]  # type: ignore[arg-type]
    return ratio.numerator / max(ratio.denominator, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--previous", action="store_true")
    parser.add_argument("--budgets", type=int, nargs="*", default=[500, 1000, 2000])
    args = parser.parse_args()
    data = load_tau(args.data)
    builder = ContextBuilder()
    count = builder.tokenizer.count
    plans = {}
    for case in data.cases:
        request = Request(user_input=case.user_input, system=data.policy, history=case.history,
                          turn=case.turn)
        plans[case.traj_index, case.user_input] = (
            BuildPlan.named("tool_heavy" if case.turn else "chat") if args.previous
            else select_plan(request))
    print("plans chosen:", dict(Counter(p.name for p in plans.values())))
    for budget in args.budgets:
        ours = recency = 0.0
        for case in data.cases:
            plan = plans[case.traj_index, case.user_input]
            ours += share(case, build_tau(builder, plan, data.policy, case, budget)
                          .to_messages("openai"), count)
            recency += share(case, recency_messages(data.policy, case, budget, count), count)
        cases = len(data.cases)
        print(f"history budget {budget}: default plan {ours / cases:.3f}, "
              f"recency {recency / cases:.3f}")


if __name__ == "__main__":
    main()
