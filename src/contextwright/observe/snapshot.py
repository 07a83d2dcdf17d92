"""``Snapshot``: the record of one build, as plain JSON-ready data, and how one is made.

A snapshot holds what a person needs to see what the model saw and why: the plan (name, hash and
its specs), the rendered messages, every source's budget, grant and use, every decision with its
reason, the mode and route, the cache-prefix result when the build has one, the build time, the
tokenizer and the library version. With redaction on (the default) no content is kept: each text
becomes a keyed hash and its size, the request becomes counts, and a snapshot cannot be replayed.
Identifiers the caller chose, which may name a person (a user id is often an email), are kept as
``hmac-sha256:<hex>`` of their text: the session's user and session ids, message and tool-call
ids, a speaker's name, and a document's id or source. Names the application defines (tools,
sources, plans, modes) stay readable, since they say what a build did and name no one.

The hashes are HMAC-SHA256 under a key derived from the deployment's secret (``snapshot_key``),
so whoever holds the snapshots but not the secret cannot confirm a guessed id or a short text
("yes", an email) by hashing it. Without a secret the built-in key is used, which anyone can
read in the source: the snapshot says so (``Snapshot.hashing``). Records written before keyed
hashing hold plain SHA-256 (``sha256:<hex>`` ids, ``{"sha256": ...}`` texts); ``Hasher`` and
``identifier_forms`` let readers match both.

``capture`` runs on the recorder's writer thread, never on the request path; it reads only
immutable build results and the shallow copy of the request taken when the build ended.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

from contextwright.core.accounting import (
    call_tokens,
    image_frame_tokens,
    schema_tokens,
    thinking_block_tokens,
    thinking_tokens,
)
from contextwright.core.caches import BoundedCache, register_cache, text_bytes
from contextwright.core.covering import covering
from contextwright.core.fence import (
    DEFAULT_FENCE_KEY,
    FENCE_SECRET_VARIABLE,
    deployment_fence_key,
)
from contextwright.core.final import FinalContext
from contextwright.core.images import ImagePart
from contextwright.core.items import Message
from contextwright.core.plan import BuildPlan, thawed
from contextwright.core.report import BuildReport, Decision, SourceReport
from contextwright.core.request import Document, Request
from contextwright.errors import CorruptRecordError
from contextwright.observe.snapshot_fields import check_snapshot_fields
from contextwright.sources.conversation import RECALL_PREFIX

Status = Literal["ok", "budget_error"]
FRAMING_NOTE = ("what the build adds around the sources' items: data note, section labels, "
                "repeated question, message framing, reply primer")
"""What the framing row of the per-source table holds (``Snapshot.framing_tokens``)."""
SCHEMA_VERSION = 2
"""Version of the snapshot layout written now: 2 keys the hashes of a redacted snapshot
(``hashing``); version 1 records (plain SHA-256) are still read."""
READABLE_VERSIONS = frozenset((1, SCHEMA_VERSION))
"""Layouts ``Snapshot.from_dict`` reads; a record of another version is refused."""
OTHER_LAYOUT = "a snapshot record of a layout version this library does not read"
"""What ``Snapshot.from_dict`` says of a record of another layout (a newer version's): a
snapshot all the same, which a sink shared with that version keeps."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """One build, as recorded. Nested parts are plain JSON data (dicts, lists, strings)."""

    id: str
    """Time-ordered unique id (hex milliseconds, then random hex)."""
    created_at: float
    """Unix time when the build ended."""
    status: Status
    """``ok``, or ``budget_error`` when the parts that may not be cut did not fit."""
    plan: str
    """Plan name."""
    plan_hash: str
    """SHA-256 (first 16 hex digits) of the plan's canonical JSON: equal hashes, equal plans."""
    tokenizer: str
    """Tokenizer the build counted with."""
    exact_tokens: bool
    """False when counts are estimates."""
    library_version: str
    """contextwright's version."""
    window: int
    """The plan's model window."""
    available: int
    """Tokens the context could use."""
    total_tokens: int
    """Tokens the context used (for a budget error: what the parts that may not be cut need)."""
    build_ms: float
    """Wall time of the build, in milliseconds."""
    redacted: bool
    """True when texts are kept as hashes and sizes only."""
    sources: tuple[Mapping[str, Any], ...]
    """Per-source rows: the report's row plus the plan's ``cuttable`` and ``weight``."""
    decisions: tuple[Mapping[str, Any], ...]
    """Every decision of the report, in order."""
    messages: tuple[Mapping[str, Any], ...]
    """The rendered messages: role, section, label, tokens (of the content, tool calls and
    images; not the framing every message has; for a text target, the message's block of the
    prompt, so they add up to ``total_tokens``), content (or its hash), ``recalled`` for an
    older turn brought back by recall, and ``item``: the key of the item it renders, as the
    decisions name it (``history.m4``), when the build names it."""
    request: Mapping[str, Any]
    """The request as ``Request.from_dict`` reads it, or (redacted) its hashes and counts."""
    tools: tuple[Mapping[str, Any], ...] | None = None
    """The tool schemas the request offers, in its order: ``name``, ``tokens`` and the
    ``sha256`` of the schema as counted. Providers put them before every message, so they open
    the prompt-cache prefix. None in a record made before snapshots kept them."""
    plan_spec: Mapping[str, Any]
    """The plan itself, as JSON (replay and diff show it)."""
    warnings: tuple[str, ...] = ()
    """The report's warnings."""
    mode: str | None = None
    """The mode a ``ContextManager`` built in."""
    route: Mapping[str, Any] | None = None
    """The router's decision (mode, basis, trigger, confidence), when one was made."""
    switch: Mapping[str, Any] | None = None
    """The mode hand-off this build followed, if any."""
    session: Mapping[str, str] | None = None
    """``user_id`` and ``session_id`` of a manager's build (redacted: ``Hasher.identifier``)."""
    hashing: Mapping[str, Any] | None = None
    """How a redacted snapshot hashed the caller's texts and ids: ``scheme``
    (``hmac-sha256``), ``key`` (``deployment``: derived from the deployment's secret;
    ``default``: the built-in key, which anyone can read in the source, so the hashes are no
    more private than plain SHA-256) and ``key_id`` (which key, without revealing it). None for
    an unredacted snapshot, and for a redacted record written before keyed hashing (plain
    SHA-256)."""
    cache: Mapping[str, Any] | None = None
    """The cache-prefix result of the build, when the build reports one."""
    target: Literal["chat", "text"] | None = None
    """The rendering the build was counted for (replay builds the same). None for a failed
    build, and in a record made before snapshots kept it (replay then counts for chat)."""
    image_rule: str | None = None
    """The name of the rule the build counted images by: the model's the builder was given, or
    the default. None for a failed build, and in a record made before snapshots kept it."""
    error: str | None = None
    """The error message of a failed build."""
    labels: Mapping[str, Any] = field(default_factory=dict)
    """Caller-given labels (tenant, scenario...)."""

    @property
    def framing_tokens(self) -> int | None:
        """Tokens of the total in no source's row (``BuildReport.framing_tokens``).

        None for a failed build, whose total is what its never-cut parts need.
        """
        if self.status != "ok":
            return None
        return self.total_tokens - sum(int(row["tokens"]) for row in self.sources)

    @property
    def window_share(self) -> float:
        """``total_tokens / window``."""
        return self.total_tokens / self.window if self.window else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form (with the layout's ``schema`` version)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["schema"] = SCHEMA_VERSION
        return _plain(data)  # type: ignore[no-any-return]

    def to_json(self) -> str:
        """Compact JSON, ASCII only (safe for any text column)."""
        # The nested parts are already plain (dicts, tuples, strings): no copy before dumping.
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["schema"] = SCHEMA_VERSION
        return json.dumps(data, ensure_ascii=True, allow_nan=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: object) -> Snapshot:
        """Read a snapshot written by ``to_dict``; ``CorruptRecordError`` when it is not one.

        Every field is checked for the type readers rely on, so a damaged record fails here,
        naming the field, rather than in whatever reads it next.
        """
        if isinstance(data, Mapping) and type(data.get("schema")) is int and not _readable(
                data["schema"]):
            raise CorruptRecordError(f"{OTHER_LAYOUT} ({data['schema']})")
        if not isinstance(data, Mapping) or not _readable(data.get("schema")):
            raise CorruptRecordError("not a snapshot record of a version this library reads")
        check_snapshot_fields(data)
        names = {f.name for f in fields(cls)}
        try:
            values = {name: data[name] for name in names if name in data}
            for name in ("sources", "decisions", "messages", "warnings"):
                values[name] = tuple(values.get(name, ()))
            if values.get("tools") is not None:
                values["tools"] = tuple(values["tools"])
            return cls(**values)
        except TypeError:
            raise CorruptRecordError("a snapshot record lacks a field") from None

    @classmethod
    def from_json(cls, text: str | bytes) -> Snapshot:
        """Read ``to_json``'s output."""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            raise CorruptRecordError("a snapshot record is not JSON") from None
        return cls.from_dict(data)


def _readable(version: object) -> bool:
    return type(version) is int and version in READABLE_VERSIONS


def _plain(value: Any) -> Any:
    """Tuples and mappings as lists and dicts, for JSON."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildRecord:
    """What the request path hands the recorder: references only, nothing serialised yet."""

    request: Request
    """The request, with its lists copied (shallowly) when the build ended."""
    plan: BuildPlan
    """The plan given to the build (the builder's effective plan); the build may add sources
    to it for request parts it lacks, and the snapshot records the plan it used."""
    context: FinalContext | None
    """The result, or None when the build raised."""
    report: BuildReport | None
    """The report (also a ``BudgetError``'s)."""
    error: Exception | None
    """The error the build raised, if any."""
    started: float
    """``time.time()`` when the build began."""
    build_ns: int
    """Build time in nanoseconds (``perf_counter_ns``)."""
    tokenizer: str
    """Tokenizer name."""
    history_length: int
    """Messages in the request's history when the build ended."""
    labels: Mapping[str, Any] = field(default_factory=dict)
    """Mode, route, switch, session and caller labels."""


SCHEME = "hmac-sha256"
"""How a redacted snapshot hashes the caller's texts and ids (``Snapshot.hashing``)."""
IDENTIFIER_PREFIX = SCHEME + ":"
"""What starts an identifier a redacted snapshot keeps as its keyed hash."""
PLAIN_IDENTIFIER_PREFIX = "sha256:"
"""What starts an identifier a record written before keyed hashing keeps (plain SHA-256)."""
_SNAPSHOT_KEY_LABEL = b"contextwright snapshot hashes v1"
"""Derives the snapshot key from the fence key: the two never serve as each other."""
_KEY_ID_LABEL = b"contextwright snapshot key id"


def snapshot_key_of(fence_key: bytes) -> bytes:
    """The key snapshot hashes are made with, derived from the deployment's fence key."""
    return hmac.digest(fence_key, _SNAPSHOT_KEY_LABEL, "sha256")


def snapshot_key(fence_secret: str | bytes | None = None) -> bytes:
    """The snapshot key of ``fence_secret``, or of ``CONTEXTWRIGHT_FENCE_SECRET`` when None.

    The secret is read as ``deployment_fence_key`` reads it (a blank one is a
    ``ConfigurationError``); with none set this is ``DEFAULT_SNAPSHOT_KEY``.
    """
    return snapshot_key_of(deployment_fence_key(fence_secret))


DEFAULT_SNAPSHOT_KEY = snapshot_key_of(DEFAULT_FENCE_KEY)
"""The key of a deployment without a secret: in the source, so it hides nothing."""


@dataclass(frozen=True, slots=True)
class Hasher:
    """How a redacted snapshot hashes texts and identifiers.

    ``key`` None is plain SHA-256, the form of records written before keyed hashing: readers
    use it to match such records (a recorder never writes it).
    """

    key: bytes | None
    """The snapshot key (``snapshot_key``), or None for plain SHA-256."""
    key_id: str = field(init=False, repr=False, compare=False)
    """Names the key without revealing it (empty for plain SHA-256)."""

    def __post_init__(self) -> None:
        """Derive the key's id once."""
        key_id = "" if self.key is None else hmac.digest(
            self.key, _KEY_ID_LABEL, "sha256").hex()[:16]
        object.__setattr__(self, "key_id", key_id)

    def digest(self, text: str) -> str:
        """``text``'s hash in hex."""
        data = text.encode("utf-8", "surrogatepass")
        if self.key is None:
            return hashlib.sha256(data).hexdigest()
        return hmac.digest(self.key, data, "sha256").hex()

    def text(self, text: str) -> dict[str, Any]:
        """What a redacted snapshot keeps of a text: its hash and its size."""
        field_name = "sha256" if self.key is None else "hmac"
        return {field_name: self.digest(text), "chars": len(text)}

    def identifier(self, value: str) -> str:
        """What a redacted snapshot keeps of an identifier: its scheme's prefix and hash."""
        prefix = PLAIN_IDENTIFIER_PREFIX if self.key is None else IDENTIFIER_PREFIX
        return prefix + self.digest(value)

    def description(self) -> dict[str, str] | None:
        """``Snapshot.hashing`` of a snapshot this hasher redacted (None: plain SHA-256)."""
        if self.key is None:
            return None
        own = "default" if self.key == DEFAULT_SNAPSHOT_KEY else "deployment"
        return {"scheme": SCHEME, "key": own, "key_id": self.key_id}


PLAIN = Hasher(None)
"""Plain SHA-256: how records written before keyed hashing kept texts and ids."""


def deployment_hasher(fence_secret: str | bytes | None = None) -> Hasher:
    """The hasher of the deployment's secret (``snapshot_key``)."""
    return Hasher(snapshot_key(fence_secret))


def identifier_digest(value: str, fence_secret: str | bytes | None = None) -> str:
    """``value`` as a redacted snapshot of this deployment keeps it (``Hasher.identifier``)."""
    return deployment_hasher(fence_secret).identifier(value)


def text_digest(text: str, fence_secret: str | bytes | None = None) -> dict[str, Any]:
    """``text`` as a redacted snapshot of this deployment keeps it (``Hasher.text``)."""
    return deployment_hasher(fence_secret).text(text)


def is_hashed_identifier(value: str) -> bool:
    """Whether ``value`` is an identifier as a redacted snapshot keeps it, in either form."""
    return value.startswith((IDENTIFIER_PREFIX, PLAIN_IDENTIFIER_PREFIX))


def text_hash(value: Mapping[str, Any]) -> str:
    """The hash of a redacted text (``Hasher.text``), keyed or plain."""
    return str(value.get("hmac", value.get("sha256", "")))


def identifier_forms(value: str, key: bytes) -> frozenset[str]:
    """Every form a snapshot may keep the identifier ``value`` in.

    In clear (unredacted), hashed with ``key`` or the built-in key, or as plain SHA-256
    (records written before keyed hashing).
    """
    return frozenset((value, Hasher(key).identifier(value),
                      Hasher(DEFAULT_SNAPSHOT_KEY).identifier(value), PLAIN.identifier(value)))


def recorded_hasher(snapshot: Snapshot,
                    fence_secret: str | bytes | None = None) -> Hasher | None:
    """The hasher ``snapshot``'s hashes were made with; None when this process lacks its key.

    Plain SHA-256 for a record from before keyed hashing, the built-in key's, or
    ``fence_secret``'s (default ``CONTEXTWRIGHT_FENCE_SECRET``, read only when the others do
    not match). Another deployment's key gives None.
    """
    if snapshot.hashing is None:
        return PLAIN
    wanted = snapshot.hashing.get("key_id")
    default = Hasher(DEFAULT_SNAPSHOT_KEY)
    if default.key_id == wanted:
        return default
    own = deployment_hasher(fence_secret)
    return own if own.key_id == wanted else None


def shown_hash(value: Mapping[str, Any]) -> str:
    """A redacted text for people: its scheme, the start of its hash and its size."""
    scheme = "hmac" if "hmac" in value else "sha256"
    return f"{scheme} {text_hash(value)[:16]}… ({value.get('chars', 0)} chars)"


def image_line(image: Mapping[str, Any]) -> str:
    """A recorded image for people, where it sits in its message: what it is, never its data.

    ``[image image/png 1024x1024, detail high, 48,213 bytes, digest 3f2a…]``
    """
    size = (f" {image['width']}x{image['height']}"
            if image.get("width") and image.get("height") else "")
    weight = f", {image['bytes']:,} bytes" if isinstance(image.get("bytes"), int) else ""
    return (f"[image {image.get('media_type') or 'url'}{size}, detail "
            f"{image.get('detail', 'auto')}{weight}, digest {image.get('digest', '?')}]")


def hashing_note(snapshot: Snapshot) -> str:
    """How a redacted snapshot's hashes were made, and whether they are private, in words."""
    hashing = snapshot.hashing
    if hashing is None:
        return ("plain SHA-256 (recorded before keyed hashing): a guessed id or text can be "
                "confirmed")
    if hashing.get("key") == "default":
        return (f"{hashing.get('scheme')} with the built-in key, which is public: a guessed id "
                f"or text can be confirmed (set {FENCE_SECRET_VARIABLE} when recording)")
    return (f"{hashing.get('scheme')} with the deployment's key {hashing.get('key_id')} "
            "(derived from its secret)")


def hashing_id(snapshot: Snapshot) -> str | None:
    """Which hashes a snapshot holds: None when unredacted, else its key's id.

    ``sha256`` for plain SHA-256. Two redacted snapshots compare hash for hash only when these
    are equal.
    """
    if not snapshot.redacted:
        return None
    return str(snapshot.hashing.get("key_id")) if snapshot.hashing is not None else "sha256"


def _identifier(value: str, hasher: Hasher | None) -> str:
    return hasher.identifier(value) if hasher is not None else value


def plan_to_dict(plan: BuildPlan) -> dict[str, Any]:
    """The plan as JSON data (options thawed)."""
    data = asdict(plan)
    data["sources"] = [
        {**{k: v for k, v in spec.items() if k != "options"},
         "options": thawed(s.options)}
        for spec, s in zip(data["sources"], plan.sources, strict=True)]
    return _plain(data)  # type: ignore[no-any-return]


def plan_hash(plan_data: Mapping[str, Any]) -> str:
    """First 16 hex digits of the SHA-256 of the plan's canonical JSON."""
    text = json.dumps(plan_data, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


def new_snapshot_id(now: float) -> str:
    """Sorts by time: 12 hex digits of milliseconds, then 8 random ones."""
    return f"{int(now * 1000):012x}{os.urandom(4).hex()}"


_PLANS: dict[int, tuple[BuildPlan, dict[str, Any], str]] = {}
"""Plans seen before, by object, with their JSON and hash (a deployment has a handful)."""


def _plan_data(plan: BuildPlan) -> tuple[dict[str, Any], str]:
    known = _PLANS.get(id(plan))
    if known is not None and known[0] is plan:
        return known[1], known[2]
    data = plan_to_dict(plan)
    digest = plan_hash(data)
    if len(_PLANS) >= 1024:
        _PLANS.clear()
    _PLANS[id(plan)] = (plan, data, digest)
    # The hash made here, not read back: another recorder's writer thread may clear the cache
    # between the two.
    return data, digest


def built_plan(record: BuildRecord) -> BuildPlan:
    """The plan the build used: the given one with the sources it added (``simple_qa+history``).

    A finished build holds it (``FinalContext.plan``). For a failed one the missing sources are
    added again as a build adds them, from which request parts were given, and that plan is
    kept when its name is the one the report gives.
    """
    if record.context is not None and isinstance(record.context.plan, BuildPlan):
        return record.context.plan
    report = record.report
    if report is None or report.plan == record.plan.name:
        return record.plan
    request = record.request
    if record.history_length and not request.history:  # a redacted record has its count only
        request = replace(request, history=({"role": "user", "content": ""},))
    covered = covering(record.plan, request)
    return covered if covered.name == report.plan else record.plan


def capture(record: BuildRecord, *, redact: bool, library_version: str,
            hasher: Hasher | None = None) -> Snapshot:
    """The snapshot of one finished (or failed) build, with the plan it used.

    A redacted one hashes with ``hasher``, by default the deployment's (``deployment_hasher``:
    the secret is read on each call, so a recorder makes its hasher once and passes it).
    """
    hashed_with = (hasher or deployment_hasher()) if redact else None
    plan = built_plan(record)
    plan_data, hashed = _plan_data(plan)
    report = record.report
    ctx = record.context
    specs = {spec.source: spec for spec in plan.sources}
    sources = tuple(
        {**_fields(row, _SOURCE_FIELDS),
         "error": _error(row.error, hashed_with),
         "cuttable": specs[row.source].cuttable if row.source in specs else True,
         "weight": specs[row.source].weight if row.source in specs else 0.0}
        for row in (report.sources if report else ()))
    labels = dict(record.labels)
    now = record.started + record.build_ns / 1e9
    return Snapshot(
        id=new_snapshot_id(now), created_at=now,
        status="ok" if record.error is None else "budget_error",
        plan=plan.name, plan_hash=hashed, tokenizer=record.tokenizer,
        exact_tokens=report.exact_tokens if report else True, library_version=library_version,
        window=plan.budget.window, available=plan.budget.available,
        total_tokens=ctx.total_tokens if ctx else (report.total_tokens if report else 0),
        build_ms=record.build_ns / 1e6, redacted=redact, sources=sources,
        decisions=tuple(_decision(d, hashed_with) for d in (report.decisions if report else ())),
        messages=_messages(ctx, hashed_with) if ctx else (), tools=_tools(ctx),
        request=(redacted_request(record.request, record.history_length, hashed_with)
                 if hashed_with is not None else request_to_dict(record.request)),
        plan_spec=plan_data,
        warnings=tuple(_warning(w, hashed_with) for w in report.warnings) if report else (),
        mode=labels.pop("mode", None), route=_jsonable(labels.pop("route", None)),
        switch=_jsonable(labels.pop("switch", None)),
        session=_session(labels.pop("session", None), hashed_with),
        hashing=hashed_with.description() if hashed_with is not None else None,
        cache=_cache(ctx, report), target=ctx.target if ctx else None,
        image_rule=ctx.image_rule.name if ctx else None,
        error=str(record.error) if record.error else None,
        labels=_plain(labels),
    )


_ERROR_KIND = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*(?=: )")
"""The exception's kind that opens a source failure's note (``RuntimeError: <its text>``)."""
_FAILURE_WARNING = re.compile(
    r"(source \S+ failed|the digest of source \S+ failed and was left out): (.*)", re.DOTALL)
"""The warnings that carry a source's failure note (``core.reporting.make_report``)."""


def redacted_error(text: str, hasher: Hasher) -> str:
    """A source's failure note as a redacted snapshot keeps it: its kind, its text hashed.

    A source's exception text may echo the request (a client error quoting the URL it fetched,
    with the user's question in its query), so it is kept as hash and size like any other
    text of the caller's; the exception's kind (``RuntimeError``) is the code's, and stays.
    """
    kind = _ERROR_KIND.match(text)
    rest = text[kind.end() + 2:] if kind else text
    hashed = hasher.text(rest)
    field_name = "hmac" if "hmac" in hashed else "sha256"
    shown = f"(redacted: {field_name} {hashed[field_name]}, {hashed['chars']} chars)"
    return f"{kind.group()}: {shown}" if kind else shown


def _error(text: str | None, hasher: Hasher | None) -> str | None:
    return redacted_error(text, hasher) if text is not None and hasher is not None else text


def _warning(text: str, hasher: Hasher | None) -> str:
    """A warning as recorded: a source's failure note in it redacted as ``redacted_error``.

    The other warnings are the library's own sentences about keys, sources and counts, as the
    decisions' reasons are, and stay readable.
    """
    failure = _FAILURE_WARNING.fullmatch(text) if hasher is not None else None
    if failure is None or hasher is None:
        return text
    return f"{failure.group(1)}: {redacted_error(failure.group(2), hasher)}"


def _tools(ctx: FinalContext | None) -> tuple[dict[str, Any], ...]:
    """Each offered tool schema: its name (the application's), tokens and hash, never its text.

    The hash tells a changed description apart from the same one, redacted or not; the schema
    itself is in an unredacted snapshot's request. It is plain SHA-256, whatever the snapshot's
    key: a schema is the application's text, not a user's.
    """
    if ctx is None:
        return ()
    return tuple(
        {"name": _tool_name(schema), "tokens": schema_tokens(text, ctx.tokenizer),
         "sha256": PLAIN.digest(text)}
        for schema, text in zip(ctx.tool_schemas, ctx.schema_jsons, strict=True))


def _tool_name(schema: Mapping[str, Any]) -> str:
    function = schema.get("function")
    return str(function.get("name") if isinstance(function, Mapping) else schema.get("name"))


def _jsonable(value: Any) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return _plain(value)  # type: ignore[no-any-return]
    return _plain(asdict(value))  # type: ignore[no-any-return]


def _session(value: Any, hasher: Hasher | None) -> Mapping[str, str] | None:
    if value is None:
        return None
    return {"user_id": _identifier(str(value.user_id), hasher),
            "session_id": _identifier(str(value.session_id), hasher)}


def _cache(ctx: FinalContext | None, report: BuildReport | None) -> Mapping[str, Any] | None:
    """The cache-prefix result of a build that keeps a stable prefix (``report.cache``)."""
    if report is None or report.cache is None:
        return None
    return report.cache.to_dict()


_SOURCE_FIELDS = tuple(SourceReport.__dataclass_fields__)
_DECISION_FIELDS = tuple(name for name in Decision.__dataclass_fields__ if name != "detail")


def _fields(value: object, names: tuple[str, ...]) -> dict[str, Any]:
    """A flat dataclass as a dict (``asdict`` deep-copies, which costs more than the build)."""
    return {name: getattr(value, name) for name in names}


def _decision(decision: Decision, hasher: Hasher | None) -> dict[str, Any]:
    data = _fields(decision, _DECISION_FIELDS)
    detail = decision.detail
    if detail is not None:
        data["detail"] = hasher.text(detail) if hasher is not None else detail
    return data


def _messages(ctx: FinalContext, hasher: Hasher | None) -> tuple[dict[str, Any], ...]:
    labels = ctx.labels or (None,) * len(ctx.messages)
    documents = ctx.documents or (False,) * len(ctx.messages)
    items = _item_keys(ctx) or (None,) * len(ctx.messages)
    # A text prompt has no chat framing or call syntax: each message costs its block of the
    # prompt (``to_text``), and the blocks add up to the build's total.
    blocks: tuple[int | None, ...] = (
        ctx.text_counts()[1] if ctx.target == "text" else (None,) * len(ctx.messages))
    tokenizer = ctx.tokenizer.name
    return tuple(
        _message(message, section, label, document, item, block, ctx, hasher, tokenizer)
        for message, section, label, document, item, block in zip(
            ctx.messages, ctx.sections, labels, documents, items, blocks, strict=True))


def _item_keys(ctx: FinalContext) -> tuple[str | None, ...]:
    """The key of the item each message renders (``history.m4``), when the build names them.

    A diff joins by it what one build dropped (its decision names the item) with what the
    other kept (a rendered message). A ``FinalContext`` without ``keys`` names none.
    """
    keys = getattr(ctx, "keys", ())
    return tuple(keys) if len(keys) == len(ctx.messages) else ()


_MESSAGE_CACHE_SIZE = 50_000
_RENDERED: BoundedCache[
    tuple[int, str, str | None, bool, str | None, int | None, str | None, str, str | None],
    tuple[Message, dict[str, Any]]] = BoundedCache(
    "observe.snapshot.rendered", max_entries=_MESSAGE_CACHE_SIZE, share=0.04,
    size=lambda _, entry: text_bytes(entry[0].content) + 800)
"""Recorded form of messages seen before, by object: the builder hands the same ``Message``
objects to every build of a session, so consecutive snapshots share nearly all their messages
and each is hashed once (per key: recorders of two secrets never share an entry, nor builders
that count a message's images by different rules). The entry holds the message itself, so its id
cannot be reused."""


def _message(message: Message, section: str, label: str | None, document: bool,
             item: str | None, block: int | None, ctx: FinalContext, hasher: Hasher | None,
             tokenizer: str) -> dict[str, Any]:
    hashed_with = hasher.key_id if hasher is not None else None
    # A message's tokens count its images by the build's image rule: builders for different
    # models may record the same message object.
    image_rule = ctx.image_rule.name if message.images else None
    key = (id(message), section, label, document, item, block, hashed_with, tokenizer,
           image_rule)
    known = _RENDERED.get(key) or _RENDERED.revive(key)
    if known is not None and known[0] is message:
        return known[1]
    data = _message_data(message, section, label, document, ctx, hasher)
    if block is not None:
        data["tokens"] = block
    if item is not None:  # the library's key, as the decisions name it (kept readable)
        data["item"] = item
    _RENDERED.put(key, (message, data))
    return data


def _message_data(message: Message, section: str, label: str | None, document: bool,
                  ctx: FinalContext, hasher: Hasher | None) -> dict[str, Any]:
    data: dict[str, Any] = {"role": message.role, "section": section,
                            "tokens": _own_tokens(message, ctx)}
    data["content"] = hasher.text(message.content) if hasher is not None else message.content
    # Ids as text: a caller's Message may carry its database's number, and a record must
    # read back (a number there made every read of the sink fail).
    optional = {"label": label, "id": _text_or_none(message.id), "name": message.name,
                "tool_call_id": _text_or_none(message.tool_call_id),
                "document": document or None}
    data.update({k: v for k, v in optional.items() if v is not None})
    if hasher is not None:
        data.update(_redacted_identifiers(data, section, hasher))
    if message.content.startswith(RECALL_PREFIX):
        # Only the history source writes this prefix: it escapes any content that starts so.
        data["recalled"] = True
    if message.tool_calls:
        data["tool_calls"] = [
            {"id": _identifier(call.id, hasher) if call.id else call.id, "name": call.name,
             "arguments": hasher.text(call.arguments) if hasher is not None
             else call.arguments}
            for call in message.tool_calls]
    if message.images:  # what each image is, never its data (a snapshot stays small)
        data["images"] = [_image_data(image, hasher) for image in message.images]
    if message.thinking:  # the reasoning sent back, and what it cost; never its signature
        data["thinking"] = [
            {"type": block.type, "tokens": thinking_block_tokens(block, ctx.tokenizer),
             "text": hasher.text(block.text) if hasher is not None else block.text,
             "signature_chars": len(block.signature)}
            for block in message.thinking]
    return data


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def _own_tokens(message: Message, ctx: FinalContext) -> int:
    """What a message costs beyond the framing every message has.

    Its text, its tool calls (an assistant's calls may be all it says), its images and the
    reasoning it sends back.
    """
    tokens = ctx.tokenizer.count(message.content)
    if message.tool_calls:
        tokens += call_tokens(message, ctx.tokenizer)
    if message.images:  # as the build counts them: the costliest rendering's
        tokens += image_frame_tokens(message, ctx.tokenizer, ctx.image_rule)
    if message.thinking:
        tokens += thinking_tokens(message, ctx.tokenizer)
    return tokens


def _redacted_identifiers(data: Mapping[str, Any], section: str,
                          hasher: Hasher) -> dict[str, str]:
    """The caller's identifiers of a recorded message, hashed.

    Ids and tool-call ids are the caller's (or its provider's) and may carry anything. A
    ``name`` names a speaker, except on a tool result, where it is the application's tool. A
    document's label is its source or id; other labels are the library's own (``tool <name>``,
    ``notes``, a section's name) and say what the part is.
    """
    hashed = {name: hasher.identifier(str(data[name]))
              for name in ("id", "tool_call_id") if name in data}
    if "name" in data and data["role"] != "tool":
        hashed["name"] = hasher.identifier(str(data["name"]))
    if "label" in data and data.get("document") and data["label"] != section:
        hashed["label"] = hasher.identifier(str(data["label"]))
    return hashed


def _image_data(image: ImagePart, hasher: Hasher | None) -> dict[str, Any]:
    """What a snapshot keeps of an image: what it is and its digest, never its data.

    The digest is a plain hash of the image's source, which for a URL is the caller's text
    (``https://cdn.example/u/ada@example.com.png``): anyone could confirm a guessed URL by
    hashing it. A redacted snapshot keeps it as an identifier, keyed as the others are, and
    drops the URL.
    """
    digest = image.digest()
    data: dict[str, Any] = {"digest": digest if hasher is None else hasher.identifier(digest),
                            "media_type": image.media_type, "width": image.width,
                            "height": image.height, "detail": image.detail,
                            "bytes": image.size_bytes}
    if image.url is not None and hasher is None:
        data["url"] = image.url
    return data


def request_to_dict(request: Request) -> dict[str, Any]:
    """The request in the form ``Request.from_dict`` reads (what replay needs)."""
    data: dict[str, Any] = {"user_input": request.user_input}
    if request.system is not None:
        data["system"] = request.system
    for name in ("history", "turn", "tools", "examples", "notes"):
        value = getattr(request, name)
        if value:
            data[name] = [_request_item(item) for item in value]
    if request.documents:
        data["documents"] = [_document(doc) for doc in request.documents]
    if request.env:
        data["env"] = dict(request.env)
    if request.images:  # replay needs the images themselves
        data["images"] = [image.to_chat_part() for image in request.images]
    return _plain(data)  # type: ignore[no-any-return]


def _request_item(item: Any) -> Any:
    """One entry of a request's list as JSON: a ``Message`` object as the chat dict it reads as."""
    if isinstance(item, Message):
        return message_to_dict(item)
    return dict(item) if isinstance(item, Mapping) else item


def message_to_dict(message: Message) -> dict[str, Any]:
    """``message`` as the chat dict that ``Request.from_dict`` reads back into an equal one.

    OpenAI's chat form, with what that form leaves out kept beside it (the id, the timestamp,
    a tool result's name, ``thinking_blocks``), so a replay builds the same message.
    """
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.images:
        text = [{"type": "text", "text": message.content}] if message.content else []
        data["content"] = text + [image.to_chat_part() for image in message.images]
    if message.tool_calls:
        data["tool_calls"] = [
            {"id": call.id, "type": "function",
             "function": {"name": call.name, "arguments": call.arguments}}
            for call in message.tool_calls]
    optional = {"tool_call_id": message.tool_call_id, "name": message.name, "id": message.id,
                "timestamp": message.timestamp}
    data.update({k: v for k, v in optional.items() if v is not None})
    if message.thinking:
        data["thinking_blocks"] = [block.as_block() for block in message.thinking]
    return data


def _document(doc: Document) -> dict[str, Any]:
    return {k: v for k, v in asdict(doc).items() if v is not None}


def redacted_request(request: Request, history_length: int,
                     hasher: Hasher | None = None) -> dict[str, Any]:
    """Hashes and sizes of the request's texts, counts of its lists; no content.

    History is counted, not walked: a redacted snapshot of a 10,000-message session costs what
    one of a short session does. ``hasher`` defaults to the deployment's.
    """
    hasher = hasher or deployment_hasher()
    data: dict[str, Any] = {"redacted": True, "user_input": hasher.text(request.user_input),
                            "history": {"messages": history_length},
                            "turn": {"messages": len(request.turn)},
                            "tools": {"count": len(request.tools)},
                            "examples": {"count": len(request.examples)},
                            "notes": {"count": len(request.notes)},
                            "images": [_image_data(image, hasher) for image in request.images],
                            "env": {"keys": sorted(request.env)}}
    if request.system is not None:
        data["system"] = hasher.text(request.system)
    if request.documents:
        data["documents"] = [{"id": hasher.identifier(doc.id), **hasher.text(doc.text)}
                             for doc in request.documents]
    return data


def frozen_request(request: Request, *, with_history: bool) -> Request:
    """``request`` with its lists copied, so a caller appending to them later changes nothing.

    Copies references only; the messages themselves are the caller's and, as with the builder,
    must not be changed in place. ``with_history=False`` leaves the history out (a redacted
    snapshot keeps only its length, which the recorder notes apart).
    """
    return Request(
        user_input=request.user_input, system=request.system,
        history=tuple(request.history) if with_history else (),
        turn=tuple(request.turn), tools=tuple(request.tools),
        documents=tuple(request.documents), env=dict(request.env),
        examples=tuple(request.examples), notes=tuple(request.notes),
        images=tuple(request.images))


register_cache("observe.snapshot.plans", _PLANS)
register_cache("observe.snapshot.rendered", _RENDERED)
