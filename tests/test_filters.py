"""Metadata filters are checked before any SQL runs: shapes, fields, values, ranges (16_kb_codes)."""

from __future__ import annotations

import json

import pytest

import labkit as lk
from labkit.core.corpora.kb import KB, KB_QUERIES
from labkit.retrieval.filters import MAX_VALUES, Match, Range, within_source


def test_filters_read_like_the_lesson():
    filters = lk.Filters.of({"type": "manual", "status": ["действует", "архив"]}, date={"from": "2025-01-01"})
    assert filters.conditions == (Match("type", ("manual",)), Match("status", ("действует", "архив")),
                                  Range("date", "2025-01-01", None))
    assert str(filters) == "type=manual, status∈{действует, архив}, date≥2025-01-01"
    assert str(lk.Filters.of(date={"to": "2026-01-01"})) == "date≤2026-01-01"
    assert str(lk.Filters()) == "no conditions" and not lk.Filters() and filters
    filters.check(KB)  # every field and value fits the knowledge base


@pytest.mark.parametrize(("given", "message"), [
    ({"type": ""}, "непустые строки"),
    ({"type": []}, "непустой список"),
    ({"type": 7}, "нужна строка"),
    ({"type": ["manual", 7]}, "непустые строки"),
    ({"category": "a\x00b"}, "без NUL"),
    ({"category": "x" * 201}, "не длиннее 200"),
    ({"category": [f"c{i}" for i in range(MAX_VALUES + 1)]}, "не больше 100 значений"),
    ({"date": {}}, "'from' и/или 'to'"),
    ({"date": {"since": "2025-01-01"}}, "'from' и/или 'to'"),
    ({"date": {"from": None, "to": None}}, "нужен 'from' или 'to'"),
    ({"date": {"from": 1.5}}, "даты ISO или целые числа"),
    ({"date": {"from": True}}, "даты ISO или целые числа"),
])
def test_a_badly_shaped_filter_is_refused_with_its_name(given, message):
    with pytest.raises(ValueError, match=message) as raised:
        lk.Filters.of(given)
    assert repr(next(iter(given))) in str(raised.value)


@pytest.mark.parametrize(("given", "message"), [
    ({"colour": "red"}, "нет поля 'colour'"),
    ({"type": "manuals"}, "'manuals' — нет среди значений policy, faq, manual, regulation, offer"),
    ({"status": ["действует", "устарел"]}, "'устарел' — нет среди значений"),
    ({"date": "2025-01-01"}, "поле типа date, нужен диапазон"),
    ({"category": {"from": "a"}}, "диапазон бывает только у поля даты или целого числа"),
    ({"date": {"from": "15.09.2026"}}, "датами ISO ГГГГ-ММ-ДД"),
    ({"date": {"from": "2026-01-01", "to": "2025-01-01"}}, "'from' 2026-01-01 позже 'to' 2025-01-01"),
    ({"doc": {"from": "x"}}, "должны быть целыми числами"),
])
def test_a_filter_that_does_not_fit_the_corpus_is_refused_before_any_sql(given, message):
    filters = lk.Filters.of(given)
    with pytest.raises(ValueError, match=message):
        filters.check(KB)
    with pytest.raises(ValueError, match=message):
        filters.where(KB)


def test_a_field_given_twice_is_refused():
    with pytest.raises(ValueError, match="задан дважды"):
        lk.Filters((Match("type", ("faq",)), Match("type", ("manual",)))).check(KB)


def test_the_predicate_is_parameterised_and_knows_list_fields():
    predicate, params = lk.Filters.of({"products": "Телевизор ТехноВид 65Q7", "type": "faq",
                                       "date": {"from": "2025-01-01", "to": "2026-12-31"}}).where(KB)
    text = repr(predicate)
    assert "string_to_array" in text and "Телевизор" not in text, "values travel as parameters"
    assert params == {"f0": ["Телевизор ТехноВид 65Q7"], "f1": ["faq"], "f2lo": "2025-01-01", "f2hi": "2026-12-31"}
    assert repr(lk.Filters().where(KB)[0]) == "SQL('true')"
    assert "AS" not in repr(within_source("kb_chunks", False)) and "ANY" in repr(within_source("kb_chunks", True))


def test_the_filtered_queries_carry_filters_that_fit_the_knowledge_base(tmp_path):
    found = lk.query_filters(KB_QUERIES)
    kinds = lk.query_kinds(KB_QUERIES)
    assert found and all(kinds[query] == "filtered" for query in found)
    assert len(found) == sum(kind == "filtered" for kind in kinds.values())
    for filters in found.values():
        filters.check(KB)
    bad = tmp_path / "q.jsonl"
    bad.write_text(json.dumps({"query": "q", "relevant": [1]}) + "\n"
                   + json.dumps({"query": "x", "relevant": [1], "filters": {"type": ""}}) + "\n", encoding="utf-8")
    with pytest.raises(lk.DataError, match=rf"{bad}:2: фильтр 'type'"):
        lk.query_filters(bad)
    bad.write_text(json.dumps({"query": "x", "relevant": [1], "filters": []}) + "\n", encoding="utf-8")
    with pytest.raises(lk.DataError, match=rf"{bad}:1: 'filters' must be a non-empty object"):
        lk.query_filters(bad)


def test_a_filter_stage_needs_branches_that_can_filter():
    manual = lk.Filters.of(type="manual")
    assert str(lk.HYBRID_CODES_ALIASES.where(manual)).startswith("filter(type=manual) → vector + (aliases → bm25)")
    assert lk.HYBRID_CODES_ALIASES.where(manual).where(None) == lk.HYBRID_CODES_ALIASES
    with pytest.raises(ValueError, match="fielded cannot"):
        lk.SEARCH_MODES["fielded"].where(manual)
    with pytest.raises(ValueError, match="latent cannot"):
        lk.SEARCH_MODES["hybrid_latent"].where(manual)
    assert all(lk.BRANCHES[name].filterable for name in ("vector", "lexical", "bm25", "codes"))


def test_modes_say_which_corpora_they_fit():
    assert list(lk.modes_for(lk.NEWS)) == list(lk.SEARCH_MODES), "the news corpus' modes stay as they were"
    assert list(lk.modes_for(KB)) == [*lk.SEARCH_MODES, *lk.KB_MODES]
    assert set(lk.available_modes()) <= set(lk.SEARCH_MODES)
    for name in lk.KB_MODES:
        assert lk.mode_misfit(name, lk.NEWS) in {"the corpus 'news' has no text field 'codes' (article codes)",
                                                 "the corpus 'news' is not a corpus of chunks",
                                                 "the corpus 'news' has no finer cut"}
        assert lk.mode_misfit(name, KB) is None
    assert lk.mode_misfit("vector", lk.NEWS) is None and lk.mode_misfit("no such mode") is None
    assert lk.KB_MODES["hybrid_codes_aliases"].corpus_needs == (lk.BRANCHES["codes"].corpus_needs[0],)


def test_a_fused_chunk_ranking_is_collapsed_before_it_is_scored():
    rankings = {"a": {"q": [1001, 1002, 2001]}, "b": {"q": [3001, 1003]}}
    labelled = [lk.LabelledQuery("q", frozenset({1, 3}))]
    grid = [lk.FusionConfig.of({"a": 1.0, "b": 1.0})]
    chunks = lk.tune_fusion(rankings, labelled, grid, top_k=2)[0]
    documents = lk.tune_fusion(rankings, labelled, grid, top_k=2,
                               parents={1001: 1, 1002: 1, 1003: 1, 2001: 2, 3001: 3})[0]
    assert chunks.recall == 0.0 and documents.recall == 1.0, "documents 1 and 3 are the top two once collapsed"
