"""A Hugging Face model's chat framing, measured by rendering its own chat template.

A ``tokenizer.json`` counts text; what a chat model adds around each message (role headers,
end-of-turn tokens, a beginning-of-sequence token, a default system prompt) lives in its chat
template: ``chat_template.jinja`` beside it, or ``chat_template`` in ``tokenizer_config.json`` (a
string, or named templates of which ``default`` is used). The template is rendered the way
``transformers`` renders it (a sandboxed Jinja environment with ``trim_blocks`` and
``lstrip_blocks``, ``raise_exception``, ``strftime_now`` and a ``tojson`` that keeps non-ASCII
text) on small probe conversations; the framing of each role and of the reply's primer
(``add_generation_prompt``) is what the rendered tokens hold beyond the content's. The measured
framing is then checked on further conversations; only if it predicts each of them exactly is it
used as exact. Tool calls and tool schemas are rendered by templates in ways of their own, so
contexts with tools stay estimates. Reads local files only; nothing is downloaded.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from contextwright.errors import TokenizerError
from contextwright.tokens._base import ChatFrame

Count = Callable[[str], int]
Chat = list[dict[str, Any]]
_SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "pad_token")


@dataclass(frozen=True, slots=True)
class ChatTemplate:
    """A chat template's source text, where it came from, and the special tokens it may use."""

    source: str
    origin: str
    """The file it was read from (and the template's name, for named templates)."""
    specials: Mapping[str, str]


def find_chat_template(tokenizer_path: Path) -> ChatTemplate | None:
    """The chat template shipped beside ``tokenizer_path``, or None when there is none.

    ``TokenizerError`` for a ``tokenizer_config.json`` that is not JSON, or named templates
    without a ``default`` one.
    """
    folder = tokenizer_path.parent
    config = _read_config(folder / "tokenizer_config.json")
    specials = {name: text for name in _SPECIAL_NAMES
                if (text := _special_text(config.get(name))) is not None}
    jinja_file = folder / "chat_template.jinja"
    if jinja_file.is_file():
        return ChatTemplate(jinja_file.read_text(encoding="utf-8"), jinja_file.name, specials)
    template = config.get("chat_template")
    if isinstance(template, str):
        return ChatTemplate(template, "tokenizer_config.json", specials)
    if isinstance(template, list):
        named = {str(t.get("name")): t.get("template") for t in template if isinstance(t, dict)}
        if not isinstance(named.get("default"), str):
            raise TokenizerError("tokenizer_config.json has named chat templates but no "
                                 "'default' one")
        return ChatTemplate(str(named["default"]), "tokenizer_config.json (default)", specials)
    return None


def _read_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise TokenizerError(f"{path.name} beside the tokenizer is not valid JSON") from exc
    return data if isinstance(data, dict) else {}


def _special_text(value: object) -> str | None:
    """A special token as ``tokenizer_config.json`` writes it: text, or ``{"content": ...}``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def renderer(template: ChatTemplate) -> Callable[[Chat, bool], str]:
    """``render(messages, add_generation_prompt)`` for the template, as transformers renders.

    ``TokenizerError`` if jinja2 is missing or the template does not compile.
    """
    try:
        import jinja2
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError as exc:  # pragma: no cover - a dependency; kept for slim installs
        raise TokenizerError("jinja2 is needed to read a chat template") from exc

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value: object, ensure_ascii: bool = False, indent: int | None = None,
               separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=[loopcontrols])
    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    # A fixed day, so a template that prints today's date renders the same every time.
    environment.globals["strftime_now"] = lambda fmt: datetime(2025, 1, 1).strftime(fmt)
    try:
        compiled = environment.from_string(template.source)
    except jinja2.exceptions.TemplateError as exc:
        raise TokenizerError(f"the chat template ({template.origin}) does not compile: "
                             f"{exc}") from exc

    def render(messages: Chat, add_generation_prompt: bool) -> str:
        return compiled.render(messages=messages, add_generation_prompt=add_generation_prompt,
                               tools=None, documents=None, **template.specials)

    return render


# Probe words: plain lowercase words that no template rewrites and no tokenizer glues to the
# framing around them.
_A, _B, _C, _S, _R = "alpha bravo", "charlie", "delta echo foxtrot", "golf hotel", "india"


def measure_frame(render: Callable[[Chat, bool], str], count: Count) -> ChatFrame:
    """The framing the template adds per role and before the reply, checked on more chats.

    ``TokenizerError`` when the template fails on a probe, or when the measured framing does
    not predict the checks exactly (a template whose framing depends on more than the role).
    """
    def tokens(messages: Chat, prompt: bool = False) -> int:
        return count(render(messages, prompt))

    user_a = [_message("user", _A)]
    with_reply = [*user_a, _message("assistant", _B)]
    assistant = tokens(with_reply) - tokens(user_a) - count(_B)
    user = tokens([*with_reply, _message("user", _C)]) - tokens(with_reply) - count(_C)
    start = tokens(user_a) - user - count(_A)
    reply = start + tokens(user_a, True) - tokens(user_a)
    system = tokens([_message("system", _S), *user_a]) - tokens(user_a) - count(_S)
    frame = ChatFrame(system=system, user=user, assistant=assistant,
                      tool=_tool_frame(render, count, user), reply=reply, tools_exact=False)
    _check(frame, render, count)
    return frame


def _message(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "content": content}


def _tool_frame(render: Callable[[Chat, bool], str], count: Count, fallback: int) -> int:
    """A tool result's framing, if the template renders one after a call (else the user's)."""
    call = {"role": "assistant", "content": "", "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "lookup", "arguments": {}}}]}
    before = [_message("user", _A), call]
    try:
        with_result = [*before, {"role": "tool", "tool_call_id": "call_1", "name": "lookup",
                                 "content": _R}]
        return count(render(with_result, False)) - count(render(before, False)) - count(_R)
    except Exception:  # a template without tool support: results are framed like the user
        return fallback


_CHECKS: tuple[Chat, ...] = (
    [_message("system", _S), _message("user", _A), _message("assistant", _B),
     _message("user", _C), _message("assistant", _R), _message("user", _B)],
    [_message("user", _C), _message("assistant", _A), _message("user", _R)],
    [_message("system", _A), _message("user", _B)],
)


def _check(frame: ChatFrame, render: Callable[[Chat, bool], str], count: Count) -> None:
    for number, messages in enumerate(_CHECKS):
        predicted = frame.reply + sum(frame.message(m["role"]) + count(m["content"])
                                      for m in messages)
        if count(render(messages, True)) != predicted:
            raise TokenizerError(f"the chat template's framing is not the same for every "
                                 f"message of a role (check {number} differs)")


def chat_frame_for(tokenizer_path: Path, count: Count) -> tuple[ChatFrame | None, str]:
    """The measured framing beside ``tokenizer_path`` and a note on it.

    (frame, why) when a template ships and renders; (None, why not) otherwise. A template that
    is found but fails is the caller's to report (the note says what failed).
    """
    template = find_chat_template(tokenizer_path)
    if template is None:
        return None, "no chat template beside the tokenizer.json"
    try:
        frame = measure_frame(renderer(template), count)
    except TokenizerError:
        raise
    except Exception as exc:  # a template's own error (raise_exception, a missing variable)
        raise TokenizerError(f"the chat template ({template.origin}) fails to render: "
                             f"{type(exc).__name__}: {exc}"[:300]) from exc
    return frame, f"framing measured from {template.origin}"


def probe_conversations() -> Sequence[Chat]:
    """The conversations the measured framing is checked on (for tests and docs)."""
    return _CHECKS
