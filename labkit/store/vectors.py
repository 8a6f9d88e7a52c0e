"""One vector table per corpus and embedding model, listed in the corpus' registry (taught in 03_vector).

A corpus' vector tables are named ``<table>_vec_<model slug>`` and listed in its registry
(``Corpus.derived("vector_tables")``: for the news corpus the table ``vector_tables``), so
switching models needs no DROP and keeps the other model's vectors, and two corpora keep
their vectors of one model apart. Each table has an HNSW cosine index and references the
documents ON DELETE CASCADE.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from labkit.core.corpora import DEFAULT_CORPUS
from labkit.core.corpus import Corpus

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["vector_table", "lab_vector_table", "register_vector_table", "never_analyzed"]


def _slug(model: str, corpus: Corpus) -> str:
    """Table name for a model: ``<table>_vec_`` + a lower-case slug, with a hash suffix when shortened."""
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_") or "model"
    name = corpus.derived(f"vec_{slug}")
    if len(name) > 50:
        name = f"{name[:41]}_{hashlib.sha1(model.encode()).hexdigest()[:8]}"
    return name


def register_vector_table(conn: psycopg.Connection[Any], model: str, dim: int, corpus: Corpus = DEFAULT_CORPUS) -> str:
    """Create (once) the vector table of `model` for `corpus` with an HNSW cosine index; return its name."""
    registry = sql.Identifier(corpus.derived("vector_tables"))
    row = conn.execute(sql.SQL("SELECT table_name, dim FROM {} WHERE model = %s").format(registry), (model,)).fetchone()
    if row is not None and row[1] == dim:
        table = row[0]
    else:
        table = row[0] if row is not None else _slug(model, corpus)
        taken = conn.execute(
            sql.SQL("SELECT 1 FROM {} WHERE table_name = %s AND model <> %s").format(registry), (table, model)
        ).fetchone()
        if taken:  # two model names with the same slug: make this one unique
            table = f"{table[:41]}_{hashlib.sha1(model.encode()).hexdigest()[:8]}"
        if row is not None:  # same model name, new dimension: its old vectors are unusable
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (model, table_name, dim) VALUES (%s, %s, %s) "
                "ON CONFLICT (model) DO UPDATE SET table_name = EXCLUDED.table_name, dim = EXCLUDED.dim"
            ).format(registry),
            (model, table, dim),
        )
    conn.execute(
        sql.SQL(
            """
            CREATE TABLE IF NOT EXISTS {table} (
                id        integer PRIMARY KEY REFERENCES {documents} (id) ON DELETE CASCADE,
                embedding vector({dim}) NOT NULL
            )
            """
        ).format(table=sql.Identifier(table), documents=sql.Identifier(corpus.table), dim=sql.Literal(dim))
    )
    conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS {index} ON {table} USING hnsw (embedding vector_cosine_ops)").format(
            index=sql.Identifier(f"{table}_hnsw"), table=sql.Identifier(table)
        )
    )
    return table


def vector_table(conn: psycopg.Connection[Any], model: str, corpus: Corpus = DEFAULT_CORPUS) -> str:
    """Name of the table holding `model`'s vectors of the documents of `corpus`. Taught in 03_vector."""
    registry = corpus.derived("vector_tables")
    found = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (registry,)).fetchone()
    row = None
    if found and found[0]:
        row = conn.execute(
            sql.SQL("SELECT table_name FROM {} WHERE model = %s").format(sql.Identifier(registry)), (model,)
        ).fetchone()
    if row is None:
        raise LookupError(f"no vectors for model {model!r} in corpus {corpus.name!r} yet: "
                          "run labkit.ensure_corpus(lab) first")
    return str(row[0])


def lab_vector_table(lab: Lab) -> str:
    """The vector table of the lab's corpus and embedding model: known after loading, else looked up. Taught in 03_vector."""
    loaded = lab.loaded
    if loaded is not None and loaded.model == lab.embed_model and loaded.corpus == lab.corpus.name:
        return loaded.table
    return vector_table(lab.conn, lab.embed_model, lab.corpus)


def never_analyzed(conn: psycopg.Connection[Any], table: str) -> bool:
    row = conn.execute(
        "SELECT last_analyze IS NULL AND last_autoanalyze IS NULL FROM pg_stat_user_tables WHERE relname = %s",
        (table,),
    ).fetchone()
    return row is None or bool(row[0])
