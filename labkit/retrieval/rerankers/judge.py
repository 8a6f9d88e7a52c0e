"""Judge re-ranking: the head of a ranking reordered by the chat model's P(yes) per passage (taught in 17_kb_rerank).

A first-stage search (BM25, vectors, their RRF) scores the query and each document apart; a
cross-encoder reads them together and sees whether the text *answers* the query. No multilingual
cross-encoder ships its weights in a package this lab can install, so the lab's chat model plays
one: ``labkit.models.relevance.judge_relevance`` asks it «does this document answer the query?»
and reads P(yes) from the log-probabilities of its one-token answer (Qwen3-Reranker's method).

``rerank_by_judge`` takes the first `depth` hits, reads each one's text from the lab's corpus
(``lab.corpus.table``, ``lab.corpus.text_column``; the `text` parameter reads another source, as
for ``Coverage``), sorts them by P(yes) (ties keep the ranking's order) and leaves the hits below
the head where they were. Each pair costs a model call of a few seconds on 2 cores, so every score
is cached in Postgres (``labkit.store.scorecache``): a re-run costs nothing. Scores the course
computed once ship in ``labkit/data/relevance_scores.jsonl`` (news) and ``labkit/data/kb/relevance_scores.jsonl``
(the knowledge base's chunks) and are used before any model call.

``Judge(depth, model)`` is the re-rank step of a search pipeline, printed ``judge@20``;
``labkit.retrieval.modes.judged`` wraps any search mode with it. A server that is down, lacks the
model or gives no log-probabilities raises ``JudgeUnavailable`` (a ``LabError``, one readable line).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from psycopg import sql

from labkit.core.corpus import DATA_DIR, ID_COLUMN, DataError, read_records
from labkit.core.ranking import Hit
from labkit.models.relevance import PROMPT_MD5, judge_relevance
from labkit.retrieval.rerankers.coverage import TextSource
from labkit.store.scorecache import ScoreKey, cached_scores, text_md5

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["JUDGE_DEPTH", "SHIPPED_SCORES", "KB_SHIPPED_SCORES", "SHIPPED_FILES", "shipped_scores", "shipped_models", "corpus_text", "load_shipped_scores", "write_shipped_scores", "judge_scores",
           "rerank_by_judge", "Judge"]

JUDGE_DEPTH = 20  # the head a judge reads by default: the seed article re-ranks the fused top-20
SHIPPED_SCORES = DATA_DIR / "relevance_scores.jsonl"  # scores the course computed once (model, prompt, query, text md5)
KB_SHIPPED_SCORES = DATA_DIR / "kb" / "relevance_scores.jsonl"  # the same for the knowledge base's chunks (17_kb_rerank)
SHIPPED_FILES = (SHIPPED_SCORES, KB_SHIPPED_SCORES)  # what judge_scores reads before any model call


def corpus_text(lab: Lab) -> tuple[sql.Composable, dict[str, str]]:
    """SQL rows ``(id, text)`` of the lab's corpus: its documents (or chunks) table and text column."""
    statement = sql.SQL("SELECT {id} AS id, {text} AS text FROM {table}").format(
        id=sql.Identifier(ID_COLUMN), text=sql.Identifier(lab.corpus.text_column), table=sql.Identifier(lab.corpus.table))
    return statement, {}


def load_shipped_scores(path: Path = SHIPPED_SCORES) -> dict[ScoreKey, float]:
    """The shipped scores of a JSON Lines file (model, prompt_md5, query_md5, text_md5, score); DataError names file:line.

    A missing file is no scores. Read once per process and file version.
    """
    if not path.exists():
        return {}
    stat = path.stat()
    return dict(_load_shipped(path, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=4)
def _load_shipped(path: Path, _mtime: int, _size: int) -> tuple[tuple[ScoreKey, float], ...]:
    rows = []
    for number, record in read_records(path):
        fields = [record.get(name) for name in ScoreKey._fields]
        score = record.get("score")
        if not all(isinstance(value, str) for value in fields) or not isinstance(score, (int, float)) \
                or isinstance(score, bool) or not 0.0 <= score <= 1.0:
            raise DataError(f"{path}:{number}: expected model, prompt_md5, query_md5, text_md5 (strings) "
                            "and score (a number from 0 to 1)")
        rows.append((ScoreKey(*map(str, fields)), float(score)))
    return tuple(rows)


def shipped_scores(paths: Sequence[Path] = SHIPPED_FILES) -> dict[ScoreKey, float]:
    """Every shipped score of the files `paths` (news and knowledge base by default), as one mapping."""
    merged: dict[ScoreKey, float] = {}
    for path in paths:
        merged.update(load_shipped_scores(path))
    return merged


def shipped_models(paths: Sequence[Path] = SHIPPED_FILES) -> set[str]:
    """The chat models whose judge scores of the current prompt ship with the course (no model call needed)."""
    return {key.model for key in shipped_scores(paths) if key.prompt_md5 == PROMPT_MD5}


def write_shipped_scores(lab: Lab, queries: Sequence[str], models: Sequence[str], path: Path = SHIPPED_SCORES) -> int:
    """Add the cached scores of the current prompt for `queries` by `models` to `path`; return the lines written.

    How ``SHIPPED_SCORES`` is made: run the judged modes on the labelled queries once (filling the
    cache), then call this. The file's other lines are kept (a cached score replaces the line of
    its key), and lines are sorted, so a regenerated file differs only where scores do.
    """
    rows = lab.conn.execute(
        """
        SELECT model, prompt_md5, query_md5, text_md5, query, score FROM relevance_cache
        WHERE prompt_md5 = %(prompt)s AND model = ANY(%(models)s) AND query_md5 = ANY(%(queries)s)
        """,
        {"prompt": PROMPT_MD5, "models": list(models), "queries": [text_md5(q) for q in queries]},
    ).fetchall()
    records = {ScoreKey(*(record[name] for name in ScoreKey._fields)): record
               for _, record in (read_records(path) if path.exists() else [])}
    for model, prompt, query_md5, md5, query, score in rows:
        records[ScoreKey(model, prompt, query_md5, md5)] = {
            "model": model, "prompt_md5": prompt, "query_md5": query_md5, "text_md5": md5,
            "score": round(float(score), 6), "query": query}
    ordered = sorted(records.values(), key=lambda r: (r["model"], r.get("query", ""), r["text_md5"]))
    path.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in ordered), encoding="utf-8")
    return len(ordered)


def _texts(lab: Lab, doc_ids: Sequence[int], text: TextSource) -> dict[int, str]:
    texts, params = text(lab)
    statement = sql.SQL("WITH x AS ({texts}) SELECT x.id, x.text FROM x WHERE x.id = ANY(%(ids)s)").format(texts=texts)
    return {int(doc_id): str(body) for doc_id, body in lab.conn.execute(statement, {**params, "ids": list(doc_ids)})}


def judge_scores(lab: Lab, query: str, doc_ids: Sequence[int], model: str | None = None,
                 text: TextSource = corpus_text, *, send: Callable[..., Any] | None = None,
                 shipped: Mapping[ScoreKey, float] | None = None) -> dict[int, float]:
    """P(yes) of each document's `text` for `query` by `model` (default: the lab's chat model). Taught in 17_kb_rerank.

    Cached scores and `shipped` ones (default: ``shipped_scores()``, the files of ``SHIPPED_FILES``) cost no
    model call; `send` defaults to ``lab.models.chat``. A document id with no text scores 0.
    """
    if not doc_ids:
        return {}
    model = model or lab.chat_model
    chat = send if send is not None else lab.models.chat
    found = _texts(lab, doc_ids, text)
    present = [doc_id for doc_id in doc_ids if doc_id in found]
    scores = cached_scores(lab.conn, model, PROMPT_MD5, query, [found[doc_id] for doc_id in present],
                           lambda passage: judge_relevance(chat, model, query, passage).probability,
                           shipped_scores() if shipped is None else shipped)
    judged = dict(zip(present, scores))
    return {doc_id: judged.get(doc_id, 0.0) for doc_id in doc_ids}


def rerank_by_judge(lab: Lab, query: str, hits: Sequence[Hit], depth: int = JUDGE_DEPTH, model: str | None = None,
                    text: TextSource = corpus_text) -> list[Hit]:
    """The first `depth` hits sorted by the judge's P(yes) (stable), then the rest as they were. Taught in 17_kb_rerank.

    A head hit's score becomes its P(yes); below the head it is 0.
    """
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    head = list(hits[:depth])
    scores = judge_scores(lab, query, [hit.doc_id for hit in head], model, text)
    head.sort(key=lambda hit: -scores[hit.doc_id])  # sort is stable: ties keep the ranking's order
    return [Hit(h.doc_id, scores[h.doc_id]) for h in head] + [Hit(h.doc_id, 0.0) for h in hits[depth:]]


@dataclass(frozen=True)
class Judge:
    """The re-rank step of a search pipeline: ``rerank_by_judge`` with head `depth` by `model`. Taught in 17_kb_rerank.

    `model` None means the lab's chat model. ``str()`` is ``judge@<depth>``, with the model named
    when one is given (``judge(qwen2.5-coder:0.5b)@20``) and the text's name when it is not the corpus text.
    """

    depth: int = JUDGE_DEPTH
    model: str | None = None
    text: TextSource = corpus_text

    def __post_init__(self) -> None:
        if self.depth < 1:
            raise ValueError(f"depth must be at least 1, got {self.depth}")

    def __call__(self, lab: Lab, query: str, hits: Sequence[Hit]) -> list[Hit]:
        return rerank_by_judge(lab, query, hits, self.depth, self.model, self.text)

    def __str__(self) -> str:
        model = f"({self.model})" if self.model else ""
        shown = "" if self.text is corpus_text else f"[{getattr(self.text, '__name__', 'text')}]"
        return f"judge{model}@{self.depth}{shown}"
