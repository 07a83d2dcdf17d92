"""Sources with one or a few items: system prompt, user input, environment, examples, notes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from contextwright.core.items import ContextItem, Layer, Message, check_text
from contextwright.core.request import Request, check_example
from contextwright.core.source import AddedSource, SourceOptions, SourceTraits
from contextwright.sources.options import EnvOptions


class SystemPromptSource:
    """The system prompt (L1, never cut)."""

    namespace = "system"
    traits = SourceTraits(
        offers="block", never_cut=True, prompt=True, request_part="system",
        labels={"en": "System", "zh": "系统"},
        added=AddedSource(weight=0.15, before=("env", "tools", "history", "user"), rank=7))
    options_model = SourceOptions

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """One ``system.prompt`` item when the request has a system prompt."""
        if request.system:
            text = check_text(request.system, "system")
            yield ContextItem(key="system.prompt", message=Message(role="system", content=text),
                              layer=Layer.SYSTEM)


class UserInputSource:
    """The current user input (L2, never cut)."""

    namespace = "user"
    traits = SourceTraits(offers="block", never_cut=True, question=True,
                          labels={"en": "User", "zh": "用户"})
    options_model = SourceOptions

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """One ``user.input`` item, with the request's images."""
        text = check_text(request.user_input, "user_input")
        message = Message(role="user", content=text, images=tuple(request.images))
        yield ContextItem(key="user.input", message=message, layer=Layer.TASK)


class EnvInfoSource:
    """Environment facts: time, time zone, run mode, locale.

    Facts come from ``request.env``; with the plan option ``clock: true`` the current UTC time is
    added when the request gives none (this reads the clock, so such builds are not replayable).
    """

    namespace = "env"
    volatile = True
    """Facts such as the time change every call: a stable-prefix build renders them last."""
    traits = SourceTraits(
        offers="block", volatile=True, request_part="env",
        labels={"en": "Environment", "zh": "环境信息"},
        added=AddedSource(weight=0.02, max_tokens=200,
                          before=("tools", "examples", "notes", "history", "user"), rank=4))
    options_model = EnvOptions

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """One ``env.info`` item listing the facts, if there are any."""
        facts = {check_text(str(k), "env key"): check_text(v, "env value")
                 for k, v in request.env.items()}
        if options.get("clock") and "time" not in facts:
            facts["time"] = datetime.now(UTC).isoformat(timespec="seconds")
        if facts:
            text = "\n".join(f"{key}: {value}" for key, value in facts.items())
            yield ContextItem(key="env.info", message=Message(role="system", content=text),
                              layer=Layer.SYSTEM, label="env")


class ExamplesSource:
    """Few-shot examples (L6), cut from the last one."""

    namespace = "examples"
    traits = SourceTraits(
        request_part="examples", labels={"en": "Examples", "zh": "示例"},
        added=AddedSource(weight=0.05, max_tokens=400, before=("notes", "history", "user"),
                          rank=5))
    options_model = SourceOptions

    def offered_units(self, request: Request) -> int:
        """How many units it offers for ``request``: one per example."""
        return len(request.examples)

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """One ``examples.e<i>`` item per example, in the given order."""
        for index, example in enumerate(request.examples):
            given, wanted = check_example(example, f"examples[{index}]")
            text = f"Input: {given}\nOutput: {wanted}"
            yield ContextItem(key=f"examples.e{index}", message=Message(role="system",
                              content=text), layer=Layer.EXAMPLES, order=index, label="examples")


class NotesSource:
    """Scratchpad / reflection notes of a multi-step task (L7), newest kept first."""

    namespace = "notes"
    volatile = True
    """A scratchpad grows as a task goes on: a stable-prefix build renders it last."""
    traits = SourceTraits(
        contiguous=True, volatile=True, request_part="notes", labels={"en": "Notes", "zh": "笔记"},
        added=AddedSource(weight=0.05, max_tokens=400, before=("history", "user"), rank=6))
    options_model = SourceOptions

    def offered_units(self, request: Request) -> int:
        """How many units it offers for ``request``: one per note."""
        return len(request.notes)

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """One ``notes.n<i>`` item per note, newest first."""
        for index in range(len(request.notes) - 1, -1, -1):
            text = check_text(request.notes[index], f"notes[{index}]")
            yield ContextItem(key=f"notes.n{index}", message=Message(role="system", content=text),
                              layer=Layer.NOTES, order=index, truncatable=True, label="notes")
