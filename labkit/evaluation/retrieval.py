"""Evaluate, tune and time search modes on labelled queries (taught in 05_evaluation and 11_beyond_rrf).

Each mode returns its top ``depth`` (default 10) documents per query; Recall@k and
nDCG@k look at the first ``top_k`` of them, MRR at all of them (so it is MRR@depth).

Honesty rules for tuning, as code: ``tune_fusion`` scores every configuration of a
grid on ONE split of labelled queries (the 12 seed queries, ``queries.jsonl``) and
picks the best by mean Recall@k, then MRR, then the smallest departure from the plain
defaults. The pick is frozen as ``labkit.retrieval.modes.DEFAULT_FUSION``; the held-out set
(``heldout.jsonl``) only measures it. ``time_modes`` puts the milliseconds a mode
costs per query next to its gain.
"""

from __future__ import annotations

import itertools
import json
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import pandas as pd

from labkit.core.corpus import LabelledQuery
from labkit.core.errors import LabError
from labkit.core.ranking import ids
from labkit.evaluation.metrics import METRICS, Metric, mean_metric, metric_value
from labkit.retrieval.branches.registry import BRANCHES
from labkit.retrieval.documents import collapse, document_hits
from labkit.retrieval.filters import Filters
from labkit.retrieval.fusion import (
    CANDIDATES,
    RRF_K,
    FusionConfig,
    SearchMode,
    fuse,
    search_hybrid,
    search_hybrid_sql,
)
from labkit.retrieval.modes import (
    COVERAGE_DEPTHS,
    all_modes,
    available_modes,
    covered,
    mode_misfit,
    mode_name,
    mode_problem,
    unavailable_modes,
)
from labkit.retrieval.pipeline import Pipeline

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = [
    "DEPTH",
    "QueryResult",
    "EvalReport",
    "evaluate",
    "LatencyReport",
    "compare_hybrid_latency",
    "time_modes",
    "branch_rankings",
    "TuningResult",
    "default_grid",
    "weight_grid",
    "tune_fusion",
    "DepthResult",
    "pick_coverage_depth",
]

DEPTH = 10


@dataclass(frozen=True)
class QueryResult:
    """One labelled query: the ranking each mode returned and its metrics."""

    query: str
    relevant: tuple[int, ...]
    rankings: dict[str, list[int]]
    scores: dict[str, dict[Metric, float]]  # mode -> metric -> value


@dataclass(frozen=True)
class EvalReport:
    """Mean metrics per mode and the per-query details."""

    top_k: int
    modes: tuple[str, ...]
    queries: tuple[QueryResult, ...]
    unavailable: Mapping[str, str] = field(default_factory=dict)  # modes left out here, with the reason

    @property
    def means(self) -> dict[str, dict[str, float]]:
        """mode -> metric -> mean over the queries."""
        labelled = [LabelledQuery(q.query, frozenset(q.relevant)) for q in self.queries]
        return {
            mode: {
                metric: mean_metric(metric, [q.rankings[mode] for q in self.queries], labelled, self.top_k)
                for metric in METRICS
            }
            for mode in self.modes
        }

    def to_frame(self) -> pd.DataFrame:
        """Means as a table: one row per mode, columns recall@k, mrr, ndcg@k."""
        frame = pd.DataFrame.from_dict(self.means, orient="index")[list(METRICS)]
        frame.columns = [f"recall@{self.top_k}", "mrr", f"ndcg@{self.top_k}"]
        frame.index.name = "mode"
        return frame

    def per_query_frame(self, metric: Metric = "recall") -> pd.DataFrame:
        """One row per query: the relevant ids, `metric` per mode and each mode's top k ids."""
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, not {metric!r}")
        rows = []
        for q in self.queries:
            row: dict[str, object] = {"query": q.query, "relevant": list(q.relevant)}
            row.update({mode: q.scores[mode][metric] for mode in self.modes})
            row.update({f"{mode} top{self.top_k}": q.rankings[mode][: self.top_k] for mode in self.modes})
            rows.append(row)
        return pd.DataFrame(rows).set_index("query")

    def table(self) -> pd.DataFrame:
        """The means for a reader: a row per mode under its Russian name (``mode_name``), Recall@k, MRR, nDCG@k.

        Taught in 05_evaluation; ``to_frame`` keeps the ids for code.
        """
        frame = self.to_frame()
        frame.columns = [f"Recall@{self.top_k}", "MRR", f"nDCG@{self.top_k}"]
        return frame.rename(index=mode_name).rename_axis("режим")

    def per_query_table(self, metric: Metric = "recall") -> pd.DataFrame:
        """`metric` per query (a row each) and mode (a column each, under its Russian name). Taught in 05_evaluation."""
        frame = self.per_query_frame(metric)[list(self.modes)]
        return frame.rename(columns=mode_name).rename_axis(index="запрос", columns=None)

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data: {"k", "modes": {mode: means}, "queries": [...], "unavailable": {mode: why}}.

        ``k`` is top_k; ``unavailable`` lists the modes this machine cannot run (left out of ``modes``).
        """
        return {
            "k": self.top_k,
            "modes": self.means,
            "queries": [
                {"query": q.query, "relevant": list(q.relevant), **{mode: q.rankings[mode] for mode in self.modes}}
                for q in self.queries
            ],
            "unavailable": dict(self.unavailable),
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The report as JSON (the output of ``eval --json``)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent)


def evaluate(
    lab: Lab,
    queries: Sequence[LabelledQuery],
    modes: Mapping[str, SearchMode] | Sequence[str] | None = None,
    top_k: int = 3,
    depth: int = DEPTH,
    filters: Mapping[str, Filters] | None = None,
) -> EvalReport:
    """Run every mode on every labelled query and score it (Recall@k, MRR, nDCG@k). Taught in 05_evaluation.

    `modes` defaults to every mode for the lab's corpus this machine can run on this lab's data
    (``available_modes(lab)``); the others are listed in the report's ``unavailable`` with the reason
    (and, for missing data, the command that makes it). Naming a mode that cannot run here, or cannot
    search the lab's corpus, raises ``LabError``. On a corpus of chunks (the knowledge base) the rankings
    are of documents: each ranks where its best chunk ranks (``labkit.retrieval.documents.document_hits``).
    `filters` maps a query to the metadata filters its modes search within (16_kb_codes); each mode
    then needs a filter stage (``Pipeline.where``), so it must be a pipeline of filterable branches.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    unavailable: dict[str, str] = {}
    if modes is None:
        modes, unavailable = available_modes(lab), unavailable_modes(lab)
    elif not isinstance(modes, Mapping):
        known = all_modes()
        for name in modes:
            if name not in known:
                raise LabError(f"no search mode {name!r}; modes: {', '.join(known)}")
            if (problem := mode_problem(name, lab) or mode_misfit(name, lab.corpus)) is not None:
                raise LabError(f"search mode {name} cannot run here: {problem}")
        modes = {name: known[name] for name in modes}
    filters = filters or {}
    for name, search in modes.items():
        if filters and not (isinstance(search, Pipeline) and search.filterable):
            raise LabError(f"search mode {name} cannot search within filters: not a pipeline of filterable branches")
    results = []
    for labelled in queries:
        where = filters.get(labelled.query)
        searches = modes if where is None else {name: search.where(where) for name, search in modes.items()
                                                if isinstance(search, Pipeline)}
        rankings = {name: ids(document_hits(lab, search, labelled.query, max(top_k, depth)))
                    for name, search in searches.items()}
        scores = {
            name: {metric: metric_value(metric, ranking, labelled.relevant, top_k) for metric in METRICS}
            for name, ranking in rankings.items()
        }
        results.append(QueryResult(labelled.query, tuple(sorted(labelled.relevant)), rankings, scores))
    return EvalReport(top_k=top_k, modes=tuple(modes), queries=tuple(results), unavailable=unavailable)


@dataclass(frozen=True)
class LatencyReport:
    """Median wall time of the Python (two round trips) and single-SQL hybrid searches."""

    python_ms: float
    sql_ms: float
    runs: int  # timings per variant

    @property
    def ratio(self) -> float:
        """sql / python: below 1 means the single statement is faster."""
        return self.sql_ms / self.python_ms


def compare_hybrid_latency(
    lab: Lab, queries: Sequence[str], repeats: int = 20, top_k: int = 10
) -> LatencyReport:
    """Median latency of ``search_hybrid`` vs ``search_hybrid_sql`` over queries x repeats. Taught in 04_rrf.

    Query embeddings are warmed up first, so only the search itself is timed; the two
    variants alternate which one runs first.
    """
    if not queries or repeats < 1:
        raise ValueError("need at least one query and one repeat")
    for query in queries:  # warm-up: embeddings into the cache, plans and connections ready
        search_hybrid(lab, query, top_k)
        search_hybrid_sql(lab, query, top_k)
    timings: dict[str, list[float]] = {"python": [], "sql": []}
    variants = [("python", search_hybrid), ("sql", search_hybrid_sql)]
    for repeat in range(repeats):
        for query in queries:
            for name, search in variants if repeat % 2 == 0 else variants[::-1]:
                start = time.perf_counter()
                search(lab, query, top_k)
                timings[name].append((time.perf_counter() - start) * 1000)
    return LatencyReport(
        python_ms=statistics.median(timings["python"]),
        sql_ms=statistics.median(timings["sql"]),
        runs=len(timings["python"]),
    )


def time_modes(
    lab: Lab, queries: Sequence[str], modes: Mapping[str, SearchMode], top_k: int = 3, repeat: int = 1
) -> dict[str, float]:
    """Median wall-clock milliseconds per query of each mode (after one warm-up call). Taught in 11_beyond_rrf."""
    timings: dict[str, float] = {}
    for name, mode in modes.items():
        if queries:
            mode(lab, queries[0], top_k)  # warm-up: model load, caches, plans
        samples = []
        for _ in range(repeat):
            for query in queries:
                start = time.perf_counter()
                mode(lab, query, top_k)
                samples.append((time.perf_counter() - start) * 1000.0)
        timings[name] = statistics.median(samples) if samples else float("nan")
    return timings


# --- tuning a fusion --------------------------------------------------------------------------

def branch_rankings(lab: Lab, queries: Sequence[str], depth: int = CANDIDATES,
                    branches: Mapping[str, SearchMode] | None = None) -> dict[str, dict[str, list[int]]]:
    """Every branch's top-`depth` ids for every query: ``{branch: {query: ids}}``. Taught in 11_beyond_rrf.

    `branches` defaults to the registry's; branches this machine cannot run, or that lack their stored data
    on this lab (``Branch.problem``), or that cannot search the lab's corpus (``Branch.misfit``) are left out.
    """
    if branches is None:
        branches = {name: branch for name, branch in BRANCHES.items()
                    if branch.problem(lab) is None and branch.misfit(lab.corpus) is None}
    return {name: {q: ids(branch(lab, q, depth)) for q in queries} for name, branch in branches.items()}


class TuningResult(NamedTuple):
    """Mean metrics of one configuration on the tuning split."""

    config: FusionConfig
    recall: float
    mrr: float


def default_grid(latent: bool | None = None) -> list[FusionConfig]:
    """The searched configurations: 2 lexical branches x 4 RRF constants x 63 weight triples. Taught in 11_beyond_rrf.

    The triples weight (vector, lexical branch, latent); a weight of 0 leaves its branch out,
    so a triple without the lexical branch appears once, not once per lexical branch (444 in all).
    Without the latent branch (``latent=False``; by default: when it cannot run here) its weight
    stays 0 and the grid is the 2-branch part (108 configurations).
    """
    if latent is None:
        latent = mode_problem("latent") is None
    levels = (0.0, 0.5, 1.0, 2.0)
    triples = [w for w in itertools.product(levels, repeat=3) if any(w) and (latent or w[2] == 0)]
    grid = (
        FusionConfig.of({name: w for name, w in zip(("vector", lexical, "latent"), triple) if w > 0}, rrf_k)
        for lexical in ("lexical", "bm25")
        for rrf_k in (5, 10, 30, 60)
        for triple in triples
    )
    return list(dict.fromkeys(grid))


def weight_grid(branches: Sequence[str], levels: Sequence[float] = (0.0, 0.5, 1.0, 2.0),
                rrf_ks: Sequence[int] = (5, 10, 30, 60)) -> list[FusionConfig]:
    """Every weighting of `branches` by `levels` (0 leaves a branch out) at every RRF constant. Taught in 11_beyond_rrf.

    A configuration of one branch ranks like the branch alone at any rrf_k and weight, so it
    appears once (weight 1, rrf_k 60).
    """
    grid = []
    for weights in itertools.product(levels, repeat=len(branches)):
        chosen = {name: w for name, w in zip(branches, weights) if w > 0}
        if len(chosen) == 1:
            grid.append(FusionConfig.of(dict.fromkeys(chosen, 1.0)))
        elif chosen:
            grid.extend(FusionConfig.of(chosen, rrf_k) for rrf_k in rrf_ks)
    return list(dict.fromkeys(grid))


def _departure(config: FusionConfig) -> tuple[int, int, bool]:
    """How far a configuration is from vector + ts_rank_cd + latent at weight 1, rrf_k 60 (for tie-breaking)."""
    weights = config.weights
    return (
        sum(weights.get(name, 0.0) != 1.0 for name in ("vector", "latent"))
        + (max(weights.get("lexical", 0.0), weights.get("bm25", 0.0)) != 1.0),
        abs(config.rrf_k - RRF_K),
        "bm25" in weights,
    )


def tune_fusion(
    rankings: Mapping[str, Mapping[str, Sequence[int]]],
    queries: Sequence[LabelledQuery],
    grid: Sequence[FusionConfig] | None = None,
    top_k: int = 3,
    parents: Mapping[int, int] | None = None,
) -> list[TuningResult]:
    """Score each configuration on `queries`; best first (Recall@k, MRR, closeness to defaults). Taught in 11_beyond_rrf.

    `rankings` is ``branch_rankings(...)`` of at least these queries. On a corpus of chunks give
    `parents` (chunk id -> document id, ``labkit.retrieval.documents.parents``): each fused ranking of
    chunks is collapsed to documents before it is scored, as ``evaluate`` does (16_kb_codes).
    """
    if not queries:
        raise ValueError("tune_fusion needs at least one labelled query")
    results = []
    for config in grid if grid is not None else default_grid():
        fused = [
            ids(hits if parents is None else collapse(hits, parents))
            for q in queries
            for hits in [fuse({name: rankings[name][q.query] for name, _ in config.branches}, config)]
        ]
        results.append(
            TuningResult(config, mean_metric("recall", fused, queries, top_k), mean_metric("mrr", fused, queries, top_k))
        )
    return sorted(results, key=lambda r: (-r.recall, -r.mrr, _departure(r.config)))


class DepthResult(NamedTuple):
    """Mean metrics of one coverage head size (``labkit.retrieval.rerankers.coverage``) on labelled queries."""

    depth: int
    recall: float
    mrr: float


def pick_coverage_depth(lab: Lab, search: SearchMode, queries: Sequence[LabelledQuery],
                        depths: Sequence[int] = COVERAGE_DEPTHS, top_k: int = 3) -> list[DepthResult]:
    """Each head size's Recall@k and MRR of ``covered(search, depth)`` on `queries`; best first, ties to the smaller head.

    Taught in 11_beyond_rrf, where it runs on the tune split only (its choice is ``COVERAGE_DEPTH``).
    """
    if not queries:
        raise ValueError("pick_coverage_depth needs at least one labelled query")
    report = evaluate(lab, queries, {str(d): covered(search, d) for d in depths}, top_k=top_k)
    results = [DepthResult(d, report.means[str(d)]["recall"], report.means[str(d)]["mrr"]) for d in depths]
    return sorted(results, key=lambda r: (-r.recall, -r.mrr, r.depth))
