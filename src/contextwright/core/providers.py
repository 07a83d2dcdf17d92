"""Provider request bodies: OpenAI Chat Completions, OpenAI Responses and Anthropic Messages.

Each renderer turns the built messages into keyword arguments that the provider's SDK call takes
as they are (``client.chat.completions.create(**body)``), following each API's documented rules.
Documents are fenced messages in the assistant's voice (the build flags them), so no document
text is ever in the user's or the system's role; tool call ids are renamed where a provider would
refuse them (``CallIds``: reused, of other characters or longer than the format takes):

- Anthropic: system apart and left out when blank; roles alternate (same roles merged, tool
  results first in their user message); a lead user message when the history starts with the
  assistant; no empty content and no blank text block (a blank assistant message is left out, a
  blank user message shows as ``(empty message)``: the user's turn stays, and a request never
  ends in the assistant's turn for it); every tool's ``input_schema`` is an object
  schema; ``tool_use`` / ``tool_result`` blocks only when the request defines tools (without
  tools, calls are shown as the assistant's text and their fenced results as ``search_result``
  blocks, and a note says so); documents as
  ``search_result`` blocks.
- OpenAI Responses: system as ``instructions``; calls and results as ``function_call`` /
  ``function_call_output`` items.
- OpenAI Chat Completions: calls inline, results as ``tool`` messages.

Images go in each provider's own form: ``image_url`` parts (Chat Completions), ``input_image``
parts (Responses, also in ``function_call_output``), ``image`` blocks (Anthropic, also inside
``tool_result``). An image of fenced data sits inside its fence: between the text block that
opens it and the one that closes it. Where a format takes no image (a Chat Completions tool
message, an Anthropic ``search_result``, an image Anthropic refuses by its size: base64 data
over 5 MB, a side over 8000 pixels, or over 2000 in a request with more than 20 images, or
more images than its model takes in a request: the oldest) or a request cannot hold (the oldest
images past OpenAI's 500 images or 50 MB of image data in a request, or past the Messages
API's 32 MB a request), a short placeholder line stands in its place.

What a format cannot carry is listed in the rendering's ``notes`` (never dropped silently).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from contextwright.core.cache import MAX_BREAKPOINTS
from contextwright.core.fence import short_label
from contextwright.core.images import (
    ANTHROPIC_MANY_IMAGES,
    ANTHROPIC_MANY_IMAGES_MAX_SIDE,
    ANTHROPIC_MAX_IMAGE_BYTES,
    ANTHROPIC_MAX_IMAGE_SIDE,
    ANTHROPIC_MAX_IMAGES,
    ANTHROPIC_MAX_IMAGES_LARGE_WINDOW,
    ANTHROPIC_MAX_REQUEST_BYTES,
    OPENAI_MAX_IMAGE_DATA,
    OPENAI_MAX_IMAGES,
    ImagePart,
)
from contextwright.core.items import TOOL_NAME, Message, reports_failure
from contextwright.errors import InvalidInputError, PlanError
from contextwright.models import model_profile
from contextwright.tokens import CountingTokenizer

ProviderFormat = Literal["openai", "openai-responses", "anthropic"]
PROVIDER_FORMATS: tuple[ProviderFormat, ...] = ("openai", "openai-responses", "anthropic")
ANTHROPIC_LEAD = "(earlier conversation omitted)"
ANTHROPIC_BLANK_USER = "(empty message)"
"""The text of a user message that has none, for the Messages API (it refuses blank text)."""


@dataclass(slots=True)
class Rendered:
    """A request body and what the format could not carry."""

    body: dict[str, Any]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class CallSettings:
    """Call settings shared by every format, as the caller gave them (None: not sent)."""

    model: str | None = None
    max_output_tokens: int | None = None
    tool_choice: str | Mapping[str, Any] | None = None
    """OpenAI chat form: ``auto`` / ``none`` / ``required`` / ``{"type": "function",
    "function": {"name": ...}}`` (a bare tool name is taken as the last) / ``{"type":
    "allowed_tools", ...}`` (``allowed_tools``; not for Anthropic, which has no such choice);
    translated per provider."""
    parallel_tool_calls: bool | None = None
    cache_points: tuple[int, ...] | None = None
    """Anthropic: put ``cache_control`` breakpoints on the tools, the system prompt and the
    messages at these indexes (None: no breakpoints); see ``anthropic``."""
    cache_key: str | None = None
    """OpenAI: ``prompt_cache_key``, so calls of one conversation reach the same cache."""
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"
    """OpenAI chat: the field the output limit goes in. OpenAI's own API wants
    ``max_completion_tokens`` (reasoning models refuse ``max_tokens``); some OpenAI-compatible
    servers read only ``max_tokens``."""


OPENAI_MAX_TOOLS = 128
"""Chat Completions and the Responses API refuse a request with more tools than this."""

CACHE_CONTROL = {"type": "ephemeral"}
"""The Messages API takes at most this many ``cache_control`` breakpoints."""

_SAFE_ID = re.compile(r"[^A-Za-z0-9_-]")
_ID_HASH_CHARS = 12
"""Hex digits of the hash a shortened call id ends with: two long ids of one request sharing a
start are all but certain to differ (and a clash is renamed anyway, never sent twice)."""


@dataclass(frozen=True, slots=True)
class CallIdRules:
    """What a format takes as a tool call id."""

    max_chars: int | None
    """The longest id it takes (None: no documented limit)."""
    unique_in: Literal["request", "block"]
    """Where ids must differ: in the whole request (Anthropic, Responses: results name their
    call by id), or only among the calls of one assistant message (Chat Completions pairs a
    tool message with the calls of the message before it, so an id reused by a later turn is
    fine there)."""
    safe_chars: bool
    """Whether only ``A-Z a-z 0-9 _ -`` are taken (Anthropic's pattern; Responses follows it so
    that one conversation's ids read the same in both)."""


CHAT_IDS = CallIdRules(max_chars=40, unique_in="block", safe_chars=False)
"""Chat Completions refuses a ``tool_calls[].id`` over 40 characters."""
RESPONSES_IDS = CallIdRules(max_chars=64, unique_in="request", safe_chars=True)
"""The Responses API refuses a ``call_id`` over 64 characters."""
ANTHROPIC_IDS = CallIdRules(max_chars=None, unique_in="request", safe_chars=True)
"""The Messages API takes ``tool_use.id`` of the pattern ``^[a-zA-Z0-9_-]+$`` (no length
limit is documented)."""


class CallIds:
    """Provider call ids for one rendering, renamed only where its format would refuse them.

    Agents and OpenAI-compatible servers reuse ids across turns (``call_0`` in every turn), use
    characters the Messages API refuses (``functions.get_weather:0``), and gateways or other
    providers make ids longer than OpenAI takes (``portkey-<uuid>``); each call block's ids are
    renamed only where ``rules`` need it, and its results follow the same renaming. Renaming is
    deterministic: the same messages always render to the same ids.
    """

    def __init__(self, rules: CallIdRules = ANTHROPIC_IDS) -> None:
        self.rules = rules
        self._used: set[str] = set()
        self._numbers: dict[str, int] = {}
        """The last number a renamed id took, by its base: a long session reusing one id
        (``call_0`` in every turn) renames each in one step, not by trying every number
        taken before it."""
        self._current: dict[str, str] = {}
        self.renamed = 0
        self.reasons: dict[str, None] = {}
        """Why ids were renamed, in the order first met (a dict keeps that order)."""

    def open_block(self, message: Message) -> None:
        """Assign ids to an assistant message's calls (the block its results answer)."""
        self._current = {}
        if self.rules.unique_in == "block":
            self._used = set()
            self._numbers = {}
        for call in message.tool_calls:
            self._current[call.id] = self._fresh(call.id)

    def call(self, call_id: str) -> str:
        """The rendered id of a call of the open block."""
        return self._current.get(call_id, call_id)

    def result(self, call_id: str | None) -> str:
        """The rendered id a result of the open block refers to."""
        return self._current.get(call_id or "", call_id or "")

    def _fresh(self, call_id: str) -> str:
        base = self._shaped(call_id)
        candidate = base
        if candidate in self._used:
            # Every number up to the last one taken for this base is taken still (``_used``
            # only grows): the smallest free one is past it.
            number = self._numbers.get(base, 1)
            while candidate in self._used:
                number += 1
                candidate = self._fit(base, f"_{number}")
            self._numbers[base] = number
        self._used.add(candidate)
        if candidate != call_id:
            self.renamed += 1
            if candidate != base:
                self.reasons["reused across turns" if self.rules.unique_in == "request"
                             else "the same as another call's id of its message"] = None
        return candidate

    def _shaped(self, call_id: str) -> str:
        """``call_id`` with the characters and length the format takes."""
        limit = self.rules.max_chars
        if not call_id:  # some OpenAI-compatible servers answer calls with an empty id
            self.reasons["empty"] = None
            base = "call"
        else:
            base = _SAFE_ID.sub("_", call_id) if self.rules.safe_chars else call_id
            if base != call_id:
                self.reasons["with characters the API refuses"] = None
        if limit is not None and len(base) > limit:
            self.reasons[f"longer than the API takes ({limit} characters)"] = None
            return shortened_id(call_id, limit)
        return base

    def _fit(self, base: str, suffix: str) -> str:
        """``base`` + ``suffix``, ``base`` cut so that the whole stays within the limit."""
        limit = self.rules.max_chars
        return (base if limit is None else base[: limit - len(suffix)]) + suffix


def shortened_id(call_id: str, limit: int) -> str:
    """A call id of at most ``limit`` characters standing for ``call_id``.

    Its safe characters' start (readable in logs) and a hash of the whole id: two long ids that
    share a start stay apart, and the same id always shortens alike.
    """
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()
    start = _SAFE_ID.sub("_", call_id)[: limit - _ID_HASH_CHARS - 1]
    return f"{start}_{digest[:_ID_HASH_CHARS]}"


MAX_PROMPT_CACHE_KEY = 64
"""OpenAI refuses a longer ``prompt_cache_key`` (HTTP 400 on every call that sends it)."""


def prompt_cache_key(key: str) -> str:
    """``key`` as OpenAI takes it: a longer one shortened to a stable id of its whole text.

    A conversation id such as ``user:<uuid>:session:<uuid>`` (86 characters) stays one cache
    line, and two long keys that share a start stay apart.
    """
    return key if len(key) <= MAX_PROMPT_CACHE_KEY else shortened_id(key, MAX_PROMPT_CACHE_KEY)


def renamed_note(ids: CallIds) -> list[str]:
    """The note for renamed call ids, if any were."""
    if not ids.renamed:
        return []
    return [f"{ids.renamed} tool call id(s) renamed: {' or '.join(ids.reasons)}; results "
            "follow their calls"]


# --- images ----------------------------------------------------------------------------------

_FENCE_END = re.compile(r"\n<<end [0-9a-f]{12}>>\Z")


def split_fence(content: str) -> tuple[str, str]:
    """(everything before a fence's closing line, that line) of fenced text; (text, '') else."""
    match = _FENCE_END.search(content)
    if match is None:
        return content, ""
    return content[: match.start()], content[match.start() + 1:]


def image_segments(message: Message, carried: Callable[[ImagePart], bool]
                   ) -> list[str | ImagePart]:
    """The message as text and images in order, images ``carried`` cannot take as placeholders.

    A fenced text keeps its images inside the fence: the closing line comes last. Empty texts
    are left out.
    """
    return placed_segments(message, [carried(image) for image in message.images])


def placed_segments(message: Message, sent: Sequence[bool]) -> list[str | ImagePart]:
    """``image_segments`` with whether each image is sent given by its place."""
    head, tail = split_fence(message.content)
    placed = list(zip(message.images, sent, strict=True))
    head += "".join(f"\n{image.placeholder()}" for image, shown in placed if not shown)
    segments: list[str | ImagePart] = [head.lstrip("\n") if not message.content else head]
    segments += [image for image, shown in placed if shown]
    if tail:
        segments.append(tail)
    return [s for s in segments if not isinstance(s, str) or s.strip()]


Carried = Callable[[ImagePart], bool]
"""Whether a rendering sends an image as an image (else a placeholder line stands for it)."""


def carries_every_image(image: ImagePart) -> bool:
    """A rendering that sends every image (the Responses API)."""
    return True


def carries_no_image(image: ImagePart) -> bool:
    """A rendering whose format takes no image (a Chat Completions tool message)."""
    return False


def with_placeholders(message: Message, carried: Carried = carries_no_image) -> str:
    """The message's text with a placeholder line for each image ``carried`` cannot take.

    The lines go inside the message's fence, before its closing line.
    """
    lines = [image.placeholder() for image in message.images if not carried(image)]
    if not lines:
        return message.content
    head, tail = split_fence(message.content)
    text = "\n".join([head, *lines] if head else lines)
    return f"{text}\n{tail}" if tail else text


def chat_carried(message: Message) -> Carried:
    """The images of ``message`` Chat Completions sends: a user message's, none of a tool's."""
    return carries_every_image if message.role == "user" else carries_no_image


def image_renderings(message: Message) -> tuple[Carried, ...]:
    """Which images of ``message`` each rendering sends; a placeholder stands for the rest.

    Chat Completions (``chat_carried``); the Responses API, every one; the Messages API,
    those within its 5 MB, and none of a tool result when the request has no tools (a
    ``search_result`` carries text only). The count of a message covers the rendering that
    costs the most (``accounting.image_frame_tokens``).
    """
    renderings = (chat_carried(message), carries_every_image, anthropic_takes)
    return (*renderings, carries_no_image) if message.role == "tool" else renderings


SPEAKER_ROLES = ("user", "assistant")
"""Roles whose ``name`` says who speaks (a tool message's ``name`` is its function's)."""
CHAT_SPEAKER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""The ``name`` Chat Completions takes on a message (anything else is a 400)."""


def speaker(message: Message) -> str | None:
    """The name of who speaks ``message``: a user's or an assistant's ``name``, if given."""
    return message.name if message.role in SPEAKER_ROLES else None


def chat_speaker(message: Message) -> str | None:
    """``speaker(message)`` when Chat Completions takes it as the message's ``name``.

    The count of a message (``accounting.frame_tokens``) follows this same rule, so a name
    left out of the request is not counted either.
    """
    name = speaker(message)
    return name if name is not None and CHAT_SPEAKER_NAME.fullmatch(name) else None


def speaker_note(messages: Sequence[Message], carried: Callable[[Message], bool],
                 why: str) -> list[str]:
    """The note for speakers' names a rendering left out (``carried`` says which it kept).

    Two users of one conversation (``alice``, ``bob``) look alike to the model without their
    names, so a rendering that drops them says so rather than drop them silently.
    """
    left_out = sum(1 for m in messages if speaker(m) is not None and not carried(m))
    return [f"{left_out} speaker name(s) left out: {why}"] if left_out else []


@dataclass(slots=True)
class ImageNotes:
    """Counts of images a rendering showed as placeholders, by reason, for the notes."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, reason: str, number: int = 1) -> None:
        """Count ``number`` images shown as placeholders for ``reason``."""
        if number:
            self.counts[reason] = self.counts.get(reason, 0) + number

    def notes(self) -> list[str]:
        """One note per reason."""
        return [f"{number} image(s) shown as placeholders: {reason}"
                for reason, number in self.counts.items()]


def openai_image(image: ImagePart) -> dict[str, Any]:
    """An ``image_url`` content part for Chat Completions."""
    image_url: dict[str, Any] = {"url": image.source}
    if image.detail != "auto":
        image_url["detail"] = image.detail
    return {"type": "image_url", "image_url": image_url}


def responses_image(image: ImagePart) -> dict[str, Any]:
    """An ``input_image`` content part for the Responses API."""
    return {"type": "input_image", "image_url": image.source, "detail": image.detail}


def anthropic_image(image: ImagePart) -> dict[str, Any]:
    """An ``image`` block for the Messages API (base64 or url source)."""
    if image.data is not None:
        return {"type": "image", "source": {"type": "base64", "media_type": image.media_type,
                                            "data": image.data}}
    return {"type": "image", "source": {"type": "url", "url": image.url}}


def anthropic_takes(image: ImagePart) -> bool:
    """Whether the Messages API takes ``image`` in any request (``anthropic_refusal``)."""
    return anthropic_refusal(image) is None


def anthropic_refusal(image: ImagePart) -> str | None:
    """Why the Messages API refuses ``image`` whatever else the request holds (None: it takes it).

    Its base64 data over 5 MB (the API measures the base64 string it receives, not the decoded
    image), or a side over 8000 pixels. Of a URL image only the size its caller gave is known:
    the provider fetches it.
    """
    if image.data is not None and len(image.data) > ANTHROPIC_MAX_IMAGE_BYTES:
        return _OVER_5_MB
    side = image.longest_side
    if side is not None and side > ANTHROPIC_MAX_IMAGE_SIDE:
        return _OVER_8000_PIXELS
    return None


def anthropic_sends_images(message: Message, document: bool, native_tools: bool) -> bool:
    """Whether the Anthropic rendering shows ``message``'s images as image blocks at all.

    A user's message does, and a tool result in a request with tools (without tools it is a
    ``search_result``, which carries text only).
    """
    return (message.role == "user" and not document) or (message.role == "tool"
                                                         and native_tools)


ImagePlace = tuple[int, int]
"""An image by its place: the index of its message, and its own index among that one's."""


def anthropic_max_images(model: str | None) -> int:
    """The most images the Messages API takes in one request to ``model``.

    100 for a model with a 200K-token window, 600 for the others; a model without a known
    profile gets the smaller number, which every model takes.
    """
    if model is None:
        return ANTHROPIC_MAX_IMAGES
    try:
        window = model_profile(model).window
    except PlanError:
        return ANTHROPIC_MAX_IMAGES
    return ANTHROPIC_MAX_IMAGES if window <= 200_000 else ANTHROPIC_MAX_IMAGES_LARGE_WINDOW


def anthropic_sent_images(messages: Sequence[Message], documents: Sequence[bool],
                          native_tools: bool, max_images: int = ANTHROPIC_MAX_IMAGES,
                          max_image_data: int = ANTHROPIC_MAX_REQUEST_BYTES
                          ) -> dict[int, tuple[str | None, ...]]:
    """Why the Anthropic rendering shows each image as a placeholder (None: it sends it).

    By message index. It sends each image that ``anthropic_takes``, as many as the API takes
    in a request (``max_images``, the newest) and as fit its size (``max_image_data``
    characters of base64 data and URLs: what the request has room for besides the rest,
    ``anthropic_image_room``), and in a request of more than 20 images none over 2000 pixels a
    side, which the API refuses too (a conversation with large screenshots would fail on every
    later call): every image within 2000 pixels when more than 20 are, else the newest 20 of
    any size.
    """
    refused = {index: [anthropic_refusal(image) for image in message.images]
               for index, message in enumerate(messages) if message.images}
    places: list[ImagePlace] = [
        (index, position) for index, reasons in refused.items()
        if anthropic_sends_images(messages[index], index < len(documents) and documents[index],
                                  native_tools)
        for position, reason in enumerate(reasons) if reason is None]
    wide = {(index, position) for index, position in places
            if not _within_many_images_side(messages[index].images[position])}
    if len(places) > ANTHROPIC_MANY_IMAGES and wide:
        within = [place for place in places if place not in wide]
        kept = within if len(within) > ANTHROPIC_MANY_IMAGES else places[-ANTHROPIC_MANY_IMAGES:]
        for index, position in set(places) - set(kept):
            refused[index][position] = _MANY_IMAGES
        places = kept
    for (index, position), reason in oldest_over(
            places, messages, max_images=max_images, max_data=max_image_data,
            too_many=_too_many_images(max_images), too_much=_OVER_REQUEST_SIZE).items():
        refused[index][position] = reason
    return {index: tuple(reasons) for index, reasons in refused.items()}


def _within_many_images_side(image: ImagePart) -> bool:
    side = image.longest_side
    return side is None or side <= ANTHROPIC_MANY_IMAGES_MAX_SIDE


def oldest_over(places: Sequence[ImagePlace], messages: Sequence[Message], *,
                max_images: int | None, max_data: int, too_many: str, too_much: str
                ) -> dict[ImagePlace, str]:
    """The images of ``places`` (oldest first) a request-wide limit leaves out, and why.

    The newest are sent while they number at most ``max_images`` (None: any number) and their
    data (``sent_chars``) comes to at most ``max_data``; the first that would pass a limit, and
    every image older than it, is left out for that limit (``too_many`` or ``too_much``). A
    session of many screenshots then keeps its latest, and its requests are not refused.
    """
    left_out: dict[ImagePlace, str] = {}
    count = data = 0
    reason: str | None = None
    for index, position in reversed(places):
        if reason is None:
            count += 1
            data += sent_chars(messages[index].images[position])
            if max_images is not None and count > max_images:
                reason = too_many
            elif data > max_data:
                reason = too_much
        if reason is not None:
            left_out[index, position] = reason
    return left_out


def sent_chars(image: ImagePart) -> int:
    """Characters an image adds to a request: its base64 data, or its URL."""
    return len(image.data) if image.data is not None else len(image.url or "")


MESSAGE_FRAME_BYTES = 512
"""Bytes a message may take in a JSON body besides its texts: role, block types and keys, a
tool call's id and name."""
IMAGE_FRAME_BYTES = 160
"""Bytes an image may take besides its data: its block's keys and media type, or the
placeholder line standing for it."""


def anthropic_image_room(system: str, messages: Sequence[Message],
                         schemas: Sequence[Mapping[str, Any]]) -> int:
    """Characters of image data an Anthropic request has room for within its 32 MB.

    The request's size is estimated from above: its images' base64 data, which dominates a
    request near the limit, and the rest (``json_text_bytes`` of every text, the tools'
    schemas, each message's and image's frame).
    """
    texts = [system]
    images = 0
    for message in messages:
        texts.append(message.content)
        texts.extend(call.arguments for call in message.tool_calls)
        texts.extend(block.text + block.signature for block in message.thinking)
        images += len(message.images)
    rest = (sum(map(json_text_bytes, texts))
            + json_text_bytes(json.dumps(list(schemas), ensure_ascii=False, default=str))
            + MESSAGE_FRAME_BYTES * (len(messages) + 1) + IMAGE_FRAME_BYTES * images)
    return ANTHROPIC_MAX_REQUEST_BYTES - rest


def json_text_bytes(text: str) -> int:
    """Bytes ``text`` may take in a JSON body (UTF-8, the SDKs' encoding), from above.

    Two a character for ASCII text, whose escaped quotes and line breaks take two; four for
    other text, whose characters take up to four in UTF-8. Only control characters other than
    line breaks and tabs take more (six), and text does not hold them in number.
    """
    return len(text) * (2 if text.isascii() else 4)


_OPENAI_MANY_IMAGES = f"OpenAI takes at most {OPENAI_MAX_IMAGES} images in a request"
_OPENAI_IMAGE_DATA = (f"OpenAI takes at most {OPENAI_MAX_IMAGE_DATA // 1_000_000} MB of image "
                      "data in a request")


def openai_sent_images(messages: Sequence[Message], carried: Callable[[Message], Carried]
                       ) -> dict[int, tuple[str | None, ...]]:
    """Images an OpenAI rendering shows as placeholders for its request-wide limits, and why.

    By message index, only for messages with such an image (None: the image is rendered as its
    message's own rule says). Of the images a rendering sends (``carried``), the newest go as
    far as OpenAI takes them in a request (``OPENAI_MAX_IMAGES`` images and
    ``OPENAI_MAX_IMAGE_DATA`` characters of base64 data; a URL's image is the provider's to
    fetch, and only its URL is counted); the older are placeholders.
    """
    places: list[ImagePlace] = [
        (index, position) for index, message in enumerate(messages) if message.images
        for position, image in enumerate(message.images) if carried(message)(image)]
    left_out = oldest_over(places, messages, max_images=OPENAI_MAX_IMAGES,
                           max_data=OPENAI_MAX_IMAGE_DATA, too_many=_OPENAI_MANY_IMAGES,
                           too_much=_OPENAI_IMAGE_DATA)
    refused: dict[int, list[str | None]] = {}
    for (index, position), reason in left_out.items():
        refused.setdefault(index, [None] * len(messages[index].images))[position] = reason
    return {index: tuple(reasons) for index, reasons in refused.items()}


def sent_parts(message: Message, refused: Sequence[str | None], notes: ImageNotes | None,
               text_part: Callable[[str], dict[str, Any]],
               image_part: Callable[[ImagePart], dict[str, Any]]) -> list[dict[str, Any]]:
    """A message's text and images as content parts, a placeholder line for each ``refused``.

    The placeholders are counted in ``notes`` by their reason.
    """
    for reason in refused:
        if reason is not None and notes is not None:
            notes.add(reason)
    return [image_part(s) if isinstance(s, ImagePart) else text_part(s)
            for s in placed_segments(message, [reason is None for reason in refused])]


def chat_text_part(text: str) -> dict[str, Any]:
    """A Chat Completions text content part."""
    return {"type": "text", "text": text}


def responses_text_part(text: str) -> dict[str, Any]:
    """A Responses API text content part."""
    return {"type": "input_text", "text": text}


@dataclass(frozen=True, slots=True)
class MessageImages:
    """Which images of one message the Anthropic rendering sends, and its notes."""

    refused: tuple[str | None, ...]
    """Per image, why it is shown as a placeholder; None: sent (``anthropic_sent_images``)."""
    notes: ImageNotes

    def content(self, message: Message) -> list[dict[str, Any]]:
        """Text and image blocks of the message, a placeholder for each image not sent."""
        for reason in self.refused:
            if reason is not None:
                self.notes.add(reason)
        sent = [reason is None for reason in self.refused]
        return [anthropic_image(s) if isinstance(s, ImagePart) else {"type": "text", "text": s}
                for s in placed_segments(message, sent)]


# --- OpenAI Chat Completions ---------------------------------------------------------------

_OPENAI_TOOL_IMAGES = "Chat Completions tool messages carry text only"


def openai_message(message: Message, images: ImageNotes | None = None,
                   ids: CallIds | None = None, refused: Sequence[str | None] = ()
                   ) -> dict[str, Any]:
    """One message in OpenAI chat form.

    ``images`` counts the images shown as placeholders; ``ids`` renames call ids (its block
    opened on the calls' message), none renamed without it; ``refused`` says why each of a
    user message's images is a placeholder (``openai_sent_images``; empty: every one is sent).
    """
    rendered: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.images:
        if message.role == "user" and refused:
            rendered["content"] = sent_parts(message, refused, images, chat_text_part,
                                             openai_image)
        elif message.role == "user":
            parts = [{"type": "text", "text": message.content}] if message.content else []
            rendered["content"] = parts + [openai_image(image) for image in message.images]
        else:
            rendered["content"] = with_placeholders(message, chat_carried(message))
            if images is not None:
                images.add(_OPENAI_TOOL_IMAGES, len(message.images))
    if message.tool_calls:
        rendered["content"] = message.content or None
        rendered["tool_calls"] = [
            {"id": ids.call(c.id) if ids is not None else c.id, "type": "function",
             "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    if message.role == "tool":
        rendered["tool_call_id"] = (ids.result(message.tool_call_id) if ids is not None
                                    else message.tool_call_id)
    name = chat_speaker(message)
    if name is not None:
        rendered["name"] = name  # tells apart speakers of one role (two users of one chat)
    return rendered


def openai_chat(messages: Sequence[Message], schemas: Sequence[Mapping[str, Any]],
                settings: CallSettings) -> Rendered:
    """Keyword arguments for ``client.chat.completions.create``."""
    body: dict[str, Any] = {}
    if settings.model is not None:
        body["model"] = settings.model
    images = ImageNotes()
    ids = CallIds(CHAT_IDS)
    refused = openai_sent_images(messages, chat_carried)
    body["messages"] = []
    for index, message in enumerate(messages):
        if message.tool_calls:
            ids.open_block(message)
        body["messages"].append(openai_message(message, images, ids, refused.get(index, ())))
    check_openai_tool_count(schemas)
    check_tool_names(schemas)
    if schemas:
        body["tools"] = [json_copy(s) for s in schemas]
    if settings.max_output_tokens:
        body[settings.max_tokens_field] = settings.max_output_tokens
    if settings.cache_key:
        body["prompt_cache_key"] = prompt_cache_key(settings.cache_key)
    _tool_settings(body, schemas, settings, _openai_tool_choice)
    names = speaker_note(messages, lambda m: chat_speaker(m) is not None,
                         "Chat Completions takes a message name of 1 to 64 A-Z a-z 0-9 _ -")
    return Rendered(body, renamed_note(ids) + images.notes() + names
                    + reasoning_note(messages, "Chat Completions"))


def reasoning_note(messages: Sequence[Message], api: str) -> list[str]:
    """The note of a format that cannot send back an assistant's reasoning, if any carries it."""
    carrying = sum(1 for message in messages if message.thinking)
    if not carrying:
        return []
    return [f"{carrying} assistant message(s) of the open tool loop carry reasoning "
            f"(thinking blocks), which {api} has no place for: not sent"]


def check_tool_name(name: str, where: str) -> None:
    """``InvalidInputError`` naming the tool unless every provider takes ``name``.

    OpenAI and Anthropic both take 1 to 64 of ``A-Z a-z 0-9 _ -`` (a call's name is held to
    the same rule when its message is read), so a schema is refused before any request is
    made rather than by the provider on every call.
    """
    if not TOOL_NAME.fullmatch(name):
        shown = repr(name) if len(name) <= 64 else f"{name[:64]!r}… ({len(name)} characters)"
        raise InvalidInputError(f"{where}: the tool name {shown} must be 1 to 64 ASCII letters, "
                                "digits, '_' or '-' (the providers' rule)")


def check_tool_names(schemas: Sequence[Mapping[str, Any]]) -> None:
    """Every schema's function name, by ``check_tool_name``.

    The built-in tools source has checked them already; a source of the caller's own may
    offer any schema.
    """
    for index, schema in enumerate(schemas):
        function = schema.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        check_tool_name(name if isinstance(name, str) else "", f"tools[{index}]")


def check_openai_tool_count(schemas: Sequence[Mapping[str, Any]]) -> None:
    """``InvalidInputError`` for more tools than OpenAI takes in a request.

    The built-in tools source never offers more (it leaves the lowest-ranked out and reports
    them); a source of the caller's own may, and a request OpenAI would refuse is not sent.
    """
    if len(schemas) > OPENAI_MAX_TOOLS:
        raise InvalidInputError(f"the request has {len(schemas)} tools; OpenAI takes at most "
                                f"{OPENAI_MAX_TOOLS} in a request: offer fewer (the built-in tools "
                                "source keeps the best-ranked)")


def _openai_tool_choice(choice: str | Mapping[str, Any]) -> str | dict[str, Any]:
    allowed = allowed_tools(choice)
    if allowed is not None:
        return {"type": ALLOWED_TOOLS, ALLOWED_TOOLS: {"mode": allowed.mode, "tools": [
            {"type": "function", "function": {"name": name}} for name in allowed.names]}}
    name = _chosen_tool(choice)
    if name is None:
        return str(choice)
    return {"type": "function", "function": {"name": name}}


# --- OpenAI Responses ----------------------------------------------------------------------


def openai_responses(system: str, messages: Sequence[Message],
                     schemas: Sequence[Mapping[str, Any]], settings: CallSettings) -> Rendered:
    """Keyword arguments for ``client.responses.create``."""
    body: dict[str, Any] = {}
    if settings.model is not None:
        body["model"] = settings.model
    if system:
        body["instructions"] = system
    items: list[dict[str, Any]] = []
    ids = CallIds(RESPONSES_IDS)
    images = ImageNotes()
    refused = openai_sent_images(messages, lambda message: carries_every_image)
    for index, message in enumerate(messages):
        if message.tool_calls:
            ids.open_block(message)
        items.extend(_response_items(message, ids, refused.get(index, ()), images))
    body["input"] = items
    check_openai_tool_count(schemas)
    check_tool_names(schemas)
    if schemas:
        body["tools"] = [_responses_tool(s) for s in schemas]
    if settings.max_output_tokens:
        body["max_output_tokens"] = settings.max_output_tokens
    if settings.cache_key:
        body["prompt_cache_key"] = prompt_cache_key(settings.cache_key)
    _tool_settings(body, schemas, settings, _responses_tool_choice)
    names = speaker_note(messages, lambda m: False,
                         "a Responses API message has no name field")
    return Rendered(body, renamed_note(ids) + images.notes() + names
                    + reasoning_note(messages, "the Responses API (its reasoning items are "
                                     "OpenAI's own)"))


def _response_items(message: Message, ids: CallIds, refused: Sequence[str | None] = (),
                    images: ImageNotes | None = None) -> list[dict[str, Any]]:
    """The Responses items of one message; ``refused`` as ``openai_message`` takes it."""
    sent = refused or (None,) * len(message.images)
    if message.role == "tool":
        output: str | list[dict[str, Any]] = message.content
        if message.images:
            output = sent_parts(message, sent, images, responses_text_part, responses_image)
        return [{"type": "function_call_output", "call_id": ids.result(message.tool_call_id),
                 "output": output}]
    items: list[dict[str, Any]] = []
    if message.images and refused:
        items.append({"type": "message", "role": message.role, "content": sent_parts(
            message, refused, images, responses_text_part, responses_image)})
    elif message.images:
        parts = [{"type": "input_text", "text": message.content}] if message.content else []
        items.append({"type": "message", "role": message.role,
                      "content": parts + [responses_image(image) for image in message.images]})
    elif message.content or not message.tool_calls:
        items.append({"type": "message", "role": message.role, "content": message.content})
    items.extend({"type": "function_call", "call_id": ids.call(c.id), "name": c.name,
                  "arguments": c.arguments} for c in message.tool_calls)
    return items


def _responses_tool(schema: Mapping[str, Any]) -> dict[str, Any]:
    function = schema.get("function", {})
    tool: dict[str, Any] = {"type": "function", "name": function.get("name"),
                            "parameters": object_schema(function.get("parameters")),
                            "strict": bool(function.get("strict", False))}
    if function.get("description"):
        tool["description"] = function["description"]
    return tool


def _responses_tool_choice(choice: str | Mapping[str, Any]) -> str | dict[str, Any]:
    allowed = allowed_tools(choice)
    if allowed is not None:  # the Responses API's own shape: flat, a function by its name
        return {"type": ALLOWED_TOOLS, "mode": allowed.mode,
                "tools": [{"type": "function", "name": name} for name in allowed.names]}
    name = _chosen_tool(choice)
    if name is None:
        return str(choice)
    return {"type": "function", "name": name}


# --- Anthropic Messages ----------------------------------------------------------------------


def anthropic(system: str, messages: Sequence[Message], labels: Sequence[str | None],
              documents: Sequence[bool], schemas: Sequence[Mapping[str, Any]],
              settings: CallSettings) -> Rendered:
    """Keyword arguments for ``anthropic.Anthropic().messages.create``.

    ``labels`` and ``documents`` say, per message, its source label and whether it carries a
    document (a flag the build sets, never read from the caller's messages). With
    ``settings.cache_points``, ``cache_control`` breakpoints go on the last tool, the system
    prompt and the last block of each message named (up to four in all, the last ones kept):
    the provider then caches the request up to each of them.
    """
    notes: list[str] = []
    native_tools = bool(schemas)
    ids = CallIds(ANTHROPIC_IDS)
    images = ImageNotes()
    room = (anthropic_image_room(system, messages, schemas)
            if any(message.images for message in messages) else ANTHROPIC_MAX_REQUEST_BYTES)
    merged, marked = _anthropic_turns(messages, labels, documents, native_tools, ids,
                                      set(settings.cache_points or ()), notes, images,
                                      anthropic_max_images(settings.model), room)
    if not native_tools and any(m.tool_calls or m.role == "tool" for m in messages):
        notes.append("the request defines no tools, so tool calls are shown as the assistant's "
                     "text and their results as search_result blocks (the Messages API refuses "
                     "tool blocks without tools)")
    notes += renamed_note(ids)
    notes += images.notes()
    notes += speaker_note(messages, lambda m: False, "a Messages API message has no name field")
    if any(image.detail != "auto" for message in messages for image in message.images):
        notes.append("image detail hints are OpenAI's; the Messages API has none, so they are "
                     "not sent")
    for turn in merged:
        if turn["role"] == "user":  # tool results must open a user message
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    if merged and merged[0]["role"] != "user":
        merged.insert(0, {"role": "user", "content": [{"type": "text", "text": ANTHROPIC_LEAD}]})
    body: dict[str, Any] = {}
    if settings.model is not None:
        body["model"] = settings.model
    if not settings.max_output_tokens:
        raise InvalidInputError("the Messages API needs max_tokens: the plan reserves no output "
                                "tokens, so pass max_tokens=")
    body["max_tokens"] = settings.max_output_tokens
    if system.strip():  # a blank system prompt is no prompt; the API refuses blank text
        body["system"] = system
    body["messages"] = merged
    check_tool_names(schemas)
    if schemas:
        body["tools"] = [anthropic_tool(s) for s in schemas]
    if settings.cache_points is not None:
        _add_breakpoints(body, merged, marked)
    check_tool_choice(schemas, settings)
    choice = _anthropic_tool_choice(settings) if schemas else None
    if choice is not None:
        body["tool_choice"] = choice
    return Rendered(body, notes)


def anthropic_role(message: Message, document: bool) -> Literal["user", "assistant"]:
    """The Messages API role of a message: tool results and documents are on the user's side."""
    return "user" if message.role in ("user", "tool") or document else "assistant"


def anthropic_leaves_out(message: Message, document: bool) -> bool:
    """Whether the Anthropic rendering leaves ``message`` out.

    It does an assistant message with no text and no calls (the API refuses empty content); a
    user message is never left out (``shows_blank_user``).
    """
    return (anthropic_role(message, document) == "assistant" and not message.tool_calls
            and not message.thinking and is_blank(message.content))


def shows_blank_user(message: Message, document: bool) -> bool:
    """Whether the Anthropic rendering shows ``message`` as ``ANTHROPIC_BLANK_USER``.

    It does a user message with no text and no image to show: the user's turn stays.
    """
    return (message.role == "user" and not document and not message.images
            and is_blank(message.content))


def is_blank(text: str) -> bool:
    """Whether ``text`` has nothing but white space (without copying a long text)."""
    return not text or text.isspace()


def last_anthropic_message(messages: Sequence[Message], documents: Sequence[bool]) -> int | None:
    """Index of the last of ``messages`` the Anthropic rendering shows (None: it shows none)."""
    for index in range(len(messages) - 1, -1, -1):
        document = index < len(documents) and documents[index]
        if messages[index].role != "system" and not anthropic_leaves_out(messages[index],
                                                                          document):
            return index
    return None


def anthropic_added_tokens(messages: Sequence[Message], documents: Sequence[bool],
                           tokenizer: CountingTokenizer) -> int:
    """Tokens the Anthropic rendering of ``messages`` adds to their OpenAI count, at most.

    The lead user message when the first message it shows is the assistant's, and the text of
    each blank user message. The build reserves them (so every rendering fits the budget) with
    the same rules the rendering follows.
    """
    added = 0
    first: str | None = None
    for index, message in enumerate(messages):
        document = index < len(documents) and documents[index]
        if message.role == "system" or anthropic_leaves_out(message, document):
            continue
        if first is None:
            first = anthropic_role(message, document)
        if shows_blank_user(message, document):
            added += tokenizer.count(ANTHROPIC_BLANK_USER)
    if first == "assistant":
        added += tokenizer.count(ANTHROPIC_LEAD) + tokenizer.frame.user
    return added


def _anthropic_turns(messages: Sequence[Message], labels: Sequence[str | None],
                     documents: Sequence[bool], native_tools: bool, ids: CallIds,
                     points: set[int], notes: list[str], images: ImageNotes,
                     max_images: int = ANTHROPIC_MAX_IMAGES,
                     max_image_data: int = ANTHROPIC_MAX_REQUEST_BYTES
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Messages as alternating turns, and the last block of each message in ``points``.

    At most ``max_images`` images and ``max_image_data`` characters of their data are sent
    (``anthropic_sent_images``).
    """
    refused = anthropic_sent_images(messages, documents, native_tools, max_images,
                                    max_image_data)
    merged: list[dict[str, Any]] = []
    marked: list[dict[str, Any]] = []
    left_out = blank_users = 0
    for index, message in enumerate(messages):
        document = index < len(documents) and documents[index]
        if anthropic_leaves_out(message, document):
            left_out += 1
            continue
        role = anthropic_role(message, document)
        if message.tool_calls:
            ids.open_block(message)
        if shows_blank_user(message, document):
            blank_users += 1
            blocks = [{"type": "text", "text": ANTHROPIC_BLANK_USER}]
        else:
            shown = MessageImages(refused.get(index, ()), images)
            blocks = _anthropic_blocks(message, labels[index] if index < len(labels) else None,
                                       document, native_tools, ids, shown)
        if index in points and blocks[-1]["type"] not in _THINKING_TYPES:
            marked.append(blocks[-1])  # a thinking block takes no breakpoint of its own
        if merged and merged[-1]["role"] == role:
            # An assistant turn must open with its reasoning: merged, it joins the reasoning
            # at its head, after any the turn opened with already.
            content = merged[-1]["content"]
            head = next((i for i, b in enumerate(content) if b["type"] not in _THINKING_TYPES),
                        len(content))
            content[head:head] = [b for b in blocks if b["type"] in _THINKING_TYPES]
            content.extend(b for b in blocks if b["type"] not in _THINKING_TYPES)
        else:
            merged.append({"role": role, "content": blocks})
    if left_out:
        notes.append(f"{left_out} empty assistant message(s) left out (the Messages API refuses "
                     "empty content)")
    if blank_users:
        notes.append(f"{blank_users} empty user message(s) shown as {ANTHROPIC_BLANK_USER!r} "
                     "(the Messages API refuses blank text)")
    return merged, marked


def _add_breakpoints(body: dict[str, Any], merged: list[dict[str, Any]],
                     marked: list[dict[str, Any]]) -> None:
    """``cache_control`` on the system prompt (else the last tool) and the marked message blocks.

    The system prompt's breakpoint caches the tools before it too: a breakpoint of their own
    would only take the place of one in the messages (``core.cache.breakpoint_ends``, which the
    fingerprint records). With more than four in all, the earliest message breakpoints go: the
    later a breakpoint, the more of the request it caches.
    """
    blocks = marked
    tools_point = bool(body.get("tools")) and "system" not in body
    fixed = int(tools_point) + int("system" in body)
    for block in blocks[max(0, len(blocks) - (MAX_BREAKPOINTS - fixed)):]:
        block["cache_control"] = dict(CACHE_CONTROL)
    if tools_point:
        body["tools"][-1]["cache_control"] = dict(CACHE_CONTROL)
    if "system" in body:
        body["system"] = [{"type": "text", "text": body["system"],
                           "cache_control": dict(CACHE_CONTROL)}]


_THINKING_TYPES = frozenset(("thinking", "redacted_thinking"))

_OVER_5_MB = "the Messages API takes images up to 5 MB of base64 data"
_OVER_8000_PIXELS = (f"the Messages API takes images of at most {ANTHROPIC_MAX_IMAGE_SIDE} "
                     "pixels a side")
_MANY_IMAGES = (f"the Messages API takes images of at most {ANTHROPIC_MANY_IMAGES_MAX_SIDE} "
                f"pixels a side in a request with more than {ANTHROPIC_MANY_IMAGES} images")


_OVER_REQUEST_SIZE = (f"the Messages API takes requests of at most "
                      f"{ANTHROPIC_MAX_REQUEST_BYTES // 1_000_000} MB (their images' base64 "
                      "data counted with an estimate of the rest)")


def _too_many_images(max_images: int) -> str:
    window = "a 200K-token window" if max_images == ANTHROPIC_MAX_IMAGES else "its window"
    return (f"the Messages API takes at most {max_images} images in a request to a model "
            f"with {window}")
_SEARCH_RESULT_IMAGES = ("without tools, tool results are search_result blocks, which carry "
                         "text only")


def _anthropic_blocks(message: Message, source_label: str | None, document: bool,
                      native_tools: bool, ids: CallIds, images: MessageImages
                      ) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [_tool_result_block(message, native_tools, ids, images)]
    if document:
        return [_search_result(source_label or "document", message.content)]
    if message.images:
        return images.content(message)
    # The reasoning opens the message, sent as given: the API checks its signature.
    blocks: list[dict[str, Any]] = [block.as_block() for block in message.thinking]
    if message.content.strip():
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        if native_tools:
            blocks.append({"type": "tool_use", "id": ids.call(call.id), "name": call.name,
                           "input": json.loads(call.arguments)})
        else:
            blocks.append({"type": "text", "text": f"→ {call.name}({call.arguments})"})
    return blocks


SEARCH_RESULT_LABEL_LIMIT = 100
"""The most characters of a label a ``search_result``'s ``title`` and ``source`` show."""


def _search_result(source_label: str, text: str) -> dict[str, Any]:
    """Fenced data as a ``search_result`` block: data by its type, on the user side.

    The title and source sit outside the fence the text opens with (whose head names the
    label in full), so they are kept to one short neutralised line: a document's source is
    the caller's data and may say anything.
    """
    title = short_label(source_label, SEARCH_RESULT_LABEL_LIMIT) or "data"
    return {"type": "search_result", "source": title, "title": title,
            "content": [{"type": "text", "text": text if text.strip() else "(empty)"}]}


def _tool_result_block(message: Message, native_tools: bool, ids: CallIds,
                       images: MessageImages) -> dict[str, Any]:
    if not native_tools:
        images.notes.add(_SEARCH_RESULT_IMAGES, len(message.images))
        return _search_result(f"{message.name or 'tool'} result", with_placeholders(message))
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": ids.result(message.tool_call_id)}
    if message.images:
        block["content"] = images.content(message)
    elif message.content:
        block["content"] = message.content
    if reports_failure(message.content):
        block["is_error"] = True  # the API's own flag, beside the text's mark
    return block


def object_schema(parameters: object, where: str = "a tool's parameters") -> dict[str, Any]:
    """A JSON schema for tool input that providers accept: an object schema, the caller's own.

    ``{}`` or a missing schema means "no arguments"; a schema without ``type`` gets
    ``"type": "object"``. Anything else (an array or string schema) cannot be a tool's input.
    The schema is a copy (``json_copy``): it goes into a body the caller may edit.
    """
    if parameters is None:
        return {"type": "object", "properties": {}}
    checked_object_schema(parameters, where)
    schema: dict[str, Any] = json_copy(parameters)
    schema.setdefault("type", "object")
    return schema


def checked_object_schema(parameters: object, where: str) -> None:
    """``InvalidInputError`` unless ``parameters`` is None or an object schema."""
    if parameters is None:
        return
    if not isinstance(parameters, Mapping):
        raise InvalidInputError(f"{where} must be a JSON schema object")
    if parameters.get("type", "object") != "object":
        raise InvalidInputError(f"{where} must be a schema of type object")


def json_copy(value: Any) -> Any:
    """A copy of JSON-shaped data whose every object and list is new; other values as given.

    A rendered body is the caller's to edit (adding ``strict`` to a tool is common), while the
    schemas it is made from are the build's (and the caller's request's): shared with the body,
    an edit would show in every later rendering. Leaves are not passed through a call of their
    own, which makes this several times faster than ``copy.deepcopy``.
    """
    kind = type(value)
    if kind is dict:
        return {key: item if type(item) in _JSON_LEAVES else json_copy(item)
                for key, item in value.items()}
    if kind is list:
        return [item if type(item) in _JSON_LEAVES else json_copy(item) for item in value]
    if kind is tuple:
        return tuple(item if type(item) in _JSON_LEAVES else json_copy(item) for item in value)
    if isinstance(value, Mapping):  # a caller's mapping type: rendered as the dict it reads as
        return {key: json_copy(item) for key, item in value.items()}
    return value


_JSON_LEAVES = frozenset((str, int, float, bool, type(None)))


FUNCTION_FIELDS = ("name", "description", "parameters", "strict")
"""What an OpenAI function definition holds; the other formats are made from these."""


def check_tool_function(function: Mapping[str, Any], where: str) -> None:
    """``InvalidInputError`` naming what of a tool's function definition is wrong.

    One rule for every format: OpenAI would pass a bad definition on as given while Anthropic
    and the Responses API refuse it, and a misspelt ``paramters`` would leave the tool with no
    arguments in the formats that rebuild the schema.
    """
    for key in function:
        if key not in FUNCTION_FIELDS:
            raise InvalidInputError(f"{where}: unknown field {str(key)!r} (a function has "
                                    f"{', '.join(FUNCTION_FIELDS)})")
    if not isinstance(function.get("description", ""), str):
        raise InvalidInputError(f"{where}.description must be a string")
    if not isinstance(function.get("strict", False), bool):
        raise InvalidInputError(f"{where}.strict must be true or false")
    checked_object_schema(function.get("parameters"), f"{where}.parameters")


def anthropic_tool(schema: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI tool schema as an Anthropic tool."""
    function = schema.get("function", {})
    tool: dict[str, Any] = {"name": function.get("name"),
                            "input_schema": object_schema(function.get("parameters"))}
    if function.get("description"):
        tool["description"] = function["description"]
    if function.get("strict") is True:  # the Messages API takes it too (strict tool use)
        tool["strict"] = True
    return tool


def _anthropic_tool_choice(settings: CallSettings) -> dict[str, Any] | None:
    choice, parallel = settings.tool_choice, settings.parallel_tool_calls
    if choice is None and parallel is None:
        return None
    if allowed_tools(choice) is not None:
        raise InvalidInputError(
            f"tool_choice {{'type': '{ALLOWED_TOOLS}'}} (OpenAI's allowed tools) has no "
            "equivalent in the Messages API, which takes auto, none, required or one named "
            "tool: offer only the tools the model may call, or choose one of those")
    name = _chosen_tool(choice) if choice is not None else None
    if name is not None:
        rendered: dict[str, Any] = {"type": "tool", "name": name}
    else:
        kinds = {None: "auto", "auto": "auto", "required": "any", "none": "none"}
        if choice not in kinds:
            raise InvalidInputError(f"tool_choice {choice!r} is not auto, none, required or a "
                                    "tool")
        rendered = {"type": kinds[choice]}
    if parallel is False and rendered["type"] != "none":
        rendered["disable_parallel_tool_use"] = True
    return rendered


# --- shared ---------------------------------------------------------------------------------


def _chosen_tool(choice: str | Mapping[str, Any]) -> str | None:
    """The tool a ``tool_choice`` names, or None for ``auto`` / ``none`` / ``required``.

    Not for an ``allowed_tools`` choice (``allowed_tools``), which may name several.
    """
    if isinstance(choice, str):
        return None if choice in ("auto", "none", "required") else choice
    if not isinstance(choice, Mapping):
        raise InvalidInputError("tool_choice must be a string or an object")
    kind = choice.get("type")
    if kind not in (None, "function", "tool"):
        raise InvalidInputError(f"tool_choice {{'type': {short_label(str(kind), 40)!r}}} is not "
                                f"a form contextwright takes: {TOOL_CHOICE_FORMS}")
    function = choice.get("function")
    name = function.get("name") if isinstance(function, Mapping) else choice.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"tool_choice names no tool; it takes {TOOL_CHOICE_FORMS}")
    return name


ALLOWED_TOOLS = "allowed_tools"
TOOL_CHOICE_FORMS = ("auto, none, required, a tool's name, {\"type\": \"function\", "
                     "\"function\": {\"name\": ...}} or OpenAI's {\"type\": \"allowed_tools\", "
                     "\"allowed_tools\": {\"mode\": \"auto\" | \"required\", \"tools\": [...]}}")
"""The ``tool_choice`` forms ``to_request`` takes, as its refusals name them."""


@dataclass(frozen=True, slots=True)
class AllowedTools:
    """OpenAI's ``allowed_tools`` choice: the model may call only some of the request's tools.

    ``auto``: it calls one of ``names`` or answers; ``required``: it calls one of them. The
    request keeps every tool, so its cached prefix stays the same.
    """

    mode: Literal["auto", "required"]
    names: tuple[str, ...]


def allowed_tools(choice: object) -> AllowedTools | None:
    """The tools an ``allowed_tools`` choice allows; None for a choice of another form.

    Read in the Chat Completions shape (``{"type": "allowed_tools", "allowed_tools": {"mode",
    "tools"}}``, tools as ``{"type": "function", "function": {"name"}}``) or the Responses
    API's (``mode`` and ``tools`` beside ``type``, tools as ``{"type": "function", "name"}``).
    Only function tools can be allowed: they are the only tools a built request holds.
    """
    if not isinstance(choice, Mapping) or choice.get("type") != ALLOWED_TOOLS:
        return None
    where = f"tool_choice.{ALLOWED_TOOLS}"
    inner = choice.get(ALLOWED_TOOLS, choice if "mode" in choice else None)
    if not isinstance(inner, Mapping):
        raise InvalidInputError(f"{where} must be an object {{mode, tools}}")
    mode = inner.get("mode")
    if mode not in ("auto", "required"):
        raise InvalidInputError(f"{where}.mode must be 'auto' or 'required'")
    tools = inner.get("tools")
    if not isinstance(tools, list | tuple):
        raise InvalidInputError(f"{where}.tools must be a list of tools")
    names = tuple(_allowed_tool_name(tool, f"{where}.tools[{index}]")
                  for index, tool in enumerate(tools))
    if not names:
        raise InvalidInputError(f"tool_choice {{'type': '{ALLOWED_TOOLS}'}} allows no tool: "
                                "name at least one of the request's tools")
    return AllowedTools(mode=mode, names=tuple(dict.fromkeys(names)))


def _allowed_tool_name(tool: object, where: str) -> str:
    function = tool.get("function") if isinstance(tool, Mapping) else None
    name = (function.get("name") if isinstance(function, Mapping)
            else tool.get("name") if isinstance(tool, Mapping) else None)
    if not isinstance(tool, Mapping) or tool.get("type") != "function" or not isinstance(
            name, str) or not name:
        raise InvalidInputError(f"{where} must be a function tool ({{\"type\": \"function\", "
                                "\"function\": {\"name\": ...}})")
    return name


def _tool_settings(body: dict[str, Any], schemas: Sequence[Mapping[str, Any]],
                   settings: CallSettings,
                   translate: Callable[[str | Mapping[str, Any]], str | dict[str, Any]]) -> None:
    """tool_choice and parallel_tool_calls, sent only with tools (the APIs refuse them else)."""
    check_tool_choice(schemas, settings)
    if not schemas:
        return
    if settings.tool_choice is not None:
        body["tool_choice"] = translate(settings.tool_choice)
    if settings.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = settings.parallel_tool_calls


def check_tool_choice(schemas: Sequence[Mapping[str, Any]], settings: CallSettings) -> None:
    """A ``tool_choice`` that names tools must name the request's tools.

    Without tools, ``auto`` / ``none`` and ``parallel_tool_calls`` mean nothing and are not
    sent (the APIs refuse them there); ``required``, a named tool or allowed tools contradict
    the request and are refused.
    """
    choice = settings.tool_choice
    if choice is None:
        return
    allowed = allowed_tools(choice)
    chosen = _chosen_tool(choice) if allowed is None else None
    if not schemas:
        if chosen is not None or allowed is not None or choice == "required":
            shown = f"{{'type': '{ALLOWED_TOOLS}'}}" if allowed is not None else repr(choice)
            raise InvalidInputError(f"tool_choice {shown} needs tools, and this request has "
                                    "none")
        return
    names = {s.get("function", {}).get("name") for s in schemas}
    if chosen is not None and chosen not in names:
        raise InvalidInputError(f"tool_choice names {chosen!r}, which is not among the tools")
    for name in allowed.names if allowed is not None else ():
        if name not in names:
            raise InvalidInputError(f"tool_choice allows {name!r}, which is not among the tools")
