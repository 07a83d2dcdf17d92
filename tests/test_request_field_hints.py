"""A misspelt request field is named with the closest one, as a misspelt plan field is."""

from __future__ import annotations

from typing import Any

import pytest

from contextwright import InvalidInputError, Request


@pytest.mark.parametrize(("data", "hint"), [
    ({"user_input": "hi", "histroy": []}, "histroy: Extra inputs are not permitted "
                                          "(did you mean 'history'?)"),
    ({"user_input": "hi", "documents": [{"id": "a", "text": "b", "verison": 1}]},
     "documents.0.verison: Extra inputs are not permitted (did you mean 'version'?)"),
    ({"user_input": "hi", "examples": [{"input": "a", "output": "b", "inptu": "c"}]},
     "examples.0.inptu: Extra inputs are not permitted (did you mean 'input'?)"),
])
def test_a_misspelt_field_names_the_closest_one(data: dict[str, Any], hint: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        Request.from_dict(data)
    assert hint in str(caught.value)


def test_a_field_like_no_other_gets_no_guess() -> None:
    with pytest.raises(InvalidInputError) as caught:
        Request.from_dict({"user_input": "hi", "zzz": 1})
    assert str(caught.value).endswith("zzz: Extra inputs are not permitted")


def test_validate_checks_every_field_of_a_document() -> None:
    import datetime

    from contextwright.core.request import Document

    for document, field in ((Document(id="a", text="t", timestamp=datetime.datetime(2026, 1, 1)),
                             "timestamp"),
                            (Document(id=5, text="t"), "id"),  # type: ignore[arg-type]
                            (Document(id="a", text="t", source=3), "source")):  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match=rf"documents\[0\]\.{field} must be"):
            Request(user_input="hi", documents=(document,)).validate()


def test_a_build_for_a_rendering_it_cannot_count_is_refused_naming_the_closest() -> None:
    from contextwright import BuildPlan, ContextBuilder

    with pytest.raises(InvalidInputError, match=r"target must be 'chat' or 'text' \(did you "
                                                r"mean 'text'\?\)"):
        ContextBuilder().build(BuildPlan.named("chat"), Request(user_input="hi"),
                               target="txt")  # type: ignore[arg-type]
