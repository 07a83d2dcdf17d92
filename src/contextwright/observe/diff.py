"""What changed between two builds: items, their fates and reasons, tokens, the rendered prefix.

An item is known by its source and key in the decisions, and, for what made it into the
context, by its rendered message: the caller's message id when it has one, else its section and
content hash; an offered tool schema by its name (``tools.<name>``, as the tools source's
decisions name it). So a diff works on redacted snapshots too (hashes compare like texts), as
long as both were hashed with the same key; against an unredacted one, the raw texts are hashed
with the redacted one's key when this process holds it (its deployment's secret, or the
built-in key). Otherwise the diff says the two cannot be compared (``hashes_comparable``). The
first divergence is where the two requests stop sharing a prefix in the order providers cache
them — tool schemas first, then the messages — so from there on a prompt cache cannot help.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from contextwright.observe.snapshot import (
    PLAIN,
    Hasher,
    Snapshot,
    hashing_id,
    is_hashed_identifier,
    recorded_hasher,
    text_hash,
)

_SEVERITY = ("failed", "conflict", "deduplicated", "dropped", "truncated", "compacted",
             "placeholder", "hoisted", "kept")


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemChange:
    """One item whose fate differs between the two builds."""

    source: str
    """Source name."""
    key: str
    """Decision key, ``message:<id>`` / ``message:<role>:<hash>`` for a rendered message (with
    ``#<n>`` for the n-th message that renders alike), or ``tools.<name>`` for an offered tool
    schema."""
    change: str
    """``added`` (only in B's context), ``removed`` (only in A's) or ``changed`` (both, fate
    or size differ)."""
    before: str | None
    """A's fate and reason (None when A never saw the item)."""
    after: str | None
    """B's fate and reason."""
    tokens_before: int
    """Tokens in A's context."""
    tokens_after: int
    """Tokens in B's context."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceDelta:
    """One source's tokens and grant in A and B."""

    source: str
    """Source name."""
    tokens_a: int
    """Tokens used in A."""
    tokens_b: int
    """Tokens used in B."""
    budget_a: int
    """Tokens granted in A."""
    budget_b: int
    """Tokens granted in B."""

    @property
    def delta(self) -> int:
        """``tokens_b - tokens_a``."""
        return self.tokens_b - self.tokens_a


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotDiff:
    """The answer of ``diff_snapshots``."""

    a: str
    """Id of the first snapshot."""
    b: str
    """Id of the second."""
    plans: tuple[str, str]
    """Plan name of each (with its hash when the names match but the plans do not)."""
    total_tokens: tuple[int, int]
    """Context tokens of each."""
    items: tuple[ItemChange, ...]
    """Items added, removed or changed."""
    sources: tuple[SourceDelta, ...]
    """Per-source tokens, in the order the sources appear."""
    first_divergence: int | None
    """Index of the first rendered message outside the prefix both requests share, in the
    providers' order (tool schemas, then messages): 0 when the tool schemas differ, since
    they come before every message. None: identical requests."""
    messages: tuple[int, int]
    """Number of rendered messages in each."""
    tools_changed: bool = False
    """The offered tool schemas differ (one added, removed, reordered or reworded)."""
    warnings_only_a: tuple[str, ...] = ()
    """Warnings only A's build gave."""
    warnings_only_b: tuple[str, ...] = ()
    """Warnings only B's build gave (a replay that now leaves out this turn's calls...)."""
    hashes_comparable: bool = True
    """False when the two keep hashes that cannot match: made with different keys (another
    deployment's secret, or plain SHA-256 before keyed hashing), or one unredacted and one
    hashed with a key this process does not hold. Equal texts and ids then read as changed."""
    tokenizers: tuple[str, str] = ("", "")
    """The tokenizer each build counted with. When they differ, the two builds' token counts
    are in different units: an item kept whole in both shows as changed by its size alone
    (``counting_note`` says so)."""

    @property
    def changed_keys(self) -> tuple[str, ...]:
        """Keys of every item that changed."""
        return tuple(item.key for item in self.items)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        data = asdict(self)
        for row, delta in zip(data["sources"], self.sources, strict=True):
            row["delta"] = delta.delta
        return data


@dataclass(frozen=True, slots=True)
class _Fate:
    source: str
    fate: str
    tokens: int


def message_key(message: Mapping[str, Any], hasher: Hasher = PLAIN, *,
                as_redacted: bool = False) -> str:
    """A rendered message's identity: its id, or its role and content hash.

    Not its section: the user's question of one call is a history message of the next, and the
    diff shows that as the same item, moved. ``as_redacted`` writes a raw id as ``hasher``
    redacts it, so a raw snapshot's message is known by the key of its redacted twin (a diff of
    one raw and one redacted snapshot); otherwise the id is shown as recorded.
    """
    if message.get("id"):
        shown = _hashed_id(message["id"], hasher) if as_redacted else message["id"]
        return f"message:{shown}"
    return f"message:{message.get('role', '?')}:{content_hash(message, hasher)[:12]}"


def content_hash(message: Mapping[str, Any], hasher: Hasher = PLAIN) -> str:
    """Hash of what a message renders: role, content, calls, speaker name, images, reasoning.

    Equal for a redacted and a raw twin when ``hasher`` is the one the redacted twin was made
    with. An image counts by its recorded ``digest`` (its source and detail; a redacted
    snapshot keeps it keyed, as an id, and ``hasher`` keys a raw one alike); the reasoning an
    assistant message sends back (its thinking blocks) by each block's type and text, since
    the provider reads it first in that message. A message
    without ``name``, ``images`` or ``thinking`` hashes as it did before they were compared,
    so its key does not move between versions; a record written before snapshots kept images
    reads as a message without any, so against a later record of the same message with an
    image it shows as changed, never as equal.
    """
    calls = [[_hashed_id(c.get("id"), hasher), c.get("name"),
              _hashed_text(c.get("arguments"), hasher)]
             for c in message.get("tool_calls", ())]
    rendered: list[Any] = [
        message.get("role"), _hashed_text(message.get("content"), hasher), calls,
        _hashed_id(message.get("tool_call_id"), hasher)]
    if message.get("name"):
        rendered.append(["name", _speaker(message, hasher)])
    if message.get("images"):
        rendered.append(["images", [_hashed_id(image.get("digest"), hasher)
                                    for image in message["images"]]])
    if message.get("thinking"):
        rendered.append(["thinking", [[block.get("type"), _hashed_text(block.get("text"), hasher)]
                                      for block in message["thinking"]]])
    return PLAIN.digest(json.dumps(rendered))


def _speaker(message: Mapping[str, Any], hasher: Hasher) -> str | None:
    """The ``name`` as a redacted snapshot keeps it.

    Hashed for a speaker; in clear for the tool a tool result names (the application's, not a
    person's).
    """
    if message.get("role") == "tool":
        return str(message["name"])
    return _hashed_id(message["name"], hasher)


def _hashed_text(value: object, hasher: Hasher) -> str:
    """A text's hash as a redacted snapshot keeps it (``hasher`` hashes a raw one)."""
    return text_hash(value) if isinstance(value, Mapping) else hasher.digest(str(value))


def _hashed_id(value: object, hasher: Hasher) -> str | None:
    """An id as a redacted snapshot keeps it, so a raw and a redacted twin hash alike."""
    if not value:
        return None
    text = str(value)
    return text if is_hashed_identifier(text) else hasher.identifier(text)


def comparison_hasher(a: Snapshot, b: Snapshot,
                      fence_secret: str | bytes | None = None) -> Hasher | None:
    """What hashes the raw texts and ids of ``a`` and ``b`` so they compare with the other's.

    The redacted one's hasher when only one is redacted (None when this process does not hold
    its key: ``fence_secret``'s, default ``CONTEXTWRIGHT_FENCE_SECRET``, or the built-in one);
    plain SHA-256 when neither or both are (there is nothing raw to match a hash, or nothing
    hashed); None when both are redacted under different keys.
    """
    redacted = [s for s in (a, b) if s.redacted]
    if len(redacted) == 2:
        return PLAIN if hashing_id(a) == hashing_id(b) else None
    if not redacted:
        return PLAIN
    return recorded_hasher(redacted[0], fence_secret)


_RUN_RANGE = re.compile(r"\((?:[\w-]+)\.m(\d+)–m(\d+)\)")
"""The positions a run of unread messages covers, as its reason names them (``core.reporting``)."""
_ITEM_POSITION = re.compile(r"(.+)\.m(\d+)")
"""A message list's item key: its source and position (``history.m12``)."""


@dataclass(frozen=True, slots=True)
class _Build:
    """One side of a diff: the fate of each key, and the item each rendered message shows."""

    fates: dict[str, _Fate]
    items: dict[str, str]
    """Item key (``history.m4``, as its decisions name it) -> the key of its rendered message,
    for the messages a record names the item of."""
    runs: list[tuple[str, str, int, int, _Fate]]
    """Runs of unread messages: key, source, first and last position, fate."""


def _fates(snapshot: Snapshot, hasher: Hasher, *, as_redacted: bool) -> _Build:
    fates: dict[str, _Fate] = {}
    runs: dict[str, int] = {}
    ranges: list[tuple[str, str, int, int, _Fate]] = []
    for d in snapshot.decisions:
        key = str(d["key"])
        fate = f"{d['action']}: {d['reason']}"
        if key.endswith(".*"):  # runs the build never read: one entry per run, in order
            runs[key] = runs.get(key, 0) + 1
            key = f"{key}#{runs[key]}"
            covered = _RUN_RANGE.search(str(d["reason"]))
            if covered is not None:
                ranges.append((key, str(d["source"]), int(covered.group(1)),
                               int(covered.group(2)), _Fate(str(d["source"]), fate, 0)))
        known = fates.get(key)
        if known is None or _rank(str(d["action"])) < _rank(known.fate.split(":")[0]):
            fates[key] = _Fate(str(d["source"]), fate, int(d.get("tokens_after", 0)))
    for tool in snapshot.tools or ():
        # Like a message, an offered schema is kept unless a decision said otherwise; its
        # hash is in the fate, so a reworded schema of the same size shows as changed.
        fates.setdefault(f"tools.{tool['name']}", _Fate(
            "tools", f"kept: offered as a tool schema ({str(tool['sha256'])[:8]})",
            int(tool["tokens"])))
    seen: dict[str, int] = {}
    items: dict[str, str] = {}
    for message in snapshot.messages:
        # A message that repeats an earlier one ("ok", the same tool result) is an item of its
        # own: the n-th of a key is ``<key>#n``, so one more or one less of them shows.
        key = message_key(message, hasher, as_redacted=as_redacted)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:
            key = f"{key}#{seen[key]}"
        kept = _Fate(str(message.get("section", "?")),
                     f"kept: in {message.get('section')} as {message.get('role')}",
                     int(message.get("tokens", 0)))
        item = message.get("item")
        cut = fates.pop(str(item), None) if item else None
        if item:
            items[str(item)] = key
        # An item cut to fit (truncated, compacted) is one row: its decision's fate, under the
        # key of the message it became.
        fates.setdefault(key, _Fate(kept.source, cut.fate, kept.tokens) if cut else kept)
    return _Build(fates, items, ranges)


def _joined(own: _Build, other: _Build) -> dict[str, _Fate]:
    """``own``'s fates, with what it left out named by the key the other build shows it under.

    An item one build dropped and the other kept is one item: the dropped one's decision is
    known by the item's key (``history.m4``), the kept one by its rendered message. A message
    the other build shows from a run this build never read gets that run's fate. An item both
    builds rendered, each its own way (cut in one, whole in the other), is one item too, when
    neither rendering appears in the other build. A run whose every message the other build
    read is then told item by item, and its own row goes.
    """
    fates = dict(own.fates)
    expanded: Counter[str] = Counter()
    for item, key in other.items.items():
        if key in fates:
            continue
        if item in own.items and own.items[item] not in other.fates:
            fates[key] = fates.pop(own.items[item])
        elif item in fates and item not in other.fates:
            fates[key] = fates.pop(item)
        elif item not in own.items:
            _take_run(own, item, key, fates, expanded)
    for key in other.fates:
        if key not in fates and key not in own.items:  # an item the other read and dropped
            _take_run(own, key, key, fates, expanded)
    for run, _, first, last, _ in own.runs:
        if expanded[run] == last - first + 1 and run not in other.fates:
            del fates[run]
    return fates


def _take_run(build: _Build, item: str, key: str, fates: dict[str, _Fate],
              expanded: Counter[str]) -> None:
    """``key``'s fate in ``build``: the run that covers ``item``, if one does."""
    position = _ITEM_POSITION.fullmatch(item)
    if position is None:
        return
    source, index = position.group(1), int(position.group(2))
    for run, name, first, last, fate in build.runs:
        if name == source and first <= index <= last:
            fates[key] = fate
            expanded[run] += 1
            return


def _rank(action: str) -> int:
    return _SEVERITY.index(action) if action in _SEVERITY else len(_SEVERITY)


def _in_context(fate: _Fate | None) -> bool:
    return fate is not None and fate.fate.split(":")[0] in (
        "kept", "truncated", "compacted", "placeholder", "hoisted")


def _item_changes(a: Snapshot, b: Snapshot, hasher: Hasher) -> list[ItemChange]:
    # Only a raw snapshot facing a redacted one writes its ids as hashes, to match the other's.
    build_a = _fates(a, hasher, as_redacted=b.redacted and not a.redacted)
    build_b = _fates(b, hasher, as_redacted=a.redacted and not b.redacted)
    before, after = _joined(build_a, build_b), _joined(build_b, build_a)
    changes = []
    for key in [*before, *(k for k in after if k not in before)]:
        old, new = before.get(key), after.get(key)
        if old is not None and new is not None and old.fate == new.fate and (
                old.tokens == new.tokens):
            continue
        if _in_context(new) and not _in_context(old):
            change = "added"
        elif _in_context(old) and not _in_context(new):
            change = "removed"
        else:
            change = "changed"
        source = (new or old).source  # type: ignore[union-attr]
        changes.append(ItemChange(
            source=source, key=key, change=change, before=old.fate if old else None,
            after=new.fate if new else None,
            tokens_before=old.tokens if _in_context(old) else 0,  # type: ignore[union-attr]
            tokens_after=new.tokens if _in_context(new) else 0))  # type: ignore[union-attr]
    return changes


def _source_deltas(a: Snapshot, b: Snapshot) -> list[SourceDelta]:
    rows_a = {str(r["source"]): r for r in a.sources}
    rows_b = {str(r["source"]): r for r in b.sources}
    names = [*rows_a, *(n for n in rows_b if n not in rows_a)]
    empty: Mapping[str, Any] = {"tokens": 0, "budget": 0}
    return [SourceDelta(source=n, tokens_a=int(rows_a.get(n, empty)["tokens"]),
                        tokens_b=int(rows_b.get(n, empty)["tokens"]),
                        budget_a=int(rows_a.get(n, empty)["budget"]),
                        budget_b=int(rows_b.get(n, empty)["budget"])) for n in names]


def first_divergence(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]],
                     hasher: Hasher = PLAIN) -> int | None:
    """Index of the first message that renders otherwise (``content_hash``; None: none does)."""
    for index, (left, right) in enumerate(zip(a, b, strict=False)):
        if content_hash(left, hasher) != content_hash(right, hasher):
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def tools_differ(a: Snapshot, b: Snapshot) -> bool:
    """Whether the two offer other tool schemas, or in another order (unknown counts as same)."""
    if a.tools is None or b.tools is None:  # a record made before snapshots kept them
        return False
    return [(t["name"], t["sha256"]) for t in a.tools] != [
        (t["name"], t["sha256"]) for t in b.tools]


def divergence_text(diff: SnapshotDiff) -> str:
    """Where the two requests part, in words, for the terminal and the HTML views."""
    if not diff.hashes_comparable:
        return ("the two hash texts and ids with different keys (another deployment's secret, "
                "or a record from before keyed hashing): equal parts cannot be recognised")
    if diff.first_divergence is None:
        return "identical renderings"
    if diff.tools_changed:
        return ("the tool schemas differ, so the requests part before message #0 (tools come "
                "first in every provider's prompt)")
    return f"renderings diverge at message #{diff.first_divergence}"


def counting_note(diff: SnapshotDiff) -> str | None:
    """Why token counts differ where nothing else does: the builds counted with two tokenizers."""
    first, second = diff.tokenizers
    if first == second:
        return None
    return (f"A counted with {first}, B with {second}: their token counts are in different "
            "units, so items kept in both may differ in size alone")


def diff_snapshots(a: Snapshot, b: Snapshot, *,
                   fence_secret: str | bytes | None = None) -> SnapshotDiff:
    """Items and tool schemas added / removed / cut, token deltas, where the prefix ends.

    ``fence_secret`` (default ``CONTEXTWRIGHT_FENCE_SECRET``) is read only to compare an
    unredacted snapshot with a redacted one (``comparison_hasher``).
    """
    plans = (a.plan, b.plan)
    if a.plan == b.plan and a.plan_hash != b.plan_hash:
        plans = (f"{a.plan}@{a.plan_hash}", f"{b.plan}@{b.plan_hash}")
    tools_changed = tools_differ(a, b)
    hasher = comparison_hasher(a, b, fence_secret)
    hashed = hasher or PLAIN
    return SnapshotDiff(
        a=a.id, b=b.id, plans=plans, total_tokens=(a.total_tokens, b.total_tokens),
        items=tuple(_item_changes(a, b, hashed)), sources=tuple(_source_deltas(a, b)),
        first_divergence=0 if tools_changed else first_divergence(
            a.messages, b.messages, hashed),
        messages=(len(a.messages), len(b.messages)), tools_changed=tools_changed,
        warnings_only_a=tuple(w for w in a.warnings if w not in b.warnings),
        warnings_only_b=tuple(w for w in b.warnings if w not in a.warnings),
        hashes_comparable=hasher is not None, tokenizers=(a.tokenizer, b.tokenizer))
