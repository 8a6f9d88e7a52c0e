"""Faithful answers and grounded arguments: the checks behind the agent's answers (labkit.agent.faithfulness, planner)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import labkit as lk
from labkit.agent.entity_tool import FINAL_TOOLS, search_by_entity
from labkit.agent.faithfulness import check_answer, extractive_answer, strip_ids
from labkit.agent.planner import TOPIC_GROUNDING, drop_ungrounded, is_grounded, route_calls

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ["[6] Фигурист взял золото на чемпионате России, обновив личный рекорд",
           "[9] Банк России сохранил ключевую ставку на уровне 16 процентов"]


def test_a_faithful_retelling_passes():
    answer = "Фигурист взял золото на чемпионате России, а Банк России сохранил ключевую ставку на уровне 16 процентов."
    assert check_answer(answer, [strip_ids(r) for r in RESULTS], "Что нового?").ok


@pytest.mark.parametrize(("answer", "problem"), [
    ("Физикист взял золото на чемпионате России.", "слово «Физикист»"),  # a garbled fact seen in a real answer
    ("Ставку сохранили на уровне 17 процентов.", "число 17"),
    ("5 новостей по теме finance.", "служебный код finance"),
    ("В новости [6] фигурист взял золото.", "номер документа [6]"),
    ("В базе есть 3 новость про спорт.", "«3 новость»: нужно «3 новости»"),
    ("Фигурист сохранил ключевую ставку на чемпионате процентов.", "смешивает разные новости"),
    ("В базе новостей о происшествиях 2.", "число 2"),  # as many as the results, but not a count of them
    ("В базе есть четыре новости про спорт.", "число «четыре» (4)"),
    ("Ставку сохранили в Париже.", "слово «Париже»"),
])
def test_unfaithful_answers_are_caught(answer, problem):
    verdict = check_answer(answer, [strip_ids(r) for r in [*RESULTS, "По теме «спорт» в базе 3 новости, 5 новостей"]],
                           "Сколько?")
    assert not verdict.ok and any(problem in p for p in verdict.problems), verdict.problems


def test_the_fallback_quotes_the_results_and_is_faithful():
    answer = extractive_answer(RESULTS)
    assert answer.startswith("Нашлось 2 новости:") and "[6]" not in answer
    assert check_answer(answer, [strip_ids(r) for r in RESULTS]).ok
    assert extractive_answer([]) == "В базе ничего не нашлось."


@pytest.mark.parametrize(("value", "question", "expected"), [
    ("Яндекс", "Какие новости есть про Яндекс?", True),
    ("neutral", "Какие новости есть про Яндекс?", False),
    ("negative", "Есть ли негативные новости про ЦБ?", True),
    ("ЦБ", "Что решил Банк России?", True),
    ("Сбербанк", "Покажи хорошие новости о Сбербанке", True),
    ("positive", "Покажи хорошие новости о Сбербанке", True),
])
def test_an_argument_is_grounded_only_when_the_question_asks_for_it(value, question, expected):
    assert is_grounded(value, question) is expected


def test_ungrounded_optional_filters_are_dropped_required_ones_kept():
    calls = [{"name": "search_by_entity", "arguments": {"company": "Яндекс", "tone": "neutral"}},
             {"name": "get_metrics", "arguments": {"topic": "sport"}},
             {"name": "search_articles", "arguments": {"query": "новости Яндекса"}}]
    kept = drop_ungrounded(calls, "Какие новости есть про Яндекс?", FINAL_TOOLS)
    assert [c["arguments"] for c in kept] == [{"company": "Яндекс"}, {"topic": "sport"}, {"query": "новости Яндекса"}]


def test_a_filter_call_left_without_filters_becomes_a_search_for_the_question():
    question = "Какие новости есть про нейросети для бизнеса?"
    kept = drop_ungrounded([{"name": "search_by_entity", "arguments": {"company": "Нейросети"}}], question, FINAL_TOOLS)
    assert kept == [{"name": "search_articles", "arguments": {"query": question}}]


def test_enum_codes_carry_russian_glosses_in_the_schema():
    topic = lk.tool_schema(lk.get_metrics)["function"]["parameters"]["properties"]["topic"]
    tone = lk.tool_schema(search_by_entity)["function"]["parameters"]["properties"]["tone"]
    assert "commodities — сырьё: нефть" in topic["description"] and "monetary — денежно-кредитная" in topic["description"]
    assert "negative — негативные" in tone["description"]
    assert all(code in topic["description"] for code in lk.TOPICS)


@pytest.mark.services
def test_ask_uses_the_final_agent_by_default_and_lesson_on_request(settings):
    def ask(*flags: str) -> dict:
        done = subprocess.run([sys.executable, "-m", "labkit", "ask", "Какие новости есть про Яндекс?", "--json", *flags],
                              capture_output=True, text=True, cwd=ROOT, timeout=600)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    final = ask()
    assert final["tool_calls"][0] == {"name": "search_by_entity", "arguments": {"company": "Яндекс"}}
    assert "Яндекс" in final["answer"] and final["faithful"] is True
    lesson = ask("--tools", "lesson")
    assert all(call["name"] != "search_by_entity" for call in lesson["tool_calls"])


@pytest.mark.services
def test_eval_agent_scores_choice_and_faithfulness(settings, tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        '{"question": "Сколько новостей про спорт в базе?", "tool": "get_metrics", "arguments": {"topic": "sport"}}\n'
        '{"question": "Какие новости есть про Газпром?", "tool": "search_by_entity", "arguments": {"company": "Газпром"}}\n',
        encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "labkit", "eval-agent", "--questions", str(questions), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["questions"] == 2 and report["answers_with_data"] == 2
    assert 0 <= report["correct"]["mean"] <= 1 and report["faithful"]["mean"] == 1.0
    sport = report["rows"][0]
    assert sport["tool"] == "get_metrics" and sport["correct"] is True
    assert "спорт" in sport["answer"] and any(ch.isdigit() for ch in sport["answer"])


@pytest.mark.parametrize(("question", "call", "expected"), [
    # a count question answered by a search, or by a topic the question does not name
    ("Сколько в базе новостей о происшествиях?", ("search_articles", {"query": "происшествия"}),
     ("get_metrics", {"topic": "incident"})),
    ("Сколько новостей про нефть и металлы?", ("get_metrics", {"topic": "energy"}), ("get_metrics", {"topic": "commodities"})),
    ("Сколько новостей по денежно-кредитной политике?", ("get_metrics", {"topic": "finance"}),
     ("get_metrics", {"topic": "monetary"})),
    # a value the tool does not take, which another tool does
    ("Какие новости в базе нейтральные?", ("get_metrics", {"topic": "neutral"}), ("search_by_entity", {"tone": "neutral"})),
    # a search for filter words only
    ("Найди все негативные новости.", ("search_articles", {"query": "негативные новости"}),
     ("search_by_entity", {"tone": "negative"})),
    ("Покажи все новости о Магните.", ("search_articles", {"query": "Магнит"}), ("search_by_entity", {"company": "Магнит"})),
    # two values of one filter asked for: no filter
    ("Покажи все новости про Сбербанк, и хорошие, и плохие.", ("search_by_entity", {"company": "Сбербанк", "tone": "positive"}),
     ("search_by_entity", {"company": "Сбербанк"})),
])
def test_a_call_meant_for_another_tool_is_routed_there(question, call, expected):
    name, arguments = call
    planned = drop_ungrounded(route_calls([{"name": name, "arguments": arguments}], question, FINAL_TOOLS),
                              question, FINAL_TOOLS)
    assert [(c["name"], c["arguments"]) for c in planned] == [expected]


@pytest.mark.parametrize(("question", "call"), [
    ("Сколько стоит золото?", ("search_articles", {"query": "золото"})),  # a price, not a count of news
    ("Сколько будет дважды два?", ("search_articles", {"query": "два"})),  # names no topic: the model's choice stands
    ("Сколько новостей о спорте и технологиях?", ("get_metrics", {"topic": "sport"})),  # two topics: keep the model's
    ("Что пишет Сбербанк о GigaChat?", ("search_articles", {"query": "Сбербанк GigaChat"})),  # a subject beyond the filter
    ("Что известно о добыче нефти?", ("search_articles", {"query": "добыча нефти"})),
    ("Какие новости есть про Яндекс?", ("search_by_entity", {"company": "Яндекс"})),
])
def test_calls_the_question_does_not_contradict_are_left_alone(question, call):
    name, arguments = call
    assert route_calls([{"name": name, "arguments": arguments}], question, FINAL_TOOLS) == [{"name": name, "arguments": arguments}]


def test_topic_words_come_from_the_glosses_and_skip_listing_words():
    assert "происшест" in TOPIC_GROUNDING["incident"] and "сырь" in TOPIC_GROUNDING["commodities"]
    assert not any(start.startswith("компа") for starts in TOPIC_GROUNDING.values() for start in starts)
    assert set(TOPIC_GROUNDING) == set(lk.TOPICS)


def test_a_call_to_a_tool_not_offered_is_left_for_the_tools_node():
    call = {"name": "get_weather", "arguments": {"city": "Tokyo"}}
    assert route_calls([call], "Сколько новостей про спорт в базе?", FINAL_TOOLS) == [call]
