"""A «both» question cut into its rules part and its data part (labkit.agent.supervisor.split), and a reply that ran
away cut where its loop begins (labkit.agent.runaway). Pure text: unit tier."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labkit.agent.runaway import cut_runaway, ran_away
from labkit.agent.supervisor.split import BothParts, split_both

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Как работает самовывоз и сколько заказов забрали самовывозом?",
         BothParts("Как работает самовывоз?", "Сколько заказов забрали самовывозом?")),
        ("Сколько дней по правилам даётся на возврат и сколько возвратов было у магазина?",  # «сколько» in both parts
         BothParts("Сколько дней по правилам даётся на возврат?", "Сколько возвратов было у магазина?")),
        ("Когда возвращаются деньги, а какую сумму всего вернули в 2026 году?",
         BothParts("Когда возвращаются деньги?", "Какую сумму всего вернули в 2026 году?")),
        ("Как вернуть кронштейн 7748-К и сколько раз его возвращали?",  # «его»: the whole question goes along
         BothParts("Как вернуть кронштейн 7748-К?", "Сколько раз его возвращали? (вопрос целиком: «Как вернуть кронштейн "
                                                    "7748-К и сколько раз его возвращали?»)")),
        ("Сколько заказов оплачено через СБП?", None),  # one part
        ("Какая гарантия по правилам и какая гарантия в каталоге?", None),  # no data word: the model reads it whole
        ("Сколько стоит доставка и сколько заказов было?", None),  # two data parts, no rules part
        ("Чем отличается ремонт и обмен и сколько заказов вернули и как их вернуть?", None),  # three parts
    ],
)
def test_a_both_question_is_cut_into_its_rules_part_and_its_data_part(question, expected):
    assert split_both(question) == expected


def test_every_labelled_both_question_is_cut_or_left_whole_and_no_part_is_empty():
    both = [json.loads(line) for line in (REPO / "labkit/data/supervisor/questions.jsonl").read_text(encoding="utf-8").splitlines()]
    both = [record["question"] for record in both if record["kind"] == "both"]
    assert len(both) >= 10
    cut = [parts for question in both if (parts := split_both(question)) is not None]
    assert len(cut) >= len(both) // 2  # the point of the module: most of them cut
    assert all(len(part) > 3 and "?" in part for parts in cut for part in parts)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Возврат — 10 дней. Всего вернули в 2026 году: 1000000000000000000000000000", "Возврат — 10 дней. Всего вернули в 2026 году…"),
        ("Ответ: да да да да да да да", "Ответ…"),
        ("0000000000000000", ""),
        ("Сумма 1 000 000 ₽, телефон 8 800 555-35-35, артикул 7748-К.", None),  # a real answer stays
        ("Очень-очень быстро: за 10 000 000 миллисекунд.", None),
    ],
)
def test_a_reply_that_ran_away_is_cut_where_its_loop_begins(text, expected):
    assert ran_away(text) is (expected is not None)
    assert cut_runaway(text) == (text if expected is None else expected)
