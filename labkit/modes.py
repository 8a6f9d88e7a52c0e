"""The search modes the evaluation compares, by name (taught in 05_evaluation).

Each mode is a callable ``(conn, query, k) -> list[Hit]``. The eval CLI and the
notebooks iterate this dict, so a mode added here is evaluated everywhere.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg

from .fusion import search_hybrid
from .lexical import search_lexical
from .ranking import Hit
from .vector import search_vector

__all__ = ["SearchMode", "SEARCH_MODES"]

SearchMode = Callable[[psycopg.Connection, str, int], list[Hit]]

SEARCH_MODES: dict[str, SearchMode] = {
    "vector": search_vector,
    "lexical": search_lexical,
    "hybrid": search_hybrid,
}

# H5 (taught in 10_bm25 and 11_beyond_rrf): BM25 in SQL, its hybrid, and the three-branch hybrid.
from .bm25 import search_bm25  # noqa: E402
from .improved import search_hybrid_bm25, search_hybrid_latent  # noqa: E402

SEARCH_MODES["bm25"] = search_bm25
SEARCH_MODES["hybrid_bm25"] = search_hybrid_bm25
SEARCH_MODES["hybrid_latent"] = search_hybrid_latent
