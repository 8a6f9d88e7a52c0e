"""The search modes the lab compares, by name: the one registry (taught in 05_evaluation).

Each mode is a callable ``mode(lab, query, top_k) -> list[Hit]``. The single-signal
branches come from ``labkit.fusion.BRANCHES``; the fused modes are configurations of
``labkit.fusion``. The eval command and the notebooks iterate this dict, so a mode
added here (or a branch added to BRANCHES) is evaluated everywhere.

Some modes need a capability not every machine has (the latent terms need the in-process
e5, whose wheels exist for Linux x86_64 only). ``NEEDS`` says which, checked at run time:
``available_modes()`` is what this process can run, ``unavailable_modes()`` says why not.
Mode names double as branch names, so the same check covers a branch of ``BRANCHES``.
"""

from __future__ import annotations

from collections.abc import Callable

from .fusion import BRANCHES, SearchMode, search_hybrid, search_hybrid_bm25, search_hybrid_latent
from .latent import latent_problem

__all__ = ["SearchMode", "SEARCH_MODES", "NEEDS", "mode_problem", "available_modes", "unavailable_modes"]

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

# mode or branch name -> a check returning why it cannot run here (None: it can)
NEEDS: dict[str, Callable[[], str | None]] = {"latent": latent_problem, "hybrid_latent": latent_problem}


def mode_problem(name: str) -> str | None:
    """Why the mode (or branch) `name` cannot run in this process; None when it can. Taught in 05_evaluation."""
    check = NEEDS.get(name)
    return check() if check else None


def available_modes() -> dict[str, SearchMode]:
    """The modes of SEARCH_MODES this process can run, in registry order. Taught in 05_evaluation."""
    return {name: mode for name, mode in SEARCH_MODES.items() if mode_problem(name) is None}


def unavailable_modes() -> dict[str, str]:
    """Modes this process cannot run, each with the reason. Taught in 05_evaluation."""
    return {name: problem for name in SEARCH_MODES if (problem := mode_problem(name)) is not None}
