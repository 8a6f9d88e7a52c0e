"""What fits an embedder's window: a text cut to its first `limit` tokens (taught in 15_kb_chunking).

multilingual-e5-small reads at most 512 tokens, special tokens and its ``passage: `` prefix
included; a server that truncates (Ollama, sentence-transformers) embeds only that head of a
long document and drops the rest. ``head_of`` gives that head for any token counter (the
model's own, ``labkit.models.tokenizer``, or the cheap ``labkit.core.chunking.word_tokens``),
and ``cut_offset`` says where it ends, so a labelled answer can be placed before or past the cut.
"""

from __future__ import annotations

import re

from labkit.core.chunking import TokenCounter

__all__ = ["cut_offset", "head_of"]

_BREAK = re.compile(r"\s+")


def cut_offset(text: str, limit: int, count: TokenCounter) -> int:
    """The largest offset at a whitespace break (or the text's end) such that ``count(text[:offset]) <= limit``.

    0 when not even the first word fits. Binary search over the breaks: about log2(words) calls of `count`.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1 token, got {limit}")
    if count(text) <= limit:
        return len(text)
    ends = [match.start() for match in _BREAK.finditer(text) if match.start() > 0]
    low, high = 0, len(ends)  # ends[:low] fit; ends[high:] do not
    while low < high:
        middle = (low + high) // 2
        if count(text[: ends[middle]]) <= limit:
            low = middle + 1
        else:
            high = middle
    return ends[low - 1] if low else 0


def head_of(text: str, limit: int, count: TokenCounter) -> str:
    """The first `limit` tokens of `text` (by `count`), cut at a whitespace break: what a truncating embedder reads."""
    return text[: cut_offset(text, limit, count)]
