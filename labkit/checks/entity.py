"""Checker of exercise 09: the student's third tool, search_by_entity, against the reference one.

Four parts, each with hints where students get stuck: the schema the model reads (names,
enums, a docstring that is not a placeholder), the SQL as written (parameters, not
string formatting; ``ORDER BY id``; ``LIMIT``), the rows it returns on fixed cases (the
``::text`` cast, ``None`` meaning "no filter", an injection-like string), and whether the
agent called the tool for the exercise's question.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

from ..corpus import COMPANIES, TONES
from ..entity_tool import ENTITY_LIMIT, search_by_entity
from ..text import ERROR_CHARS, shorten
from ..tools import tool_schema
from .common import checker, todo

__all__ = ["check_entity_tool"]

_ENTITY_CASES: list[dict[str, str | None]] = [
    {"company": "ЦБ", "tone": "negative"},
    {"company": "Сбербанк", "tone": None},
    {"company": None, "tone": "positive"},  # more rows than the limit: ORDER BY id and LIMIT show
    {"company": "Яндекс", "tone": "negative"},
    {"company": None, "tone": None},
    {"company": "ЦБ' OR '1'='1", "tone": None},  # must find nothing: parameters, not string formatting
]
_INJECTION = _ENTITY_CASES[-1]
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


def _placeholder(text: str, words: int, chars: int) -> bool:
    """An empty, TODO or too short description (it cannot guide a model)."""
    text = text.strip()
    return not text or "todo" in text.casefold() or len(text.split()) < words or len(text) < chars


def _schema_problems(func: Callable[..., Any]) -> list[str]:
    """Name, arguments, enums, optionality and the docstring the model reads."""
    problems = []
    if getattr(func, "__name__", "") != "search_by_entity":
        problems.append("функция должна называться search_by_entity: это имя увидит модель")
    schema = tool_schema(func)["function"]
    params = schema["parameters"]
    props = params["properties"]
    if not inspect.getdoc(func):
        problems.append("у функции нет докстринга: модель выбирает инструмент по его первой строке "
                        "и узнаёт смысл аргументов из раздела Args")
    elif _placeholder(schema["description"], _SUMMARY_WORDS, _SUMMARY_CHARS):
        problems.append(f"первая строка докстринга «{shorten(schema['description'], 60)}» — заглушка или слишком коротка: "
                        "по ней модель решает, звать ли инструмент; напишите своими словами, что он находит "
                        "(новости о компании и/или с заданной тональностью)")
    if set(props) != {"company", "tone"}:
        problems.append(f"аргументы инструмента: {', '.join(props) or 'нет'}; нужны company и tone (кроме первого, lab)")
        return problems
    if props["company"].get("enum") != list(COMPANIES):
        problems.append("у company нет перечня компаний: аннотируйте его как lk.Company | None")
    if props["tone"].get("enum") != list(TONES):
        problems.append("у tone нет перечня тональностей: аннотируйте его как lk.Tone | None")
    if params["required"]:
        problems.append("company и tone должны быть необязательными (значение по умолчанию None)")
    for name in ("company", "tone"):
        described = props[name].get("description", "")
        if not described:
            problems.append(f"опишите {name} в разделе Args: докстринга (строка `{name}: ...`): "
                            "модель читает это описание")
        elif _placeholder(described, _ARG_WORDS, _ARG_CHARS):
            problems.append(f"описание {name} в Args: «{shorten(described, 40)}» — заглушка или слишком коротко: "
                            "объясните модели, что передавать в этот аргумент")
    return problems


def _sql_texts(func: Callable[..., Any]) -> tuple[str, bool] | None:
    """(the SQL text written in the function, whether it is built by formatting) or None when the source is unknown."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return None
    body = tree.body[0] if tree.body and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    if body is None:
        return None
    docstring = ast.get_docstring(body, clean=False)

    def sql_like(text: str) -> bool:
        return any(word in text.casefold() for word in ("select", "where", "from news"))

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


def _source_problems(func: Callable[..., Any]) -> list[str]:
    """Hints from the SQL as written (empty when the source is not available)."""
    found = _sql_texts(func)
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


def _row_ids(rows: Any) -> list[int]:
    return [int(r["id"]) for r in rows]


def _matching_ids(lab: Any, case: Mapping[str, str | None]) -> set[int]:
    """Every id the filter of `case` should match, with no limit (to tell a wrong filter from a wrong limit)."""
    rows = lab.conn.execute(
        "SELECT id FROM news WHERE (%(company)s::text IS NULL OR company = %(company)s) "
        "AND (%(tone)s::text IS NULL OR tone = %(tone)s)",
        dict(case),
    ).fetchall()
    return {int(r[0]) for r in rows}


def _case_hint(case: Mapping[str, str | None], got: list[int], want: list[int], lab: Any) -> str:
    """Why the ids of one case differ from the reference."""
    if case is _INJECTION:
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


def _rows_problems(func: Callable[..., Any], lab: Any) -> list[str]:
    """Run the student's tool on fixed cases; at most one failure or wrong shape, every explained mismatch."""
    problems: list[str] = []
    for case in _ENTITY_CASES:
        shown = ", ".join(f"{k}={v!r}" for k, v in case.items())
        try:
            rows = func(lab, **case)
        except Exception as exc:  # noqa: BLE001 (the student's code may fail in any way)
            reason = shorten(f"{type(exc).__name__}: {exc}", ERROR_CHARS)
            hint = CAST_HINT if "determine data type" in str(exc) else "исправьте ошибку и выполните ячейку снова"
            return [*problems, f"search_by_entity(lab, {shown}) упала ({reason}): {hint}"]
        if rows is None:
            return [*problems, "search_by_entity возвращает None: допишите тело функции в ячейке с TODO "
                               "(lab.conn.execute(...) с параметрами, затем список словарей)"]
        if not isinstance(rows, list) or not all(isinstance(r, Mapping) and _ROW_KEYS <= set(r) for r in rows):
            return [*problems, "search_by_entity должна вернуть список словарей с ключами id, text, company, tone "
                               "(текст новости — столбец body), например "
                               "[{'id': i, 'text': body, 'company': c, 'tone': t} for i, body, c, t in rows]"]
        got, want = _row_ids(rows), _row_ids(search_by_entity(lab, **case))
        if got == want:
            continue
        hint = _case_hint(case, got, want, lab)
        if not any(p.endswith(hint) for p in problems):  # one example per mistake is enough
            problems.append(f"search_by_entity(lab, {shown}) вернула id {got}, ожидались {want}: {hint}")
    return problems


def _agent_problems(result: Any) -> list[str]:
    """Did the agent call search_by_entity(company='ЦБ', tone='negative')?"""
    calls = getattr(result, "tool_calls", None)
    if calls is None and isinstance(result, Mapping):
        calls = result.get("tool_calls")
    if not isinstance(calls, list):
        return ["result должен быть результатом agent.ask(QUESTION)"]
    for call in calls:
        args = call.get("arguments") or {}
        if (call.get("name") == "search_by_entity" and str(args.get("company", "")).casefold() == "цб"
                and str(args.get("tone", "")).casefold() == "negative"):
            return []
    shown = "; ".join(f"{c.get('name')}({c.get('arguments')})" for c in calls) or "инструмент не вызван"
    return [f"агент не вызвал search_by_entity(company='ЦБ', tone='negative'), его вызовы: {shown}. "
            "Передайте функцию в tools агента (tools=[*lk.DEFAULT_TOOLS, search_by_entity]) и допишите "
            "к lk.SYSTEM_PROMPT, когда её звать (system=...)"]


@checker("инструмент search_by_entity (09)")
def check_entity_tool(func: Any, result: Any, *, lab: Any) -> list[str]:
    """Check the student's search_by_entity (schema, docstring, SQL, rows, safety) and the agent's choice."""
    if func is None or not callable(func):
        problems = [todo("search_by_entity", func) or "search_by_entity должна быть функцией"]
        return problems + [p for p in [todo("result", result)] if p]
    problems = _schema_problems(func)
    problems += [p for p in _source_problems(func) if p not in problems]
    for problem in _rows_problems(func, lab):  # a hint already given above is not repeated
        said = next((problem[: -len(hint)].rstrip(": ") for hint in problems if problem.endswith(hint)), None)
        problems.append(f"{said} (причина — выше)" if said else problem)
    if result is None:
        problems.append(todo("result", result) or "")
    else:
        problems += _agent_problems(result)
    return problems
