"""Evaluate search modes on labelled queries; the ``eval`` CLI (taught in 05_evaluation).

Each mode returns its top ``depth`` (default 10) documents per query; Recall@k and
nDCG@k look at the first k of them, MRR at all of them (so it is MRR@depth).

    ./run.sh eval [--queries FILE.jsonl] [--k 3] [--json] [--modes vector,hybrid]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import httpx
import ollama
import pandas as pd
import psycopg

from .corpus import DataError, LabelledQuery, load_queries
from .fusion import search_hybrid, search_hybrid_sql
from .metrics import ndcg_at_k, recall_at_k, reciprocal_rank
from .modes import SEARCH_MODES, SearchMode
from .ranking import ids

__all__ = [
    "DEPTH",
    "METRICS",
    "QueryResult",
    "EvalReport",
    "evaluate",
    "LatencyReport",
    "compare_hybrid_latency",
    "main",
]

DEPTH = 10
METRICS = ("recall", "mrr", "ndcg")


@dataclass(frozen=True)
class QueryResult:
    """One labelled query: the ranking each mode returned and its metrics."""

    query: str
    relevant: tuple[int, ...]
    rankings: dict[str, list[int]]
    scores: dict[str, dict[str, float]]  # mode -> metric -> value


@dataclass(frozen=True)
class EvalReport:
    """Mean metrics per mode and the per-query details."""

    k: int
    modes: tuple[str, ...]
    queries: tuple[QueryResult, ...]

    @property
    def means(self) -> dict[str, dict[str, float]]:
        """mode -> metric -> mean over the queries."""
        return {
            mode: {metric: statistics.fmean(q.scores[mode][metric] for q in self.queries) for metric in METRICS}
            for mode in self.modes
        }

    def to_frame(self) -> pd.DataFrame:
        """Means as a table: one row per mode, columns recall@k, mrr, ndcg@k."""
        frame = pd.DataFrame.from_dict(self.means, orient="index")[list(METRICS)]
        frame.columns = [f"recall@{self.k}", "mrr", f"ndcg@{self.k}"]
        frame.index.name = "mode"
        return frame

    def per_query_frame(self, metric: str = "recall") -> pd.DataFrame:
        """One row per query: the relevant ids, `metric` per mode and each mode's top k ids."""
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, not {metric!r}")
        rows = []
        for q in self.queries:
            row: dict[str, object] = {"query": q.query, "relevant": list(q.relevant)}
            row.update({mode: q.scores[mode][metric] for mode in self.modes})
            row.update({f"{mode} top{self.k}": q.rankings[mode][: self.k] for mode in self.modes})
            rows.append(row)
        return pd.DataFrame(rows).set_index("query")

    def to_dict(self) -> dict:
        """The report as plain data: {"k", "modes": {mode: means}, "queries": [...]}."""
        return {
            "k": self.k,
            "modes": self.means,
            "queries": [
                {"query": q.query, "relevant": list(q.relevant), **{mode: q.rankings[mode] for mode in self.modes}}
                for q in self.queries
            ],
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The report as JSON (the output of ``eval --json``)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent)


def evaluate(
    conn: psycopg.Connection,
    queries: Sequence[LabelledQuery],
    modes: Mapping[str, SearchMode] | Sequence[str] | None = None,
    k: int = 3,
    depth: int = DEPTH,
) -> EvalReport:
    """Run every mode on every labelled query and score it (Recall@k, MRR, nDCG@k). Taught in 05_evaluation."""
    if modes is None:
        modes = SEARCH_MODES
    elif not isinstance(modes, Mapping):
        modes = {name: SEARCH_MODES[name] for name in modes}
    results = []
    for labelled in queries:
        rankings = {name: ids(search(conn, labelled.query, max(k, depth))) for name, search in modes.items()}
        scores = {
            name: {
                "recall": recall_at_k(ranking, labelled.relevant, k),
                "mrr": reciprocal_rank(ranking, labelled.relevant),
                "ndcg": ndcg_at_k(ranking, labelled.relevant, k),
            }
            for name, ranking in rankings.items()
        }
        results.append(QueryResult(labelled.query, tuple(sorted(labelled.relevant)), rankings, scores))
    return EvalReport(k=k, modes=tuple(modes), queries=tuple(results))


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
    conn: psycopg.Connection, queries: Sequence[str], repeats: int = 20, k: int = 10
) -> LatencyReport:
    """Median latency of ``search_hybrid`` vs ``search_hybrid_sql`` over queries x repeats. Taught in 04_rrf.

    Query embeddings are warmed up first, so only the search itself is timed; the two
    variants alternate which one runs first.
    """
    if not queries or repeats < 1:
        raise ValueError("need at least one query and one repeat")
    for query in queries:  # warm-up: embeddings into the cache, plans and connections ready
        search_hybrid(conn, query, k)
        search_hybrid_sql(conn, query, k)
    timings: dict[str, list[float]] = {"python": [], "sql": []}
    variants = [("python", search_hybrid), ("sql", search_hybrid_sql)]
    for repeat in range(repeats):
        for query in queries:
            for name, search in variants if repeat % 2 == 0 else variants[::-1]:
                start = time.perf_counter()
                search(conn, query, k)
                timings[name].append((time.perf_counter() - start) * 1000)
    return LatencyReport(
        python_ms=statistics.median(timings["python"]),
        sql_ms=statistics.median(timings["sql"]),
        runs=len(timings["python"]),
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="labkit eval", description="Recall@k, MRR and nDCG@k of the search modes.")
    parser.add_argument("--queries", metavar="FILE.jsonl", help="labelled queries (default: the lab's 12 queries)")
    parser.add_argument("--k", type=int, default=3, help="cut-off for Recall@k and nDCG@k (default 3)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--modes", help=f"comma-separated modes (default: all of {', '.join(SEARCH_MODES)})")
    return parser


def _print_table(report: EvalReport) -> None:
    print(f"Mean over {len(report.queries)} queries (k={report.k}):")
    print(report.to_frame().round(3).to_string())
    print()
    print(f"Recall@{report.k} per query:")
    print(report.per_query_frame()[list(report.modes)].round(2).to_string())


def main(argv: Sequence[str] | None = None) -> int:
    """``eval`` command: evaluate the modes on labelled queries; 2 on bad arguments or data. Taught in 05_evaluation."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.k < 1:
        parser.error(f"--k must be at least 1, got {args.k}")
    modes = list(SEARCH_MODES) if not args.modes else [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in SEARCH_MODES]
    if unknown or not modes:
        parser.error(f"unknown mode(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(SEARCH_MODES)}")
    try:
        queries = load_queries(args.queries)
    except DataError as exc:
        print(f"labkit eval: {exc}", file=sys.stderr)
        return 2
    from .db import connect, ensure_corpus
    from .stack import ensure_stack

    try:
        settings = ensure_stack()
        with connect(settings) as conn:
            ensure_corpus(conn, settings)
            report = evaluate(conn, queries, modes, k=args.k)
    except (RuntimeError, LookupError, OSError, psycopg.Error, httpx.HTTPError, ollama.ResponseError) as exc:
        # the stack or a service failed (StackError, DatabaseUnavailable, model server errors): say what
        print(f"labkit eval: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(report.to_json())
    else:
        _print_table(report)
    return 0
