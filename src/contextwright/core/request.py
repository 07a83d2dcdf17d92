"""The request one build answers: user input plus everything sources may draw on.

``Request`` keeps references to the caller's lists (no copy), so building from a 100,000-message
history costs nothing up front; the history source reads it newest-first, only as far as the budget
reaches. ``Request.from_dict`` validates a whole JSON request (the CLI and service path).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from contextwright.checks import whole_number
from contextwright.core.images import ImagePart, image_from_part
from contextwright.core.items import Message, check_text, parse_message
from contextwright.core.pairing import misplaced_result_message, pair_results
from contextwright.errors import InvalidInputError

# A single text field larger than this is refused outright: nothing that large can be meant for
# one model call, and refusing early keeps a build of hostile input well under a second.
MAX_TEXT_CHARS = 50_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Document:
    """A retrieved document or chunk offered to the context (untrusted data)."""

    id: str
    """Stable id; also the de-duplication key."""
    text: str
    """The document text."""
    score: float | None = None
    """Retriever score, a finite number (any real type: ``int``, numpy floats); higher is
    better. Without any score, ``DocumentSource`` keeps the documents most relevant to the
    input (option ``rank: given``: the first ones)."""
    source: str | None = None
    """Source label shown with the text (file, URL, section)."""
    timestamp: str | None = None
    """Version time (ISO 8601); a newer version of a document beats an older one."""
    version: int | None = None
    """Version number, compared before the timestamp (none is older than any)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """Everything one build may draw on; sources take what they need from it."""

    user_input: str
    """The current user message (never cut)."""
    system: str | None = None
    """System prompt (never cut)."""
    history: Sequence[Mapping[str, Any]] = ()
    """Earlier turns as OpenAI chat message dicts, oldest first (``id``/``timestamp`` optional)."""
    turn: Sequence[Mapping[str, Any]] = ()
    """This turn's assistant tool calls and tool results so far; rendered after the user input."""
    tools: Sequence[Mapping[str, Any]] = ()
    """OpenAI tool schemas (``{"type": "function", "function": {...}}``)."""
    documents: Sequence[Document] = ()
    """Retrieved documents."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment facts (time, time zone, run mode, locale) supplied by the caller."""
    examples: Sequence[Mapping[str, str]] = ()
    """Few-shot examples as ``{"input": ..., "output": ...}``."""
    notes: Sequence[str] = ()
    """Scratchpad / reflection notes of a multi-step task."""
    images: Sequence[ImagePart] = ()
    """Images of the user's input, shown after its text (never cut; counted by the model's
    image rule). Image parts in any accepted form are read into ``ImagePart``s."""

    def __post_init__(self) -> None:
        """Check the containers' shapes (cheap: no message is read, see ``validate``).

        Images are read and checked here: they are few, and a bad one must fail early.
        """
        for name in ("history", "turn", "tools", "documents", "examples", "notes", "images"):
            value = getattr(self, name)
            if not isinstance(value, Sequence) or isinstance(value, str | bytes):
                raise InvalidInputError(f"{name} must be a list")
        if not isinstance(self.env, Mapping):
            raise InvalidInputError("env must be an object of strings")
        if any(not isinstance(doc, Document) for doc in self.documents):
            docs = tuple(_as_document(doc, i) for i, doc in enumerate(self.documents))
            object.__setattr__(self, "documents", docs)
        if not isinstance(self.images, tuple) or any(
                not isinstance(image, ImagePart) for image in self.images):
            object.__setattr__(self, "images", tuple(
                image_from_part(image, f"images[{i}]") for i, image in enumerate(self.images)))

    @classmethod
    def from_dict(cls, data: object) -> Request:
        """Validate a JSON request (see README "Request schema") and check every message."""
        try:
            model = _RequestModel.model_validate(data)
        except PydanticValidationError as exc:
            raise InvalidInputError("invalid request: " + _describe(exc)) from None
        request = cls(
            user_input=model.user_input,
            system=model.system,
            history=model.history,
            turn=model.turn,
            tools=model.tools,
            documents=tuple(Document(**doc.model_dump()) for doc in model.documents),
            env=model.env,
            examples=[example.model_dump() for example in model.examples],
            notes=model.notes,
            images=tuple(image_from_part(image, f"images[{index}]")
                         for index, image in enumerate(model.images)),
        )
        request.validate()
        return request

    def validate(self) -> None:
        """Check the whole request now; raises ``InvalidInputError`` naming the field.

        Every message and text is parsed, and tool results are paired with their calls in
        ``history`` and ``turn``, also in the part a build would never read.
        """
        check_text(self.user_input, "user_input")
        if self.system is not None:
            check_text(self.system, "system")
        for name, messages in (("history", self.history), ("turn", self.turn)):
            parsed = [parse_message(raw, f"{name}[{index}]") for index, raw in enumerate(messages)]
            check_tool_pairing(parsed, name)
        for index, doc in enumerate(self.documents):
            check_document(doc, index)
            check_score(doc.score, f"documents[{index}].score")
        for index, example in enumerate(self.examples):
            check_example(example, f"examples[{index}]")
        for index, note in enumerate(self.notes):
            check_text(note, f"notes[{index}]")


def check_score(score: object, where: str) -> float | None:
    """A document's score as a float (None: no score); ``InvalidInputError`` naming it else.

    Scores are compared to order the documents: a score as text (``"0.92"`` from a CSV or
    JSON retriever) cannot be, and NaN or infinity would order them arbitrarily. The message
    does not echo the value.
    """
    if score is None:
        return None
    if isinstance(score, bool) or not isinstance(score, Real):
        raise InvalidInputError(f"{where} must be a number, not {type(score).__name__}")
    try:
        value = float(score)
    except OverflowError:  # an int or fraction beyond any float
        value = math.inf
    if not math.isfinite(value):
        raise InvalidInputError(f"{where} must be a finite number")
    return value


EXAMPLE_FIELDS = ("input", "output")
"""What a few-shot example holds: both, and nothing else."""


def check_example(example: object, where: str) -> tuple[str, str]:
    """The input and output of one few-shot example; ``InvalidInputError`` naming the field.

    A misspelt or missing key is refused rather than read as an empty text: the model would
    otherwise be shown an example with nothing in it.
    """
    if not isinstance(example, Mapping):
        raise InvalidInputError(f"{where} must be an object {{input, output}}")
    for key in example:
        if key not in EXAMPLE_FIELDS:
            raise InvalidInputError(f"{where}: unknown field {str(key)!r} (an example has "
                                    "input and output)")
    for key in EXAMPLE_FIELDS:
        if key not in example:
            raise InvalidInputError(f"{where}.{key} is missing")
    return (check_text(example["input"], f"{where}.input"),
            check_text(example["output"], f"{where}.output"))


def check_tool_pairing(messages: Sequence[Message], where: str) -> None:
    """Raise ``InvalidInputError`` for a tool result that answers no call, as a build would.

    The build's rule (``sources.conversation``): tool results follow, directly or after other
    results, the assistant message whose calls they answer, each call answered at most once
    (a later message may reuse a call id). A call without a result is not an error: the build
    shows a placeholder result for it.
    """
    index = 0
    while index < len(messages):
        opened_at, message = index, messages[index]
        if message.role == "tool":  # only the first message can be a result opening a run
            raise InvalidInputError(
                misplaced_result_message(messages.__getitem__, index, 0, where))
        index += 1
        results = []
        while index < len(messages) and messages[index].role == "tool":
            results.append(messages[index].tool_call_id)
            index += 1
        if not results:
            continue
        if not message.tool_calls:
            raise InvalidInputError(
                misplaced_result_message(messages.__getitem__, opened_at + 1, 0, where))
        stray = pair_results([c.id for c in message.tool_calls], results).stray
        if stray is not None:
            raise InvalidInputError(
                f"{where}[{opened_at + 1 + stray}] answers no call of {where}[{opened_at}]")


def _as_document(doc: object, index: int) -> Document:
    """A ``Document``, from itself or a ``{id, text, score?, source?, timestamp?, version?}``."""
    if isinstance(doc, Document):
        return doc
    try:
        model = _DocumentModel.model_validate(doc)
    except PydanticValidationError as exc:
        described = _describe(exc, "a document must be an object {id, text, ...}",
                              _DocumentModel)
        raise InvalidInputError(f"documents[{index}]: {described}") from None
    return Document(**model.model_dump())


class _DocumentModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    text: str = Field(max_length=MAX_TEXT_CHARS)
    score: float | None = Field(default=None, strict=True, allow_inf_nan=False)
    source: str | None = None
    timestamp: str | None = None
    version: int | None = Field(default=None, ge=0, strict=True)


class _ExampleModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: str
    output: str


class _RequestModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_input: str = Field(max_length=MAX_TEXT_CHARS)
    system: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    history: list[dict[str, Any]] = []
    turn: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    documents: list[_DocumentModel] = []
    env: dict[str, str] = {}
    examples: list[_ExampleModel] = []
    notes: list[str] = []
    images: list[dict[str, Any]] = []


def _describe(exc: PydanticValidationError,
              not_an_object: str = "the request must be a JSON object",
              model: type[BaseModel] = _RequestModel) -> str:
    """Name the failing fields without echoing their values.

    Input that is not an object at all gets ``not_an_object`` and what came instead, never
    the name of the private model that read it.
    """
    parts = []
    for error in exc.errors()[:5]:
        if not error["loc"] and error["type"] == "model_type":
            parts.append(f"{not_an_object}, not {_json_kind(error['input'])}")
            continue
        location = ".".join(str(part) for part in error["loc"]) or "request"
        hint = _closest_field(error["loc"], model) if error["type"] == "extra_forbidden" else ""
        parts.append(f"{location}: {error['msg']}{hint}")
    return "; ".join(parts)


def _closest_field(loc: tuple[int | str, ...], model: type[BaseModel]) -> str:
    """`` (did you mean 'history'?)`` for a misspelt field at ``loc`` of ``model``, else ''."""
    *parents, given = loc
    for parent in parents:  # a list of objects: the field holding it names their model
        if isinstance(parent, str):
            inner = _item_model(model, parent)
            if inner is None:
                return ""
            model = inner
    close = difflib.get_close_matches(str(given), tuple(model.model_fields), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _item_model(model: type[BaseModel], name: str) -> type[BaseModel] | None:
    """The model of the objects a list field ``name`` of ``model`` holds (None: not such)."""
    field = model.model_fields.get(name)
    inner = get_args(field.annotation) if field is not None else ()
    if len(inner) == 1 and isinstance(inner[0], type) and issubclass(inner[0], BaseModel):
        return inner[0]
    return None


def _json_kind(value: object) -> str:
    """What JSON calls ``value``'s type, to say what came instead of an object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def check_document(doc: Any, index: int) -> None:
    """Refuse a request document whose fields have the wrong types (``InvalidInputError``).

    Checked before the versions of an id are compared: a ``version`` given as text ("10"
    against "9") or a number below 0 would pick the wrong version without a word, and a
    timestamp that is not text (a ``datetime``) would fail the comparison with an error that
    names no document. The message names the field, never its value.
    """
    where = f"documents[{index}]"
    check_text(doc.text, f"{where}.text")
    check_text(doc.id, f"{where}.id")
    for name in ("source", "timestamp"):
        value = getattr(doc, name)
        if value is not None:
            check_text(value, f"{where}.{name}")
    if doc.version is not None:
        whole_number(doc.version, f"{where}.version")
