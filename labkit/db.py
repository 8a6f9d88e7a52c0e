"""Connection, schema and the idempotent corpus load (taught in 01_corpus and 03_vector).

Layout: ``news`` holds the documents and their generated ``tsv``; each embedding
model gets its own vector table (``news_vec_<model slug>``, listed in
``vector_tables``), so switching models needs no DROP and keeps the other model's
vectors; ``embedding_cache`` keeps every embedding ever computed. The whole load runs
under one ``pg_advisory_lock``, so notebooks loading at the same time do not collide.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from .corpus import load_corpus
from .embedcache import CACHE_DDL, EMBEDDING_STATS, cached_embeddings
from .errors import LabError
from .lexical import TS_CONFIG
from .settings import Settings

if TYPE_CHECKING:
    from .context import Lab

__all__ = [
    "DatabaseUnavailable",
    "LoadReport",
    "connect",
    "ensure_corpus",
    "vector_table",
    "lab_vector_table",
    "advisory_lock",
    "LOAD_LOCK",
    "LATENT_LOCK",
    "CHECKPOINT_LOCK",
    "EXPANSION_LOCK",
    "EXPANDED_VEC_LOCK",
]

# Keys of the session-level advisory locks that serialise work across kernels, all in one place.
LOAD_LOCK = 0x6C61626B6974  # 'labkit' in ASCII: ensure_corpus
LATENT_LOCK = 0x1A7E_2715  # (re)encoding the latent terms (labkit.latent)
CHECKPOINT_LOCK = 0x6C6B6167656E74  # PostgresSaver.setup() of the agent's checkpointer
EXPANSION_LOCK = 0x6578_7061_6E64  # 'expand': generating search questions per document (labkit.expansion)
EXPANDED_VEC_LOCK = 0x6578_7076_6563  # 'expvec': (re)embedding the expanded documents (labkit.expanded)

SCHEMA_DDL: list[sql.SQL | sql.Composed] = [
    sql.SQL("CREATE EXTENSION IF NOT EXISTS vector"),
    sql.SQL(
        """
        CREATE TABLE IF NOT EXISTS news (
            id      integer PRIMARY KEY,
            body    text NOT NULL,
            company text,
            tone    text NOT NULL,
            topic   text NOT NULL,
            tsv     tsvector GENERATED ALWAYS AS (to_tsvector({config}, body)) STORED
        )
        """
    ).format(config=sql.Literal(TS_CONFIG)),
    sql.SQL("CREATE INDEX IF NOT EXISTS news_tsv_gin ON news USING gin (tsv)"),
    sql.SQL(
        """
        CREATE TABLE IF NOT EXISTS vector_tables (
            model      text PRIMARY KEY,
            table_name text NOT NULL UNIQUE,
            dim        integer NOT NULL
        )
        """
    ),
    sql.SQL(CACHE_DDL),
]


class DatabaseUnavailable(LabError):
    """Postgres did not accept a connection (the message says where and what to do)."""


class LoadReport(NamedTuple):
    """What one ``ensure_corpus`` call did."""

    model: str
    table: str
    dim: int
    documents: int
    changed_documents: int
    changed_vectors: int
    embedding_calls: int  # requests to the model server made by this call (0 on a re-run)
    embedded_texts: int


def _redacted(url: str) -> str:
    return re.sub(r"//([^:/@]+):[^@]*@", r"//\1:***@", url)


@contextmanager
def advisory_lock(conn: psycopg.Connection[Any], key: int = LOAD_LOCK) -> Iterator[None]:
    """Hold a session-level ``pg_advisory_lock(key)`` for the duration of the block. Taught in 01_corpus."""
    conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    try:
        yield
    finally:
        if not conn.closed:  # a closed session has released its locks already
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


def connect(settings: Settings) -> psycopg.Connection[Any]:
    """An autocommit connection to ``settings.database_url`` with pgvector types registered. Taught in 01_corpus."""
    if not settings.database_url:
        raise DatabaseUnavailable("no database URL in settings: start the stack with `./run.sh up`")
    try:
        conn = psycopg.connect(settings.database_url, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatabaseUnavailable(
            f"cannot connect to Postgres at {_redacted(settings.database_url)}: {reason}. "
            "Start the stack with `./run.sh up` (or `python -m labkit up`) and check `./run.sh status`."
        ) from None
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
        with advisory_lock(conn):
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    register_vector(conn)
    return conn


def _slug(model: str) -> str:
    """Table name for a model: ``news_vec_`` + a lower-case slug, with a hash suffix when shortened."""
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_") or "model"
    name = f"news_vec_{slug}"
    if len(name) > 50:
        name = f"{name[:41]}_{hashlib.sha1(model.encode()).hexdigest()[:8]}"
    return name


def _register_vector_table(conn: psycopg.Connection[Any], model: str, dim: int) -> str:
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


def _never_analyzed(conn: psycopg.Connection[Any], table: str) -> bool:
    row = conn.execute(
        "SELECT last_analyze IS NULL AND last_autoanalyze IS NULL FROM pg_stat_user_tables WHERE relname = %s",
        (table,),
    ).fetchone()
    return row is None or bool(row[0])


def _load_documents(conn: psycopg.Connection[Any]) -> tuple[list[int], list[str], int]:
    """Upsert the corpus into ``news`` (deleting rows no longer in it); return ids, texts, rows changed."""
    docs = load_corpus()
    with conn.cursor() as cur:
        cur.executemany(
            """
            INSERT INTO news (id, body, company, tone, topic) VALUES (%s, %s, %s, %s, %s)
            ON CONFLICT (id) DO UPDATE
               SET body = EXCLUDED.body, company = EXCLUDED.company, tone = EXCLUDED.tone, topic = EXCLUDED.topic
             WHERE (news.body, news.company, news.tone, news.topic)
                   IS DISTINCT FROM (EXCLUDED.body, EXCLUDED.company, EXCLUDED.tone, EXCLUDED.topic)
            """,
            [tuple(doc) for doc in docs],
        )
        changed = max(cur.rowcount, 0)
    ids = [doc.id for doc in docs]
    changed += conn.execute("DELETE FROM news WHERE NOT (id = ANY(%s))", (ids,)).rowcount
    return ids, [doc.text for doc in docs], changed


def ensure_corpus(lab: Lab) -> LoadReport:
    """Create the schema, load the corpus and its vectors for the lab's embedding model. Taught in 01_corpus.

    Idempotent: a second call changes no rows and makes 0 embedding calls. The report
    is also kept as ``lab.corpus``.
    """
    conn = lab.conn
    with advisory_lock(conn):
        calls_before, texts_before = EMBEDDING_STATS.calls, EMBEDDING_STATS.texts
        for statement in SCHEMA_DDL:
            conn.execute(statement)
        ids, texts, changed_docs = _load_documents(conn)
        vectors = cached_embeddings(lab, texts, "passage")
        dim = int(vectors[0].shape[0])
        table = _register_vector_table(conn, lab.embed_model, dim)
        with conn.cursor() as cur:
            cur.executemany(
                sql.SQL(
                    """
                    INSERT INTO {table} AS t (id, embedding) VALUES (%s, %s)
                    ON CONFLICT (id) DO UPDATE SET embedding = EXCLUDED.embedding
                     WHERE t.embedding IS DISTINCT FROM EXCLUDED.embedding
                    """
                ).format(table=sql.Identifier(table)),
                list(zip(ids, vectors)),
            )
            changed_vectors = max(cur.rowcount, 0)
        for name in ("news", table):  # fresh statistics: on 30 rows the planner then prefers a Seq Scan
            if changed_docs or changed_vectors or _never_analyzed(conn, name):
                conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(name)))
        calls, texts_embedded = EMBEDDING_STATS.calls - calls_before, EMBEDDING_STATS.texts - texts_before
    lab.corpus = LoadReport(
        model=lab.embed_model,
        table=table,
        dim=dim,
        documents=len(ids),
        changed_documents=changed_docs,
        changed_vectors=changed_vectors,
        embedding_calls=calls,
        embedded_texts=texts_embedded,
    )
    return lab.corpus
