"""A Pydantic AI output-validation retry keeps the user's question as the build's input.

Pydantic AI asks again, in the user's role, when an output validator raises ``ModelRetry``. The
build must still choose and recall history for the user's own question: on a long conversation
under a budget, the retry is shown the old turn that answers the question just as the first
attempt was, and the question itself stays in the request.
"""

from __future__ import annotations

import asyncio

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextwright.integrations.pydantic_ai import ContextwrightHistory

QUESTION = "What is the seat on booking KST77? Answer as 'Booking <id>: ...'"
ANSWERING_TURN = "Yes, KST77 is confirmed."


def long_history(turns: int = 300) -> list[ModelMessage]:
    return [message for i in range(turns) for message in (
        ModelRequest(parts=[UserPromptPart(
            f"Is booking KST{i} confirmed? Also list its fare rules and baggage allowance.")]),
        ModelResponse(parts=[TextPart(
            f"Yes, KST{i} is confirmed. Fare rules: non-refundable, changes for a fee. "
            "Baggage 23kg.")]))]


def run_with_one_retry() -> list[list[ModelMessage]]:
    """The requests the model received: the first attempt, then the validator's retry."""
    requests: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(messages)
        answer = "KST77 is confirmed" if len(requests) == 1 else "Booking KST77: seat 12C"
        return ModelResponse(parts=[TextPart(answer)])

    agent = Agent(FunctionModel(model), instructions="You are an airline agent.",
                  capabilities=[ContextwrightHistory(budget=1500)])

    @agent.output_validator
    def starts_with_booking(output: str) -> str:
        if not output.startswith("Booking "):
            raise ModelRetry("Answer must start with 'Booking <id>:'")
        return output

    asyncio.run(agent.run(QUESTION, message_history=long_history()))  # run_sync leaves a loop open
    assert len(requests) == 2
    return requests


def texts(request: list[ModelMessage]) -> list[str]:
    return [str(getattr(part, "content", "")) for message in request for part in message.parts]


def test_the_retry_is_shown_what_the_first_attempt_was_shown() -> None:
    first, retry = run_with_one_retry()
    assert any(ANSWERING_TURN in text for text in texts(first))
    assert any(ANSWERING_TURN in text for text in texts(retry))


def test_the_retry_keeps_the_question_before_the_feedback() -> None:
    _, retry = run_with_one_retry()
    prompts = [str(part.content) for message in retry for part in message.parts
               if isinstance(part, UserPromptPart)]
    assert QUESTION in prompts
    assert prompts.index(QUESTION) == len(prompts) - 2  # the question, then the feedback
    assert "Answer must start with 'Booking <id>:'" in prompts[-1]
