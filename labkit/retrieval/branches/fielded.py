"""The fielded branch: each news text embedded with its rubric and company (issue 11).

A news item is more than its sentence: the corpus files it under a topic and, often, a
company. «Фигурист взял золото» alone sits near the gold-price news for a small embedder;
filed under «спорт: соревнования, медали, матчи» it sits with the other sport news. This
is document expansion from the data's own fields, the way a search engine indexes a
page's title and section with its body, and it costs one embedding per document, once:

    body. Тема: <the topic's gloss>. Компания: <company>.

The glosses are ``labkit.core.corpus.TOPIC_GLOSSES``, the same Russian descriptions the agent's
model reads in its tool schema. Texts are built in SQL from ``news`` (the glosses are a
parameter), so a changed document or a changed gloss is re-embedded at the next search
(``labkit.retrieval.branches.textvec.TextVectors``, table ``news_fielded_vec``).

``search_hybrid_fielded`` searches the corrected query (``labkit.retrieval.rewriters.spelling``) with this
branch; on the tune split no fusion with the other branches ranked better (11_beyond_rrf).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from psycopg import sql

from labkit.core.corpora.news import TOPIC_GLOSSES
from labkit.core.ranking import Hit
from labkit.retrieval.branches.textvec import TextVectors
from labkit.store.locks import FIELDED_VEC_LOCK

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["FIELDED_VEC_TABLE", "FIELDED_TEXT_SQL", "FIELDED_VECTORS", "fielded_params", "fielded_text", "search_fielded"]

FIELDED_VEC_TABLE = "news_fielded_vec"
FIELDED_TEXT_SQL = sql.SQL(
    """
    SELECT id,
           body || '. Тема: ' || coalesce(%(glosses)s::jsonb ->> topic, topic)
                || coalesce('. Компания: ' || company, '') || '.' AS text
    FROM news
    """
)
FIELDED_VECTORS = TextVectors(FIELDED_VEC_TABLE, FIELDED_TEXT_SQL, FIELDED_VEC_LOCK)


def fielded_params() -> dict[str, str]:
    """The parameters of FIELDED_TEXT_SQL: the topic glosses as JSON."""
    return {"glosses": json.dumps(TOPIC_GLOSSES, ensure_ascii=False)}


def fielded_text(lab: Lab) -> tuple[sql.Composable, dict[str, str]]:
    """The fielded text of every document as SQL rows ``(id, text)`` and its parameters (read by re-rankers too)."""
    return FIELDED_TEXT_SQL, fielded_params()


def search_fielded(lab: Lab, query: str, top_k: int = 10) -> list[Hit]:
    """The top_k documents by cosine similarity of the query to body + topic gloss + company. Taught in 11_beyond_rrf."""
    return FIELDED_VECTORS.search(lab, query, top_k, fielded_params())
