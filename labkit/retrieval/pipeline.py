"""A search mode is a pipeline: rewrite the query → rank it by branches → fuse them by RRF → re-rank (taught in 11_beyond_rrf).

The course's route of a query, as a value a student can print::

    >>> print(SEARCH_MODES["fielded_covered"])
    spelling → fielded → coverage@4
    >>> print(SEARCH_MODES["hybrid_expanded"])
    expanded×2 + expanded_lexical×0.5 → RRF(k=5)

* rewrite steps take ``(lab, query)`` and return the query to search (``Spelling``);
* the branches (``labkit.retrieval.branches.registry``) each rank the query; two or more are
  fused by ``labkit.retrieval.fusion.fuse`` with their weights and ``rrf_k``, and a single branch
  keeps its own ranking and scores;
* re-rank steps take ``(lab, query, hits)`` and reorder the first ``depth`` of them (``Coverage``);
  the branches are asked for at least that many;
* a filter stage (``mode.where(Filters.of({"type": "manual"}))``, 16_kb_codes) runs before the
  branches: its ``Filters`` pick the ids of the corpus rows that meet them, and every branch ranks
  only those (``within``); printed first, ``filter(type=manual)``.

A ``Pipeline`` is called like any search mode, ``mode(lab, query, top_k) -> hits``, and needs
what its branches need (``needs`` of this process, ``stored`` data of the lab; ``problem(lab)``) and what they
need of the corpus (``corpus_needs``, ``misfit(corpus)``). ``labkit.retrieval.modes`` holds the table
of the lab's modes; PyTerrier writes the same idea as ``bm25 >> rerank``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Protocol, TypeAlias

from labkit.retrieval.branches.registry import (
    BRANCHES,
    Branch,
    CorpusNeed,
    Need,
    Stored,
    first_misfit,
    first_missing,
    first_problem,
)
from labkit.retrieval.filters import Filters
from labkit.retrieval.fusion import RRF_K, FusionConfig, SearchMode, fuse_searches

if TYPE_CHECKING:
    from labkit.core.context import Lab
    from labkit.core.corpus import Corpus
    from labkit.core.ranking import Hit

__all__ = ["Rewriter", "Reranker", "Stage", "Pipeline", "search_fused"]


class Rewriter(Protocol):
    """A rewrite step: the query to search instead of `query`. Its ``str()`` names it in a pipeline."""

    def __call__(self, lab: Lab, query: str) -> str: ...


class Reranker(Protocol):
    """A re-rank step: `hits` with (at most) their first `depth` reordered. Its ``str()`` names it in a pipeline."""

    @property
    def depth(self) -> int: ...

    def __call__(self, lab: Lab, query: str, hits: Sequence[Hit]) -> list[Hit]: ...


# What a pipeline can be made of: a branch name, a branch, weights by branch, a fusion, a pipeline, any search mode
Stage: TypeAlias = "str | Branch | Mapping[str | Branch | Pipeline, float] | FusionConfig | Pipeline | SearchMode"


def _branch(search: str | Branch | SearchMode) -> Branch:
    """The registry's branch of that name (or search function); any other search mode as a branch of its own."""
    if isinstance(search, Branch):
        return search
    if isinstance(search, str):
        if search not in BRANCHES:
            raise ValueError(f"branches must be some of {', '.join(BRANCHES)}, got {search!r}")
        return BRANCHES[search]
    known = next((branch for branch in BRANCHES.values() if branch.search is search), None)
    if known is not None:
        return known
    if isinstance(search, Pipeline):  # a pipeline fused as a branch: named by its stages, with what they need
        return Branch(f"({search})", search, search.needs, filterable=search.filterable,
                      corpus_needs=search.corpus_needs)
    return Branch(getattr(search, "__name__", "search"), search)


@dataclass(frozen=True, kw_only=True)
class Pipeline:
    """A search mode as stages: `rewrite` steps, `branches` with weights fused by RRF(`rrf_k`), `rerank` steps.

    Build one with ``Pipeline.of``. Taught in 11_beyond_rrf.
    """

    rewrite: tuple[Rewriter, ...] = ()
    branches: tuple[tuple[Branch, float], ...]
    rrf_k: int = RRF_K
    rerank: tuple[Reranker, ...] = ()
    filters: Filters | None = None  # the filter stage: only the rows they let through are ranked (16_kb_codes)

    def __post_init__(self) -> None:
        names = [branch.name for branch, _ in self.branches]
        if len(set(names)) != len(names):
            raise ValueError(f"each branch may appear once in a pipeline, got {', '.join(names)}")
        self.fusion  # noqa: B018 (checks the branches and rrf_k)
        if self.filters is not None and not self.filterable:
            cannot = ", ".join(str(branch) for branch, _ in self.branches if not branch.filterable)
            raise ValueError(f"a filter stage needs branches that can search within it; {cannot} cannot")

    @classmethod
    def of(cls, stage: Stage, rrf_k: int = RRF_K, *, rewrite: Sequence[Rewriter] = (),
           rerank: Sequence[Reranker] = ()) -> Pipeline:
        """A pipeline of `stage` with `rewrite` steps before it and `rerank` steps after it.

        `stage` is a branch name (``"vector"``), a branch, weights by branch (``{"vector": 1, "lexical": 1}``,
        fused with `rrf_k`), a ``FusionConfig``, a pipeline (the new steps go around its own) or any
        search mode.
        """
        if isinstance(stage, Pipeline):
            return replace(stage, rewrite=(*rewrite, *stage.rewrite), rerank=(*stage.rerank, *rerank))
        if isinstance(stage, FusionConfig):
            branches = tuple((_branch(name), weight) for name, weight in stage.branches)
            rrf_k = stage.rrf_k
        elif isinstance(stage, Mapping):
            branches = tuple((_branch(name), float(weight)) for name, weight in stage.items())
        else:
            branches = ((_branch(stage), 1.0),)
        return cls(rewrite=tuple(rewrite), branches=branches, rrf_k=int(rrf_k), rerank=tuple(rerank))

    @property
    def fusion(self) -> FusionConfig:
        """The fusion stage: the branches' names with their weights, and rrf_k."""
        return FusionConfig(tuple((branch.name, weight) for branch, weight in self.branches), self.rrf_k)

    @property
    def needs(self) -> tuple[Need, ...]:
        """What this pipeline needs to run: what its branches need, each once."""
        return tuple(dict.fromkeys(need for branch, _ in self.branches for need in branch.needs))

    @property
    def stored(self) -> tuple[Stored, ...]:
        """What this pipeline reads that a separate step stores in the lab's database: its branches' data, each once."""
        return tuple(dict.fromkeys(need for branch, _ in self.branches for need in branch.stored))

    def problem(self, lab: Lab | None = None) -> str | None:
        """Why this pipeline cannot run in this process (and, given a lab, on that lab's data); None when it can."""
        problem = first_problem(self.needs)
        if problem is None and lab is not None and (missing := first_missing(self.stored, lab)) is not None:
            return missing.en
        return problem

    @property
    def corpus_needs(self) -> tuple[CorpusNeed, ...]:
        """What this pipeline needs of the corpus it searches: what its branches need of it, each once."""
        return tuple(dict.fromkeys(need for branch, _ in self.branches for need in branch.corpus_needs))

    def misfit(self, corpus: Corpus) -> str | None:
        """Why this pipeline cannot search `corpus`; None when it can. Taught in 16_kb_codes."""
        return first_misfit(self.corpus_needs, corpus)

    @property
    def filterable(self) -> bool:
        """Can every branch search within a filter (so a filter stage can go before them)?"""
        return all(branch.filterable for branch, _ in self.branches)

    def where(self, filters: Filters | None) -> Pipeline:
        """This pipeline with a filter stage before its branches (None: without one). Taught in 16_kb_codes."""
        return replace(self, filters=filters)

    def __call__(self, lab: Lab, query: str, top_k: int = 10, *, within: Sequence[int] | None = None) -> list[Hit]:
        if self.filters is not None:
            allowed = self.filters.ids(lab)  # checks the filters against the lab's corpus first
            within = allowed if within is None else sorted(set(allowed) & set(within))
        if within is not None and not within:
            return []  # nothing passes the filter: nothing to rank, no branch asked
        for step in self.rewrite:
            query = step(lab, query)
        if not self.rerank:
            return self._rank(lab, query, top_k, within)
        if top_k < 1:
            return []
        hits = self._rank(lab, query, max(top_k, *(step.depth for step in self.rerank)), within)
        for reranker in self.rerank:
            hits = reranker(lab, query, hits)
        return hits[:top_k]

    def _rank(self, lab: Lab, query: str, top_k: int, within: Sequence[int] | None = None) -> list[Hit]:
        """The branch's own ranking, or the RRF of the branches' rankings (of the rows `within`, when given)."""
        if len(self.branches) == 1:
            return self.branches[0][0](lab, query, top_k, within=within)
        searches: dict[str, SearchMode] = {branch.name: (branch if within is None else partial(branch, within=within))
                                           for branch, _ in self.branches}
        return fuse_searches(lab, query, searches, self.fusion, top_k)

    def __str__(self) -> str:
        if len(self.branches) == 1:
            ranked = str(self.branches[0][0])
        else:
            shown = (str(branch) if weight == 1 else f"{branch}×{weight:g}" for branch, weight in self.branches)
            ranked = f"{' + '.join(shown)} → RRF(k={self.rrf_k})"
        where = [f"filter({self.filters})"] if self.filters is not None else []
        return " → ".join([*where, *map(str, self.rewrite), ranked, *map(str, self.rerank)])


def search_fused(lab: Lab, query: str, config: FusionConfig, top_k: int = 10) -> list[Hit]:
    """The top_k of RRF over the registry's branches that `config` names; any string is safe. Taught in 11_beyond_rrf."""
    return fuse_searches(lab, query, {name: _branch(name) for name, _ in config.branches}, config, top_k)
