"""The fielded branch (11_beyond_rrf): each news text embedded with its topic's IPTC rubric and company, kept current."""

from __future__ import annotations

import pytest

import labkit as lk
from labkit.core.corpora.news import TOPIC_RUBRICS

MODES = ["fielded", "fielded_corrected", "fielded_covered"]


def test_weight_grid_lists_each_single_branch_once():
    grid = lk.weight_grid(["fielded", "vector"], levels=(0.0, 1.0, 2.0), rrf_ks=(10, 60))
    singles = [c for c in grid if len(c.branches) == 1]
    assert sorted(str(c) for c in singles) == ["RRF(fielded=1; rrf_k=60)", "RRF(vector=1; rrf_k=60)"]
    assert len(grid) == 2 + 4 * 2  # (1|2) x (1|2) weights of the pair, at two constants
    assert len(set(grid)) == len(grid)


@pytest.mark.services
def test_fielded_texts_hold_body_rubric_and_company(lab_ro):
    texts = dict(lab_ro.conn.execute(lk.FIELDED_VECTORS.text_sql, lk.fielded_params()).fetchall())
    docs = {doc.id: doc for doc in lk.load_corpus()}
    assert sorted(texts) == sorted(docs)
    for doc_id, text in texts.items():
        doc = docs[doc_id]
        assert text.startswith(doc.text) and f"Тема: {TOPIC_RUBRICS[doc.topic]}." in text
        assert (f"Компания: {doc.company}." in text) == bool(doc.company)


@pytest.mark.services
def test_only_documents_whose_text_changed_are_embedded_again(lab, monkeypatch):
    lk.FIELDED_VECTORS.sync(lab, lk.fielded_params())
    assert lk.FIELDED_VECTORS.sync(lab, lk.fielded_params()) == 0
    sport = sum(doc.topic == "sport" for doc in lk.load_corpus())
    monkeypatch.setitem(TOPIC_RUBRICS, "sport", "спорт: соревнования")
    assert lk.FIELDED_VECTORS.sync(lab, lk.fielded_params()) == sport
    assert lk.FIELDED_VECTORS.sync(lab, lk.fielded_params()) == 0
    monkeypatch.undo()
    assert lk.FIELDED_VECTORS.sync(lab, lk.fielded_params()) == sport  # back to the shipped rubrics


@pytest.mark.services
@pytest.mark.parametrize("mode", MODES)
def test_fielded_modes_take_any_string(lab_ro, mode):
    search = lk.SEARCH_MODES[mode]
    for query in ["", "   ", "🙂", "'; DROP TABLE news; --", "a & b | !c <-> :*", "\x00\ud800", "золото " * 500]:
        hits = search(lab_ro, query, 3)
        assert len(hits) <= 3 and all(isinstance(h, lk.Hit) for h in hits)
    assert lk.ids(search(lab_ro, "ставка на спорт", 3))


@pytest.mark.services
def test_correction_is_what_the_tune_split_gains(lab_ro):
    """The picked mode (fielded on the corrected query) is no worse than fielded alone on every tune query."""
    tune = lk.load_queries(lk.RETRIEVAL_PATH, split="tune")
    report = lk.evaluate(lab_ro, tune, MODES)
    per_query = report.per_query_frame()
    assert (per_query["fielded_corrected"] >= per_query["fielded"]).all()
    assert report.means["fielded_corrected"]["recall"] > report.means["fielded"]["recall"]


@pytest.mark.services
def test_the_rubrics_the_branch_embeds_do_not_echo_the_seed_queries(lab_ro):
    """What a relevant news item gets only from its rubric: the agent's glosses give the seed queries their own words."""
    seed = lk.load_queries()
    embedded = dict(lab_ro.corpus.field("topic").glosses)
    assert embedded == TOPIC_RUBRICS
    assert [s for s in lk.supplied_words(lab_ro, seed, embedded) if s.words] == [("ставка на спорт", ("спорт",))]
    echoed = {s.query: s.words for s in lk.supplied_words(lab_ro, seed, lk.TOPIC_GLOSSES) if s.words}
    assert echoed["ключевая ставка ЦБ"] == ("цб", "ключев") and len(echoed) > len(seed) / 2
