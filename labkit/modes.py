"""The search modes the lab compares, by name: the one registry (taught in 05_evaluation).

Each mode is a callable ``mode(lab, query, top_k) -> list[Hit]``. The single-signal
branches come from ``labkit.fusion.BRANCHES``; the fused modes are configurations of
``labkit.fusion``. The eval command and the notebooks iterate this dict, so a mode
added here (or a branch added to BRANCHES) is evaluated everywhere.
"""

from __future__ import annotations

from .fusion import BRANCHES, SearchMode, search_hybrid, search_hybrid_bm25, search_hybrid_latent

__all__ = ["SearchMode", "SEARCH_MODES"]

SEARCH_MODES: dict[str, SearchMode] = {
    "vector": BRANCHES["vector"],
    "lexical": BRANCHES["lexical"],
    "hybrid": search_hybrid,
    # taught in 10_bm25 and 11_beyond_rrf: BM25 in SQL, its hybrid, the latent terms and the three-branch hybrid
    "bm25": BRANCHES["bm25"],
    "hybrid_bm25": search_hybrid_bm25,
    "latent": BRANCHES["latent"],
    "hybrid_latent": search_hybrid_latent,
}
