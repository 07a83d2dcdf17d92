"""A model answers from each built context, and the answer is scored: exactly or by a judge.

For a case that expects a tool call (τ-bench's next write, a case's ``expected_call``) the
model is sent the context with its tool schemas and its first call is compared exactly: same
function name, JSON-equal arguments. For a question with a reference answer (LoCoMo, HotpotQA, a
case's ``answer``) the model answers from the context and a judge model, given the question,
the reference and the answer, says ``CORRECT`` or ``WRONG`` (``parse_verdict`` is strict: the
word alone, perhaps in Markdown emphasis or quotes; any other reply is an error of its task,
counted and reported, never taken as wrong and never stored, so a rerun asks again).

Every reply is kept in a ``ReplyCache`` (SQLite) under a key of the case id, a hash of the plan
it was built with, the model and a hash of the context sent, so an interrupted run resumes
where it stopped and a rerun makes no call twice; a request identical to one already answered
(another plan that builds the same context) reuses that answer. ``Judge.estimate`` says what a
run will send before anything is sent. Network I/O goes through ``OpenAIChatClient`` only.

Calls go out ``concurrency`` at a time (threads: the work is waiting on the endpoint). Requests
with the same body are grouped, so one is sent and the others reuse its reply, as in a serial run;
two groups whose answers come out the same make the same judgment request, and a thread that finds
it in flight waits for that reply instead of sending it again. The first error that makes the
endpoint unusable stops new calls, lets those in flight finish (and be stored), and is raised;
so does an interruption (Ctrl-C): nothing queued is sent after it.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from contextwright.builder import ContextBuilder
from contextwright.core.cache import plan_hash
from contextwright.errors import LLMError, StoreError
from contextwright.evaluate.ablation import (
    AblationResult,
    Built,
    Target,
    run_ablation,
    with_metrics,
)
from contextwright.evaluate.case_results import CaseResult, CasesResult, overall
from contextwright.evaluate.cases import CaseRun, EvalCase, iter_builds
from contextwright.evaluate.metrics import Count, context_tokens
from contextwright.evaluate.records import CaseOutcome, ExpectedAnswer, ExpectedCall, Ratio
from contextwright.llm.client import ChatReply, OpenAIChatClient, ReplyCall

JUDGE_SYSTEM = (
    "You grade answers to questions. You are given a question, its reference answer and a "
    "candidate answer. The candidate is CORRECT when it gives the same answer as the reference: "
    "other wording, extra detail, or another format of the same date or number do not matter. "
    "It is WRONG when it contradicts the reference, gives a different answer, leaves out what "
    "the question asks for, or says it does not know. Reply with exactly one word: CORRECT or "
    "WRONG."
)
JUDGE_TEMPLATE = ("Question: {question}\nReference answer: {reference}\nCandidate answer: "
                  "{answer}\n\nVerdict (CORRECT or WRONG):")
_VERDICT = re.compile(r"\s*(?P<open>[*_`\"'“‘]*)\s*(?P<word>correct|wrong)\s*(?P<stop>\.?)\s*"
                      r"(?P<close>[*_`\"'”’]*)\s*(?P<outer_stop>\.?)\s*", re.IGNORECASE)
_CLOSING = str.maketrans("“‘", "”’")
FATAL_KINDS = frozenset(("config", "connection", "timeout"))
"""``LLMError`` kinds that stop a run (the endpoint is unusable; rerun to resume)."""
RETRYABLE_STATUS = frozenset((408, 409, 429))
ENDPOINT_STATUS = frozenset((401, 403, 404))
"""Statuses that describe the endpoint, the key or the model, not the request: a bad API key,
no access, a misspelt model name or base URL. Every other call would get the same answer."""
JUDGED_METRICS = ("judged_correct", "call_exact", "judge_errors")
"""What a judged run adds to each variant's row."""

TaskKind = Literal["answer", "call"]


class UnparseableVerdict(ValueError):
    """The judge's reply is not exactly ``CORRECT`` or ``WRONG``."""


def judge_messages(question: str, reference: str, answer: str) -> list[dict[str, Any]]:
    """The judge's prompt for one answer."""
    return [{"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": JUDGE_TEMPLATE.format(
                question=question, reference=reference, answer=answer)}]


def parse_verdict(reply: str) -> bool:
    """True for ``CORRECT``, False for ``WRONG`` (either case, an optional final full stop).

    The word may be wrapped as chat models often write it: Markdown emphasis or code
    (``**CORRECT**``, ``_WRONG_``, ```` `CORRECT` ````) or quotes, opened and closed alike.
    Anything else — an explanation, both words, a verdict inside a sentence, nothing — raises
    ``UnparseableVerdict``: a judge that does not follow the format is not a grade.
    """
    match = _VERDICT.fullmatch(reply)
    if (match is None or match["close"] != match["open"][::-1].translate(_CLOSING)
            or (match["stop"] and match["outer_stop"])):
        raise UnparseableVerdict("the judge's reply is not CORRECT or WRONG")
    return match["word"].lower() == "correct"


def compare_call(expected: ExpectedCall, reply: ChatReply) -> tuple[bool, str]:
    """(exact, why): the reply's first tool call against the expected one."""
    if not reply.tool_calls:
        return False, "no tool call"
    call = reply.tool_calls[0]
    if call.name != expected.name:
        return False, f"called {call.name}"
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        return False, "arguments are not JSON"
    if not json_equal(arguments, dict(expected.arguments)):
        return False, "other arguments"
    return True, "exact"


def json_equal(left: object, right: object) -> bool:
    """Equality of JSON values: ``true`` is not ``1`` and ``false`` is not ``0``.

    Python's ``==`` takes a bool for the number it subclasses, which JSON does not; numbers
    compare by value (``2`` is ``2.0``), objects by keys and values, arrays in order.
    """
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left is right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(v, right[k])
                                                   for k, v in left.items())
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            json_equal(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict | list) or isinstance(right, dict | list):
        return False
    return bool(left == right)


def digest(value: object) -> str:
    """A stable SHA-256 of JSON-ready data."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"),
                      default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ReplyCache:
    """Model replies on disk (SQLite), by key; each write is committed at once.

    Safe to share between threads: one connection, every statement under a lock.
    """

    def __init__(self, path: Path) -> None:
        """Open (or make) the cache file; ``StoreError`` when its folder cannot hold one."""
        self.path = path
        self._lock = threading.Lock()
        self._db = _open_cache(path)
        try:
            _prepare_cache(self._db)
        except sqlite3.Error as exc:
            # A damaged file, or a database of another program at this path: the shared
            # default cache must not break every judged run with a traceback. A file another
            # program holds locked is neither: saying so keeps its replies from being thrown away.
            self._db.close()
            if _in_use(exc):
                raise StoreError(in_use_message(path)) from None
            raise StoreError(f"reply cache {path} is not a contextwright reply cache (move it "
                             "away or pass --cache-dir)") from None

    def get(self, key: str) -> str | None:
        """The reply stored under ``key``."""
        with self._using():
            row = self._db.execute("SELECT reply FROM replies WHERE key = ?",
                                   (key,)).fetchone()
        return None if row is None else str(row[0])

    def by_request(self, request: str) -> str | None:
        """A reply to a request with this hash, under any key."""
        with self._using():
            row = self._db.execute("SELECT reply FROM replies WHERE request = ? LIMIT 1",
                                   (request,)).fetchone()
        return None if row is None else str(row[0])

    def put(self, key: str, *, kind: str, model: str, request: str, reply: str) -> None:
        """Store ``reply`` (a later write under the same key replaces it)."""
        with self._using():
            self._db.execute("INSERT OR REPLACE INTO replies VALUES (?, ?, ?, ?, ?, ?)",
                             (key, kind, model, request, reply, time.time()))
            self._db.commit()

    def __len__(self) -> int:
        """Replies stored."""
        with self._using():
            return int(self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0])

    @contextmanager
    def _using(self) -> Iterator[None]:
        """The lock held, and a database error as a ``StoreError`` naming the file."""
        with self._lock:
            try:
                yield
            except sqlite3.Error as exc:
                if _in_use(exc):
                    raise StoreError(in_use_message(self.path)) from None
                raise StoreError(f"reply cache {self.path}: {exc}") from None

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()


def in_use_message(path: Path) -> str:
    """What a run says when another program holds the reply cache locked."""
    return (f"reply cache {path} is in use by another program (it is locked); the replies "
            "stored so far are kept: run again when it is done, or pass --cache-dir")


def _in_use(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused because another connection holds the file locked."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _prepare_cache(db: sqlite3.Connection) -> None:
    """Make the table if it is new, and read it once: a file of another shape fails here."""
    db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, kind TEXT NOT NULL, "
               "model TEXT NOT NULL, request TEXT NOT NULL, reply TEXT NOT NULL, created REAL "
               "NOT NULL)")
    db.execute("CREATE INDEX IF NOT EXISTS replies_request ON replies (request)")
    db.execute("SELECT key, kind, model, request, reply, created FROM replies LIMIT 0")
    db.commit()


def _open_cache(path: Path) -> sqlite3.Connection:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return sqlite3.connect(path, check_same_thread=False)
    except OSError as exc:  # the folder is a file, or may not be made here
        raise StoreError(f"cannot use reply cache folder {path.parent}: {exc.strerror}"
                         ) from None
    except sqlite3.Error:
        raise StoreError(f"cannot open reply cache {path}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One model call to make (and, for a question, one judgment)."""

    kind: TaskKind
    """``call`` (compared exactly) or ``answer`` (judged)."""
    key: str
    """The answer's cache key: case id, plan hash, model, budget and context."""
    request: str
    """Hash of the exact request body (reused across plans that build the same context)."""
    expected: ExpectedAnswer | ExpectedCall
    """What the answer is scored against."""
    input_tokens: int
    """Tokens of the context and tool schemas sent."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Estimate:
    """What a run will send, before it sends anything."""

    answers: int = 0
    """Answer calls still to make."""
    judgments: int = 0
    """Judge calls still to make (at most; an answer that fails needs none)."""
    cached: int = 0
    """Answers already stored (no call)."""
    input_tokens: int = 0
    """Input tokens of those calls."""
    output_tokens: int = 0
    """Output tokens at most (``max_tokens`` per call)."""

    @property
    def calls(self) -> int:
        """Calls in all."""
        return self.answers + self.judgments

    def describe(self, *, price_input: float | None, price_output: float | None,
                 seconds_per_call: float, concurrency: int = 1) -> list[str]:
        """Lines for the terminal: calls, tokens, cost (with prices) and time."""
        lines = [f"model calls: {self.answers:,} answers + up to {self.judgments:,} judgments "
                 f"({self.cached:,} answers cached); {self.input_tokens:,} input tokens, at "
                 f"most {self.output_tokens:,} output tokens"]
        if price_input is not None and price_output is not None:
            cost = (self.input_tokens * price_input + self.output_tokens * price_output) / 1e6
            lines.append(f"cost: at most ${cost:,.2f} at ${price_input:g} / ${price_output:g} "
                         "per million input / output tokens")
        else:
            lines.append("cost: pass --price-input and --price-output (per million tokens)")
        minutes = self.calls * seconds_per_call / 60 / max(concurrency, 1)
        lines.append(f"time: about {minutes:,.1f} min at {seconds_per_call:g} s per call"
                     + (f", {concurrency} at a time" if concurrency > 1 else ""))
        return lines


@dataclass(frozen=True, slots=True, kw_only=True)
class Scored:
    """One task's score."""

    kind: TaskKind
    """``call`` or ``answer``."""
    correct: bool | None
    """The score; None when it could not be made (an error)."""
    note: str = ""
    """Why (``exact``, ``other arguments``, the error)."""


def stops_the_run(exc: LLMError) -> bool:
    """Whether a failed call means the endpoint is unusable (not just this request).

    Unreachable, timed out, misconfigured, refused for the key or the model (401, 403, 404),
    rate-limited or a server error: the run stops and what is stored stays stored; a rerun
    resumes. Anything else (a 400 for this request, say) fails only its task.
    """
    if exc.kind in FATAL_KINDS:
        return True
    status = exc.status_code or 0
    return exc.kind == "status" and (status in RETRYABLE_STATUS or status in ENDPOINT_STATUS
                                     or status >= 500)


def refused_by_endpoint(exc: LLMError) -> bool:
    """Whether the endpoint refused the key or the model (what a rerun cannot fix alone)."""
    return exc.kind == "status" and (exc.status_code or 0) in ENDPOINT_STATUS


@dataclass(slots=True, kw_only=True)
class Judge:
    """Answers and judges tasks through one OpenAI-compatible endpoint, with a reply cache."""

    client: OpenAIChatClient
    """The endpoint."""
    cache: ReplyCache
    """Where replies are kept."""
    judge_model: str
    """The model that judges answers."""
    answer_model: str
    """The model that answers from the context."""
    count: Count
    """Counts tokens for the estimate."""
    answer_max_tokens: int = 512
    """``max_tokens`` of an answer."""
    judge_max_tokens: int = 16
    """``max_tokens`` of a judgment."""
    calls_made: int = 0
    """Calls sent by this judge."""
    errors: dict[str, str] = field(default_factory=dict)
    """Tasks that could not be scored this run, by key: an answer or judgment call refused, or
    a verdict that could not be read (none of these is stored: a rerun asks again)."""
    unreadable: dict[str, str] = field(default_factory=dict)
    """Of ``errors``, the tasks whose verdict could not be read (``parse_verdict``)."""
    _failed_judgments: dict[str, str] = field(default_factory=dict, repr=False)
    """Judgment requests whose reply could not be read this run, with why: another task
    making the same request shares the error instead of sending it again."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    """Guards ``calls_made``, ``errors``, ``unreadable`` and ``_judging`` (tasks settle on
    several threads)."""
    _judging: dict[str, threading.Lock] = field(default_factory=dict, repr=False)
    """One lock per judgment request, held while it is sent, so it is sent once."""

    def task(self, target: str, plan_hash: str, outcome: CaseOutcome) -> Task | None:
        """The task of one build, or None when it expects nothing or did not build."""
        expected = outcome.expected
        if expected is None or outcome.error is not None or not outcome.messages:
            return None
        body = self._answer_body(outcome)
        key = digest(["answer", target, outcome.case_id, plan_hash, self.answer_model,
                      outcome.budget, body])
        tokens = context_tokens(outcome.messages, self.count) + sum(
            self.count(json.dumps(t, ensure_ascii=False)) for t in outcome.tools)
        return Task(kind="call" if isinstance(expected, ExpectedCall) else "answer", key=key,
                    request=digest(body), expected=expected, input_tokens=tokens)

    def _answer_body(self, outcome: CaseOutcome) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.answer_model, "messages": list(outcome.messages),
                                "max_tokens": self.answer_max_tokens}
        if outcome.tools:
            body["tools"] = list(outcome.tools)
            body["tool_choice"] = ("auto" if isinstance(outcome.expected, ExpectedCall)
                                   else "none")
        return body

    def estimate(self, tasks: Iterable[Task]) -> Estimate:
        """Calls, tokens and cached answers of ``tasks`` (each distinct request once)."""
        answers = judgments = cached = input_tokens = output_tokens = 0
        seen: set[str] = set()
        for task in tasks:
            reply = self.cache.get(task.key) or self.cache.by_request(task.request)
            if reply is None:
                if task.request in seen:
                    continue  # asked once, answered once, judged once
                seen.add(task.request)
                answers += 1
                input_tokens += task.input_tokens
                output_tokens += self.answer_max_tokens
            else:
                cached += 1
            if task.kind == "answer" and self._needs_judging(task, reply, seen):
                judgments += 1
                input_tokens += self._judge_tokens(task)
                output_tokens += self.judge_max_tokens
        return Estimate(answers=answers, judgments=judgments, cached=cached,
                        input_tokens=input_tokens, output_tokens=output_tokens)

    def _needs_judging(self, task: Task, reply: str | None, seen: set[str]) -> bool:
        """Whether a judgment will be sent for ``task`` (a known request is counted once)."""
        if reply is None:
            return True
        key, _ = self._judgment_request(task, reply)
        if key in seen or self._verdict(key) is not None:
            return False
        seen.add(key)
        return True

    def _judge_tokens(self, task: Task) -> int:
        expected = task.expected
        if not isinstance(expected, ExpectedAnswer):
            return 0
        prompt = judge_messages(expected.question, expected.answer, "")
        return context_tokens(prompt, self.count) + self.answer_max_tokens

    def pending(self, task: Task) -> bool:
        """Whether ``task`` still needs a call."""
        reply = self.cache.get(task.key) or self.cache.by_request(task.request)
        return reply is None or (task.kind == "answer" and self._judgment(task, reply) is None)

    def settle(self, task: Task, outcome: CaseOutcome) -> int:
        """Make the calls ``task`` still needs, store their replies; returns how many were made.

        A call that fails for this request alone is recorded in ``errors`` (not stored, so a
        rerun tries again).

        Raises:
            LLMError: the endpoint is unusable (``stops_the_run``); what is stored stays.
        """
        reply, made = self._answer(task, outcome)
        if reply is not None and task.kind == "answer":
            made += self._judge(task, reply)
        return made

    def _answer(self, task: Task, outcome: CaseOutcome) -> tuple[str | None, int]:
        """The stored or new answer, and the calls made for it (0 or 1)."""
        stored = self.cache.get(task.key)
        if stored is not None:
            return stored, 0
        reused = self.cache.by_request(task.request)
        if reused is not None:
            self.cache.put(task.key, kind=task.kind, model=self.answer_model,
                           request=task.request, reply=reused)
            return reused, 0
        body = self._answer_body(outcome)
        try:
            reply = self._call(lambda: self.client.respond(
                body["messages"], model=self.answer_model, tools=body.get("tools"),
                tool_choice=body.get("tool_choice"), max_tokens=self.answer_max_tokens))
        except LLMError as exc:
            if stops_the_run(exc):
                raise
            with self._lock:
                self.errors[task.key] = f"answer failed: {exc}"
            return None, 1
        text = json.dumps({"content": reply.content, "tool_calls": [
            {"name": c.name, "arguments": c.arguments} for c in reply.tool_calls]},
            ensure_ascii=False)
        self.cache.put(task.key, kind=task.kind, model=self.answer_model, request=task.request,
                       reply=text)
        return text, 1

    def _judge(self, task: Task, answer: str) -> int:
        """Judge ``answer`` unless its judgment is stored; returns the calls made (0 or 1)."""
        key, messages = self._judgment_request(task, answer)
        with self._lock:
            sending = self._judging.setdefault(key, threading.Lock())
        with sending:  # another thread sending the same request: wait, then read its reply
            if self._verdict(key) is not None:
                return 0
            if key in self._failed_judgments:
                self._unreadable(task, self._failed_judgments[key])
                return 0
            try:
                reply = self._call(lambda: self.client.respond(
                    messages, model=self.judge_model, max_tokens=self.judge_max_tokens))
            except LLMError as exc:
                if stops_the_run(exc):
                    raise
                with self._lock:
                    self.errors[task.key] = f"judgment failed: {exc}"
                return 1
            verdict = reply.content or ""
            if not readable(verdict):
                # Not stored: a judge that answered out of format once (a flaky proxy, a
                # sampled reply) or until it was fixed is asked again by the next run.
                self._failed_judgments[key] = unreadable_note(verdict)
                self._unreadable(task, self._failed_judgments[key])
                return 1
            self.cache.put(key, kind="judgment", model=self.judge_model, request=key,
                           reply=verdict)
            return 1

    def _unreadable(self, task: Task, note: str) -> None:
        with self._lock:
            self.errors[task.key] = note
            self.unreadable[task.key] = note

    def _call(self, send: Callable[[], ChatReply]) -> ChatReply:
        with self._lock:
            self.calls_made += 1
        return send()

    def _judgment_request(self, task: Task, answer: str) -> tuple[str, list[dict[str, Any]]]:
        expected = task.expected
        question = expected.question if isinstance(expected, ExpectedAnswer) else ""
        reference = expected.answer if isinstance(expected, ExpectedAnswer) else ""
        messages = judge_messages(question, reference, _answer_text(answer))
        return digest(["judgment", self.judge_model, messages]), messages

    def _judgment(self, task: Task, answer: str) -> str | None:
        key, _ = self._judgment_request(task, answer)
        return self._verdict(key)

    def _verdict(self, key: str) -> str | None:
        """The stored judgment under ``key`` when it can be read as a verdict.

        A reply that cannot (stored by an earlier version, which kept every reply) counts as
        missing, so it is asked again and replaced.
        """
        stored = self.cache.get(key)
        return stored if stored is not None and readable(stored) else None

    def run_note(self) -> str:
        """The line a judged run's notes open with: who judged, who answered, calls made."""
        return (f"judged by {self.judge_model}; answered by {self.answer_model}; "
                f"{self.calls_made} calls made now, replies in {self.cache.path}")

    def score(self, task: Task) -> Scored:
        """The task's score from what is stored (an error when something is missing)."""
        if task.key in self.errors:
            return Scored(kind=task.kind, correct=None, note=self.errors[task.key])
        answer = self.cache.get(task.key) or self.cache.by_request(task.request)
        if answer is None:
            return Scored(kind=task.kind, correct=None, note="not answered")
        if isinstance(task.expected, ExpectedCall):
            exact, why = compare_call(task.expected, _stored_reply(answer))
            return Scored(kind="call", correct=exact, note=why)
        verdict = self._judgment(task, answer)
        if verdict is None:
            return Scored(kind="answer", correct=None, note="not judged")
        return Scored(kind="answer", correct=parse_verdict(verdict))


def readable(verdict: str) -> bool:
    """Whether ``parse_verdict`` reads ``verdict`` as a grade."""
    try:
        parse_verdict(verdict)
    except UnparseableVerdict:
        return False
    return True


def unreadable_note(verdict: str) -> str:
    """The note of a task whose verdict could not be read, with the reply's start."""
    return f"unparseable verdict {json.dumps(verdict[:60], ensure_ascii=False)}"


def _stored_reply(text: str) -> ChatReply:
    data = json.loads(text)
    return ChatReply(content=data.get("content"), tool_calls=tuple(
        ReplyCall(name=c["name"], arguments=c["arguments"]) for c in data.get("tool_calls", [])))


def _answer_text(stored: str) -> str:
    reply = _stored_reply(stored)
    if reply.content and reply.content.strip():
        return reply.content.strip()
    if reply.tool_calls:  # a model that calls a tool instead of answering has not answered
        return "(no answer: the model called a tool)"
    return "(no answer)"


def judged_metrics(scores: Sequence[Scored]) -> dict[str, float | None]:
    """The judged metrics of one variant's scores.

    ``judged_correct``: share of the judged answers graded CORRECT; ``call_exact``: share of
    the expected calls made exactly; ``judge_errors``: tasks that could not be scored (they
    count in neither share).
    """
    answers = [Ratio.of(float(s.correct)) for s in scores if s.kind == "answer"
               and s.correct is not None]
    calls = [Ratio.of(float(s.correct)) for s in scores if s.kind == "call"
             and s.correct is not None]
    return {"judged_correct": _mean(answers), "call_exact": _mean(calls),
            "judge_errors": float(sum(s.correct is None for s in scores)) if scores else None}


def _mean(values: Sequence[Ratio]) -> float | None:
    return sum(v.numerator for v in values) / len(values) if values else None


def error_notes(scored: Mapping[str, Sequence[tuple[Any, Scored]]], limit: int = 5) -> list[str]:
    """Up to ``limit`` lines per variant naming cases that could not be scored and why."""
    lines = []
    for label, items in scored.items():
        failed = [(case, s) for case, s in items if s.correct is None]
        for case, s in failed[:limit]:
            lines.append(f"judge error ({label}): case {json.dumps(case)}: {s.note}")
        if len(failed) > limit:
            lines.append(f"judge error ({label}): {len(failed) - limit} more")
    return lines


Confirm = Callable[[Estimate], bool]
"""Shown the estimate before any call; False stops the run (nothing is sent)."""


class NotConfirmed(Exception):
    """The run was not confirmed after its estimate; nothing was sent."""


def judge_ablation(target: Target, judge: Judge, *, confirm: Confirm,
                   on_calls: Callable[[int], None] | None = None,
                   on_built: Callable[[str, int | None, Built], None] | None = None,
                   concurrency: int = 1) -> AblationResult:
    """Run the ablation of ``target``, then answer and score every case of every variant.

    Builds first (every variant, every budget) and estimates what is not stored yet; after
    ``confirm`` the builds that still need calls are made again and the calls sent,
    ``concurrency`` at a time, each reply stored as it comes (``on_calls``, on the calling
    thread, with the number of calls each group of identical requests made; ``on_built`` sees
    each build of the first pass). The judged metrics (``JUDGED_METRICS``) join each row.

    Raises:
        NotConfirmed: ``confirm`` said no.
        LLMError: the endpoint became unusable (``stops_the_run``); rerun to resume.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    tasks: dict[tuple[str, int | None], list[tuple[Any, Task]]] = {}

    def collect(label: str, budget: int | None, built: Built) -> None:
        if on_built is not None:
            on_built(label, budget, built)
        task = judge.task(target.name, built.plan_hash, built.outcome)
        if task is not None:
            tasks.setdefault((label, budget), []).append((built.outcome.case_id, task))

    result = run_ablation(target, on_built=collect)
    if not confirm(judge.estimate(t for items in tasks.values() for _, t in items)):
        raise NotConfirmed("not confirmed: nothing was sent")
    settle_all(judge, _pending_groups(target, judge, tasks, result), concurrency, on_calls)
    scored = {key: [(case, judge.score(task)) for case, task in items]
              for key, items in tasks.items()}
    extra = {key: judged_metrics([s for _, s in items]) for key, items in scored.items()}
    notes = error_notes({f"{label} @ {budget if budget is not None else 'per case'}": items
                         for (label, budget), items in scored.items()})
    notes.insert(0, judge.run_note())
    return with_metrics(result, extra, JUDGED_METRICS, notes)


def judge_cases(cases: Sequence[EvalCase], builder: ContextBuilder, run: CaseRun,
                judge: Judge, *, confirm: Confirm, source: str = "",
                on_result: Callable[[CaseResult], None] | None = None,
                on_calls: Callable[[int], None] | None = None,
                concurrency: int = 1) -> CasesResult:
    """``run_cases`` with every case that expects an answer or a call also judged.

    Each built case with an ``answer`` is answered by the model and graded by the judge
    (``judged_correct``); one with an ``expected_call`` is sent with its tools and its first
    call compared exactly (``call_exact``). The estimate goes to ``confirm`` first; replies are
    cached as in the judged ablation. A case that could not be judged gets no score and a note.

    Raises:
        NotConfirmed: ``confirm`` said no.
        LLMError: the endpoint became unusable (``stops_the_run``); rerun to resume.
    """
    built = []
    for case, build in iter_builds(cases, builder, run):
        if on_result is not None:
            on_result(build.result)
        outcome = build.outcome(case)
        built.append((build.result, outcome, judge.task("cases", plan_hash(build.plan),
                                                        outcome)))
    if not confirm(judge.estimate(task for _, _, task in built if task is not None)):
        raise NotConfirmed("not confirmed: nothing was sent")
    groups: dict[str, list[Job]] = {}
    for _, outcome, task in built:
        if task is not None and judge.pending(task):
            groups.setdefault(task.request, []).append((task, outcome))
    settle_all(judge, list(groups.values()), concurrency, on_calls)
    rows, notes = [], [judge.run_note()]
    for result, _, task in built:
        if task is None:
            rows.append(result)
            continue
        scored = judge.score(task)
        metric = "call_exact" if scored.kind == "call" else "judged_correct"
        value = None if scored.correct is None else float(scored.correct)
        rows.append(replace(result, scores={**result.scores, metric: value}))
        if scored.correct is None:
            notes.append(f"{result.id}: not judged: {scored.note}")
    return CasesResult(file=source, plan=run.label, budget=run.budget,
                       tokenizer=builder.tokenizer.name, cases=tuple(rows),
                       overall=overall(rows), notes=tuple(notes), judged=True,
                       judged_by=(judge.judge_model, judge.answer_model))


Job = tuple[Task, CaseOutcome]
"""A task still to settle, with the build it asks about."""


def _pending_groups(target: Target, judge: Judge,
                    tasks: Mapping[tuple[str, int | None], Sequence[tuple[Any, Task]]],
                    result: AblationResult) -> list[list[Job]]:
    """The jobs that still need calls, grouped by request body, in the order first met."""
    groups: dict[str, list[Job]] = {}
    by_label = {a.label: a for a in result.ablations}
    for (label, budget), items in tasks.items():
        if not any(judge.pending(task) for _, task in items):
            continue
        for built in target.builds(by_label.get(label), budget):
            task = judge.task(target.name, built.plan_hash, built.outcome)
            if task is not None and judge.pending(task) and task.key not in judge.errors:
                groups.setdefault(task.request, []).append((task, built.outcome))
    return list(groups.values())


def settle_all(judge: Judge, groups: Sequence[Sequence[Job]], concurrency: int,
               on_calls: Callable[[int], None] | None = None) -> None:
    """Settle every group, ``concurrency`` groups at a time (see the module docstring).

    An interruption (Ctrl-C) in the waiting thread stops new calls the same way: the groups
    not started are cancelled, the calls in flight finish (and are stored), and it is raised.

    Raises:
        LLMError: the first error that stops the run, once the calls in flight are done.
    """
    stop = threading.Event()

    def settle_group(group: Sequence[Job]) -> int:
        made = 0
        for task, outcome in group:
            if stop.is_set():
                break
            try:
                made += judge.settle(task, outcome)
            except BaseException:
                stop.set()
                raise
        return made

    if concurrency == 1:
        for group in groups:
            made = settle_group(group)
            if on_calls is not None:
                on_calls(made)
        return
    with ThreadPoolExecutor(max_workers=concurrency,
                            thread_name_prefix="contextwright-judge") as pool:
        futures: list[Future[int]] = [pool.submit(settle_group, g) for g in groups]
        try:
            failure = _collect(futures, on_calls)
        except BaseException:
            # Ctrl-C (or an error in ``on_calls``) here: leaving the block would wait for every
            # queued group to be sent, so stop the workers and drop the queue first.
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        if failure is not None:
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
    if failure is not None:
        raise failure


def _collect(futures: Sequence[Future[int]], on_calls: Callable[[int], None] | None
             ) -> BaseException | None:
    """Wait for the groups, reporting each one's calls; the first error stops the waiting."""
    for future in as_completed(futures):
        if future.cancelled():
            continue
        error = future.exception()
        if error is not None:
            return error  # the caller cancels the groups not started; those running stop soon
        if on_calls is not None:
            on_calls(future.result())
    return None
