"""Tools: schemas from signatures, SQL results, and validation of invented model arguments."""

from __future__ import annotations

import pytest

import labkit as lk
from labkit.agent.entity_tool import FINAL_TOOLS, search_by_entity
from labkit.core.corpora import load_corpus


def test_schema_comes_from_signature_and_docstring():
    schema = lk.tool_schema(search_by_entity)["function"]
    assert schema["name"] == "search_by_entity"
    props = schema["parameters"]["properties"]
    assert props["company"]["enum"] == list(lk.COMPANIES)
    assert props["tone"]["enum"] == ["negative", "neutral", "positive"]
    assert schema["parameters"]["required"] == []
    assert all(p["description"] for p in props.values()), "Args: descriptions reach the model"
    assert "Taught in" not in schema["description"], "only the summary line goes to the model"
    metrics = lk.tool_schema(lk.get_metrics)["function"]["parameters"]
    assert metrics["required"] == ["topic"] and metrics["properties"]["topic"]["enum"] == list(lk.TOPICS)
    assert "lab" not in metrics["properties"]


@pytest.mark.services
def test_get_metrics_counts_in_sql(lab_ro):
    expected = sum(1 for doc in load_corpus() if doc.topic == "sport")
    result = lk.call_tool("get_metrics", {"topic": "sport"}, lab=lab_ro)
    assert result.ok and result.data == {"topic": "sport", "count": expected}
    assert str(expected) in result.content


@pytest.mark.services
def test_search_by_entity_filters_in_sql(lab_ro):
    corpus = load_corpus()
    want = [d.id for d in corpus if d.company == "ЦБ" and d.tone == "negative"][:5]
    result = lk.call_tool("search_by_entity", {"company": "ЦБ", "tone": "negative"}, lab=lab_ro, tools=FINAL_TOOLS)
    assert result.ok and [row["id"] for row in result.data] == want
    only_tone = search_by_entity(lab_ro, tone="positive")
    assert [row["id"] for row in only_tone] == [d.id for d in corpus if d.tone == "positive"][:5]


@pytest.mark.services
def test_search_articles_returns_top3_with_ids_and_text(lab_ro):
    result = lk.call_tool("search_articles", {"query": "цена золота"}, lab=lab_ro)
    assert result.ok and 1 <= len(result.data) <= 3
    texts = {d.id: d.text for d in load_corpus()}
    assert all(texts[row["id"]] == row["text"] for row in result.data)
    assert result.content.startswith(f"[{result.data[0]['id']}]")


@pytest.mark.parametrize(
    ("name", "arguments", "needle"),
    [
        ("get_metrics", {"topic": "weather"}, "sport"),  # enum violation names the allowed values
        ("get_metrics", {"topic": "sport'; DROP TABLE news; --"}, "Допустимые значения"),
        ("get_metrics", {"topic": 5}, "строкой"),
        ("get_metrics", {"topic": ["sport"]}, "строкой"),
        ("get_metrics", {"topic": True}, "строкой"),
        ("get_metrics", {}, "Не хватает аргумента «topic»"),
        ("get_metrics", {"topic": "sport", "limit": 3}, "нет аргумента «limit»"),
        ("search_by_entity", {"company": "ЦБ' OR '1'='1"}, "Газпром"),
        ("search_by_entity", {"tone": "angry"}, "negative, neutral, positive"),
        ("search_articles", {"query": "x" * 500}, "длиннее"),
        ("search_articles", {"query": "   "}, "Не хватает"),
        ("drop_table", {"name": "news"}, "Неизвестный инструмент"),
        ("get_metrics", "not json", "JSON"),
        ("get_metrics", [1, 2], "объектом"),
        (None, {}, "Неизвестный инструмент"),
    ],
)
@pytest.mark.services
def test_invented_arguments_give_a_message_not_an_exception(lab_ro, conn_ro, name, arguments, needle):
    result = lk.call_tool(name, arguments, lab=lab_ro, tools=FINAL_TOOLS)
    assert not result.ok and result.data is None
    assert needle in result.content and result.content.startswith("Ошибка")
    assert conn_ro.execute("SELECT count(*) FROM news").fetchone()[0] == len(load_corpus()), "table intact"


@pytest.mark.services
def test_json_string_arguments_and_case_are_accepted(lab_ro):
    result = lk.call_tool("get_metrics", '{"topic": " Sport "}', lab=lab_ro)
    assert result.ok and result.arguments == {"topic": "sport"}


def test_tool_outside_the_agents_list_is_unknown():
    result = lk.call_tool("search_by_entity", {"company": "ЦБ"}, lab=None, tools=lk.DEFAULT_TOOLS)  # type: ignore[arg-type]
    assert not result.ok and "search_articles, get_metrics" in result.content


@pytest.mark.services
def test_sql_looking_query_is_just_text(lab_ro, conn_ro):
    result = lk.call_tool("search_articles", {"query": "золото'); DROP TABLE news; --"}, lab=lab_ro)
    assert result.ok
    assert conn_ro.execute("SELECT count(*) FROM news").fetchone()[0] == len(load_corpus())


@pytest.mark.services
def test_database_failure_becomes_a_message(settings):
    broken = lk.open_lab(settings, load=False)
    broken.close()
    result = lk.call_tool("get_metrics", {"topic": "sport"}, lab=broken)
    assert not result.ok and "не выполнился" in result.content


def test_validation_runs_before_the_tool_and_needs_no_service():
    """Invented arguments are refused from the signature alone: no lab is touched (None here)."""
    for name, arguments in [("get_metrics", {"topic": "weather"}), ("get_metrics", {}),
                            ("search_articles", {"query": "x" * 500}), ("nope", {})]:
        result = lk.call_tool(name, arguments, lab=None)  # type: ignore[arg-type]
        assert not result.ok and result.content.startswith("Ошибка"), result


def test_the_first_parameter_is_the_lab_whatever_its_name():
    def count_news(context, topic: lk.Topic) -> int:
        """Count.

        Args:
            topic: topic of the news
        """
        return 0

    props = lk.tool_schema(count_news)["function"]["parameters"]["properties"]
    assert list(props) == ["topic"]


def test_the_exercise_answer_is_not_in_labkits_public_api():
    assert "search_by_entity" not in lk.__all__ and not hasattr(lk, "search_by_entity")
    assert "search_by_entity" not in {func.__name__ for func in lk.DEFAULT_TOOLS}
    assert [func.__name__ for func in FINAL_TOOLS] == ["search_articles", "get_metrics", "search_by_entity"]


def test_results_read_in_russian_without_internal_codes():
    assert lk.format_result({"topic": "monetary", "count": 3}) == "По теме «денежно-кредитная политика» в базе 3 новости."
    row = lk.format_result([{"id": 4, "text": "ЦБ сохранил ставку", "company": "ЦБ", "tone": "neutral"}])
    assert row == "[4] ЦБ сохранил ставку (компания: ЦБ, тональность: нейтральная)"
