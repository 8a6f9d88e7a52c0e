"""ensure_corpus on real Postgres: idempotent, 0 embedding calls on a re-run, safe in parallel, one table per model.

These tests work in a scratch database on the lab's server, so they can create and
drop tables without disturbing the lab database other notebooks use.
"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import labkit as lk
from labkit.store.shipped import text_key

pytestmark = pytest.mark.services


@pytest.fixture()
def scratch(settings):
    """Settings pointing at a new, empty database (dropped afterwards)."""
    name = "labkit_scratch_loading"
    admin_url = make_conninfo(settings.database_url, dbname="postgres")
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield dataclasses.replace(settings, database_url=make_conninfo(settings.database_url, dbname=name))
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _count(conn: psycopg.Connection, table: str) -> int:
    return conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()[0]


def test_second_load_changes_nothing_and_embeds_nothing(scratch):
    with lk.open_lab(scratch, load=False) as lab:
        conn = lab.conn
        first = lk.ensure_corpus(lab)
        second = lk.ensure_corpus(lab)
        assert conninfo_to_dict(conn.info.dsn)["dbname"] == "labkit_scratch_loading"
        assert first.embedding_calls >= 1 and first.embedded_texts == 30
        assert (first.changed_documents, first.changed_vectors) == (30, 30)
        assert (second.embedding_calls, second.embedded_texts) == (0, 0)
        assert (second.changed_documents, second.changed_vectors) == (0, 0)
        assert _count(conn, "news") == 30 and _count(conn, second.table) == 30
        assert (second.table, second.dim) == (first.table, first.dim)


def test_an_edited_document_is_kept_until_restore_and_a_students_row_survives(scratch):
    with lk.open_lab(scratch, load=False) as lab:
        conn = lab.conn
        lk.ensure_corpus(lab)
        conn.execute("UPDATE news SET body = 'испорчено' WHERE id = 7")
        conn.execute("INSERT INTO news (id, body, tone, topic) VALUES (999, 'лишний', 'neutral', 'x')")
        report = lk.ensure_corpus(lab)
        assert (report.changed_documents, report.kept) == (0, (7,))  # the edit is reported, not overwritten
        assert conn.execute("SELECT body FROM news WHERE id = 7").fetchone()[0] == "испорчено"
        restored = lk.ensure_corpus(lab, restore=True)
        assert (restored.changed_documents, restored.kept) == (1, ())
        assert restored.embedding_calls == 0  # the original text of 7 is still in the cache
        body = conn.execute("SELECT body FROM news WHERE id = 7").fetchone()[0]
        assert body == lk.load_corpus()[6].text
        assert conn.execute("SELECT body FROM news WHERE id = 999").fetchone()[0] == "лишний"


def test_two_concurrent_loads_do_not_collide(scratch):
    barrier = threading.Barrier(2)
    reports, errors = [], []

    def load() -> None:
        try:
            with lk.open_lab(scratch, load=False) as lab:
                barrier.wait()
                reports.append(lk.ensure_corpus(lab))
        except Exception as exc:  # noqa: BLE001 (collected and asserted below)
            errors.append(exc)

    threads = [threading.Thread(target=load) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    assert len(reports) == 2
    assert sorted(r.embedded_texts for r in reports) == [0, 30]  # the second waited, then found the cache
    with lk.open_lab(scratch, load=False) as lab:
        conn = lab.conn
        assert _count(conn, "news") == 30
        assert _count(conn, reports[0].table) == 30


def test_switching_model_keeps_the_first_models_vectors(scratch):
    other = dataclasses.replace(scratch, embed_model="tiny-test-embedder:8d")
    rng = np.random.default_rng(0)
    with lk.open_lab(scratch, load=False) as lab:
        conn = lab.conn
        first = lk.ensure_corpus(lab)
        # The second model's passage vectors are put in the cache up front (8-d), so the
        # switch runs without a second embedding server: ensure_corpus must find them all.
        rows = [
            (other.embed_model, "passage", text_key(doc.text), doc.text, rng.normal(size=8).astype(np.float32))
            for doc in lk.load_corpus()
        ]
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO embedding_cache (model, kind, text_hash, text, embedding) VALUES (%s, %s, %s, %s, %s)",
                rows,
            )
        switched = lk.ensure_corpus(dataclasses.replace(lab, settings=other, loaded=None))
        assert switched.embedding_calls == 0
        assert switched.table != first.table and switched.dim == 8
        assert switched.table == "news_vec_tiny_test_embedder_8d"
        assert _count(conn, first.table) == 30 and _count(conn, switched.table) == 30
        assert lk.vector_table(conn, scratch.embed_model) == first.table
        back = lk.ensure_corpus(lab)
        assert (back.embedding_calls, back.changed_vectors, back.table) == (0, 0, first.table)
        indexes = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = %s AND indexdef LIKE '%%hnsw%%'", (switched.table,)
        ).fetchall()
        assert len(indexes) == 1 and "vector_cosine_ops" in indexes[0][0]


def test_connect_to_a_closed_port_says_what_to_do(settings):
    down = dataclasses.replace(settings, database_url="postgresql://postgres:secret@127.0.0.1:1/lab")
    with pytest.raises(lk.DatabaseUnavailable) as err:
        lk.connect(down)
    message = str(err.value)
    assert "127.0.0.1:1" in message and "./run.sh up" in message
    assert "secret" not in message  # the password is redacted
