"""Exercise 07: weighted RRF written by hand, the rrf_k × weight grid on train, the pick reported on test.

``collect`` calls the student's ``weighted_rrf(rankings, weights, rrf_k)`` on fixed inputs
(each built so that one typical mistake shows) and, for the grader, on random inputs made
from the run's seed; ``grid``, ``best`` and ``test_recall`` are collected as data. The cases
compare them with ``labkit.rrf`` and with the grid recomputed on train; a mismatch is
explained by the mistake it matches (rank from 0, ties by the larger id, ...).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from numbers import Integral
from types import CodeType
from typing import Any

import pandas as pd

from labkit.core.context import Lab
from labkit.core.corpora import load_queries
from labkit.core.corpora.news import HELDOUT_PATH
from labkit.core.corpus import LabelledQuery
from labkit.core.ranking import ids
from labkit.course.checks.cases import Answers, Case, Exercise
from labkit.course.checks.common import (
    CallTimeout,
    CheckResult,
    call_limited,
    collected,
    failure,
    jsonable,
    number,
    report,
    unfilled,
)
from labkit.evaluation.metrics import mean_metric
from labkit.retrieval.branches.lexical import search_lexical
from labkit.retrieval.branches.vector import search_vector
from labkit.retrieval.fusion import rrf

__all__ = ["EXERCISE", "RrfContext", "check_weighted_rrf", "random_cases"]

RrfCase = tuple[list[list[int]], tuple[float, ...], int]  # rankings, weights, rrf_k

# Each fixed case lets one typical mistake show (the hint that follows names it).
_FIXED_CASES: list[RrfCase] = [
    ([[1, 2, 3], [3, 1, 4]], (1.0, 1.0), 60),  # plain RRF; 2 and 4 are in one list only
    ([[5, 3], [3, 5]], (1.0, 1.0), 60),  # a tie: the smaller id (3) goes first
    ([[7, 8, 9], [9, 8, 7]], (2.0, 1.0), 1),  # the weight of the first list decides
    ([[4, 2, 6], [6, 4]], (1.0, 3.0), 0),  # rrf_k=0: ranks must start at 1
    ([[10, 20], []], (0.5, 1.0), 5),  # an empty branch
]
_RANDOM_CASES = 40
_FORBIDDEN = {"rrf", "fuse", "search_fused", "search_hybrid", "from_scores"}  # labkit does the exercise for you
_MAX_IDS = 100  # longer answers are cut when collected: every right answer here is shorter


def random_cases(seed: int) -> list[RrfCase]:
    """Random rankings over small ids (overlaps and ties happen), weights that are powers of two (exact in floats)."""
    rng = random.Random(seed)
    cases: list[RrfCase] = []
    for _ in range(_RANDOM_CASES):
        rankings = [rng.sample(range(1, 16), rng.randint(0, 8)) for _ in range(rng.choice([2, 2, 3]))]
        weights = tuple(rng.choice([0.25, 0.5, 1.0, 2.0, 4.0]) for _ in rankings)
        cases.append((rankings, weights, rng.choice([0, 1, 5, 60])))
    return cases


@dataclass(frozen=True)
class RrfContext:
    """What the cases compare with: both branches' rankings per query, the splits, the cut-off, the hidden seed."""

    rankings: Mapping[str, Sequence[Sequence[int]]]
    train: Sequence[LabelledQuery]
    test: Sequence[LabelledQuery]
    top_k: int = 3
    seed: int | None = None  # the random cases' seed (grader only)


# --- the reference and the typical mistakes ----------------------------------------------------

def _fused(rankings: Sequence[Sequence[int]], weights: Sequence[float], rrf_k: int, *, first_rank: int = 1,
           use_weights: bool = True, use_k: bool = True) -> dict[int, Fraction]:
    """Exact RRF scores (fractions); the switches reproduce typical mistakes."""
    scores: dict[int, Fraction] = {}
    for weight, ranking in zip(weights, rankings):
        w = Fraction(weight) if use_weights else Fraction(1)
        for rank, doc in enumerate(ranking, start=first_rank):
            denominator = (rrf_k if use_k else 0) + rank
            scores[doc] = scores.get(doc, Fraction(0)) + (w / denominator if denominator else Fraction(0))
    return scores


def _order(scores: Mapping[int, Fraction], tie: str = "id") -> list[int]:
    """Ids best first; ties by the smaller id ("id"), the larger ("desc") or first seen ("seen")."""
    if tie == "seen":
        return sorted(scores, key=lambda d: -scores[d])
    sign = -1 if tie == "desc" else 1
    return sorted(scores, key=lambda d: (-scores[d], sign * d))


# A mistake -> (its ranking, the hint). Checked in this order against a wrong answer.
_MISTAKES: list[tuple[Callable[[RrfCase], list[int]], str]] = [
    (lambda c: _order(_fused(*c, first_rank=0)),
     "место считается с 1: первый документ списка получает weight / (rrf_k + 1), "
     "используйте enumerate(ranking, start=1)"),
    (lambda c: _order(_fused(*c), "desc"),
     "при равных суммах выше должен стоять документ с меньшим id: сортируйте по ключу (-сумма, id)"),
    (lambda c: _order(_fused(*c), "seen"),
     "при равных суммах порядок не должен зависеть от того, какой документ встретился раньше: "
     "сортируйте по ключу (-сумма, id), меньший id выше"),
    (lambda c: _order(_fused(*c))[::-1],
     "порядок перевёрнут: лучший документ (с наибольшей суммой) должен идти первым"),
    (lambda c: _order(_fused(*c, use_weights=False)),
     "веса не учтены: вклад документа из i-го списка — weights[i] / (rrf_k + место)"),
    (lambda c: _order(_fused(c[0], tuple(reversed(c[1])), c[2])),
     "веса перепутаны местами: weights[i] умножает вклад i-го списка rankings[i]"),
    (lambda c: _order(_fused(*c, use_k=False)),
     "в знаменателе нет rrf_k: вклад — weight / (rrf_k + место)"),
    (lambda c: [d for d in _order(_fused(*c)) if all(d in r for r in c[0])],
     "в ответе должны быть все документы из всех списков: документ из одного списка тоже получает очки"),
]


# --- collecting the answers (in the student's kernel) ---------------------------------------------

def _code_names(code: CodeType) -> Iterator[str]:
    """Every global or attribute name a function's code (and its nested functions) uses."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _code_names(const)


def _shown(case: RrfCase) -> str:
    rankings, weights, rrf_k = case
    return f"weighted_rrf({rankings}, {tuple(weights)}, rrf_k={rrf_k})"


def _as_ids(value: Any) -> list[int] | str:
    """The answer as a list of ids, or the Russian reason why it is not one."""
    if value is None:
        return ("weighted_rrf возвращает None: допишите тело функции в первой ячейке с TODO "
                "(return список id, лучший первым)")
    if not isinstance(value, (list, tuple)):
        return f"weighted_rrf должна вернуть список id, а вернула {type(value).__name__}"
    if value and not all(isinstance(v, Integral) and not isinstance(v, bool) for v in value):
        return ("weighted_rrf должна вернуть список id (целые числа), а не пары (id, сумма) или Hit: "
                "например [doc_id for doc_id, score in ...]")
    return [int(v) for v in value[:_MAX_IDS]]


def _call(func: Callable[..., Any], case: RrfCase) -> list[int] | str:
    """The student's answer on one case, or the Russian reason it is not a list of ids (a failure included)."""
    rankings, weights, rrf_k = case
    try:
        return _as_ids(call_limited(func, [list(r) for r in rankings], tuple(weights), rrf_k))
    except ZeroDivisionError:
        return (f"{_shown(case)} упала с делением на ноль: место считается с 1, "
                "поэтому rrf_k + место > 0 даже при rrf_k=0 (enumerate(ranking, start=1))")
    except (Exception, CallTimeout) as exc:  # noqa: BLE001 (the student's code may fail in any way)
        return f"{_shown(case)} упала: {failure(exc)}"


def _calls(func: Callable[..., Any], cases: Sequence[RrfCase]) -> list[list[int] | str]:
    """Answers on `cases`; after a call that ran out of time the rest are not tried."""
    answers: list[list[int] | str] = []
    for case in cases:
        answer = _call(func, case)
        answers.append(answer)
        if isinstance(answer, str) and "не уложилась" in answer:
            break
    return answers


def _collect_function(func: Any, seed: int | None) -> dict[str, Any]:
    if unfilled(func):
        return {"state": "unfilled"}
    if not callable(func):
        return {"state": "type", "type": type(func).__name__}
    code = getattr(func, "__code__", None)
    forbidden = sorted(_FORBIDDEN & set(_code_names(code))) if isinstance(code, CodeType) else []
    return {"state": "function", "forbidden": forbidden, "fixed": _calls(func, _FIXED_CASES),
            "hidden": _calls(func, random_cases(seed)) if seed is not None else None}


def _collect_grid(grid: Any) -> dict[str, Any]:
    if unfilled(grid):
        return {"state": "unfilled"}
    if not isinstance(grid, pd.DataFrame):
        return {"state": "type", "type": type(grid).__name__}
    part = grid.iloc[:50, :50]
    return {"state": "frame", "index": [jsonable(v) for v in part.index], "columns": [jsonable(v) for v in part.columns],
            "values": [[number(v) for v in row] for row in part.to_numpy()], "shape": list(grid.shape)}


def _collect_best(best: Any) -> dict[str, Any]:
    if unfilled(best):
        return {"state": "unfilled"}
    try:
        if isinstance(best, Mapping):
            best_k, best_w = best.get("rrf_k", best.get("k")), best["w_vector"]
        else:
            best_k, best_w = best
    except (TypeError, ValueError, KeyError):
        return {"state": "type", "type": type(best).__name__}
    return {"state": "pair", "rrf_k": jsonable(best_k), "w_vector": jsonable(best_w)}


def _collect_number(value: Any) -> dict[str, Any]:
    if unfilled(value):
        return {"state": "unfilled"}
    found = number(value)
    return {"state": "number", "value": found} if found is not None else {"state": "type", "type": type(value).__name__}


def collect(namespace: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """The answers of exercise 07 from the notebook's variables (JSON-ready)."""
    return {"weighted_rrf": _collect_function(namespace.get("weighted_rrf"), seed),
            "grid": _collect_grid(namespace.get("grid")), "best": _collect_best(namespace.get("best")),
            "test_recall": _collect_number(namespace.get("test_recall"))}


# --- the cases -------------------------------------------------------------------------------------

def _function_problems(answer: Mapping[str, Any]) -> list[str]:
    """Why there is no function to compare (empty when there is one)."""
    if problem := collected("weighted_rrf", answer):
        return [problem]
    if answer.get("state") != "function":
        return [f"weighted_rrf должна быть функцией, а это {answer.get('type')}"]
    if answer["forbidden"]:
        return [f"weighted_rrf вызывает {', '.join(answer['forbidden'])} из labkit: в этом задании слияние пишется "
                "руками (словарь id -> сумма weight / (rrf_k + место), затем сортировка)"]
    return []


def _first_mismatch(cases: Sequence[RrfCase], answers: Sequence[Any], fixed: Sequence[Any], where: str) -> list[str]:
    """The first answer that differs from labkit.rrf, explained by the mistake every fixed answer fits."""
    if len(answers) < len(cases) and (not answers or not isinstance(answers[-1], str)):
        return ["ответов меньше, чем примеров: проверка не дождалась функции"]
    for case, got in zip(cases, answers):
        if isinstance(got, str):
            return [got]
        want = ids(rrf(case[0], case[2], case[1]))
        if got == want or got == _order(_fused(*case)):  # labkit.rrf, or the exact order if floats round apart
            continue
        shown = [(c, a) for c, a in zip(_FIXED_CASES, fixed) if isinstance(a, list)]
        hint = next((h for mistake, h in _MISTAKES
                     if got == mistake(case) and all(a == mistake(c) for c, a in shown)), None)
        if hint is None and sorted(got) != sorted(want):
            hint = "в ответе должен быть каждый документ из списков ровно один раз"
        return [f"{where} {_shown(case)} вернула {got}, а должно быть {want}"
                + (f": {hint}" if hint else " (сумма weights[i] / (rrf_k + место), место с 1, при равенстве меньший id)")]
    return []


def _fixed_problems(answers: Answers, _context: RrfContext) -> list[str]:
    answer = answers["weighted_rrf"]
    return _function_problems(answer) or _first_mismatch(_FIXED_CASES, answer["fixed"], answer["fixed"],
                                                         "на фиксированном примере")


def _hidden_problems(answers: Answers, context: RrfContext) -> list[str]:
    answer = answers["weighted_rrf"]
    if problems := _function_problems(answer):
        return problems
    if context.seed is None or answer.get("hidden") is None:
        return ["случайные примеры не запускались"]
    return _first_mismatch(random_cases(context.seed), answer["hidden"], answer["fixed"], "на случайном примере")


def _mean_recall(context: RrfContext, queries: Sequence[LabelledQuery], rrf_k: int, w_vector: float) -> float:
    fused = [ids(rrf([list(context.rankings[q.query][0]), list(context.rankings[q.query][1])], rrf_k, (w_vector, 1.0)))
             for q in queries]
    return mean_metric("recall", fused, queries, context.top_k)


def _grid(answer: Mapping[str, Any]) -> tuple[pd.DataFrame | None, list[str]]:
    """The collected grid as a DataFrame, or the problems that prevent reading it."""
    if problem := collected("grid", answer):
        return None, [problem]
    if answer.get("state") != "frame":
        return None, [("grid должен быть pandas.DataFrame (строки: rrf_k, столбцы: вес векторной ветки), "
                       f"а это {answer.get('type')}")]
    if answer["shape"][0] < 3 or answer["shape"][1] < 3:
        return None, ["переберите хотя бы три значения rrf_k и три веса векторной ветки"]
    labels = [*answer["index"], *answer["columns"]]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in labels):
        return None, ["строки grid — числа rrf_k, столбцы — числа, веса векторной ветки (а сейчас подписи не числа)"]
    return pd.DataFrame(answer["values"], index=answer["index"], columns=answer["columns"]), []


def _missing_rankings(context: RrfContext) -> list[str]:
    missing = sorted({q.query for q in [*context.train, *context.test]} - set(context.rankings))
    return [f"в rankings нет ранжирований для запросов: {', '.join(missing[:3])}; выполните ячейку с rankings"] if missing else []


def _grid_problems(answers: Answers, context: RrfContext) -> list[str]:
    """The first wrong cell of the grid, explained (all queries, test, transposed, or just wrong)."""
    grid, problems = _grid(answers["grid"])
    if grid is None:
        return problems
    if missing := _missing_rankings(context):
        return missing
    train, test, top_k = context.train, context.test, context.top_k
    for rrf_k in grid.index:
        for w in grid.columns:
            given = grid.loc[rrf_k, w]
            expected = _mean_recall(context, train, int(rrf_k), float(w))
            if given is not None and not pd.isna(given) and math.isclose(float(given), expected, abs_tol=1e-6):
                continue
            if given is None or pd.isna(given):
                return [f"при rrf_k={rrf_k}, весе {w}: в grid не число, ожидалось {expected:.3f}"]
            given = float(given)
            if math.isclose(given, _mean_recall(context, [*train, *test], int(rrf_k), float(w)), abs_tol=1e-6):
                return ["таблица посчитана на всех запросах: веса подбирают только на обучающих (train), "
                        "тестовые (test) нужны для честной оценки"]
            if math.isclose(given, _mean_recall(context, test, int(rrf_k), float(w)), abs_tol=1e-6):
                return ["таблица посчитана на тестовых запросах, а подбирать веса нужно на train"]
            if float(rrf_k) > 0 and math.isclose(given, _mean_recall(context, train, int(w), float(rrf_k)), abs_tol=1e-6):
                return ["строки и столбцы перепутаны: строки grid — значения rrf_k, столбцы — вес векторной ветки"]
            return [f"при rrf_k={rrf_k}, весе {w}: у вас Recall@{top_k} = {given:.3f}, ожидалось {expected:.3f} "
                    f"(среднее по train; веса (w, 1.0) в порядке (вектор, лексика); "
                    "среднее удобно считать через lk.mean_metric)"]
    return []


def _best(answer: Mapping[str, Any]) -> tuple[tuple[float, float] | None, list[str]]:
    if problem := collected("best", answer):
        return None, [problem]
    best_k, best_w = number(answer.get("rrf_k")), number(answer.get("w_vector"))
    if answer.get("state") != "pair" or best_k is None or best_w is None:
        return None, ["best должен быть словарём {'rrf_k': ..., 'w_vector': ...} или парой (rrf_k, w_vector) чисел"]
    return (best_k, best_w), []


def _best_problems(answers: Answers, context: RrfContext) -> list[str]:
    """best is a cell of the grid with the largest mean (of the student's grid or of the right one on its labels)."""
    pair, problems = _best(answers["best"])
    grid, grid_problems = _grid(answers["grid"])
    if pair is None:
        return problems
    if grid is None:
        return [f"best выбирается из таблицы grid, а её нет: {grid_problems[0]}"]
    if missing := _missing_rankings(context):
        return missing
    best_k, best_w = pair
    if best_k not in grid.index or best_w not in grid.columns:
        return [f"best = ({best_k:g}, {best_w:g}) нет в таблице grid"]
    right = pd.DataFrame([[_mean_recall(context, context.train, int(k), float(w)) for w in grid.columns]
                          for k in grid.index], index=grid.index, columns=grid.columns)
    own = grid.apply(pd.to_numeric, errors="coerce")
    for table in (own, right):
        top = float(table.to_numpy().max())
        if math.isclose(float(table.loc[best_k, best_w]), top, abs_tol=1e-9):
            return []
    top = float(right.to_numpy().max())
    return [f"best = ({best_k:g}, {best_w:g}) даёт {float(right.loc[best_k, best_w]):.3f} на train, "
            f"а максимум таблицы {top:.3f}: выберите ячейку с максимумом (grid.stack().idxmax())"]


def _test_problems(answers: Answers, context: RrfContext) -> list[str]:
    """test_recall is the mean Recall@k of best on test."""
    answer = answers["test_recall"]
    if problem := collected("test_recall", answer):
        return [problem]
    if answer.get("state") != "number":
        return [f"test_recall должен быть числом, а это {answer.get('type')}"]
    pair, problems = _best(answers["best"])
    if pair is None:
        return [f"test_recall считается для best, а best не задан: {problems[0]}"]
    if missing := _missing_rankings(context):
        return missing
    given, (best_k, best_w) = answer["value"], pair
    expected = _mean_recall(context, context.test, int(best_k), float(best_w))
    if math.isclose(given, expected, abs_tol=1e-6):
        return []
    if math.isclose(given, _mean_recall(context, context.train, int(best_k), float(best_w)), abs_tol=1e-6):
        return ["test_recall совпадает с результатом на train: посчитайте его на тестовых запросах (test)"]
    return [f"test_recall = {given:.3f}, а для best на test выходит {expected:.3f}"]


CASES: tuple[Case[RrfContext], ...] = (
    Case("weighted_rrf совпадает с lk.rrf на готовых примерах", 3, _fixed_problems),
    Case("weighted_rrf совпадает с lk.rrf на случайных примерах", 2, _hidden_problems, hidden=True),
    Case("таблица grid: средний Recall@k на train", 3, _grid_problems),
    Case("best — ячейка grid с максимумом", 1, _best_problems),
    Case("test_recall — Recall@k выбранного сочетания на test", 1, _test_problems),
)


def _context(lab: Lab, parameters: Mapping[str, Any], seed: int) -> RrfContext:
    """The grader's references: both branches' rankings of every query on its own database."""
    train, test = load_queries(), load_queries(HELDOUT_PATH)
    depth = int(parameters["DEPTH"])
    rankings = {q.query: [ids(search_vector(lab, q.query, depth)), ids(search_lexical(lab, q.query, depth))]
                for q in [*train, *test]}
    return RrfContext(rankings, train, test, int(parameters["TOP_K"]), seed)


EXERCISE: Exercise[RrfContext] = Exercise(
    "07", "07_task_weighted_rrf.ipynb", "взвешенный RRF и подбор rrf_k (07)", CASES, collect, _context)


def check_weighted_rrf(
    weighted_rrf: Any,
    grid: Any,
    best: Any,
    test_recall: Any,
    *,
    rankings: Mapping[str, Sequence[Sequence[int]]],
    train: Sequence[LabelledQuery],
    test: Sequence[LabelledQuery],
    top_k: int = 3,
) -> CheckResult:
    """Check the function (vs labkit.rrf), the grid (index: rrf_k, columns: vector weight), the pick and the test score.

    Taught in 07_task_weighted_rrf. Prints the verdict and the points of each visible case.
    """
    answers = {"weighted_rrf": weighted_rrf, "grid": grid, "best": best, "test_recall": test_recall}
    return report(EXERCISE, answers, RrfContext(rankings, train, test, top_k))
