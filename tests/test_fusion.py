"""Reciprocal Rank Fusion by hand: the seed's «золото» example and edge cases."""

from __future__ import annotations

import pytest

import labkit as lk
from labkit.core.ranking import Hit, ids
from labkit.retrieval.fusion import rrf


def test_rrf_seed_gold_example():
    # seed article: vector top-3 (5, 1, 4), lexical top-3 (1, 2, 3) -> RRF 1, 5, 2 ...
    fused = rrf([[5, 1, 4], [1, 2, 3]], rrf_k=60)
    assert ids(fused)[:3] == [1, 5, 2]
    assert fused[0] == Hit(1, pytest.approx(1 / 62 + 1 / 61))
    assert fused[1].score == pytest.approx(1 / 61)


def test_rrf_ties_are_broken_by_id():
    # 7 is first in one list, 3 first in the other: equal scores, so the smaller id wins
    assert ids(rrf([[7], [3]])) == [3, 7]
    assert ids(rrf([[9, 8], [8, 9]])) == [8, 9]


def test_rrf_weights_and_k_change_the_order():
    vector, lexical = [1, 2, 3], [3, 2, 1]
    assert ids(rrf([vector, lexical])) == [1, 3, 2]  # 1 and 3 tie (1/61 + 1/63) above 2 (2/62)
    assert ids(rrf([vector, lexical], weights=[1.0, 2.0]))[0] == 3
    assert ids(rrf([vector, lexical], weights=[2.0, 1.0]))[0] == 1
    # with rrf_k=1 the first place weighs much more than the second
    assert rrf([[1, 2]], rrf_k=1)[0].score == pytest.approx(0.5)
    assert rrf([[1, 2]], rrf_k=1)[1].score == pytest.approx(1 / 3)


def test_rrf_empty_and_mismatched_inputs():
    assert rrf([]) == []
    assert rrf([[], []]) == []
    with pytest.raises(ValueError, match="2 rankings but 1 weights"):
        rrf([[1], [2]], weights=[1.0])


def test_fusion_config_names_branches_and_weights():
    config = lk.FusionConfig.of({"vector": 1.0, "bm25": 0.5}, rrf_k=10)
    assert config.weights == {"vector": 1.0, "bm25": 0.5} and config.rrf_k == 10
    assert str(config) == "RRF(vector=1, bm25=0.5; rrf_k=10)"
    assert config == lk.FusionConfig.of({"vector": 1, "bm25": 0.5}, 10) and hash(config)
    with pytest.raises(ValueError, match="branches must be some of"):
        lk.Pipeline.of(lk.FusionConfig.of({"vector": 1.0, "nonsense": 1.0}))  # names are checked where branches run
    with pytest.raises(ValueError):
        lk.FusionConfig.of({})


def test_fuse_is_rrf_of_the_named_branches_only():
    rankings = {"vector": [1, 2], "lexical": [3], "bm25": [4], "latent": [5]}
    assert ids(lk.fuse(rankings, lk.FusionConfig.of({"bm25": 1.0}))) == [4]
    both = lk.fuse(rankings, lk.FusionConfig.of({"vector": 2.0, "latent": 1.0}, rrf_k=0))
    assert both == rrf([[1, 2], [5]], rrf_k=0, weights=[2.0, 1.0])
    # a zero weight keeps the branch's documents (score 0) without reordering the others
    assert ids(lk.fuse(rankings, lk.FusionConfig.of({"vector": 1.0, "lexical": 0.0}))) == [1, 2, 3]
    with pytest.raises(KeyError, match="latent"):
        lk.fuse({"vector": [1]}, lk.FusionConfig.of({"vector": 1.0, "latent": 1.0}))


def test_every_search_mode_has_the_same_signature():
    import inspect

    for name, mode in lk.SEARCH_MODES.items():
        params = list(inspect.signature(mode).parameters.values())
        assert [p.name for p in params[:3]] == ["lab", "query", "top_k"], name
        assert params[2].default == 10, name
    assert set(lk.BRANCHES) <= set(lk.all_modes())
