"""``select: relevant`` finds tools whose names glue digits to words (``get_weather2``)."""

from __future__ import annotations

from typing import Any

import pytest

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.analysis import analyzer


def tool(name: str, description: str, **params: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description,
            "parameters": {"type": "object", "properties": {
                key: {"type": "string", "description": text} for key, text in params.items()}}}}


TOOLS = [tool("get_weather2", "Current conditions for a city.", city="City name."),
         tool("oauth2_login", "Sign the user in.", provider="Identity provider."),
         tool("s3upload", "Put a file in a bucket.", path="Local file."),
         tool("save_memo", "Save a short note for the user to read later.", text="The note.")]
PLAN = (BuildPlan.builder("tools").add("system").add("tools", options={"select": "relevant"})
        .add("user").budget(window=100_000).build())


@pytest.mark.parametrize(("question", "wanted"), [
    ("What's the weather in Paris? Also save a memo.", {"get_weather2", "save_memo"}),
    ("Log me in with oauth, then save a memo", {"oauth2_login", "save_memo"}),
    ("upload the report and save a memo", {"s3upload", "save_memo"})])
def test_a_tool_name_with_digits_is_found_by_its_word(question: str, wanted: set[str]) -> None:
    context = ContextBuilder().build(PLAN, Request(user_input=question, tools=TOOLS))
    assert wanted <= {schema["function"]["name"] for schema in context.tool_schemas}


def test_the_tools_analyzer_keeps_the_whole_word_beside_its_parts() -> None:
    terms = analyzer("tools").terms
    assert terms("get_weather2") == ["weather2", "weather"]
    assert terms("oauth2_login") == ["oauth2", "oauth", "login"]
    assert terms("s3upload v2") == ["s3upload", "upload", "v2"]
    assert analyzer("recall").terms("weather2") == ["weather2"]  # other analyzers unchanged
