"""The labelled agent questions: tools, enum values, coverage of the corpus and the fixed tune/report split.

No services: the file is checked against the tools' schemas and the corpus only.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from labkit.agent.entity_tool import search_by_entity
from labkit.agent.tools import DEFAULT_TOOLS, tool_schema
from labkit.core.corpora import load_corpus
from labkit.core.corpora.news import TOPIC_NAMES
from labkit.core.corpus import DataError
from labkit.evaluation.tool_choice import AgentQuestion, choice_is_correct, load_agent_questions

KINDS = {"search", "count", "entity", "no_extra", "none"}
SPLITS = ("tune", "report")
TOOLS = {func.__name__: func for func in (*DEFAULT_TOOLS, search_by_entity)}
KIND_TOOL = {"search": "search_articles", "count": "get_metrics", "entity": "search_by_entity", "none": None}

# The first 14 lines predate kinds and splits; notebooks 06 and 08 take their samples from them.
ORIGINAL_QUESTIONS = [
    "Что пишут про цену золота?",
    "Что известно о добыче нефти?",
    "Какие новости есть про нейросети для бизнеса?",
    "Найди новости о кибератаке на банк.",
    "Сколько новостей про спорт в базе?",
    "Сколько в базе новостей о финансах?",
    "Сколько новостей по теме технологий?",
    "Сколько новостей про ритейл?",
    "Есть ли негативные новости про ЦБ?",
    "Покажи позитивные новости о Сбербанке.",
    "Какие новости есть про компанию Газпром?",
    "Найди все негативные новости.",
    "Привет, как дела?",
    "Спасибо, это всё.",
]


@pytest.fixture(scope="module")
def questions() -> list[AgentQuestion]:
    return load_agent_questions()


def _properties(tool: str) -> dict[str, Any]:
    props: dict[str, Any] = tool_schema(TOOLS[tool])["function"]["parameters"]["properties"]
    return props


def test_enough_questions_of_every_kind(questions):
    assert len(questions) >= 52
    kinds = Counter(q.kind for q in questions)
    assert set(kinds) == KINDS, kinds
    assert all(n >= 8 for n in kinds.values()), kinds


def test_questions_are_unique_and_non_empty(questions):
    texts = [q.question.strip() for q in questions]
    assert all(texts)
    assert len(set(texts)) == len(texts), [t for t, n in Counter(texts).items() if n > 1]


def test_the_first_lines_are_the_original_questions(questions):
    assert [q.question for q in questions[:len(ORIGINAL_QUESTIONS)]] == ORIGINAL_QUESTIONS


def test_tools_and_argument_values_are_what_the_schemas_allow(questions):
    for q in questions:
        if q.tool is None:
            assert not q.arguments and not q.query_contains, q
            continue
        assert q.tool in TOOLS, q
        props = _properties(q.tool)
        for key, value in q.arguments.items():
            assert key in props and key != "query", (q.question, key)
            assert "enum" in props[key] and value in props[key]["enum"], (q.question, key, value)


def test_kind_matches_tool_and_arguments(questions):
    for q in questions:
        if q.kind in KIND_TOOL:
            assert q.tool == KIND_TOOL[q.kind], q
        if q.kind == "search":
            assert not q.arguments and q.query_contains, q
        else:
            assert not q.query_contains, q
        if q.kind == "count":
            assert set(q.arguments) == {"topic"}, q
        if q.kind == "entity":
            assert set(q.arguments) == {"company", "tone"}, q
        if q.kind == "no_extra":
            assert q.tool is not None and q.arguments, q
            left = set(_properties(q.tool)) - set(q.arguments) - {"query"}
            assert left, f"{q.question}: the tool has no argument one could wrongly add"


def test_search_stems_are_lowercase_stems_found_in_question_and_corpus(questions):
    # A question may name a topic instead of words of its news («Какие есть новости про спорт?»): the topic's
    # Russian name counts as found (the search finds such news by meaning).
    texts = " ".join([*(doc.text.casefold() for doc in load_corpus()), *TOPIC_NAMES.values()])
    for q in (q for q in questions if q.kind == "search"):
        assert 1 <= len(q.query_contains) <= 3, q
        assert all(s == s.strip().lower() and s and " " not in s for s in q.query_contains), q
        assert any(s in q.question.casefold() for s in q.query_contains), q
        if q.question not in ORIGINAL_QUESTIONS:  # «нейросети» is only in meaning (GigaChat, YandexGPT)
            assert any(s in texts for s in q.query_contains), f"{q.question}: no stem occurs in the corpus"


def test_corpus_topics_companies_and_tones_are_covered(questions):
    corpus = load_corpus()
    companies = {doc.company for doc in corpus if doc.company}
    named = {q.arguments["company"] for q in questions if "company" in q.arguments}
    assert named <= companies, named - companies
    assert {q.arguments["topic"] for q in questions if q.kind == "count"} == {doc.topic for doc in corpus}
    entity = [q for q in questions if q.kind == "entity"]
    assert {q.arguments["company"] for q in entity} == companies
    assert {q.arguments["tone"] for q in entity} == {doc.tone for doc in corpus}


def test_count_questions_name_topics_in_russian_only(questions):
    for q in (q for q in questions if q.kind == "count"):
        assert q.arguments["topic"] not in q.question.casefold(), q


def test_the_labelled_choice_is_correct_and_an_extra_filter_is_not(questions):
    for q in questions:
        arguments = dict(q.arguments)
        if q.query_contains:
            arguments["query"] = f"новости {q.query_contains[0]}"
        assert choice_is_correct(q, q.tool, arguments) == (True, True), q
        if q.kind == "no_extra":
            for key, prop in _properties(q.tool).items():
                if key not in q.arguments and key != "query":
                    wrong = {**arguments, key: prop["enum"][0]}
                    assert choice_is_correct(q, q.tool, wrong) == (True, False), (q.question, key)


def test_splits_partition_the_questions_and_halve_every_kind(questions):
    assert {q.split for q in questions} == set(SPLITS)
    parts = {split: load_agent_questions(split=split) for split in SPLITS}
    assert sorted(parts["tune"] + parts["report"]) == sorted(questions)
    assert not {q.question for q in parts["tune"]} & {q.question for q in parts["report"]}
    for kind in KINDS:
        tune, report = (sum(q.kind == kind for q in parts[s]) for s in SPLITS)
        assert tune and report and abs(tune - report) <= 1, (kind, tune, report)


def test_split_combines_with_the_tools_filter():
    both = load_agent_questions(tools=DEFAULT_TOOLS, split="report")
    assert both and all(q.split == "report" for q in both)
    assert all(q.tool in (None, "search_articles", "get_metrics") for q in both)
    assert {q.kind for q in both} == {"search", "count", "none"}


@pytest.mark.parametrize("split", ["test", "", "Tune"])
def test_unknown_split_is_refused(split):
    with pytest.raises(ValueError, match="unknown split"):
        load_agent_questions(split=split)


def test_a_file_without_kinds_and_splits_still_loads(tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps({"question": "Привет", "tool": None}, ensure_ascii=False) + "\n", encoding="utf-8")
    (q,) = load_agent_questions(path)
    assert q == AgentQuestion("Привет", None, {}) and q.kind == "" and q.split == ""
    assert load_agent_questions(path, split="tune") == []


@pytest.mark.parametrize("record", [{"question": "Привет", "tool": None, "split": "test"},
                                    {"question": "Привет", "tool": None, "kind": 1}])
def test_a_bad_kind_or_split_in_the_file_names_the_line(tmp_path, record):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.jsonl:1"):
        load_agent_questions(path)
