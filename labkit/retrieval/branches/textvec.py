"""Vector search over a text derived from each document, kept current in Postgres (taught in 11_beyond_rrf).

Two branches embed something other than the bare body: ``labkit.retrieval.branches.expanded`` (body plus the
chat model's questions) and ``labkit.retrieval.branches.fielded`` (body plus the topic's description and the
company). Both are a ``TextVectors``: a SQL query giving ``(id, text)`` per document of the
corpus' documents table, and a table with one embedding per (embedding model, document) and
the md5 of the text it was made from.

``sync`` is one cheap statement in the usual case (nothing stale, no orphan). Otherwise,
under a transaction-level advisory lock, rows of deleted documents go and stale texts are
(re)embedded through ``cached_embeddings`` (a re-run costs nothing). ``search`` syncs, then
ranks by cosine distance ``<=>``; its score is ``1 - distance``, ties broken by id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psycopg import sql

from labkit.core.ranking import Hit
from labkit.retrieval.branches.vector import embeddable
from labkit.store.embedcache import cached_embeddings, cached_query_embedding
from labkit.store.locks import advisory_xact_lock

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["TextVectors"]


@dataclass(frozen=True)
class TextVectors:
    """Embeddings of a derived text per document of `documents`: `text_sql` (``id, text``; named parameters) kept in `table`."""

    table: str
    text_sql: sql.Composable
    lock: int  # advisory lock key of (re)embedding, from labkit.store.locks
    documents: str  # the corpus' documents table: a vector whose document is gone is deleted

    def ddl(self) -> sql.Composed:
        """The table: one row per embedding model and document."""
        return sql.SQL(
            """
            CREATE TABLE IF NOT EXISTS {v} (
                model     text NOT NULL,
                id        integer NOT NULL,
                text_md5  text NOT NULL,
                embedding vector NOT NULL,
                PRIMARY KEY (model, id)
            )
            """
        ).format(v=sql.Identifier(self.table))

    def exists(self, lab: Lab) -> bool:
        """True when the table exists."""
        found = lab.conn.execute("SELECT to_regclass(%s) IS NOT NULL", (self.table,)).fetchone()
        return bool(found and found[0])

    def create(self, lab: Lab) -> None:
        """Create the table (under the lock, so two kernels never race on the DDL)."""
        with lab.conn.transaction():
            advisory_xact_lock(lab.conn, self.lock)
            lab.conn.execute(self.ddl())

    def sync(self, lab: Lab, params: dict[str, Any]) -> int:
        """Bring the table in line with the current texts (`params` fill `text_sql`); return rows (re)embedded."""
        if not self.exists(lab):
            self.create(lab)
        params = {**params, "embed_model": lab.embed_model}
        table = sql.Identifier(self.table)
        stale = sql.SQL(
            """
            WITH x AS ({texts})
            SELECT x.id, x.text, md5(x.text) FROM x
            LEFT JOIN {v} AS v ON v.model = %(embed_model)s AND v.id = x.id
            WHERE v.id IS NULL OR v.text_md5 <> md5(x.text)
            ORDER BY x.id
            """
        ).format(texts=self.text_sql, v=table)
        orphans = sql.SQL(
            "FROM {v} AS v WHERE v.model = %(embed_model)s AND NOT EXISTS (SELECT 1 FROM {n} AS n WHERE n.id = v.id)"
        ).format(v=table, n=sql.Identifier(self.documents))
        conn = lab.conn
        if (not conn.execute(stale, params).fetchone()
                and not conn.execute(sql.SQL("SELECT 1 ") + orphans, params).fetchone()):
            return 0
        with conn.transaction():
            advisory_xact_lock(conn, self.lock)
            conn.execute(sql.SQL("DELETE ") + orphans, params)
            rows = conn.execute(stale, params).fetchall()
            vectors = cached_embeddings(lab, [text for _, text, _ in rows], "passage") if rows else []
            with conn.cursor() as cur:
                cur.executemany(
                    sql.SQL(
                        "INSERT INTO {v} (model, id, text_md5, embedding) VALUES (%s, %s, %s, %s) "
                        "ON CONFLICT (model, id) DO UPDATE SET text_md5 = EXCLUDED.text_md5, embedding = EXCLUDED.embedding"
                    ).format(v=table),
                    [(lab.embed_model, doc_id, digest, vec) for (doc_id, _, digest), vec in zip(rows, vectors)],
                )
        return len(rows)

    def search(self, lab: Lab, query: str, top_k: int, params: dict[str, Any]) -> list[Hit]:
        """The top_k documents by cosine similarity of the query to the derived texts; any string is safe."""
        text = embeddable(query)
        if not text.strip() or top_k < 1:
            return []
        self.sync(lab, params)
        rows = lab.conn.execute(
            sql.SQL(
                "SELECT id, embedding <=> %(embedding)s AS distance FROM {v} WHERE model = %(model)s "
                "ORDER BY embedding <=> %(embedding)s, id LIMIT %(limit)s"
            ).format(v=sql.Identifier(self.table)),
            {"embedding": cached_query_embedding(lab, text), "model": lab.embed_model, "limit": top_k},
        ).fetchall()
        return [Hit(doc_id, 1.0 - distance) for doc_id, distance in rows]
