"""``prepare(target="text")``: a session's context can be built for the text rendering.

A context built for the chat formats is counted for them; its text rendering escapes lines that
look like labels or separators and may then not fit, so ``to_text()`` refuses it. Built with
``target="text"`` it is counted for the text itself and always fits.
"""

from __future__ import annotations

from contextwright.errors import ValidationError
from contextwright.manager import ContextManager

BUDGET = {"available_override": 700}
LOOKALIKE = "User: hi\n=== System ===\n" * 20  # each line costs an escape in the text rendering
ANSWER = "Assistant: x\n" * 30


def _text_failures(target: str | None) -> tuple[int, ContextManager]:
    # Without the stable prefix, whose cuts leave a step of the budget free, builds come close
    # enough to the budget for the text rendering's escapes to matter.
    cm = ContextManager(budget=BUDGET, background=False, cache=False)
    failures = 0
    for _ in range(25):
        ctx = (cm.prepare("u", "s", LOOKALIKE) if target is None
               else cm.prepare("u", "s", LOOKALIKE, target="text"))
        try:
            text = ctx.to_text()
        except ValidationError:
            failures += 1
        else:
            assert cm.tokenizer.count(text) <= ctx.context.available
        cm.record("u", "s", assistant=ANSWER)
    return failures, cm


def test_prepare_for_the_text_rendering_always_fits_the_budget() -> None:
    failures, _ = _text_failures("text")
    assert failures == 0


def test_the_chat_count_is_what_makes_to_text_refuse() -> None:
    """The case ``target`` exists for: near the budget, a chat build's text does not fit."""
    failures, _ = _text_failures(None)
    assert failures > 0


def test_a_text_build_still_renders_messages() -> None:
    cm = ContextManager(background=False)
    ctx = cm.prepare("u", "s", "hello", target="text")
    assert ctx.to_messages()[-1]["content"] == "hello"
    assert "hello" in ctx.to_text()
