"""Checkers for the exercises 07-09: they recompute the answer with labkit and explain, in Russian, what differs.

Each checker prints «Проверка пройдена» or the list of problems and returns a
``CheckResult``; it never raises, so a starter notebook ends with advice, not a traceback.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .agent_eval import AgentQuestion, choice_is_correct
from .corpus import COMPANIES, TONES, LabelledQuery
from .fusion import rrf
from .metrics import mean_metric
from .ranking import ids
from .text import ERROR_CHARS, shorten
from .tools import search_by_entity, tool_schema

__all__ = ["CheckResult", "check_entity_tool", "check_model_table", "check_weighted_rrf"]


@dataclass
class CheckResult:
    """Verdict of one checker: ``passed`` and the problems found (empty when passed)."""

    exercise: str
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems

    def __bool__(self) -> bool:
        return self.passed

    def message(self) -> str:
        """The Russian verdict the checker prints."""
        if self.passed:
            return f"Проверка пройдена: {self.exercise}."
        lines = "\n".join(f"  - {p}" for p in self.problems)
        return f"Проверка не пройдена: {self.exercise}. Что исправить:\n{lines}"


def _checker(exercise: str) -> Callable[[Callable[..., list[str]]], Callable[..., CheckResult]]:
    """Turn a function returning a list of problems into a printing, never-raising checker."""

    def wrap(func: Callable[..., list[str]]) -> Callable[..., CheckResult]:
        @functools.wraps(func)
        def checker(*args: Any, **kwargs: Any) -> CheckResult:
            try:
                problems = func(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 (a checker must never end in a traceback)
                reason = shorten(f"{type(exc).__name__}: {exc}", ERROR_CHARS)
                problems = [(f"проверка не смогла выполниться ({reason}); "
                             "проверьте, что ячейки с TODO выполнены без ошибок")]
            result = CheckResult(exercise, problems)
            print(result.message())
            return result

        return checker

    return wrap


def _todo(name: str, value: Any) -> str | None:
    """A problem message when a result variable is still unfilled."""
    if value is None or value is NotImplemented:
        return f"переменная {name} не заполнена: допишите ячейку с TODO и выполните её"
    return None


# --- 07: weighted RRF ------------------------------------------------------------------------

def _mean_recall(queries: Sequence[LabelledQuery], rankings: Mapping[str, Sequence[Sequence[int]]],
                 rrf_k: int, w_vector: float, top_k: int) -> float:
    fused = [ids(rrf([list(rankings[q.query][0]), list(rankings[q.query][1])], rrf_k, (w_vector, 1.0)))
             for q in queries]
    return mean_metric("recall", fused, queries, top_k)


@_checker("взвешенный RRF и подбор k (07)")
def check_weighted_rrf(
    grid: Any,
    best: Any,
    test_recall: Any,
    *,
    rankings: Mapping[str, Sequence[Sequence[int]]],
    train: Sequence[LabelledQuery],
    test: Sequence[LabelledQuery],
    top_k: int = 3,
) -> list[str]:
    """Check the grid (index: rrf_k, columns: vector weight, lexical weight 1), the pick on train and the test score."""
    problems = [p for p in (_todo("grid", grid), _todo("best", best), _todo("test_recall", test_recall)) if p]
    if problems:
        return problems
    if not isinstance(grid, pd.DataFrame):
        return [("grid должен быть pandas.DataFrame (строки: rrf_k, столбцы: вес векторной ветки), "
                 f"а это {type(grid).__name__}")]
    if len(grid.index) < 3 or len(grid.columns) < 3:
        problems.append("переберите хотя бы 3 значения rrf_k и 3 веса векторной ветки")
    missing = sorted({q.query for q in [*train, *test]} - set(rankings))
    if missing:
        return [f"в rankings нет ранжирований для запросов: {', '.join(missing[:3])}; выполните ячейку с rankings"]
    for rrf_k in grid.index:
        for w in grid.columns:
            given = float(grid.loc[rrf_k, w])
            expected = _mean_recall(train, rankings, int(rrf_k), float(w), top_k)
            if math.isclose(given, expected, abs_tol=1e-6):
                continue
            if math.isclose(given, _mean_recall([*train, *test], rankings, int(rrf_k), float(w), top_k), abs_tol=1e-6):
                problems.append("таблица посчитана на всех запросах: веса подбирают только на обучающих (train), "
                                "тестовые (test) нужны для честной оценки")
            elif math.isclose(given, _mean_recall(test, rankings, int(rrf_k), float(w), top_k), abs_tol=1e-6):
                problems.append("таблица посчитана на тестовых запросах, а подбирать веса нужно на train")
            else:
                problems.append(f"при rrf_k={rrf_k}, весе {w}: у вас Recall@{top_k} = {given:.3f}, ожидалось {expected:.3f} "
                                f"(среднее по train, веса (w, 1.0) в порядке (вектор, лексика))")
            return problems
    try:
        if isinstance(best, Mapping):
            best_k, best_w = best.get("rrf_k", best.get("k")), best["w_vector"]
        else:
            best_k, best_w = best
    except (TypeError, ValueError, KeyError):
        return problems + ["best должен быть словарём {'rrf_k': ..., 'w_vector': ...} или парой (rrf_k, w_vector)"]
    top = float(grid.to_numpy().max())
    if best_k not in grid.index or best_w not in grid.columns:
        problems.append(f"best = ({best_k}, {best_w}) нет в таблице grid")
    elif not math.isclose(float(grid.loc[best_k, best_w]), top, abs_tol=1e-9):
        problems.append(f"best = ({best_k}, {best_w}) даёт {float(grid.loc[best_k, best_w]):.3f} на train, "
                        f"а максимум таблицы {top:.3f}")
    if problems:
        return problems
    expected_test = _mean_recall(test, rankings, int(best_k), float(best_w), top_k)
    if not math.isclose(float(test_recall), expected_test, abs_tol=1e-6):
        if math.isclose(float(test_recall), top, abs_tol=1e-6):
            problems.append("test_recall совпадает с результатом на train: посчитайте его на тестовых запросах")
        else:
            problems.append(f"test_recall = {float(test_recall):.3f}, а для best на test выходит {expected_test:.3f}")
    return problems


# --- 08: two models, one table ---------------------------------------------------------------

@_checker("сравнение моделей по выбору инструмента (08)")
def check_model_table(
    table: Any, accuracy: Any, *, models: Sequence[str], questions: Sequence[AgentQuestion]
) -> list[str]:
    """Check the long table (a row per model and question) and the accuracy per model."""
    problems = [p for p in (_todo("table", table), _todo("accuracy", accuracy)) if p]
    if problems:
        return problems
    if not isinstance(table, pd.DataFrame):
        return [f"table должна быть pandas.DataFrame, а это {type(table).__name__}"]
    needed = ["model", "question", "tool", "arguments", "correct", "error"]
    absent = [c for c in needed if c not in table.columns]
    if absent:
        return [f"в таблице нет столбцов: {', '.join(absent)} (нужны {', '.join(needed)})"]
    expected = {q.question: q for q in questions}
    for model in models:
        rows = table[table["model"] == model]
        if rows.empty:
            problems.append(f"нет строк модели {model}: даже если модель падает, её ошибка должна быть строкой таблицы")
            continue
        lost = [q for q in expected if q not in set(rows["question"])]
        if lost:
            problems.append(f"у модели {model} нет вопросов: {', '.join(lost[:3])}")
        if rows["question"].duplicated().any():
            problems.append(f"у модели {model} есть повторяющиеся вопросы")
        for row in rows.itertuples():
            q = expected.get(row.question)
            if q is None:
                continue
            if row.error:
                if bool(row.correct):
                    problems.append(f"{model}, «{row.question}»: строка с ошибкой не может быть верным ответом")
                    break
                continue
            tool = None if row.tool in (None, "", "—") else row.tool
            right = all(choice_is_correct(q, tool, dict(row.arguments or {})))
            if bool(row.correct) != right:
                problems.append(f"{model}, «{row.question}»: correct={bool(row.correct)}, "
                                f"а по разметке должно быть {right}")
                break
    if problems:
        return problems
    given = dict(accuracy) if isinstance(accuracy, (Mapping, pd.Series)) else None
    if given is None:
        return ["accuracy должна быть Series или словарём {модель: доля верных}"]
    for model in models:
        share = float(table[table["model"] == model]["correct"].astype(bool).mean())
        if model not in given or not math.isclose(float(given[model]), share, abs_tol=1e-6):
            problems.append(f"accuracy[{model}] должна быть {share:.3f} (доля correct в строках модели)")
    return problems


# --- 09: the third tool ----------------------------------------------------------------------

_ENTITY_CASES: list[dict[str, str | None]] = [
    {"company": "ЦБ", "tone": "negative"},
    {"company": "Сбербанк", "tone": None},
    {"company": None, "tone": "positive"},
    {"company": "Яндекс", "tone": "negative"},
    {"company": "ЦБ' OR '1'='1", "tone": None},  # must find nothing: parameters, not string formatting
]


def _row_ids(rows: Any) -> list[int]:
    return [int(r["id"] if isinstance(r, Mapping) else r[0]) for r in rows]


@_checker("инструмент search_by_entity (09)")
def check_entity_tool(func: Any, result: Any, *, lab: Any) -> list[str]:
    """Check the student's search_by_entity (schema, SQL results, safety) and the agent's choice."""
    problems = [p for p in (_todo("search_by_entity", func), _todo("result", result)) if p]
    if func is None or not callable(func):
        return problems or ["search_by_entity должна быть функцией"]
    if getattr(func, "__name__", "") != "search_by_entity":
        problems.append("функция должна называться search_by_entity: это имя увидит модель")
    params = tool_schema(func)["function"]["parameters"]
    props = params["properties"]
    if set(props) != {"company", "tone"}:
        problems.append(f"аргументы инструмента: {', '.join(props) or 'нет'}; нужны company и tone (кроме первого, lab)")
    else:
        if props["company"].get("enum") != list(COMPANIES):
            problems.append("у company нет перечня компаний: аннотируйте его как lk.Company | None")
        if props["tone"].get("enum") != list(TONES):
            problems.append("у tone нет перечня тональностей: аннотируйте его как lk.Tone | None")
        if params["required"]:
            problems.append("company и tone должны быть необязательными (значение по умолчанию None)")
        if not all(p.get("description") for p in props.values()):
            problems.append("опишите company и tone в разделе Args: докстринга, модель читает эти описания")
    for case in _ENTITY_CASES:
        shown = ", ".join(f"{k}={v!r}" for k, v in case.items())
        try:
            got = _row_ids(func(lab, **case))
        except Exception as exc:  # noqa: BLE001 (the student's code may fail in any way)
            reason = shorten(f"{type(exc).__name__}: {exc}", ERROR_CHARS)
            problems.append(f"search_by_entity(lab, {shown}) упала: {reason}")
            break  # one traceback-like line is enough
        want = _row_ids(search_by_entity(lab, **case))
        if got != want:
            problems.append(f"search_by_entity(lab, {shown}) вернула id {got}, ожидались {want} "
                            "(фильтр в SQL через параметры, ORDER BY id, не больше 5 строк)")
    if result is None:
        return problems
    calls = getattr(result, "tool_calls", None)
    if calls is None and isinstance(result, Mapping):
        calls = result.get("tool_calls")
    if not isinstance(calls, list):
        return problems + ["result должен быть результатом agent.ask(...)"]
    for call in calls:
        args = call.get("arguments") or {}
        if (call.get("name") == "search_by_entity" and str(args.get("company", "")).casefold() == "цб"
                and str(args.get("tone", "")).casefold() == "negative"):
            return problems
    shown = "; ".join(f"{c.get('name')}({c.get('arguments')})" for c in calls) or "инструмент не вызван"
    problems.append(f"агент не вызвал search_by_entity(company='ЦБ', tone='negative'), его вызовы: {shown}. "
                    "Передайте функцию в tools агента и подскажите в системном промпте, когда её звать")
    return problems
