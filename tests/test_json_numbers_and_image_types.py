"""JSON that only Python reads, and image fields of the wrong JSON type.

``parse_document(..., finite=True)`` refuses ``NaN``, the infinities and floats too large to
hold, which Python's ``json`` reads but JSON has no word for; every parse refuses an integer too
long to read with ``MalformedDocument``, never a bare ``ValueError``. An image's ``detail`` or
``type`` given as a list or an object is an ``InvalidInputError`` naming the part (or simply
not an image part), never a ``TypeError`` from a set lookup.
"""

from __future__ import annotations

from typing import Any

import pytest

from contextwright.core.images import ImagePart, image_detail, image_from_part, is_image_part
from contextwright.core.parsing import MalformedDocument, parse_document
from contextwright.errors import InvalidInputError

URL = "https://example.com/a.png"


@pytest.mark.parametrize(("text", "message"), [
    ('{"a": NaN}', "NaN is not a JSON number"),
    ("[Infinity]", "Infinity is not a JSON number"),
    ('{"a": [-Infinity]}', "-Infinity is not a JSON number"),
    ("[1e400]", "too large for a float"),
    ("[-2.5e308]", "too large for a float"),
])
def test_finite_parsing_refuses_numbers_json_cannot_carry(text: str, message: str) -> None:
    with pytest.raises(MalformedDocument, match=message):
        parse_document(text, "json", finite=True)
    parse_document(text, "json")  # other readers keep Python's reading


def test_finite_parsing_keeps_every_finite_number() -> None:
    text = '{"a": 1.5, "b": -0.0, "c": 1e308, "d": 12345678901234567890, "e": [0, -1]}'
    assert parse_document(text, "json", finite=True) == parse_document(text, "json")


@pytest.mark.parametrize("finite", [False, True])
def test_an_integer_too_long_to_read_is_a_malformed_document(finite: bool) -> None:
    with pytest.raises(MalformedDocument, match="too many digits"):
        parse_document("[" + "9" * 5000 + "]", "json", finite=finite)


@pytest.mark.parametrize("detail", [[], {}, ["low"], 1, 2.5, True])
def test_an_image_detail_of_another_type_is_invalid_input(detail: Any) -> None:
    with pytest.raises(InvalidInputError, match="image detail must be one of the strings"):
        image_detail(detail)
    with pytest.raises(InvalidInputError, match="image detail"):
        ImagePart(url=URL, detail=detail)
    for part in ({"type": "image_url", "image_url": {"url": URL, "detail": detail}},
                 {"type": "input_image", "image_url": URL, "detail": detail}):
        with pytest.raises(InvalidInputError, match=r"^images\[2\]: image detail"):
            image_from_part(part, "images[2]")


def test_an_image_part_without_detail_is_auto_and_none_is_refused_on_the_dataclass() -> None:
    assert image_from_part({"type": "image_url", "image_url": {"url": URL}}, "x").detail == "auto"
    with pytest.raises(InvalidInputError, match="image detail"):
        ImagePart(url=URL, detail=None)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", [[], {}, ["image"], {"image": 1}])
def test_a_part_whose_type_is_not_a_string_is_no_image_part(kind: Any) -> None:
    assert not is_image_part({"type": kind, "image_url": {"url": URL}})


@pytest.mark.parametrize("url", [[], {}, 5])
def test_an_image_url_of_another_type_is_invalid_input(url: Any) -> None:
    with pytest.raises(InvalidInputError, match="image url"):
        ImagePart(url=url)
