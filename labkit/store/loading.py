"""The idempotent corpus load: documents, their vectors, students' rows kept (taught in 01_corpus).

Layout, named after the corpus (``labkit.core.corpus.Corpus``; for the news corpus the table
``news``): the documents table holds the documents and their generated ``tsv``; each embedding
model gets its own vector table (``<table>_vec_<model slug>``, listed in the corpus' registry),
so switching models needs no DROP and keeps the other model's vectors; ``embedding_cache``
keeps every embedding ever computed. The whole load runs under one advisory lock, so notebooks
loading at the same time do not collide; a session waits for it at most ``LOCK_WAIT_SECONDS``
and then learns who holds it.

The documents table is shared with the student: the loader owns only the rows it wrote, listed
(``Corpus.derived("rows")``, for news ``lab_corpus_rows``) with the md5 of the row as written. A
row someone else inserted is never changed or deleted; a loader row someone edited is kept and
reported (``LoadReport.kept``) until ``ensure_corpus(lab, restore=True)``; a loader row whose
document left the corpus file is deleted (with its vectors: the vector tables reference the
documents ON DELETE CASCADE). The file is validated before the database is touched, and all row
changes are written in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from labkit.core.context import LoadReport
from labkit.core.corpus import Corpus, Document
from labkit.store.embedcache import EMBEDDING_STATS, cached_embeddings
from labkit.store.locks import LOAD_LOCK, LOCK_WAIT_SECONDS, advisory_lock
from labkit.store.schema import ownership_ddl, row_md5, schema_ddl
from labkit.store.vectors import never_analyzed, register_vector_table

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["LoadReport", "ensure_corpus"]


class _Statements:
    """The loader's SQL for one corpus: its tables and columns as identifiers, the documents as ``unnest`` arrays."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self.table = sql.Identifier(corpus.table)
        self.rows = sql.Identifier(corpus.derived("rows"))
        self.content = corpus.columns[1:]  # the text column, then the fields
        types = ["integer", "text", *(f.sql_type for f in corpus.fields)]
        self.arrays = [sql.SQL("{}::{}[]").format(sql.Placeholder(f"col_{c}"), sql.SQL(t))
                       for c, t in zip(corpus.columns, types)]
        self.aliases = [sql.Identifier(f"doc_{c}") for c in corpus.columns]
        # unnest(%(col_id)s::integer[], %(col_body)s::text[], ...) AS d(doc_id, doc_body, ...)
        self.docs = sql.SQL("unnest({}) AS d({})").format(sql.SQL(", ").join(self.arrays), sql.SQL(", ").join(self.aliases))
        self.md5 = row_md5(corpus)

    def arrays_of(self, docs: Sequence[Document]) -> dict[str, list[Any]]:
        """The documents as column arrays, for ``self.docs``."""
        rows = [tuple(doc) for doc in docs]
        return {f"col_{c}": [row[i] for row in rows] for i, c in enumerate(self.corpus.columns)}

    def columns(self, names: Sequence[str]) -> sql.Composed:
        return sql.SQL(", ").join(sql.Identifier(name) for name in names)


def _sync_documents(
    conn: psycopg.Connection[Any], corpus: Corpus, docs: Sequence[Document], restore: bool
) -> tuple[list[int], int, tuple[int, ...]]:
    """Bring the loader's rows of the documents table in line with `docs`; run inside the caller's transaction.

    Returns the ids whose row now holds its corpus document, the number of rows inserted, updated
    or deleted, and the ids left as someone else made them (see the module docstring).
    """
    q = _Statements(corpus)
    corpus_ids = {doc.id for doc in docs}
    legacy = conn.execute("SELECT to_regclass(%s) IS NULL", (corpus.derived("rows"),)).fetchone()
    conn.execute(ownership_ddl(corpus))
    if legacy and legacy[0]:  # the loader before the ownership table owned exactly the corpus ids
        conn.execute(sql.SQL("INSERT INTO {rows} (id, row_md5) SELECT id, {md5} FROM {table} WHERE id = ANY(%s)").format(
            rows=q.rows, md5=q.md5, table=q.table), (sorted(corpus_ids),))
    owned: dict[int, str] = dict(conn.execute(sql.SQL("SELECT id, row_md5 FROM {}").format(q.rows)).fetchall())
    current = {
        row[0]: (row[1], tuple(row[2:]))
        for row in conn.execute(sql.SQL("SELECT id, {md5}, {content} FROM {table} WHERE id = ANY(%s)").format(
            md5=q.md5, content=q.columns(q.content), table=q.table), (sorted(corpus_ids | set(owned)),))
    }
    inserts: list[Document] = []
    updates: list[tuple[Document, str]] = []  # (document, md5 of the row it replaces)
    loaded: list[int] = []
    kept: list[int] = []
    for doc in docs:
        row = current.get(doc.id)
        if row is None:
            inserts.append(doc)
        elif row[1] == tuple(doc)[1:]:
            loaded.append(doc.id)  # already the document (whoever wrote it)
        elif doc.id in owned and (row[0] == owned[doc.id] or restore):
            updates.append((doc, row[0]))  # ours and unedited (the file changed), or a restore was asked for
        else:
            kept.append(doc.id)  # edited by someone, or someone else's row under a corpus id
    gone = sorted(set(owned) - corpus_ids)
    stale = [i for i in gone if i in current and current[i][0] == owned[i]]  # ours, unedited, left the file
    kept += [i for i in gone if i in current and current[i][0] != owned[i]]  # edited: handed over, not deleted

    changed = 0
    if inserts:  # DO NOTHING: a row someone inserted meanwhile stays theirs
        done = {r[0] for r in conn.execute(
            sql.SQL("INSERT INTO {table} ({columns}) SELECT * FROM {docs} ON CONFLICT (id) DO NOTHING RETURNING id").format(
                table=q.table, columns=q.columns(corpus.columns), docs=q.docs), q.arrays_of(inserts)).fetchall()}
        loaded += [d.id for d in inserts if d.id in done]
        kept += [d.id for d in inserts if d.id not in done]
        changed += len(done)
    if updates:  # only rows still as they were read: an edit made meanwhile is kept
        params = {**q.arrays_of([d for d, _ in updates]), "seen": [md5 for _, md5 in updates]}
        assignments = sql.SQL(", ").join(sql.SQL("{} = {}").format(sql.Identifier(c), sql.Identifier(f"doc_{c}"))
                                         for c in q.content)
        done = {r[0] for r in conn.execute(
            sql.SQL(
                """
                UPDATE {table} SET {assignments}
                  FROM unnest({arrays}, %(seen)s::text[]) AS d({aliases}, seen)
                 WHERE {table}.id = doc_id AND {md5} = seen
                RETURNING {table}.id
                """
            ).format(table=q.table, assignments=assignments, arrays=sql.SQL(", ").join(q.arrays),
                     aliases=sql.SQL(", ").join(q.aliases), md5=q.md5), params).fetchall()}
        loaded += [d.id for d, _ in updates if d.id in done]
        kept += [d.id for d, _ in updates if d.id not in done]
        changed += len(done)
    if stale:
        changed += conn.execute(
            sql.SQL("DELETE FROM {table} WHERE id = ANY(%s) AND {md5} = ANY(%s)").format(table=q.table, md5=q.md5),
            (stale, [owned[i] for i in stale]),
        ).rowcount
    conn.execute(sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(q.rows), (gone,))
    ours = [doc for doc in docs if doc.id in set(loaded)]
    if ours:
        conn.execute(
            sql.SQL(
                """
                INSERT INTO {rows} (id, row_md5)
                SELECT doc_id, {md5} FROM {docs}
                ON CONFLICT (id) DO UPDATE SET row_md5 = EXCLUDED.row_md5
                 WHERE {rows}.row_md5 IS DISTINCT FROM EXCLUDED.row_md5
                """
            ).format(rows=q.rows, md5=row_md5(corpus, prefix="doc_"), docs=q.docs),
            q.arrays_of(ours),
        )
    return sorted(loaded), changed, tuple(sorted(set(kept)))


def ensure_corpus(
    lab: Lab,
    corpus: Corpus | None = None,
    *,
    path: str | Path | None = None,
    restore: bool = False,
    wait_seconds: float = LOCK_WAIT_SECONDS,
) -> LoadReport:
    """Create the schema, load the corpus and its vectors for the lab's embedding model. Taught in 01_corpus.

    `corpus` defaults to the lab's (``lab.corpus``). Idempotent: a second call changes no rows and
    makes 0 embedding calls. Rows the loader did not write are never changed; a corpus row someone
    edited is kept and listed in ``kept`` unless `restore` is true. `path` is another file of the
    corpus (default: its own, ``corpus.source``); it is validated completely before the database is
    touched (``DataError`` naming file:line). A load of the lab's corpus is also kept as ``lab.loaded``.
    """
    corpus = corpus if corpus is not None else lab.corpus
    docs = corpus.documents(path)
    conn = lab.conn
    with advisory_lock(conn, LOAD_LOCK, wait_seconds):
        calls_before, texts_before, shipped_before = EMBEDDING_STATS.calls, EMBEDDING_STATS.texts, EMBEDDING_STATS.shipped
        for statement in schema_ddl(corpus):
            conn.execute(statement)
        vectors = dict(zip((doc.id for doc in docs), cached_embeddings(lab, [doc.text for doc in docs], "passage")))
        dim = int(next(iter(vectors.values())).shape[0])
        with conn.transaction():  # every row change below, or none
            loaded, changed_docs, kept = _sync_documents(conn, corpus, docs, restore)
            table = register_vector_table(conn, lab.embed_model, dim, corpus)
            with conn.cursor() as cur:
                cur.executemany(
                    sql.SQL(
                        """
                        INSERT INTO {table} AS t (id, embedding) VALUES (%s, %s)
                        ON CONFLICT (id) DO UPDATE SET embedding = EXCLUDED.embedding
                         WHERE t.embedding IS DISTINCT FROM EXCLUDED.embedding
                        """
                    ).format(table=sql.Identifier(table)),
                    [(doc_id, vectors[doc_id]) for doc_id in loaded],  # a kept row keeps its vector too
                )
                changed_vectors = max(cur.rowcount, 0)
        for name in (corpus.table, table):  # fresh statistics: on 30 rows the planner then prefers a Seq Scan
            if changed_docs or changed_vectors or never_analyzed(conn, name):
                conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(name)))
        calls, texts_embedded = EMBEDDING_STATS.calls - calls_before, EMBEDDING_STATS.texts - texts_before
        texts_shipped = EMBEDDING_STATS.shipped - shipped_before
    report = LoadReport(
        model=lab.embed_model,
        table=table,
        dim=dim,
        documents=len(docs),
        changed_documents=changed_docs,
        changed_vectors=changed_vectors,
        embedding_calls=calls,
        embedded_texts=texts_embedded,
        kept=kept,
        corpus=corpus.name,
        shipped_texts=texts_shipped,
    )
    if corpus is lab.corpus:
        lab.loaded = report
    return report
