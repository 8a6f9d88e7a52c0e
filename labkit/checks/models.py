"""Checker of exercise 08: chat models' tool choice in one table, the accuracy per model and its bar chart."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ..agent_eval import AgentQuestion, choice_is_correct
from .common import checker, todo

__all__ = ["check_model_table"]

_NOT_GIVEN: Any = object()  # `ax` left out: callers from before the chart are checked without it
_CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)


# --- 08: models, one table, one chart --------------------------------------------------------

def _table_problems(table: pd.DataFrame, models: Sequence[str], questions: Sequence[AgentQuestion]) -> list[str]:
    """What is wrong with the long table: missing columns, models, questions, or a wrong `correct`."""
    needed = ["model", "question", "tool", "arguments", "correct", "error"]
    absent = [c for c in needed if c not in table.columns]
    if absent:
        return [f"в таблице нет столбцов: {', '.join(absent)} (нужны {', '.join(needed)})"]
    problems = []
    expected = {q.question: q for q in questions}
    for model in models:
        rows = table[table["model"] == model]
        if rows.empty:
            problems.append(f"нет строк модели {model}: даже если модель падает, её ошибка должна быть строкой таблицы "
                            "(оберните вызов lk.plan в try/except)")
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
                                f"а по разметке должно быть {right} (считайте его через lk.choice_is_correct)")
                break
    return problems


def _chart_problems(ax: Any, shares: Mapping[str, float]) -> list[str]:
    """What is wrong with the bar chart: one bar per model at its accuracy, a Russian title and axis labels."""
    if not hasattr(ax, "get_title") and getattr(ax, "axes", None):  # a Figure: take its first Axes
        ax = ax.axes[0]
    if not all(hasattr(ax, name) for name in ("patches", "get_title", "get_xlabel", "get_ylabel")):
        return [f"ax должна быть осями matplotlib (например, из fig, ax = plt.subplots()), а это {type(ax).__name__}"]
    bars = [p for p in ax.patches if hasattr(p, "get_height") and hasattr(p, "get_width")]
    problems = []
    if len(bars) != len(shares):
        problems.append(f"на диаграмме {len(bars)} столбцов, а моделей {len(shares)}: нужен один столбец на модель "
                        "(ax.bar(accuracy.index, accuracy.values))")
    else:
        want = sorted(shares.values())
        heights = sorted(float(p.get_height()) for p in bars)  # ax.bar
        widths = sorted(float(p.get_width()) for p in bars)  # ax.barh
        if not any(all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(want, got)) for got in (heights, widths)):
            problems.append("высоты столбцов не равны точности моделей: стройте диаграмму из accuracy")
    for what, text in (("заголовок", ax.get_title()), ("подпись оси X", ax.get_xlabel()),
                       ("подпись оси Y", ax.get_ylabel())):
        if not str(text).strip():
            problems.append(f"у диаграммы нет: {what} (ax.set_title / ax.set_xlabel / ax.set_ylabel)")
        elif not _CYRILLIC.search(str(text)):
            problems.append(f"{what} диаграммы — по-русски, а сейчас «{text}»")
    return problems


@checker("сравнение моделей по выбору инструмента (08)")
def check_model_table(
    table: Any, accuracy: Any, ax: Any = _NOT_GIVEN, *, models: Sequence[str], questions: Sequence[AgentQuestion]
) -> list[str]:
    """Check the long table (a row per model and question), the accuracy per model and, if given, the chart `ax`."""
    unfilled = [table, accuracy] + ([] if ax is _NOT_GIVEN else [ax])
    problems = [p for p in (todo(name, value) for name, value in zip(("table", "accuracy", "ax"), unfilled)) if p]
    if todo("table", table):
        return problems
    if not isinstance(table, pd.DataFrame):
        return [f"table должна быть pandas.DataFrame, а это {type(table).__name__}"]
    problems += _table_problems(table, models, questions)
    if problems:
        return problems
    given = dict(accuracy) if isinstance(accuracy, (Mapping, pd.Series)) else None
    if given is None:
        return ["accuracy должна быть Series или словарём {модель: доля верных}"]
    shares = {model: float(table[table["model"] == model]["correct"].astype(bool).mean()) for model in models}
    for model, share in shares.items():
        if model not in given or not math.isclose(float(given[model]), share, abs_tol=1e-6):
            problems.append(f"accuracy[{model}] должна быть {share:.3f} (доля correct в строках модели)")
    if ax is not _NOT_GIVEN and not problems:
        problems += _chart_problems(ax, shares)
    return problems
