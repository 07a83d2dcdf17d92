"""Model profiles: a model name sets the tokenizer, window, output reserve and request model."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.errors import PlanError, TokenizerError
from contextwright.models import ModelProfile, model_profile, register_model
from contextwright.tokens import get_tokenizer

REQUEST = Request(user_input="What is the capital of France?", system="Be brief.")


def test_an_openai_model_sets_an_exact_tokenizer_and_its_window() -> None:
    builder = ContextBuilder(model="gpt-4o")
    assert builder.tokenizer.name == "o200k_base" and builder.tokenizer.exact
    ctx = builder.build(BuildPlan.named("simple_qa"), REQUEST)
    assert ctx.available == int(128_000 * 0.75) - 4096
    body = ctx.to_request("openai")
    assert body["model"] == "gpt-4o" and body["max_completion_tokens"] == 4096
    assert ctx.report.exact_tokens


def test_a_claude_model_counts_are_marked_estimated_and_its_request_names_it() -> None:
    ctx = ContextBuilder(model="claude-sonnet-4-5-20250929").build(
        BuildPlan.named("simple_qa"), REQUEST)
    assert not ctx.report.exact_tokens
    assert "(estimated)" in ctx.report.format_debug()
    body = ctx.to_request("anthropic")
    assert body["model"] == "claude-sonnet-4-5-20250929" and body["max_tokens"] == 4096
    assert ctx.to_request("anthropic", model="other")["model"] == "other"


@pytest.mark.parametrize(("model", "window", "max_output"), [
    ("claude-opus-4-5-20251101", 200_000, 64_000), ("claude-sonnet-4-6", 1_000_000, 128_000),
    ("claude-sonnet-5-5", 1_000_000, 128_000), ("claude-fable-5-2", 1_000_000, 128_000),
    ("gpt-5.2", 400_000, 128_000), ("gpt-5.5", 1_000_000, 128_000)])
def test_current_models_have_their_published_limits(model: str, window: int,
                                                    max_output: int) -> None:
    profile = model_profile(model)
    assert (profile.window, profile.max_output) == (window, max_output)
    ctx = ContextBuilder(model=model).build(BuildPlan.named("simple_qa"), REQUEST)
    assert ctx.available == int(window * 0.75) - 4096


def test_claude_5_counts_scale_the_estimate_for_its_finer_tokenizer() -> None:
    # Anthropic: the tokenizer from Sonnet 5 on makes about 30% more tokens of the same text.
    text = "Refunds are issued within 15 days of delivery. 退款在交付后 15 天内办理。" * 40
    base = get_tokenizer("o200k_base")
    newer = ContextBuilder(model="claude-sonnet-5").tokenizer
    assert not newer.exact and newer.count(text) >= 1.3 * base.count(text)
    assert ContextBuilder(model="claude-sonnet-4-5").tokenizer.count(text) == base.count(text)
    cut = newer.truncate(text, 100)
    assert newer.count(cut) <= 100 and base.count(cut) <= 77
    plan = BuildPlan.named("chat").with_budget(available_override=900)
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": text[:300]}
               for i in range(30)]
    ctx = ContextBuilder(model="claude-sonnet-5").build(
        plan, Request(user_input="When are refunds issued?", history=history))
    assert ctx.total_tokens <= 900 and not ctx.report.exact_tokens
    with pytest.raises(PlanError, match="estimate_scale"):
        from contextwright.models import EstimatedTokenizer

        EstimatedTokenizer(base, "m", scale=0)


def test_window_and_reserved_output_override_the_profile_and_are_checked() -> None:
    ctx = ContextBuilder(model="gpt-4o", window=16_000, reserved_output=1000).build(
        BuildPlan.named("simple_qa"), REQUEST)
    assert ctx.available == 12_000 - 1000
    with pytest.raises(PlanError, match="at most"):
        ContextBuilder(model="gpt-4o", reserved_output=100_000)


def test_an_unknown_model_is_a_plan_error_and_users_can_register_one() -> None:
    with pytest.raises(PlanError, match="register_model"):
        ContextBuilder(model="my-local-llama")
    register_model(ModelProfile(name="my-local-llama", provider="openai",
                                tokenizer="cl100k_base", exact=True, window=8192,
                                max_output=2048, default_output=512))
    assert model_profile("my-local-llama-2025-01-01").window == 8192
    with pytest.raises(PlanError, match="unknown model"):
        model_profile("gpt-5-chat-latest")  # another model, not gpt-5 with a suffix
    assert ContextBuilder(model="my-local-llama").tokenizer.name == "cl100k_base"


def test_a_mistyped_tokenizer_path_says_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="file not found"):
        get_tokenizer(str(tmp_path / "tokenzier.json"))
    with pytest.raises(TokenizerError, match="file not found"):
        get_tokenizer(str(tmp_path / "models" / "tokenizer"))


def test_reserves_above_what_the_model_can_write_are_refused() -> None:
    plan = BuildPlan.named("simple_qa").with_budget(window=200_000, reserved_reasoning=8000)
    with pytest.raises(PlanError, match="can write"):
        ContextBuilder(model="claude-3-5-haiku").build(plan, REQUEST)


def test_an_override_beyond_the_known_window_is_refused() -> None:
    """A budget set directly was never checked against the model: gpt-4o with 200,000
    available built a 199,946-token context and asked for 4,096 more in a 128,000 window."""
    plan = BuildPlan.named("chat")
    with pytest.raises(PlanError, match="at most 123904"):
        ContextBuilder(model="gpt-4o").build(plan.with_budget(available_override=200_000),
                                             REQUEST)
    with pytest.raises(PlanError, match="window of 16000"):
        ContextBuilder(window=16_000, reserved_output=1000).build(
            plan.with_budget(available_override=15_001), REQUEST)
    fits = ContextBuilder(model="gpt-4o").build(
        plan.with_budget(available_override=123_904), REQUEST)
    assert fits.report.available == 123_904
    # No window known: the override is the budget (a plan's window is only its default).
    assert ContextBuilder().build(plan.with_budget(available_override=200_000),
                                  REQUEST).report.available == 200_000
