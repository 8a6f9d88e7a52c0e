"""Relevance scores cached in Postgres by (model, prompt, query, text md5), so a re-run judges nothing (17_kb_rerank).

A re-ranker that asks a chat model about each (query, passage) pair is the most expensive step of a
search: seconds per pair on 2 cores. ``cached_scores`` keeps every score it was given in the
``relevance_cache`` table (created with the corpus schema, ``labkit.store.schema``): the key is the
model, the prompt's fingerprint, the md5 of the query and the md5 of the text, so the same passage
under another document id or in another corpus costs nothing either. Scores computed once and
shipped with the course (``shipped``) fill the table before any model call. Each new score is
written as soon as it arrives: an interrupted run loses nothing. Every call of `compute` is counted
in ``SCORE_STATS``.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import psycopg

__all__ = ["SCORE_CACHE_DDL", "ScoreKey", "ScoreStats", "SCORE_STATS", "text_md5", "cached_scores"]

SCORE_CACHE_DDL = """
CREATE TABLE IF NOT EXISTS relevance_cache (
    model      text             NOT NULL,
    prompt_md5 text             NOT NULL,
    query_md5  text             NOT NULL,
    text_md5   text             NOT NULL,
    query      text             NOT NULL,
    score      double precision NOT NULL,
    created_at timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (model, prompt_md5, query_md5, text_md5)
)
"""


class ScoreKey(NamedTuple):
    """What a cached score is keyed by: model, prompt fingerprint, md5 of the query, md5 of the text."""

    model: str
    prompt_md5: str
    query_md5: str
    text_md5: str


@dataclass
class ScoreStats:
    """How many pairs this process scored with the model (cache and shipped scores not counted)."""

    computed: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self) -> None:
        with self._lock:
            self.computed += 1


SCORE_STATS = ScoreStats()


def text_md5(text: str) -> str:
    """The md5 (hex) of a text as UTF-8: the cache key of a query or a passage."""
    return hashlib.md5(text.encode("utf-8", "surrogatepass")).hexdigest()


def _printable(text: str) -> str:
    """Postgres text cannot hold NUL or lone surrogates; the key is the md5, this is for reading."""
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def cached_scores(
    conn: psycopg.Connection[Any], model: str, prompt_md5: str, query: str, texts: Sequence[str],
    compute: Callable[[str], float], shipped: Mapping[ScoreKey, float] | None = None,
) -> list[float]:
    """The score of each text for `query`: from the cache, else from `shipped`, else ``compute(text)``. 17_kb_rerank.

    New scores (shipped or computed) are stored at once; a text given twice is scored once.
    """
    query_md5 = text_md5(query)
    keys = [ScoreKey(model, prompt_md5, query_md5, text_md5(text)) for text in texts]
    rows = conn.execute(
        """
        SELECT text_md5, score FROM relevance_cache
        WHERE model = %(model)s AND prompt_md5 = %(prompt)s AND query_md5 = %(query)s AND text_md5 = ANY(%(texts)s)
        """,
        {"model": model, "prompt": prompt_md5, "query": query_md5, "texts": list({k.text_md5 for k in keys})},
    ).fetchall()
    found: dict[str, float] = {md5: float(score) for md5, score in rows}
    for text, key in zip(texts, keys):
        if key.text_md5 in found:
            continue
        if shipped is not None and key in shipped:
            score = float(shipped[key])
        else:
            score = float(compute(text))
            SCORE_STATS.add()
        conn.execute(
            """
            INSERT INTO relevance_cache (model, prompt_md5, query_md5, text_md5, query, score)
            VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING
            """,
            (model, prompt_md5, query_md5, key.text_md5, _printable(query), score),
        )
        found[key.text_md5] = score
    return [found[key.text_md5] for key in keys]
