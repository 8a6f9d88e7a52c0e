"""ensure_corpus shares `news` with the student: it changes only rows it wrote, and checks the file first.

Real Postgres and the real embedding model, in a scratch database of the lab's server (the
embedding cache survives between tests, so only the first load of the module embeds).
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from privatepg import scratch_database
from psycopg import sql

import labkit as lk
from labkit.services.setup import describe
from labkit.store.locks import LOAD_LOCK, LockBusy, advisory_lock

pytestmark = pytest.mark.services

SCRATCH = "labkit_scratch_ownership"


@pytest.fixture(scope="module")
def scratch_settings(settings):
    """Settings pointing at a new database of the lab's server (dropped after the module)."""
    with scratch_database(settings, SCRATCH) as scratch:
        yield scratch


@pytest.fixture()
def lab(scratch_settings):
    """A lab on the scratch database with no corpus tables (the embedding cache is kept)."""
    with lk.open_lab(scratch_settings, load=False) as context:
        context.conn.execute("DROP TABLE IF EXISTS news, lab_corpus_rows, vector_tables CASCADE")
        for (table,) in context.conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'news_vec_%'"):
            context.conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(table)))
        yield context


def _write(path: Path, docs: list[lk.Doc]) -> Path:
    lines = [json.dumps({"id": d.id, "text": d.text, "company": d.company, "tone": d.tone, "topic": d.topic},
                        ensure_ascii=False) for d in docs]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _rows(conn: psycopg.Connection) -> dict[int, tuple]:
    return {row[0]: row[1:] for row in conn.execute("SELECT id, body, company, tone, topic FROM news")}


def _snapshot(lab: lk.Lab) -> tuple:
    """Everything a load could change: news, the ownership list, the vectors, the list of tables."""
    conn = lab.conn
    tables = [row[0] for row in conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")]
    owned = conn.execute("SELECT id, row_md5 FROM lab_corpus_rows ORDER BY id").fetchall()
    vectors = conn.execute(sql.SQL("SELECT id, embedding::text FROM {} ORDER BY id").format(
        sql.Identifier(lk.vector_table(conn, lab.embed_model)))).fetchall()
    return tables, _rows(conn), owned, vectors


def _student_row(conn: psycopg.Connection, doc_id: int, body: str = "моя заметка") -> None:
    conn.execute("INSERT INTO news (id, body, tone, topic) VALUES (%s, %s, 'neutral', 'notes')", (doc_id, body))


def test_rows_a_student_inserted_survive_every_load_with_their_vectors(lab):
    first = lk.ensure_corpus(lab)
    _student_row(lab.conn, 1000)
    lab.conn.execute(sql.SQL("INSERT INTO {} (id, embedding) SELECT 1000, embedding FROM {} WHERE id = 1").format(
        sql.Identifier(first.table), sql.Identifier(first.table)))
    again = lk.ensure_corpus(lab)
    assert (again.changed_documents, again.changed_vectors, again.kept) == (0, 0, ())
    assert _rows(lab.conn)[1000] == ("моя заметка", None, "neutral", "notes")
    assert lab.conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE id = 1000").format(
        sql.Identifier(first.table))).fetchone()[0] == 1


def test_a_document_that_left_the_file_is_deleted_only_if_the_loader_wrote_it_unchanged(lab, tmp_path):
    docs = lk.load_corpus()
    lk.ensure_corpus(lab, path=_write(tmp_path / "all.jsonl", docs))
    _student_row(lab.conn, 1000)
    lab.conn.execute("UPDATE news SET body = body || ' (мой комментарий)' WHERE id = 29")
    report = lk.ensure_corpus(lab, path=_write(tmp_path / "fewer.jsonl", docs[:28]))  # 29 and 30 left the file
    rows = _rows(lab.conn)
    assert 30 not in rows, "the loader's own, unedited row went with its document"
    assert rows[29][0].endswith("(мой комментарий)") and 29 in report.kept, "an edited row is handed over, not deleted"
    assert 1000 in rows and report.changed_documents == 1
    assert lab.conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE id = 30").format(
        sql.Identifier(report.table))).fetchone()[0] == 0, "its vector went too (ON DELETE CASCADE)"
    later = lk.ensure_corpus(lab, path=tmp_path / "fewer.jsonl")
    assert 29 in _rows(lab.conn) and later.kept == () and later.changed_documents == 0


def test_a_students_row_under_a_new_corpus_id_is_never_overwritten(lab, tmp_path):
    docs = lk.load_corpus()
    lk.ensure_corpus(lab)
    _student_row(lab.conn, 31)
    grown = [*docs, lk.Doc(31, "Новая новость корпуса о курсе рубля.", None, "neutral", "finance")]
    for restore in (False, True):  # restore=True brings back the loader's rows only
        report = lk.ensure_corpus(lab, path=_write(tmp_path / "grown.jsonl", grown), restore=restore)
        assert report.kept == (31,) and report.changed_documents == 0
        assert _rows(lab.conn)[31][0] == "моя заметка"
    assert "31" in describe(lab) and "restore=True" in describe(lab), "the student is told, in the setup line"


def test_a_changed_file_updates_the_loaders_unedited_row(lab, tmp_path):
    docs = lk.load_corpus()
    lk.ensure_corpus(lab)
    changed = [d._replace(text=d.text + " Обновлено.") if d.id == 5 else d for d in docs]
    report = lk.ensure_corpus(lab, path=_write(tmp_path / "v2.jsonl", changed))
    assert (report.changed_documents, report.changed_vectors, report.kept) == (1, 1, ())
    assert _rows(lab.conn)[5][0].endswith("Обновлено.")


def test_a_database_loaded_before_ownership_was_recorded_is_adopted(lab):
    lk.ensure_corpus(lab)
    lab.conn.execute("DROP TABLE lab_corpus_rows")  # as the loader before lab_corpus_rows left it
    lab.conn.execute("UPDATE news SET body = 'старая версия' WHERE id = 3")
    _student_row(lab.conn, 1000)
    report = lk.ensure_corpus(lab)
    rows = _rows(lab.conn)
    assert rows[3][0] == lk.load_corpus()[2].text and report.changed_documents == 1, "corpus ids were the loader's"
    assert rows[1000][0] == "моя заметка"


GOOD = '{"id": 1, "text": "a", "company": null, "tone": "neutral", "topic": "x"}'


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "no documents"),
        ("\n  \n", "no documents"),
        (GOOD + "\n" + '{"id": 2, "text": "b"', "bad.jsonl:2: not valid JSON"),
        (GOOD + "\n" + GOOD, "bad.jsonl:2: duplicate document id 1"),
        ('{"id": 1, "company": null, "tone": "neutral", "topic": "x"}', "missing field 'text'"),
        (GOOD.replace('"a"', '"   "'), "empty text"),
        (GOOD.replace('"id": 1', '"id": "1"'), "field 'id' must be int"),
        (GOOD.replace('"id": 1', '"id": true'), "field 'id' must be int"),
        (GOOD.replace('"id": 1', '"id": 0'), "field 'id' must lie in"),
        (GOOD.replace('"id": 1', '"id": 2147483648'), "field 'id' must lie in"),
        (GOOD.replace('"text": "a"', '"text": ["a"]'), "field 'text' must be str"),
        (GOOD.replace('"tone": "neutral"', '"tone": ""'), "empty tone"),
        (GOOD.replace('"text": "a"', '"text": "a\\u0000b"'), "NUL character"),
        ('[1, "a"]', "expected a JSON object"),
    ],
)
def test_a_malformed_corpus_file_is_refused_before_anything_changes(lab, tmp_path, content, message):
    lk.ensure_corpus(lab)
    _student_row(lab.conn, 1000)
    before = _snapshot(lab)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content, encoding="utf-8")
    with pytest.raises(lk.DataError, match=message):
        lk.ensure_corpus(lab, path=bad)
    assert _snapshot(lab) == before


def test_a_load_waits_a_bounded_time_and_names_the_session_holding_the_lock(lab, scratch_settings):
    holder = lk.connect(scratch_settings)
    try:
        with advisory_lock(holder, LOAD_LOCK):
            with pytest.raises(LockBusy) as caught:
                lk.ensure_corpus(lab, wait_seconds=0.3)
        holder_pid, holder_name = holder.info.backend_pid, holder.execute("SHOW application_name").fetchone()[0]
    finally:
        holder.close()
    message = str(caught.value)
    assert f"pid {holder_pid} ({holder_name}," in message and "loading the corpus" in message
    assert "pg_try_advisory_lock" in message, "what the holder did last"
    assert lab.conn.execute("SELECT to_regclass('news')").fetchone()[0] is None, "nothing was loaded meanwhile"
    assert lk.ensure_corpus(lab).changed_documents == 30, "once the holder is gone the load runs"
