"""Chunking long documents: fixed windows, sentences, headings; every chunk knows its span and section."""

from __future__ import annotations

import pytest

from labkit.core.chunking import (
    fixed_chunks,
    heading_chunks,
    sections,
    sentence_chunks,
    sentences,
    span_overlap,
    word_tokens,
)

DOC = """# Гарантийное обслуживание

Гарантия действует с даты покупки. Чек сохраните!

## Сроки

На товары собственных брендов — 24 месяца. На остальное — гарантия производителя, обычно 12 месяцев.
Диагностика в СЦ — до 20 дней, ремонт — не более 45 дней (ЗоЗПП, ст. 20).

### Подменный товар

На время ремонта выдаётся подменный товар в течение 3 дней.

## Как сдать в ремонт

1. Возьмите чек и паспорт.
2. Приходите в «СервисПлюс»: Москва, ул. Летниковская, д. 10.
"""


def test_sections_follow_the_heading_levels_and_span_their_bodies():
    found = sections(DOC)
    assert [s.path for s in found] == [
        ("Гарантийное обслуживание",),
        ("Гарантийное обслуживание", "Сроки"),
        ("Гарантийное обслуживание", "Сроки", "Подменный товар"),
        ("Гарантийное обслуживание", "Как сдать в ремонт"),
    ]
    assert DOC[found[1].start:found[1].end].strip().startswith("На товары") and "###" not in DOC[found[1].start:found[1].end]
    assert DOC[found[2].head:].startswith("### Подменный товар")
    assert sections("Без заголовков. Совсем.")[0].path == ()


def test_sentences_keep_abbreviations_and_list_numbers_inside():
    said = [DOC[a:b] for a, b in sentences(DOC)]
    assert "Диагностика в СЦ — до 20 дней, ремонт — не более 45 дней (ЗоЗПП, ст. 20)." in said
    assert "2. Приходите в «СервисПлюс»: Москва, ул. Летниковская, д. 10." in said
    assert "Чек сохраните!" in said


@pytest.mark.parametrize("cut", [
    lambda: fixed_chunks(7, DOC, 12, 4, title="Гарантия"),
    lambda: sentence_chunks(7, DOC, 30, 10, title="Гарантия"),
    lambda: heading_chunks(7, DOC, 30, 10, title="Гарантия"),
])
def test_every_chunk_is_its_span_of_the_document_and_all_words_are_covered(cut):
    chunks = cut()
    assert [c.number for c in chunks] == list(range(len(chunks)))
    assert all(c.doc_id == 7 and c.text == DOC[c.start:c.end] and c.text.strip() == c.text for c in chunks)
    covered = set().union(*(range(c.start, c.end) for c in chunks))
    body = {i for a, b in sentences(DOC) for i in range(a, b) if not DOC[a:b].startswith("#")}
    assert body <= covered | {i for i in body if DOC[i].isspace()}


def test_fixed_windows_overlap_by_the_given_number_of_tokens():
    chunks = fixed_chunks(1, DOC, 12, 4)
    assert all(word_tokens(c.text) == 12 for c in chunks[:-1]) and word_tokens(chunks[-1].text) <= 12
    for left, right in zip(chunks, chunks[1:]):
        shared = DOC[right.start:left.end]
        assert word_tokens(shared) == 4, (left.text, right.text)


def test_sentence_chunks_never_end_mid_sentence_and_respect_the_size():
    ends = {b for _, b in sentences(DOC)}
    chunks = sentence_chunks(1, DOC, 30, 10)
    assert all(c.end in ends for c in chunks)
    assert all(word_tokens(c.text) <= 30 for c in chunks)
    assert any(left.end > right.start for left, right in zip(chunks, chunks[1:])), "overlap repeats sentences"


def test_heading_chunks_stay_inside_one_section_and_say_where_they_are():
    chunks = heading_chunks(1, DOC, 400, 0, title="Гарантийное обслуживание")
    assert [c.section[-1] for c in chunks] == ["Гарантийное обслуживание", "Сроки", "Подменный товар", "Как сдать в ремонт"]
    assert not any("#" in c.text for c in chunks)
    assert chunks[2].indexed.startswith("Гарантийное обслуживание › Сроки › Подменный товар: На время ремонта")
    small = heading_chunks(1, DOC, 12, 0)
    assert len(small) > len(chunks) and all(c.end <= next(s.end for s in sections(DOC) if s.path == c.section)
                                            for c in small)


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_a_size_or_overlap_that_cannot_work_is_refused(size, overlap):
    for cut in (fixed_chunks, sentence_chunks, heading_chunks):
        with pytest.raises(ValueError):
            cut(1, DOC, size, overlap)


def test_span_overlap_is_answer_recall_and_iou():
    assert span_overlap((0, 100), (10, 20)) == (1.0, 0.1)
    assert span_overlap((0, 15), (10, 20)) == (0.5, 0.25)
    assert span_overlap((30, 40), (10, 20)) == (0.0, 0.0)
