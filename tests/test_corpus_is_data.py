"""A corpus is data: one description (``labkit.core.corpus.Corpus``) every branch, tool and the loader read.

No labkit module but the news corpus' own definition names its table; the names derived for the
news corpus are exactly the ones students' databases already hold; and a second, tiny corpus made
here is loaded, searched and reloaded by the same code, in a scratch database of the real Postgres,
without touching the news corpus' tables.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from pathlib import Path

import psycopg
import pytest
from privatepg import scratch_database
from psycopg import sql

import labkit as lk
from labkit.core.corpus import Corpus, Field
from labkit.retrieval.branches.expanded import EXPANDED_VEC_TABLE, EXPANSION_TABLE
from labkit.retrieval.branches.fielded import FIELDED_VEC_TABLE
from labkit.retrieval.branches.latent import LATENT_TABLE
from labkit.store.vectors import _slug

PACKAGE = Path(lk.__file__).resolve().parent
NEWS_DEFINITION = PACKAGE / "core" / "corpora" / "news.py"

# A string reads as SQL when it holds an upper-case SQL keyword (labkit writes SQL in upper case).
_SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|TRUNCATE|ANALYZE|FROM|JOIN|INTO|TABLE|REFERENCES)\b")
_NEWS_IN_SQL = re.compile(r"\bnews(?:_\w+)?\b")
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string nodes that are docstrings (of the module, a class or a function)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def news_table_names(source: str) -> list[str]:
    """String literals of `source` (docstrings aside) that name the news table: in SQL, or as a table name.

    Prose may say "news" freely; a string counts when it reads as SQL and holds ``news``/``news_*``,
    or when it is an identifier with ``news`` as one of its ``_``-separated parts (``news_latent``).
    """
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docstrings:
            continue
        text = node.value
        as_sql = _SQL.search(text) and _NEWS_IN_SQL.search(text)
        as_name = _IDENTIFIER.fullmatch(text.strip()) and "news" in text.strip().split("_")
        if as_sql or as_name:
            hits.append(text.strip()[:80])
    return hits


def test_the_check_finds_the_news_table_in_sql_and_names_but_not_in_prose():
    source = '''
"""A module about the news."""
QWEN = "Given a news search query, retrieve news articles that answer it"
def search(conn):
    """Search the news: SELECT over the news table."""
    conn.execute("SELECT id FROM news WHERE topic = %s")
    conn.execute(f"DELETE FROM {table} WHERE NOT EXISTS (SELECT 1 FROM news AS n)")
    return "news_latent", f"news_vec_{slug}", "Новости: news"
'''
    assert sorted(news_table_names(source)) == [
        "SELECT id FROM news WHERE topic = %s", "WHERE NOT EXISTS (SELECT 1 FROM news AS n)", "news_latent", "news_vec_"]
    assert news_table_names('"""SELECT * FROM news"""\nx = "the news"\n') == []


def test_no_labkit_module_but_the_news_definition_names_the_news_table():
    named = {str(path.relative_to(PACKAGE)): hits for path in sorted(PACKAGE.rglob("*.py"))
             if path != NEWS_DEFINITION and (hits := news_table_names(path.read_text(encoding="utf-8")))}
    assert not named, f"modules naming the news table (read it from lab.corpus or a Corpus argument): {named}"
    assert news_table_names(NEWS_DEFINITION.read_text(encoding="utf-8")), "the definition itself names it"


def test_the_news_corpus_derives_the_names_students_databases_hold():
    news = lk.NEWS
    assert (news.table, news.text_column, news.ts_config, news.columns) == (
        "news", "body", "russian", ("id", "body", "company", "tone", "topic"))
    derived = {role: news.derived(role) for role in ("rows", "vector_tables", "tsv_gin", "latent", "fielded_vec",
                                                     "expanded_vec", "expansion")}
    assert derived == {"rows": "lab_corpus_rows", "vector_tables": "vector_tables", "tsv_gin": "news_tsv_gin",
                       "latent": "news_latent", "fielded_vec": "news_fielded_vec",
                       "expanded_vec": "news_expanded_vec", "expansion": "news_expansion"}
    assert (LATENT_TABLE, FIELDED_VEC_TABLE, EXPANDED_VEC_TABLE, EXPANSION_TABLE) == (
        "news_latent", "news_fielded_vec", "news_expanded_vec", "news_expansion")
    assert _slug("multilingual-e5-small:q4", news) == "news_vec_multilingual_e5_small_q4"
    assert lk.DEFAULT_CORPUS is news and lk.CORPORA["news"] is news and lk.corpus_named("news") is news
    assert lk.Doc is news.record and lk.Doc._fields == ("id", "text", "company", "tone", "topic")


def _tiny(tmp_path: Path, table: str = "tiny_docs", docs: list[dict] | None = None) -> Corpus:
    """A second corpus: three short documents with one metadata field, text under another key and column."""
    docs = docs if docs is not None else [
        {"id": 1, "content": "Кошка спит на тёплом подоконнике", "kind": "pets"},
        {"id": 2, "content": "Поезд до Казани отправляется рано утром", "kind": "travel"},
        {"id": 3, "content": "Собака охраняет дом и двор", "kind": "pets"},
    ]
    source = tmp_path / f"{table}.jsonl"
    source.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    queries = tmp_path / f"{table}_queries.jsonl"
    queries.write_text(json.dumps({"query": "кошка", "relevant": [1]}, ensure_ascii=False) + "\n", encoding="utf-8")
    return Corpus(name=table, title="крошечный корпус", table=table,
                  fields=(Field("kind", "вид", names={"pets": "питомцы", "travel": "поездки"}),),
                  source=source, queries=queries, text_column="article", text_field="content",
                  fielded=("kind",), lexicon=("kind",))


def test_a_second_corpus_is_read_and_checked_by_its_own_description(tmp_path):
    tiny = _tiny(tmp_path)
    docs = tiny.documents()
    assert [tuple(d) for d in docs] == [(1, "Кошка спит на тёплом подоконнике", "pets"),
                                        (2, "Поезд до Казани отправляется рано утром", "travel"),
                                        (3, "Собака охраняет дом и двор", "pets")]
    assert tiny.derived("rows") == "tiny_docs_rows" and tiny.derived("vector_tables") == "tiny_docs_vector_tables"
    assert lk.load_queries(corpus=tiny) == [lk.LabelledQuery("кошка", frozenset({1}))]
    for bad, message in [({"id": 4, "content": "x"}, "missing field 'kind'"),
                         ({"id": 4, "content": "x", "kind": ""}, "empty kind"),
                         ({"id": 4, "content": "x", "kind": "a\x00b"}, "field 'kind' contains a NUL"),
                         ({"id": 4, "text": "x", "kind": "pets"}, "missing field 'content'")]:
        with pytest.raises(lk.DataError, match=rf"bad\.jsonl:1: {message}"):
            _tiny(tmp_path, "bad", [bad]).documents()


def test_dates_and_integers_are_checked_as_their_sql_types(tmp_path):
    source = tmp_path / "kb.jsonl"
    corpus = Corpus(name="kb", title="база знаний", table="kb", source=source, queries=source,
                    fields=(Field("version", "версия", sql_type="integer"),
                            Field("updated", "дата", sql_type="date", required=False)))
    for record, problem in [({"version": 2, "updated": "2024-05-01"}, None),
                            ({"version": 2, "updated": None}, None),
                            ({"version": 2, "updated": "1 мая"}, "must be a date"),
                            ({"version": "2", "updated": None}, "field 'version' must be int"),
                            ({"version": 2**31, "updated": None}, "must fit a Postgres integer")]:
        source.write_text(json.dumps({"id": 7, "text": "Статья", **record}, ensure_ascii=False), encoding="utf-8")
        if problem is None:
            assert corpus.documents()[0].id == 7
        else:
            with pytest.raises(lk.DataError, match=problem):
                corpus.documents()


@pytest.mark.parametrize("change", [{"table": "News; DROP"}, {"text_column": "kind"}, {"lexicon": ("nope",)},
                                    {"fields": (Field("a", "а"), Field("a", "а"))}])
def test_a_description_that_cannot_work_is_refused_when_made(tmp_path, change):
    with pytest.raises(ValueError):
        dataclasses.replace(_tiny(tmp_path), **change)


# --- the tiny corpus in Postgres -----------------------------------------------------------------

SCRATCH = "labkit_scratch_corpus_data"


@pytest.fixture(scope="module")
def scratch_settings(settings):
    """Settings pointing at a new database of the lab's server (dropped after the module)."""
    with scratch_database(settings, SCRATCH) as scratch:
        yield scratch


def _news_state(conn: psycopg.Connection, vectors: str) -> tuple:
    """Everything of the news corpus a load of another corpus could change."""
    return (conn.execute("SELECT id, body, company, tone, topic FROM news ORDER BY id").fetchall(),
            conn.execute("SELECT id, row_md5 FROM lab_corpus_rows ORDER BY id").fetchall(),
            conn.execute("SELECT model, table_name, dim FROM vector_tables ORDER BY model").fetchall(),
            conn.execute(sql.SQL("SELECT id, embedding::text FROM {} ORDER BY id").format(sql.Identifier(vectors))).fetchall())


def _relations(conn: psycopg.Connection, prefix: str, kinds: str = "ri") -> set[str]:
    """Tables (r) and indexes (i) whose name starts with `prefix`."""
    return {r[0] for r in conn.execute("SELECT relname FROM pg_class WHERE relname LIKE %s AND relkind = ANY(%s)",
                                       (prefix.replace("_", r"\_") + "%", list(kinds)))}


@pytest.mark.services
def test_a_second_corpus_is_loaded_searched_and_reloaded_by_the_same_code(scratch_settings, tmp_path):
    tiny = _tiny(tmp_path)
    with lk.open_lab(scratch_settings) as lab:  # the news corpus, loaded as setup() does
        conn = lab.conn
        news_before = _news_state(conn, lab.loaded.table)
        small = dataclasses.replace(lab, corpus=tiny)  # the same connection, another corpus
        try:
            first = lk.ensure_corpus(small)
            assert (first.corpus, first.documents, first.changed_documents, first.changed_vectors) == ("tiny_docs", 3, 3, 3)
            assert small.loaded == first and lab.loaded.corpus == "news"
            assert first.table == _slug(lab.embed_model, tiny) and first.table.startswith("tiny_docs_vec_")
            assert _relations(conn, "tiny_docs") >= {"tiny_docs", "tiny_docs_tsv_gin", "tiny_docs_rows",
                                                  "tiny_docs_vector_tables", first.table}
            assert lk.vector_table(conn, lab.embed_model, tiny) == first.table != lk.vector_table(conn, lab.embed_model)

            assert lk.ids(lk.search_lexical(small, "кошка", 3)) == [1]
            assert lk.ids(lk.search_bm25(small, "собака", 3)) == [3]
            assert lk.ids(lk.search_vector(small, "поездка по железной дороге", 3))[0] == 2
            assert set(lk.ids(lk.search_hybrid_sql(small, "кошка", 3))) <= {1, 2, 3}
            assert lk.correct_query(small, "сабака спит").corrected == "собака спит", "the tiny corpus' own words"
            assert lk.correct_query(lab, "сабака спит").corrected == "сабака спит", "the news have no dogs"

            again = lk.ensure_corpus(lab, tiny)  # the corpus as an argument: the lab's own report stays
            assert (again.changed_documents, again.changed_vectors, again.embedding_calls, again.kept) == (0, 0, 0, ())
            assert lab.loaded.corpus == "news"
            assert lk.ensure_corpus(lab).changed_documents == 0
        finally:
            for table in (tiny.table, tiny.derived("rows"), tiny.derived("vector_tables")):
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.Identifier(table)))
            for name in _relations(conn, "tiny_docs_vec_", "r"):
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))
        assert _relations(conn, "tiny_docs") == set()
        assert _news_state(conn, lab.loaded.table) == news_before
