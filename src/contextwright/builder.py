"""``ContextBuilder``: the public entry point that ties a tokenizer and sources to the pipeline.

It is also where a deployment's fence secret is read (``CONTEXTWRIGHT_FENCE_SECRET``), so every
builder of the process, the ones a ``ContextManager`` makes included, keys fences alike; the core
itself never reads the environment.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from contextwright.core.builder import build_context
from contextwright.core.cache import CachePolicy, Fingerprint
from contextwright.core.caches import clear_registered_caches

# Re-exported: the variable's name has been importable from here.
from contextwright.core.fence import FENCE_SECRET_VARIABLE as FENCE_SECRET_VARIABLE
from contextwright.core.fence import deployment_fence_key, register_labels
from contextwright.core.final import FinalContext
from contextwright.core.plan import Budget, BuildPlan, check_plan, closest_name
from contextwright.core.request import Request
from contextwright.core.source import ContextSource, traits_of
from contextwright.errors import InvalidInputError, PlanError
from contextwright.models import model_profile, profile_tokenizer
from contextwright.sources import builtin_sources
from contextwright.tokens import (
    DEFAULT_IMAGES,
    CountingTokenizer,
    ImageTokenRule,
    Tokenizer,
    get_tokenizer,
)

if TYPE_CHECKING:
    from contextwright.observe import SnapshotRecorder, SnapshotSink



TARGETS: tuple[Literal["chat", "text"], ...] = ("chat", "text")
"""The renderings a build's budget can be counted for."""


def check_target(target: object) -> None:
    """Refuse a rendering the budget cannot be counted for (``InvalidInputError``).

    Another value would be counted partly as one rendering and partly as the other.
    """
    if target not in TARGETS:
        hint = closest_name(target, TARGETS) if isinstance(target, str) else ""
        raise InvalidInputError(f"target must be 'chat' or 'text'{hint}")


class ContextBuilder:
    """Builds contexts from plans and requests. Immutable after construction; thread-safe.

    ``tokenizer`` is ``o200k_base`` (default), ``cl100k_base``, ``estimate``, a path to a
    Hugging Face ``tokenizer.json``, or any object following the ``Tokenizer`` protocol.
    ``model`` (``gpt-4o``, ``claude-sonnet-4-5``, see ``contextwright.models``) sets the
    tokenizer, every plan's window and output reserve from the model's profile, and the model
    the requests name; ``window`` / ``reserved_output`` override those (with or without a
    model), while each plan's weights and safety ratio still apply.
    ``sources`` adds custom sources or replaces built-ins, keyed by their namespace. A source
    declares what it is (``traits``, a ``SourceTraits``) and the options it takes
    (``options_model``); one that replaces a built-in without declaring them is built like it.
    ``fence_secret`` keys the fence markers of untrusted text, so they cannot be predicted from
    the source code; it defaults to the ``CONTEXTWRIGHT_FENCE_SECRET`` environment variable,
    and without either the built-in key is used. Builds with one secret are byte-identical.
    ``snapshots`` (a ``SnapshotSink`` or ``SnapshotRecorder``, see ``contextwright.observe``)
    records every build off the request path; ``self.snapshots`` is its recorder.
    """

    def __init__(self, tokenizer: str | Tokenizer | CountingTokenizer | None = None,
                 sources: Iterable[ContextSource] = (), *,
                 model: str | None = None, window: int | None = None,
                 reserved_output: int | None = None,
                 fence_secret: str | bytes | None = None,
                 snapshots: SnapshotRecorder | SnapshotSink | None = None) -> None:
        from contextwright.observe.recorder import as_recorder

        self.snapshots = as_recorder(snapshots, fence_secret)
        self.model = model
        self._profile = model_profile(model) if model is not None else None
        if tokenizer is None:
            self.tokenizer = (profile_tokenizer(self._profile) if self._profile is not None
                              else get_tokenizer("o200k_base"))
        else:
            self.tokenizer = get_tokenizer(tokenizer)
        self._budget = self._model_budget(window, reserved_output)
        self.image_rule: ImageTokenRule = (self._profile.images if self._profile is not None
                                           else DEFAULT_IMAGES)
        """How builds count images: the model's rule, else the larger of GPT-4o's and
        Claude's (estimated)."""
        self._fence_key = deployment_fence_key(fence_secret)
        registry = builtin_sources()
        for source in sources:
            labels = traits_of(source).labels
            if labels:  # a source's own part label, escaped in content like the built-in ones
                try:
                    register_labels(source.namespace, labels)
                except ValueError as exc:
                    raise PlanError(f"source {source.namespace!r}: {exc}") from None
            registry[source.namespace] = source
        self._sources: Mapping[str, ContextSource] = MappingProxyType(dict(registry))

    def _model_budget(self, window: int | None, reserved_output: int | None) -> dict[str, int]:
        """Budget fields that replace every plan's: the model's, or the ones given."""
        profile = self._profile
        budget: dict[str, int] = {}
        if profile is not None:
            budget = {"window": profile.window, "reserved_output": profile.default_output}
        if window is not None:
            budget["window"] = window
        if reserved_output is not None:
            budget["reserved_output"] = reserved_output
        if profile is not None and budget["reserved_output"] > profile.max_output:
            raise PlanError(f"model {profile.name} writes at most {profile.max_output} tokens; "
                            f"reserved_output {budget['reserved_output']} is more")
        return budget

    async def abuild(self, plan: BuildPlan, request: Request, *,
                     target: Literal["chat", "text"] = "chat",
                     previous: Previous = None, cache: CachePolicy | bool | None = None,
                     cache_key: str | None = None) -> FinalContext:
        """``build`` for an event loop, with the same result.

        The build is CPU work; it runs on a worker thread, so the loop never waits for it.
        """
        return await asyncio.to_thread(self.build, plan, request, target=target,
                                       previous=previous, cache=cache, cache_key=cache_key)

    def effective_plan(self, plan: BuildPlan) -> BuildPlan:
        """``plan`` as this builder builds it: its window and output reserve set to the model's.

        Or to the ``window`` / ``reserved_output`` given to the builder. ``PlanError`` when the
        reserves exceed what the model can write, or when the plan's ``available_override``
        (the CLI's ``--budget``) is more than the known window leaves after the reserves.
        """
        check_plan(plan)
        effective = plan.with_budget(**self._budget) if self._budget else plan
        profile, budget = self._profile, effective.budget
        if profile is not None and budget.reserved_output + budget.reserved_reasoning > (
                profile.max_output):
            raise PlanError(f"plan {plan.name}: output and reasoning reserves "
                            f"({budget.reserved_output} + {budget.reserved_reasoning}) exceed the "
                            f"{profile.max_output} tokens {profile.name} can write")
        self._check_override(plan.name, budget)
        return effective

    def _check_override(self, plan_name: str, budget: Budget) -> None:
        """Refuse an ``available_override`` the known window cannot hold beside the reserves.

        Only a window the builder knows (its model's, or one given to it) is a limit: a plan's
        own is a default an override is meant to replace. Refused rather than clamped: the
        caller asked for a number the model cannot take, and a quietly smaller context would
        hide that.
        """
        override = budget.available_override
        if override is None or "window" not in self._budget:
            return
        room = budget.window - budget.reserved_output - budget.reserved_reasoning
        if override > room:
            whose = f"{self._profile.name}'s" if self._profile is not None else "the"
            raise PlanError(
                f"plan {plan_name}: available_override {override} does not fit {whose} window "
                f"of {budget.window} beside the output and reasoning reserves "
                f"({budget.reserved_output} + {budget.reserved_reasoning}): at most {room}")

    @property
    def sources(self) -> Mapping[str, ContextSource]:
        """Registered sources by namespace."""
        return self._sources

    def build(self, plan: BuildPlan, request: Request, *,
              target: Literal["chat", "text"] = "chat", previous: Previous = None,
              cache: CachePolicy | bool | None = None,
              cache_key: str | None = None) -> FinalContext:
        """Build the context for one model call.

        ``target`` is the rendering the budget is counted for: ``chat`` (OpenAI and Anthropic
        messages, the default) or ``text`` (``FinalContext.to_text()``).

        Keeping the provider's prompt cache warm across the calls of one conversation:
        ``previous`` is the previous call's ``FinalContext`` (or its ``fingerprint``, or that
        fingerprint's JSON). The build then keeps what that call showed, in the same order, and
        appends; a source whose kept run no longer fits is cut again to leave a step of its
        budget free (``CachePolicy``), and what changes every call (environment facts, notes,
        documents, session memory) is rendered after the stable part. ``report.cache`` says
        how much of the request repeats the previous one's prefix, where it broke and why.
        ``cache=True`` (or a ``CachePolicy``) builds that way from the first call, so the second
        call can already continue it; ``cache=False`` turns it off even with ``previous``.
        ``cache_key`` names the conversation for OpenAI's ``prompt_cache_key`` (a key over the
        64 characters OpenAI takes is sent as a stable shortened id of it).
        """
        if cache_key is not None and not isinstance(cache_key, str):
            raise InvalidInputError("cache_key must be a string (it names the conversation)")
        check_target(target)
        plan = self.effective_plan(plan)
        policy = cache_policy(cache, previous)
        run = partial(build_context, plan, request, self._sources, self.tokenizer, target,
                      fence_key=self._fence_key, cache=policy,
                      previous=previous_fingerprint(previous) if policy else None,
                      images=self.image_rule, model=self.model or "")
        context = run() if self.snapshots is None else self.snapshots.record_build(
            run, plan, request, self.tokenizer.name)
        if self.model is not None or cache_key is not None:
            context = replace(context, model=self.model or context.model,
                              cache_key=cache_key)
        return context


Previous = FinalContext | Fingerprint | str | None
"""A previous build of the same conversation: its context, fingerprint, or fingerprint JSON."""


def cache_policy(cache: CachePolicy | bool | None, previous: Previous) -> CachePolicy | None:
    """The policy a build keeps a stable prefix with (None: it does not)."""
    if isinstance(cache, CachePolicy):
        return cache
    if cache is None:
        return CachePolicy() if previous is not None else None
    if not isinstance(cache, bool):
        raise InvalidInputError("cache must be True, False or a CachePolicy")
    return CachePolicy() if cache else None


def previous_fingerprint(previous: Previous) -> Fingerprint | None:
    """``previous`` as a fingerprint; anything else is an ``InvalidInputError``."""
    if previous is None or isinstance(previous, Fingerprint):
        return previous
    if isinstance(previous, FinalContext):
        return previous.fingerprint
    if isinstance(previous, str):
        return Fingerprint.from_json(previous)
    raise InvalidInputError("previous must be a FinalContext, a Fingerprint or its JSON")


def session_cache_key(*ids: str) -> str:
    """A provider cache key (OpenAI ``prompt_cache_key``) naming a session by its ids.

    A keyed hash, keyed by the deployment's fence secret (``CONTEXTWRIGHT_FENCE_SECRET``), so
    the provider cannot tell users apart by guessing ids, nor link one deployment's sessions to
    another's; without a secret the built-in key is used and the hash only hides the ids.
    Distinct ids give distinct keys, whatever characters they hold: the hash is of the ids as
    a JSON list, which no other list of ids spells. 24 hex digits, well within the 64
    characters OpenAI takes.
    """
    key = deployment_fence_key()
    # Joined with a separator, ("a\x1fb", "c") and ("a", "b\x1fc") would read the same.
    text = json.dumps(list(ids), ensure_ascii=False).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(text, key=key, digest_size=12, person=b"cw-cache-key").hexdigest()


def clear_caches() -> None:
    """Forget every remembered parse, item, rendering and token count of this process.

    The caches make re-reading a long history cheap; clearing them frees their memory and
    makes the next build a cold one (benchmarks use this). Every process-wide cache registers
    itself where it is defined (``core.caches``); a module not imported yet has nothing cached.
    """
    clear_registered_caches()
