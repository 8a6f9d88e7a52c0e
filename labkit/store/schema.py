"""A corpus' schema: its documents table with the generated ``tsv``, its vector-table registry, row ownership.

Taught in 01_corpus. Every statement is idempotent (``IF NOT EXISTS``) and built from the corpus
description (``labkit.core.corpus.Corpus``): table and column names only as identifiers.
"""

from __future__ import annotations

from psycopg import sql

from labkit.core.corpus import ID_COLUMN, Corpus
from labkit.store.embedcache import CACHE_DDL
from labkit.store.scorecache import SCORE_CACHE_DDL

__all__ = ["schema_ddl", "ownership_ddl", "row_md5"]


def _column(name: str, sql_type: str, required: bool) -> sql.Composed:
    null = " NOT NULL" if required else ""
    return sql.SQL("{name} {type}{null}").format(name=sql.Identifier(name), type=sql.SQL(sql_type), null=sql.SQL(null))


def schema_ddl(corpus: Corpus) -> list[sql.SQL | sql.Composed]:
    """The statements that create the corpus' documents table, its full-text index, its vector-table registry and the caches."""
    columns = [
        sql.SQL("{} integer PRIMARY KEY").format(sql.Identifier(ID_COLUMN)),
        _column(corpus.text_column, "text", True),
        *(_column(f.name, f.sql_type, f.required) for f in corpus.fields),  # sql_type is one of SQL_TYPES
        sql.SQL("tsv tsvector GENERATED ALWAYS AS (to_tsvector({config}, {text})) STORED").format(
            config=sql.Literal(corpus.ts_config), text=sql.Identifier(corpus.text_column)),
    ]
    table = sql.Identifier(corpus.table)
    return [
        sql.SQL("CREATE EXTENSION IF NOT EXISTS vector"),
        sql.SQL("CREATE TABLE IF NOT EXISTS {table} ({columns})").format(table=table, columns=sql.SQL(", ").join(columns)),
        sql.SQL("CREATE INDEX IF NOT EXISTS {index} ON {table} USING gin (tsv)").format(
            index=sql.Identifier(corpus.derived("tsv_gin")), table=table),
        sql.SQL(
            """
            CREATE TABLE IF NOT EXISTS {registry} (
                model      text PRIMARY KEY,
                table_name text NOT NULL UNIQUE,
                dim        integer NOT NULL
            )
            """
        ).format(registry=sql.Identifier(corpus.derived("vector_tables"))),
        sql.SQL(CACHE_DDL),
        sql.SQL(SCORE_CACHE_DDL),
    ]


def ownership_ddl(corpus: Corpus) -> sql.Composed:
    """Which rows of the documents table the loader wrote, and the md5 of each as written (made in the load's transaction)."""
    return sql.SQL(
        """
        CREATE TABLE IF NOT EXISTS {rows} (
            id      integer PRIMARY KEY,
            row_md5 text NOT NULL
        )
        """
    ).format(rows=sql.Identifier(corpus.derived("rows")))


def row_md5(corpus: Corpus, prefix: str = "") -> sql.Composed:
    """The fingerprint of a document row's content, ``md5(row(<text>, <fields>)::text)``; the same expression is
    stored and compared, so no encoding can differ. `prefix` names the columns of an ``unnest`` (``doc_``)."""
    columns = sql.SQL(", ").join(sql.Identifier(prefix + name) for name in corpus.columns[1:])
    return sql.SQL("md5(row({})::text)").format(columns)
