"""The text rendering says what it leaves out, as the provider renderings do."""

from __future__ import annotations

from contextwright import BuildPlan, ContextBuilder, Request

NAMED = Request(user_input="and you?", history=[
    {"role": "user", "content": "I am fine", "name": "alice"},
    {"role": "assistant", "content": "Good."},
    {"role": "user", "content": "Me too", "name": "bob"},
    {"role": "assistant", "content": "Great."}])


def test_the_text_prompt_reports_the_speaker_names_it_leaves_out() -> None:
    ctx = ContextBuilder().build(BuildPlan.named("chat"), NAMED)
    assert "alice" not in ctx.to_text()
    assert ctx.rendering_notes("text") == [
        "2 speaker name(s) left out: the text prompt names each message's role, not who speaks"]
    assert ctx.rendering_notes("anthropic") == [
        "2 speaker name(s) left out: a Messages API message has no name field"]


def test_a_text_prompt_without_names_has_no_note() -> None:
    ctx = ContextBuilder().build(BuildPlan.named("chat"), Request(user_input="hi"))
    assert ctx.rendering_notes("text") == []
