"""The corpus schema: the documents table with its generated ``tsv``, the vector-table registry, row ownership.

Taught in 01_corpus. Every statement is idempotent (``IF NOT EXISTS``).
"""

from __future__ import annotations

from psycopg import sql

from labkit.core.corpus import TS_CONFIG
from labkit.store.embedcache import CACHE_DDL

__all__ = ["SCHEMA_DDL", "OWNERSHIP_DDL", "ROW_MD5"]


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


# Which rows of `news` the loader wrote, and the md5 of each as written (created in the load's transaction).
OWNERSHIP_DDL = """
CREATE TABLE IF NOT EXISTS lab_corpus_rows (
    id      integer PRIMARY KEY,
    row_md5 text NOT NULL
)
"""


# The fingerprint of a news row's content; the same expression is stored and compared, so no encoding can differ.
ROW_MD5 = "md5(row(body, company, tone, topic)::text)"

