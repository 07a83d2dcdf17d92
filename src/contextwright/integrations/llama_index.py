"""LlamaIndex: a memory whose ``get`` is contextwright's build of a session kept in its stores.

``ContextwrightMemory(store, user_id=..., session_id=...)`` is a LlamaIndex ``BaseMemory``: pass
it to an agent (``FunctionAgent(...).run(msg, memory=memory)``) or a chat engine. Messages are
kept in a contextwright ``Store`` (memory, SQLite, Redis, PostgreSQL) as OpenAI chat dicts, one
log per (user, session); ``get()`` builds what the model sees from them (plan, budget, tool-pair
safety, fencing; the data note joins the system message), and ``report`` is the last build's
``BuildReport``. An agent appends this turn's own tool calls and results after what ``get``
returns (they reach the memory only when the turn ends), so ``budget`` covers the stored
conversation. Each ``get()`` continues the layout of the memory's last build of the session, so the
provider's prompt cache stays warm (``cache=False`` turns that off). A message's ``CachePoint``
blocks are not stored (a chat message carries no cache breakpoint); every later build of the
memory warns in its report how many ``put`` left out.
Needs the ``llama-index`` extra.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.llms import ChatMessage
from llama_index.core.memory.types import BaseMemory
from pydantic import ConfigDict, PrivateAttr

from contextwright.builder import ContextBuilder
from contextwright.convert import chat_messages, to_llama_index
from contextwright.core.cache import CachePolicy, Fingerprint
from contextwright.core.report import BuildReport
from contextwright.errors import InvalidInputError
from contextwright.integrations._core import ContextShaper, PlanChoice, sync_store, with_warning
from contextwright.session.store import SessionKey, Store

__all__ = ["ContextwrightMemory"]


class ContextwrightMemory(BaseMemory):
    """A LlamaIndex memory over a contextwright store whose ``get`` returns the build.

    ``system`` is the system prompt the build starts with (an agent's own ``system_prompt`` is
    sent before it); ``plan`` is a ``BuildPlan``, a shipped plan's name or a function of the
    ``Request`` (``None``: ``select_plan`` per call); ``budget`` caps the built context in
    tokens. ``cache`` keeps the provider's prompt cache warm: each ``get()`` continues the
    layout of this memory's last build of the session (kept in the memory object, per
    incarnation of the session); ``False`` cuts every build afresh.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    user_id: str
    """The user the session belongs to."""
    session_id: str
    """The conversation."""
    system: str | None = None
    """System prompt of the build."""
    _store: Store = PrivateAttr()
    _shaper: ContextShaper = PrivateAttr()
    _report: BuildReport | None = PrivateAttr(default=None)
    _read: tuple[str | None, int, list[dict[str, Any]]] = PrivateAttr(default=(None, 0, []))
    _left_out: dict[str, int] = PrivateAttr(default_factory=dict)
    _previous: tuple[str | None, Fingerprint | None] = PrivateAttr(default=(None, None))

    def __init__(self, store: Store, *, user_id: str, session_id: str,
                 system: str | None = None, builder: ContextBuilder | None = None,
                 plan: PlanChoice = None, budget: int | None = None,
                 cache: CachePolicy | bool = True) -> None:
        SessionKey(user_id=user_id, session_id=session_id)  # both ids checked now
        # The fields declared above; mypy reads BaseMemory's __init__, not the pydantic model's.
        super().__init__(user_id=user_id, session_id=session_id,  # type: ignore[call-arg]
                         system=system)
        self._store = sync_store(store, "ContextwrightMemory")
        self._shaper = ContextShaper(builder=builder or ContextBuilder(), plan=plan,
                                     budget=budget, cache=cache)

    @classmethod
    def class_name(cls) -> str:
        """Name LlamaIndex serialises the component under."""
        return "ContextwrightMemory"

    @classmethod
    def from_defaults(cls, **kwargs: Any) -> ContextwrightMemory:
        """Same as the constructor (``store``, ``user_id`` and ``session_id`` are required)."""
        return cls(**kwargs)

    @property
    def key(self) -> SessionKey:
        """The session in the store."""
        return SessionKey(user_id=self.user_id, session_id=self.session_id)

    @property
    def report(self) -> BuildReport:
        """The last ``get()``'s build report."""
        if self._report is None:
            raise InvalidInputError("no build yet: call get() first")
        return self._report

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """The built context: system message, kept history, the newest user message and after.

        ``input`` is the text about to be sent, as LlamaIndex's own memories take it: a chat
        engine adds it to the prompt itself after what ``get`` returns, so it is built as the
        newest user message (history is chosen and budgeted for it) and left out of what is
        returned. An agent stores its user message before it asks: then that stored message is
        the newest one, and is returned.
        """
        stored = self._chats()
        pending = input is not None and not (
            stored and stored[-1].get("role") == "user" and stored[-1].get("content") == input)
        if pending:
            stored.append({"role": "user", "content": input})
        if not any(message.get("role") == "user" for message in stored):
            return to_llama_index(stored)  # nothing to answer yet: the session as it is
        epoch, previous = self._previous
        context = self._shaper.build(stored, system=self.system,
                                     previous=previous if epoch == self._read[0] else None)
        if self._shaper.cache is not False:  # the next get() of this session continues it
            self._previous = (self._read[0], context.fingerprint)
        if self._left_out:
            context = with_warning(context, (
                f"put() left out {sum(self._left_out.values())} block(s) of the stored messages "
                f"({', '.join(sorted(self._left_out))}): a cache block marks a prompt-cache "
                "breakpoint, which a stored chat message has no place for, so the provider is "
                "not asked to cache up to it"))
        self._report = context.report
        messages = context.to_messages("openai")
        if pending and messages and messages[-1] == {"role": "user", "content": input}:
            messages = messages[:-1]  # the caller sends it: returned, it would go twice
        return to_llama_index(messages)

    def get_all(self) -> list[ChatMessage]:
        """Every stored message, as stored."""
        return to_llama_index(self._chats())

    def put(self, message: ChatMessage) -> None:
        """Append one message."""
        self.put_messages([message])

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Append ``messages`` in one atomic write."""
        if messages:
            left_out: dict[str, int] = {}
            self._store.append(self.key, chat_messages(messages, left_out=left_out))
            for kind, count in left_out.items():  # warned of by every later build
                self._left_out[kind] = self._left_out.get(kind, 0) + count

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the session's messages with ``messages``."""
        self.reset()
        self.put_messages(messages)

    def reset(self) -> None:
        """Erase the session."""
        self._store.erase_session(self.key)
        self._left_out.clear()
        self._previous = (None, None)

    def _chats(self) -> list[dict[str, Any]]:
        """The session's messages: what was read before, and what was appended since.

        The log is append-only within one incarnation of the session (its epoch), so only new
        seqs are read; the same dicts handed to the builder again let it reuse its parses.
        """
        epoch = self._store.epoch(self.key)
        cached_epoch, last_seq, chats = self._read
        if epoch is None or epoch != cached_epoch:
            last_seq, chats = 0, []
        new = self._store.read(self.key, after=last_seq)
        if self._store.epoch(self.key) != epoch or (new and new[0].seq != last_seq + 1):
            self._read = (None, 0, [])  # erased or recreated meanwhile: read it whole again
            return self._chats()
        chats = chats + [dict(stored.message) for stored in new]
        self._read = (epoch, new[-1].seq if new else last_seq, chats)
        return list(chats)
