"""Log-probabilities in Ollama's own shape, from llama.cpp's OpenAI-style ones (the re-ranker of 17_kb_rerank).

Ollama (since v0.12.11; ``api/types.go`` ``TokenLogprob``/``Logprob``, ``docs/openapi.yaml``) takes
``"logprobs": true`` and ``"top_logprobs": N`` (0 to 20, else 400 "top_logprobs must be between 0 and
20") on /api/chat and answers with a top-level ``logprobs`` list, one entry per generated token::

    {"token": "Hi", "logprob": -0.01, "bytes": [72, 105],
     "top_logprobs": [{"token": "Hi", "logprob": -0.01, "bytes": [72, 105]}, ...]}

``bytes`` is left out for an empty token and ``top_logprobs`` when N is 0 (Go's ``omitempty``); the
log-probabilities are natural logs of the softmax over the raw logits (``runner/common/logprob.go``),
which is what llama.cpp reports too. llama.cpp answers ``top_logprobs: 0`` with no log-probabilities
at all, so it is always asked for at least one alternative (Ollama's own llama-server backend does the
same, ``max(TopLogprobs, 1)``), and the alternatives are dropped again when none were wanted.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_TOP_LOGPROBS", "TOP_LOGPROBS_ERROR", "wanted_top", "openai_fields", "ollama_logprobs", "choice_logprobs"]

MAX_TOP_LOGPROBS = 20
TOP_LOGPROBS_ERROR = "top_logprobs must be between 0 and 20"  # Ollama's words (server/routes.go)


def wanted_top(body: dict[str, Any]) -> int | None:
    """How many alternatives per token an /api/chat body asks for: None without ``logprobs``, else 0..20."""
    if not body.get("logprobs"):
        return None
    return int(body.get("top_logprobs") or 0)


def openai_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The llama.cpp request fields for an Ollama body's ``logprobs``/``top_logprobs`` ({} when not asked)."""
    top = wanted_top(body)
    return {} if top is None else {"logprobs": True, "top_logprobs": max(top, 1)}


def _token(entry: dict[str, Any]) -> dict[str, Any]:
    raw = entry.get("bytes")
    if isinstance(raw, list) and all(isinstance(b, int) and 0 <= b < 256 for b in raw):
        data = bytes(raw)
        text = data.decode("utf-8", "replace")  # Go's JSON encoder writes invalid UTF-8 as U+FFFD too
    else:
        text = str(entry.get("token") or "")
        data = text.encode("utf-8")
    out: dict[str, Any] = {"token": text, "logprob": float(entry.get("logprob", 0.0))}
    if data:
        out["bytes"] = list(data)
    return out


def ollama_logprobs(entries: list[dict[str, Any]] | None, top: int) -> list[dict[str, Any]]:
    """Ollama's ``logprobs`` list from llama.cpp's ``choices[i].logprobs.content`` entries, `top` alternatives each."""
    result = []
    for entry in entries or []:
        item = _token(entry)
        alternatives = [_token(alt) for alt in (entry.get("top_logprobs") or [])[:top]]
        if alternatives:
            item["top_logprobs"] = alternatives
        result.append(item)
    return result


def choice_logprobs(choice: dict[str, Any]) -> list[dict[str, Any]]:
    """llama.cpp's per-token entries of one choice (a whole answer or a streamed chunk); [] when it has none."""
    logprobs = choice.get("logprobs") or {}
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    return list(content) if isinstance(content, list) else []
