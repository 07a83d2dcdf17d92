"""The mode router: keyword rules first, a pluggable classifier second, then a default.

Interface: text in, mode out — plus the reason, so every decision can be logged and shown. The
router is pure: it reads the text, the session's current mode and its own rules; it never
touches a store.
"""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from contextwright.analysis import UNSPACED_RANGES, analyzer, cjk_class, is_cjk_char
from contextwright.compress.facts import extract_facts, fact_key
from contextwright.core.plan import closest_name
from contextwright.errors import (
    ClassifierError,
    ConfigurationError,
    ContextwrightError,
    PlanError,
)
from contextwright.modes.config import ModesConfig, RouteRule

RouteBasis = Literal["rule", "classifier", "kept", "released", "default"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteDecision:
    """Which mode a message goes to, and why."""

    mode: str
    """The chosen mode."""
    basis: RouteBasis
    """``rule`` (a keyword or pattern matched), ``classifier``, ``kept`` (unsure, or a message
    about the current mode's task under way, trigger ``open task``: stayed in the current
    mode), ``released`` (unsure, and the current mode's task is done or it was kept
    ``keep_limit`` times in a row: the default mode) or ``default`` (unsure: the default mode)."""
    trigger: str = ""
    """What decided it: the matched keyword or pattern, or the classifier's name."""
    confidence: float = 1.0
    """1 for rules; the classifier's confidence otherwise; 0 when unsure."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Classification:
    """A classifier's answer."""

    mode: str
    """The mode it thinks fits."""
    confidence: float
    """How sure it is, 0–1."""


@runtime_checkable
class ModeClassifier(Protocol):
    """Anything that maps a message to a mode (an embedding nearest-centroid model, an LLM…)."""

    @property
    def name(self) -> str:
        """Shown as the trigger of its decisions."""
        ...

    def classify(self, text: str) -> Classification | None:
        """The best mode for ``text``, or None when it has no opinion."""
        ...


class _CompiledRule:
    __slots__ = ("keywords", "mode", "name", "patterns")

    def __init__(self, rule: RouteRule) -> None:
        self.mode = rule.mode
        self.name = rule.name
        if any(not text.strip() for text in (*rule.keywords, *rule.patterns)):
            raise PlanError(f"modes config: a rule for {rule.mode!r} has a blank keyword or "
                            "pattern (it would match every message)")
        self.keywords = tuple((keyword, _keyword_pattern(keyword)) for keyword in rule.keywords)
        try:
            self.patterns = tuple((p, re.compile(p, re.IGNORECASE | re.DOTALL))
                                  for p in rule.patterns)
        except re.error:
            raise PlanError(f"modes config: a pattern of the rule for {rule.mode!r} is not a "
                            "valid regular expression") from None

    def match(self, text: str) -> str | None:
        for keyword, pattern in self.keywords:
            if pattern.search(text):
                return keyword
        for source, pattern in self.patterns:
            if pattern.search(text):
                return self.name or source
        return None


_UNSPACED_CLASS = cjk_class() + "".join(f"\\u{first:04x}-\\u{last:04x}"
                                        for first, last in UNSPACED_RANGES.values())
"""Scripts written without spaces between words (Chinese, Japanese, Korean, Thai…)."""
_SPACED_WORD_CHAR = rf"(?![{_UNSPACED_CLASS}])[^\W_]"
"""A letter or digit of a script written with spaces: one next to a keyword makes it part of a
longer word ("заказ" in "заказчик", "thé" in "théorie")."""


def _keyword_pattern(keyword: str) -> re.Pattern[str]:
    # Words of a script written with spaces match whole words ("order" must not fire on
    # "border", nor "Größe" on "Größenordnung"), whatever is next to them in a script without
    # ("帮我refund一下"); Chinese and the like have no word boundaries, so their keywords
    # match as substrings.
    escaped = re.escape(keyword.strip())
    if re.search(f"[{_UNSPACED_CLASS}]", keyword):
        return re.compile(escaped, re.IGNORECASE)
    return re.compile(rf"(?<!{_SPACED_WORD_CHAR}){escaped}(?!{_SPACED_WORD_CHAR})",
                      re.IGNORECASE)


class Router:
    """Routes each message: rules in order, then the classifier, then ``when_unsure``."""

    def __init__(self, config: ModesConfig | None = None,
                 classifier: ModeClassifier | None = None) -> None:
        if config is not None and not isinstance(config, ModesConfig):
            raise ConfigurationError(f"Router config must be a ModesConfig, not "
                                     f"{type(config).__name__}")
        if classifier is not None and not (
                callable(getattr(classifier, "classify", None))
                and isinstance(getattr(classifier, "name", None), str)):
            # Checked here, once: found out in a prepare, it failed after the user's message
            # was stored, with an untyped error.
            raise ConfigurationError(
                f"classifier must have a classify(text) method and a text name "
                f"(a ModeClassifier), not {type(classifier).__name__}")
        self.config = config or ModesConfig.default()
        self.classifier = classifier
        _check_classifier_modes(classifier, self.config)
        self._rules = tuple(_CompiledRule(rule) for rule in self.config.rules)

    def route(self, text: str, current_mode: str | None = None, *, kept_turns: int = 0,
              task_done: bool = False, open_task: str = "") -> RouteDecision:
        """The mode for ``text`` given the session's ``current_mode`` (None for a new session).

        ``kept_turns``: messages in a row the session has stayed in ``current_mode`` without
        being routed there; ``task_done``: the current mode's task is complete. Either lets an
        unsure message go to the default mode (basis ``released``) instead of keeping a mode
        whose work is over. ``open_task``: the goal and steps of the current mode's task under
        way ('' for none). A message that speaks of it (a shared exact value, or a shared word
        and no new value: "Sorry, the order is 20241010, not 20241001", "OK, refund it now")
        stays in the mode though a rule or the classifier names another (basis ``kept``,
        trigger ``open task``): a reply inside a running task does not tear it down. It counts
        as a kept turn, so ``keep_limit`` bounds it like any other.
        """
        decided = self._decide(text)
        if decided is not None:
            if (current_mode is not None and decided.mode != current_mode
                    and kept_turns < self.config.keep_limit and _speaks_of(text, open_task)):
                return RouteDecision(mode=current_mode, basis="kept", trigger="open task",
                                     confidence=0.0)
            return decided
        default = self.config.default_mode
        if current_mode is None or current_mode == default or self.config.when_unsure != "keep":
            return RouteDecision(mode=default, basis="default", confidence=0.0)
        if task_done:
            return RouteDecision(mode=default, basis="released", trigger="task done",
                                 confidence=0.0)
        if kept_turns >= self.config.keep_limit:
            return RouteDecision(mode=default, basis="released", trigger="turn limit",
                                 confidence=0.0)
        return RouteDecision(mode=current_mode, basis="kept", confidence=0.0)

    def _decide(self, text: str) -> RouteDecision | None:
        """The first matching rule's mode, else a confident classifier's; None when unsure."""
        for rule in self._rules:
            trigger = rule.match(text)
            if trigger is not None:
                return RouteDecision(mode=rule.mode, basis="rule", trigger=trigger)
        return self._classify(text)

    def _classify(self, text: str) -> RouteDecision | None:
        if self.classifier is None:
            return None
        try:
            answer = self.classifier.classify(text)
        except ContextwrightError:
            raise
        except Exception as exc:  # a user's classifier: any failure, typed and chained
            raise ClassifierError(f"classifier {self.classifier.name!r} failed: "
                                  f"{type(exc).__name__}: {exc}") from exc
        if answer is None:
            return None
        mode, confidence = _checked_answer(answer, self.classifier.name)
        if confidence < self.config.classifier_threshold:
            return None
        if mode not in self.config.modes:
            raise PlanError(f"classifier {self.classifier.name!r} chose unknown mode "
                            f"{mode!r}; known: {sorted(self.config.modes)}")
        return RouteDecision(mode=mode, basis="classifier",
                             trigger=self.classifier.name, confidence=confidence)


def _check_classifier_modes(classifier: ModeClassifier | None, config: ModesConfig) -> None:
    """``PlanError`` for a classifier whose examples name a mode the config does not have.

    Such a classifier is accepted only to fail a ``prepare`` later, the first time it answers
    that mode (a misspelt one, most often), after the user's message is stored. Only a
    classifier that says which modes it answers (``CentroidClassifier.modes``) can be checked.
    """
    from contextwright.modes.centroid import CentroidClassifier  # it imports this module

    if not isinstance(classifier, CentroidClassifier):
        return
    for mode in classifier.modes:
        if mode not in config.modes:
            raise PlanError(f"classifier {classifier.name!r} has examples for unknown mode "
                            f"{mode!r}{closest_name(mode, config.modes)}; known: "
                            f"{sorted(config.modes)}")


def _checked_answer(answer: object, name: str) -> tuple[str, float]:
    """A classifier's (mode, confidence), or ``ClassifierError`` saying what is wrong with it.

    A NaN confidence compares below no threshold, so it would switch the mode as a sure
    answer; any other wrong shape would fail the call with an untyped error after the user's
    message was stored, with no ``stored_seq`` to say so.
    """
    mode = getattr(answer, "mode", None)
    confidence = getattr(answer, "confidence", None)
    if not isinstance(mode, str):
        raise ClassifierError(f"classifier {name!r} returned {type(answer).__name__} without a "
                              "text mode: return a Classification(mode, confidence) or None")
    if (isinstance(confidence, bool) or not isinstance(confidence, numbers.Real)
            or not 0.0 <= float(confidence) <= 1.0):  # NaN is in no range
        raise ClassifierError(f"classifier {name!r} returned a confidence that is not a number "
                              "from 0 to 1")
    return mode, float(confidence)


# Words too common to tie a message to a task: step words, and Chinese function characters
# (the bigrams "帮我", "一下", "先查" are in every other request).
_STEP_WORDS = frozenset(("first", "then", "next", "after", "final", "finalli", "second", "step",
                         "secondli", "third", "thirdli", "fourth", "fifth", "lastli"))
# English request verbs and fillers, as analysed (stemmed): like 查, 看, 问, 说 and 做 in
# Chinese, they are in any request ("Can you check the refund policy?" during "check the
# stock, then email the supplier") and tie it to no task.
_REQUEST_WORDS = frozenset((
    "check", "look", "tell", "find", "show", "give", "make", "help", "want", "need", "have",
    "know", "like", "also", "just", "come", "some", "thing", "again", "sure", "okai",
    "actualli", "realli"))
_FUNCTION_CHARS = frozenset("我你您他她它们的了吗呢吧啊呀一下个这那是在有和就都也还"
                            "帮请要想能可以把给让先再然后查看问说去来做")


def _speaks_of(text: str, task: str) -> bool:
    """Whether ``text`` is about ``task``: a shared exact value, or a shared word and no new value.

    A new order number or date of its own makes a message another request even when it shares
    a word ("look up the refund policy for order 55102" during a refund of order 20241001).
    """
    if not task:
        return False
    said = {fact_key(fact) for fact in extract_facts(text)}
    known = {fact_key(fact) for fact in extract_facts(task)}
    if not said.isdisjoint(known):
        return True
    return not said - known and not _topic_terms(text).isdisjoint(_topic_terms(task))


def _topic_terms(text: str) -> set[str]:
    return {term for term in analyzer("recall").term_set(text) if _is_topic(term)}


def _is_topic(term: str) -> bool:
    if any(is_cjk_char(char) for char in term):
        return not any(char in _FUNCTION_CHARS for char in term)
    return len(term) >= 4 and term not in _STEP_WORDS and term not in _REQUEST_WORDS
