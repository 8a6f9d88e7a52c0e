"""Advisory locks that serialise the lab's work across kernels, with bounded waits that name the holder (01_corpus).

Every key lives here, beside what it protects; a session waits at most ``LOCK_WAIT_SECONDS``
and then learns who holds the lock (``LockBusy``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from labkit.core.errors import LabError

__all__ = ["LockBusy", "lock_holders", "advisory_lock", "advisory_xact_lock", "LOCK_WAIT_SECONDS", "LOCK_PURPOSES",
           "LOAD_LOCK", "LATENT_LOCK", "CHECKPOINT_LOCK", "EXPANSION_LOCK", "EXPANDED_VEC_LOCK", "FIELDED_VEC_LOCK",
           "CLASSROOM_LOCK", "CONTEXT_LOCK", "CONTEXT_VEC_LOCK", "CODE_INDEX_LOCK", "ALIASES_LOCK", "VECTOR_COPIES_LOCK",
           "SHOP_LOCK", "SCALE_LOCK", "hold_session_lock"]


# Keys of the session-level advisory locks that serialise work across kernels, all in one place.
LOAD_LOCK = 0x6C61626B6974  # 'labkit' in ASCII: ensure_corpus


LATENT_LOCK = 0x1A7E_2715  # (re)encoding the latent terms (labkit.retrieval.branches.latent)


CHECKPOINT_LOCK = 0x6C6B6167656E74  # PostgresSaver.setup() of the agent's checkpointer


EXPANSION_LOCK = 0x6578_7061_6E64  # 'expand': generating search questions per document (labkit.retrieval.questions)


EXPANDED_VEC_LOCK = 0x6578_7076_6563  # 'expvec': (re)embedding the expanded documents (labkit.retrieval.branches.expanded)


FIELDED_VEC_LOCK = 0x6669_656C_6421  # 'field!': (re)embedding the fielded documents (labkit.retrieval.branches.fielded)


CLASSROOM_LOCK = 0x636C_6173_7321  # 'class!': making a student's role and database (labkit.services.classroom)


CONTEXT_LOCK = 0x636F_6E74_6578  # 'contex': writing a context line per chunk (labkit.retrieval.contexts)


CONTEXT_VEC_LOCK = 0x6378_7476_6563  # 'cxtvec': (re)embedding the contextual chunks (labkit.retrieval.branches.contextual)


CODE_INDEX_LOCK = 0x636F_6465_6B79  # 'codeky': the code-key function and index (labkit.retrieval.branches.codes)


ALIASES_LOCK = 0x616C_6961_7321  # 'alias!': mining the abbreviations table (labkit.retrieval.rewriters.aliases)


VECTOR_COPIES_LOCK = 0x7665_6363_7079  # 'veccpy': the copied chunk vectors (labkit.evaluation.filtered_scan)


SHOP_LOCK = 0x73_686F_7021  # 'shop!': creating and loading the shop's schema and its reader role (labkit.store.shop)


# Held by a session from its first load of ``scale_vectors`` until it disconnects: the table, its index and the
# measurements on them are one experiment, so a second kernel (or ./run.sh bench) waits instead of replacing them.
SCALE_LOCK = 0x7363_616C_6521  # 'scale!': the scale experiment's table (labkit.evaluation.scale)


LOCK_PURPOSES = {LOAD_LOCK: "loading the corpus", LATENT_LOCK: "encoding the latent terms",
                 CHECKPOINT_LOCK: "setting up the agent's checkpoint tables",
                 EXPANSION_LOCK: "expanding the documents", EXPANDED_VEC_LOCK: "embedding the expanded documents",
                 FIELDED_VEC_LOCK: "embedding the fielded documents",
                 CLASSROOM_LOCK: "making a student's role and database",
                 CONTEXT_LOCK: "writing context lines for the chunks", CONTEXT_VEC_LOCK: "embedding the contextual chunks",
                 CODE_INDEX_LOCK: "creating the code-key index", ALIASES_LOCK: "mining the abbreviations",
                 VECTOR_COPIES_LOCK: "copying the chunk vectors", SHOP_LOCK: "loading the shop",
                 SCALE_LOCK: "the scale experiment on table scale_vectors (12_scale or ./run.sh bench)"}


# A loader holds LOAD_LOCK while it embeds new texts (each model request has its own timeout):
# minutes on a cold start at most. Longer means the holder is stuck, and the waiter says who it is.
LOCK_WAIT_SECONDS = 300.0


class LockBusy(LabError):
    """Another session held an advisory lock longer than we would wait (the message says who)."""


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


def hold_session_lock(conn: psycopg.Connection[Any], key: int, wait_seconds: float = LOCK_WAIT_SECONDS) -> None:
    """Take the session-level advisory lock `key` unless this session holds it already; keep it until disconnect.

    For work spread over many calls (and notebook cells) that another session must not interleave with.
    A holder that waits too long gets ``LockBusy`` naming the holder. Taught in 12_scale.
    """
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    held = conn.cursor(row_factory=tuple_row).execute(
        "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND pid = pg_backend_pid() "
        "AND classid = %(high)s::bigint::oid AND objid = %(low)s::bigint::oid",
        {"high": unsigned >> 32, "low": unsigned & 0xFFFF_FFFF}).fetchone()
    if not held:
        _take_lock(conn, key, wait_seconds, sql.SQL("pg_try_advisory_lock"))
