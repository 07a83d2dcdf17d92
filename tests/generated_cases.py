"""A generated cases file for the ablation and judge tests (invented content).

Three document cases (the fact is only in a document) and one order-id case (the id is only in
the history), so removing the source that holds them must lower what depends on them.
"""

from __future__ import annotations

import json
from pathlib import Path

TRACK = {"type": "function", "function": {"name": "track_order", "description": "Track.",
                                          "parameters": {"type": "object", "properties": {
                                              "order_id": {"type": "string"}}}}}


def generated_cases(tmp_path: Path) -> Path:
    """Write the cases file in ``tmp_path``; see the module docstring."""
    lines = []
    for i in range(3):
        code = f"CODE-{i}1{i}"
        lines.append({
            "id": f"vault-{i}", "answer": code,
            "request": {"system": "Answer from the documents.",
                        "user_input": f"What is the code of vault {i}?",
                        "documents": [{"id": "code", "text": f"The code of vault {i} is {code}."},
                                      {"id": "menu", "text": "The canteen serves soup on "
                                                             "Fridays and fish on Mondays."}]},
            "must_contain": {"documents": ["code"], "facts": [code]},
            "noise": {"documents": ["menu"]}, "position": {"question_at_tail": True}})
    lines.append({
        "id": "order",
        "request": {"system": "You track orders.", "user_input": "Where is my parcel now?",
                    "history": [{"role": "user", "content": "My order is ORD-777.", "id": "o1"},
                                {"role": "assistant", "content": "Thanks, noted ORD-777.",
                                 "id": "o2"}],
                    "tools": [TRACK]},
        "must_contain": {"facts": ["ORD-777"], "messages": ["o1"], "tools": ["track_order"]},
        "expected_call": {"name": "track_order", "arguments": {"order_id": "ORD-777"}}})
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    return path
