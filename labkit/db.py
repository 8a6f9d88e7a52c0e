"""Connection, schema and the idempotent corpus load (taught in 01_corpus and 03_vector).

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

import hashlib
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import tuple_row

from .corpus import Doc, load_corpus
from .embedcache import CACHE_DDL, EMBEDDING_STATS, cached_embeddings
from .errors import LabError
from .lexical import TS_CONFIG
from .settings import Settings

if TYPE_CHECKING:
    from .context import Lab

__all__ = [
    "DatabaseUnavailable",
    "LockBusy",
    "LoadReport",
    "connect",
    "connection_options",
    "application_name",
    "lock_holders",
    "LOCK_WAIT_SECONDS",
    "CONNECT_TIMEOUT",
    "ensure_corpus",
    "vector_table",
    "lab_vector_table",
    "advisory_lock",
    "advisory_xact_lock",
    "LOAD_LOCK",
    "LATENT_LOCK",
    "CHECKPOINT_LOCK",
    "EXPANSION_LOCK",
    "EXPANDED_VEC_LOCK",
    "FIELDED_VEC_LOCK",
    "CLASSROOM_LOCK",
]

# Keys of the session-level advisory locks that serialise work across kernels, all in one place.
LOAD_LOCK = 0x6C61626B6974  # 'labkit' in ASCII: ensure_corpus
LATENT_LOCK = 0x1A7E_2715  # (re)encoding the latent terms (labkit.latent)
CHECKPOINT_LOCK = 0x6C6B6167656E74  # PostgresSaver.setup() of the agent's checkpointer
EXPANSION_LOCK = 0x6578_7061_6E64  # 'expand': generating search questions per document (labkit.expansion)
EXPANDED_VEC_LOCK = 0x6578_7076_6563  # 'expvec': (re)embedding the expanded documents (labkit.expanded)
FIELDED_VEC_LOCK = 0x6669_656C_6421  # 'field!': (re)embedding the fielded documents (labkit.fielded)
CLASSROOM_LOCK = 0x636C_6173_7321  # 'class!': making a student's role and database (labkit.classroom)
LOCK_PURPOSES = {LOAD_LOCK: "loading the corpus", LATENT_LOCK: "encoding the latent terms",
                 CHECKPOINT_LOCK: "setting up the agent's checkpoint tables",
                 EXPANSION_LOCK: "expanding the documents", EXPANDED_VEC_LOCK: "embedding the expanded documents",
                 FIELDED_VEC_LOCK: "embedding the fielded documents",
                 CLASSROOM_LOCK: "making a student's role and database"}
# A loader holds LOAD_LOCK while it embeds new texts (each model request has its own timeout):
# minutes on a cold start at most. Longer means the holder is stuck, and the waiter says who it is.
LOCK_WAIT_SECONDS = 300.0
CONNECT_TIMEOUT = 10  # seconds psycopg waits for Postgres to accept a connection

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


class DatabaseUnavailable(LabError):
    """Postgres did not accept a connection (the message says where and what to do)."""


class LockBusy(LabError):
    """Another session held an advisory lock longer than we would wait (the message says who)."""


class LoadReport(NamedTuple):
    """What one ``ensure_corpus`` call did."""

    model: str
    table: str
    dim: int
    documents: int
    changed_documents: int  # rows of news the loader inserted, updated or deleted
    changed_vectors: int
    embedding_calls: int  # requests to the model server made by this call (0 on a re-run)
    embedded_texts: int
    kept: tuple[int, ...] = ()  # corpus ids whose row someone else edited or inserted: left as it is


def _redacted(url: str) -> str:
    return re.sub(r"//([^:/@]+):[^@]*@", r"//\1:***@", url)


def lock_holders(conn: psycopg.Connection[Any], key: int) -> list[str]:
    """Who holds the session advisory lock `key`: one line per session (pid, application, client, since when)."""
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF  # a bigint key is stored as two oids: high and low 32 bits
    rows = conn.cursor(row_factory=tuple_row).execute(
        """
        SELECT a.pid, a.application_name, coalesce(host(a.client_addr), 'local socket'),
               to_char(a.backend_start, 'YYYY-MM-DD HH24:MI:SS TZ'), a.state,
               to_char(a.state_change, 'HH24:MI:SS'), left(a.query, 80)
          FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid
         WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
           AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND l.classid = %(high)s::bigint::oid AND l.objid = %(low)s::bigint::oid
         ORDER BY a.pid
        """,
        {"high": unsigned >> 32, "low": unsigned & 0xFFFF_FFFF},
    ).fetchall()
    return [
        f"pid {pid} ({name or 'no application_name'}, client {client}, connected since {since}, "
        f"{state or 'state unknown'} since {changed}: {' '.join(str(query or '').split())!r})"
        for pid, name, client, since, state, changed, query in rows
    ]


def _take_lock(conn: psycopg.Connection[Any], key: int, wait_seconds: float, function: sql.SQL) -> None:
    """Call ``function(key)`` (a ``pg_try_advisory*lock``) until it succeeds or `wait_seconds` pass (LockBusy)."""
    deadline = time.monotonic() + wait_seconds
    pause = 0.05
    query = sql.SQL("SELECT {}(%s)").format(function)
    while True:
        row = conn.cursor(row_factory=tuple_row).execute(query, (key,)).fetchone()
        if row and row[0]:  # tuple rows whatever the connection's row factory (the checkpointer's has dicts)
            return
        if time.monotonic() >= deadline:
            holders = "; ".join(lock_holders(conn, key)) or "a session that has just ended"
            purpose = LOCK_PURPOSES.get(key, "work of the lab")
            raise LockBusy(
                f"waited {wait_seconds:g} s for advisory lock {key:#x} ({purpose}); it is held by {holders}. "
                "Wait for that session to finish, or end it (e.g. restart its notebook kernel, "
                "or SELECT pg_terminate_backend(pid))."
            )
        time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
        pause = min(pause * 2, 1.0)


def advisory_xact_lock(conn: psycopg.Connection[Any], key: int, wait_seconds: float = LOCK_WAIT_SECONDS) -> None:
    """Take a transaction-level advisory lock on `key` (call inside ``conn.transaction()``), waiting a bounded time.

    Like ``pg_advisory_xact_lock``, released at the end of the transaction; past `wait_seconds`
    ``LockBusy`` names the holder. Taught in 11_beyond_rrf.
    """
    _take_lock(conn, key, wait_seconds, sql.SQL("pg_try_advisory_xact_lock"))


@contextmanager
def advisory_lock(
    conn: psycopg.Connection[Any], key: int = LOAD_LOCK, wait_seconds: float = LOCK_WAIT_SECONDS
) -> Iterator[None]:
    """Hold a session-level advisory lock on `key` for the block, waiting at most `wait_seconds`. Taught in 01_corpus.

    Polls ``pg_try_advisory_lock``, so a stuck holder cannot block forever: past the deadline
    ``LockBusy`` names the session that holds the lock (``pg_locks`` joined with ``pg_stat_activity``).
    """
    _take_lock(conn, key, wait_seconds, sql.SQL("pg_try_advisory_lock"))
    try:
        yield
    finally:
        if not conn.closed:  # a closed session has released its locks already
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


def application_name() -> str:
    """How the lab's sessions appear in ``pg_stat_activity``: ``labkit <pid> <command>``.

    The command is the ``python -m labkit`` sub-command, else the program's name (``pytest``,
    ``ipykernel_launcher``); Postgres keeps the first 63 characters.
    """
    argv = sys.argv or [""]
    program = Path(argv[0] or "python")
    if program.stem == "__main__":  # python -m package ...
        command = program.parent.name + (f" {argv[1]}" if program.parent.name == "labkit" and len(argv) > 1 else "")
    else:
        command = program.stem if program.stem not in ("", "-", "-c") else "python"
    return f"labkit {os.getpid()} {command}"[:63]


def connection_options(url: str) -> dict[str, Any]:
    """Keyword arguments for ``psycopg.connect(url, ...)``: a connect timeout and, unless the URL or
    ``PGAPPNAME`` already names one, the lab's ``application_name``."""
    options: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT}
    try:
        named = "application_name" in conninfo_to_dict(url) or bool(os.environ.get("PGAPPNAME"))
    except psycopg.ProgrammingError:  # a malformed URL: psycopg.connect reports it
        named = False
    if not named:
        options["application_name"] = application_name()
    return options


def connect(settings: Settings) -> psycopg.Connection[Any]:
    """An autocommit connection to ``settings.database_url`` with pgvector types registered. Taught in 01_corpus."""
    if not settings.database_url:
        raise DatabaseUnavailable("no database URL in settings: start the stack with `./run.sh up`")
    try:
        conn = psycopg.connect(settings.database_url, autocommit=True, **connection_options(settings.database_url))
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
                    [(doc_id, vectors[doc_id]) for doc_id in loaded],  # a kept row keeps its vector too
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
        documents=len(docs),
        changed_documents=changed_docs,
        changed_vectors=changed_vectors,
        embedding_calls=calls,
        embedded_texts=texts_embedded,
        kept=kept,
    )
    return lab.corpus
