"""The stable-prefix side of a build: offers of the previous layout, cuts in steps, the report.

``core.stable`` finds a previous layout again and decides whether it still fits; this module
runs those steps inside one build (``Stepping``, used by ``core.builder.build_context`` when a
cache policy is given): it offers each message source its layout, continues it or cuts the
source afresh leaving a step free (a pinned head kept), keeps tools once shown, and makes the
fingerprint and the cache report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from contextwright.core.assemble import Assembly
from contextwright.core.budget import Allocation
from contextwright.core.cache import (
    LOOKBACK_BLOCKS,
    CachePolicy,
    CacheReport,
    Fingerprint,
    breakpoint_ends,
    cache_line_change,
    compare,
    message_hash,
    plan_hash,
    tools_hash,
)
from contextwright.core.digest import add_digest, digest_decision, digest_share
from contextwright.core.gather import Costing, Gathered, Unit, gather_source
from contextwright.core.items import ContextItem, Message
from contextwright.core.normalise import normalise_again
from contextwright.core.plan import BuildPlan, FrozenOptions, thawed
from contextwright.core.providers import (
    anthropic_leaves_out,
    anthropic_role,
    anthropic_takes,
    image_segments,
    is_blank,
    shows_blank_user,
)
from contextwright.core.pruning import prune_source
from contextwright.core.report import Decision
from contextwright.core.reporting import BEFORE_PINNED_HEAD_END, OLDER_THAN_KEPT_RUN
from contextwright.core.request import Request
from contextwright.core.select import Selection, drop_decisions, has_tool_activity
from contextwright.core.source import ContextSource, traits_of
from contextwright.core.stable import (
    StableOffer,
    after_head,
    best_recalled,
    candidate_hash,
    decide,
    digest_request,
    digest_room_of,
    in_render_order,
    laid_out_list,
    layout_of,
    offer,
    pinned_head,
    preanchored,
    whole_rounds,
    without_keys,
)


def cache_points(sections: tuple[str, ...], tail: frozenset[str],
                 conversation: frozenset[str], transient_from: int | None = None,
                 heads: Sequence[int] = ()) -> tuple[int, ...]:
    """Where the stable parts end: a head's last message, history's last, the last before the tail.

    ``conversation``: the laid-out message sources placed before the user's input (history).
    ``transient_from``: the first message shown for this call only (recalled turns after the
    kept run); the stable part ends just before it, and nothing after it is cached.
    ``heads``: the last message of the head the next cut will keep (``Stepping.head_points``):
    Anthropic reads only a prefix an earlier request wrote at a breakpoint, so after a cut the
    cache reaches past the system prompt only if the requests before it marked the head's end.
    """
    if transient_from is not None:
        end = transient_from - 1
        return tuple(sorted({*(h for h in heads if 0 < h < end), *((end,) if end > 0 else ())}))
    points = [h for h in heads if h > 0]
    history = [i for i, section in enumerate(sections) if section in conversation]
    if history:
        points.append(history[-1])
    # A message rendered after the volatile part (the input after env or documents) ends a
    # prefix the next call never repeats: its breakpoint would only pay for a write.
    volatile = next((i for i, section in enumerate(sections) if section in tail), len(sections))
    stays = [i for i, section in enumerate(sections[:volatile]) if section not in tail and i > 0]
    if stays and stays[-1] not in points:
        points.append(stays[-1])
    return tuple(sorted(set(points)))


def anthropic_blocks(messages: Sequence[Message], documents: Sequence[bool]
                     ) -> tuple[int, ...]:
    """Content blocks each message takes in its Anthropic request (``core.providers.anthropic``).

    The system prompt is one block (none when blank, as it is not sent); the lead user turn
    the request opens with when its first message is the assistant's is counted with that
    message. Anthropic's cache lookback is counted in these blocks (``LOOKBACK_BLOCKS``).
    """
    counts: list[int] = []
    opened = False
    for index, message in enumerate(messages):
        document = index < len(documents) and documents[index]
        if index == 0 and message.role == "system":
            counts.append(0 if is_blank(message.content) else 1)
            continue
        if anthropic_leaves_out(message, document):
            counts.append(0)
            continue
        lead = not opened and anthropic_role(message, document) == "assistant"
        opened = True
        counts.append(_message_blocks(message, document) + int(lead))
    return tuple(counts)


def _message_blocks(message: Message, document: bool) -> int:
    """Blocks of one message the Anthropic rendering shows (it mirrors ``_anthropic_blocks``)."""
    if message.role == "tool" or document or shows_blank_user(message, document):
        return 1
    if message.images:
        return len(image_segments(message, anthropic_takes))
    return (len(message.thinking) + int(not is_blank(message.content))
            + len(message.tool_calls))


MIN_STEP_TOKENS = 200
"""A step smaller than this would not hold the next message: the cut then uses the whole grant."""


def leave_room(selection: Selection, tokens: int, pinned: int,
               spare: frozenset[str] = frozenset()) -> Selection:
    """Leave out the oldest plain units (keep order: last first) until ``tokens`` are free.

    Recalled turns (but those in ``spare``), the digest, the ``pinned`` head and the newest
    round stay: the room is taken from what was going to scroll out next anyway. A round
    without tool calls goes whole (a reply left without its question would answer the one
    before it); a round with calls gives up its oldest blocks first, as a fresh cut parts it.
    """
    freed = 0
    kept = list(selection.kept)

    def may_go(unit: Unit) -> bool:
        first = unit.candidates[0].item
        return not (unit.round in (None, 0) or "digest" in first.metadata or (
            "recalled" in first.metadata
            and not all(c.item.key in spare for c in unit.candidates)))

    index = len(kept) - 1
    while index >= pinned and freed < tokens:
        unit = kept[index]
        if not may_go(unit):
            index -= 1
            continue
        going = [index]
        same_round = [at for at in range(pinned, index)
                      if kept[at].round == unit.round and may_go(kept[at])]
        if not has_tool_activity([kept[at] for at in (*same_round, index)]):
            going += same_round
        for at in sorted(going, reverse=True):
            gone = kept.pop(at)
            freed += gone.tokens
            why = ("recalled below the best for this input; "
                   if "recalled" in gone.candidates[0].item.metadata else "")
            selection.decisions.extend(drop_decisions(
                gone, f"budget: {why}left out to leave room for the next calls (a stable "
                      "prefix)"))
        index -= len(going)  # every unit that went was at or before it
    selection.kept = kept
    return selection


def _in_shown_order(selection: Selection) -> list[ContextItem]:
    """The first item of each unit ``selection`` kept, in the order the build renders them."""
    items = [unit.candidates[0].item for unit in selection.kept]
    return items if selection.ordered else sorted(items, key=lambda item: item.order)


def keep_first(g: Gathered, source: ContextSource, request: Request, keys: Sequence[str],
               cap: int, costing: Costing, compacted: Sequence[str] = ()) -> None:
    """Offer what ``g`` kept last call first, so a tool (or document) once in stays in.

    A source that takes such an option (``SourceTraits.keep_option``: the tools source's
    ``keep``) is asked again with it, so its own selection (relevant only, ``max_tools``) keeps
    them too; it chooses afresh when keeping them would leave out one the input needs. Such a
    source is told the order they were shown in (``keys``) and, where it takes the option
    (``SourceTraits.keep_compacted_option``), which it showed compacted (``compacted``), so
    what it showed keeps its place and its bytes.
    """
    wanted = set(keys)
    option = g.traits.keep_option
    if option is not None:
        def names(of: Sequence[str]) -> list[str]:
            return [key.split(".", 1)[1] for key in of if "." in key]

        settings = {**thawed(g.spec.options), option: names(keys)}
        if g.traits.keep_compacted_option is not None:
            settings[g.traits.keep_compacted_option] = names(compacted)
        again = gather_source(replace(g.spec, options=FrozenOptions(settings)),
                              g.position, source, request, cap, costing)
        if again.error is None:
            g.units, g.complete, g.omitted = again.units, again.complete, again.omitted
    first = [u for u in g.units if u.candidates[0].item.key in wanted]
    g.units = [*first, *(u for u in g.units if u.candidates[0].item.key not in wanted)]


class Stepping:
    """The stable-prefix side of one build (``core.stable``): offers, cuts, layout, report."""

    def __init__(self, policy: CachePolicy, plan: str, target: str, strict: bool = False,
                 model: str = "") -> None:
        self.policy = policy
        self.plan = plan
        self.target = target
        self.strict = strict
        """The plan's ``strict``: a key conflict in a source read again raises too."""
        self.model = model
        """The model the build is for (``""``: not known); the provider's cache is per model."""
        self.tokenizer = ""
        """The tokenizer the build counts with (``offer_all`` reads it)."""
        self.previous: Fingerprint | None = None
        """The previous build, when this one goes on from it (``continues``)."""
        self.offers: dict[str, StableOffer] = {}
        self.normal: dict[str, tuple[list[Unit], bool]] = {}
        self.continued: set[str] = set()
        self.advanced: dict[str, str] = {}
        """Sources cut afresh in this build, and why."""
        self.sources: frozenset[str] = frozenset()
        """The message sources this build lays out (continued or cut in steps)."""
        self.lists: dict[str, str] = {}
        """The request list each laid-out source reads."""
        self.conversation: frozenset[str] = frozenset()
        """The laid-out sources placed before the user's input (where a cache point goes)."""
        self.anchors: dict[str, int] = {}
        self.digest_rooms: dict[str, int] = {}
        self.grants: dict[str, int] = {}
        self.cuttable: frozenset[str] = frozenset()
        self.specs: dict[str, str] = {}
        """Hash of each laid-out source's spec as the plan gives it."""
        self.heads: dict[str, list[Unit]] = {}
        """Pinned heads kept through a cut (``CachePolicy.head_share``)."""
        self.rests: dict[str, Gathered] = {}
        """What a source with a pinned head may keep after it."""
        self.transient: dict[str, frozenset[str]] = {}
        """Item keys of recalled turns shown after a continued run for this call only."""
        self.head_caps: dict[str, int] = {}
        """Tokens the head of a cut of each laid-out source may hold, at this build's grant."""
        self.preanchored: dict[str, int] = {}
        """Sources gathered as of their last cut's anchor from the start (``gather_options``),
        with that anchor; a source is gathered afresh (``_fresh``) if its layout cannot go on."""
        self.caps: dict[str, int] = {}
        """What each cuttable source was gathered up to (``builder.gather_all`` fills it)."""
        self._blocks: tuple[Assembly, tuple[int, ...]] | None = None
        """The assembly last given to ``_anthropic_blocks``, with its answer: the bridge and
        the fingerprint both need it, and it reads every message."""
        self.removed: dict[str, frozenset[str]] = {}
        """Item keys normalisation removed from each source (conflicts and duplicates): reading
        a source again (as of its last cut, or afresh) leaves them out too, as reported."""
        self.reaches: dict[str, int] = {}
        """How far back each pre-anchored source is read (``SourceLayout.reach``)."""
        self.decisions: list[Decision] = []
        self.warnings: list[str] = []
        """What normalising a source read afresh found (``_fresh``), for the report."""
        self._reader: tuple[Mapping[str, ContextSource], Request, Costing] | None = None
        self._gathered: list[Gathered] = []

    def gather_options(self, plan: BuildPlan, request: Request,
                       sources: Mapping[str, ContextSource], previous: Fingerprint | None
                       ) -> dict[str, FrozenOptions]:
        """Options to gather each message source with whose previous layout simply goes on.

        Such a source is read once, as of its last cut (``stable.preanchored``), instead of
        afresh and then again as of the cut: most calls of a conversation continue its layout.
        """
        if previous is None or not previous.stable or previous.target != self.target:
            return {}
        options: dict[str, FrozenOptions] = {}
        for spec in plan.sources:
            layout = previous.layouts.get(spec.source)
            source = sources.get(spec.source)
            if layout is None or source is None or layout.spec != plan_hash(spec):
                continue
            found = preanchored(spec, source, request, layout)
            if found is not None:
                self.preanchored[spec.source], options[spec.source], reach = found
                if reach is not None:
                    self.reaches[spec.source] = reach
        return options

    def continues(self, previous: Fingerprint | None) -> bool:
        """Whether this build goes on from ``previous``'s layouts (the same cache line).

        Not from a build without a cache policy, for another target, or for another model: a
        provider caches per model, so a build for the new one starts its line with a fresh cut.
        """
        return (previous is not None and previous.stable and previous.target == self.target
                and cache_line_change(previous, self.model, self.tokenizer) is None)

    def _fresh(self, g: Gathered) -> None:
        """Gather a pre-anchored source afresh (its layout cannot go on: it is cut anew).

        What normalisation removed from it before is left out again (it is reported already);
        what it reads that the first read did not reach is normalised as the build normalised
        the first (key conflicts, duplicates of what the build holds).
        """
        name = g.spec.source
        if name not in self.preanchored or self._reader is None:
            return
        del self.preanchored[name]
        sources, request, costing = self._reader
        fresh = gather_source(g.spec, g.position, sources[name], request, self.caps[name],
                              costing)
        fresh.units = without_keys(fresh.units, self.removed.get(name))
        decisions, warnings = normalise_again(fresh, [o for o in self._gathered if o is not g],
                                              self.strict)
        self.decisions += decisions
        self.warnings += warnings
        g.units, g.complete, g.layer = fresh.units, fresh.complete, fresh.layer
        g.error, g.offered, g.omitted = fresh.error, fresh.offered, fresh.omitted
        g.read_units, g.read_positions = fresh.read_units, fresh.read_positions
        g.read_back_to = fresh.read_back_to

    def offer_all(self, gathered: list[Gathered], sources: Mapping[str, ContextSource],
                  request: Request, previous: Fingerprint | None, pool: int,
                  costing: Costing) -> None:
        """Offer each message source its previous layout, where there is one to continue."""
        self._reader = (sources, request, costing)
        self._gathered = gathered
        self.tokenizer = costing.tokenizer.name
        goes_on = self.continues(previous)
        for g in gathered:
            # Failed as of the last cut, it may not as of now; read as of a cut of a cache
            # line this build does not go on (another model), it is cut afresh.
            if g.error is not None or not goes_on:
                self._fresh(g)
        laid_out = {g.spec.source for g in gathered
                    if g.spec.cuttable and g.traits.message_list is not None and g.error is None}
        self.lists = {g.spec.source: laid_out_list(g) for g in gathered
                      if g.spec.source in laid_out}
        question = min((g.position for g in gathered if g.traits.question), default=None)
        self.conversation = frozenset(
            g.spec.source for g in gathered
            if g.spec.source in laid_out and (question is None or g.position < question))
        self.sources = frozenset(laid_out)
        self.cuttable = frozenset(g.spec.source for g in gathered if g.spec.cuttable)
        for g in gathered:
            if g.spec.source in laid_out:
                self.specs[g.spec.source] = plan_hash(g.spec)
                # Units are kept whole or left out: a cut message could not be found again.
                g.spec = replace(g.spec, strategy="drop")
        if not goes_on or previous is None:
            return
        self.previous = previous
        for g in gathered:
            keys = previous.kept.get(g.spec.source)
            if keys and g.spec.cuttable and g.spec.source not in laid_out and g.error is None:
                cap = min(pool, g.spec.max_tokens if g.spec.max_tokens is not None else pool)
                keep_first(g, sources[g.spec.source], request, keys, cap, costing,
                           previous.compacted.get(g.spec.source, ()))
        for g in gathered:
            name = g.spec.source
            layout = previous.layouts.get(name)
            if name not in laid_out or layout is None:
                continue
            if layout.spec != self.specs[name]:  # another plan: the source is cut afresh
                self.offers[name] = StableOffer(failure="the plan gives it other settings")
                continue
            stable = offer(g, sources[name], request, layout, pool, costing,
                           gathered_at=self.preanchored.get(name),
                           removed=self.removed.get(name, frozenset()))
            self.offers[name] = stable
            if stable.failure is not None:
                self._fresh(g)  # before the budget is shared: it claims what it offers afresh
            else:
                self.normal[name] = (g.units, g.complete)
                g.units = [*stable.units, *stable.appended, *stable.recalled]
                g.complete = True

    def prune(self, gathered: list[Gathered], allocations: dict[str, Allocation], query: str,
              costing: Costing) -> dict[str, Selection]:
        """Continue each offered layout that fits; cut the rest, in steps where laid out."""
        selections: dict[str, Selection] = {}
        for g in gathered:
            name = g.spec.source
            grant = allocations[name].grant
            self.grants[name] = grant
            if name not in self.sources:
                selections[name] = prune_source(g, grant, query, costing)
                continue
            self.head_caps[name] = self._head_cap(grant)
            stable = self.offers.get(name)
            why = "the first cut"
            outgrown = False
            if stable is not None and stable.failure is None:
                window = g.traits.layout.window_option
                max_rounds = None if window is None else g.spec.options.get(window)
                verdict = decide(stable, grant, self.policy,
                                 None if max_rounds is None else int(max_rounds))
                if verdict.selection is not None:
                    if verdict.transient:
                        self.transient[name] = verdict.transient
                    self._continue(g, verdict.selection, stable)
                    selections[name] = verdict.selection
                    continue
                why, outgrown = verdict.why, verdict.outgrown
                g.units, g.complete = self.normal.pop(name)
                self._fresh(g)
            elif stable is not None:
                why = stable.failure or why
            self.anchors[name] = -1
            step = self._step(grant)
            stepped = grant - step
            # Nothing to cut: later calls only append. Shown afresh after a layout that no
            # longer fits (tiers recomputed), it must also leave a step free, or the next call
            # would break again.
            if g.complete and g.need <= (grant if stable is None else stepped):
                selections[name] = prune_source(g, grant, query, costing)
                if stable is not None:
                    self.advanced[name] = f"{why}; everything fits when shown afresh"
                continue
            self.advanced[name] = why
            previous_units = stable.units if stable is not None else []
            floor = pinned_head(previous_units, self.head_caps[name])
            cut = self._cut_after(g, floor, grant, step, query, costing, outgrown)
            growth = self.policy.head_growth
            if growth is not None and previous_units:
                cut = self._grown_cut(g, previous_units, floor, cut, grant, step, query,
                                      costing, outgrown, growth)
            if digest_share(g.spec.options) > 0:  # the digest fills the room its cut leaves
                allocations[name] = Allocation(share=allocations[name].share, grant=stepped)
                self.grants[name] = stepped
            selections[name], before = cut
            if before is not None:
                self._show_freed(name, selections[name], before)
        return selections

    def _account_for_head(self, g: Gathered, selection: Selection) -> None:
        """Report what a cut leaves out between its pinned head and the rest; count the head read.

        The head may lie past what the stream was read back to. The rest is cut from the
        messages after the head, so a message between the two (left out at an earlier cut) is
        in no prune's decisions. Run on the final selection, once the digest's room has been
        taken from the messages.
        """
        head = self.heads.get(g.spec.source)
        if not head:
            return
        known = {c.item.key for u in selection.kept for c in u.candidates} | {
            d.key for d in selection.decisions}
        for unit in g.units:
            # Read but neither shown nor decided: older than the head's end, or a recalled turn
            # whose first message the head shows as a plain one (after_head leaves it out).
            left = [c for c in unit.candidates if c.item.key not in known]
            if left and "digest" not in unit.candidates[0].item.metadata:
                selection.decisions.extend(drop_decisions(
                    Unit(source=unit.source, candidates=left, round=unit.round, rank=unit.rank),
                    f"budget: {BEFORE_PINNED_HEAD_END}"))
        g.read_positions |= {int(c.item.order) for u in head for c in u.candidates
                             if c.item.order >= 0 and c.item.order == int(c.item.order)}
        g.pinned_head_end = int(max(c.item.order for u in head for c in u.candidates))

    def _step(self, grant: int) -> int:
        """The tokens a cut leaves free of ``grant`` (``CachePolicy.step``)."""
        step = int(grant * self.policy.step)
        return step if step >= MIN_STEP_TOKENS else 0  # too small to hold a new message

    def _head_cap(self, grant: int) -> int:
        """The tokens a cut's pinned head may hold (``head_share`` of what the cut keeps)."""
        return int((grant - self._step(grant)) * self.policy.head_share)

    def head_points(self, assembly: Assembly, selections: Mapping[str, Selection]
                    ) -> tuple[int, ...]:
        """Index of the last message of the head each conversation source's next cut keeps.

        The same head as long as the run is continued; none where no message follows it (the
        conversation's own point is there). A breakpoint there has every call write the prefix
        through the head, which the call after the next cut repeats (``cache_points``). Also
        the previous request's last breakpoint inside the prefix this one repeats, when this
        request's next point lies more than ``LOOKBACK_BLOCKS`` blocks past it (``_bridge``).
        """
        points = []
        for name in sorted(self.conversation):
            kept = self._lasting(name, selections[name]).kept
            head = pinned_head(kept, self.head_caps.get(name, 0))
            if not head or len(head) == len(kept):
                continue  # no head, or it ends where the conversation's own point is
            last = max((c for c in head[-1].candidates), key=lambda c: c.item.order)
            if last.item.key in assembly.keys:
                points.append(assembly.keys.index(last.item.key))
        bridge = self._bridge(assembly, points)
        return tuple(points) if bridge is None else tuple(sorted({*points, bridge}))

    def _bridge(self, assembly: Assembly, heads: Sequence[int]) -> int | None:
        """The previous request's last write, where this request's points would not reach it.

        Anthropic looks for an earlier write only ``LOOKBACK_BLOCKS`` content blocks before a
        breakpoint: a call that appends more (an agent's steps between two builds, many
        parallel tool results) would read nothing past the system prompt. A breakpoint on
        that write itself reads it. None: no such write, or a point already reaches it.
        """
        previous = self.previous
        if (previous is None or previous.breakpoints is None
                or previous.tools != tools_hash(assembly.schema_jsons)):
            return None
        hashes, _ = self._chat_counts(assembly)
        pairs = zip(previous.messages, hashes, strict=False)
        kept = next((i for i, (old, new) in enumerate(pairs) if old != new),
                    min(len(previous.messages), len(hashes)))
        ends = [end for end in previous.breakpoints if 0 < end < kept]
        if not ends:
            return None
        end = max(ends)
        history = [i for i, section in enumerate(assembly.sections)
                   if section in self.conversation]
        counts = self._anthropic_blocks(assembly)
        reached = any(end <= point and sum(counts[end + 1:point + 1]) <= LOOKBACK_BLOCKS
                      for point in (*heads, *history[-1:]))
        return None if reached else end

    def _cut_after(self, g: Gathered, head: list[Unit], grant: int, step: int, query: str,
                   costing: Costing, outgrown: bool) -> tuple[Selection, list[Unit] | None]:
        """``g`` cut afresh after ``head`` to leave ``step`` of ``grant`` free.

        Also returns the units kept before the step was freed when the freed recalled turns
        are to be shown for this call only (``_shows_freed``; None otherwise).
        """
        self._pin(g, head)
        share = digest_share(g.spec.options)
        if share > 0:
            # The step comes out of the messages, not out of the digest: the digest keeps the
            # room a fresh build gives it (its share of the whole grant), so the exact values
            # of what the step freed are listed, not lost. The digest then fills what is left
            # of the smaller grant (``add_digests``).
            messages = max(grant - step - int(grant * share), 0)  # a large step and share
            return self._prune_after_head(g, messages, query, costing, reserve=False), None
        # Cut with the whole grant (recalled turns keep their share), then free the step from
        # the oldest plain messages (for cost, from turns recalled below the best too).
        cut = self._prune_after_head(g, grant, query, costing)
        before = list(cut.kept) if self._shows_freed(outgrown) else None
        return leave_room(cut, step, len(head), self._spare(g, grant, outgrown)), before

    def _pin(self, g: Gathered, head: list[Unit]) -> None:
        """Make ``head`` the source's pinned head (none when empty) for the cut after it."""
        name = g.spec.source
        if head:
            self.heads[name] = head
            self.rests[name] = after_head(g, head)
        else:
            self.heads.pop(name, None)
            self.rests.pop(name, None)

    def _grown_cut(self, g: Gathered, previous: Sequence[Unit], floor: list[Unit],
                   cut: tuple[Selection, list[Unit] | None], grant: int, step: int, query: str,
                   costing: Costing, outgrown: bool, growth: float
                   ) -> tuple[Selection, list[Unit] | None]:
        """The cut after the longest head of the previous layout that costs the input little.

        ``cut`` is the cut after the ``floor`` head (``head_share``). A longer head keeps more
        of the cached prefix. It is taken only if the cut after it shows every plain message
        that ``cut`` shows, and of the recalled turns ``cut`` shows, all but at most ``growth``
        of their tokens (those ranked lowest for this input give way first).
        """
        longest = pinned_head(previous, grant - step)
        if len(longest) <= len(floor):
            return cut
        plain = _keys_of([u for u in cut[0].kept if not _recalled_or_digest(u)])
        recalled = [u for u in cut[0].kept if "recalled" in u.candidates[0].item.metadata]
        needed = (1 - growth) * sum(u.tokens for u in recalled)
        chosen, best = floor, cut
        # Heads that end where a round does (``pinned_head``): a longer head leaves less room,
        # so find the longest that serves.
        ends = [end for end in range(len(floor) + 1, len(longest) + 1)
                if whole_rounds(previous, end) == end]
        low, high = 0, len(ends) - 1
        while low <= high:
            middle = (low + high) // 2
            head = longest[:ends[middle]]
            candidate = self._cut_after(g, head, grant, step, query, costing, outgrown)
            shown = _keys_of(candidate[0].kept)
            if plain <= shown and sum(u.tokens for u in recalled
                                      if u.candidates[0].item.key in shown) >= needed:
                chosen, best, low = head, candidate, middle + 1
            else:
                high = middle - 1
        self._pin(g, chosen)
        return best

    def _spare(self, g: Gathered, grant: int, outgrown: bool) -> frozenset[str]:
        """Keys of the recalled turns a cut may leave out to free its step (``objective``).

        Those ranked below the best (the half of the grant the recall coverage counts): the
        step is then really free in a source that is mostly recall, and the following calls
        append instead of cutting again. ``"cost"`` frees them on every cut, ``"balanced"`` only
        on a cut the appended messages force (``outgrown``): any other cut (this input's recall,
        the first cut, an edited list) shows every recalled turn that fits.
        """
        objective = self.policy.objective
        if objective == "fill" or (objective == "balanced" and not outgrown):
            return frozenset()
        ranked = [u for u in g.units if "recalled" in u.candidates[0].item.metadata]
        every = _keys_of(ranked)
        return every - best_recalled(ranked, grant)

    def _shows_freed(self, outgrown: bool) -> bool:
        """Whether a cut shows the recalled turns it freed its step from, for this call only.

        Under ``"cost"`` with the recall tail, a cut the appended messages did not force (this
        input's recall, the first cut, an edited list) still shows every recalled turn that
        fits, the lesser ones after the kept run (the next call drops them): the input is served
        as a full cut would serve it, while the run leaves its step free for the calls after it.
        """
        return self.policy.objective == "cost" and self.policy.recall_tail and not outgrown

    def _show_freed(self, name: str, selection: Selection, before: Sequence[Unit]) -> None:
        """Show the recalled units of ``before`` that ``selection`` left out, as a recall tail."""
        left = {id(u) for u in selection.kept}
        freed = [u for u in before
                 if id(u) not in left and "recalled" in u.candidates[0].item.metadata]
        if not freed:
            return
        keys = _keys_of(freed)
        selection.decisions = [d for d in selection.decisions if d.key not in keys]
        selection.kept = [*selection.kept, *freed]
        self.transient[name] = keys

    def _prune_after_head(self, g: Gathered, grant: int, query: str, costing: Costing,
                          reserve: bool = True) -> Selection:
        """``g`` pruned to ``grant``; with a pinned head, the head and what fits after it."""
        head = self.heads.get(g.spec.source)
        if not head:
            return prune_source(g, grant, query, costing, reserve=reserve)
        rest = prune_source(self.rests[g.spec.source], grant - sum(u.tokens for u in head),
                            query, costing, reserve=reserve)
        return Selection(kept=[*head, *rest.kept], decisions=rest.decisions)

    def _continue(self, g: Gathered, selection: Selection, stable: StableOffer) -> None:
        """Record a continued layout and report the normal units it does not show."""
        name = g.spec.source
        self.continued.add(name)
        self.anchors[name] = stable.anchor
        self.digest_rooms[name] = stable.digest_room
        g.units, g.complete = self.normal.pop(name, (g.units, g.complete))
        shown = {c.item.key for u in selection.kept for c in u.candidates}
        # The digest the last cut made, shown again, is reported as a fresh one is.
        selection.decisions.extend(digest_decision(name, u.candidates[0]) for u in selection.kept
                                   if "digest" in u.candidates[0].item.metadata)
        for unit in g.units:
            unshown = [c for c in unit.candidates if c.item.key not in shown]
            if len(unshown) < len(unit.candidates):
                # Offered together but laid out apart (a recalled turn whose question is the
                # pinned head): its other messages still get their decision.
                unit = Unit(unit.source, unshown, unit.round, unit.rank)
            if unshown:
                selection.decisions.extend(drop_decisions(unit, f"budget: {OLDER_THAN_KEPT_RUN}"))
        # The pinned head, read where it is (past what the stream was read back to), is shown.
        g.read_positions |= {int(c.item.order) for u in selection.kept for c in u.candidates
                             if c.item.order >= 0 and c.item.order == int(c.item.order)}

    def add_digests(self, gathered: list[Gathered], sources: Mapping[str, ContextSource],
                    request: Request, allocations: Mapping[str, Allocation],
                    selections: dict[str, Selection], costing: Costing,
                    brought: int = 0) -> None:
        """Digests of the sources cut in this build, made as later builds will remake them.

        ``brought``: what a digest brings along besides itself (``core.digest.add_digest``).
        """
        for g in gathered:
            name = g.spec.source
            if name not in self.sources or name in self.continued or g.error is not None:
                continue
            where = self.lists[name]
            frozen = digest_request(request, where, len(getattr(request, where)))
            grant = allocations[name].grant
            add_digest(g, sources[name], frozen, grant, selections, costing,
                       lambda g, grant: self._prune_after_head(g, grant, request.user_input,
                                                               costing, reserve=False),
                       brought=brought)
            self.digest_rooms[name] = digest_room_of(selections[name], grant)

    def order(self, selections: dict[str, Selection]) -> None:
        """Put the freshly cut laid-out sources in render order, a pinned head first.

        A source cut for the first time pins its oldest kept units (up to
        ``CachePolicy.head_share`` of its grant) before the digest of what it left out: later
        cuts keep them, so the provider's cache still covers them after a cut.
        """
        by_name = {g.spec.source: g for g in self._gathered}
        for name in self.sources - self.continued:
            self._account_for_head(by_name[name], selections[name])
            selection = in_render_order(selections[name])
            if name not in self.advanced:
                continue
            head = self.heads.get(name) or pinned_head(  # the digest goes after the head
                [u for u in selection.kept if "digest" not in u.candidates[0].item.metadata],
                int(self.grants[name] * self.policy.head_share))
            pinned = {id(u) for u in head}
            selection.kept = [*head, *(u for u in selection.kept if id(u) not in pinned)]
            tail = self.transient.get(name)
            if tail:  # shown for this call only: after the kept run (a stable sort)
                selection.kept.sort(key=lambda unit: _holds_any(unit, tail))

    def tail(self, plan: BuildPlan, sources: Mapping[str, ContextSource]) -> frozenset[str]:
        """Sources that declare their content changes from call to call (``volatile``)."""
        return frozenset(spec.source for spec in plan.sources
                         if spec.source in sources and traits_of(sources[spec.source]).volatile)

    def fingerprint(self, assembly: Assembly, selections: Mapping[str, Selection],
                    request: Request, tail: frozenset[str], language: str = "",
                    text: tuple[tuple[str, ...], tuple[int, ...]] | None = None,
                    points: Sequence[int] | None = None) -> Fingerprint:
        """What the next build needs to continue this one (``language``: of its labels).

        ``text``: a text build's prompt as hashed and counted blocks, one per message
        (``core.text.counted_blocks``); the tools are in the system message's block.
        ``points``: the build's ``cache_points`` (None: a text build, sent without
        breakpoints), recorded as its Anthropic request's breakpoints.
        """
        layouts = {}
        for name in sorted(self.sources):  # the same JSON in every process
            where = self.lists[name]
            raw = getattr(request, where)
            anchor = self.anchors.get(name, -1)
            layouts[name] = replace(
                layout_of(self._lasting(name, selections[name]), raw, where,
                          len(raw) if anchor < 0 else anchor, self.digest_rooms.get(name, 0)),
                spec=self.specs.get(name, ""))
        shown = {name: _in_shown_order(selection) for name, selection in selections.items()
                 if name not in self.sources and name in self.cuttable and selection.kept}
        kept = {name: tuple(item.key for item in items) for name, items in shown.items()}
        compacted = {name: keys for name, items in shown.items() if (keys := tuple(
            item.key for item in items if "compaction" in item.metadata))}
        volatile = next((i for i, section in enumerate(assembly.sections) if section in tail),
                        len(assembly.sections))
        transient = self.transient_from(assembly)
        messages, tokens = text if text is not None else self._chat_counts(assembly)
        return Fingerprint(
            plan=self.plan, target=self.target, kept=kept, compacted=compacted,
            tools=tools_hash(assembly.schema_jsons),
            tool_tokens=0 if text is not None else sum(assembly.schema_tokens),
            messages=messages, tokens=tokens, layouts=layouts,
            stable_end=volatile if transient is None else min(volatile, transient),
            language=language, tokenizer=self.tokenizer, model=self.model,
            breakpoints=None if points is None else breakpoint_ends(
                points, system=bool(assembly.messages)
                and assembly.messages[0].role == "system", tools=bool(assembly.schema_jsons)),
            blocks=None if points is None else self._anthropic_blocks(assembly))

    def _anthropic_blocks(self, assembly: Assembly) -> tuple[int, ...]:
        """``anthropic_blocks`` of ``assembly``'s messages, worked out once per assembly."""
        known = self._blocks
        if known is not None and known[0] is assembly:
            return known[1]
        blocks = anthropic_blocks(assembly.messages, assembly.documents)
        self._blocks = (assembly, blocks)
        return blocks

    @staticmethod
    def _chat_counts(assembly: Assembly) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """The hash and tokens of each message as the chat formats send it."""
        hashes = tuple(message_hash(message) if candidate is None else candidate_hash(candidate)
                       for message, candidate in zip(assembly.messages, assembly.candidates,
                                                     strict=True))
        return hashes, assembly.message_tokens

    def _gone(self, previous: Fingerprint | None, assembly: Assembly) -> str | None:
        """Why a laid-out source that showed messages last call shows none now (None: none did)."""
        if previous is None:
            return None
        shown = set(assembly.sections)
        for name in sorted(self.sources - shown):
            layout = previous.layouts.get(name)
            if layout is not None and layout.messages:
                return (f"{name} went away: the previous request showed {len(layout.messages)} "
                        "of its messages, this one shows none")
        return None

    def _new_line(self, reason: str, current: Fingerprint, assembly: Assembly) -> CacheReport:
        """The report of a build that cannot read its previous build's cache, and why.

        A chat request and a text prompt share no prefix a provider could cache, nor do two
        requests for different models, whatever their messages: the build starts a new cache
        line, and the report says so.
        """
        fresh = compare(None, current, assembly.sections, sorted(self.advanced), {},
                        assembly.keys)
        return replace(fresh, previous=True, broke_at=0,
                       broke_key=assembly.sections[0] if assembly.sections else None,
                       broke_item=assembly.keys[0] if assembly.keys else None, reason=reason)

    def _lasting(self, name: str, selection: Selection) -> Selection:
        """``selection`` without the turns shown for this call only (the next build's layout)."""
        gone = self.transient.get(name)
        if not gone:
            return selection
        return Selection(kept=[u for u in selection.kept if not _holds_any(u, gone)],
                         decisions=selection.decisions, ordered=selection.ordered)

    def _tail_keys(self) -> frozenset[str]:
        """Item keys of every message shown for this call only, in any source."""
        return frozenset().union(*self.transient.values())

    def transient_from(self, assembly: Assembly) -> int | None:
        """Index of the first message shown for this call only (None: there is none)."""
        if not self.transient:
            return None
        gone = self._tail_keys()
        return next((i for i, key in enumerate(assembly.keys) if key in gone), None)

    def report(self, previous: Fingerprint | None, current: Fingerprint,
               assembly: Assembly) -> CacheReport:
        """This build's prefix against the previous one's, with the reasons it broke."""
        reasons = {name: f"{name}'s cut advanced: {why}" for name, why in self.advanced.items()}
        if previous is not None and previous.target != self.target:
            return self._new_line(f"the previous build was for the {previous.target} target, "
                                  f"this one for the {self.target} target: a new cache line "
                                  "starts", current, assembly)
        line = None if previous is None else cache_line_change(previous, self.model,
                                                                self.tokenizer)
        if line is not None:
            return self._new_line(line, current, assembly)
        report = compare(previous, current, assembly.sections, sorted(self.advanced), reasons,
                         assembly.keys)
        gone = self._gone(previous, assembly)
        if gone and report.broke_at and report.broke_key not in reasons:
            # The break shows at whatever now stands where the source's messages stood (the
            # env part, the input): name the source that went away instead.
            report = replace(report, reason=gone)
        focus = {name: offer.focus for name, offer in sorted(self.offers.items())
                 if offer.focus is not None}
        if focus:
            report = replace(report, recall_focus=focus)
        if not self.transient:
            return report
        shown = self._tail_keys()
        return replace(report, transient=tuple(k for k in assembly.keys if k in shown))


def _keys_of(units: Sequence[Unit]) -> frozenset[str]:
    """Item keys of the messages of ``units``."""
    return frozenset(c.item.key for u in units for c in u.candidates)


def _recalled_or_digest(unit: Unit) -> bool:
    metadata = unit.candidates[0].item.metadata
    return "recalled" in metadata or "digest" in metadata


def _holds_any(unit: Unit, keys: frozenset[str]) -> bool:
    """Whether one of ``unit``'s messages has one of ``keys``."""
    return any(c.item.key in keys for c in unit.candidates)
