"""The SQL agent's pure parts: SQL out of a reply, one SELECT only, answers from rows, result comparison (no service)."""

from __future__ import annotations

import datetime
import json
from decimal import Decimal

import pytest

from labkit.agent.sql.answer import format_rows, format_value
from labkit.agent.sql.check import SqlRefused, check_select, extract_sql, words
from labkit.core.corpus import DataError
from labkit.evaluation.sql_accuracy import SqlQuestion, load_sql_questions, same_result, same_value
from labkit.evaluation.supervisor_questions import SupervisorQuestion, load_supervisor_questions

# --- what the model wrote ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "sql"),
    [
        ("```sql\nSELECT count(*) FROM orders;\n```", "SELECT count(*) FROM orders;"),
        ("Вот запрос:\n```sql\nSELECT 1\n```\nОн считает.", "SELECT 1"),
        ("```\nWITH t AS (SELECT 1) SELECT * FROM t\n```", "WITH t AS (SELECT 1) SELECT * FROM t"),
        ("SELECT city FROM orders", "SELECT city FROM orders"),
        ("Запрос:\nselect 2", "select 2"),
        ("```sql\nSELECT 3", "SELECT 3"),  # cut at the token limit: the fence never closed
        ("Я не могу удалить данные.", ""),
    ],
)
def test_the_sql_is_taken_out_of_the_reply(reply, sql):
    assert extract_sql(reply) == sql


@pytest.mark.parametrize(
    "query",
    [
        "SELECT count(*) FROM orders",
        "select 1;",
        "SELECT 1 ;  ",
        "WITH t AS (SELECT id FROM orders) SELECT count(*) FROM t",
        "SELECT 'drop table; delete' AS note",
        'SELECT 1 AS "insert; into"',
        "SELECT 1 -- ; DELETE FROM orders\n",
        "SELECT /* DROP TABLE /* nested */ orders; */ 1",
        "SELECT $$; DELETE FROM x$$, $tag$ ; $tag$",
        "SELECT E'it\\'s; fine'",
        "SELECT 'it''s; fine'",
        "SELECT set_config('x.y', 'z', true)",  # a function name, not SET
        "(SELECT 1)",
    ],
)
def test_one_select_passes(query):
    assert check_select(query) == query.strip().rstrip(";").rstrip()


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "нет SQL-запроса"),
        ("SELECT 1; SELECT 2", "несколько SQL-команд"),
        ("SELECT 1; DROP TABLE orders", "несколько SQL-команд"),
        ("DELETE FROM orders", "начинается с DELETE"),
        ("DROP TABLE orders", "начинается с DROP"),
        ("UPDATE orders SET status = 'x'", "начинается с UPDATE"),
        ("EXPLAIN ANALYZE SELECT 1", "начинается с EXPLAIN"),
        ("WITH d AS (DELETE FROM orders RETURNING *) SELECT * FROM d", "не может содержать DELETE"),
        ("SELECT * INTO stolen FROM orders", "не может содержать INTO"),
        ("SELECT * FROM orders FOR UPDATE", "не может содержать UPDATE"),
        ("SELECT 'unclosed", "незакрытая кавычка"),
        ("SELECT 1 /* open", "незакрытый комментарий"),
        ("SELECT $a$ never closed", "незакрытая строка $a$"),
    ],
)
def test_anything_but_one_select_is_refused_with_a_reason_for_the_model(query, message):
    with pytest.raises(SqlRefused) as refused:
        check_select(query)
    assert message in str(refused.value)


def test_words_skip_strings_names_and_comments():
    found, statements = words("SELECT a, 'x; y' AS \"delete\" FROM t -- drop\n/* update */;")
    assert found == ["select", "a", "as", "from", "t"] and statements == 1


# --- the answer --------------------------------------------------------------------------------------------

def test_values_are_written_for_a_russian_reader():
    assert format_value(Decimal("41637290.00")) == "41\u00a0637\u00a0290"
    assert format_value(Decimal("559.9105812")) == "559,91"
    assert format_value(1600) == "1600" and format_value(-12345.5) == "-12\u00a0345,5"
    assert format_value(datetime.date(2026, 9, 15)) == "15.09.2026"
    assert format_value(None) == "—" and format_value(True) == "да"


def test_an_answer_says_one_value_shows_a_table_and_counts_what_it_cuts():
    assert format_rows(["count"], [(1600,)]) == "Ответ по данным магазина: 1600."
    assert "ни одной строки" in format_rows(["city"], [])
    table = format_rows(["city", "n"], [(f"город {i}", i) for i in range(12)])
    assert "| city | n |" in table and "| город 9 | 9 |" in table and "город 10" not in table
    assert "Показаны первые 10 строк из 12." in table
    assert "больше 50" in format_rows(["n"], [(i,) for i in range(50)], truncated=True)


# --- comparing results ------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("got", "gold", "same"),
    [
        (1600, 1600, True),
        (Decimal("1600.00"), 1600, True),
        (1599, 1600, False),
        (Decimal("559.91"), Decimal("559.9105812"), True),
        (Decimal("560"), Decimal("559.9105812"), True),  # rounded to whole roubles
        (Decimal("559.9"), Decimal("559.9105812"), True),
        (Decimal("561"), Decimal("559.9105812"), False),
        (559.9105812220566, Decimal("559.9105812220566319"), True),
        (Decimal("1601"), Decimal("1600.4"), False),
        (datetime.datetime(2025, 1, 1), datetime.date(2025, 1, 1), True),
        (datetime.date(2025, 1, 2), datetime.date(2025, 1, 1), False),
        ("Москва", "Москва", True),
        ("москва", "Москва", False),
        (None, None, True),
        ("1600", 1600, False),
    ],
)
def test_a_cell_matches_the_gold_cell(got, gold, same):
    assert same_value(got, gold) is same


def test_a_result_matches_in_any_row_order_with_extra_columns_but_not_with_missing_ones():
    gold = [("Москва", 718), ("Санкт-Петербург", 316)]
    assert same_result(gold, [(316, "Санкт-Петербург", 2), (718, "Москва", 1)])
    assert same_result(gold, [(718, "Москва"), (316, "Санкт-Петербург")], ordered=True)
    assert not same_result(gold, [("Санкт-Петербург", 316), ("Москва", 718)], ordered=True)
    assert not same_result(gold, [("Москва",), ("Санкт-Петербург",)])
    assert not same_result(gold, [("Москва", 718)])
    assert not same_result(gold, [("Москва", 718), ("Санкт-Петербург", 316), ("Казань", 109)])
    assert same_result([], [], gold_columns=1)


def test_the_shops_questions_are_labelled_and_split():
    questions = load_sql_questions()
    assert len(questions) >= 40 and {q.kind for q in questions} == {"data"}
    tune, report = load_sql_questions(split="tune"), load_sql_questions(split="report")
    assert len(tune) + len(report) == len(questions) and abs(len(tune) - len(report)) <= 2
    assert len({q.id for q in questions}) == len(questions)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"id": "a", "question": "q", "split": "tune"}, "field 'gold_sql' must be a non-empty string"),
        ({"id": "a", "question": "q", "split": "dev", "gold_sql": "SELECT 1"}, "field 'split' must be one of"),
        ({"id": "a", "question": "q", "split": "tune", "gold_sql": "DELETE FROM orders"}, "gold_sql is not one SELECT"),
        ({"id": "a", "question": "q", "split": "tune", "gold_sql": "SELECT 1", "ordered": "да"}, "'ordered' must be"),
    ],
)
def test_a_bad_question_record_names_its_line(tmp_path, record, message):
    path = tmp_path / "questions.jsonl"
    path.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as refused:
        load_sql_questions(path)
    assert message in str(refused.value) and f"{path}:1" in str(refused.value)


def test_a_repeated_question_id_is_refused(tmp_path):
    record = json.dumps({"id": "a", "question": "q", "split": "tune", "gold_sql": "SELECT 1"})
    path = tmp_path / "questions.jsonl"
    path.write_text(record + "\n" + record + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=":2: duplicate id 'a'"):
        load_sql_questions(path)


@pytest.mark.parametrize(
    ("query", "writes"),
    [
        ("DELETE FROM orders", True),
        ("DROP TABLE orders", True),
        ("SELECT 1; DROP TABLE orders", True),
        ("WITH d AS (DELETE FROM orders RETURNING *) SELECT * FROM d", True),
        ("SELECT * INTO stolen FROM orders", True),
        ("SELECT * FROM orders FOR UPDATE", False),  # a row lock: a read gone wrong, worth a retry
        ("SELECT 1; SELECT 2", False),
        ("EXPLAIN SELECT 1", False),
        ("", False),
    ],
)
def test_a_refusal_says_whether_the_sql_would_change_data(query, writes):
    with pytest.raises(SqlRefused) as refused:
        check_select(query)
    assert refused.value.writes is writes


def test_each_failed_attempt_is_replayed_in_the_next_prompt_so_it_grows():
    from labkit.agent.sql.graph import sql_messages

    first = sql_messages("CREATE TABLE orders (id integer);", "Сколько заказов?")
    assert [m["role"] for m in first] == ["system", "user"] and "CREATE TABLE orders" in first[0]["content"]
    assert first[1]["content"] == "Вопрос: Сколько заказов?"
    failed = {"sql": "SELECT count(*) FROM users_data", "ok": False, "source": "Ошибка PostgreSQL",
              "error": 'ERROR:  relation "users_data" does not exist'}
    second = sql_messages("CREATE TABLE orders (id integer);", "Сколько заказов?", [failed])
    hinted = {**failed, "sql": "SELECT 1/0", "hint": "Столбец x есть только в таблице orders."}
    third = sql_messages("CREATE TABLE orders (id integer);", "Сколько заказов?", [failed, hinted])
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert "SELECT count(*) FROM users_data" in second[2]["content"] and "users_data\" does not exist" in second[3]["content"]
    assert [m["role"] for m in third][-2:] == ["assistant", "user"] and len(third) == 6
    assert "Подсказка по схеме: Столбец x есть только в таблице orders." in third[5]["content"]
    assert "Подсказка" not in second[3]["content"], "no hint, no hint line"
    assert second[0] == first[0], "the system prompt with the schema stays the same (the server's prompt cache reuses it)"


VALUES = {"city": {"Пермь", "Москва"}, "name": {"Наушники ТехноЗвук Buds 3"}, "kind": {"недостаток"},
          "status": {"одобрен", "выполнен"}}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("SELECT count(*) FROM orders WHERE city = 'Перми'", [("city", "Перми", ("Пермь",), ())]),
        ("SELECT 1 FROM orders AS o WHERE o.city <> 'Сочи'", [("city", "Сочи", (), ())]),
        ("SELECT 1 FROM p WHERE name IN ('ТехноЗвук Buds 3', 'Наушники ТехноЗвук Buds 3')",
         [("name", "ТехноЗвук Buds 3", ("Наушники ТехноЗвук Buds 3",), ())]),
        ("SELECT 1 FROM returns WHERE kind = 'одобрен'", [("kind", "одобрен", (), ("status",))]),
        ("SELECT 1 FROM orders WHERE city = 'Пермь' AND status != 'выполнен'", []),
        ("SELECT 1 FROM orders WHERE ordered_on >= '2025-01-01' AND note = 'что угодно'", []),  # no list: not checked
        ("SELECT 1 FROM orders WHERE city = 'O''Hare'", [("city", "O'Hare", (), ())]),
    ],
)
def test_a_text_literal_no_row_holds_is_found_with_the_values_like_it(query, expected):
    from labkit.agent.sql.hints import unknown_values

    assert [tuple(u) for u in unknown_values(query, VALUES)] == expected


def test_the_refusal_says_the_condition_to_write_instead():
    from labkit.agent.sql.hints import unknown_values, value_message

    said = value_message(unknown_values("SELECT 1 WHERE city = 'Перми' AND kind = 'одобрен' AND city = 'Сочи'", VALUES))
    assert "Напиши city = 'Пермь'." in said and "Напиши status = 'одобрен'." in said
    assert "условие city = 'Сочи' не совпадёт ни с одной строкой. Возьми значение из комментария" in said


@pytest.mark.parametrize(
    ("query", "question", "expected"),
    [
        ("SELECT count(*) FROM returns AS r JOIN order_items AS i ON i.id = r.order_item_id JOIN products AS p "
         "ON p.id = i.product_id WHERE p.category = 'наушники' AND r.status = 'отклонён' AND r.reason = 'недостаток'",
         "Сколько возвратов товара с недостатком магазин отклонил?", [("category", "наушники")]),
        ("SELECT count(*) FROM orders WHERE city = 'Казань' AND delivery = 'курьер'",
         "Сколько заказов доставили курьером в Казани?", []),
        ("SELECT 1 FROM orders WHERE delivery IN ('курьер', 'самовывоз')", "Сколько заказов получено курьером?",
         [("delivery", "самовывоз")]),
        ("SELECT price FROM products WHERE name = 'ТехноВид 43F5'", "Какая цена у телевизора 43F5?", []),
        ("SELECT 1 FROM orders WHERE ordered_on = '2025-03-01' AND status = 'отменён'", "Сколько заказов отменили 1 марта?", []),
        ("SELECT 1 FROM orders WHERE city = 'Пермь'", "Сколько заказов из Перми?", []),
        ("SELECT 1 FROM orders WHERE city = 'Пермь'", "Сколько заказов из Петербурга?", [("city", "Пермь")]),
    ],
)
def test_a_condition_the_question_never_asked_for_is_found(query, question, expected):
    from labkit.agent.sql.hints import unasked_values

    assert unasked_values(query, question) == expected


def _gold_questions() -> list[SqlQuestion | SupervisorQuestion]:
    """Every labelled question of the shop's and the supervisor's sets that has a gold query (their own loaders)."""
    return [q for q in [*load_sql_questions(), *load_supervisor_questions()] if q.gold_sql]


def test_no_labelled_questions_gold_sql_has_a_condition_the_question_never_asked_for():
    from labkit.agent.sql.hints import unasked_values

    golds = _gold_questions()
    assert len(golds) > 50
    flagged = {q.id: unasked_values(q.gold_sql, q.question) for q in golds}
    assert {key: found for key, found in flagged.items() if found} == {}


@pytest.mark.parametrize(
    ("query", "question", "expected"),
    [
        ("SELECT count(*) FROM order_items AS i JOIN products AS p ON p.id = i.product_id WHERE p.category = 'ноутбуки'",
         "Сколько заказов содержат ноутбуки?", "i"),
        ("SELECT count(o.id) FROM orders o JOIN order_items it ON it.order_id = o.id", "Сколько оплаченных заказов с ноутбуками?",
         "it"),
        ("SELECT count(*) FROM orders JOIN order_items ON order_items.order_id = orders.id", "Сколько заказов с ноутбуками?",
         "order_items"),
        ("SELECT count(DISTINCT i.order_id) FROM order_items AS i", "Сколько заказов содержат ноутбуки?", ""),
        ("SELECT count(*) FROM order_items AS i", "Сколько строк заказов с пылесосами?", ""),  # rows asked for
        ("SELECT count(*) FROM orders WHERE city = 'Пермь'", "Сколько заказов из Перми?", ""),  # no items joined
        ("SELECT sum(i.quantity) FROM order_items AS i", "Сколько штук ноутбуков продано?", ""),  # not orders
        ("SELECT count(*) FROM orders WHERE id IN (SELECT order_id FROM order_items i)", "Сколько заказов с ноутбуками?",
         ""),  # the subquery keeps one row per order
    ],
)
def test_a_count_of_item_rows_where_the_question_counts_orders_is_found(query, question, expected):
    from labkit.agent.sql.hints import count_orders, miscount_message, miscounted_orders

    assert miscounted_orders(query, question) == expected
    if expected:
        assert f"count(DISTINCT {expected}.order_id)" in miscount_message(expected)
        assert count_orders(query, expected).startswith(f"SELECT count(DISTINCT {expected}.order_id) FROM ")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("SELECT count(*) FROM order_items AS i JOIN products AS p ON p.id = i.product_id WHERE p.category = 'ноутбуки'",
         "SELECT count(DISTINCT i.order_id) FROM order_items AS i JOIN products AS p ON p.id = i.product_id "
         "WHERE p.category = 'ноутбуки'"),
        ("SELECT p.category, count(i.id) FROM order_items i JOIN products p ON p.id = i.product_id GROUP BY 1",
         "SELECT p.category, count(DISTINCT i.order_id) FROM order_items i JOIN products p ON p.id = i.product_id GROUP BY 1"),
        ("SELECT count(*), count(*) FROM order_items i", ""),  # two counts: refused with the message instead
        ("SELECT count(coalesce(i.x, 1)) FROM order_items i", ""),  # not a plain count
    ],
)
def test_the_check_writes_the_count_of_orders_itself_when_the_query_counts_once(query, expected):
    from labkit.agent.sql.hints import count_orders

    assert count_orders(query, "i") == expected


def test_no_labelled_questions_gold_sql_counts_item_rows_for_orders():
    from labkit.agent.sql.hints import miscounted_orders

    golds = _gold_questions()
    assert len(golds) > 50 and any("order_items" in q.gold_sql and "заказ" in q.question for q in golds)
    assert {q.id: q.gold_sql for q in golds if miscounted_orders(q.gold_sql, q.question)} == {}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("SELECT count(*) FROM r JOIN p ON p.id = r.pid WHERE p.category = 'наушники' AND r.status = 'отклонён'",
         "SELECT count(*) FROM r JOIN p ON p.id = r.pid WHERE r.status = 'отклонён'"),
        ("SELECT count(*) FROM o WHERE city = 'Пермь' AND category = 'наушники' GROUP BY 1",
         "SELECT count(*) FROM o WHERE city = 'Пермь' GROUP BY 1"),
        ("SELECT count(*) FROM o WHERE p.category = 'наушники'", "SELECT count(*) FROM o"),
        ("SELECT count(*) FROM o WHERE p.category = 'наушники' ORDER BY 1", "SELECT count(*) FROM o ORDER BY 1"),
        ("SELECT count(*) FROM o WHERE city = 'Пермь' OR p.category = 'наушники'", ""),  # OR: not cut
        ("SELECT count(*) FROM o WHERE p.category = 'наушники' OR city = 'Пермь'", ""),
        ("SELECT count(*) FROM o WHERE p.category IN ('наушники')", ""),
    ],
)
def test_an_unasked_condition_is_cut_out_of_the_where_or_left_to_the_model(query, expected):
    from labkit.agent.sql.hints import without_conditions

    assert without_conditions(query, [("category", "наушники")]) == expected


def test_the_unasked_refusal_gives_the_query_to_write_or_says_what_to_drop():
    from labkit.agent.sql.hints import unasked_message

    said = unasked_message("SELECT 1 FROM o WHERE city = 'Пермь' AND category = 'наушники'", [("category", "наушники")])
    assert said == ("В вопросе нет условия category = 'наушники'. Напиши запрос без него:\n"
                    "```sql\nSELECT 1 FROM o WHERE city = 'Пермь'\n```")
    said = unasked_message("SELECT 1 FROM o WHERE category IN ('наушники')", [("category", "наушники")])
    assert said == "В вопросе нет условия category = 'наушники'. Убери его из WHERE."


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ('ERROR:  column "payment" does not exist\nLINE 1: ...', "Столбец payment есть только в таблице orders"),
        ("ERROR:  column r.product_id does not exist", "Столбец product_id есть только в таблице order_items"),
        ('ERROR:  column "status" does not exist', "Столбец status есть только в таблицах orders, returns"),
        ('ERROR:  column "users" does not exist', "Столбца users нет ни в одной таблице"),
        ("ERROR:  function pg_catalog.extract(unknown, integer) does not exist", "уже целое число дней"),
        ('ERROR:  relation "sales" does not exist', ""),
    ],
)
def test_a_postgres_error_gets_the_catalogs_hint(error, expected):
    from labkit.agent.sql.hints import column_hint

    tables = {"payment": ["orders"], "product_id": ["order_items"], "status": ["orders", "returns"]}
    hint = column_hint(error, tables)
    assert (expected in hint) if expected else hint == ""
