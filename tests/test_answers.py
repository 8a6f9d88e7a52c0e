"""Faithful answers and grounded arguments: the checks behind the agent's answers (labkit.agent.faithfulness, planner)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import labkit as lk
from labkit.agent.entity_tool import FINAL_TOOLS, search_by_entity
from labkit.agent.faithfulness import check_answer, cited_ids, extractive_answer, retrieved_ids
from labkit.agent.markup import has_markup, strip_markup
from labkit.agent.planner import TOPIC_GROUNDING, drop_ungrounded, is_grounded, route_calls
from labkit.agent.routing import asks_count, check_scope, fallback_call, subject_query
from labkit.agent.scope import Scope, asks_about_articles

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ["[6] Фигурист взял золото на чемпионате России, обновив личный рекорд",
           "[9] Банк России сохранил ключевую ставку на уровне 16 процентов"]


def test_a_faithful_retelling_with_citations_passes():
    answer = "Фигурист взял золото на чемпионате России [6], а Банк России сохранил ключевую ставку на уровне 16 процентов [9]."
    assert check_answer(answer, RESULTS, "Что нового?").ok
    after = "Фигурист взял золото на чемпионате России, обновив личный рекорд. [6] Банк России сохранил ставку [9]."
    assert check_answer(after, RESULTS, "Что нового?").ok, "a citation right after the sentence's end is its own"
    assert cited_ids(answer) == [6, 9] and retrieved_ids(RESULTS) == [6, 9]


@pytest.mark.parametrize(("answer", "problem"), [
    ("Фигурист взял золото на чемпионате России [12].", "ссылка [12] не на найденную новость"),
    ("Фигурист взял золото на чемпионате России.", "без ссылки на новость"),
    ("Фигурист взял золото на чемпионате России [9].", "не держится на процитированной новости"),
    ("Фигурист взял золото [6], а ставку сохранили [6, 44].", "ссылка [44]"),
    ("Да, были.", "ни на одну из найденных новостей"),  # says nothing the news could confirm
])
def test_citations_must_name_the_news_that_hold_the_sentence(answer, problem):
    verdict = check_answer(answer, RESULTS, "Что нового?")
    assert not verdict.ok and any(problem in p for p in verdict.problems), verdict.problems


def test_a_count_needs_no_citation_and_cites_nothing():
    assert check_answer("По теме «спорт» в базе 7 новостей.", ["По теме «спорт» в базе 7 новостей."]).ok
    assert not check_answer("В базе 7 новостей о спорте [3].", ["По теме «спорт» в базе 7 новостей."]).ok


@pytest.mark.parametrize(("answer", "problem"), [
    ("Физикист взял золото на чемпионате России.", "слово «Физикист»"),  # a garbled fact seen in a real answer
    ("Ставку сохранили на уровне 17 процентов.", "число 17"),
    ("5 новостей по теме finance.", "служебный код finance"),
    ("Фигурист взял золото <tools></tools> [6].", "разметка модели"),
    ("В базе есть 3 новость про спорт.", "«3 новость»: нужно «3 новости»"),
    ("Фигурист сохранил ключевую ставку на чемпионате процентов.", "смешивает разные новости"),
    ("В базе новостей о происшествиях 2.", "число 2"),  # as many as the results, but not a count of them
    ("В базе есть четыре новости про спорт.", "число «четыре» (4)"),
    ("Ставку сохранили в Париже.", "слово «Париже»"),
])
def test_unfaithful_answers_are_caught(answer, problem):
    verdict = check_answer(answer, [*RESULTS, "По теме «спорт» в базе 3 новости, 5 новостей"], "Сколько?")
    assert not verdict.ok and any(problem in p for p in verdict.problems), verdict.problems


def test_the_fallback_quotes_the_results_with_their_ids_and_is_faithful():
    answer = extractive_answer(RESULTS)
    assert answer.startswith("Нашлось 2 новости:") and "[6]" in answer and "[9]" in answer
    assert check_answer(answer, RESULTS).ok
    single = extractive_answer(RESULTS[:1])
    assert single.endswith("[6].") and check_answer(single, RESULTS[:1]).ok
    assert extractive_answer([]) == "В базе ничего не нашлось."


@pytest.mark.parametrize(("text", "clean"), [
    ("<tools></tools>", ""),
    ("<tool_call>\n{\"name\": \"search_articles\", \"arguments\": {\"query\": \"нефть\"}}\n</tool_call>", ""),
    ('{"name": "get_metrics", "arguments": {"topic": "sport"}}', ""),
    ('Ищу: {"name": "search_articles", "argu', "Ищу:"),  # an object cut by the token limit
    ("```json\n[{\"name\": \"x\"}]\n```", ""),
    ("Привет! Чем помочь?<|im_end|>", "Привет! Чем помочь?"),
    ("Фигурист взял золото [6], ставку сохранили [6, 9].", "Фигурист взял золото [6], ставку сохранили [6, 9]."),
    ("Фигурные {скобки} и [квадратные] остаются.", "Фигурные {скобки} и [квадратные] остаются."),
])
def test_model_markup_is_stripped_and_citations_stay(text, clean):
    assert strip_markup(text) == clean
    assert has_markup(text) is (clean != text)


def _scope(*words: str) -> Scope:
    """A scope whose analyser cuts words to their first five letters (the real one asks Postgres)."""
    def analyse(text: str) -> set[str]:
        return {w.casefold()[:5] for w in re.findall(r"\w+", text) if len(w) >= 3}

    return Scope(frozenset(w[:5] for w in words), analyse)


SCOPE = _scope("опек", "договорилась", "мира", "золото", "фигурист")


@pytest.mark.parametrize(("question", "calls", "expected"), [
    # small talk loses its search: nothing in it is about the news or shared with them
    ("Какая столица Франции?", [("search_articles", {"query": "столица Франции"})], []),
    ("Сколько будет дважды два?", [("get_metrics", {"topic": "sport"})], []),
    # a question about the news that got no call gets one
    ("Расскажи про спорт.", [], [("search_articles", {"query": "спорт"})]),
    ("Что пишут о Магните?", [], [("search_by_entity", {"company": "Магнит"})]),
    ("Сколько новостей о происшествиях?", [], [("get_metrics", {"topic": "incident"})]),
    # shared words alone keep the model's call, and its choice to answer itself
    ("О чём договорились страны ОПЕК+?", [("search_articles", {"query": "ОПЕК+"})], [("search_articles", {"query": "ОПЕК+"})]),
    ("Кто написал «Войну и мира»?", [], []),
    # one word of three shared («мира» of «чемпионата мира») is not the news' language
    ("Кто написал «Войну и мира»?", [("search_articles", {"query": "Война и мир"})], []),
])
def test_scope_drops_small_talk_searches_and_adds_a_call_for_news_questions(question, calls, expected):
    given = [{"name": n, "arguments": a} for n, a in calls]
    assert [(c["name"], c["arguments"]) for c in check_scope(given, question, FINAL_TOOLS, SCOPE)] == expected


def test_a_reply_that_was_only_markup_searches_when_the_question_shares_words():
    assert check_scope([], "О чём договорились страны ОПЕК+?", FINAL_TOOLS, SCOPE, failed=True) == [
        {"name": "search_articles", "arguments": {"query": "чём договорились страны ОПЕК"}}]
    assert check_scope([], "Посоветуй фильм.", FINAL_TOOLS, SCOPE, failed=True) == []


@pytest.mark.parametrize(("question", "expected"), [
    ("Что пишут о выборах?", True), ("Какие новости есть?", True), ("Что известно о нефти?", True),
    ("Привет, как дела?", False), ("Расскажи анекдот.", False),
])
def test_questions_about_news_as_such(question, expected):
    assert asks_about_articles(question) is expected


def test_count_questions_and_subject_queries():
    assert asks_count("Как много в базе новостей о спорте?") and asks_count("Какое количество новостей о финансах?")
    assert not asks_count("Сколько стоит золото?") and not asks_count("Какие есть новости про спорт?")
    assert subject_query("Какие есть новости про спорт?") == "спорт"
    assert subject_query("Расскажи что-нибудь о недвижимости.") == "недвижимости"
    assert fallback_call("Привет", FINAL_TOOLS[:1]) == {"name": "search_articles", "arguments": {"query": "Привет"}}


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
    # a count where the question asks for the news themselves
    ("Какие есть новости про спорт?", ("get_metrics", {"topic": "sport"}), ("search_articles", {"query": "спорт"})),
    ("Что плохого пишут о Газпроме?", ("get_metrics", {"topic": "finance"}),
     ("search_by_entity", {"company": "Газпром", "tone": "negative"})),
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
    ("А сколько про финансы?", ("get_metrics", {"topic": "finance"})),  # a follow-up of a count question
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
