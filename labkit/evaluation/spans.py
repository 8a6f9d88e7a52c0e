"""Chunks judged by the answer's span: token recall and token IoU of the top-k chunks (taught in 15_kb_chunking).

Document Recall@k says that a chunk of a right document was found, not that the chunks returned
hold the answer. The knowledge base's labelled queries give each answer's span (document,
character offsets, quote), so the text a search returns is compared with the text that answers,
token by token, as in Chroma's chunking evaluation (Smith & Troynikov, 2024):

    span recall@k = |R ∩ A| / |A|        token IoU@k = |R ∩ A| / |R ∪ A|

A is the set of tokens inside the answers' spans, R the set of tokens of the top-k chunks; a
token is a ``word_tokens`` token of its document, keyed by document, so text that two overlapping
chunks share counts once. Recall asks whether the answer is among what a search returns; IoU
also punishes returning much more text than the answer: longer chunks hold answers more often
and bury them deeper.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from psycopg import sql

from labkit.core.chunking import token_spans
from labkit.core.corpus import ID_COLUMN, NO_ANSWER, SPLITS, DataError, read_records
from labkit.core.ranking import ids
from labkit.evaluation.metrics import recall_at_k
from labkit.retrieval.documents import CHUNK_DEPTH, collapse

if TYPE_CHECKING:
    from labkit.core.context import Lab
    from labkit.retrieval.fusion import SearchMode

__all__ = ["Span", "SpanQuery", "ChunkScores", "load_span_queries", "TokenIndex", "span_scores", "chunk_spans",
           "score_chunks", "mean_scores"]


class Span(NamedTuple):
    """A stretch of a document's text: ``text[start:end]`` of document `doc`."""

    doc: int
    start: int
    end: int


class SpanQuery(NamedTuple):
    """A labelled query with its relevant documents and the spans of its answers."""

    query: str
    relevant: frozenset[int]
    spans: tuple[Span, ...]
    kind: str
    split: str


class ChunkScores(NamedTuple):
    """One query searched over chunks: document Recall@k (collapsed), span recall@k and token IoU@k."""

    query: str
    recall: float
    span_recall: float
    iou: float


def load_span_queries(path: str | Path, split: str | None = None) -> list[SpanQuery]:
    """The labelled queries of `path` that have an answer, with their spans; only `split` when given.

    Every span must lie in one of the query's relevant documents, with 0 <= start < end; a bad record
    is a DataError naming file:line. Queries of kind "no_answer" have no span and are left out.
    """
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: expected one of {', '.join(SPLITS)}")
    path = Path(path)
    found = []
    for number, record in read_records(path):
        where = f"{path}:{number}"
        if record.get("kind") == NO_ANSWER:
            continue
        query, relevant, spans = record.get("query"), record.get("relevant"), record.get("spans")
        kind, record_split = record.get("kind"), record.get("split")
        if (not isinstance(query, str) or not isinstance(kind, str) or record_split not in SPLITS
                or not isinstance(relevant, list) or not relevant
                or not all(isinstance(doc, int) and not isinstance(doc, bool) for doc in relevant)
                or not isinstance(spans, list) or not spans):
            raise DataError(f"{where}: expected query, kind, split (one of {', '.join(SPLITS)}), "
                            "a non-empty list 'relevant' of document ids and a non-empty list 'spans'")
        parsed = []
        for span in spans:
            values = [span.get(key) if isinstance(span, dict) else None for key in ("doc", "start", "end")]
            numbers = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
            if len(numbers) != 3 or numbers[0] not in relevant or not 0 <= numbers[1] < numbers[2]:
                raise DataError(f"{where}: a span needs integer doc (one of 'relevant'), start and end "
                                f"with 0 <= start < end, got {span!r}")
            parsed.append(Span(*numbers))
        if split is None or record_split == split:
            found.append(SpanQuery(query, frozenset(relevant), tuple(parsed), kind, record_split))
    if not found:
        raise DataError(f"{path}: no labelled queries with spans" + (f" in split {split!r}" if split else ""))
    return found


@dataclass(frozen=True)
class TokenIndex:
    """Where each token of each document's text starts and ends (``token_spans``), to turn character spans into tokens."""

    starts: Mapping[int, Sequence[int]]
    ends: Mapping[int, Sequence[int]]

    @classmethod
    def of(cls, texts: Mapping[int, str]) -> TokenIndex:
        """The index of documents given as ``{id: text}``."""
        tokens = {doc: token_spans(text) for doc, text in texts.items()}
        return cls({doc: [start for start, _ in spans] for doc, spans in tokens.items()},
                   {doc: [end for _, end in spans] for doc, spans in tokens.items()})

    def covered(self, span: Span) -> set[tuple[int, int]]:
        """The (document, token number) pairs of the tokens that overlap `span`."""
        if span.doc not in self.starts:
            raise KeyError(f"no text of document {span.doc} in the token index")
        first = bisect.bisect_right(self.ends[span.doc], span.start)  # the first token that ends after `start`
        last = bisect.bisect_left(self.starts[span.doc], span.end)  # tokens that start before `end`
        return {(span.doc, number) for number in range(first, last)}


def span_scores(chunks: Sequence[Span], answers: Sequence[Span], index: TokenIndex) -> tuple[float, float]:
    """(span recall, token IoU) of the text of `chunks` against the text of `answers`."""
    answer = set().union(*(index.covered(span) for span in answers))
    if not answer:
        raise ValueError("the answers' spans hold no token")
    returned = set().union(*(index.covered(span) for span in chunks))
    common = len(answer & returned)
    return common / len(answer), common / len(answer | returned)


def chunk_spans(lab: Lab, chunk_ids: Sequence[int]) -> dict[int, Span]:
    """Where each chunk of the lab's corpus of chunks lies in its document (ids that are no chunk are left out)."""
    parent = lab.corpus.parent
    if parent is None:
        raise ValueError(f"the corpus {lab.corpus.name!r} is not a corpus of chunks (it has no parent field)")
    rows = lab.conn.execute(
        sql.SQL("SELECT {id}, {parent}, span_start, span_end FROM {table} WHERE {id} = ANY(%s)").format(
            id=sql.Identifier(ID_COLUMN), parent=sql.Identifier(parent), table=sql.Identifier(lab.corpus.table)),
        (list(chunk_ids),),
    ).fetchall()
    return {chunk: Span(doc, start, end) for chunk, doc, start, end in rows}


def score_chunks(lab: Lab, search: SearchMode, queries: Sequence[SpanQuery], index: TokenIndex,
                 top_k: int = 5) -> list[ChunkScores]:
    """Each query searched once over the lab's chunks: document Recall@k of the collapsed ranking, and span
    recall and token IoU of the top-k chunks. Taught in 15_kb_chunking."""
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    scores = []
    for labelled in queries:
        chunks = search(lab, labelled.query, max(CHUNK_DEPTH, 5 * top_k))
        where = chunk_spans(lab, [hit.doc_id for hit in chunks])
        documents = ids(collapse(chunks, {chunk: span.doc for chunk, span in where.items()}))
        top = [where[hit.doc_id] for hit in chunks[:top_k] if hit.doc_id in where]
        span_recall, iou = span_scores(top, labelled.spans, index)
        scores.append(ChunkScores(labelled.query, recall_at_k(documents, labelled.relevant, top_k), span_recall, iou))
    return scores


def mean_scores(scores: Sequence[ChunkScores]) -> dict[str, float]:
    """The mean of each measure over queries: ``{"recall", "span_recall", "iou"}``."""
    if not scores:
        raise ValueError("need the scores of at least one query")
    return {name: statistics.fmean(getattr(s, name) for s in scores) for name in ("recall", "span_recall", "iou")}
