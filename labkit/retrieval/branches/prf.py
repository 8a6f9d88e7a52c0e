"""Pseudo-relevance feedback: a vector branch whose query is moved by a first pass (taught in 11_beyond_rrf).

The top ``docs`` documents of a first pass (a search pipeline; the lab's ``hybrid_prf`` mode
uses the plain hybrid, vector + ts_rank_cd) are taken as relevant without asking anyone; the
query vector is moved toward their mean (Rocchio, 1971: ``q' = q/|q| + beta * mean(d/|d|)``)
and the vector table is searched again with ``q'``. ``prf_branch`` makes that a branch a
pipeline can fuse, e.g. with ts_rank_cd (``labkit.retrieval.modes``). The documents' vectors
are the ones ``ensure_corpus`` stored: no model call beyond the query embedding.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
from psycopg import sql

from labkit.core.ranking import Hit, ids
from labkit.retrieval.branches.registry import Branch
from labkit.retrieval.branches.vector import embeddable, vector_sql
from labkit.retrieval.fusion import CANDIDATES
from labkit.store.embedcache import as_array, cached_query_embedding
from labkit.store.vectors import lab_vector_table

if TYPE_CHECKING:
    from labkit.core.context import Lab
    from labkit.retrieval.pipeline import Pipeline

__all__ = ["PrfConfig", "rocchio", "search_vector_prf", "prf_branch"]


@dataclass(frozen=True)
class PrfConfig:
    """How many first-pass documents feed back (`docs`) and how far the query moves toward them (`beta`)."""

    docs: int = 3
    beta: float = 0.5

    def __post_init__(self) -> None:
        if self.docs < 1 or self.beta < 0:
            raise ValueError(f"need docs >= 1, beta >= 0; got {self}")


def rocchio(query: np.ndarray, feedback: list[np.ndarray], beta: float) -> np.ndarray:
    """``q/|q| + beta * mean(d/|d|)``, unit length; the query itself when there is no feedback."""
    def unit(v: np.ndarray) -> np.ndarray:
        norm = float(np.linalg.norm(v))
        return v / norm if norm > 0 else v

    moved = unit(np.asarray(query, dtype=np.float32))
    if feedback and beta > 0:
        moved = moved + beta * np.mean([unit(np.asarray(d, dtype=np.float32)) for d in feedback], axis=0)
    return unit(moved).astype(np.float32)


def _prf_vector_ranking(lab: Lab, query: str, feedback_ids: list[int], depth: int, beta: float) -> list[Hit]:
    table = lab_vector_table(lab)
    rows = lab.conn.execute(
        sql.SQL("SELECT embedding FROM {} WHERE id = ANY(%s) ORDER BY id").format(sql.Identifier(table)),
        (feedback_ids,),
    ).fetchall()
    moved = rocchio(cached_query_embedding(lab, embeddable(query)), [as_array(row[0]) for row in rows], beta)
    found = lab.conn.execute(vector_sql(table), {"embedding": moved, "limit": depth}).fetchall()
    return [Hit(doc_id, 1.0 - distance) for doc_id, distance in sorted(found, key=lambda row: (row[1], row[0]))]


def search_vector_prf(lab: Lab, query: str, top_k: int = 10, *, first_pass: Pipeline, config: PrfConfig) -> list[Hit]:
    """The top_k documents by cosine to the query vector moved toward `first_pass`'s top `config.docs`; any string is safe."""
    if top_k < 1 or not embeddable(query).strip():
        return []
    depth = max(top_k, CANDIDATES)
    feedback = ids(first_pass(lab, query, depth)[: config.docs])
    return _prf_vector_ranking(lab, query, feedback, depth, config.beta)[:top_k]


def prf_branch(first_pass: Pipeline, config: PrfConfig) -> Branch:
    """``search_vector_prf`` as a branch named ``prf``; it needs what its first pass needs. Taught in 11_beyond_rrf."""
    return Branch("prf", partial(search_vector_prf, first_pass=first_pass, config=config), first_pass.needs,
                  f"{first_pass}; docs={config.docs}, beta={config.beta:g}", stored=first_pass.stored)
