"""``bench-chunks``: the full chunking sweep of the knowledge base, picked on tune, reported on report (15_kb_chunking).

    ./run.sh bench-chunks [--modes hybrid,vector] [--pick-mode hybrid] [--k 5] [--json]

Every cut of ``FULL_GRID`` (and the current ``KB_CHUNKING`` with and without its head) is loaded,
its chunks embedded once (cached in Postgres: a first run takes a long while on 2 cores, a second
one minutes) and measured on the labelled queries of both splits. The pick is made on ``tune``
only (``pick_cut``, among the cuts whose longest chunk fits the embedder's window when its
tokenizer is at hand); its ``report`` numbers are printed beside ``KB_CHUNKING``'s.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from labkit.core.chunking import ChunkSpec, word_tokens
from labkit.core.corpora.kb import KB, KB_CHUNKING, KB_DOCUMENTS, KB_QUERIES
from labkit.core.corpus import SPLITS
from labkit.evaluation.chunk_sweep import FULL_GRID, pick_cut, sweep_chunking
from labkit.evaluation.spans import load_span_queries
from labkit.models.tokenizer import model_tokens, token_limit
from labkit.retrieval.modes import SEARCH_MODES, unavailable_modes
from labkit.services.setup import setup

__all__ = ["register", "run", "grid"]


def grid() -> list[ChunkSpec]:
    """The cuts the bench measures: FULL_GRID, then KB_CHUNKING (if not in it) and KB_CHUNKING without its head."""
    specs = list(FULL_GRID)
    for spec in (KB_CHUNKING, dataclasses.replace(KB_CHUNKING, headed=False)):
        if spec not in specs:
            specs.append(spec)
    return specs


def register(sub: Any) -> None:
    """Add the ``bench-chunks`` command to the sub-parsers `sub`."""
    parser = sub.add_parser("bench-chunks", help="the knowledge base's chunking sweep (tune picks, report measures)",
                            description="Every cut of the knowledge base: recall, span recall, IoU and cost.")
    parser.add_argument("--modes", default="vector,hybrid",
                        help="comma-separated search modes to measure (default vector,hybrid)")
    parser.add_argument("--pick-mode", default="hybrid", help="the mode whose tune scores pick the cut (default hybrid)")
    parser.add_argument("--k", "--top-k", dest="top_k", type=int, default=5, help="top k chunks and documents (default 5)")
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the sweep and print its table (or JSON)."""
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in SEARCH_MODES]
    if unknown or not modes or args.pick_mode not in modes or args.top_k < 1:
        args.parser.error(f"--modes must name modes of {', '.join(SEARCH_MODES)} and include --pick-mode "
                          f"({args.pick_mode}); --k must be at least 1")
    missing = [m for m in modes if m in unavailable_modes()]
    if missing:
        args.parser.error(f"mode(s) {', '.join(missing)} cannot run on this machine")
    queries = load_span_queries(KB_QUERIES)
    by_split = {split: [q.query for q in queries if q.split == split] for split in SPLITS}
    with setup(quiet=True, corpus=KB) as lab:
        count = model_tokens(lab.embed_model)
        results = sweep_chunking(lab, KB_DOCUMENTS, grid(), queries, {m: SEARCH_MODES[m] for m in modes},
                                 top_k=args.top_k, count=count or word_tokens,
                                 reuse={KB_CHUNKING: KB})
        limit, counted = token_limit(lab.embed_model), "model tokens" if count else "word tokens (no model tokenizer here)"
    pick = pick_cut(results, args.pick_mode, by_split["tune"], limit if count else None)
    data = {
        "k": args.top_k, "pick_mode": args.pick_mode, "tokens": counted, "token_limit": limit,
        "kb_chunking": str(KB_CHUNKING), "pick": str(pick.spec),
        "cuts": [{"cut": str(r.spec), "chunks": r.chunks, "tokens": r.tokens, "longest": r.longest,
                  "index_kb": round(r.index_bytes / 1024, 1), "table_kb": round(r.table_bytes / 1024, 1),
                  "embed_s": round(r.embed_seconds, 1),
                  "modes": {m: {split: {k: round(v, 4) for k, v in r.means(m, set(by_split[split])).items()}
                                for split in SPLITS} for m in modes}} for r in results],
    }
    print(json.dumps(data, ensure_ascii=False, indent=2) if args.json else _text(data, modes))
    return 0


def _text(data: dict[str, Any], modes: Sequence[str]) -> str:
    k = data["k"]
    head = f"{'cut':<22}{'chunks':>7}{'longest':>8}{'index kB':>9}{'table kB':>9}{'embed s':>8}"
    for mode in modes:
        head += "".join(f"{f'{mode} {split[:3]} {name}':>18}" for split in SPLITS
                        for name in (f"R@{k}", "span", "IoU"))
    lines = [f"tokens counted in {data['tokens']}; the embedder's limit: {data['token_limit'] or 'unknown'}", head]
    for cut in data["cuts"]:
        row = (f"{cut['cut']:<22}{cut['chunks']:>7}{cut['longest']:>8}{cut['index_kb']:>9.0f}{cut['table_kb']:>9.0f}"
               f"{cut['embed_s']:>8.0f}")
        for mode in modes:
            row += "".join(f"{cut['modes'][mode][split][name]:>18.3f}" for split in SPLITS
                           for name in ("recall", "span_recall", "iou"))
        lines.append(row)
    lines.append(f"pick on tune by {data['pick_mode']} among cuts within the window (Recall@{k}, then span recall, IoU, "
                 f"fewer chunks): {data['pick']}; "
                 f"KB_CHUNKING is {data['kb_chunking']}")
    return "\n".join(lines)
