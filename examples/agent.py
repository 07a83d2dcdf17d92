"""The weather + memo agent on any OpenAI-compatible endpoint, its session kept in SQLite.

    python examples/agent.py --base-url http://127.0.0.1:11434/v1 --model qwen2.5:7b

(Ollama, vLLM, llama.cpp's server and OpenAI itself all speak this protocol; for OpenAI pass
``--base-url https://api.openai.com/v1 --api-key $OPENAI_API_KEY``.) Run it again with the same
``--db`` and the conversation, and the memos, are still there.
"""

from __future__ import annotations

import argparse

from contextwright.agent import make_agent, repl


def main() -> None:
    """Read lines from the terminal and answer each with the agent."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key", default="none")
    parser.add_argument("--db", default="agent.db")
    parser.add_argument("--user", default="me")
    parser.add_argument("--session", default="main")
    args = parser.parse_args()
    agent = make_agent(args.base_url, args.model, args.db, api_key=args.api_key)
    try:
        repl(agent, args.user, args.session)
    finally:
        agent.close()


if __name__ == "__main__":
    main()
