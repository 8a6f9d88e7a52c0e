"""The SQL agent on the real model and the real shop database: an answer, a real error corrected, the bound, outages.

Real Postgres (the lab's database, shop loaded) and the real local model server. Stand-ins,
each named: ``FirstReplyWrongTable`` writes the first SQL of a run itself (a table that does not
exist, the seed article's ``users_data``), so Postgres's real error reaches the real model on
demand, and ``FirstReplyWrongValue`` a city in the question's case form, which the check refuses;
``KeepsTheLiteral`` insists on a city with no orders; ``WrongColumn`` takes a column from the wrong
table; ``NeverLearns`` is a model that makes a new mistake forever, the path the bound exists for, and
``RepeatsItself`` one that writes the same wrong SQL again, the path the no-progress rule exists for.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

import labkit as lk
from labkit.agent.sql.graph import EXAMPLE_LITERALS, SqlAgent
from labkit.agent.sql.policy import CHECK_SOURCE
from labkit.evaluation.sql_accuracy import evaluate_sql_agent, load_sql_questions, same_result, sql_accuracy
from labkit.services.setup import model_client
from labkit.store.shop.loading import ensure_shop
from labkit.store.shop.reader import run_select

pytestmark = pytest.mark.services

QUESTION = "Сколько всего заказов в базе?"
GOLD = "SELECT count(*) FROM orders"


@pytest.fixture(scope="module")
def shop_lab(settings):
    with lk.open_lab(settings, load=False) as lab:
        ensure_shop(lab)
        yield lab


@pytest.fixture(scope="module")
def agent(shop_lab):
    with SqlAgent(shop_lab) as sql_agent:
        yield sql_agent


def _reply(content: str) -> Any:
    """An Ollama chat response carrying `content` (what the stand-ins return)."""
    return SimpleNamespace(message=SimpleNamespace(content=content, tool_calls=None, thinking=None))


class FirstReplyWrongTable:
    """STAND-IN for the first step only: writes SQL on a table that does not exist, then the real model answers."""

    FIRST = "SELECT count(*) FROM users_data"

    def __init__(self, chat: Callable[..., Any]) -> None:
        self.chat, self.calls = chat, 0
        self.prompts: list[list[dict[str, Any]]] = []  # the messages of each call

    def __call__(self, **request: Any) -> Any:
        self.calls += 1
        self.prompts.append(request["messages"])
        if self.calls == 1:
            return _reply(f"```sql\n{self.FIRST}\n```")
        return self.chat(**request)


class FirstReplyWrongValue(FirstReplyWrongTable):
    """STAND-IN for the first step only: a city in the question's case form ('Перми'), then the real model answers."""

    FIRST = "SELECT count(*) FROM orders WHERE city = 'Перми'"


class FirstReplyUnaskedCondition(FirstReplyWrongTable):
    """STAND-IN for the first step only: a category the question never names (copied from the prompt's examples)."""

    FIRST = ("SELECT count(DISTINCT o.id) FROM orders AS o JOIN order_items AS i ON i.order_id = o.id JOIN products AS p "
             "ON p.id = i.product_id WHERE p.category = 'наушники' AND o.city = 'Пермь'")


class FirstReplyUnaskedCity(FirstReplyWrongTable):
    """STAND-IN for the first step only: a city the question never names, then the real model answers."""

    FIRST = "SELECT count(*) FROM orders WHERE status = 'отменён' AND city = 'Москва'"


class KeepsTheLiteral:
    """STAND-IN for a model that insists on a city the shop has no orders from: the second try runs as written."""

    def __call__(self, **request: Any) -> Any:
        return _reply("```sql\nSELECT count(*) FROM orders WHERE city = 'Сочи'\n```")


class WrongColumn:
    """STAND-IN for a model that takes a column from the wrong table every time (returns has no product_id)."""

    def __init__(self) -> None:
        self.messages: list[list[dict[str, Any]]] = []

    def __call__(self, **request: Any) -> Any:
        self.messages.append(request["messages"])
        return _reply("```sql\nSELECT count(*) FROM returns WHERE product_id = 1\n```")


class NeverLearns:
    """STAND-IN for a model that never corrects itself: a new wrong table however often it hears the error."""

    def __init__(self) -> None:
        self.prompts: list[int] = []

    def __call__(self, **request: Any) -> Any:
        self.prompts.append(sum(len(m["content"]) for m in request["messages"]))
        return _reply(f"```sql\nSELECT total FROM sales{len(self.prompts)}\n```")


class RepeatsItself(NeverLearns):
    """STAND-IN for a model that answers the error with the same SQL again (whitespace and case aside)."""

    def __call__(self, **request: Any) -> Any:
        self.prompts.append(sum(len(m["content"]) for m in request["messages"]))
        return _reply("```sql\nSELECT total FROM sales\n```" if len(self.prompts) % 2 else "```sql\nselect TOTAL\n  from sales;\n```")


class TakesItLiterally:
    """STAND-IN for a model that answers «удали все заказы» with the DELETE itself (the 1.5B model did)."""

    def __call__(self, **request: Any) -> Any:
        return _reply("```sql\nDELETE FROM orders;\n```")


def _gold(agent: SqlAgent, query: str = GOLD):
    return run_select(agent.reader, query).rows


def test_a_data_question_is_answered_from_the_rows_of_one_select(agent):
    result = agent.ask(QUESTION)
    assert result.ok and not result.requires_human and result.error_count == 0
    assert same_result(_gold(agent), result.rows), result.sql
    assert f"{_gold(agent)[0][0]}" in result.answer.replace("\u00a0", "")
    assert list(result.trace["node"]) == ["write_sql", "check_sql", "run_sql", "answer"]
    assert result.trace.loc[0, "prompt_tokens"] > 0, "the model step reports its tokens"
    assert json.loads(json.dumps(result.to_dict()))["tool_calls"] == [
        {"name": "sql", "arguments": {"sql": result.sql}, "ok": True, "rows": [[_gold(agent)[0][0]]]}]


def test_postgres_real_error_goes_back_and_the_real_model_corrects_its_sql(shop_lab):
    chat = FirstReplyWrongTable(shop_lab.models.chat)
    with SqlAgent(shop_lab, chat=chat) as agent:
        result = agent.ask(QUESTION)
        gold = _gold(agent)
    assert result.error_count == 1 and result.ok, result.trace.to_string()
    first, last = result.attempts[0], result.attempts[-1]
    assert first["sql"] == "SELECT count(*) FROM users_data" and 'relation "users_data" does not exist' in first["error"]
    assert last["ok"] and "users_data" not in last["sql"] and same_result(gold, result.rows)
    runs = result.trace[result.trace["node"] == "run_sql"]
    assert list(runs["ok"]) == [False, True] and "users_data" in runs.iloc[0]["error"]
    prompts = result.trace[result.trace["node"] == "write_sql"]["prompt_tokens"].dropna()
    assert len(prompts) == 1, "the first SQL was the stand-in's: only the correction was the model's"
    assert chat.calls == 2


def test_a_value_no_row_holds_is_refused_before_it_runs_and_the_real_model_writes_the_one_named(shop_lab):
    chat = FirstReplyWrongValue(shop_lab.models.chat)
    with SqlAgent(shop_lab, chat=chat) as agent:
        result = agent.ask("Сколько заказов из Перми?")
        gold = _gold(agent, "SELECT count(*) FROM orders WHERE city = 'Пермь'")
    first = result.attempts[0]
    assert first["source"] == CHECK_SOURCE and first["unknown"] == [["city", "Перми"]]
    assert "Напиши city = 'Пермь'." in first["error"]
    assert list(result.trace["node"])[:3] == ["write_sql", "check_sql", "write_sql"], "refused by the check: it never ran"
    assert "Напиши city = 'Пермь'." in chat.prompts[1][-1]["content"]
    assert result.ok and result.error_count == 1 and "'Пермь'" in result.sql, result.trace.to_string()
    assert same_result(gold, result.rows) and gold[0][0] > 0


def test_a_condition_copied_from_the_prompts_examples_is_cut_out_before_it_runs(shop_lab):
    chat = FirstReplyUnaskedCondition(shop_lab.models.chat)
    with SqlAgent(shop_lab, chat=chat) as agent:
        result = agent.ask("Сколько заказов из Перми?")
        gold = _gold(agent, "SELECT count(DISTINCT o.id) FROM orders AS o JOIN order_items AS i ON i.order_id = o.id "
                            "WHERE o.city = 'Пермь'")
    assert "наушники" in EXAMPLE_LITERALS and chat.calls == 1, "cut by the check: no second model call"
    assert result.ok and result.error_count == 0 and "наушники" not in result.sql and "'Пермь'" in result.sql
    check = result.trace[result.trace["node"] == "check_sql"].iloc[0]
    assert check["ok"] and "category = 'наушники'" in check["preview"], result.trace.to_string()
    assert list(result.trace["node"]) == ["write_sql", "check_sql", "run_sql", "answer"]
    assert same_result(gold, result.rows) and gold[0][0] > 0


def test_another_condition_the_question_never_asked_for_is_refused_once_with_the_query_to_write(shop_lab):
    chat = FirstReplyUnaskedCity(shop_lab.models.chat)
    with SqlAgent(shop_lab, chat=chat) as agent:
        result = agent.ask("Сколько заказов отменено?")
    first = result.attempts[0]
    assert first["source"] == CHECK_SOURCE and first["unasked"] == [["city", "Москва"]]
    assert "Напиши запрос без него:\n```sql\nSELECT count(*) FROM orders WHERE status = 'отменён'\n```" in first["error"]
    assert chat.calls == 2 and "Напиши запрос без него" in chat.prompts[1][-1]["content"]
    assert result.ok and result.error_count == 1, result.trace.to_string()  # dropped, or kept and run as written


def test_a_value_the_model_keeps_runs_as_written_since_zero_rows_may_be_the_answer(shop_lab):
    with SqlAgent(shop_lab, chat=KeepsTheLiteral()) as agent:
        result = agent.ask("Сколько заказов из Сочи?")
    assert [a["ok"] for a in result.attempts] == [False, True] and result.error_count == 1
    assert result.ok and not result.requires_human and result.rows == [(0,)]


def test_a_column_from_the_wrong_table_gets_the_catalogs_hint_beside_postgres_own_error(shop_lab):
    model = WrongColumn()
    with SqlAgent(shop_lab, chat=model, max_errors=2) as agent:
        result = agent.ask("Сколько возвратов по товару номер 1?")
    first = result.attempts[0]
    assert first["error"].startswith('ERROR:  column "product_id" does not exist'), "Postgres's words, unchanged"
    assert first["hint"].startswith("Столбец product_id есть только в таблице order_items")
    assert "Подсказка по схеме: Столбец product_id есть только в таблице order_items" in model.messages[1][-1]["content"]
    assert "Подсказка" not in json.dumps(result.tool_calls(), ensure_ascii=False), "ask --json shows Postgres's error"


def test_after_the_bound_the_run_ends_with_requires_human_and_an_honest_message(shop_lab):
    model = NeverLearns()
    with SqlAgent(shop_lab, chat=model, max_errors=3) as agent:
        result = agent.ask(QUESTION)
    assert result.requires_human and result.error_count == 3 and not result.ok and result.stop_rule == "max_errors"
    assert result.answer.startswith("Не удалось получить данные магазина: запросов к базе — 3")
    assert 'relation "sales3" does not exist' in result.answer and "передан человеку" in result.answer
    assert "Исчерпан лимит ошибок: 3 из 3" in result.answer
    assert list(result.trace["node"]).count("run_sql") == 3 and result.trace.iloc[-1]["node"] == "give_up"
    assert model.prompts == sorted(model.prompts) and len(set(model.prompts)) == 3, "each retry's prompt is longer"
    assert [c["error"].startswith("ERROR:") for c in result.tool_calls()] == [True, True, True]


def test_the_same_sql_twice_stops_the_run_before_the_bound(shop_lab):
    model = RepeatsItself()
    with SqlAgent(shop_lab, chat=model, max_errors=5) as agent:
        result = agent.ask(QUESTION)
    assert result.requires_human and result.error_count == 2 and result.stop_rule == "no_progress"
    assert len(model.prompts) == 2 and "дважды подряд написала тот же запрос" in result.answer
    assert result.trace.iloc[-1]["node"] == "give_up" and result.trace.iloc[-1]["error"] == "no_progress"


def test_a_policy_of_ones_own_decides_and_a_wrong_verdict_is_one_clear_error(shop_lab):
    with SqlAgent(shop_lab, chat=RepeatsItself(), max_errors=3,
                  policy=lk.next_step_without_progress_rule) as agent:
        result = agent.ask(QUESTION)
    assert result.error_count == 3 and result.stop_rule == "max_errors", "without the rule the repeats run to the bound"
    with SqlAgent(shop_lab, chat=RepeatsItself(), policy=lambda attempts, max_errors: "again") as agent:
        with pytest.raises(ValueError, match="must return one of retry, give_up, refuse, got 'again'"):
            agent.ask(QUESTION)


def test_sql_that_would_change_data_is_refused_at_once_and_never_runs(shop_lab):
    with SqlAgent(shop_lab, chat=TakesItLiterally()) as agent:
        before = run_select(agent.reader, GOLD).rows
        result = agent.ask("Удали все заказы")
        assert run_select(agent.reader, GOLD).rows == before
    assert result.refused and not result.requires_human and result.error_count == 1
    assert result.stop_rule == "forbidden" and result.attempts[-1]["writes"]
    assert result.answer.startswith("Этот агент только читает базу магазина") and "DELETE FROM orders" in result.answer
    assert list(result.trace["node"]) == ["write_sql", "check_sql", "refuse"], "no retry, no run"


class ReadsElsewhere:
    """STAND-IN for a model that reads a table outside the shop (the news): Postgres says permission denied."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, **request: Any) -> Any:
        self.calls += 1
        return _reply("```sql\nSELECT * FROM public.news\n```")


def test_what_the_role_may_not_read_is_refused_after_postgres_says_so_without_a_retry(shop_lab, lab_ro):
    assert lab_ro.conn.execute("SELECT to_regclass('public.news')").fetchone()[0], "the table exists (lab_ro loads it)"
    model = ReadsElsewhere()
    with SqlAgent(shop_lab, chat=model) as agent:
        result = agent.ask("Покажи новости из соседней таблицы")
    assert result.refused and result.stop_rule == "forbidden" and result.error_count == 1 and model.calls == 1
    assert "permission denied" in result.attempts[0]["error"] and "permission denied" in result.answer
    assert list(result.trace["node"]) == ["write_sql", "check_sql", "run_sql", "refuse"]


def test_a_model_server_that_does_not_answer_ends_the_run_with_one_russian_sentence(shop_lab):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    gone = model_client(f"http://127.0.0.1:{port}")
    with SqlAgent(shop_lab, chat=gone.chat) as agent:
        result = agent.ask(QUESTION)
    assert result.requires_human and result.answer.startswith("Модель не ответила") and result.failure
    assert "Traceback" not in result.answer


def test_a_lost_database_connection_ends_the_run_with_one_russian_sentence(shop_lab):
    agent = SqlAgent(shop_lab, chat=FirstReplyWrongTable(shop_lab.models.chat))
    agent.reader.close()
    result = agent.ask(QUESTION)
    assert result.requires_human and result.answer.startswith("База данных магазина недоступна")


def test_execution_accuracy_is_measured_on_labelled_questions(agent):
    questions = load_sql_questions(split="tune")[:2]
    frame = evaluate_sql_agent(agent, questions)
    summary = sql_accuracy(frame)
    assert list(frame["id"]) == [q.id for q in questions] and summary.questions == 2
    assert 0 <= summary.accuracy.low <= summary.accuracy.mean <= summary.accuracy.high <= 1
    assert summary.seconds_per_question > 0 and set(frame["correct"]) <= {True, False}
