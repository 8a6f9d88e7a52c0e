"""A search mode is a pipeline: its stages print like the lesson, its needs follow from its branches, one line adds a mode."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from psycopg import sql

import labkit as lk
import labkit.retrieval.modes as modes
from labkit.core.ranking import Hit, ids
from labkit.retrieval.branches.fielded import fielded_text
from labkit.retrieval.branches.needs import Missing
from labkit.retrieval.branches.registry import EXPANSION, IN_PROCESS_E5
from labkit.retrieval.fusion import rrf

# every mode of the table as a student prints it, in table order (the eval JSON keeps this order)
STAGES = {
    "vector": "vector",
    "lexical": "lexical",
    "hybrid": "vector + lexical → RRF(k=60)",
    "bm25": "bm25",
    "hybrid_bm25": "vector + bm25 → RRF(k=60)",
    "latent": "latent",
    "hybrid_latent": "vector + lexical + latent → RRF(k=60)",
    "expanded": "expanded",
    "expanded_lexical": "expanded_lexical",
    "hybrid_expanded": "expanded×2 + expanded_lexical×0.5 → RRF(k=5)",
    "hybrid_prf": "prf(vector + lexical → RRF(k=60); docs=1, beta=0.25) + lexical → RRF(k=60)",
    "fielded": "fielded",
    "fielded_corrected": "spelling → fielded",
    "fielded_covered": "spelling → fielded → coverage@4",
}


def test_every_mode_prints_its_stages():
    assert {name: str(mode) for name, mode in lk.SEARCH_MODES.items()} == STAGES
    assert list(lk.SEARCH_MODES) == list(STAGES)
    assert all(isinstance(mode, lk.Pipeline) for mode in lk.SEARCH_MODES.values())


def test_the_contextual_modes_search_chunks_only():
    assert str(lk.KB_MODES["hybrid_contextual"]) == "contextual + contextual_lexical → RRF(k=60)"
    assert "contextual" not in lk.modes_for(lk.NEWS) and "hybrid_contextual" in lk.modes_for(lk.KB)
    assert "not a corpus of chunks" in (lk.mode_misfit("contextual", lk.NEWS) or "")


def test_the_tuned_mode_reads_like_the_lesson():
    tuned = lk.SEARCH_MODES["fielded_covered"]
    assert str(tuned) == "spelling → fielded → coverage@4"
    assert tuned.rerank == (lk.Coverage(lk.COVERAGE_DEPTH, fielded_text),)
    assert str(lk.covered(lk.search_fielded)) == "fielded → coverage@4"  # a registry function is its branch
    assert str(lk.corrected(lk.covered(lk.search_fielded))) == str(tuned) and lk.corrected(lk.covered("fielded")) == tuned


def test_the_fused_modes_are_the_tuned_fusions():
    assert lk.SEARCH_MODES["hybrid_latent"].fusion == lk.DEFAULT_FUSION
    assert lk.SEARCH_MODES["hybrid_expanded"].fusion == modes.HYBRID_EXPANDED
    prf, lexical = (branch for branch, _ in lk.SEARCH_MODES["hybrid_prf"].branches)
    assert prf.name == "prf" and lexical is lk.BRANCHES["lexical"]
    assert "beta=0.25" in str(prf) and lk.DEFAULT_PRF == lk.PrfConfig(docs=1, beta=0.25)


def test_a_pipelines_needs_follow_from_its_branches():
    unmet = lk.Need(lambda: "no such engine here", "нужен воображаемый движок")
    exotic = lk.Branch("exotic", lk.search_vector, (unmet,))
    assert lk.BRANCHES["latent"].needs == (IN_PROCESS_E5,)
    assert lk.SEARCH_MODES["hybrid_latent"].needs == (IN_PROCESS_E5,)
    assert lk.Pipeline.of({"latent": 1.0, "vector": 1.0, exotic: 1.0}).needs == (IN_PROCESS_E5, unmet)
    assert lk.Pipeline.of({exotic: 1.0, "lexical": 0.5}).problem() == "no such engine here"
    # a branch with a first pass needs what that pass needs
    assert lk.prf_branch(lk.Pipeline.of(exotic), lk.DEFAULT_PRF).needs == (unmet,)
    assert [name for name, mode in lk.SEARCH_MODES.items() if mode.needs] == ["latent", "hybrid_latent"]


def test_a_mode_that_cannot_run_is_left_out_and_explained(monkeypatch):
    unmet = lk.Need(lambda: "no such engine here", "нужен воображаемый движок")
    monkeypatch.setitem(modes.SEARCH_MODES, "exotic", lk.Pipeline.of(lk.Branch("exotic", lk.search_vector, (unmet,))))
    assert "exotic" not in lk.available_modes() and lk.unavailable_modes()["exotic"] == "no such engine here"
    assert lk.mode_problem("exotic") == "no such engine here" and lk.mode_problem("vector") is None
    note = lk.skipped_note(["vector", "exotic"])
    assert "«exotic» (`exotic`) — нужен воображаемый движок" in note and "no such engine here" in note
    assert "vector" not in note
    assert lk.skipped_note(["vector", "hybrid"]) == ""


ABSENT = lk.Stored(lambda lab: Missing("no odd table; make it with: make-odd", "нет таблицы: её делает make-odd"), "таблица")


def test_a_pipelines_stored_data_follows_from_its_branches():
    odd = lk.Branch("odd", lk.search_vector, stored=(ABSENT,))
    assert lk.SEARCH_MODES["hybrid_expanded"].stored == (EXPANSION,)
    assert [name for name, mode in lk.SEARCH_MODES.items() if mode.stored] == ["expanded", "expanded_lexical",
                                                                              "hybrid_expanded"]
    pipeline = lk.Pipeline.of({odd: 1.0, "vector": 1.0})
    assert pipeline.problem() is None  # without a lab only this process is asked
    assert pipeline.problem(lab=object()) == "no odd table; make it with: make-odd"  # any lab: ABSENT ignores it
    assert lk.prf_branch(pipeline, lk.DEFAULT_PRF).stored == (ABSENT,)


def test_a_mode_without_its_stored_data_is_left_out_with_the_command(monkeypatch):
    odd = lk.Pipeline.of(lk.Branch("odd", lk.search_vector, stored=(ABSENT,)))
    monkeypatch.setattr(modes, "SEARCH_MODES", {"vector": modes.SEARCH_MODES["vector"], "odd": odd})
    lab = SimpleNamespace(corpus=lk.NEWS)  # the stand-in lab: its corpus picks the mode table, ABSENT never reads it
    assert "odd" in lk.available_modes() and "odd" not in lk.available_modes(lab)
    assert lk.unavailable_modes(lab)["odd"] == lk.mode_problem("odd", lab) == "no odd table; make it with: make-odd"
    assert lk.skipped_note(["vector", "odd"]) == ""
    assert "«odd» (`odd`) — нет таблицы: её делает make-odd" in lk.skipped_note(["vector", "odd"], lab)


# --- the stages on fake branches: no service needed ----------------------------------------------------------


def _fixed(*doc_ids: int):
    """A branch search that returns `doc_ids` (scores falling from 1), at most top_k of them."""
    def search(lab, query, top_k=10):
        return [Hit(d, 1.0 - i / 100) for i, d in enumerate(doc_ids)][:top_k]
    return search


def test_one_branch_keeps_its_own_ranking_and_scores():
    one = lk.Pipeline.of(lk.Branch("one", _fixed(3, 1, 2)))
    assert one(None, "q", 2) == [Hit(3, 1.0), Hit(1, 0.99)]
    assert str(one) == "one" and one.fusion == lk.FusionConfig.of({"one": 1.0})


def test_branches_are_fused_by_rrf_with_their_weights():
    a, b = lk.Branch("a", _fixed(1, 2, 3)), lk.Branch("b", _fixed(3, 2, 1))
    fused = lk.Pipeline.of({a: 1.0, b: 2.0}, rrf_k=5)
    assert fused(None, "q", 3) == rrf([[1, 2, 3], [3, 2, 1]], rrf_k=5, weights=[1.0, 2.0])
    assert str(fused) == "a + b×2 → RRF(k=5)" and fused(None, "q", 0) == []
    with pytest.raises(ValueError, match="once"):
        lk.Pipeline.of({a: 1.0, lk.Branch("a", _fixed(1)): 1.0})


class Upper:
    def __call__(self, lab, query):
        return query.upper()

    def __str__(self):
        return "upper"


class Reverse:
    """Reverses the first `depth` hits: shows how many the pipeline fetched and what query the steps saw."""

    def __init__(self, depth):
        self.depth, self.seen = depth, []

    def __call__(self, lab, query, hits):
        self.seen.append((query, len(hits)))
        return list(reversed(hits[: self.depth])) + list(hits[self.depth:])

    def __str__(self):
        return f"reverse@{self.depth}"


def test_rewrite_then_rank_then_rerank():
    queries = []

    def search(lab, query, top_k=10):
        queries.append(query)
        return _fixed(1, 2, 3, 4, 5, 6)(lab, query, top_k)

    reverse = Reverse(4)
    mode = lk.Pipeline.of(lk.Branch("six", search), rewrite=[Upper()], rerank=[reverse])
    assert str(mode) == "upper → six → reverse@4"
    assert ids(mode(None, "золото", 2)) == [4, 3]  # four fetched for the head, two returned
    assert queries == ["ЗОЛОТО"] and reverse.seen == [("ЗОЛОТО", 4)]
    assert ids(mode(None, "золото", 5)) == [4, 3, 2, 1, 5] and mode(None, "золото", 0) == []
    # wrapping a pipeline puts new rewrites before its own and new re-rankers after its own
    outer = lk.Pipeline.of(mode, rewrite=[lk.Spelling()], rerank=[lk.Coverage(3)])
    assert str(outer) == "spelling → upper → six → reverse@4 → coverage@3"
    # a pipeline fused as a branch of another shows its own stages in parentheses
    both = lk.Pipeline.of({mode: 1.0, lk.Branch("one", _fixed(9)): 1.0})
    assert str(both) == "(upper → six → reverse@4) + one → RRF(k=60)" and ids(both(None, "q", 2)) == [4, 9]


def test_a_coverage_step_names_a_text_other_than_the_fielded_one():
    def empty_text(lab):
        return sql.SQL("SELECT 1 AS id, '' AS text"), {}

    assert str(lk.Coverage(4)) == "coverage@4" and str(lk.Coverage(6, empty_text)) == "coverage@6(empty_text)"
    with pytest.raises(ValueError, match="depth"):
        lk.Coverage(0)


# --- on the real stack ---------------------------------------------------------------------------------------


@pytest.mark.services
def test_adding_a_mode_is_one_line(lab, monkeypatch):
    """The plain hybrid with its head re-ranked by coverage: one line in the table, and evaluate runs it by name."""
    monkeypatch.setitem(modes.SEARCH_MODES, "hybrid_covered", lk.Pipeline.of(modes.HYBRID, rerank=[lk.Coverage(4)]))
    assert str(lk.SEARCH_MODES["hybrid_covered"]) == "vector + lexical → RRF(k=60) → coverage@4"
    assert "hybrid_covered" in lk.available_modes()
    report = lk.evaluate(lab, lk.load_queries(), ["hybrid", "hybrid_covered"], top_k=3)
    assert report.modes == ("hybrid", "hybrid_covered")
    for q in report.queries:
        plain, covered = q.rankings["hybrid"], q.rankings["hybrid_covered"]
        assert sorted(covered[:4]) == sorted(plain[:4]) and covered[4:] == plain[4:]  # only the head moves
    means = report.means["hybrid_covered"]
    assert all(0 <= value <= 1 for value in means.values())


@pytest.mark.services
def test_the_hybrid_mode_is_lesson_04s_hybrid(lab):
    for q in lk.load_queries()[:4]:
        assert lk.SEARCH_MODES["hybrid"](lab, q.query, 5) == lk.search_hybrid(lab, q.query, 5)
        assert lk.search_fused(lab, q.query, modes.HYBRID, 5) == lk.search_hybrid(lab, q.query, 5)


@pytest.mark.services
def test_coverage_reads_the_text_it_is_given(lab):
    def empty_text(lab):
        texts, params = fielded_text(lab)
        return sql.SQL("SELECT id, '' AS text FROM ({}) AS f").format(texts), params

    hits = lk.SEARCH_MODES["fielded"](lab, "золотая медаль", 6)
    assert any(lk.covered_lexemes(lab, "золотая медаль", ids(hits)).values())
    assert lk.covered_lexemes(lab, "золотая медаль", ids(hits), empty_text) == {d: [] for d in ids(hits)}
    # nothing covered: the stable sort keeps the ranking's order
    assert ids(lk.Coverage(4, empty_text)(lab, "золотая медаль", hits)) == ids(hits)
