"""Every search mode on the real database; the Python and single-SQL hybrids agree exactly."""

from __future__ import annotations

import random

import pytest

import labkit as lk
from labkit.retrieval.branches.lexical import lexical_sql
from labkit.retrieval.branches.vector import vector_sql

pytestmark = pytest.mark.services

QUERIES = [q.query for q in lk.load_queries()]


def _check_ranking(hits: list[lk.Hit], top_k: int) -> None:
    assert isinstance(hits, list) and len(hits) <= top_k
    assert all(isinstance(hit, lk.Hit) and isinstance(hit.doc_id, int) for hit in hits)
    doc_ids = lk.ids(hits)
    assert len(set(doc_ids)) == len(doc_ids), "a document appears twice"
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True), "not ordered by score"


@pytest.mark.parametrize("mode", sorted(lk.SEARCH_MODES))
def test_every_mode_returns_a_ranking_on_the_labelled_queries(lab_ro, mode):
    search = lk.SEARCH_MODES[mode]
    for query in QUERIES:
        hits = search(lab_ro, query, 5)
        _check_ranking(hits, 5)
        assert set(lk.ids(hits)) <= set(range(1, 31))


@pytest.mark.parametrize("mode", sorted(lk.SEARCH_MODES))
def test_a_documents_own_text_finds_it_first(lab_ro, mode):
    for doc in lk.load_corpus()[::5]:
        assert lk.ids(lk.SEARCH_MODES[mode](lab_ro, doc.text, 3))[0] == doc.id, (mode, doc)


def test_lexical_or_and_and(lab_ro):
    any_word = lk.ids(lk.search_lexical(lab_ro, "золото цена", 30))
    all_words = lk.ids(lk.search_lexical(lab_ro, "золото цена", 30, match="all"))
    assert all_words == [1]  # only doc 1 has both «цена» and «золото»
    assert set(all_words) < set(any_word)
    assert {6, 7, 8} <= set(any_word)  # OR also brings the medal news
    assert lk.search_lexical(lab_ro, "и в на по", 10) == []  # stop words only
    assert lk.ids(lk.search_lexical(lab_ro, "ОПЕК", 10)) == [15]


def test_lexical_ties_are_broken_by_id(lab_ro):
    hits = lk.search_lexical(lab_ro, "золото", 30)
    for a, b in zip(hits, hits[1:]):
        assert a.score > b.score or (a.score == b.score and a.doc_id < b.doc_id)


def test_vector_empty_query_and_scores(lab_ro):
    assert lk.search_vector(lab_ro, "", 5) == [] and lk.search_vector(lab_ro, " \n\t ", 5) == []
    hits = lk.search_vector(lab_ro, "цены на драгоценные металлы", 30)
    assert len(hits) == 30 and all(-1.0 <= hit.score <= 1.0 for hit in hits)


def _hybrid_cases() -> list[tuple[str, int, int, tuple[float, float]]]:
    rng = random.Random(42)
    words = [w for q in QUERIES for w in q.split()] + [w for d in lk.load_corpus() for w in d.text.split()]
    randoms = [" ".join(rng.sample(words, rng.randint(1, 4))) for _ in range(20)] + ["!!!", "ставка ставка", "😀 ЦБ"]
    cases = [(q, 3, 60, (1.0, 1.0)) for q in QUERIES + randoms]
    cases += [(q, rng.choice([1, 5, 10, 30]), rng.choice([1, 10, 60]), (rng.choice([0.0, 0.5, 1.0, 2.0]), 1.0))
              for q in QUERIES + randoms]  # fmt: skip
    return cases


def test_hybrid_python_and_sql_give_identical_rankings(lab_ro):
    for query, top_k, rrf_k, weights in _hybrid_cases():
        python = lk.search_hybrid(lab_ro, query, top_k, rrf_k, weights)
        single = lk.search_hybrid_sql(lab_ro, query, top_k, rrf_k, weights)
        assert lk.ids(python) == lk.ids(single), (query, top_k, rrf_k, weights)
        assert [h.score for h in python] == pytest.approx([h.score for h in single], rel=1e-12)
        _check_ranking(single, top_k)


def test_hybrid_fuses_both_branches(lab_ro):
    vector = lk.ids(lk.search_vector(lab_ro, "золото", 10))
    lexical = lk.ids(lk.search_lexical(lab_ro, "золото", 10))
    expected = lk.ids(lk.rrf([vector, lexical], rrf_k=60))[:10]
    assert lk.ids(lk.search_hybrid(lab_ro, "золото", 10)) == expected
    # weights (1, 0): the lexical branch adds documents but cannot reorder the vector ones
    only_vector = lk.ids(lk.search_hybrid(lab_ro, "золото", 10, weights=(1.0, 0.0)))
    assert only_vector[: len(vector)] == vector


def _plan(conn, statement: str, params: dict) -> str:
    """EXPLAIN with sequential scans discouraged, inside a rolled-back transaction."""
    with conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL enable_seqscan = off")
        return "\n".join(row[0] for row in conn.execute("EXPLAIN " + statement, params).fetchall())


def test_hnsw_index_serves_order_by_distance_but_not_by_similarity(lab_ro, conn_ro):
    table = lk.vector_table(conn_ro, lab_ro.embed_model)
    assert table == lk.lab_vector_table(lab_ro)
    params = {"embedding": lk.cached_query_embedding(lab_ro, "золото"), "limit": 3}
    by_distance = vector_sql(table).as_string(conn_ro)
    assert "_hnsw" in _plan(conn_ro, by_distance, params)
    by_similarity = by_distance.replace(
        "ORDER BY embedding <=> %(embedding)s", "ORDER BY 1 - (embedding <=> %(embedding)s) DESC"
    )
    assert by_similarity != by_distance and "_hnsw" not in _plan(conn_ro, by_similarity, params)


def test_lexical_uses_the_gin_index_when_seqscan_is_off(conn_ro):
    plan = _plan(conn_ro, lexical_sql().as_string(conn_ro), {"words": ["золото"], "limit": 3})
    assert "news_tsv_gin" in plan


def test_a_connection_labkit_did_not_open_starts_nothing(settings, monkeypatch):
    """Below the edge nothing discovers services: a search uses only the lab it is given."""
    import ollama
    import psycopg
    from pgvector.psycopg import register_vector

    import labkit.services.stack

    for name in ("ensure_stack", "up"):
        monkeypatch.setattr(labkit.services.stack, name, lambda *a, **k: pytest.fail("a search started the stack"))
    with psycopg.connect(settings.database_url, autocommit=True) as foreign:
        register_vector(foreign)
        lab = lk.Lab(settings, foreign, ollama.Client(host=settings.ollama_host))
        assert len(lk.search_hybrid(lab, "золото", 3)) == 3
        assert lk.ids(lk.search_hybrid_sql(lab, "золото", 3)) == lk.ids(lk.search_hybrid(lab, "золото", 3))
