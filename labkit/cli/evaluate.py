"""``eval``: Recall@k, MRR and nDCG@k of the search modes on labelled queries (taught in 05_evaluation).

    ./run.sh eval [--corpus news] [--queries FILE.jsonl] [--k 3] [--json] [--modes vector,hybrid]

The JSON shape (``k``, ``modes`` with the means, ``queries`` with each mode's ranking,
``unavailable`` with each mode left out and why) is a public contract: extend it, never break it.
A mode is left out when this machine lacks what it needs (the in-process e5) or the lab's
database lacks its data (the expanded modes' questions: the reason names ``./run.sh expand``),
so no row copies another mode's numbers.
"""

from __future__ import annotations

import argparse
from typing import Any

from labkit.core.corpora import CORPORA, DEFAULT_CORPUS, corpus_named, load_queries
from labkit.evaluation.retrieval import EvalReport, evaluate
from labkit.retrieval.modes import all_modes, available_modes, mode_misfit, modes_for, unavailable_modes
from labkit.services.setup import setup

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``eval`` command to the sub-parsers `sub`."""
    parser = sub.add_parser("eval", help="compare search modes on labelled queries (recall@k, MRR, nDCG)",
                            description="Recall@k, MRR and nDCG@k of the search modes.")
    parser.add_argument("--corpus", choices=list(CORPORA), default=DEFAULT_CORPUS.name,
                        help=f"the corpus to load and search (default {DEFAULT_CORPUS.name})")
    parser.add_argument("--queries", metavar="FILE.jsonl",
                        help="labelled queries (default: the corpus' own, for news its 12 queries)")
    parser.add_argument("--k", "--top-k", dest="top_k", type=int, default=3,
                        help="cut-off k of Recall@k and nDCG@k (default 3)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--modes", help=f"comma-separated modes of {', '.join(all_modes())} "
                                         "(default: all that fit the corpus and can run on this machine)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Evaluate the chosen modes and print a table or JSON."""
    if args.top_k < 1:
        args.parser.error(f"--k must be at least 1, got {args.top_k}")
    modes = None if not args.modes else [m.strip() for m in args.modes.split(",") if m.strip()]
    corpus = corpus_named(args.corpus)
    if modes is not None:
        unknown = [m for m in modes if m not in all_modes()]
        if unknown or not modes:
            args.parser.error(f"unknown mode(s) {', '.join(unknown) or '(none given)'}; "
                              f"choose from {', '.join(all_modes())}")
        misfits = {m: why for m in modes if (why := mode_misfit(m, corpus)) is not None}
        if misfits:
            args.parser.error(f"mode(s) {', '.join(misfits)} cannot search the corpus {corpus.name} "
                              f"({next(iter(misfits.values()))}); modes for it: {', '.join(modes_for(corpus))}")
        missing = {m: why for m, why in unavailable_modes(corpus=corpus).items() if m in modes}
        if missing:
            args.parser.error(f"mode(s) {', '.join(missing)} cannot run on this machine ({next(iter(missing.values()))}); "
                              f"available: {', '.join(available_modes(corpus=corpus))}")
    queries = load_queries(args.queries, corpus=corpus)  # a bad file fails before any service is touched
    with setup(quiet=True, corpus=corpus) as lab:
        report = evaluate(lab, queries, modes, top_k=args.top_k)
    print(report.to_json() if args.json else _table(report))
    return 0


def _table(report: EvalReport) -> str:
    per_query = report.per_query_frame()[list(report.modes)].round(2).to_string()
    skipped = "".join(f"\n(mode {mode} left out: {why})" for mode, why in report.unavailable.items())
    return (f"Mean over {len(report.queries)} queries (k={report.top_k}):\n{report.to_frame().round(3).to_string()}\n\n"
            f"Recall@{report.top_k} per query:\n{per_query}{skipped}")
