"""Drop-ins for the agent frameworks people already run, one module per framework.

``contextwright.integrations.langchain`` (a ``create_agent`` middleware), ``.openai_agents`` (a
``Session`` on contextwright's stores and a ``call_model_input_filter``), ``.pydantic_ai`` (a
history-processing capability) and ``.llama_index`` (a memory). Each needs its framework (its
extra: ``contextwright[langchain]``, ``[openai-agents]``, ``[pydantic-ai]``, ``[llama-index]``)
and imports it when imported; this package imports none of them.
"""
