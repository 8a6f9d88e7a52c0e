"""Query correction against the corpus' words (taught in 11_beyond_rrf): keyboard layout and one-edit typos, real words kept."""

from __future__ import annotations

import pytest

import labkit as lk
from labkit.retrieval.rewriters.spelling import edit_distance, same_word

ODD_QUERIES = ["", "   ", "🙂🙂", "'; DROP TABLE news; --", "a & b | !c <-> :*", "\x00\ud800", "золото " * 500, "12345"]


def test_edit_distance_counts_one_edit_of_each_kind():
    assert edit_distance("ставка", "ставка") == 0
    assert edit_distance("савка", "ставка") == 1  # a letter dropped
    assert edit_distance("залота", "золота") == 1  # a letter changed
    assert edit_distance("сбербнак", "сбербанк") == 1  # two neighbours swapped
    assert edit_distance("эксперты", "экспорт") == 2
    assert edit_distance("", "abc") == 3


def test_latin_layout_is_read_as_russian_only_when_every_key_maps():
    assert lk.from_latin_layout("ufpghjv") == "газпром"
    assert lk.from_latin_layout("Ghbdtn") == "привет"
    assert lk.from_latin_layout("golden1") is None
    assert lk.from_latin_layout("золото") is None


def test_same_word_accepts_inflections_and_refuses_short_typos():
    assert same_word("приб", "прибыл")  # the stemmer's two cuts of «прибыли» and «прибыль»
    assert same_word("гимнастк", "гимнастик")
    assert not same_word("золт", "золот")  # «золто» is a typo of «золото»
    assert not same_word("залот", "золот")
    assert not same_word("цб", "цбр")  # too short to say


@pytest.mark.services
def test_typos_and_the_wrong_layout_are_corrected_with_corpus_words(lab_ro):
    cases = {
        "ключевая савка ЦБ": "ключевая ставка ЦБ",
        "цена залота": "цена золота",
        "ufpghjv": "газпром",
        "Сбербнак прибыль": "Сбербанк прибыль",
        "фигурист золто": "фигурист золото",
    }
    for typed, wanted in cases.items():
        fixed = lk.correct_query(lab_ro, typed)
        assert fixed.corrected == wanted, (typed, fixed)
        assert fixed.typed == typed and fixed.changes


@pytest.mark.services
def test_real_words_the_corpus_lacks_are_left_alone(lab_ro):
    for query in ["эксперты ждут смягчения", "золото в фигурном катании", "ставка на спорт", "прибыль банка",
                  "YandexGPT", "IT-компании", "Какая столица Франции?"]:
        assert lk.correct_query(lab_ro, query) == lk.Correction(query, query, ()), query


@pytest.mark.services
def test_any_string_is_corrected_without_an_error(lab_ro):
    for query in ODD_QUERIES:
        fixed = lk.correct_query(lab_ro, query)
        assert isinstance(fixed.corrected, str)
        hits = lk.SEARCH_MODES["fielded_corrected"](lab_ro, query, 3)
        assert len(hits) <= 3


class _Rollback(Exception):
    pass


@pytest.mark.services
def test_the_lexicon_follows_the_corpus(lab):
    assert lk.correct_query(lab, "квазор").changes == ()
    with pytest.raises(_Rollback), lab.conn.transaction():
        lab.conn.execute("INSERT INTO news (id, body, company, tone, topic) "
                         "VALUES (100001, 'Астрономы нашли квазар', NULL, 'neutral', 'tech')")
        assert lk.correct_query(lab, "квазор").corrected == "квазар"
        raise _Rollback
    assert lab.conn.execute("SELECT count(*) FROM news").fetchone()[0] == 30
