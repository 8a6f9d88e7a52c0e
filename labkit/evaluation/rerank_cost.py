"""What a judge re-ranker costs per query on this machine, by depth (taught in 17_kb_rerank).

``measure_judge_cost`` times the chat model judging (query, passage) pairs of knowledge-base size:
each passage is a window of about ``PASSAGE_CHARS`` characters (about 300 tokens of Russian) of a
document of ``labkit/data/kb``, cut around the answer of a labelled query of the *tune* split (a
relevant passage) or at the same place in a document that does not answer it (an irrelevant one).
One query is judged against its passages in a row, as a re-ranker does, so the server re-reads only
each passage, not the instruction and the query. No cache is used: every pair is a model call.

The cost of a head of `depth` hits is ``depth`` × the median seconds per pair (a re-ranker judges
the pairs one after another); it is set beside the first-stage search's own milliseconds and the
milliseconds a re-run takes when every score comes from the cache. As a sanity check of what the
cost buys, the same calls say how often the relevant passage of a query scored above its
irrelevant one. ``./run.sh bench-rerank`` prints it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from labkit.core.corpus import DATA_DIR, read_records
from labkit.models.relevance import PROMPT_MD5, judge_relevance
from labkit.retrieval.modes import all_modes
from labkit.store.scorecache import ScoreKey, cached_scores, text_md5

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["BENCH_DEPTHS", "PASSAGE_CHARS", "KB_DIR", "Pair", "bench_pairs", "measure_judge_cost"]

BENCH_DEPTHS = (10, 20, 50)
PASSAGE_CHARS = 850  # about 300 tokens of Russian for the Qwen2.5 tokenizer (measured: 1,100 characters gave 390; the bench prints it)
KB_DIR = DATA_DIR / "kb"


class Pair(NamedTuple):
    """One (query, passage) pair of the bench and whether the passage holds the query's answer."""

    query: str
    passage: str
    relevant: bool


def _window(text: str, around: int, size: int) -> str:
    """About `size` characters of `text` starting a third of `size` before `around`, cut at spaces."""
    start = max(0, min(around - size // 3, len(text) - size))
    if start > 0:
        start = text.find(" ", start) + 1 or start
    piece = text[start:start + size]
    return piece.rsplit(" ", 1)[0] if start + size < len(text) and " " in piece else piece


def bench_pairs(count: int, passage_chars: int = PASSAGE_CHARS, kb_dir: Path = KB_DIR) -> list[Pair]:
    """`count` pairs from the knowledge base's tune queries: a relevant and an irrelevant passage in turn."""
    documents = {int(record["id"]): str(record["text"]) for _, record in read_records(kb_dir / "documents.jsonl")}
    ids = sorted(documents)
    pairs: list[Pair] = []
    for _, record in read_records(kb_dir / "queries.jsonl"):
        spans = record.get("spans") or []
        if record.get("split") != "tune" or not spans:
            continue
        span, relevant = spans[0], set(record.get("relevant") or [])
        other = next(i for i in ids[ids.index(span["doc"]) + 1:] + ids if i not in relevant)
        for doc, holds in ((span["doc"], True), (other, False)):
            pairs.append(Pair(record["query"], _window(documents[doc], int(span["start"]), passage_chars), holds))
        if len(pairs) >= count:
            break
    return pairs[:count]


def measure_judge_cost(lab: Lab, models: Sequence[str], pairs: Sequence[Pair],
                       depths: Sequence[int] = BENCH_DEPTHS, first_stage: str = "hybrid") -> dict[str, Any]:
    """Seconds per judged pair for each model, the cost per query at each depth and the cached re-run's cost.

    Each model answers one warm-up pair first (loading it), which is not counted.
    """
    if not pairs:
        raise ValueError("need at least one pair to time")
    search = all_modes()[first_stage]
    search(lab, pairs[0].query, max(depths))  # warm-up: embeddings and plans
    started = time.perf_counter()
    for pair in pairs:
        search(lab, pair.query, max(depths))
    first_ms = (time.perf_counter() - started) * 1000 / len(pairs)
    result: dict[str, Any] = {"pairs": len(pairs), "passage_chars": round(statistics.mean(len(p.passage) for p in pairs)),
                              "first_stage": first_stage, "first_stage_ms": first_ms, "depths": list(depths),
                              "models": {}}
    for model in models:
        judge_relevance(lab.models.chat, model, pairs[0].query, "")  # warm-up: load the model
        overhead = judge_relevance(lab.models.chat, model, pairs[0].query, "").prompt_tokens or 0
        judged = [judge_relevance(lab.models.chat, model, pair.query, pair.passage) for pair in pairs]
        seconds = [j.seconds for j in judged]
        per_pair = statistics.median(seconds)
        tokens = [j.prompt_tokens for j in judged if j.prompt_tokens is not None]
        by_query: dict[str, dict[bool, float]] = {}
        for pair, judgement in zip(pairs, judged):
            by_query.setdefault(pair.query, {})[pair.relevant] = judgement.probability
        compared = [scores for scores in by_query.values() if len(scores) == 2]
        result["models"][model] = {
            "seconds_per_pair": per_pair, "min_s": min(seconds), "max_s": max(seconds),
            "prompt_tokens": statistics.mean(tokens) if tokens else None,
            "passage_tokens": statistics.mean(tokens) - overhead if tokens and overhead else None,
            "cost_s": {str(depth): depth * per_pair for depth in depths},
            "times_first_stage": {str(depth): depth * per_pair * 1000 / first_ms for depth in depths},
            "relevant_above": sum(s[True] > s[False] for s in compared), "compared": len(compared),
        }
    result["cached_ms"] = _cached_ms(lab, models[0], pairs, max(depths)) if models else None
    return result


def _cached_ms(lab: Lab, model: str, pairs: Sequence[Pair], depth: int) -> float:
    """Milliseconds to read `depth` cached scores of one query (stored first, under a bench-only prompt key)."""
    query, texts = "bench: cached re-run", [f"{pairs[i % len(pairs)].passage} #{i}" for i in range(depth)]
    key = f"bench-{PROMPT_MD5}"
    given = {ScoreKey(model, key, text_md5(query), text_md5(text)): 0.5 for text in texts}
    cached_scores(lab.conn, model, key, query, texts, lambda _: 1 / 0, given)  # stores them (no model call)
    started = time.perf_counter()
    cached_scores(lab.conn, model, key, query, texts, lambda _: 1 / 0)  # a miss would raise
    elapsed = (time.perf_counter() - started) * 1000
    lab.conn.execute("DELETE FROM relevance_cache WHERE prompt_md5 = %s", (key,))
    return elapsed
