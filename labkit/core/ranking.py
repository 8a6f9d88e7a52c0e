"""What every search mode returns: a ranked list of hits (taught in 02_lexical)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

__all__ = ["Hit", "ids", "from_scores"]


class Hit(NamedTuple):
    """One search result: a document id and the mode's score (higher is better)."""

    doc_id: int
    score: float


def ids(hits: Sequence[Hit]) -> list[int]:
    """Return just the document ids of a ranking, best first. Taught in 02_lexical."""
    return [hit.doc_id for hit in hits]


def from_scores(scores: Mapping[int, float]) -> list[Hit]:
    """Hits from a {doc_id: score} map, best first, equal scores by id (deterministic). Taught in 04_rrf."""
    return [Hit(doc_id, score) for doc_id, score in sorted(scores.items(), key=lambda item: (-item[1], item[0]))]
