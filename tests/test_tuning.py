"""The latent-terms branch and the tuned three-branch hybrid: tuning by hand and on the real stack."""

from __future__ import annotations

import pytest

from labkit.core.corpora import load_corpus, load_queries
from labkit.core.corpora.news import HELDOUT_PATH
from labkit.core.corpus import LabelledQuery
from labkit.evaluation.retrieval import _departure, branch_rankings, default_grid, time_modes, tune_fusion
from labkit.retrieval.branches.latent import LATENT_TABLE, ensure_latent_terms, search_latent
from labkit.retrieval.fusion import FusionConfig
from labkit.retrieval.modes import DEFAULT_FUSION, search_hybrid_latent

FUZZ = [
    "", "   ", "!!!", "a & b | !c", "'; DROP TABLE news; --", "x\x00y", "\ud800 золото", "<-> :* (", "🙂", "и в на",
    "золото " * 500, "ОПЕК+", "12345",
]


def _valid(hits, top_k):
    corpus_ids = {doc.id for doc in load_corpus()}
    doc_ids = [h.doc_id for h in hits]
    assert len(doc_ids) == len(set(doc_ids)) <= top_k
    assert set(doc_ids) <= corpus_ids
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.services
@pytest.mark.parametrize("query", FUZZ)
def test_improved_mode_gives_valid_rankings_for_any_string(lab_ro, query):
    _valid(search_hybrid_latent(lab_ro, query, 5), 5)
    _valid(search_latent(lab_ro, query, 5), 5)


@pytest.mark.services
def test_query_without_words_finds_nothing(lab_ro):
    assert search_latent(lab_ro, " ?! ") == []
    assert search_hybrid_latent(lab_ro, "") == []


@pytest.mark.services
def test_latent_index_follows_inserts_and_deletes(lab, conn):
    ensure_latent_terms(conn)
    with conn.transaction(force_rollback=True):  # nothing leaves this test
        conn.execute(
            "INSERT INTO news (id, body, company, tone, topic) VALUES (%s, %s, NULL, 'positive', 'sport')",
            (990_002, "Пловчиха завоевала золотую медаль Олимпиады"),
        )
        assert ensure_latent_terms(conn) == 1
        assert 990_002 in {h.doc_id for h in search_latent(lab, "олимпийское золото в плавании", 3)}
        conn.execute("DELETE FROM news WHERE id = %s", (990_002,))
        ensure_latent_terms(conn)
        rows = conn.execute(f"SELECT count(*) FROM {LATENT_TABLE} WHERE id = 990002").fetchone()[0]
        assert rows == 0
    assert ensure_latent_terms(conn) == 0


@pytest.mark.services
def test_frozen_default_is_what_tuning_on_the_seed_split_picks_up_to_one_querys_near_tie(lab_ro):
    """The default was frozen from tune_fusion's pick. Its vector branch has near-ties on the news (cosine distances
    4e-5 apart): another machine's maths library (glibc's erff and expf round the last bit differently) flips
    one of them, and on this seed split that moves one query's Recall@3 by half. So the frozen default must be
    the pick or fall short of it by at most one query (11_beyond_rrf prints which it is), and beat the plain hybrid."""
    seed = load_queries()
    rankings = branch_rankings(lab_ro, [q.query for q in seed])
    results = tune_fusion(rankings, seed)
    best, frozen = results[0], next(r for r in results if r.config == DEFAULT_FUSION)
    assert frozen.recall >= best.recall - 1 / len(seed), (best, frozen)
    # and it beats the two-branch hybrid it extends, on the same split
    plain = tune_fusion(rankings, seed, [FusionConfig.of({"vector": 1.0, "lexical": 1.0})])[0]
    assert frozen.recall > plain.recall


def test_default_grid_covers_both_lexical_branches_and_leaves_zero_weights_out():
    grid = default_grid()
    without_lexical = 4 * (4 * 4 - 1)  # per rrf_k: (vector, latent) weight pairs not both 0
    assert len(grid) == 2 * 4 * 63 - without_lexical == len(set(grid))
    assert DEFAULT_FUSION in grid
    assert all(0.0 not in config.weights.values() for config in grid)
    assert not any({"lexical", "bm25"} <= set(config.weights) for config in grid)


def test_tuning_picks_by_recall_then_mrr_then_closeness_to_defaults():
    queries = [LabelledQuery("q1", frozenset({1})), LabelledQuery("q2", frozenset({2}))]
    rankings = {  # vector finds 1 then 2 late; lexical finds 2 first; latent finds nothing useful
        "vector": {"q1": [1, 5, 6], "q2": [5, 6, 7, 2]},
        "lexical": {"q1": [5, 1], "q2": [2, 5]},
        "bm25": {"q1": [5, 1], "q2": [2, 5]},
        "latent": {"q1": [9], "q2": [9]},
    }
    plain = FusionConfig.of({"vector": 1.0, "lexical": 1.0})
    vector_only = FusionConfig.of({"vector": 1.0})
    heavy = FusionConfig.of({"vector": 2.0, "lexical": 1.0})
    results = tune_fusion(rankings, queries, [vector_only, heavy, plain], top_k=1)
    assert [r.recall for r in results] == sorted((r.recall for r in results), reverse=True)
    assert results[-1].config == vector_only and results[-1].recall == 0.5
    # plain and heavy tie on recall and MRR here; the plainer configuration wins the tie
    assert results[0].config == plain and _departure(plain) < _departure(heavy)
    with pytest.raises(ValueError):
        tune_fusion(rankings, [], [plain])


def test_heldout_set_is_new_and_judged_against_the_corpus():
    heldout = load_queries(HELDOUT_PATH)
    corpus_ids = {doc.id for doc in load_corpus()}
    assert len(heldout) >= 20
    assert all(q.relevant <= corpus_ids for q in heldout)
    assert not {q.query for q in heldout} & {q.query for q in load_queries()}


@pytest.mark.services
def test_time_modes_reports_milliseconds(lab_ro):
    timings = time_modes(lab_ro, ["золото", "ОПЕК"], {"latent": search_latent})
    assert 0 < timings["latent"] < 5_000
