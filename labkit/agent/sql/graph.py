"""The SQL agent as a LangGraph graph: write SQL -> check -> run under the reader; errors go back, bounded.

Taught in 19_sql_agent. One question is one run of the graph::

    write_sql -> check_sql -> run_sql -> answer
        ^           |            |
        +-- retry --+------------+      (after a failure the policy decides: ``policy.next_step``)
                    +-- give_up -+      (max_errors failures, or the same SQL twice: requires_human)
                    +-- refuse --+      (the SQL would change data, or the role may not: no retry helps)

The model sees the shop's schema with its comments (``describe_schema``, through the reader's own
connection) and writes one SELECT. The check also refuses, once, a text value its column never holds
(``hints.unknown_values``: ``city = 'Перми'`` would count 0 without an error) and a condition the question
never asked for (``hints.unasked_values``); a condition of that kind on a value of the prompt's worked examples
(``p.category = 'наушники'`` in a question about every product's returns) was copied from them, and the check
cuts it out of the WHERE itself (the trace says so), as the 1.5B model wrote it again when asked to; and a count of
rows where the question counts orders (``hints.miscounted_orders``: ``count(*)`` over ``order_items`` for «Сколько
заказов …»), which the check rewrites to ``count(DISTINCT ….order_id)`` itself. A refusal by the check, or
Postgres's own error text with the catalog's hint beside it (``hints.column_hint``), follows the failed SQL
in the next prompt (``sql_messages``), so the prompt grows with each retry (the trace shows the tokens).
After each failure a policy (``policy=``, default ``labkit.agent.sql.policy.next_step``, exercise 21) says retry, give up or refuse: after ``max_errors`` failures, or when the model wrote the same
SQL twice in a row, the run stops honestly with ``requires_human``; SQL that would change data (the model
took «удали все заказы» literally) or that Postgres says the role may not run is not retried: the agent
says it only reads. The result's ``stop_rule`` names the rule that stopped the run. A run that succeeds
answers with the rows themselves (``format_rows``), never with a model's retelling. Safety does not rest on the check: the reader role can only read.

The graph's state is plain data (a question in; SQL texts, errors, rows and an answer out), so a
supervisor can run it from a node of its own (``SqlAgent.ask``) or add ``SqlAgent.graph`` as a subgraph.
"""

from __future__ import annotations

import datetime
import operator
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

import pandas as pd
import psycopg

from labkit.agent.sql.answer import format_rows, format_value
from labkit.agent.sql.check import SqlRefused, check_select, extract_sql
from labkit.agent.sql.hints import (
    column_hint,
    count_orders,
    example_literals,
    miscount_message,
    miscounted_orders,
    unasked_message,
    unasked_values,
    unknown_values,
    value_message,
    without_conditions,
)
from labkit.agent.sql.policy import CHECK_SOURCE, POSTGRES_SOURCE, STEPS, Policy, failures, next_step, stop_rule
from labkit.agent.sql.schema import column_values, describe_schema, table_columns
from labkit.core.text import ERROR_CHARS, PREVIEW_CHARS, shorten
from labkit.models.chat import ask_model
from labkit.store.shop.reader import ROW_CAP, QueryResult, open_reader, run_select

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph import StateGraph

    from labkit.core.context import Lab

__all__ = ["SQL_SYSTEM_PROMPT", "RETRY_PROMPT", "SQL_TOKENS", "SqlAgent", "SqlResult", "sql_messages"]

SQL_TOKENS = 400  # the longest reply a SQL step may generate: one query with a few joins fits in 200
SQL_SYSTEM_PROMPT = """Ты пишешь запросы к базе данных PostgreSQL магазина электроники «ТехноМир».
Тебе доступны только эти таблицы (после -- сказано, что хранит столбец и какие значения в нём бывают):

{schema}

Правила:
- Ответь одним запросом SELECT в блоке ```sql ... ``` и ничего больше не пиши.
- Используй только эти таблицы и столбцы. Каждый столбец бери из той таблицы, где он объявлен; если нужны столбцы разных таблиц, соедини их через JOIN ... ON по REFERENCES.
- Каждое условие вопроса (состояние, город, способ получения или оплаты, категория, даты) — отдельное условие в WHERE; других условий не добавляй.
- «Сколько заказов …» с условием на товары — это count(DISTINCT o.id): в одном заказе бывает несколько строк.
- Текстовые значения пиши точно как в комментариях, в одинарных кавычках.
- Даты пиши как 'ГГГГ-ММ-ДД' и сравнивай через BETWEEN, >=, < или EXTRACT(YEAR FROM ...); LIKE к датам не применяй.
- Данные только читай: никаких INSERT, UPDATE, DELETE, DROP.

Примеры (другие вопросы, тот же приём):
Вопрос: Сколько штук кронштейнов вернули в 2025 году?
```sql
SELECT sum(r.quantity) FROM returns AS r JOIN order_items AS i ON i.id = r.order_item_id JOIN products AS p ON p.id = i.product_id WHERE p.category = 'кронштейны' AND r.returned_on BETWEEN '2025-01-01' AND '2025-12-31'
```
Вопрос: Сколько строк заказов с пылесосами оформлено онлайн в мае 2026 года?
```sql
SELECT count(*) FROM order_items AS i JOIN orders AS o ON o.id = i.order_id JOIN products AS p ON p.id = i.product_id WHERE p.category = 'пылесосы' AND o.channel = 'онлайн' AND o.ordered_on BETWEEN '2026-05-01' AND '2026-05-31'
```
Вопрос: Какая сумма товаров в заказе номер 17?
```sql
SELECT sum(price * quantity) FROM order_items WHERE order_id = 17
```
Вопрос: Сколько заказов с наушниками получено курьером в Казани?
```sql
SELECT count(DISTINCT o.id) FROM orders AS o JOIN order_items AS i ON i.order_id = o.id JOIN products AS p ON p.id = i.product_id WHERE p.category = 'наушники' AND o.delivery = 'курьер' AND o.city = 'Казань'
```"""
# The texts the worked examples compare with ('кронштейны', 'Казань', ...): a condition on one of them that the
# question never names was copied from an example, and the check cuts it out (``SqlAgent._check_sql``).
EXAMPLE_LITERALS = example_literals(SQL_SYSTEM_PROMPT)
FAILED_ATTEMPT = "Запрос не выполнен. {source}:\n{error}"
HINT = "Подсказка по схеме: {hint}"  # after Postgres's error, what the catalog says (``hints.column_hint``)
RETRY_PROMPT = "Напиши другой, исправленный запрос на этот вопрос: только SQL в блоке ```sql ... ```, без объяснений."
GIVE_UP_ANSWER = ("Не удалось получить данные магазина: запросов к базе — {attempts}, и ни один не выполнен "
                  "(последняя ошибка: {last}). {why} Ответ без данных был бы выдумкой, поэтому вопрос передан человеку.")
GIVE_UP_WHY = {  # the rule that stopped the run (policy.stop_rule), said to the student
    "max_errors": "Исчерпан лимит ошибок: {errors} из {max_errors}.",
    "no_progress": "Модель дважды подряд написала тот же запрос: новая попытка стоила бы секунд и дала бы ту же ошибку.",
    "policy": "Политика повторов решила остановиться.",
}
FORBIDDEN_ANSWER = ("Этот агент работает под ролью, которая может только читать таблицы магазина, и PostgreSQL отказал "
                    "запросу ({error}): повтор тут не поможет, поэтому агент больше не пытается.")
MODEL_DOWN_ANSWER = "Модель не ответила ({error}); агент остановлен, вопрос передан человеку."
DATABASE_DOWN_ANSWER = "База данных магазина недоступна ({error}); вопрос передан человеку."
WRITE_REFUSED_ANSWER = ("Этот агент только читает базу магазина: изменить, удалить или создать в ней что-либо он "
                        "не может и не будет. Запрос модели не выполнялся: {sql}")
RECURSION_ANSWER = "Агент не уложился в {limit} шагов графа и остановлен; вопрос передан человеку."


class SqlState(TypedDict, total=False):
    """One question's run: the question, every SQL tried with its error or rows, the result and the answer."""

    question: str
    sql: str  # the SQL of the current attempt (after extraction)
    attempts: Annotated[list[dict[str, Any]], operator.add]  # {"sql", "ok", "error", "source", "rows"} per attempt
    error_count: int
    last_error: str
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool
    answer: str
    requires_human: bool
    refused: bool  # the model wrote SQL that changes data: the request is refused, not retried
    stop_rule: str  # which rule ended a run without rows: "forbidden", "max_errors", "no_progress", "policy"
    trace: Annotated[list[dict[str, Any]], operator.add]


@dataclass
class SqlResult:
    """What one question produced: the answer, every SQL attempt with its error or rows, the trace."""

    question: str
    answer: str
    sql: str  # the SQL that ran (or the last one tried)
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    requires_human: bool
    error_count: int
    attempts: list[dict[str, Any]]
    trace: pd.DataFrame
    seconds: float
    thread_id: str
    failure: str = ""  # the model or the database was unavailable (then the answer says so)
    refused: bool = False  # the request was one to change data: refused without running anything
    stop_rule: str = ""  # the policy's rule that stopped a run without rows (``policy.stop_rule``), else ""

    @property
    def ok(self) -> bool:
        """A query ran and the answer holds its rows."""
        return not self.requires_human and bool(self.attempts) and bool(self.attempts[-1]["ok"])

    def tool_calls(self) -> list[dict[str, Any]]:
        """Each SQL attempt as a tool call: the SQL text and either its rows or its error (for ``ask --json``)."""
        calls = []
        for attempt in self.attempts:
            call: dict[str, Any] = {"name": "sql", "arguments": {"sql": attempt["sql"]}, "ok": attempt["ok"]}
            if attempt["ok"]:
                call["rows"] = [[_plain(v) for v in row] for row in attempt["rows"]]
            else:
                call["error"] = attempt["error"]
            calls.append(call)
        return calls

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the answer, the SQL steps, the rows as text cells."""
        return {
            "question": self.question, "answer": self.answer, "sql": self.sql, "columns": self.columns,
            "rows": [[format_value(v) for v in row] for row in self.rows], "truncated": self.truncated,
            "requires_human": self.requires_human, "refused": self.refused, "errors": self.error_count,
            "stop_rule": self.stop_rule,
            "tool_calls": self.tool_calls(),
            "thread_id": self.thread_id, "seconds": round(self.seconds, 3),
            "trace": self.trace.astype(object).where(self.trace.notna(), None).to_dict(orient="records"),
        }


def _plain(value: Any) -> Any:
    """A cell as JSON has it: numbers as numbers, dates as ISO text."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return value


def sql_messages(schema: str, question: str, attempts: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """What the model reads for one step: the system prompt with the schema, the question, then for every failed
    attempt so far its SQL (as the model's own turn) and the error with the catalog's hint (as the next user
    turn), so the prompt grows with each retry. Taught in 19_sql_agent.

    Without a hint, the 1.5B model repeated its failed SQL word for word whether its attempts were replayed or
    quoted; with ``Подсказка по схеме`` after Postgres's error it rewrote the query in most tune questions
    looked at (not in all: one kept ``order_items.payment`` through every hint).
    """
    messages = [{"role": "system", "content": SQL_SYSTEM_PROMPT.format(schema=schema)},
                {"role": "user", "content": f"Вопрос: {question}"}]
    for attempt in (a for a in attempts if not a["ok"]):
        messages.append({"role": "assistant", "content": f"```sql\n{attempt['sql'] or '(нет запроса)'}\n```"})
        said = FAILED_ATTEMPT.format(source=attempt["source"], error=attempt["error"])
        if attempt.get("hint"):
            said += "\n" + HINT.format(hint=attempt["hint"])
        messages.append({"role": "user", "content": said + "\n" + RETRY_PROMPT})
    return messages


def _row(node: str, seconds: float, *, sql: str = "", ok: bool | None = None, error: str = "", rows: int | None = None,
         preview: str = "", prompt_tokens: int | None = None, eval_tokens: int | None = None) -> dict[str, Any]:
    """One trace row: the step, its SQL, whether it worked, Postgres's error, how many rows, time and tokens."""
    return {"node": node, "sql": sql, "ok": ok, "error": error, "rows": rows,
            "preview": shorten(preview, PREVIEW_CHARS), "seconds": round(seconds, 3),
            "prompt_tokens": prompt_tokens, "eval_tokens": eval_tokens}


def _trace_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(_row("", 0.0)))
    return frame.astype({"rows": "Int64", "prompt_tokens": "Int64", "eval_tokens": "Int64"})


class SqlAgent:
    """The SQL agent over the shop. Taught in 19_sql_agent.

    Queries run on a connection of the shop's read-only role (``open_reader``), opened here and closed
    by ``close()`` unless `reader` is given. `chat` defaults to the lab's model client; `checkpointer`
    (e.g. ``open_checkpointer(lab.settings)``) makes each run resumable, none by default. `policy` decides
    after each failed attempt (``labkit.agent.sql.policy``; 21_task_sql_retry writes one).
    """

    def __init__(
        self,
        lab: Lab,
        *,
        model: str | None = None,
        chat: Callable[..., Any] | None = None,
        reader: psycopg.Connection[Any] | None = None,
        max_errors: int = 3,
        row_cap: int = ROW_CAP,
        checkpointer: BaseCheckpointSaver[Any] | None = None,
        policy: Policy = next_step,
    ) -> None:
        if max_errors < 1:
            raise ValueError(f"max_errors must be at least 1, got {max_errors}")
        self.lab = lab
        self.model = model or lab.chat_model
        self.chat = chat if chat is not None else lab.models.chat
        self._owns_reader = reader is None
        self.reader = reader if reader is not None else open_reader(lab.conn, lab.settings.database_url or "")
        self.max_errors = max_errors
        self.policy = policy
        self.row_cap = row_cap
        self.recursion_limit = 3 * max_errors + 4  # write, check, run per attempt; answer or give_up at the end
        self.schema = describe_schema(self.reader)
        self.values = column_values(self.reader)  # what the check compares a query's text literals with
        self.tables = table_columns(self.reader)  # where each column is, for Postgres's "does not exist"
        self.graph = self.build().compile(checkpointer=checkpointer)

    def build(self) -> StateGraph:
        """The graph, not yet compiled (a supervisor may add it as a subgraph)."""
        from langgraph.graph import END, START, StateGraph

        graph = StateGraph(SqlState)
        graph.add_node("write_sql", self._write_sql)
        graph.add_node("check_sql", self._check_sql)
        graph.add_node("run_sql", self._run_sql)
        graph.add_node("answer", self._answer)
        graph.add_node("give_up", self._give_up)
        graph.add_node("refuse", self._refuse)
        graph.add_edge(START, "write_sql")
        graph.add_edge("write_sql", "check_sql")
        graph.add_conditional_edges("check_sql", self._after_check, ["run_sql", "write_sql", "give_up", "refuse"])
        graph.add_conditional_edges("run_sql", self._after_run, ["answer", "write_sql", "give_up", "refuse"])
        graph.add_edge("answer", END)
        graph.add_edge("give_up", END)
        graph.add_edge("refuse", END)
        return graph

    # --- nodes -------------------------------------------------------------------------------
    def _write_sql(self, state: SqlState) -> dict[str, Any]:
        messages = sql_messages(self.schema, state["question"], state["attempts"])
        reply = ask_model(self.chat, self.model, messages, think=False, num_predict=SQL_TOKENS)
        if reply.error:  # e.g. a model that cannot chat: say so instead of looping
            raise _ModelUnavailable(reply.error)
        text = extract_sql(reply.content)
        row = _row("write_sql", reply.seconds, sql=text, preview="" if text else reply.content,
                   prompt_tokens=reply.prompt_tokens, eval_tokens=reply.eval_tokens)
        return {"sql": text, "trace": [row]}

    def _failure(self, state: SqlState, sql: str, error: str, source: str, node: str, seconds: float,
                 writes: bool = False, **noted: Any) -> dict[str, Any]:
        """A failed attempt: recorded and counted; the next prompt quotes it (``sql_messages``).

        `noted` goes into the attempt as well: ``hint`` (said beside the error), ``unknown`` (refused values).
        """
        return {"error_count": state["error_count"] + 1, "last_error": error,
                "attempts": [{"sql": sql, "ok": False, "error": error, "source": source, "rows": None,
                              "writes": writes, **noted}],
                "trace": [_row(node, seconds, sql=sql, ok=False, error=error)]}

    def _check_sql(self, state: SqlState) -> dict[str, Any]:
        start = time.perf_counter()
        try:
            checked = check_select(state["sql"])
        except SqlRefused as refused:
            return self._failure(state, state["sql"], str(refused), CHECK_SOURCE, "check_sql",
                                 time.perf_counter() - start, writes=refused.writes)
        asked = {tuple(pair) for attempt in state["attempts"] for pair in attempt.get("unknown", [])}
        unknown = [u for u in unknown_values(checked, self.values) if (u.column, u.literal) not in asked]
        if unknown:  # refused once; a literal the model keeps runs as written (0 rows may be the answer)
            return self._failure(state, checked, value_message(unknown), CHECK_SOURCE, "check_sql",
                                 time.perf_counter() - start, unknown=[[u.column, u.literal] for u in unknown])
        unasked = unasked_values(checked, state["question"])
        copied = [pair for pair in unasked if pair[1] in EXAMPLE_LITERALS]
        cut = without_conditions(checked, copied) if copied else ""
        if cut:  # a condition of the prompt's examples the question never names: the example's, cut out
            note = "Убрано условие из примеров промпта, которого нет в вопросе: " + ", ".join(
                f"{column} = '{literal}'" for column, literal in copied)
            unasked = [pair for pair in unasked if pair not in copied]
            checked = cut
        else:
            note = ""
        dropped = {tuple(pair) for attempt in state["attempts"] for pair in attempt.get("unasked", [])}
        unasked = [pair for pair in unasked if pair not in dropped]
        if unasked:  # refused once too; a condition the model keeps runs as written
            return self._failure(state, checked, unasked_message(checked, unasked), CHECK_SOURCE, "check_sql",
                                 time.perf_counter() - start, unasked=[list(pair) for pair in unasked])
        items = miscounted_orders(checked, state["question"])
        recounted = count_orders(checked, items) if items else ""
        if recounted:  # rows counted where the question counts orders: the count is written for the model
            note = (f"{note} " if note else "") + f"Считаем заказы, а не строки: count(DISTINCT {items}.order_id)."
            checked = recounted
        elif items and not any(attempt.get("miscount") for attempt in state["attempts"]):  # refused once, like the others
            return self._failure(state, checked, miscount_message(items), CHECK_SOURCE, "check_sql",
                                 time.perf_counter() - start, miscount=True)
        return {"sql": checked, "trace": [_row("check_sql", time.perf_counter() - start, sql=checked, ok=True,
                                               preview=note)]}

    def _run_sql(self, state: SqlState) -> dict[str, Any]:
        result: QueryResult = run_select(self.reader, state["sql"], row_cap=self.row_cap)
        if not result.ok:
            return self._failure(state, result.sql, result.error, POSTGRES_SOURCE, "run_sql", result.seconds,
                                 hint=column_hint(result.error, self.tables))
        rows = [list(r) for r in result.rows]
        return {"columns": result.columns, "rows": rows, "truncated": result.truncated,
                "attempts": [{"sql": result.sql, "ok": True, "error": "", "source": "", "rows": rows, "writes": False}],
                "trace": [_row("run_sql", result.seconds, sql=result.sql, ok=True, rows=len(rows))]}

    def _answer(self, state: SqlState) -> dict[str, Any]:
        answer = format_rows(state["columns"], state["rows"], state["truncated"])
        return {"answer": answer, "trace": [_row("answer", 0.0, preview=answer)]}

    def _refuse(self, state: SqlState) -> dict[str, Any]:
        last = state["attempts"][-1]
        if last["source"] == POSTGRES_SOURCE:  # the role may not: the query ran and Postgres refused it
            answer = FORBIDDEN_ANSWER.format(error=shorten(_first_line(last["error"]), ERROR_CHARS).rstrip("."))
        else:
            answer = WRITE_REFUSED_ANSWER.format(sql=shorten(state["sql"], ERROR_CHARS))
        rule = stop_rule("refuse", state["attempts"], self.max_errors)
        return {"answer": answer, "refused": True, "stop_rule": rule,
                "trace": [_row("refuse", 0.0, error=rule, preview=answer)]}

    def _give_up(self, state: SqlState) -> dict[str, Any]:
        rule = stop_rule("give_up", state["attempts"], self.max_errors)
        why = GIVE_UP_WHY[rule if rule in GIVE_UP_WHY else "policy"].format(
            errors=len(failures(state["attempts"])), max_errors=self.max_errors)
        answer = GIVE_UP_ANSWER.format(attempts=len(state["attempts"]), why=why,
                                       last=shorten(_first_line(state["last_error"]), ERROR_CHARS).rstrip("."))
        return {"answer": answer, "requires_human": True, "stop_rule": rule,
                "trace": [_row("give_up", 0.0, error=rule, preview=answer)]}

    # --- routing ------------------------------------------------------------------------------
    def _after_failure(self, state: SqlState) -> str:
        """The policy's verdict on the attempts so far, as the next node."""
        step = self.policy(list(state["attempts"]), self.max_errors)
        if step not in STEPS:
            raise ValueError(f"the SQL agent's policy must return one of {', '.join(STEPS)}, got {step!r}")
        return "write_sql" if step == "retry" else step

    def _after_check(self, state: SqlState) -> str:
        return "run_sql" if state["trace"][-1]["ok"] else self._after_failure(state)

    def _after_run(self, state: SqlState) -> str:
        return "answer" if state["trace"][-1]["ok"] else self._after_failure(state)

    # --- public -------------------------------------------------------------------------------
    def ask(self, question: str, thread_id: str | None = None) -> SqlResult:
        """Answer one data question from the shop's database. Taught in 19_sql_agent.

        Never raises for the model or the database being unavailable: the answer then says so in
        Russian and ``requires_human`` is set.
        """
        from httpx import TransportError
        from langgraph.errors import GraphRecursionError
        from ollama import ResponseError

        thread_id = thread_id or uuid.uuid4().hex[:12]
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}, "recursion_limit": self.recursion_limit}
        start_state: SqlState = {
            "question": question, "sql": "", "attempts": [],
            "error_count": 0, "last_error": "", "columns": [], "rows": [], "truncated": False, "answer": "",
            "requires_human": False, "refused": False, "stop_rule": "", "trace": []}
        start = time.perf_counter()
        state: dict[str, Any] = dict(start_state)
        failure = ""
        try:
            for values in self.graph.stream(start_state, config, stream_mode="values"):
                state = values
        except GraphRecursionError:
            state = {**state, "answer": RECURSION_ANSWER.format(limit=self.recursion_limit), "requires_human": True}
        except (_ModelUnavailable, ResponseError, ConnectionError, TransportError) as exc:
            failure = shorten(f"{type(exc).__name__}: {' '.join(str(exc).split())}", ERROR_CHARS)
            state = {**state, "answer": MODEL_DOWN_ANSWER.format(error=failure), "requires_human": True}
        except psycopg.OperationalError as exc:  # the reader's connection is gone (run_select re-raises only that)
            failure = shorten(" ".join(str(exc).split()) or type(exc).__name__, ERROR_CHARS)
            state = {**state, "answer": DATABASE_DOWN_ANSWER.format(error=failure), "requires_human": True}
        attempts = list(state.get("attempts", []))
        return SqlResult(
            question=question, answer=state.get("answer", ""),
            sql=attempts[-1]["sql"] if attempts else state.get("sql", ""),
            columns=list(state.get("columns", [])), rows=[tuple(r) for r in state.get("rows", [])],
            truncated=bool(state.get("truncated")), requires_human=bool(state.get("requires_human")),
            error_count=int(state.get("error_count", 0)), attempts=attempts,
            trace=_trace_frame(list(state.get("trace", []))), seconds=time.perf_counter() - start,
            thread_id=thread_id, failure=failure, refused=bool(state.get("refused")),
            stop_rule=str(state.get("stop_rule", "")))

    def close(self) -> None:
        """Close the reader's connection if this agent opened it (the lab stays open)."""
        if self._owns_reader:
            self.reader.close()

    def __enter__(self) -> SqlAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _first_line(error: str) -> str:
    """The first line of Postgres's error text, without its ``ERROR:``."""
    return (error.splitlines() or [""])[0].removeprefix("ERROR:").strip()


class _ModelUnavailable(RuntimeError):
    """The model answered with an error instead of text (``Reply.error``: a missing capability)."""
