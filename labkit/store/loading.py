"""The idempotent corpus load: documents, their vectors, students' rows kept (taught in 01_corpus).

Layout: ``news`` holds the documents and their generated ``tsv``; each embedding
model gets its own vector table (``news_vec_<model slug>``, listed in
``vector_tables``), so switching models needs no DROP and keeps the other model's
vectors; ``embedding_cache`` keeps every embedding ever computed. The whole load runs
under one advisory lock, so notebooks loading at the same time do not collide; a
session waits for it at most ``LOCK_WAIT_SECONDS`` and then learns who holds it.

``news`` is shared with the student: the loader owns only the rows it wrote, listed in
``lab_corpus_rows`` with the md5 of the row as written. A row someone else inserted is
never changed or deleted; a loader row someone edited is kept and reported
(``LoadReport.kept``) until ``ensure_corpus(lab, restore=True)``; a loader row whose
document left the corpus file is deleted (with its vectors: the vector tables reference
``news`` ON DELETE CASCADE). The file is validated before the database is touched, and
all row changes are written in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from labkit.core.context import LoadReport
from labkit.core.corpus import Doc, load_corpus
from labkit.store.embedcache import EMBEDDING_STATS, cached_embeddings
from labkit.store.locks import LOAD_LOCK, LOCK_WAIT_SECONDS, advisory_lock
from labkit.store.schema import OWNERSHIP_DDL, ROW_MD5, SCHEMA_DDL
from labkit.store.vectors import never_analyzed, register_vector_table

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["LoadReport", "ensure_corpus"]

def _doc_arrays(docs: Sequence[Doc]) -> dict[str, list[Any]]:
    """The documents as column arrays, for ``unnest(%(ids)s::integer[], ...) AS d(doc_id, ...)``."""
    return {"ids": [d.id for d in docs], "bodies": [d.text for d in docs], "companies": [d.company for d in docs],
            "tones": [d.tone for d in docs], "topics": [d.topic for d in docs]}


_DOCS = ("unnest(%(ids)s::integer[], %(bodies)s::text[], %(companies)s::text[], %(tones)s::text[], "
         "%(topics)s::text[]) AS d(doc_id, doc_body, doc_company, doc_tone, doc_topic)")


def _sync_documents(
    conn: psycopg.Connection[Any], docs: Sequence[Doc], restore: bool
) -> tuple[list[int], int, tuple[int, ...]]:
    """Bring the loader's rows of ``news`` in line with `docs`; run inside the caller's transaction.

    Returns the ids whose row now holds its corpus document, the number of rows inserted, updated
    or deleted, and the ids left as someone else made them (see the module docstring).
    """
    corpus_ids = {doc.id for doc in docs}
    legacy = conn.execute("SELECT to_regclass('lab_corpus_rows') IS NULL").fetchone()
    conn.execute(OWNERSHIP_DDL)
    if legacy and legacy[0]:  # the loader before lab_corpus_rows owned exactly the corpus ids
        conn.execute(f"INSERT INTO lab_corpus_rows (id, row_md5) SELECT id, {ROW_MD5} FROM news WHERE id = ANY(%s)",
                     (sorted(corpus_ids),))
    owned: dict[int, str] = dict(conn.execute("SELECT id, row_md5 FROM lab_corpus_rows").fetchall())
    current = {
        row[0]: (row[1], tuple(row[2:]))
        for row in conn.execute(f"SELECT id, {ROW_MD5}, body, company, tone, topic FROM news WHERE id = ANY(%s)",
                                (sorted(corpus_ids | set(owned)),))
    }
    inserts: list[Doc] = []
    updates: list[tuple[Doc, str]] = []  # (document, md5 of the row it replaces)
    loaded: list[int] = []
    kept: list[int] = []
    for doc in docs:
        row = current.get(doc.id)
        if row is None:
            inserts.append(doc)
        elif row[1] == (doc.text, doc.company, doc.tone, doc.topic):
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
            f"INSERT INTO news (id, body, company, tone, topic) SELECT * FROM {_DOCS} "
            "ON CONFLICT (id) DO NOTHING RETURNING id", _doc_arrays(inserts)).fetchall()}
        loaded += [d.id for d in inserts if d.id in done]
        kept += [d.id for d in inserts if d.id not in done]
        changed += len(done)
    if updates:  # only rows still as they were read: an edit made meanwhile is kept
        params = {**_doc_arrays([d for d, _ in updates]), "seen": [md5 for _, md5 in updates]}
        done = {r[0] for r in conn.execute(
            f"""
            UPDATE news SET body = doc_body, company = doc_company, tone = doc_tone, topic = doc_topic
              FROM unnest(%(ids)s::integer[], %(bodies)s::text[], %(companies)s::text[], %(tones)s::text[],
                          %(topics)s::text[], %(seen)s::text[])
                   AS d(doc_id, doc_body, doc_company, doc_tone, doc_topic, seen)
             WHERE news.id = doc_id AND {ROW_MD5} = seen
            RETURNING news.id
            """, params).fetchall()}
        loaded += [d.id for d, _ in updates if d.id in done]
        kept += [d.id for d, _ in updates if d.id not in done]
        changed += len(done)
    if stale:
        changed += conn.execute(
            f"DELETE FROM news WHERE id = ANY(%s) AND {ROW_MD5} = ANY(%s)",
            (stale, [owned[i] for i in stale]),
        ).rowcount
    conn.execute("DELETE FROM lab_corpus_rows WHERE id = ANY(%s)", (gone,))
    ours = [doc for doc in docs if doc.id in set(loaded)]
    if ours:
        conn.execute(
            f"""
            INSERT INTO lab_corpus_rows (id, row_md5)
            SELECT doc_id, md5(row(doc_body, doc_company, doc_tone, doc_topic)::text) FROM {_DOCS}
            ON CONFLICT (id) DO UPDATE SET row_md5 = EXCLUDED.row_md5
             WHERE lab_corpus_rows.row_md5 IS DISTINCT FROM EXCLUDED.row_md5
            """,
            _doc_arrays(ours),
        )
    return sorted(loaded), changed, tuple(sorted(set(kept)))


def ensure_corpus(
    lab: Lab,
    *,
    path: str | Path | None = None,
    restore: bool = False,
    wait_seconds: float = LOCK_WAIT_SECONDS,
) -> LoadReport:
    """Create the schema, load the corpus and its vectors for the lab's embedding model. Taught in 01_corpus.

    Idempotent: a second call changes no rows and makes 0 embedding calls. Rows the loader
    did not write are never changed; a corpus row someone edited is kept and listed in
    ``kept`` unless `restore` is true. `path` is another corpus file (default
    ``labkit/data/corpus.jsonl``); it is validated completely before the database is touched
    (``DataError`` naming file:line). The report is also kept as ``lab.corpus``.
    """
    docs = load_corpus(path)
    conn = lab.conn
    with advisory_lock(conn, LOAD_LOCK, wait_seconds):
        calls_before, texts_before = EMBEDDING_STATS.calls, EMBEDDING_STATS.texts
        for statement in SCHEMA_DDL:
            conn.execute(statement)
        vectors = dict(zip((doc.id for doc in docs), cached_embeddings(lab, [doc.text for doc in docs], "passage")))
        dim = int(next(iter(vectors.values())).shape[0])
        with conn.transaction():  # every row change below, or none
            loaded, changed_docs, kept = _sync_documents(conn, docs, restore)
            table = register_vector_table(conn, lab.embed_model, dim)
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
        for name in ("news", table):  # fresh statistics: on 30 rows the planner then prefers a Seq Scan
            if changed_docs or changed_vectors or never_analyzed(conn, name):
                conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(name)))
        calls, texts_embedded = EMBEDDING_STATS.calls - calls_before, EMBEDDING_STATS.texts - texts_before
    lab.corpus = LoadReport(
        model=lab.embed_model,
        table=table,
        dim=dim,
        documents=len(docs),
        changed_documents=changed_docs,
        changed_vectors=changed_vectors,
        embedding_calls=calls,
        embedded_texts=texts_embedded,
        kept=kept,
    )
    return lab.corpus

