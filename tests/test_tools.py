"""Tools: schemas from signatures, SQL results, and validation of invented model arguments."""

from __future__ import annotations

import pytest

import labkit as lk
from labkit.corpus import load_corpus


def test_schema_comes_from_signature_and_docstring():
    schema = lk.tool_schema(lk.search_by_entity)["function"]
    assert schema["name"] == "search_by_entity"
    props = schema["parameters"]["properties"]
    assert props["company"]["enum"] == list(lk.COMPANIES)
    assert props["tone"]["enum"] == ["negative", "neutral", "positive"]
    assert schema["parameters"]["required"] == []
    assert all(p["description"] for p in props.values()), "Args: descriptions reach the model"
    assert "Taught in" not in schema["description"], "only the summary line goes to the model"
    metrics = lk.tool_schema(lk.get_metrics)["function"]["parameters"]
    assert metrics["required"] == ["topic"] and metrics["properties"]["topic"]["enum"] == list(lk.TOPICS)
    assert "conn" not in metrics["properties"]


def test_get_metrics_counts_in_sql(conn):
    expected = sum(1 for doc in load_corpus() if doc.topic == "sport")
    result = lk.call_tool("get_metrics", {"topic": "sport"}, conn=conn)
    assert result.ok and result.data == {"topic": "sport", "count": expected}
    assert str(expected) in result.content


def test_search_by_entity_filters_in_sql(conn):
    corpus = load_corpus()
    want = [d.id for d in corpus if d.company == "ЦБ" and d.tone == "negative"][:5]
    result = lk.call_tool("search_by_entity", {"company": "ЦБ", "tone": "negative"}, conn=conn)
    assert result.ok and [row["id"] for row in result.data] == want
    only_tone = lk.search_by_entity(conn, tone="positive")
    assert [row["id"] for row in only_tone] == [d.id for d in corpus if d.tone == "positive"][:5]


def test_search_articles_returns_top3_with_ids_and_text(conn):
    result = lk.call_tool("search_articles", {"query": "цена золота"}, conn=conn)
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
def test_invented_arguments_give_a_message_not_an_exception(conn, name, arguments, needle):
    result = lk.call_tool(name, arguments, conn=conn)
    assert not result.ok and result.data is None
    assert needle in result.content and result.content.startswith("Ошибка")
    assert conn.execute("SELECT count(*) FROM news").fetchone()[0] == len(load_corpus()), "table intact"


def test_json_string_arguments_and_case_are_accepted(conn):
    result = lk.call_tool("get_metrics", '{"topic": " Sport "}', conn=conn)
    assert result.ok and result.arguments == {"topic": "sport"}


def test_tool_outside_the_agents_list_is_unknown(conn):
    result = lk.call_tool("search_by_entity", {"company": "ЦБ"}, conn=conn, tools=lk.DEFAULT_TOOLS)
    assert not result.ok and "search_articles, get_metrics" in result.content


def test_sql_looking_query_is_just_text(conn):
    result = lk.call_tool("search_articles", {"query": "золото'); DROP TABLE news; --"}, conn=conn)
    assert result.ok
    assert conn.execute("SELECT count(*) FROM news").fetchone()[0] == len(load_corpus())


def test_database_failure_becomes_a_message(settings):
    broken = lk.connect(settings)
    broken.close()
    result = lk.call_tool("get_metrics", {"topic": "sport"}, conn=broken)
    assert not result.ok and "не выполнился" in result.content
