"""The chunking sweep: cuts of the knowledge base loaded, searched and measured side by side (taught in 15_kb_chunking).

For each ``ChunkSpec`` (method, size, overlap, with or without the title and section path in
front) the documents are cut into a corpus of chunks of its own table, loaded (each chunk
embedded once, then cached in Postgres), and measured:

* quality, per search mode on labelled queries with answer spans: document Recall@k of the
  collapsed ranking, span recall and token IoU of the top-k chunks (``labkit.evaluation.spans``);
* cost: the number of chunks and their tokens, the bytes Postgres keeps for them
  (``pg_total_relation_size`` of the vector table with its HNSW index, and of the chunk table with
  its ``tsv`` and GIN index), and the embedding time: the tokens of every indexed text times the
  seconds per token the embedder took on a sample in this run (``embedding_speed``, the cache
  bypassed), since a cached load takes no time and says nothing.

``pick_cut`` chooses on one split of the queries (tune), among the cuts whose chunks fit the
embedder's window, by document Recall@k, then span recall, then IoU, then the fewest chunks; the choice is frozen as ``labkit.core.corpora.kb.KB_CHUNKING``
and measured on the other split (report). ``./run.sh bench-chunks`` runs the full grid.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from labkit.core.chunked import chunked
from labkit.core.chunking import ChunkSpec, TokenCounter, word_tokens
from labkit.core.corpus import Corpus
from labkit.evaluation.spans import ChunkScores, SpanQuery, TokenIndex, mean_scores, score_chunks
from labkit.models.embedding import embed_documents
from labkit.store.loading import ensure_corpus

if TYPE_CHECKING:
    from labkit.core.context import Lab
    from labkit.retrieval.fusion import SearchMode

__all__ = ["FULL_GRID", "SweepResult", "sweep_corpus", "relation_bytes", "embedding_speed", "measure_cut",
           "sweep_chunking", "pick_cut", "sweep_frame"]

# The bench's grid (./run.sh bench-chunks): three methods x sizes x overlaps, and the best-known cut without its head.
FULL_GRID: tuple[ChunkSpec, ...] = tuple(
    ChunkSpec(method, size, overlap)
    for method in ("fixed", "sentence", "heading")
    for size, overlap in ((100, 0), (100, 20), (200, 0), (200, 40), (400, 0), (400, 80))
)


@dataclasses.dataclass(frozen=True)
class SweepResult:
    """One cut measured: its size and cost, and the per-query scores of each search mode."""

    spec: ChunkSpec
    table: str
    chunks: int
    tokens: int  # of every indexed text, by the sweep's token counter
    longest: int  # tokens of the longest indexed text
    index_bytes: int  # the vector table of the lab's embedding model with its HNSW index
    table_bytes: int  # the chunk table with its tsv and GIN index
    embed_seconds: float  # tokens x the measured seconds per token
    embedded: int  # texts this run sent to the embedder (0 when the cache had them all)
    scores: Mapping[str, Sequence[ChunkScores]]  # search mode -> one row per query

    def means(self, mode: str, queries: Collection[str] | None = None) -> dict[str, float]:
        """The mean document Recall@k, span recall and token IoU of `mode` (over `queries` only, when given)."""
        rows = self.scores[mode]
        return mean_scores(rows if queries is None else [row for row in rows if row.query in queries])


def sweep_corpus(documents: Corpus, spec: ChunkSpec, reuse: Mapping[ChunkSpec, Corpus] | None = None) -> Corpus:
    """The corpus of `documents` cut by `spec`: table ``<documents table>_<spec slug>``, or the one `reuse` names."""
    if reuse and spec in reuse:
        return reuse[spec]
    return chunked(documents, spec, table=f"{documents.table}_{spec.slug}")


def relation_bytes(lab: Lab, table: str) -> int:
    """Bytes Postgres keeps for `table`: heap, TOAST and every index (``pg_total_relation_size``)."""
    row = lab.conn.execute("SELECT pg_total_relation_size(%s::regclass)", (table,)).fetchone()
    return int(row[0]) if row else 0


def embedding_speed(lab: Lab, texts: Sequence[str], count: TokenCounter = word_tokens) -> float:
    """Seconds per token (by `count`) the lab's embedder takes for `texts`, asked directly (the cache bypassed)."""
    tokens = sum(count(text) for text in texts)
    if not tokens:
        raise ValueError("need at least one text with tokens to time the embedder")
    start = time.perf_counter()
    embed_documents(lab.models, lab.embed_model, list(texts))
    return (time.perf_counter() - start) / tokens


def measure_cut(lab: Lab, corpus: Corpus, spec: ChunkSpec, queries: Sequence[SpanQuery],
                modes: Mapping[str, SearchMode], index: TokenIndex, *, top_k: int = 5,
                count: TokenCounter = word_tokens, seconds_per_token: float = 0.0) -> SweepResult:
    """Load the chunk corpus `corpus` (cut by `spec`) and measure it; the lab itself keeps its own corpus."""
    report = ensure_corpus(lab, corpus)
    cut = dataclasses.replace(lab, corpus=corpus, loaded=report)
    lengths = [count(chunk.text) for chunk in corpus.documents()]
    scores = {name: score_chunks(cut, search, queries, index, top_k) for name, search in modes.items()}
    return SweepResult(spec=spec, table=corpus.table, chunks=len(lengths), tokens=sum(lengths),
                       longest=max(lengths), index_bytes=relation_bytes(lab, report.table),
                       table_bytes=relation_bytes(lab, corpus.table), embed_seconds=sum(lengths) * seconds_per_token,
                       embedded=report.embedded_texts, scores=scores)


def sweep_chunking(lab: Lab, documents: Corpus, specs: Sequence[ChunkSpec], queries: Sequence[SpanQuery],
                   modes: Mapping[str, SearchMode], *, top_k: int = 5, count: TokenCounter = word_tokens,
                   reuse: Mapping[ChunkSpec, Corpus] | None = None, sample: int = 16) -> list[SweepResult]:
    """Every cut of `specs` loaded and measured (``measure_cut``); the embedder timed once on `sample` chunks.

    Taught in 15_kb_chunking. `documents` is the corpus of whole documents (the knowledge base's
    ``KB_DOCUMENTS``); `reuse` maps a spec to an existing corpus of that cut (``{KB_CHUNKING: KB}``),
    so the course's own chunk table is not copied.
    """
    if not specs or not queries:
        raise ValueError("the sweep needs at least one cut and one labelled query")
    texts = {doc.id: doc.text for doc in documents.documents()}
    index = TokenIndex.of(texts)
    corpora = [sweep_corpus(documents, spec, reuse) for spec in specs]
    speed = embedding_speed(lab, [chunk.text for chunk in corpora[0].documents()[:sample]], count)
    return [measure_cut(lab, corpus, spec, queries, modes, index, top_k=top_k, count=count, seconds_per_token=speed)
            for spec, corpus in zip(specs, corpora)]


def pick_cut(results: Sequence[SweepResult], mode: str, queries: Collection[str] | None = None,
             max_tokens: int | None = None) -> SweepResult:
    """The best cut for `mode` on `queries` (default all; the lesson passes the tune split's): document Recall@k,
    then span recall, then IoU, then the fewest chunks. Taught in 15_kb_chunking.

    With `max_tokens` (the embedder's window, counted by the sweep's counter) only cuts whose longest chunk
    fits are eligible: a truncating server would drop the rest of a longer chunk. When none fits, all are.
    """
    if not results:
        raise ValueError("no cut to pick from")
    wanted = None if queries is None else set(queries)
    if max_tokens is not None:
        results = [r for r in results if r.longest <= max_tokens] or list(results)

    def key(result: SweepResult) -> tuple[float, float, float, int]:
        means = result.means(mode, wanted)
        return (-round(means["recall"], 9), -round(means["span_recall"], 9), -round(means["iou"], 9), result.chunks)

    return min(results, key=key)


def sweep_frame(results: Sequence[SweepResult], mode: str, queries: Collection[str] | None = None) -> pd.DataFrame:
    """One row per cut: method, size, overlap, head, chunks, tokens, longest, recall, span_recall, iou (of `mode` on
    `queries`, default all), kilobytes of the index and of the table, embedding seconds."""
    wanted = None if queries is None else set(queries)
    rows = []
    for result in results:
        spec = result.spec
        rows.append({"cut": str(spec), "method": spec.method, "size": spec.size, "overlap": spec.overlap,
                     "headed": spec.headed, "chunks": result.chunks, "tokens": result.tokens,
                     "longest": result.longest, **result.means(mode, wanted), "index_kb": result.index_bytes / 1024, "table_kb": result.table_bytes / 1024,
                     "embed_s": result.embed_seconds})
    return pd.DataFrame(rows).set_index("cut")

