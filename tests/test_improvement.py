"""The latent-terms branch and the tuned three-branch hybrid, on the real Postgres and model server."""

from __future__ import annotations

import pytest

from labkit.corpus import load_corpus, load_queries
from labkit.improved import (
    DEFAULT_FUSION,
    HELDOUT_PATH,
    FusionConfig,
    branch_rankings,
    fuse,
    search_hybrid_latent,
    time_modes,
    tune_fusion,
)
from labkit.latent import LATENT_TABLE, ensure_latent_terms, search_latent

FUZZ = [
    "", "   ", "!!!", "a & b | !c", "'; DROP TABLE news; --", "x\x00y", "\ud800 золото", "<-> :* (", "🙂", "и в на",
    "золото " * 500, "ОПЕК+", "12345",
]


def _valid(hits, k):
    corpus_ids = {doc.id for doc in load_corpus()}
    doc_ids = [h.doc_id for h in hits]
    assert len(doc_ids) == len(set(doc_ids)) <= k
    assert set(doc_ids) <= corpus_ids
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.parametrize("query", FUZZ)
def test_improved_mode_gives_valid_rankings_for_any_string(conn, query):
    _valid(search_hybrid_latent(conn, query, 5), 5)
    _valid(search_latent(conn, query, 5), 5)


def test_query_without_words_finds_nothing(conn):
    assert search_latent(conn, " ?! ") == []
    assert search_hybrid_latent(conn, "") == []


def test_latent_index_follows_inserts_and_deletes(conn):
    ensure_latent_terms(conn)
    with conn.transaction(force_rollback=True):  # nothing leaves this test
        conn.execute(
            "INSERT INTO news (id, body, company, tone, topic) VALUES (%s, %s, NULL, 'positive', 'sport')",
            (990_002, "Пловчиха завоевала золотую медаль Олимпиады"),
        )
        assert ensure_latent_terms(conn) == 1
        assert 990_002 in {h.doc_id for h in search_latent(conn, "олимпийское золото в плавании", 3)}
        conn.execute("DELETE FROM news WHERE id = %s", (990_002,))
        ensure_latent_terms(conn)
        rows = conn.execute(f"SELECT count(*) FROM {LATENT_TABLE} WHERE id = 990002").fetchone()[0]
        assert rows == 0
    assert ensure_latent_terms(conn) == 0


def test_frozen_default_is_what_tuning_on_the_seed_split_picks(conn):
    seed = load_queries()
    rankings = branch_rankings(conn, [q.query for q in seed])
    best = tune_fusion(rankings, seed)[0]
    assert best.config == DEFAULT_FUSION
    # and it beats the two-branch hybrid it extends, on the same split
    plain = tune_fusion(rankings, seed, [FusionConfig("lexical", 60, (1.0, 1.0, 0.0))])[0]
    assert best.recall > plain.recall


def test_fuse_drops_zero_weight_branches():
    rankings = {"vector": [1, 2], "lexical": [3], "bm25": [4], "latent": [5]}
    assert [h.doc_id for h in fuse(rankings, FusionConfig("bm25", 60, (0.0, 1.0, 0.0)))] == [4]
    with pytest.raises(ValueError):
        fuse(rankings, FusionConfig("nonsense", 60, (1.0, 1.0, 1.0)))


def test_heldout_set_is_new_and_judged_against_the_corpus():
    heldout = load_queries(HELDOUT_PATH)
    corpus_ids = {doc.id for doc in load_corpus()}
    assert len(heldout) >= 20
    assert all(q.relevant <= corpus_ids for q in heldout)
    assert not {q.query for q in heldout} & {q.query for q in load_queries()}


def test_time_modes_reports_milliseconds(conn):
    timings = time_modes(conn, ["золото", "ОПЕК"], {"latent": search_latent})
    assert 0 < timings["latent"] < 5_000
