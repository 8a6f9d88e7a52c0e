"""Exercise 09: the student's third tool, search_by_entity, against the reference one.

Parts with hints where students get stuck: the schema the model reads (names, enums,
optionality), the docstring (not a placeholder), the SQL as written (parameters, not string
formatting; ``ORDER BY id``; ``LIMIT``), the rows it returns on fixed cases (the ``::text``
cast, ``None`` meaning "no filter", an injection-like string) and, for the grader, on cases
made from the run's seed; and whether the agent called the tool for the exercise's question.
``collect`` calls the student's function in their kernel; the cases compare its rows with
``labkit.agent.entity_tool.search_by_entity`` on the context's database.
"""

from __future__ import annotations

import ast
import inspect
import random
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from labkit.agent.entity_tool import ENTITY_LIMIT, search_by_entity
from labkit.agent.tools import tool_schema
from labkit.core.context import Lab
from labkit.core.corpora.news import COMPANIES, TONES
from labkit.core.text import shorten
from labkit.course.checks.cases import Answers, Case, Exercise
from labkit.course.checks.common import (
    CallTimeout,
    CheckResult,
    call_limited,
    collected,
    failure,
    jsonable,
    report,
    unfilled,
)

__all__ = ["EXERCISE", "EntityContext", "check_entity_tool", "hidden_cases"]

_ENTITY_CASES: list[dict[str, str | None]] = [
    {"company": "ЦБ", "tone": "negative"},
    {"company": "Сбербанк", "tone": None},
    {"company": None, "tone": "positive"},  # more rows than the limit: ORDER BY id and LIMIT show
    {"company": "Яндекс", "tone": "negative"},
    {"company": None, "tone": None},
    {"company": "ЦБ' OR '1'='1", "tone": None},  # must find nothing: parameters, not string formatting
]
_ROW_KEYS = {"id", "text", "company", "tone"}
_SUMMARY_WORDS, _SUMMARY_CHARS = 4, 25  # a summary shorter than this cannot tell the model when to call the tool
_ARG_WORDS, _ARG_CHARS = 2, 10

CAST_HINT = ("PostgreSQL не может вывести тип параметра в `%(company)s IS NULL`: psycopg передаёт строку без типа, "
             "а сравнение с NULL тип не подсказывает. Приведите параметр явно: "
             "`(%(company)s::text IS NULL OR company = %(company)s)`, так же для tone")
FORMAT_HINT = ("SQL собран из строк (f-строка, format, + или %): значение попадает в текст запроса, и строка с кавычкой "
               "меняет сам запрос (SQL-инъекция). Пишите `%(company)s` в тексте SQL и передавайте значения вторым "
               "аргументом: lab.conn.execute(sql, {'company': company, 'tone': tone})")
ORDER_HINT = ("добавьте ORDER BY id перед LIMIT: без него PostgreSQL возвращает строки в любом порядке, "
              "и «первые пять» каждый раз могут быть разными")
LIMIT_HINT = f"ограничьте ответ: LIMIT {ENTITY_LIMIT} после ORDER BY id (модели хватит нескольких новостей)"
ORDER_DESC_HINT = f"нужны первые {ENTITY_LIMIT} новостей по возрастанию id: ORDER BY id (без DESC) перед LIMIT"
NONE_HINT = ("None значит «без фильтра»: условие `(%(company)s::text IS NULL OR company = %(company)s)` "
             "пропускает все строки, когда аргумент None (а `company = NULL` не выполняется никогда)")


_HIDDEN_COMBINATIONS = 6
_MAX_SOURCE = 20_000


def hidden_cases(seed: int) -> list[dict[str, str | None]]:
    """Filter combinations the fixed cases do not try, and one more injection-like company, from `seed`."""
    rng = random.Random(seed)
    fixed = {(case["company"], case["tone"]) for case in _ENTITY_CASES}
    pool = [{"company": c, "tone": t} for c in (None, *COMPANIES) for t in (None, *TONES) if (c, t) not in fixed]
    injection = {"company": f"{rng.choice(COMPANIES)}' OR tone = '{rng.choice(TONES)}", "tone": None}
    return [*rng.sample(pool, _HIDDEN_COMBINATIONS), injection]


@dataclass(frozen=True)
class EntityContext:
    """The database the reference rows come from; the hidden cases' seed (grader only)."""

    lab: Lab
    seed: int | None = None


# --- collecting the answers (in the student's kernel) ---------------------------------------------

def _source(func: Callable[..., Any]) -> str | None:
    try:
        return inspect.getsource(func)[:_MAX_SOURCE]
    except (OSError, TypeError):
        return None


def _rows(func: Callable[..., Any], lab: Any, case: Mapping[str, str | None]) -> dict[str, Any]:
    """What the student's tool returned on one case: ids, or why there are none."""
    try:
        rows = call_limited(lambda: func(lab, **case))
    except (Exception, CallTimeout) as exc:  # noqa: BLE001 (the student's code may fail in any way)
        return {"error": failure(exc), "cast": "determine data type" in str(exc)}
    if rows is None:
        return {"none": True}
    if not isinstance(rows, list) or not all(isinstance(r, Mapping) and _ROW_KEYS <= set(r) for r in rows):
        return {"shape": True}
    try:
        return {"ids": [int(r["id"]) for r in rows[:50]]}
    except (TypeError, ValueError):
        return {"shape": True}


def _all_rows(func: Callable[..., Any], lab: Any, cases: Sequence[Mapping[str, str | None]]) -> list[dict[str, Any]]:
    """Rows on `cases`; after a call that ran out of time the rest are not tried."""
    answers = []
    for case in cases:
        answers.append(_rows(func, lab, case))
        if "не уложилась" in answers[-1].get("error", ""):
            break
    return answers


def _collect_function(func: Any, lab: Any, seed: int | None) -> dict[str, Any]:
    if unfilled(func):
        return {"state": "unfilled"}
    if not callable(func):
        return {"state": "type", "type": type(func).__name__}
    answer: dict[str, Any] = {"state": "function", "name": str(getattr(func, "__name__", "")),
                              "has_doc": bool(inspect.getdoc(func)), "source": _source(func)}
    try:
        answer["schema"] = jsonable(tool_schema(func)["function"])
    except Exception as exc:  # noqa: BLE001 (any signature can reach tool_schema)
        answer["schema_error"] = failure(exc)
    answer["fixed"] = _all_rows(func, lab, _ENTITY_CASES)
    answer["hidden"] = _all_rows(func, lab, hidden_cases(seed)) if seed is not None else None
    return answer


def _collect_result(result: Any) -> dict[str, Any]:
    if unfilled(result):
        return {"state": "unfilled"}
    calls = getattr(result, "tool_calls", None)
    if calls is None and isinstance(result, Mapping):
        calls = result.get("tool_calls")
    if not isinstance(calls, list):
        return {"state": "type", "type": type(result).__name__}
    return {"state": "calls", "calls": [{"name": str(call.get("name")), "arguments": jsonable(call.get("arguments") or {})}
                                        for call in calls[:20] if isinstance(call, Mapping)]}


def collect(namespace: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """The answers of exercise 09 from the notebook's variables (JSON-ready)."""
    return {"function": _collect_function(namespace.get("search_by_entity"), namespace.get("lab"), seed),
            "result": _collect_result(namespace.get("result"))}


# --- the cases -------------------------------------------------------------------------------------

def _placeholder(text: str, words: int, chars: int) -> bool:
    """An empty, TODO or too short description (it cannot guide a model)."""
    text = text.strip()
    return not text or "todo" in text.casefold() or len(text.split()) < words or len(text) < chars


def _function(answers: Answers) -> tuple[Mapping[str, Any] | None, list[str]]:
    """The collected function, or why there is none."""
    answer = answers["function"]
    if problem := collected("search_by_entity", answer):
        return None, [problem]
    if answer.get("state") != "function":
        return None, ["search_by_entity должна быть функцией"]
    return answer, []


def _schema_problems(answers: Answers, _context: EntityContext) -> list[str]:
    """Name, arguments, enums and optionality the model reads."""
    answer, problems = _function(answers)
    if answer is None:
        return problems
    if answer["name"] != "search_by_entity":
        problems.append("функция должна называться search_by_entity: это имя увидит модель")
    if "schema" not in answer:
        return [*problems, f"из сигнатуры не получается описание инструмента: {answer.get('schema_error')}"]
    params = answer["schema"]["parameters"]
    props = params["properties"]
    if set(props) != {"company", "tone"}:
        problems.append(f"аргументы инструмента: {', '.join(props) or 'нет'}; нужны company и tone (кроме первого, lab)")
        return problems
    if props["company"].get("enum") != list(COMPANIES):
        problems.append("у company нет перечня компаний: аннотируйте его как lk.Company | None")
    if props["tone"].get("enum") != list(TONES):
        problems.append("у tone нет перечня тональностей: аннотируйте его как lk.Tone | None")
    if params["required"]:
        problems.append("company и tone должны быть необязательными (значение по умолчанию None)")
    return problems


def _docstring_problems(answers: Answers, _context: EntityContext) -> list[str]:
    """A docstring whose summary and Args tell the model when to call the tool and what to pass."""
    answer, problems = _function(answers)
    if answer is None:
        return []  # said by _schema_problems
    if not answer["has_doc"]:
        return ["у функции нет докстринга: модель выбирает инструмент по его первой строке "
                "и узнаёт смысл аргументов из раздела Args"]
    if "schema" not in answer:
        return []  # said by _schema_problems
    schema = answer["schema"]
    if _placeholder(schema["description"], _SUMMARY_WORDS, _SUMMARY_CHARS):
        problems.append(f"первая строка докстринга «{shorten(schema['description'], 60)}» — заглушка или слишком коротка: "
                        "по ней модель решает, звать ли инструмент; напишите своими словами, что он находит "
                        "(новости о компании и/или с заданной тональностью)")
    props = schema["parameters"]["properties"]
    for name in ("company", "tone"):
        described = props.get(name, {}).get("description", "")
        if not described:
            problems.append(f"опишите {name} в разделе Args: докстринга (строка `{name}: ...`): "
                            "модель читает это описание")
        elif _placeholder(described, _ARG_WORDS, _ARG_CHARS):
            problems.append(f"описание {name} в Args: «{shorten(described, 40)}» — заглушка или слишком коротко: "
                            "объясните модели, что передавать в этот аргумент")
    return problems


def _description_problems(answers: Answers, context: EntityContext) -> list[str]:
    """What the model reads: the schema from the signature and the docstring."""
    return _schema_problems(answers, context) + _docstring_problems(answers, context)


def _sql_texts(source: str, table: str) -> tuple[str, bool] | None:
    """(the SQL text written in the function, whether it is built by formatting) or None when it cannot be parsed.

    `table` is the documents table the exercise's SQL reads.
    """
    try:
        tree = ast.parse(textwrap.dedent(source))
    except (SyntaxError, ValueError):
        return None
    body = tree.body[0] if tree.body and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    if body is None:
        return None
    docstring = ast.get_docstring(body, clean=False)

    def sql_like(text: str) -> bool:
        return any(word in text.casefold() for word in ("select", "where", f"from {table}"))

    texts: list[str] = []
    formatted = False
    for node in ast.walk(body):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value != docstring:
            texts.append(node.value)  # f-strings' literal parts too
        elif isinstance(node, ast.JoinedStr):
            parts = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
            formatted |= sql_like(parts) and any(isinstance(v, ast.FormattedValue) for v in node.values)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
            sides = [s.value for s in (node.left, node.right) if isinstance(s, ast.Constant) and isinstance(s.value, str)]
            formatted |= any(sql_like(side) for side in sides)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
            target = node.func.value
            formatted |= isinstance(target, ast.Constant) and isinstance(target.value, str) and sql_like(target.value)
    if not any(sql_like(t) for t in texts):
        texts = []
    return " ".join(texts), formatted


def _source_hints(answer: Mapping[str, Any], lab: Lab) -> list[str]:
    """Hints from the SQL as written (empty when the source cannot be parsed)."""
    found = _sql_texts(answer["source"], lab.corpus.table) if answer.get("source") else None
    if found is None:
        return []
    sql, formatted = found
    problems = [FORMAT_HINT] if formatted else []
    text = " ".join(sql.casefold().split())
    if text and "order by" not in text:
        problems.append(ORDER_HINT)
    if text and "limit" not in text:
        problems.append(LIMIT_HINT)
    return problems


def _sql_problems(answers: Answers, context: EntityContext) -> list[str]:
    """The SQL as written (parameters, not string formatting; ORDER BY id; LIMIT), and it runs."""
    answer, problems = _function(answers)
    if answer is None:
        return problems
    if not answer.get("source"):
        return ["не удалось прочитать исходный код search_by_entity: определите её обычной функцией (def) "
                "в ячейке ноутбука"]
    if hints := _source_hints(answer, context.lab):
        return hints
    if not any("ids" in got for got in answer["fixed"]):
        return ["запрос ещё не работает: search_by_entity не вернула строк ни на одном примере (допишите "
                f"SELECT ... FROM {context.lab.corpus.table} WHERE ... ORDER BY id LIMIT с параметрами)"]
    return []


def _row_ids(rows: Any) -> list[int]:
    return [int(r["id"]) for r in rows]


def _matching_ids(lab: Any, case: Mapping[str, str | None]) -> set[int]:
    """Every id the filter of `case` should match, with no limit (to tell a wrong filter from a wrong limit)."""
    rows = lab.conn.execute(
        sql.SQL("SELECT id FROM {} WHERE (%(company)s::text IS NULL OR company = %(company)s) "
                "AND (%(tone)s::text IS NULL OR tone = %(tone)s)").format(sql.Identifier(lab.corpus.table)),
        dict(case),
    ).fetchall()
    return {int(r[0]) for r in rows}


def _case_hint(case: Mapping[str, str | None], got: list[int], want: list[int], lab: Any) -> str:
    """Why the ids of one case differ from the reference."""
    if "'" in (case.get("company") or ""):
        return FORMAT_HINT
    if None in case.values() and want and not got:
        return NONE_HINT
    if got == sorted(want, reverse=True) and len(got) > 1:
        return ORDER_DESC_HINT
    if sorted(got) == sorted(want):
        return ORDER_HINT
    if len(got) > ENTITY_LIMIT and set(want) <= set(got):
        return LIMIT_HINT
    if set(got) <= _matching_ids(lab, case) and len(got) == len(want):
        return ORDER_DESC_HINT if got == sorted(got, reverse=True) else ORDER_HINT
    return ("проверьте фильтр: WHERE по обоим столбцам company и tone, условия через AND, "
            "и каждое пропускает всё, когда аргумент None")


def _rows_mismatches(answer: Mapping[str, Any], cases: Sequence[Mapping[str, str | None]], got_rows: Sequence[Any],
                     lab: Lab) -> list[str]:
    """At most one failure or wrong shape, every explained mismatch; a hint the SQL already earned is not repeated."""
    said = _source_hints(answer, lab)
    problems: list[str] = []
    if len(got_rows) < len(cases) and not (got_rows and "error" in got_rows[-1]):
        return ["ответов меньше, чем примеров: проверка не дождалась функции"]
    for case, got in zip(cases, got_rows):
        shown = ", ".join(f"{k}={v!r}" for k, v in case.items())
        if "error" in got:
            hint = CAST_HINT if got.get("cast") else "исправьте ошибку и выполните ячейку снова"
            return [*problems, f"search_by_entity(lab, {shown}) упала ({got['error']}): {hint}"]
        if got.get("none"):
            return [*problems, "search_by_entity возвращает None: допишите тело функции в ячейке с TODO "
                               "(lab.conn.execute(...) с параметрами, затем список словарей)"]
        if got.get("shape"):
            return [*problems, "search_by_entity должна вернуть список словарей с ключами id, text, company, tone "
                               "(текст новости — столбец body), например "
                               "[{'id': i, 'text': body, 'company': c, 'tone': t} for i, body, c, t in rows]"]
        ids, want = got["ids"], _row_ids(search_by_entity(lab, **case))
        if ids == want:
            continue
        hint = _case_hint(case, ids, want, lab)
        if any(p.endswith(hint) for p in problems):  # one example per mistake is enough
            continue
        problem = f"search_by_entity(lab, {shown}) вернула id {ids}, ожидались {want}: {hint}"
        problems.append(f"{problem[: -len(hint)].rstrip(': ')} (причина — выше)" if hint in said else problem)
    return problems


def _fixed_rows_problems(answers: Answers, context: EntityContext) -> list[str]:
    answer, problems = _function(answers)
    if answer is None:
        return problems
    return _rows_mismatches(answer, _ENTITY_CASES, answer["fixed"], context.lab)


def _hidden_rows_problems(answers: Answers, context: EntityContext) -> list[str]:
    answer, problems = _function(answers)
    if answer is None:
        return problems
    if context.seed is None or answer.get("hidden") is None:
        return ["скрытые примеры не запускались"]
    return _rows_mismatches(answer, hidden_cases(context.seed), answer["hidden"], context.lab)


def _agent_problems(answers: Answers, _context: EntityContext) -> list[str]:
    """Did the agent call search_by_entity(company='ЦБ', tone='negative')?"""
    answer = answers["result"]
    if problem := collected("result", answer):
        return [problem]
    if answer.get("state") != "calls":
        return ["result должен быть результатом agent.ask(QUESTION)"]
    for call in answer["calls"]:
        args = call["arguments"] if isinstance(call["arguments"], Mapping) else {}
        if (call["name"] == "search_by_entity" and str(args.get("company", "")).casefold() == "цб"
                and str(args.get("tone", "")).casefold() == "negative"):
            return []
    shown = "; ".join(f"{c['name']}({c['arguments']})" for c in answer["calls"]) or "инструмент не вызван"
    return [f"агент не вызвал search_by_entity(company='ЦБ', tone='negative'), его вызовы: {shown}. "
            "Передайте функцию в tools агента (tools=[*lk.DEFAULT_TOOLS, search_by_entity]) и допишите "
            "к lk.SYSTEM_PROMPT, когда её звать (system=...)"]


CASES: tuple[Case[EntityContext], ...] = (
    Case("описание для модели: имя, company и tone с перечнями и None, докстринг с Args", 3, _description_problems),
    Case("SQL с параметрами, ORDER BY id и LIMIT", 2, _sql_problems),
    Case("строки на готовых примерах совпадают с эталоном", 2, _fixed_rows_problems),
    Case("строки на других сочетаниях фильтров совпадают с эталоном", 2, _hidden_rows_problems, hidden=True),
    Case("агент вызвал search_by_entity(company='ЦБ', tone='negative')", 1, _agent_problems),
)


def _context(lab: Lab, parameters: Mapping[str, Any], seed: int) -> EntityContext:
    """The grader's references: the reference tool on its own database."""
    return EntityContext(lab, seed)


EXERCISE: Exercise[EntityContext] = Exercise(
    "09", "09_task_entity_tool.ipynb", "инструмент search_by_entity (09)", CASES, collect, _context)


def check_entity_tool(func: Any, result: Any, *, lab: Any) -> CheckResult:
    """Check the student's search_by_entity (schema, docstring, SQL, rows, safety) and the agent's choice.

    Taught in 09_task_entity_tool. Prints the verdict and the points of each visible case.
    """
    return report(EXERCISE, {"search_by_entity": func, "result": result, "lab": lab}, EntityContext(lab))
