"""One vector table per embedding model, listed in ``vector_tables`` (taught in 03_vector).

Switching models needs no DROP and keeps the other model's vectors; each table has an
HNSW cosine index and references the documents ON DELETE CASCADE.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["vector_table", "lab_vector_table", "register_vector_table", "never_analyzed"]


def _slug(model: str) -> str:
    """Table name for a model: ``news_vec_`` + a lower-case slug, with a hash suffix when shortened."""
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_") or "model"
    name = f"news_vec_{slug}"
    if len(name) > 50:
        name = f"{name[:41]}_{hashlib.sha1(model.encode()).hexdigest()[:8]}"
    return name


def register_vector_table(conn: psycopg.Connection[Any], model: str, dim: int) -> str:
    """Create (once) the vector table of `model` with an HNSW cosine index; return its name."""
    row = conn.execute("SELECT table_name, dim FROM vector_tables WHERE model = %s", (model,)).fetchone()
    if row is not None and row[1] == dim:
        table = row[0]
    else:
        table = row[0] if row is not None else _slug(model)
        taken = conn.execute(
            "SELECT 1 FROM vector_tables WHERE table_name = %s AND model <> %s", (table, model)
        ).fetchone()
        if taken:  # two model names with the same slug: make this one unique
            table = f"{table[:41]}_{hashlib.sha1(model.encode()).hexdigest()[:8]}"
        if row is not None:  # same model name, new dimension: its old vectors are unusable
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))
        conn.execute(
            "INSERT INTO vector_tables (model, table_name, dim) VALUES (%s, %s, %s) "
            "ON CONFLICT (model) DO UPDATE SET table_name = EXCLUDED.table_name, dim = EXCLUDED.dim",
            (model, table, dim),
        )
    conn.execute(
        sql.SQL(
            """
            CREATE TABLE IF NOT EXISTS {table} (
                id        integer PRIMARY KEY REFERENCES news (id) ON DELETE CASCADE,
                embedding vector({dim}) NOT NULL
            )
            """
        ).format(table=sql.Identifier(table), dim=sql.Literal(dim))
    )
    conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS {index} ON {table} USING hnsw (embedding vector_cosine_ops)").format(
            index=sql.Identifier(f"{table}_hnsw"), table=sql.Identifier(table)
        )
    )
    return table


def vector_table(conn: psycopg.Connection[Any], model: str) -> str:
    """Name of the vector table holding `model`'s document vectors. Taught in 03_vector."""
    row = conn.execute("SELECT table_name FROM vector_tables WHERE model = %s", (model,)).fetchone()
    if row is None:
        raise LookupError(f"no vectors for model {model!r} yet: run labkit.ensure_corpus(lab) first")
    return str(row[0])


def lab_vector_table(lab: Lab) -> str:
    """The vector table of the lab's embedding model: known after loading, else looked up. Taught in 03_vector."""
    if lab.corpus is not None and lab.corpus.model == lab.embed_model:
        return lab.corpus.table
    return vector_table(lab.conn, lab.embed_model)


def never_analyzed(conn: psycopg.Connection[Any], table: str) -> bool:
    row = conn.execute(
        "SELECT last_analyze IS NULL AND last_autoanalyze IS NULL FROM pg_stat_user_tables WHERE relname = %s",
        (table,),
    ).fetchone()
    return row is None or bool(row[0])

