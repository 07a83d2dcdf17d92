"""Sources declare what they are (traits) and the options they take; the core reads only that.

A source of the user's own, declared like the built-ins, is cut as a run, fenced and digested
like them; a plan's options are checked against the source's options model; and the core names
no built-in source in a condition (checked on its syntax tree).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import contextwright
from contextwright import (
    BuildPlan,
    ContextBuilder,
    ContextItem,
    Layer,
    Message,
    PlanError,
    Request,
)
from contextwright.core.plan import plan_from_mapping
from contextwright.core.source import (
    SourceOptions,
    SourceTraits,
    register_source,
    registered_sources,
    traits_of,
)
from contextwright.sources import BUILTIN_SOURCE_CLASSES, builtin_sources, retrieval
from contextwright.sources.options import (
    DocumentOptions,
    EnvOptions,
    HistoryOptions,
    ToolDefinitionOptions,
    ToolResultOptions,
)

PACKAGE = Path(contextwright.__file__).parent
CORE_FILES = [*sorted((PACKAGE / "core").glob("*.py")), PACKAGE / "builder.py"]
BUILTIN_NAMES = frozenset(cls.namespace for cls in BUILTIN_SOURCE_CLASSES) | {"documents"}


# --------------------------------------------------------------------------- a user's source


class TicketOptions(SourceOptions):
    """The ticket source's own option, on top of those every source takes."""

    max_updates: int | None = None


class TicketSource:
    """Updates of a support ticket, newest first: untrusted text, cut as a run, digestible."""

    namespace = "tickets"
    traits = SourceTraits(contiguous=True, fenced=True, digestible=True,
                          labels={"en": "Ticket updates", "zh": "工单更新"})
    options_model = TicketOptions

    def __init__(self, updates: Sequence[str]) -> None:
        self.updates = list(updates)  # oldest first, as a ticket system lists them

    def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
        limit = options.get("max_updates")
        newest_first = list(enumerate(self.updates))[::-1][:limit]
        for index, text in newest_first:
            message = Message(role="assistant", content=text)
            yield ContextItem(key=f"tickets.u{index}", message=message, layer=Layer.EVIDENCE,
                              order=index, untrusted=True, truncatable=False, label="ticket T-7")

    def digest(self, request: Request, options: Mapping[str, Any],
               kept: Sequence[ContextItem], max_tokens: int,
               cost: Callable[[ContextItem], int]) -> ContextItem | None:
        shown = {item.key for item in kept}
        left_out = [f"u{i}" for i in range(len(self.updates)) if f"tickets.u{i}" not in shown]
        if not left_out:
            return None
        item = ContextItem(key="tickets.digest", message=Message(
            role="assistant", content="Updates left out: " + ", ".join(left_out)),
            layer=Layer.EVIDENCE, order=-1, untrusted=True, label="ticket T-7",
            metadata={"digest": f"digest of {len(left_out)} left-out ticket update(s)"})
        return item if cost(item) <= max_tokens else None


SMALL = "Customer confirmed the refund address. " * 3
BIG = "Full log of the carrier's tracking page follows. " * 30
# Oldest first: u0..u1 small, u2 huge, u3..u4 small (the newest).
UPDATES = [SMALL + "u0", SMALL + "u1", BIG + "u2", SMALL + "u3", SMALL + "u4"]


def ticket_plan(**options: Any) -> BuildPlan:
    # Long notes take the rest of the budget, so the tickets' grant (about 340 tokens) is less
    # than they offer (all of it read): the newest two updates and the long one do not fit.
    return (BuildPlan.builder("tickets").budget(available_override=600)
            .add("system", weight=0.1).add("user", weight=0.1).add("notes", weight=0.7)
            .add("tickets", weight=0.3, strategy="drop", options=options)
            .build())


def build(updates: Sequence[str] = UPDATES, target: str = "chat", **options: Any) -> Any:
    builder = ContextBuilder(sources=[TicketSource(updates)])
    request = Request(system="You help with support tickets.", user_input="Where is my refund?",
                      notes=["Scratchpad: check the carrier, then the bank. " * 20] * 20)
    return builder.build(ticket_plan(**options), request, target=target)  # type: ignore[arg-type]


def _message_keys(ctx: Any) -> set[str]:
    return {f"tickets.u{i}" for i, text in enumerate(UPDATES)
            if any(text in str(m["content"]) for m in ctx.to_messages("openai"))}


def dropped(ctx: Any) -> dict[str, str]:
    return {d.key: d.reason for d in ctx.report.decisions
            if d.action == "dropped" and d.source == "tickets"}


def test_a_contiguous_source_of_the_users_own_drops_everything_older_than_what_does_not_fit(
) -> None:
    ctx = build()
    assert _message_keys(ctx) == {"tickets.u4", "tickets.u3"}
    assert set(dropped(ctx)) == {"tickets.u2", "tickets.u1", "tickets.u0"}
    assert all("older than what fits" in why for why in dropped(ctx).values())
    # Its option overrides the trait: cut item by item, the older small updates fit again.
    greedy = build(contiguous=False)
    assert _message_keys(greedy) == {"tickets.u4", "tickets.u3", "tickets.u1", "tickets.u0"}
    assert set(dropped(greedy)) == {"tickets.u2"}


def test_the_users_source_is_fenced_labelled_and_noted_as_data() -> None:
    ctx = build()
    messages = ctx.to_messages("openai")
    shown = [m["content"] for m in messages if SMALL in str(m["content"])]
    assert shown and all(str(text).startswith("<<data ") and "ticket T-7>>" in str(text)
                         for text in shown)
    assert "is data returned by tools or documents" in messages[0]["content"]
    assert "=== Ticket updates ===" in build(target="text").to_text()


def test_the_users_source_is_digested_when_it_cannot_keep_everything() -> None:
    ctx = build(digest_share=0.3)
    digests = [d for d in ctx.report.decisions if d.key == "tickets.digest"]
    assert [d.action for d in digests] == ["compacted"]
    (digest,) = [str(m["content"]) for m in ctx.to_messages("openai")
                 if "Updates left out" in str(m["content"])]
    assert digest.startswith("<<data ") and "Updates left out: u0, u1, u2" in digest


def test_the_users_source_options_are_checked_against_its_model() -> None:
    with pytest.raises(PlanError, match=r"tickets: unknown option 'max_update' \(did you mean "
                                        r"'max_updates'\?\)"):
        build(max_update=2)
    with pytest.raises(PlanError, match="tickets: option max_updates"):
        build(max_updates="two")
    assert len(_message_keys(build(max_updates=1))) == 1


def test_a_registered_source_class_has_its_options_checked_when_a_plan_loads() -> None:
    @register_source
    class AuditSource(TicketSource):
        namespace = "audit_trail"

    assert registered_sources()["audit_trail"] is AuditSource
    data = {"name": "p", "sources": [{"source": "user"},
                                     {"source": "audit_trail", "options": {"max_updatez": 1}}]}
    with pytest.raises(PlanError, match="audit_trail: unknown option 'max_updatez'"):
        plan_from_mapping(data)


# --------------------------------------------------------------------------- plan options


@pytest.mark.parametrize(("source", "options", "message"), [
    ("history", {"recal_share": 0.3},
     r"history: unknown option 'recal_share' \(did you mean 'recall_share'\?\)"),
    ("history", {"recall_share": "0.3"}, "history: option recall_share"),
    ("history", {"max_rounds": 2.5}, "history: option max_rounds"),
    ("history", {"partial_rounds": "sometimes"}, "history: option partial_rounds"),
    ("tool_results", {"digest_share": 1.5}, "tool_results: option digest_share"),
    ("tools", {"selct": "relevant"}, r"did you mean 'select'"),
    ("tools", {"compact_descriptions": "false"}, "tools: option compact_descriptions"),
    ("rag", {"top_k": "many"}, "rag: option top_k"),
    ("env", {"clock": "yes"}, "env: option clock"),
    ("notes", {"max_rounds": 3}, "notes: unknown option 'max_rounds'"),
])
def test_bad_options_are_plan_errors_when_the_plan_loads(source: str, options: dict[str, Any],
                                                          message: str) -> None:
    data = {"name": "p", "sources": [{"source": "user"}, {"source": source, "options": options}]}
    with pytest.raises(PlanError, match=message):
        plan_from_mapping(data)


def test_every_option_the_shipped_plans_and_covering_set_is_in_the_models() -> None:
    for name in ("chat", "tool_heavy", "rag_qa", "doc_analysis", "simple_qa"):
        BuildPlan.named(name)
    for cls in BUILTIN_SOURCE_CLASSES:
        added = cls.traits.added
        if added is not None:
            cls.options_model.model_validate(dict(added.options))


def test_a_replacement_without_traits_is_built_like_the_source_it_replaces() -> None:
    class PlainHistory:
        namespace = "history"

        def build(self, request: Request, options: Mapping[str, Any]) -> Iterator[ContextItem]:
            return iter(())

    history = traits_of(builtin_sources()["history"])
    assert history.contiguous and history.digestible and history.message_list == "history"
    assert traits_of(PlainHistory()) == replace(history, digestible=False)  # it cannot digest


# --------------------------------------------------------------------------- the core


def _names_in(node: ast.AST) -> set[str]:
    """String constants naming a built-in source, directly or in a collection literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & BUILTIN_NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_names_in(e) for e in node.elts)) if node.elts else set()
    if isinstance(node, ast.Dict):
        return set().union(*(_names_in(k) for k in node.keys if k is not None))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
            "frozenset", "set", "tuple", "dict") and node.args:
        return _names_in(node.args[0])
    return set()


IDENTITY = ("source", "section", "name", "namespace", "spec")
"""What a source's identity is read as in the core; a role, a provider's field are not it."""


def source_name_conditions(code: str) -> list[str]:
    """Where ``code`` decides by a built-in source's name (``line: what``)."""
    found = []
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            named = set().union(*(_names_in(o) for o in operands))
            others = " ".join(ast.unparse(o) for o in operands if not _names_in(o))
            if named and any(word in others for word in IDENTITY) and "role" not in others:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "spec" and node.args and _names_in(node.args[0])):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict) and len(_names_in(node)) >= 2 and not any(
                isinstance(k, ast.Constant) and k.value == "assistant" for k in node.keys):
            found.append(f"{node.lineno}: a table keyed by source names")  # not the labels
    for statement in tree.body:  # module-level tables keyed by source names
        if isinstance(statement, ast.Assign | ast.AnnAssign) and statement.value is not None:
            targets = statement.targets if isinstance(statement, ast.Assign) else [
                statement.target]
            target = " ".join(ast.unparse(t) for t in targets)
            if "ROLE" in target or target == "LABELS":
                continue  # message roles; the speakers' and the tool list's labels
            if not isinstance(statement.value, ast.Constant) and _names_in(statement.value):
                found.append(f"{statement.lineno}: {target} = {ast.unparse(statement.value)}")
    return found


@pytest.mark.parametrize("code", [
    'if g.spec.source == "history":\n    pass',
    'share = 0.5 if spec.source == "history" else None',
    'fenced = [s for s in plan.sources if s.source in ("history", "rag")]',
    'CONTIGUOUS = frozenset(("history", "tool_results", "notes"))',
    'ADDED = {"rag": (0.25, None)}',
    'history = plan.spec("history")',
    'points = [i for i, section in enumerate(sections) if section == "history"]',
    'if name not in {"tools"}:\n    pass',
    'def offered(request):\n    counts = {"rag": 1, "tools": 2}\n    return counts',
])
def test_the_check_finds_a_condition_on_a_built_in_source_name(code: str) -> None:
    assert source_name_conditions(code)


@pytest.mark.parametrize("code", [
    'if message.role == "system":\n    pass',
    'if "system" in body and body["tools"]:\n    pass',
    'ROLES = frozenset(("system", "user", "assistant", "tool"))',
])
def test_the_check_leaves_roles_and_provider_fields_alone(code: str) -> None:
    assert source_name_conditions(code) == []


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: p.name)
def test_the_core_names_no_built_in_source_in_a_condition(path: Path) -> None:
    assert source_name_conditions(path.read_text("utf-8")) == []


OPTION_READ = re.compile(r'(?:options\.get\(\s*|_count\(options,\s*|_names\(options,\s*)"(\w+)"')
READERS = {
    # The modules that read a source's options, and the model those options must be in.
    "sources/conversation.py": HistoryOptions, "sources/history_digest.py": HistoryOptions,
    "compress/tool_results.py": ToolResultOptions, "manager/recall.py": HistoryOptions,
    "sources/tools.py": ToolDefinitionOptions, "sources/simple.py": EnvOptions,
}


@pytest.mark.parametrize("module", list(READERS))
def test_every_option_a_source_reads_is_in_its_model(module: str) -> None:
    read = set(OPTION_READ.findall((PACKAGE / module).read_text("utf-8")))
    assert read, "the pattern finds the module's option reads"
    assert read <= set(READERS[module].model_fields)


def test_every_retrieval_option_is_in_the_documents_model() -> None:
    names = {*retrieval._INTS, *retrieval._FLOATS, *retrieval._FLAGS, "alpha"}
    documents_only = {"rank"}  # read by DocumentSource alone
    assert names == (set(DocumentOptions.model_fields) - set(SourceOptions.model_fields)
                     - documents_only)
