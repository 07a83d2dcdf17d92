"""Request bodies of the service: read with bounded work, validated, described without echoing.

A body is read up to the configured size (413 past it), parsed by ``core.parsing`` (UTF-8 JSON,
nesting bounded) and validated with the pydantic models below, which are also the OpenAPI schema.
Their fields are the keyword arguments of the Python API (``ContextManager.prepare`` and
``record``, ``ContextBuilder.build`` with the request schema) plus how to render the result.
"""

from __future__ import annotations

import re
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError
from starlette.requests import Request as HttpRequest

from contextwright.core.parsing import MalformedDocument, parse_document
from contextwright.core.plan import MAX_WINDOW
from contextwright.errors import ValidationError
from contextwright.server.problems import BAD_INPUT, MEDIA, TOO_LARGE, Problem

MAX_OUTPUT_TOKENS = MAX_WINDOW
"""The largest ``max_tokens`` rendered: the largest window, an integer every JSON client reads
exactly."""
RenderFormat = Literal["openai", "openai-responses", "anthropic", "text"]
TokenizerName = Literal["o200k_base", "cl100k_base", "estimate"]


class Rendering(BaseModel):
    """How the built context is returned: the format and the settings of ``to_request``.

    Strict, like the Python API: ``true`` is no ``max_tokens`` (pydantic would read it as 1)
    and ``"yes"`` no ``parallel_tool_calls``; a value of another JSON type is a 400.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    format: RenderFormat = "openai"
    """``openai``, ``openai-responses``, ``anthropic`` (a request body for the provider's SDK)
    or ``text`` (a plain prompt)."""
    model: str | None = None
    """The request's ``model`` field (for ``build``, also the model's tokenizer and window)."""
    max_tokens: int | None = Field(default=None, ge=1,
                                   json_schema_extra={"maximum": MAX_OUTPUT_TOKENS})
    """The request's output limit (default: the plan's output reserve); above
    ``MAX_OUTPUT_TOKENS`` a 422 ``unrenderable`` (see ``checked_rendering``)."""

    def checked_rendering(self) -> None:
        """Refuse settings no provider's request can carry (422), before anything is stored.

        Not a bound of the field, which would be a 400 about the body: the body is fine JSON,
        the request rendered from it is what no provider takes.
        """
        if self.max_tokens is not None and self.max_tokens > MAX_OUTPUT_TOKENS:
            raise ValidationError(f"max_tokens must be at most {MAX_OUTPUT_TOKENS} (2**53, as "
                                  "windows are): no provider takes a larger output limit")
    tool_choice: str | dict[str, Any] | None = None
    """OpenAI chat form; translated for the other formats."""
    parallel_tool_calls: bool | None = None
    """Sent when given."""


class PrepareBody(Rendering):
    """``ContextManager.prepare``'s keyword arguments, and the rendering wanted."""

    text: str | None = None
    """The user's message; ``null`` continues the current turn (after tool results)."""
    images: list[dict[str, Any]] = []
    """Images of the user's message (OpenAI ``image_url``, Responses or Anthropic parts)."""
    tools: list[dict[str, Any]] = []
    """OpenAI tool schemas offered this call."""
    documents: list[dict[str, Any]] = []
    """Retrieved documents ``{id, text, score?, source?, timestamp?, version?}``."""
    env: dict[str, str] | None = None
    """Environment facts."""
    system: str | None = None
    """System prompt (default: the server's, if any)."""
    target: Literal["chat", "text"] | None = None
    """The rendering the budget is counted for (default: ``text`` for the text format)."""
    idempotency_key: str | None = None
    """Names this message: a retry with the same key stores it once (or send the
    ``Idempotency-Key`` header)."""


class RecordBody(BaseModel):
    """``ContextManager.record``'s keyword arguments (strict, as ``Rendering``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    assistant: str | dict[str, Any] | list[dict[str, Any]] | None = None
    """The model's answer: text, or a message with tool calls (OpenAI, Responses, Anthropic)."""
    tool_results: list[dict[str, Any]] = []
    """Tool results answering its calls."""
    messages: list[dict[str, Any]] = []
    """Further messages to append."""
    idempotency_key: str | None = None
    """Names this write: a retry with the same key stores nothing again and returns the first
    call's seqs (or send the ``Idempotency-Key`` header)."""
    epoch: str | None = Field(default=None, min_length=1, max_length=128)
    """The ``epoch`` of the ``prepare`` answer this record answers: if that session was erased,
    expired or begun again since, the record is refused (409 ``session-gone``) and nothing is
    stored."""


class BuildOptions(Rendering):
    """What ``POST /v1/build`` takes besides the request schema's fields."""

    plan: str | dict[str, Any] | None = None
    """A shipped plan's name, or a plan inline (the plan file format as JSON); default: the
    plan ``select_plan`` picks for the request."""
    tokenizer: TokenizerName | None = None
    """Tokenizer (default: the model's, else ``o200k_base``)."""
    window: int | None = Field(default=None, ge=1)
    """The model's context window, overriding the plan's and the model's."""
    reserved_output: int | None = Field(default=None, ge=0)
    """Tokens kept for the answer, overriding the plan's and the model's."""
    budget: int | None = Field(default=None, ge=1)
    """Available tokens, set directly."""


class BuildBody(BuildOptions):
    """``POST /v1/build``: the request schema's fields and the options.

    Only documented here: the request fields are validated by ``Request.from_dict``, the one
    definition of the request schema (a test keeps the two field lists equal).
    """

    user_input: str
    """The current user message; never cut."""
    system: str | None = None
    """System prompt; never cut."""
    history: list[dict[str, Any]] = []
    """Earlier turns as OpenAI chat messages, oldest first."""
    turn: list[dict[str, Any]] = []
    """This turn's assistant tool calls and tool results so far."""
    tools: list[dict[str, Any]] = []
    """OpenAI tool schemas."""
    documents: list[dict[str, Any]] = []
    """Retrieved documents ``{id, text, score?, source?, timestamp?, version?}``."""
    env: dict[str, str] = {}
    """Environment facts."""
    examples: list[dict[str, str]] = []
    """Few-shot examples ``{input, output}``."""
    notes: list[str] = []
    """Scratchpad notes."""
    images: list[dict[str, Any]] = []
    """Images of the user's input (OpenAI ``image_url``, Responses or Anthropic image parts)."""


BUILD_OPTION_FIELDS = frozenset(BuildOptions.model_fields)
M = TypeVar("M", bound=BaseModel)


async def read_json(request: HttpRequest, max_bytes: int) -> Any:
    """The request's JSON body: at most ``max_bytes`` (413), UTF-8 JSON (400).

    Nesting is bounded and numbers are finite, else 400 too.
    """
    # Media types are case-insensitive: ``Application/JSON`` is JSON too.
    media = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise Problem(MEDIA, "the body must be application/json")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise Problem(TOO_LARGE, f"the body is larger than {max_bytes} bytes",
                      max_body_bytes=max_bytes)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise Problem(TOO_LARGE, f"the body is larger than {max_bytes} bytes",
                          max_body_bytes=max_bytes)
        chunks.append(chunk)
    try:
        # Finite numbers only: what the body carries is answered and rendered as JSON again.
        return parse_document(b"".join(chunks), "json", finite=True)
    except MalformedDocument as exc:
        raise Problem(BAD_INPUT, f"the body is not valid JSON: {exc}") from None


def validated(model: type[M], data: Any) -> M:
    """``data`` as ``model``; a 400 problem naming the fields (never their values) otherwise."""
    try:
        return model.model_validate(data)
    except PydanticValidationError as exc:
        raise Problem(BAD_INPUT, describe_errors(exc)) from None


def describe_errors(exc: PydanticValidationError) -> str:
    """Where and what, for the first few errors, without the input."""
    parts = []
    for error in exc.errors()[:5]:
        location = ".".join(_location_parts(error["loc"])) or "body"
        parts.append(f"{location}: {error['msg']}")
    return "invalid body: " + "; ".join(parts)


# pydantic's name for one branch of a union in an error's location ("str", "dict[str,any]").
_UNION_BRANCH = re.compile(r"[a-z_]+(?:\[[a-z_,\[\] ]*\])?")


def _location_parts(location: tuple[int | str, ...]) -> list[str]:
    """An error's location with the caller's own data left out.

    A location holds field names of the schema, list indices and union branches, but also a
    key of the caller's data (an ``env`` key): that is payload, shown as ``<key>``. A field
    the schema does not define is named, so a client learns which of its fields is misspelt.
    """
    parts: list[str] = []
    for part in location:
        mapping_key = bool(parts) and parts[-1] in _MAPPING_FIELDS
        if isinstance(part, int) or (not mapping_key and (
                not parts or part in _FIELD_NAMES or _UNION_BRANCH.fullmatch(part))):
            parts.append(str(part))
        else:
            parts.append("<key>")
    return parts


def check_count(name: str, items: list[Any], limit: int) -> None:
    """413 when a list of the body holds more than ``limit`` entries."""
    if len(items) > limit:
        raise Problem(TOO_LARGE, f"{name} holds more than {limit} entries", max_messages=limit)


_FIELD_NAMES = frozenset(name for model in (PrepareBody, RecordBody, BuildBody)
                         for name in model.model_fields)
_MAPPING_FIELDS = frozenset({"env"})
"""Fields whose keys the caller names."""
