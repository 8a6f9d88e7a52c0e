"""A selective filter over HNSW: what the index hands over, and pgvector 0.8's iterative scans (taught in 16_kb_codes).

On the knowledge base's ~400 chunk vectors the planner never walks the HNSW graph for a filtered
search: the filter's ids are read through the primary key and their distances computed exactly,
which is both the cheapest and the right plan at that size. The graph's problem shows on a larger
table, so ``copy_vectors`` makes one from the real chunk vectors: each vector ``copies`` times,
moved by a little seeded noise (``noise``, relative to a unit vector) and renormalised, with the
chunk it copies in ``chunk`` and its document's id in a column ``doc`` that has no index of its own; an HNSW index over it. It lives
in its own table (``<table>_vec_copies``), never the corpus' tables.

``filtered_scan`` runs ``WHERE doc = d ORDER BY embedding <=> q LIMIT k`` with the settings the
lesson turns (all ``SET LOCAL``, ended with the statement's transaction): ``hnsw.ef_search`` (how
many candidates the index hands over), ``hnsw.iterative_scan`` (``off`` or ``relaxed_order``:
walk on until LIMIT rows pass the filter), ``hnsw.max_scan_tuples`` (where an iterative walk
stops) and the planner's choice (``use``: ``auto`` lets it choose, ``index`` turns the sequential
scan off, ``exact`` turns index scans off: every row of the document read, its distance computed).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from psycopg import sql

from labkit.store.embedcache import as_array
from labkit.store.locks import VECTOR_COPIES_LOCK, advisory_xact_lock
from labkit.store.vectors import lab_vector_table

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["ITERATIVE_SCANS", "USES", "CopyReport", "ScanResult", "copies_table", "copy_vectors", "filtered_scan"]

ITERATIVE_SCANS = ("off", "relaxed_order", "strict_order")  # the values of hnsw.iterative_scan
USES = {"auto": {}, "index": {"enable_seqscan": "off"}, "exact": {"enable_indexscan": "off", "enable_bitmapscan": "off"}}


class CopyReport(NamedTuple):
    """The larger table ``copy_vectors`` made: its name, rows, documents and the HNSW build's seconds."""

    table: str
    rows: int
    documents: int
    build_seconds: float


class ScanResult(NamedTuple):
    """The ids a filtered search returned, best first, the chunks they copy (same order) and the plan Postgres chose.

    Near-equal copies of one chunk may swap places between plans, so two scans agree when their ``chunks`` do.
    """

    ids: list[int]
    plan: list[str]
    chunks: list[int]


def copies_table(lab: Lab) -> str:
    """The name of the lab corpus' table of copied vectors."""
    return lab.corpus.derived("vec_copies")


def copy_vectors(lab: Lab, copies: int = 25, noise: float = 0.05, seed: int = 0) -> CopyReport:
    """(Re)make the table of `copies` noisy copies of each chunk vector, with its document, and its HNSW index.

    Taught in 16_kb_codes. On a corpus without chunks each row is its own document.
    """
    if copies < 1 or not 0 <= noise <= 1:
        raise ValueError(f"need copies >= 1 and 0 <= noise <= 1, got copies={copies}, noise={noise}")
    corpus, table = lab.corpus, copies_table(lab)
    parent = sql.Identifier(corpus.parent) if corpus.parent else sql.Identifier("id")
    rows = lab.conn.execute(sql.SQL("SELECT v.id, d.{parent}, v.embedding FROM {vectors} AS v "
                                    "JOIN {documents} AS d ON d.id = v.id ORDER BY v.id").format(
        parent=parent, vectors=sql.Identifier(lab_vector_table(lab)), documents=sql.Identifier(corpus.table))).fetchall()
    if not rows:
        raise ValueError(f"the corpus {corpus.name!r} has no vectors of {lab.embed_model} to copy; load it first")
    vectors = np.stack([as_array(row[2]) for row in rows])
    chunks, docs = [int(row[0]) for row in rows], [int(row[1]) for row in rows]
    rng = np.random.default_rng(seed)
    name = sql.Identifier(table)
    with lab.conn.transaction():
        advisory_xact_lock(lab.conn, VECTOR_COPIES_LOCK)
        lab.conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(name))
        lab.conn.execute(sql.SQL("CREATE TABLE {} (id integer PRIMARY KEY, chunk integer NOT NULL, doc integer NOT NULL, "
                                 "embedding vector({}) NOT NULL)").format(name, sql.Literal(vectors.shape[1])))
        with lab.conn.cursor() as cur, cur.copy(
                sql.SQL("COPY {} (id, chunk, doc, embedding) FROM STDIN WITH (FORMAT BINARY)").format(name)) as copy:
            copy.set_types(["int4", "int4", "int4", "vector"])
            for round_ in range(copies):
                moved = vectors + rng.standard_normal(vectors.shape, dtype=np.float32) * (noise / np.sqrt(vectors.shape[1]))
                moved /= np.linalg.norm(moved, axis=1, keepdims=True)
                for row, (chunk, doc, vector) in enumerate(zip(chunks, docs, moved)):
                    copy.write_row((round_ * len(docs) + row + 1, chunk, doc, vector.astype(np.float32)))
        lab.conn.execute(sql.SQL("ANALYZE {}").format(name))
        start = time.perf_counter()
        lab.conn.execute(sql.SQL("CREATE INDEX {} ON {} USING hnsw (embedding vector_cosine_ops)").format(
            sql.Identifier(f"{table}_hnsw"), name))
        build = time.perf_counter() - start
    return CopyReport(table, copies * len(docs), len(set(docs)), build)


_SCAN = """
WITH found AS MATERIALIZED (
    SELECT id, chunk, embedding <=> %(q)s AS distance FROM {table}
    WHERE doc = %(doc)s
    ORDER BY embedding <=> %(q)s
    LIMIT %(limit)s
)
SELECT id, chunk FROM found ORDER BY distance, id
"""


def filtered_scan(lab: Lab, table: str, query: Any, doc: int, top_k: int = 10, *, ef_search: int = 40,
                  iterative: str = "off", max_scan_tuples: int | None = None, use: str = "auto") -> ScanResult:
    """The top_k rows of document `doc` nearest to `query` in `table` (``copy_vectors``), and the plan. Taught in 16_kb_codes.

    Relaxed order may hand rows over slightly out of order: the outer query sorts them again.
    """
    if iterative not in ITERATIVE_SCANS:
        raise ValueError(f"iterative must be one of {', '.join(ITERATIVE_SCANS)}, not {iterative!r}")
    if use not in USES:
        raise ValueError(f"use must be one of {', '.join(USES)}, not {use!r}")
    if top_k < 1 or ef_search < 1 or (max_scan_tuples is not None and max_scan_tuples < 1):
        raise ValueError("top_k, ef_search and max_scan_tuples must be at least 1")
    settings = {"hnsw.ef_search": str(ef_search), "hnsw.iterative_scan": iterative, **USES[use]}
    if max_scan_tuples is not None:
        settings["hnsw.max_scan_tuples"] = str(max_scan_tuples)
    statement = sql.SQL(_SCAN).format(table=sql.Identifier(table))
    params = {"q": np.asarray(query, dtype=np.float32), "doc": doc, "limit": top_k}
    with lab.conn.transaction():
        for name, value in settings.items():
            lab.conn.execute("SELECT set_config(%s, %s, true)", (name, value))
        plan = [row[0] for row in lab.conn.execute(sql.SQL("EXPLAIN (COSTS OFF) ") + statement, params)]
        found = lab.conn.execute(statement, params).fetchall()
    return ScanResult([row[0] for row in found], plan, [row[1] for row in found])
