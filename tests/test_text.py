"""Texts for people: word-boundary cuts and Russian number agreement."""

from __future__ import annotations

import pytest

import labkit as lk

FORMS = ("новость", "новости", "новостей")


@pytest.mark.parametrize(
    ("number", "expected"),
    [(0, "новостей"), (1, "новость"), (2, "новости"), (4, "новости"), (5, "новостей"), (11, "новостей"),
     (12, "новостей"), (14, "новостей"), (21, "новость"), (22, "новости"), (25, "новостей"), (101, "новость"),
     (111, "новостей"), (1.5, "новости")],
)
def test_plural_follows_russian_agreement(number, expected):
    assert lk.plural(number, *FORMS) == expected


def test_count_joins_number_and_noun():
    assert lk.count(3, *FORMS) == "3 новости" and lk.count(204, "замер", "замера", "замеров") == "204 замера"


def test_shorten_cuts_at_a_word_boundary():
    assert lk.shorten("короткий текст", 40) == "короткий текст"
    cut = lk.shorten("Фигурист взял золото на чемпионате России", 20)
    assert cut == "Фигурист взял…" and len(cut) <= 20
    assert lk.shorten("  много   пробелов\nи строк ", 100) == "много пробелов и строк"
    assert lk.shorten("Сверхдлинноеслово", 8) == "Сверхдл…"


def test_every_code_has_a_russian_name():
    assert set(lk.TOPIC_NAMES) == set(lk.TOPICS) and set(lk.TONE_NAMES) == set(lk.TONES)


@pytest.mark.parametrize(("size", "expected"), [
    ("1.5B", "1,5 млрд параметров"), ("494.03M", "494 млн параметров"), ("32B", "32 млрд параметров"),
    ("7.60B", "7,6 млрд параметров"), ("", ""), ("unknown", "unknown")])
def test_model_size_reads_as_russian(size, expected):
    assert lk.model_size(size) == expected
