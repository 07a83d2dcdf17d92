"""Tool-call accuracy of a real model under three ways of building its context.

For each task and configuration the context is built, sent once to an OpenAI-compatible chat
completions endpoint with the task's tools (through the official ``openai`` SDK), and the tool
calls the model returns are scored with ``toolcall_score.score_calls``. The configurations:

- ``a`` **no budget** — the system prompt, the whole history, the user message and this turn,
  concatenated as they are, with every tool: what the model gets without a context builder.
  If that exceeds the model's window the endpoint refuses the call, and it counts as wrong
  (``context_too_long``).
- ``b`` **fixed truncation** — the same message list cut to the newest whole messages whose
  tokens, with the tool schemas, fit the budget (a naive window: the system prompt is a message
  like any other, the oldest, and goes first; a tool result whose call was cut goes with it,
  since the API refuses orphans; the user message and this turn always stay).
- ``c`` **contextwright** — a shipped plan (``tool_heavy``) at the same budget: weighted shares,
  never-cut system prompt and input, whole rounds, tiered tool results, the digest of omitted
  turns; sent as ``ctx.to_request("openai", model=M)``.

More plans can be added as configurations ``plan:NAME`` (a shipped name or a plan file). Every
body is sent with ``temperature`` 0 and the same output reserve. Results can be kept in a JSONL
cache keyed by task, configuration, model and a hash of the exact body, so an interrupted run
resumes where it stopped and a changed task or budget is asked again; the model's calls kept
there are scored again against the task as it is now, so correcting a task's ``expected`` needs
no new call. This module does the I/O of the model calls and the cache file; it reads no
environment variables.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from contextwright.builder import ContextBuilder
from contextwright.core.accounting import REPLY_PRIMING, message_tokens, schema_tokens
from contextwright.core.items import parse_message
from contextwright.core.plan import SHIPPED_PLANS, BuildPlan
from contextwright.core.request import Request
from contextwright.errors import ContextwrightError, InvalidInputError, PlanError
from contextwright.evaluate.toolcall_score import (
    VERDICTS,
    ModelCall,
    Score,
    ToolCallTask,
    Verdict,
    check_unique,
    score_calls,
    task_from_dict,
)
from contextwright.llm.client import call_arguments, make_sdk_client
from contextwright.sources.tools import schema_json
from contextwright.tokens import CountingTokenizer, get_tokenizer

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)
_NOT_JSON = object()

DEFAULT_BUDGET = 5120
"""Tokens for configuration b and the plans: an 8,192-token window at the default safety ratio
and output reserve (``floor(8192 × 0.75) − 1024``)."""
DEFAULT_PLAN = "tool_heavy"
RESERVED_OUTPUT = 1024
"""Output tokens every configuration asks for (the shipped plans' reserve)."""
BUILTIN_CONFIGS: Mapping[str, str] = {"a": "no budget", "b": "fixed truncation",
                                      "c": "contextwright"}
MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")
"""Message fields the chat-completions API takes (a request file's ``id``/``timestamp`` are
contextwright's own and are not sent)."""
_CONTEXT_ERROR = re.compile(r"context[ _-]?(length|size|window)|maximum context|too many tokens|"
                            r"prompt is too long|exceeds the (available )?context", re.I)


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalConfig:
    """One way of building the context."""

    key: str
    """``a``, ``b``, ``c`` or ``plan:NAME``."""
    label: str
    """Shown in tables."""
    kind: Literal["everything", "window", "plan"]
    """How the context is made."""
    plan: BuildPlan | None = None
    """The plan of a ``plan`` configuration."""


def make_configs(keys: Sequence[str], plans: Sequence[str] = (),
                 default_plan: str = DEFAULT_PLAN) -> list[EvalConfig]:
    """Configurations for ``keys`` (``a``, ``b``, ``c``) and one per extra plan.

    Raises ``PlanError`` for an unknown key or a plan that does not load.
    """
    configs: list[EvalConfig] = []
    for key in keys:
        if key == "a":
            configs.append(EvalConfig(key="a", label="a: no budget", kind="everything"))
        elif key == "b":
            configs.append(EvalConfig(key="b", label="b: fixed truncation", kind="window"))
        elif key == "c":
            configs.append(EvalConfig(key="c", label=f"c: contextwright {default_plan}",
                                      kind="plan", plan=_plan(default_plan)))
        else:
            raise PlanError(f"unknown configuration {key!r}; choose from a, b, c")
    for name in plans:
        configs.append(EvalConfig(key=f"plan:{name}", label=f"contextwright {name}",
                                  kind="plan", plan=_plan(name)))
    if len({c.key for c in configs}) != len(configs):
        raise PlanError("a configuration is named twice")
    if not configs:
        raise PlanError("no configuration to run")
    return configs


def _plan(name: str) -> BuildPlan:
    return BuildPlan.named(name) if name in SHIPPED_PLANS else BuildPlan.load(name)


# --- building each configuration's request body ------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    """A request body ready for ``client.chat.completions.create(**body)``, or why not."""

    body: dict[str, Any] | None
    """The body; None when the context could not be built."""
    prompt_tokens: int
    """Tokens of the context as contextwright counts them (0 when not built)."""
    error: str = ""
    """Why the context could not be built."""


def prepare(task: ToolCallTask, config: EvalConfig, *, budget: int, model: str,
            tokenizer: CountingTokenizer, temperature: float = 0.0) -> Prepared:
    """The request body of ``task`` under ``config``."""
    request = Request.from_dict(task.request)
    if config.kind == "plan":
        assert config.plan is not None
        try:
            plan = config.plan.with_budget(available_override=budget,
                                           reserved_output=RESERVED_OUTPUT)
            ctx = ContextBuilder(tokenizer=tokenizer).build(plan, request)
        except ContextwrightError as exc:
            return Prepared(body=None, prompt_tokens=0, error=f"{type(exc).__name__}: {exc}")
        body = ctx.to_request("openai", model=model)
        return Prepared(body={**body, "temperature": temperature},
                        prompt_tokens=ctx.total_tokens)
    messages = everything_messages(request)
    if config.kind == "window":
        messages = fixed_window(messages, len(messages) - 1 - len(request.turn),
                                budget - tools_tokens(request.tools, tokenizer), tokenizer)
    body = {"model": model, "messages": messages, "tools": [dict(t) for t in request.tools],
            "max_completion_tokens": RESERVED_OUTPUT, "temperature": temperature}
    if not request.tools:
        del body["tools"]
    return Prepared(body=body, prompt_tokens=messages_tokens(messages, tokenizer)
                    + tools_tokens(request.tools, tokenizer))


def everything_messages(request: Request) -> list[dict[str, Any]]:
    """System prompt, history, user message and this turn, as they are (API fields only)."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.extend(_api_message(m) for m in request.history)
    messages.append({"role": "user", "content": request.user_input})
    messages.extend(_api_message(m) for m in request.turn)
    return messages


def _api_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """The message with the API's fields only, its calls' arguments as JSON text.

    A request may give a call's arguments as an object; the API takes only a string, and
    configuration ``c`` sends one, so ``a`` and ``b`` must too or the comparison is unfair.
    """
    sent = {key: message[key] for key in MESSAGE_KEYS if key in message}
    if sent.get("tool_calls"):
        parsed = parse_message(message, "message").tool_calls
        sent["tool_calls"] = [
            {**raw, "function": {**raw.get("function", {}), "arguments": call.arguments}}
            for raw, call in zip(sent["tool_calls"], parsed, strict=True)]
    return sent


def fixed_window(messages: Sequence[dict[str, Any]], keep_from: int, budget: int,
                 tokenizer: CountingTokenizer) -> list[dict[str, Any]]:
    """The newest whole messages that fit ``budget`` (messages from ``keep_from`` always stay).

    A leading tool result whose call was cut is dropped as well: the API refuses a tool
    message without its call.
    """
    used = sum(_tokens(m, tokenizer) for m in messages[keep_from:]) + REPLY_PRIMING
    start = keep_from
    while start > 0 and used + _tokens(messages[start - 1], tokenizer) <= budget:
        start -= 1
        used += _tokens(messages[start], tokenizer)
    while start < keep_from and messages[start]["role"] == "tool":
        start += 1
    return list(messages[start:])


def _tokens(message: Mapping[str, Any], tokenizer: CountingTokenizer) -> int:
    return message_tokens(parse_message(message, "message"), tokenizer)


def messages_tokens(messages: Sequence[Mapping[str, Any]], tokenizer: CountingTokenizer) -> int:
    """Tokens of a message list, counted as contextwright counts a built context."""
    return REPLY_PRIMING + sum(_tokens(m, tokenizer) for m in messages)


def tools_tokens(tools: Sequence[Mapping[str, Any]], tokenizer: CountingTokenizer) -> int:
    """Tokens of the tool schemas, counted as contextwright counts them."""
    return sum(schema_tokens(schema_json(tool), tokenizer) for tool in tools)


# --- calling the model -------------------------------------------------------------------


def make_client(base_url: str, api_key: str, *, timeout: float = 120.0,
                max_retries: int = 2) -> openai.OpenAI:
    """An ``openai.OpenAI`` client for the endpoint (needs the ``llm`` extra).

    Raises ``LLMError`` (kind ``config``) for a base URL that is not an http(s) URL.
    """
    return make_sdk_client(base_url, api_key, timeout, max_retries)


def ask_model(client: openai.OpenAI, body: Mapping[str, Any]
              ) -> tuple[list[ModelCall], Score | None]:
    """The model's tool calls, or the verdict of a call the API could not make."""
    import openai

    try:
        completion = client.chat.completions.create(**body)
    except openai.APIStatusError as exc:
        if exc.status_code in (400, 413) and _context_error(exc):
            return [], Score(verdict="context_too_long",
                             detail=f"HTTP {exc.status_code}: the context exceeds the window")
        return [], Score(verdict="api_error", detail=f"HTTP {exc.status_code}")
    except openai.APITimeoutError:
        return [], Score(verdict="api_error", detail="timed out")
    except openai.APIConnectionError:
        return [], Score(verdict="api_error", detail="cannot reach the endpoint")
    except ValueError:  # a 200 whose body is not JSON
        return [], Score(verdict="api_error", detail="the reply is not JSON")
    return reply_calls(completion)


NOT_A_COMPLETION = Score(verdict="api_error", detail="the reply is not a chat completion")


def reply_calls(completion: object) -> tuple[list[ModelCall], Score | None]:
    """The tool calls of a completion's first choice, or an ``api_error`` for another shape.

    The SDK builds its objects without checking them, so a server or proxy that answers 200
    with plain text, an HTML page or another layout gives strings or dicts where objects
    belong: every step is checked. A call is taken by its function's name and arguments,
    whatever its ``type`` says (some servers leave it out).
    """
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list):
        return [], NOT_A_COMPLETION
    if not choices:
        return [], Score(verdict="api_error", detail="the reply has no choices")
    message = getattr(choices[0], "message", None)
    if not (hasattr(message, "content") or hasattr(message, "tool_calls")):
        return [], NOT_A_COMPLETION
    raw_calls = getattr(message, "tool_calls", None) or []
    if not isinstance(raw_calls, list):
        return [], NOT_A_COMPLETION
    calls = []
    for call in raw_calls:
        function = getattr(call, "function", None)
        name = getattr(function, "name", None)
        arguments = getattr(function, "arguments", None)
        text = "" if arguments is None else call_arguments(arguments)
        if not isinstance(name, str) or text is None:
            return [], Score(verdict="api_error",
                             detail="a tool call of the reply has no name or arguments")
        calls.append(ModelCall(name=name, arguments=text))
    return calls, None


def _context_error(exc: openai.APIStatusError) -> bool:
    """Whether a refusal says the context is too long (OpenAI, vLLM, llama.cpp phrase it so)."""
    code = getattr(exc, "code", None)
    if code == "context_length_exceeded":
        return True
    body = exc.body if isinstance(exc.body, Mapping) else {}
    error = body.get("error", body)
    text = " ".join(str(error.get(k, "")) for k in ("message", "code", "type")) if isinstance(
        error, Mapping) else str(error)
    return bool(_CONTEXT_ERROR.search(f"{text} {exc.message}"))


# --- running, caching, summarising -------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """One task under one configuration."""

    task: str
    """Task id."""
    family: str
    """Task family."""
    config: str
    """Configuration key."""
    verdict: Verdict
    """See ``toolcall_score``."""
    detail: str
    """Why, when not correct."""
    calls: tuple[dict[str, str], ...]
    """The calls the model made (name, arguments)."""
    prompt_tokens: int
    """Tokens of the context sent, as contextwright counts them."""
    cached: bool = False
    """Read from the cache instead of asked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigSummary:
    """Accuracy of one configuration over all tasks."""

    config: str
    """Configuration key."""
    label: str
    """Shown in tables."""
    tasks: int
    """Tasks run."""
    correct: int
    """Tasks whose calls were exactly right."""
    verdicts: Mapping[str, int]
    """How many tasks got each verdict."""
    mean_prompt_tokens: float
    """Mean tokens of the contexts sent."""

    @property
    def accuracy(self) -> float:
        """Share of tasks called exactly right."""
        return self.correct / self.tasks if self.tasks else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolcallRun:
    """A whole run: per-configuration summaries and every outcome."""

    model: str
    """Model name sent."""
    budget: int
    """Budget of configurations b and plans."""
    tasks: int
    """Number of tasks."""
    summaries: tuple[ConfigSummary, ...]
    """One per configuration, in the order asked."""
    outcomes: tuple[Outcome, ...] = field(repr=False)
    """Every (task, configuration) outcome."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``--json``)."""
        return {"model": self.model, "budget": self.budget, "tasks": self.tasks,
                "configs": [{**asdict(s), "accuracy": round(s.accuracy, 4)}
                            for s in self.summaries],
                "outcomes": [asdict(o) for o in self.outcomes]}

    @property
    def api_errors(self) -> int:
        """Calls that failed for a reason other than the model's answer or a long context."""
        return sum(o.verdict == "api_error" for o in self.outcomes)


class ResultCache:
    """Outcomes kept in a JSONL file, so an interrupted run resumes (API errors are not kept).

    A run killed while appending leaves its last line cut off (no newline, not JSON): that line
    is dropped from the file, ``on_warning`` is told (default: this module's logger), and its
    task is asked again. Any other line that is not a record is an ``InvalidInputError`` naming
    it, and the file is left as it is.
    """

    def __init__(self, path: Path, *,
                 on_warning: Callable[[str], None] | None = None) -> None:
        self.path = path
        self._known: dict[str, dict[str, Any]] = {}
        self._warn = on_warning or logger.warning
        self._newline_first = False
        if path.exists():
            self._read()
        self._check_writable()

    def _check_writable(self) -> None:
        """Open the file for appending once (making it when new), before any call is paid for.

        A cache that cannot be written must fail the run now, not after the first call.
        """
        try:
            with self.path.open("a", encoding="utf-8"):
                pass
        except OSError as exc:
            raise InvalidInputError(f"cannot write cache {self.path}: "
                                    f"{exc.strerror or type(exc).__name__}") from None

    def _read(self) -> None:
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            raise InvalidInputError(f"cannot read cache {self.path}: "
                                    f"{type(exc).__name__}") from None
        whole, _, tail = data.rpartition(b"\n")
        lines = whole.split(b"\n") if b"\n" in data else []
        for number, line in enumerate(lines, start=1):
            self._keep(self._record(line, number))
        if tail.strip():
            self._read_tail(tail, len(lines) + 1, len(data) - len(tail))

    def _read_tail(self, tail: bytes, number: int, end: int) -> None:
        """The text after the last newline: a record written whole, or a write cut off."""
        if _json(tail) is _NOT_JSON:
            self._drop_torn(number, end, len(tail))
            return
        # Whole JSON after the last newline is not a cut-off write: it must be a record.
        self._keep(self._record(tail, number))
        self._newline_first = True

    def _drop_torn(self, number: int, end: int, size: int) -> None:
        # Appending after the fragment would glue the next record to it and corrupt the file
        # for every later run, so the fragment goes now.
        try:
            with self.path.open("r+b") as handle:
                handle.truncate(end)
        except OSError as exc:
            raise InvalidInputError(f"cache {self.path} line {number} was cut off mid-write "
                                    f"and cannot be removed: {type(exc).__name__}") from None
        self._warn(f"cache {self.path}: line {number} was cut off mid-write (an interrupted "
                   f"run?); dropped it ({size} bytes), its task is asked again")

    def _record(self, line: bytes, number: int) -> tuple[str, dict[str, Any]]:
        record = _json(line)
        try:
            if not isinstance(record, dict):
                raise TypeError
            key, outcome = str(record["key"]), dict(record["outcome"])
            # Read back now, so a record a resumed run could not use (no task, an unknown
            # verdict) is named by its line here, not a crash when its task comes up.
            _from_record(outcome)
        except (KeyError, TypeError, ValueError, InvalidInputError):
            raise InvalidInputError(f"cache {self.path} line {number} is not a cache "
                                    "record") from None
        return key, outcome

    def _keep(self, record: tuple[str, dict[str, Any]]) -> None:
        key, outcome = record
        self._known[key] = outcome

    def get(self, key: str) -> dict[str, Any] | None:
        """The outcome kept for ``key``."""
        return self._known.get(key)

    def put(self, key: str, outcome: Outcome) -> None:
        """Keep ``outcome`` (appended and flushed at once: a crash loses nothing before it)."""
        record = asdict(outcome)
        self._known[key] = record
        line = json.dumps({"key": key, "outcome": record}, ensure_ascii=False) + "\n"
        try:
            with self.path.open("a", encoding="utf-8") as out:
                out.write(("\n" if self._newline_first else "") + line)
        except OSError as exc:
            raise InvalidInputError(f"cannot write cache {self.path}: "
                                    f"{exc.strerror or type(exc).__name__}") from None
        self._newline_first = False


def _json(line: bytes) -> Any:
    """The JSON value of one line, or ``_NOT_JSON`` when it is not UTF-8 JSON."""
    try:
        return json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return _NOT_JSON


def cache_key(task: ToolCallTask, config: EvalConfig, body: Mapping[str, Any]) -> str:
    """Task, configuration and model, and a hash of the exact body (which names the model)."""
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode())
    return f"{task.id}|{config.key}|{body.get('model')}|{digest.hexdigest()[:16]}"


def run_toolcalls(tasks: Sequence[ToolCallTask], configs: Sequence[EvalConfig], *,
                  client: openai.OpenAI, model: str, budget: int = DEFAULT_BUDGET,
                  tokenizer: str = "o200k_base", cache: ResultCache | None = None,
                  temperature: float = 0.0,
                  on_outcome: Callable[[Outcome], None] | None = None) -> ToolcallRun:
    """Every task under every configuration, one model call each."""
    counter = get_tokenizer(tokenizer)
    outcomes: list[Outcome] = []
    for task in tasks:
        for config in configs:
            outcome = _one(task, config, client=client, model=model, budget=budget,
                           tokenizer=counter, cache=cache, temperature=temperature)
            outcomes.append(outcome)
            if on_outcome is not None:
                on_outcome(outcome)
    return ToolcallRun(model=model, budget=budget, tasks=len(tasks),
                       summaries=tuple(summarise(outcomes, c) for c in configs),
                       outcomes=tuple(outcomes))


def _one(task: ToolCallTask, config: EvalConfig, *, client: openai.OpenAI, model: str,
         budget: int, tokenizer: CountingTokenizer, cache: ResultCache | None,
         temperature: float) -> Outcome:
    prepared = prepare(task, config, budget=budget, model=model, tokenizer=tokenizer,
                       temperature=temperature)
    if prepared.body is None:
        return Outcome(task=task.id, family=task.family, config=config.key,
                       verdict="build_error", detail=prepared.error, calls=(),
                       prompt_tokens=0)
    key = cache_key(task, config, prepared.body)
    kept = cache.get(key) if cache is not None else None
    if kept is not None:
        return _rescored(_from_record(kept), task)
    calls, failure = ask_model(client, prepared.body)
    score = failure or score_calls(task.expected, calls, task.request.get("tools") or [])
    outcome = Outcome(task=task.id, family=task.family, config=config.key,
                      verdict=score.verdict, detail=score.detail,
                      calls=tuple({"name": c.name, "arguments": c.arguments} for c in calls),
                      prompt_tokens=prepared.prompt_tokens)
    if cache is not None and outcome.verdict != "api_error":
        cache.put(key, outcome)
    return outcome


def _from_record(record: Mapping[str, Any]) -> Outcome:
    """An outcome read back from the cache."""
    verdict = record.get("verdict")
    if verdict not in VERDICTS:
        raise InvalidInputError("a cache record has an unknown verdict")
    return Outcome(task=str(record["task"]), family=str(record.get("family", "")),
                   config=str(record["config"]), verdict=verdict,
                   detail=str(record.get("detail", "")),
                   calls=tuple(dict(c) for c in record.get("calls", ())),
                   prompt_tokens=int(record.get("prompt_tokens", 0)), cached=True)


RUNNER_VERDICTS = frozenset(("context_too_long", "api_error", "build_error"))
"""Verdicts about the call, not the model's answer: nothing to score again."""


def _rescored(outcome: Outcome, task: ToolCallTask) -> Outcome:
    """A kept outcome scored again against the task as it is now.

    The cache key holds the body sent, not ``expected``: a task whose expectation was
    corrected must not keep the old verdict, and the model's calls are kept, so no call is
    needed to score them.
    """
    if outcome.verdict in RUNNER_VERDICTS:
        return outcome
    calls = [ModelCall(name=str(c.get("name", "")), arguments=_text(c.get("arguments")))
             for c in outcome.calls]
    score = score_calls(task.expected, calls, task.request.get("tools") or [])
    return replace(outcome, verdict=score.verdict, detail=score.detail)


def _text(arguments: object) -> str:
    return call_arguments(arguments) or ("" if arguments is None else str(arguments))


def summarise(outcomes: Sequence[Outcome], config: EvalConfig) -> ConfigSummary:
    """The summary of ``config``'s outcomes."""
    mine = [o for o in outcomes if o.config == config.key]
    verdicts = Counter(o.verdict for o in mine)
    tokens = [o.prompt_tokens for o in mine if o.prompt_tokens]
    return ConfigSummary(config=config.key, label=config.label, tasks=len(mine),
                         correct=verdicts["correct"],
                         verdicts={v: verdicts[v] for v in VERDICTS},
                         mean_prompt_tokens=sum(tokens) / len(tokens) if tokens else 0.0)


COLUMNS = (("wrong tool", "wrong_tool"), ("wrong count", "wrong_count"),
           ("wrong args", "wrong_args"), ("no call", "no_call"),
           ("too long", "context_too_long"), ("API error", "api_error"),
           ("build error", "build_error"))


def format_table(run: ToolcallRun) -> str:
    """The per-configuration table, plain text."""
    header = ["config", "accuracy", *(name for name, _ in COLUMNS), "mean tokens"]
    rows = [[s.label, f"{s.accuracy:.0%} ({s.correct}/{s.tasks})",
             *(str(s.verdicts.get(v, 0)) for _, v in COLUMNS), f"{s.mean_prompt_tokens:,.0f}"]
            for s in run.summaries]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [f"tool-call accuracy — model {run.model}, {run.tasks} tasks, budget {run.budget:,} "
             "tokens (configurations b and c)",
             "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def format_markdown(run: ToolcallRun) -> str:
    """The same table in Markdown (for a README)."""
    header = ["config", "accuracy", *(name for name, _ in COLUMNS), "mean tokens"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for s in run.summaries:
        cells = [s.label, f"{s.accuracy:.0%} ({s.correct}/{s.tasks})",
                 *(str(s.verdicts.get(v, 0)) for _, v in COLUMNS),
                 f"{s.mean_prompt_tokens:,.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def builtin_tasks() -> list[ToolCallTask]:
    """The 30 generated tasks (``toolcall_tasks.generate_tasks``), validated."""
    from contextwright.evaluate.toolcall_tasks import generate_tasks

    return check_unique([task_from_dict(t, f"task {t['id']}") for t in generate_tasks()],
                        "built-in tasks")
