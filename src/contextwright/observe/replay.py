"""Builds made for looking at them: ``snapshot_of`` (one build, now) and ``replay``.

``replay`` rebuilds a snapshot's request under another plan and diffs the two: one variable
changed, the rest held. What the snapshot records of the builder is held too: the tokenizer
(a model's estimate names its model, which brings that model's image rule), the window and
output reserve the build had (a builder's ``model=`` or ``window=`` sets them for every plan),
and the rendering it was counted for. It needs the request's text, so a redacted snapshot is
refused. What a snapshot cannot hold is named in the replay's ``notes`` rather than silently
rebuilt otherwise: a fence secret given in code (markers made with another key), and how images
were counted when the rule was a model's the snapshot does not name. A build a
``ContextManager`` made also drew on session memory and recalled turns, which are not part of
the request: those sources are named in ``missing_sources``, and the plan such a build recorded
replays with its ``session`` source empty.
"""

from __future__ import annotations

import bisect
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from contextwright.core.fence import FENCE_SECRET_VARIABLE
from contextwright.core.items import ContextItem
from contextwright.core.plan import BuildPlan
from contextwright.core.request import Request
from contextwright.errors import BudgetError, InvalidInputError
from contextwright.observe.diff import SnapshotDiff, diff_snapshots
from contextwright.observe.snapshot import (
    BuildRecord,
    Snapshot,
    capture,
    deployment_hasher,
    frozen_request,
)

if TYPE_CHECKING:
    from contextwright.builder import ContextBuilder

_SESSION_SOURCES = frozenset(("session",))
"""Sources a manager adds from the session store, not from the request."""


class _AbsentSessionSource:
    """Stands in for a manager's session source in a replay, empty.

    Registered, so the plan a manager's build recorded replays as it is; empty, since a
    snapshot does not hold the session's memory (``missing_sources`` names it instead).
    """

    volatile = True
    """As the session source it stands in for: rendered after the stable part."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        """Nothing: what the session held is not in the snapshot."""
        return iter(())


def snapshot_of(plan: BuildPlan, request: Request, *, tokenizer: str | None = None,
                target: Literal["chat", "text"] = "chat", redact: bool = False,
                labels: Mapping[str, Any] | None = None,
                fence_secret: str | bytes | None = None) -> Snapshot:
    """Build ``request`` under ``plan`` now and return its snapshot (a ``BudgetError`` too).

    ``redact`` hashes as a recorder of ``fence_secret`` would (``SnapshotRecorder``).
    """
    from contextwright.builder import ContextBuilder

    builder = ContextBuilder(tokenizer)
    return _snapshot_with(builder, plan, request, target=target, redact=redact,
                          labels=labels, fence_secret=fence_secret)


def _snapshot_with(builder: ContextBuilder, plan: BuildPlan, request: Request, *,
                   target: Literal["chat", "text"], redact: bool,
                   labels: Mapping[str, Any] | None,
                   fence_secret: str | bytes | None) -> Snapshot:
    from contextwright import __version__

    effective = builder.effective_plan(plan)
    started, begin = time.time(), time.perf_counter_ns()
    context, error = None, None
    try:
        context = builder.build(effective, request, target=target)
    except BudgetError as exc:
        error = exc
    record = BuildRecord(
        request=frozen_request(request, with_history=True), plan=effective, context=context,
        report=context.report if context else error.report if error else None, error=error,
        started=started, build_ns=time.perf_counter_ns() - begin,
        tokenizer=builder.tokenizer.name, history_length=len(request.history),
        labels=dict(labels or {}))
    return capture(record, redact=redact, library_version=__version__,
                   hasher=deployment_hasher(fence_secret) if redact else None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Replay:
    """A snapshot rebuilt under another plan."""

    original: Snapshot
    """The snapshot replayed."""
    replayed: Snapshot
    """The new build."""
    diff: SnapshotDiff
    """What changed."""
    missing_sources: tuple[str, ...]
    """Sources of the original whose items came from outside the request (session memory,
    recalled turns of a manager's build): the replay could not offer them."""
    notes: tuple[str, ...] = ()
    """What the replay could not hold as the original build had it, or held over the plan's
    own setting, in words: the diff may show these as well as the plan's change."""


def request_of(snapshot: Snapshot) -> Request:
    """The request a snapshot recorded; ``InvalidInputError`` when it was redacted."""
    if snapshot.redacted or snapshot.request.get("redacted"):
        raise InvalidInputError(
            f"snapshot {snapshot.id} is redacted (hashes only): record with "
            "SnapshotRecorder(..., redact=False) to replay")
    return Request.from_dict(dict(snapshot.request))


def replay(snapshot: Snapshot, plan: BuildPlan, *, window: int | None = None,
           reserved_output: int | None = None, available: int | None = None,
           fence_secret: str | bytes | None = None) -> Replay:
    """Rebuild ``snapshot``'s request under ``plan`` and diff the result against it.

    The build is made as the original was: with its tokenizer, the window and output reserve
    it had (whether its plan or its builder's ``model=`` / ``window=`` set them; ``window`` and
    ``reserved_output`` change them), the tokens it had available (a plan's
    ``available_override``, the CLI's ``--budget``, included; ``available`` changes them, and
    so does a changed window or reserve: the budget is then ``plan``'s under them) and its
    rendering. ``fence_secret`` (default ``CONTEXTWRIGHT_FENCE_SECRET``) keys the fence
    markers: a snapshot does not record the original's, so a build given another in code is
    named in ``notes``.
    """
    request = request_of(snapshot)
    held = _held_budget(snapshot, window, reserved_output)
    builder = _builder_of(snapshot, held, fence_secret)
    budget_notes = _overridden_budget(plan, held, (window, reserved_output))
    plan, available_note = _held_available(snapshot, builder, plan, available,
                                           changed=window is not None
                                           or reserved_output is not None)
    rebuilt = _snapshot_with(builder, plan, request, target=snapshot.target or "chat",
                             redact=False, labels={"replay_of": snapshot.id},
                             fence_secret=None)
    notes = (*budget_notes, *available_note,
             *_image_rule_note(snapshot, rebuilt), *_fence_note(snapshot, rebuilt))
    return Replay(original=snapshot, replayed=rebuilt, diff=diff_snapshots(snapshot, rebuilt),
                  missing_sources=_missing_sources(snapshot), notes=notes)


def _missing_sources(snapshot: Snapshot) -> tuple[str, ...]:
    missing = tuple(str(row["source"]) for row in snapshot.sources
                    if str(row["source"]) in _SESSION_SOURCES and int(row["items"]))
    if snapshot.mode is not None and any(
            "recalled" in str(d["key"]) for d in snapshot.decisions):
        missing += ("history (recalled turns)",)
    return missing


@dataclass(frozen=True, slots=True, kw_only=True)
class _Budget:
    """The window and output reserve a replay builds with."""

    window: int
    reserved_output: int

    def get(self, name: str) -> int:
        return self.window if name == "window" else self.reserved_output


def _held_budget(snapshot: Snapshot, window: int | None,
                 reserved_output: int | None) -> _Budget:
    """The window and output reserve the replay builds with: the original's unless given."""
    recorded = snapshot.plan_spec.get("budget")
    reserve = recorded.get("reserved_output") if isinstance(recorded, Mapping) else None
    if reserved_output is None:
        if not isinstance(reserve, int):
            raise InvalidInputError(f"snapshot {snapshot.id} does not record its output "
                                    "reserve: pass reserved_output")
        reserved_output = reserve
    return _Budget(window=snapshot.window if window is None else window,
                   reserved_output=reserved_output)


def _held_available(snapshot: Snapshot, builder: ContextBuilder, plan: BuildPlan,
                    available: int | None, *, changed: bool
                    ) -> tuple[BuildPlan, tuple[str, ...]]:
    """``plan`` with the tokens the replay may use, and a note when that is not its own.

    The original's available tokens are held unless ``available`` is given, or the window or
    output reserve is changed (``changed``: the budget is then ``plan``'s under them). A plan
    that would have another budget under the held window is noted, never silently rebuilt.
    """
    if available is not None:
        return plan.with_budget(available_override=available), ()
    if changed:
        return plan, ()
    own = builder.effective_plan(plan).budget.available
    if own == snapshot.available:
        return plan, ()
    note = (f"the plan's budget of {own} tokens is not used: the replay holds the original "
            f"build's {snapshot.available} (pass available= to replay, or --available, to "
            "change it)")
    return plan.with_budget(available_override=snapshot.available), (note,)


def _builder_of(snapshot: Snapshot, budget: _Budget,
                fence_secret: str | bytes | None) -> ContextBuilder:
    """A builder counting as the original's did.

    A model whose tokenizer is not published counts with an estimate named
    ``<stand-in>~<model>``: that model is given back, with its image rule.
    """
    from contextwright.builder import ContextBuilder

    _, estimated, model = snapshot.tokenizer.rpartition("~")
    return ContextBuilder(None if estimated else snapshot.tokenizer,
                          [_AbsentSessionSource(name) for name in sorted(_SESSION_SOURCES)],
                          model=model if estimated else None, window=budget.window,
                          reserved_output=budget.reserved_output, fence_secret=fence_secret)


def _overridden_budget(plan: BuildPlan, held: _Budget,
                       given: tuple[int | None, int | None]) -> tuple[str, ...]:
    """Say where the plan's own window or reserve lost to the held one, never silently."""
    own = {"window": plan.budget.window, "reserved_output": plan.budget.reserved_output}
    return tuple(
        f"the plan's {name} {own[name]} is not used: the replay holds the original build's "
        f"{held.get(name)} (pass {name}= to replay, or --{name.replace('_', '-')}, to change "
        "it)"
        for name, asked in zip(("window", "reserved_output"), given, strict=True)
        if asked is None and own[name] != held.get(name))


def _has_images(snapshot: Snapshot) -> bool:
    return bool(snapshot.request.get("images")) or any(
        m.get("images") for m in snapshot.messages)


def _image_rule_note(original: Snapshot, rebuilt: Snapshot) -> tuple[str, ...]:
    """How images were counted, when the replay cannot count them as the original did."""
    if not _has_images(original) or original.image_rule == rebuilt.image_rule:
        return ()
    if original.image_rule is None:
        return (f"the record does not say how its images were counted; the replay counted "
                f"them by the {rebuilt.image_rule} rule",)
    return (f"the original counted images by the {original.image_rule} rule (its builder's "
            f"model, which a snapshot does not name); the replay counted them by the "
            f"{rebuilt.image_rule} rule",)


_FENCE_HEAD = re.compile(r"<<data ([0-9a-f]{12}) ")
"""The start of a fence's opening line as ``core.fence.fence`` writes it; its label runs to
``>>`` at the end of that line."""
_FENCE_END = re.compile(r"\n<<end ([0-9a-f]{12})>>")
"""A fence's closing line (after the line break that ends its body)."""
_FENCE_END_CHARS = len("\n<<end ") + 12 + len(">>")


def _fenced_parts(text: str) -> list[tuple[str, str, str]]:
    """Each fenced part of ``text`` as (marker, label, body), in order.

    A part runs from an opening line to the first closing line of its marker; what lies inside
    a part is not searched for more. Found in one pass over the text: every closing line is
    indexed by its marker first, so an opening with no end (a pasted log quoting fence lines)
    costs a lookup, not a scan of the rest of the text.
    """
    ends: dict[str, list[int]] = {}
    for end in _FENCE_END.finditer(text):
        ends.setdefault(end.group(1), []).append(end.start())
    parts: list[tuple[str, str, str]] = []
    resume, line_end = 0, -1
    for head in _FENCE_HEAD.finditer(text):
        if head.start() < resume or not ends.get(head.group(1)):
            continue
        if line_end < head.end():  # heads on one line share its end
            line_end = text.find("\n", head.end())
            if line_end < 0:
                break
        part = _fenced_part(text, head, line_end, ends[head.group(1)])
        if part is not None:
            parts.append(part[0])
            resume = part[1]
    return parts


def _fenced_part(text: str, head: re.Match[str], line_end: int, ends: list[int]
                 ) -> tuple[tuple[str, str, str], int] | None:
    """The part opened by ``head`` (its line ending at ``line_end``) and where it stops."""
    if line_end - 2 < head.end() or text[line_end - 2:line_end] != ">>":
        return None
    body_start = line_end + 1
    found = bisect.bisect_left(ends, body_start)
    if found == len(ends):
        return None
    body_end = ends[found]
    part = (head.group(1), text[head.end():line_end - 2], text[body_start:body_end])
    return part, body_end + _FENCE_END_CHARS


def _fence_markers(snapshot: Snapshot) -> dict[tuple[str, str], str]:
    """The marker of each fenced (label, body) in the rendered messages."""
    return {(label, body): marker
            for m in snapshot.messages if isinstance(m.get("content"), str)
            for marker, label, body in _fenced_parts(m["content"])}


def _fence_note(original: Snapshot, rebuilt: Snapshot) -> tuple[str, ...]:
    """Name markers made with another fence key: the same text fenced, another marker.

    The marker is a keyed hash of the label and the text, so one fenced part both builds
    render tells whether the keys agree.
    """
    before, after = _fence_markers(original), _fence_markers(rebuilt)
    if all(after[part] == marker for part, marker in before.items() if part in after):
        return ()
    return ("the original fenced its untrusted parts with another fence secret than this "
            f"replay's ({FENCE_SECRET_VARIABLE}, or fence_secret=): a snapshot does not record "
            "it, so those parts differ by their markers alone",)
