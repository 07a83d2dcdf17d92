"""A local Anthropic Messages server that answers from a script, for the frameworks' own models.

Every request is checked first by the API rules of ``fakes.provider_server`` (thinking's
included: with ``thinking`` on, an open tool loop must keep the thinking block it opened with)
and refused with HTTP 400 as the API refuses it; each accepted one is answered with the next
scripted content (text, ``thinking``, ``tool_use`` blocks, in the API's own shapes), so a
framework records the reply as it does the real API's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fakes.json_server import Answer, json_answer
from fakes.provider_server import ProviderServer


class ScriptedAnthropic(ProviderServer):
    """``with ScriptedAnthropic([[blocks…], …]) as server:``; the SDK's base URL is ``origin``."""

    def __init__(self, replies: Sequence[list[dict[str, Any]]]) -> None:
        super().__init__()
        self.replies = list(replies)

    def answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Answer:
        """The next scripted reply, or 400 naming the rule the request breaks."""
        if path != "/v1/messages":
            return json_answer(404, {"error": {"message": f"no route {path}"}})
        refused = self.refusal(path, body)
        if refused is not None:
            return refused
        content = self.replies.pop(0) if self.replies else [{"type": "text", "text": "ok"}]
        calls = any(block["type"] == "tool_use" for block in content)
        return json_answer(200, {
            "id": f"msg_{len(self.received)}", "type": "message", "role": "assistant",
            "model": body.get("model", "m"), "content": content,
            "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1}})
