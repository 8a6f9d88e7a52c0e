"""``bench-rerank``: what the chat-model judge re-ranker costs per query, by depth (taught in 17_kb_rerank).

    ./run.sh bench-rerank [--models M1,M2] [--pairs N] [--chars C] [--depths 10,20,50] [--json]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from labkit.evaluation.rerank_cost import BENCH_DEPTHS, PASSAGE_CHARS, bench_pairs, measure_judge_cost
from labkit.services.setup import setup

__all__ = ["register", "run", "MAX_PAIRS"]

MAX_PAIRS = 100  # seconds each on 2 cores: more only takes longer


def _numbers(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive whole numbers, got {text!r}")
    return values


def register(sub: Any) -> None:
    """Add the ``bench-rerank`` command to the sub-parsers `sub`."""
    parser = sub.add_parser("bench-rerank", help="benchmark the chat-model re-ranker: seconds per pair and by depth",
                            description="Seconds per (query, passage) pair judged by each chat model, the cost "
                                        "per query at each re-ranked depth, and a cached re-run's cost.")
    parser.add_argument("--models", help="comma-separated chat models (default: CHAT_MODEL and ALT_CHAT_MODEL)")
    parser.add_argument("--pairs", type=int, default=10,
                        help=f"pairs timed per model (default 10, at most {MAX_PAIRS}; seconds each)")
    parser.add_argument("--chars", type=int, default=PASSAGE_CHARS,
                        help=f"characters per passage (default {PASSAGE_CHARS}, about 300 tokens)")
    parser.add_argument("--depths", type=_numbers, default=list(BENCH_DEPTHS),
                        help="re-ranked depths to price (default 10,20,50)")
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Time the judge and print its cost."""
    if not 1 <= args.pairs <= MAX_PAIRS or not 50 <= args.chars <= 4000:
        args.parser.error(f"--pairs must lie in [1, {MAX_PAIRS}] and --chars in [50, 4000]")
    pairs = bench_pairs(args.pairs, args.chars)
    with setup(quiet=True) as lab:
        models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else \
            list(dict.fromkeys([lab.chat_model, lab.settings.alt_chat_model]))
        result = measure_judge_cost(lab, models, pairs, args.depths)
    print(json.dumps(result, indent=2) if args.json else _text(result))
    return 0


def _text(result: dict[str, Any]) -> str:
    lines = [f"{result['pairs']} (query, passage) pairs of about {result['passage_chars']} characters; "
             f"first stage ({result['first_stage']}): {result['first_stage_ms']:.1f} ms per query"]
    for model, m in result["models"].items():
        tokens = f", about {m['passage_tokens']:.0f} tokens a passage" if m["passage_tokens"] else ""
        lines.append(f"{model}: {m['seconds_per_pair']:.2f} s per pair (median; {m['min_s']:.2f}-{m['max_s']:.2f})"
                     f"{tokens}; relevant passage above the irrelevant one for {m['relevant_above']} of "
                     f"{m['compared']} queries")
        lines += [f"  depth {depth:>3}: {m['cost_s'][str(depth)]:7.1f} s per query = "
                  f"{m['times_first_stage'][str(depth)]:,.0f}x the first stage" for depth in result["depths"]]
    if result["cached_ms"] is not None:
        lines.append(f"re-run with every score cached, depth {max(result['depths'])}: "
                     f"{result['cached_ms']:.1f} ms per query")
    return "\n".join(lines)
