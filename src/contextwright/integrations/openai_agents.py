"""OpenAI Agents SDK: a ``Session`` on contextwright's stores and a model-input filter that builds.

``ContextwrightSession(store, user_id=..., session_id=...)`` keeps a run's items in any
contextwright ``Store`` (memory, SQLite, Redis, PostgreSQL), one log per (user, session) pair
with the store's isolation, retention and erasure, so ``Runner.run(agent, input,
session=...)`` works unchanged. ``ContextwrightInputFilter`` goes into
``RunConfig(call_model_input_filter=...)``: before every model call it builds the input from
the SDK's items and the agent's instructions (plan, budget, tool-pair safety, fencing); the data
note about fenced text joins the instructions, the one place the SDK lets a filter speak for
the system. Reasoning items that precede a kept tool call go back in front of it, as the
Responses API wants them within a turn, and the call gets back its item id, by which the API
pairs the reasoning with it. Items of the Responses API's hosted tools (web search,
file search, code interpreter, image generation, hosted MCP calls and tool lists) are left out of
the build, as reasoning before a message is: the server ran them within one response and the
model's answer after them says what they found; the report's warnings name them. Calls of the
tools the SDK runs on the caller's side (computer use, shell, local shell, apply-patch) and MCP
approval requests, with their outputs and responses, are carried: the build reads each pair as a
function call and its result, and the model is sent the items themselves, a call always with its
output (see ``CARRIED_CALLS``). Other items a chat message has no place for (custom tool calls
and their outputs, compaction) are refused with an ``InvalidInputError`` naming the item type.
The SDK's placeholder id of items from a chat-completions model is not kept as a message id (it
names no message). The tool schemas the SDK sends are not part of the build (a filter
cannot change them), so ``budget`` covers the instructions and the input. When the run's context
is a mutable mapping, each build's fingerprint is kept in it (``contextwright_fingerprint``) and
the next call with that context continues its layout, so the provider's prompt cache stays warm
(``cache=False`` turns that off). The SDK itself sends OpenAI's own API a ``prompt_cache_key`` per
conversation, session or trace group (a filter has no say in a call's settings); a
``ContextwrightSession`` gives it a ``session_id`` naming its (user, session) pair, so two
users' sessions never share a key.
Needs the ``openai-agents`` extra.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, MutableMapping, Sequence
from types import MappingProxyType
from typing import Any, cast

from agents import SessionSettings
from agents.memory.session_settings import resolve_session_limit
from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.run_config import CallModelData, ModelInputData

from contextwright.builder import ContextBuilder, session_cache_key
from contextwright.convert import HOSTED_RESPONSES_ITEMS, chat_messages
from contextwright.core.cache import CachePolicy, Fingerprint
from contextwright.core.final import FinalContext
from contextwright.core.report import BuildReport
from contextwright.errors import ConflictError, InvalidInputError
from contextwright.integrations._core import (
    FINGERPRINT_KEY,
    ContextShaper,
    PlanChoice,
    fingerprint_to_keep,
    snapshot,
    stored_fingerprint,
    sync_store,
    with_warning,
)
from contextwright.session.store import SessionKey, StateWrite, Store

__all__ = ["ContextwrightInputFilter", "ContextwrightSession"]

REPORT_KEY = "contextwright_report"
"""Where the filter puts each build's report in a mapping run context."""

_POPPED = "openai_agents_popped"
"""State field with the seqs ``pop_item`` removed (the store's log is append-only)."""


class ContextwrightSession:
    """The Agents SDK ``Session`` protocol over a contextwright ``Store``.

    Items are kept as the SDK gives them (Responses input items, JSON). The store's log is
    append-only, so ``pop_item`` records the seq it removed in the session's state document,
    atomically with a check that nothing was appended meanwhile; a session key used here is
    not also used by a ``ContextManager``, whose state document it would share. Store calls
    run on a worker thread, so the event loop never waits on the database.

    ``session_id`` is what the SDK knows the session by, and it names one (user, session)
    pair: a keyed hash of both (``key`` holds them as given). The SDK groups a session's runs
    by it, and derives from it the ``prompt_cache_key`` it sends OpenAI, so two users whose
    sessions have the same id never share a cache key.
    """

    def __init__(self, store: Store, *, user_id: str, session_id: str,
                 session_settings: SessionSettings | None = None) -> None:
        self.key = SessionKey(user_id=user_id, session_id=session_id)
        self.session_id = session_cache_key("openai-agents", user_id, session_id)
        self.session_settings = session_settings or SessionSettings()
        self.store = sync_store(store, "ContextwrightSession")

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The newest ``limit`` items (the settings' limit; ``None``: all), oldest first."""
        limit = resolve_session_limit(limit, self.session_settings)
        return await asyncio.to_thread(self._items, limit)

    async def add_items(self, items: list[Any]) -> None:
        """Append ``items`` in one atomic write."""
        if items:
            dumped = [_as_json(item) for item in items]
            await asyncio.to_thread(self.store.append, self.key, dumped)

    async def pop_item(self) -> Any | None:
        """Remove and return the newest item (``None`` when the session is empty)."""
        return await asyncio.to_thread(self._pop)

    async def clear_session(self) -> None:
        """Erase the session: its items and its state."""
        await asyncio.to_thread(self.store.erase_session, self.key)

    def _popped(self) -> tuple[int | None, set[int]]:
        record = self.store.get_state(self.key)
        if record is None:
            return None, set()
        return record.version, set(record.data.get(_POPPED) or ())

    def _items(self, limit: int | None) -> list[Any]:
        if limit is not None and limit <= 0:
            return []
        _, popped = self._popped()
        last = None if limit is None else limit + len(popped)
        live = [stored.message for stored in self.store.read(self.key, last=last)
                if stored.seq not in popped]
        return live if limit is None else live[-limit:]

    def _pop(self) -> Any | None:
        while True:
            version, popped = self._popped()
            recent = self.store.read(self.key, last=len(popped) + 1)
            live = [stored for stored in recent if stored.seq not in popped]
            if not live:
                return None
            newest = live[-1]
            record = self.store.get_state(self.key)
            data = dict(record.data) if record is not None else {}
            data[_POPPED] = sorted(popped | {newest.seq})
            try:
                self.store.append_if(self.key, [], last_seq=recent[-1].seq,
                                     state=StateWrite(data=data, expected_version=version))
            except ConflictError:
                continue  # an append or another pop came first: look again
            return newest.message


def _as_json(item: object) -> dict[str, Any]:
    """An SDK item as the JSON dict the store keeps (SDK objects through ``model_dump``)."""
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return cast(dict[str, Any], dump(exclude_unset=True))
    raise InvalidInputError(f"a session item must be a mapping or an SDK model, not "
                            f"{type(item).__name__}")


class ContextwrightInputFilter:
    """``RunConfig(call_model_input_filter=...)``: each model call's input built by contextwright.

    ``plan`` is a ``BuildPlan``, a shipped plan's name or a function of the ``Request``
    (``None``: ``select_plan`` per call); ``budget`` caps instructions plus input in tokens.
    The report of the last build is ``last_report``; when the run's context is a mutable
    mapping it also gets the report's dict under ``contextwright_report``, so it is reachable
    from ``result.context_wrapper.context`` of concurrent runs.

    ``cache`` keeps the provider's prompt cache warm: when the run's context is a mutable
    mapping, the build's fingerprint is kept in it under ``contextwright_fingerprint`` and the
    next model call with that context continues its layout — every call of the run, and the
    next run of the conversation when it is given the same context (or that entry). Runs with
    contexts of their own never share it; ``False`` cuts every call afresh.
    """

    def __init__(self, *, builder: ContextBuilder | None = None, plan: PlanChoice = None,
                 budget: int | None = None, cache: CachePolicy | bool = True) -> None:
        self.shaper = ContextShaper(builder=builder or ContextBuilder(), plan=plan,
                                    budget=budget, cache=cache)
        self.last_report: BuildReport | None = None
        self._memo: dict[tuple[int, ...], tuple[tuple[Any, ...], tuple[Any, ...],
                                                list[dict[str, Any]]]] = {}

    def build(self, items: Sequence[Any], instructions: str | None,
              previous: Fingerprint | None = None) -> FinalContext:
        """The build for the SDK's input ``items`` and the agent's ``instructions``.

        Hosted tools' items are left out, and the report's warnings say which; carried tools'
        items are in it as function calls and results (``CARRIED_CALLS``). ``previous`` is the
        fingerprint of this conversation's last build.
        """
        context = self.shaper.build(self._chats(items), system=instructions,
                                    previous=previous)
        hosted = _hosted_tool_kinds(items)
        if not hosted:
            return context
        note = (f"left out {sum(hosted.values())} item(s) of the Responses API's hosted tools "
                f"({', '.join(sorted(hosted))}): the server ran them, and the model's answer "
                "after them says what they found")
        return with_warning(context, note)

    def _chats(self, items: Sequence[Any]) -> list[dict[str, Any]]:
        """Chat dicts of ``items``, each unit converted once (see ``_units``)."""
        chats: list[dict[str, Any]] = []
        try:
            for unit in _units(items):
                key = tuple(map(id, unit))
                hit = self._memo.get(key)
                state = tuple(snapshot(_fields(item)) for item in unit)  # copied: see snapshot
                if hit is None or hit[1] != state:
                    hit = (unit, state, unit_chats(unit))
                    if len(self._memo) >= 200_000:
                        self._memo.clear()
                    self._memo[key] = hit  # holding the items keeps their ids unique
                chats += hit[2]
        except InvalidInputError:
            # A unit names its items from 0: read them all to name the item's own position
            # (a hosted tool's item stands in as a reasoning item, which is skipped too).
            chat_messages([_SKIPPED if _is_hosted_tool_item(item)
                           else _stand_in(item, f"input[{index}]")
                           for index, item in enumerate(items)], "input")
            raise
        return chats

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """Build the model input (on a worker thread) and record the report."""
        given = data.model_data
        kept = data.context if isinstance(data.context, MutableMapping) else None
        previous = (stored_fingerprint(kept.get(FINGERPRINT_KEY))
                    if kept is not None and self.shaper.cache is not False else None)
        context = await asyncio.to_thread(self.build, given.input, given.instructions,
                                          previous)
        body = context.to_request("openai-responses")
        built, left_out = _carried_back(body["input"], given.input)
        if left_out:
            context = with_warning(context, _left_out_note(left_out))
        self.last_report = context.report
        if kept is not None:
            kept[REPORT_KEY] = context.report.to_dict()
            fingerprint = fingerprint_to_keep(self.shaper, context)
            if fingerprint is not None:
                kept[FINGERPRINT_KEY] = fingerprint
        items = _with_reasoning(built, given.input)
        return ModelInputData(input=items, instructions=body.get("instructions") or None)


CARRIED_CALLS: Mapping[str, str] = MappingProxyType({
    "computer_call": "computer_call_output",
    "shell_call": "shell_call_output",
    "local_shell_call": "local_shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "mcp_approval_request": "mcp_approval_response",
})
"""Call items carried through a build, each with the type of the item that answers it.

The SDK runs these tools on the caller's side (an MCP approval is the caller's answer), so the
model needs each call's output on its next request, and the Responses API takes both back only
as themselves. The build reads a call and its output as a function call and its result
(``_stand_in``), so they count against the budget and are kept or left out together; the model
is then sent the items (``_carried_back``): a call as it was, and its output as it was (a
screenshot, an approval) or, where the output is text, with the build's text in its place, fenced
and cut like a function's result. A call goes with its output or not at all.
"""

_CARRIED_OUTPUTS = frozenset(CARRIED_CALLS.values())
_CARRIED_TYPES = frozenset((*CARRIED_CALLS, *_CARRIED_OUTPUTS))

_STAND_IN_NAMES = MappingProxyType({
    "computer_call": "computer", "shell_call": "shell", "local_shell_call": "local_shell",
    "apply_patch_call": "apply_patch", "mcp_approval_request": "mcp_approval"})
"""The tool name a carried call has in the build (the fence names it)."""

_NOT_ARGUMENTS = frozenset(("type", "id", "call_id", "status"))
"""Fields of a carried call that are not what it asks for."""

_FOLLOWERS = frozenset(("function_call", "reasoning", *CARRIED_CALLS))
"""Items that join the message before them (a call joins its assistant message)."""

HOSTED_TOOL_ITEMS = HOSTED_RESPONSES_ITEMS
"""Items of the Responses API's hosted tools, which the build leaves out: the server ran the
tool within one response (nothing of ours answers it), and the model's answer after the item
says what it found. The session keeps them."""


_SKIPPED = {"type": "reasoning", "summary": []}
"""An item ``chat_messages`` leaves out, standing in for one the build leaves out."""


def _is_hosted_tool_item(item: Any) -> bool:
    return _fields(item).get("type") in HOSTED_TOOL_ITEMS


def _hosted_tool_kinds(items: Sequence[Any]) -> dict[str, int]:
    """How many items of each hosted tool's type ``items`` has."""
    counts: dict[str, int] = {}
    for item in items:
        kind = _fields(item).get("type")
        if kind in HOSTED_TOOL_ITEMS:
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def _units(items: Sequence[Any]) -> list[tuple[Any, ...]]:
    """``items`` cut before every item that joins nothing: each unit converts on its own.

    Hosted tools' items are left out (``HOSTED_TOOL_ITEMS``). The SDK hands the filter the same
    item objects call after call, so units are converted once and their chat dicts reused,
    which keeps a long conversation cheap and lets the builder reuse what it parsed.
    """
    units: list[tuple[Any, ...]] = []
    current: list[Any] = []
    for item in items:
        kind = _fields(item).get("type")
        if kind in HOSTED_TOOL_ITEMS:
            continue
        if current and kind not in _FOLLOWERS:
            units.append(tuple(current))
            current = []
        current.append(item)
    if current:
        units.append(tuple(current))
    return units


def unit_chats(unit: Sequence[Any]) -> list[dict[str, Any]]:
    """``chat_messages`` of one unit, by a direct path for the plain items the SDK holds."""
    unit = [_stand_in(item) for item in unit]
    fast = _plain_unit(unit)
    return fast if fast is not None else chat_messages(unit, "input")


# --- carried tools' items --------------------------------------------------------------------


def _stand_in(item: Any, where: str = "input") -> Any:
    """``item``; for a carried call or output, the function call or output the build reads."""
    fields = _fields(item)
    kind = fields.get("type")
    if isinstance(kind, str) and kind in CARRIED_CALLS:
        arguments = {key: value for key, value in fields.items() if key not in _NOT_ARGUMENTS}
        return {"type": "function_call", "call_id": _carried_key(fields, where),
                "name": _STAND_IN_NAMES[kind],
                "arguments": json.dumps(arguments, ensure_ascii=False, default=str)}
    if kind in _CARRIED_OUTPUTS:
        return {"type": "function_call_output", "call_id": _carried_key(fields, where),
                "output": _output_reading(fields)}
    return item


def _carried_key(fields: Mapping[str, Any], where: str = "input") -> str:
    """The id that pairs a carried call with its output."""
    kind = fields.get("type")
    if kind == "mcp_approval_request":
        key = fields.get("id")
    elif kind == "mcp_approval_response":
        key = fields.get("approval_request_id")
    else:  # the API's local_shell_call_output names its call by ``id`` alone
        key = fields.get("call_id") or fields.get("id")
    if not isinstance(key, str) or not key:
        raise InvalidInputError(f"{where} is a {kind!r} item without the id of its call")
    return key


def _output_reading(fields: Mapping[str, Any]) -> str | list[dict[str, Any]]:
    """What the build reads of a carried output: its text, or a screenshot as an image."""
    kind, output = fields.get("type"), fields.get("output")
    if kind == "computer_call_output":
        screenshot = output if isinstance(output, Mapping) else {}
        if screenshot.get("image_url"):
            return [{"type": "input_image", "image_url": screenshot["image_url"]}]
        return f"(screenshot {screenshot.get('file_id') or 'missing'})"
    if kind == "mcp_approval_response":
        return "approved" if fields.get("approve") else f"declined {fields.get('reason') or ''}"
    if kind == "shell_call_output":
        return "\n".join(_shell_text(chunk) for chunk in output or ())
    return output if isinstance(output, str) else ""


def _shell_text(chunk: Mapping[str, Any]) -> str:
    """One command's output: its stdout, its stderr, and how it ended."""
    outcome = chunk.get("outcome") or {}
    end = ("timed out" if outcome.get("type") == "timeout"
           else f"exit code {outcome.get('exit_code')}")
    stdout = str(chunk.get("stdout") or "").rstrip("\n")
    stderr = str(chunk.get("stderr") or "").rstrip("\n")
    return "\n".join(part for part in (stdout, stderr and f"stderr:\n{stderr}", f"({end})")
                     if part)


def _carried_back(built: list[dict[str, Any]], given: Sequence[Any]
                  ) -> tuple[list[Any], dict[str, int]]:
    """``built`` with the carried items in place of their stand-ins, and the calls left out.

    A call is left out with its stand-in result when there is no output to send with it: none
    in ``given`` yet (the build's placeholder answers it), or a screenshot the build left out
    (an older one, reduced to a line). The counts are by call type, for the report.
    """
    calls, outputs = _carried_items(given)
    if not calls:
        return built, {}
    sendable = {str(item.get("call_id")) for item in built
                if item.get("type") == "function_call_output"
                and _sendable(outputs.get(str(item.get("call_id"))), item.get("output"))}
    result: list[Any] = []
    left_out: dict[str, int] = {}
    for item in built:
        kind, key = item.get("type"), str(item.get("call_id"))
        if kind not in ("function_call", "function_call_output") or key not in calls:
            result.append(item)
        elif key not in sendable:
            if kind == "function_call":
                call_type = str(_fields(calls[key]).get("type"))
                left_out[call_type] = left_out.get(call_type, 0) + 1
        elif kind == "function_call":
            result.append(calls[key])
        else:
            result.append(_sent_output(outputs[key], item.get("output")))
    return result, left_out


def _carried_items(given: Sequence[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The carried calls and outputs of ``given``, by the id that pairs them."""
    calls: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    for item in given:  # every model call reads them all: plain dicts without a detour
        fields = item if type(item) is dict else _fields(item)
        kind = fields.get("type")
        if kind in _CARRIED_TYPES:
            (calls if kind in CARRIED_CALLS else outputs)[_carried_key(fields)] = item
    return calls, outputs


def _sendable(output: Any, built_output: object) -> bool:
    """Whether a carried call can go with ``output``: there is one, and its screenshot is kept."""
    if output is None:
        return False
    fields = _fields(output)
    if fields.get("type") != "computer_call_output" or isinstance(_output_reading(fields), str):
        return True
    return isinstance(built_output, list) and any(
        isinstance(part, Mapping) and part.get("type") == "input_image" for part in built_output)


def _sent_output(output: Any, built_output: object) -> Any:
    """A carried output as sent: as given, or with the build's text where its output is text."""
    fields = _fields(output)
    kind = fields.get("type")
    if kind in ("computer_call_output", "mcp_approval_response") or not _output_reading(fields):
        return output  # a screenshot, a decision or no text: nothing the build rewrites
    if kind == "shell_call_output":
        chunk = {"stdout": _text_of(built_output), "stderr": "",
                 "outcome": _shell_outcome(fields.get("output"))}
        return {**fields, "output": [chunk]}
    return {**fields, "output": _text_of(built_output)}


def _text_of(built_output: object) -> str:
    """The text of a built function call output (text, or text parts)."""
    if isinstance(built_output, str):
        return built_output
    parts = built_output if isinstance(built_output, list) else []
    return "\n".join(str(part.get("text") or "") for part in parts if isinstance(part, Mapping))


def _shell_outcome(chunks: object) -> dict[str, Any]:
    """How a shell call ended: its first command that failed or timed out, else its last."""
    listed = chunks if isinstance(chunks, list) else []
    outcomes = [dict(chunk.get("outcome") or {}) for chunk in listed if isinstance(chunk, Mapping)]
    for outcome in outcomes:
        if outcome.get("type") == "timeout" or outcome.get("exit_code") not in (0, None):
            return outcome
    return outcomes[-1] if outcomes else {"type": "exit", "exit_code": 0}


def _left_out_note(left_out: Mapping[str, int]) -> str:
    """The report's warning for the carried calls ``_carried_back`` left out, by type."""
    kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(left_out.items()))
    return (f"left out {sum(left_out.values())} tool call(s) with their results ({kinds}): "
            "a call goes to the model only with its output, and these had none yet or a "
            "screenshot the build left out; the session keeps them")


def _plain_unit(unit: Sequence[Any]) -> list[dict[str, Any]] | None:
    """What ``chat_messages`` makes of a unit of plain dict items; ``None``: anything else.

    The SDK's items are mostly text messages, calls and string outputs; reading them directly
    is several times faster than the general reader, which a 10,000-item session pays on
    every model call. Anything unusual goes to the general reader.
    """
    head = unit[0]
    chats = _plain_head(head) if type(head) is dict else None
    if chats is None:
        return None
    typed_assistant = head.get("type") == "message" and chats[0]["role"] == "assistant"
    target = chats[0] if typed_assistant else None
    for item in unit[1:]:
        if type(item) is not dict:
            return None
        if item.get("type") == "reasoning":
            continue
        arguments = item.get("arguments")
        if not (isinstance(item.get("call_id"), str) and isinstance(item.get("name"), str)
                and isinstance(arguments, str | None)):
            return None
        if target is None:
            target = {"role": "assistant", "content": None}
            chats.append(target)
        target.setdefault("tool_calls", []).append(
            {"id": item["call_id"], "type": "function",
             "function": {"name": item["name"], "arguments": arguments or "{}"}})
    return chats


def _plain_head(item: dict[str, Any]) -> list[dict[str, Any]] | None:
    kind, role, content = item.get("type"), item.get("role"), item.get("content")
    if kind is None:  # an easy input message: kept as given, like any plain chat dict
        plain = (role in ("user", "assistant", "system") and "choices" not in item
                 and item.get("id") != FAKE_RESPONSES_ID)
        return [dict(item)] if plain and isinstance(content, str) else None
    if kind == "reasoning":
        return []
    if kind == "function_call_output":
        output = item.get("output")
        if not (isinstance(output, str) and isinstance(item.get("call_id"), str)):
            return None
        return [{"role": "tool", "tool_call_id": item["call_id"], "content": output}]
    if kind != "message" or role not in ("user", "assistant", "system") or item.get("refusal"):
        return None
    text = content if isinstance(content, str) else _plain_text(content)
    if text is None:
        return None
    message: dict[str, Any] = {"role": role, "content": text}
    for key in ("id", "timestamp", "name", "consumed"):
        if item.get(key) is not None:
            message[key] = item[key]
    if message.get("id") == FAKE_RESPONSES_ID:
        del message["id"]  # the SDK's placeholder names no message (see convert.PLACEHOLDER_ID)
    return [message]


def _plain_text(parts: object) -> str | None:
    if not isinstance(parts, list):
        return None
    texts = []
    for part in parts:
        if not (type(part) is dict and part.get("type") in ("text", "input_text", "output_text")
                and isinstance(part.get("text"), str)):
            return None
        texts.append(part["text"])
    return "\n".join(texts)


def _fields(item: Any) -> Mapping[str, Any]:
    if type(item) is dict:  # the common case, without an abstract-class check
        return item
    return item if isinstance(item, Mapping) else _as_json(item)


def _with_reasoning(built: Sequence[Any], given: Sequence[Any]) -> list[Any]:
    """``built`` with each kept call's preceding reasoning items put back in front of it.

    The Responses API pairs a reasoning item with the item that followed it in its output by
    that item's id: a call rebuilt without its ``fc_`` id after its reasoning is refused (400,
    "provided without its required following item"), so the call gets its original id back.
    Only there: an ``fc_`` id sent without its reasoning item is refused too. A carried call
    is sent as given, its id included. Reasoning before a message is not put back, and a built
    message carries no item id, so no message needs one.
    """
    before_call: dict[str, tuple[list[Any], object]] = {}
    pending: list[Any] = []
    for item in given:
        fields = _fields(item)
        kind = fields.get("type")
        if kind == "reasoning":
            pending.append(item)
        elif kind == "function_call" and pending:
            before_call[str(fields.get("call_id"))] = (pending, fields.get("id"))
            pending = []
        elif kind in CARRIED_CALLS and pending:
            before_call[_carried_key(fields)] = (pending, None)  # it keeps its own id
            pending = []
        elif kind is not None or fields.get("role") is not None:
            pending = []  # reasoning before a message: the API does not need it back
    result: list[Any] = []
    for item in built:
        fields = _fields(item)
        kind = fields.get("type")
        if kind == "function_call":
            reasoning, item_id = before_call.pop(str(fields.get("call_id")), ((), None))
            result.extend(reasoning)
            if reasoning and isinstance(item_id, str) and item_id != FAKE_RESPONSES_ID:
                item = {**fields, "id": item_id}
        elif kind in CARRIED_CALLS:
            result.extend(before_call.pop(_carried_key(fields), ((), None))[0])
        result.append(item)
    return result
