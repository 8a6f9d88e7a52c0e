"""Exercise 08: chat models' tool choice in one table, the accuracy per model and its bar chart.

``collect`` reads ``table`` (a row per model and question), ``accuracy`` and the chart's
axes ``ax`` as data. The cases recompute each row's ``correct`` from the labels, the
accuracy from the table and the bars from the accuracy; the grader also checks that the
model without tools appears as error rows, not as invented answers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

import pandas as pd

from labkit.agent.tools import DEFAULT_TOOLS
from labkit.core.context import Lab
from labkit.course.checks.cases import Answers, Case, Exercise
from labkit.course.checks.common import CheckResult, collected, jsonable, number, report, unfilled
from labkit.evaluation.tool_choice import AgentQuestion, choice_is_correct, load_agent_questions

__all__ = ["EXERCISE", "ModelsContext", "check_model_table", "exercise_questions"]

_NOT_GIVEN: Any = object()  # `ax` left out: callers from before the chart are checked without it
_CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)
_COLUMNS = ["model", "question", "tool", "arguments", "correct", "error"]
_MAX_ROWS = 1000  # collected rows; an exercise table has a few dozen


def exercise_questions(n: int) -> list[AgentQuestion]:
    """The first `n` labelled questions the lesson's two tools (or no tool) answer, interleaved by expected tool.

    Taught in 08_task_models: even a short list holds both tools and a question without a tool.
    """
    by_tool: dict[str, list[AgentQuestion]] = {}
    for q in load_agent_questions(tools=DEFAULT_TOOLS):
        by_tool.setdefault(q.tool or "—", []).append(q)
    return [q for group in zip_longest(*by_tool.values()) for q in group if q is not None][:n]


@dataclass(frozen=True)
class ModelsContext:
    """The models and questions the table must cover; the model that cannot call tools (grader only)."""

    models: Sequence[str]
    questions: Sequence[AgentQuestion]
    no_tools_model: str | None = None


# --- collecting the answers (in the student's kernel) ---------------------------------------------

def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)[:1000]


def _truth(value: Any) -> bool:
    if value is None or (number(value) is not None and number(value) == 0) or value is pd.NA:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    try:
        return bool(value)
    except (TypeError, ValueError):
        return False


def _collect_table(table: Any) -> dict[str, Any]:
    if unfilled(table):
        return {"state": "unfilled"}
    if not isinstance(table, pd.DataFrame):
        return {"state": "type", "type": type(table).__name__}
    columns = [str(c) for c in table.columns]
    rows = []
    if len(set(columns)) == len(columns):
        for record in table.head(_MAX_ROWS).to_dict("records"):
            arguments = record.get("arguments")
            rows.append({"model": _text(record.get("model")), "question": _text(record.get("question")),
                         "tool": _text(record.get("tool")), "correct": _truth(record.get("correct")),
                         "arguments": jsonable(arguments) if isinstance(arguments, Mapping) or arguments is None
                         else f"<{type(arguments).__name__}>",
                         "error": _text(record.get("error")) or ""})
    return {"state": "frame", "columns": columns, "rows": rows}


def _collect_accuracy(accuracy: Any) -> dict[str, Any]:
    if unfilled(accuracy):
        return {"state": "unfilled"}
    if not isinstance(accuracy, (Mapping, pd.Series)):
        return {"state": "type", "type": type(accuracy).__name__}
    return {"state": "shares", "values": {str(k): number(v) for k, v in list(dict(accuracy).items())[:100]}}


def _collect_ax(ax: Any) -> dict[str, Any]:
    if ax is _NOT_GIVEN:
        return {"state": "absent"}
    if unfilled(ax):
        return {"state": "unfilled"}
    if not hasattr(ax, "get_title") and getattr(ax, "axes", None):  # a Figure: take its first Axes
        ax = ax.axes[0]
    if not all(hasattr(ax, name) for name in ("patches", "get_title", "get_xlabel", "get_ylabel")):
        return {"state": "type", "type": type(ax).__name__}
    bars = [[number(p.get_height()), number(p.get_width())] for p in list(ax.patches)[:100]
            if hasattr(p, "get_height") and hasattr(p, "get_width")]
    return {"state": "axes", "bars": bars, "title": str(ax.get_title())[:300],
            "xlabel": str(ax.get_xlabel())[:300], "ylabel": str(ax.get_ylabel())[:300]}


def collect(namespace: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """The answers of exercise 08 from the notebook's variables (JSON-ready)."""
    return {"table": _collect_table(namespace.get("table")), "accuracy": _collect_accuracy(namespace.get("accuracy")),
            "ax": _collect_ax(namespace.get("ax"))}


# --- the cases -------------------------------------------------------------------------------------

def _rows(answers: Answers) -> tuple[list[dict[str, Any]] | None, list[str]]:
    """The table's rows, or the problems that prevent reading them."""
    answer = answers["table"]
    if problem := collected("table", answer):
        return None, [problem]
    if answer.get("state") != "frame":
        return None, [f"table должна быть pandas.DataFrame, а это {answer.get('type')}"]
    absent = [c for c in _COLUMNS if c not in answer["columns"]]
    if absent:
        return None, [f"в таблице нет столбцов: {', '.join(absent)} (нужны {', '.join(_COLUMNS)})"]
    if len(set(answer["columns"])) != len(answer["columns"]):
        return None, ["в таблице повторяются названия столбцов"]
    return answer["rows"], []


def _table_problems(answers: Answers, context: ModelsContext) -> list[str]:
    """A row per model and question: no model, question or row missing, none twice."""
    rows, problems = _rows(answers)
    if rows is None:
        return problems
    expected = [q.question for q in context.questions]
    for model in context.models:
        asked = [row["question"] for row in rows if row["model"] == model]
        if not asked:
            problems.append(f"нет строк модели {model}: даже если модель падает, её ошибка должна быть строкой таблицы "
                            "(оберните вызов lk.plan в try/except)")
            continue
        lost = [q for q in expected if q not in asked]
        if lost:
            problems.append(f"у модели {model} нет вопросов: {', '.join(lost[:3])}")
        if len(set(asked)) != len(asked):
            problems.append(f"у модели {model} есть повторяющиеся вопросы")
    return problems


def _correct_problems(answers: Answers, context: ModelsContext) -> list[str]:
    """Each row's `correct` agrees with the labels (lk.choice_is_correct); an error row is never correct."""
    rows, problems = _rows(answers)
    if rows is None:
        return problems
    expected = {q.question: q for q in context.questions}
    checked = 0
    for row in rows:
        q = expected.get(row["question"])
        if q is None or row["model"] not in context.models:
            continue
        checked += 1
        if row["error"]:
            if row["correct"]:
                return [f"{row['model']}, «{row['question']}»: строка с ошибкой не может быть верным ответом"]
            continue
        if not isinstance(row["arguments"], Mapping):
            return [f"{row['model']}, «{row['question']}»: arguments должен быть словарём (пустым, если аргументов нет)"]
        tool = None if row["tool"] in (None, "", "—") else row["tool"]
        right = all(choice_is_correct(q, tool, dict(row["arguments"])))
        if row["correct"] != right:
            return [f"{row['model']}, «{row['question']}»: correct={row['correct']}, а по разметке должно быть "
                    f"{right} (считайте его через lk.choice_is_correct)"]
    return [] if checked else ["в таблице нет ни одной строки с моделью и вопросом из списков models и questions"]


def _no_tools_problems(answers: Answers, context: ModelsContext) -> list[str]:
    """The model that cannot call tools (or is not on the server) shows up as error rows only."""
    rows, problems = _rows(answers)
    if rows is None:
        return problems
    model = context.no_tools_model
    if model is None:
        return []
    own = [row for row in rows if row["model"] == model]
    if not own:
        return [f"нет строк модели {model}"]
    if any(not row["error"] or row["correct"] for row in own):
        return [f"модель {model} не умеет вызывать инструменты (или её нет на сервере), поэтому каждая её строка — "
                "ошибка: текст в error и correct=False, а не выбор инструмента"]
    return []


def _shares(answers: Answers, context: ModelsContext) -> dict[str, float] | None:
    """The share of correct rows per model, from the student's table (None when it cannot be read)."""
    rows, _ = _rows(answers)
    if rows is None:
        return None
    shares = {}
    for model in context.models:
        own = [row["correct"] for row in rows if row["model"] == model]
        if not own:
            return None
        shares[model] = sum(own) / len(own)
    return shares


def _accuracy_problems(answers: Answers, context: ModelsContext) -> list[str]:
    """accuracy[model] is the share of correct rows of that model in the table."""
    answer = answers["accuracy"]
    if problem := collected("accuracy", answer):
        return [problem]
    if answer.get("state") != "shares":
        return ["accuracy должна быть Series или словарём {модель: доля верных}"]
    shares = _shares(answers, context)
    if shares is None:
        return ["accuracy считается по таблице table, а в ней нет строк каждой модели"]
    given = answer["values"]
    return [f"accuracy[{model}] должна быть {share:.3f} (доля correct в строках модели)"
            for model, share in shares.items()
            if given.get(model) is None or not math.isclose(given[model], share, abs_tol=1e-6)]


def _chart_problems(answers: Answers, context: ModelsContext) -> list[str]:
    """One bar per model at its accuracy, a Russian title and axis labels."""
    answer = answers["ax"]
    if problem := collected("ax", answer):
        return [problem]
    if answer.get("state") != "axes":
        return [f"ax должна быть осями matplotlib (например, из fig, ax = plt.subplots()), а это {answer.get('type')}"]
    shares = _shares(answers, context)
    if shares is None:
        return ["диаграмма строится из accuracy по таблице table, а в ней нет строк каждой модели"]
    problems = []
    bars = answer["bars"]
    if len(bars) != len(shares):
        problems.append(f"на диаграмме {len(bars)} столбцов, а моделей {len(shares)}: нужен один столбец на модель "
                        "(ax.bar(accuracy.index, accuracy.values))")
    else:
        want = sorted(shares.values())
        fits = [sorted(bar[side] or 0.0 for bar in bars) for side in (0, 1)]  # heights (ax.bar), widths (ax.barh)
        if not any(all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(want, got)) for got in fits):
            problems.append("высоты столбцов не равны точности моделей: стройте диаграмму из accuracy")
    for what, key in (("заголовок", "title"), ("подпись оси X", "xlabel"), ("подпись оси Y", "ylabel")):
        text = answer[key]
        if not text.strip():
            problems.append(f"у диаграммы нет: {what} (ax.set_title / ax.set_xlabel / ax.set_ylabel)")
        elif not _CYRILLIC.search(text):
            problems.append(f"{what} диаграммы — по-русски, а сейчас «{text}»")
    return problems


CASES: tuple[Case[ModelsContext], ...] = (
    Case("table: строка на каждую модель и каждый вопрос", 2, _table_problems),
    Case("correct пересчитан по разметке, строка с ошибкой неверна", 2, _correct_problems),
    Case("модель без инструментов — строки с ошибкой", 2, _no_tools_problems, hidden=True),
    Case("accuracy — доля верных по моделям", 2, _accuracy_problems),
    Case("диаграмма точности с русскими подписями", 2, _chart_problems),
)
_CHART = CASES[-1]


def _context(lab: Lab, parameters: Mapping[str, Any], seed: int) -> ModelsContext:
    """The grader's references: the models and questions of the notebook with the parameters it injected."""
    extra = str(parameters.get("EXTRA_MODEL") or lab.settings.no_tools_model)  # None: the stack's model without tools
    stack_models = [lab.chat_model, lab.settings.alt_chat_model]
    return ModelsContext(list(dict.fromkeys([*stack_models, extra])), exercise_questions(int(parameters["N_QUESTIONS"])),
                         None if extra in stack_models else extra)


EXERCISE: Exercise[ModelsContext] = Exercise(
    "08", "08_task_models.ipynb", "сравнение моделей по выбору инструмента (08)", CASES, collect, _context)


def check_model_table(
    table: Any, accuracy: Any, ax: Any = _NOT_GIVEN, *, models: Sequence[str], questions: Sequence[AgentQuestion]
) -> CheckResult:
    """Check the long table (a row per model and question), the accuracy per model and, if given, the chart `ax`.

    Taught in 08_task_models. Prints the verdict and the points of each visible case.
    """
    cases = CASES if ax is not _NOT_GIVEN else tuple(case for case in CASES if case is not _CHART)
    return report(EXERCISE, {"table": table, "accuracy": accuracy, "ax": ax}, ModelsContext(models, questions), cases)
