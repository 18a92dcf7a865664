"""Bridges from jevmem to agent frameworks and protocols.

Each submodule needs its own optional extra and is imported only on demand,
so ``import jevmem`` never pulls in a framework:

- :mod:`jevmem.integrations.mcp`: an MCP server over a memory (``jevmem[mcp]``);
- :mod:`jevmem.integrations.langchain`: a retriever and a chat history (``jevmem[langchain]``);
- :mod:`jevmem.integrations.llama_index`: a retriever (``jevmem[llama-index]``).
"""
