"""BM25 in SQL against a plain-Python BM25 over the same lexemes, on the real Postgres."""

from __future__ import annotations

import pytest

from labkit.core.corpora import load_corpus
from labkit.retrieval.branches.bm25 import bm25_scores, fetch_postings, query_lexemes, search_bm25
from labkit.retrieval.modes import SEARCH_MODES, search_hybrid_bm25

QUERIES = ["золото соревнования", "ключевая ставка ЦБ", "ставка на спорт", "добыча нефти", "ОПЕК", "золото"]
FUZZ = [
    "", "   ", "!!!", "a & b | !c", "'; DROP TABLE news; --", "x\x00y", "\ud800 золото", "<-> :* (", "🙂", "и в на",
    "золото " * 500,
]


def _python(conn, query, k1=1.2, b=0.75):
    return bm25_scores(fetch_postings(conn), query_lexemes(conn, query), k1, b)


@pytest.mark.parametrize("k1, b", [(1.2, 0.75), (0.0, 0.0), (2.0, 1.0), (0.5, 0.3)])
@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.services
def test_sql_scores_equal_python_scores(lab_ro, conn_ro, query, k1, b):
    sql_hits = search_bm25(lab_ro, query, top_k=100, k1=k1, b=b)
    py_hits = _python(conn_ro, query, k1, b)
    assert sql_hits, f"{query!r} should match some documents"
    assert [h.doc_id for h in sql_hits] == [h.doc_id for h in py_hits]
    for got, want in zip(sql_hits, py_hits):
        assert got.score == pytest.approx(want.score, abs=1e-9)


@pytest.mark.services
def test_rare_word_outweighs_common_word(lab_ro):
    # «опек» is in one document, «золот» in six: IDF must favour the rare lexeme.
    scores = {h.doc_id: h.score for h in search_bm25(lab_ro, "ОПЕК золото", top_k=30)}
    assert scores[15] > max(scores[d] for d in (1, 2, 3, 6, 7, 8))


@pytest.mark.services
def test_statistics_follow_an_inserted_document(lab, conn):
    before = {h.doc_id: h.score for h in search_bm25(lab, "золото", top_k=30)}
    with conn.transaction(force_rollback=True):  # the new row never leaves this test
        conn.execute(
            "INSERT INTO news (id, body, company, tone, topic) VALUES (%s, %s, NULL, 'neutral', 'commodities')",
            (990_001, "Золото, золото и снова золото: ювелиры скупают золото"),
        )
        during = search_bm25(lab, "золото", top_k=30)
        reference = _python(conn, "золото")
        assert [h.doc_id for h in during] == [h.doc_id for h in reference]
        assert all(g.score == pytest.approx(w.score, abs=1e-9) for g, w in zip(during, reference))
        assert 990_001 in {h.doc_id for h in during}
        # df and N changed, so every old document's score changed too.
        assert {h.doc_id: h.score for h in during}[1] != pytest.approx(before[1], abs=1e-9)
    assert {h.doc_id: h.score for h in search_bm25(lab, "золото", top_k=30)} == pytest.approx(before)


@pytest.mark.parametrize("query", FUZZ)
@pytest.mark.services
def test_any_string_gives_a_valid_ranking(lab_ro, query):
    corpus_ids = {doc.id for doc in load_corpus()}
    for search in (search_bm25, search_hybrid_bm25):
        hits = search(lab_ro, query, 5)
        doc_ids = [h.doc_id for h in hits]
        assert len(doc_ids) == len(set(doc_ids)) <= 5
        assert set(doc_ids) <= corpus_ids
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.services
def test_query_without_words_is_empty(lab_ro, conn_ro):
    assert search_bm25(lab_ro, " ,.;!? ") == []
    assert query_lexemes(conn_ro, "и в на") == []  # only stop words


@pytest.mark.parametrize("kwargs", [{"top_k": 0}, {"k1": -1.0}, {"b": 1.5}, {"b": -0.1}])
def test_bad_parameters_are_refused(kwargs):
    with pytest.raises(ValueError):
        search_bm25(None, "золото", **kwargs)  # type: ignore[arg-type] (refused before any query)


def test_bm25_modes_are_registered():
    assert {"bm25", "hybrid_bm25", "hybrid_latent"} <= set(SEARCH_MODES)


@pytest.mark.services
def test_hybrid_bm25_is_rrf_of_vector_and_bm25(lab_ro):
    from labkit.core.ranking import ids
    from labkit.retrieval.branches.vector import search_vector
    from labkit.retrieval.fusion import rrf

    for query in QUERIES:
        expected = rrf([ids(search_vector(lab_ro, query, 10)), ids(search_bm25(lab_ro, query, 10))], rrf_k=60)[:5]
        assert search_hybrid_bm25(lab_ro, query, 5) == expected
