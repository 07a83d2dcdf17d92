"""Normalisation at the build entry: key conflicts and duplicates.

Key conflicts are found once, across and inside sources: the higher ``priority`` wins (on a tie,
the source earlier in the plan, then the item offered first), a warning is logged and reported,
and a strict plan raises instead. A losing item takes its whole unit with it, so a tool call is
never separated from its result.

Duplicates: units whose messages all carry ids are duplicates when the ids match, anywhere.
Without ids, role + content must match *and* the copy must sit right next to the original —
the next unit of the same source, or the newest unit of a source copying the never-cut user
input (the same input injected twice). Repeating "yes" two rounds apart is conversation, not
duplication; a unit with tool calls or results is never a duplicate by its content: a call made
again with the same arguments (a retry, a poll) is another call however alike its result, even
when the server numbers calls per reply and so reuses the call id. The copy from the more
constraining source, or the newer copy, is kept.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from dataclasses import replace

from contextwright.core.gather import Gathered, Unit
from contextwright.core.report import Decision
from contextwright.errors import KeyConflictError

logger = logging.getLogger("contextwright")


def priority_order(gathered: list[Gathered]) -> list[Gathered]:
    """Sources in the order their copies win: never-cut first, then by layer, then plan order."""
    return sorted(gathered, key=lambda g: (g.spec.cuttable, g.layer, g.position))


def resolve_key_conflicts(gathered: list[Gathered], strict: bool) -> tuple[list[Decision],
                                                                           list[str]]:
    """Remove units that lost a key conflict; returns decisions and warnings.

    Keys carry their source's namespace and a plan names each source once, so a conflict can
    only be inside one source; a source whose keys are all distinct is checked with one set.
    """
    owners: dict[str, tuple[int, int, Unit]] = {}
    losers: list[tuple[Unit, str, str]] = []
    for source in sorted(gathered, key=lambda g: g.position):
        keys = [c.item.key for u in source.units for c in u.candidates]
        if len(set(keys)) == len(keys):
            continue
        for unit in source.units:
            for candidate in unit.candidates:
                key, priority = candidate.item.key, candidate.item.priority
                held = owners.get(key)
                if held is None:
                    owners[key] = (priority, source.position, unit)
                    continue
                if strict:
                    raise KeyConflictError(f"key {key!r} is produced twice")
                if priority > held[0]:
                    losers.append((held[2], key, unit.source))
                    owners[key] = (priority, source.position, unit)
                else:
                    losers.append((unit, key, held[2].source))
    return _remove_losers(gathered, losers)


def _remove_losers(gathered: list[Gathered], losers: list[tuple[Unit, str, str]]
                   ) -> tuple[list[Decision], list[str]]:
    decisions: list[Decision] = []
    warnings: list[str] = []
    lost = {id(unit) for unit, _, _ in losers}
    for unit, key, winner in losers:
        message = f"key conflict on {key}: kept the item from {winner} (higher priority or first)"
        logger.warning(message)
        warnings.append(message)
        decisions.extend(
            Decision(source=unit.source, key=c.item.key, action="conflict",
                     reason=f"lost key {key} to {winner}", tokens_before=c.tokens)
            for c in unit.candidates
        )
    for source in gathered:
        source.units = [u for u in source.units if id(u) not in lost]
    return decisions, warnings


def _id_fingerprint(unit: Unit) -> Hashable | None:
    if len(unit.candidates) == 1:
        return unit.candidates[0].item.message.id
    ids = tuple(c.item.message.id for c in unit.candidates)
    return ids if all(ids) else None


def _content_fingerprint(unit: Unit) -> Hashable:
    if len(unit.candidates) == 1:
        return unit.candidates[0].fingerprint
    return tuple(c.fingerprint for c in unit.candidates)


def _has_tool_messages(unit: Unit) -> bool:
    """Whether the unit holds a tool call or result: those are never merged by content.

    Only the call id could tell a second call from a copy of the first, and servers that
    number calls per reply give every call the same one. A call recorded twice by mistake is
    what ``ContextManager.record``'s ``idempotency_key`` prevents.
    """
    return any(c.item.message.tool_calls or c.item.message.role == "tool"
               for c in unit.candidates)


def drop_duplicates(gathered: list[Gathered]) -> list[Decision]:
    """Remove duplicate units (see module docstring); returns a decision per removed item."""
    by_id: dict[Hashable, Unit] = {}
    by_content: dict[Hashable, Unit] = {}
    never_cut = {g.spec.source for g in gathered if not g.spec.cuttable}
    decisions: list[Decision] = []
    for source in priority_order(gathered):
        kept: list[Unit] = []
        for unit in source.units:
            original = _find_original(unit, by_id, by_content, never_cut)
            if original is None:
                kept.append(unit)
                continue
            decisions.extend(
                Decision(source=unit.source, key=c.item.key, action="deduplicated",
                         reason=f"duplicate of {original.candidates[0].item.key}",
                         tokens_before=c.tokens)
                for c in unit.candidates
            )
        source.units = kept
    return decisions


def _find_original(unit: Unit, by_id: dict[Hashable, Unit], by_content: dict[Hashable, Unit],
                   never_cut: set[str]) -> Unit | None:
    """The unit this one duplicates, registering it as an original when it is not a copy."""
    candidates = unit.candidates
    if len(candidates) == 1:  # the common case, without building tuples
        ids: Hashable | None = candidates[0].item.message.id
        content: Hashable = candidates[0].fingerprint
    else:
        ids = _id_fingerprint(unit)
        content = _content_fingerprint(unit)
    if ids is not None:
        if ids in by_id:
            return by_id[ids]
        by_id[ids] = unit
        return None
    if _has_tool_messages(unit):
        return None  # a call made again is another call (see the module docstring)
    previous = by_content.get(content)
    by_content[content] = unit
    if previous is None:
        return None
    next_in_source = previous.source == unit.source and unit.rank == previous.rank + 1
    copies_input = previous.source in never_cut and unit.rank == 0
    return previous if next_in_source or copies_input else None


def normalise_again(source: Gathered, others: Sequence[Gathered], strict: bool
                    ) -> tuple[list[Decision], list[str]]:
    """Normalise ``source``, read again, as the build normalised it among ``others``.

    Its key conflicts are resolved; its units that copy a unit of a source whose copies win
    over its own (``priority_order``), or of its own, are removed. ``others`` are left as they
    are: they were normalised already, and may have been cut since.
    """
    decisions, warnings = resolve_key_conflicts([source], strict)
    rank = (source.spec.cuttable, source.layer, source.position)
    winning = [replace(g, units=list(g.units)) for g in others
               if (g.spec.cuttable, g.layer, g.position) < rank]
    decisions += drop_duplicates([*winning, source])
    return decisions, warnings
