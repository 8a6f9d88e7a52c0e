"""Checker of exercise 07: weighted RRF written by hand, the rrf_k × weight grid on train, the pick reported on test.

The student's ``weighted_rrf(rankings, weights, rrf_k)`` is compared with ``labkit.rrf``
on fixed cases (each built so that one typical mistake shows) and on random ones; a
mismatch is explained by the mistake it matches (rank from 0, ties by the larger id, ...).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from numbers import Integral
from types import CodeType
from typing import Any

import pandas as pd

from ..corpus import LabelledQuery
from ..fusion import rrf
from ..metrics import mean_metric
from ..ranking import ids
from ..text import ERROR_CHARS, shorten
from .common import checker, todo

__all__ = ["check_weighted_rrf"]

Case = tuple[list[list[int]], tuple[float, ...], int]  # rankings, weights, rrf_k

# Each fixed case lets one typical mistake show (the hint that follows names it).
_FIXED_CASES: list[Case] = [
    ([[1, 2, 3], [3, 1, 4]], (1.0, 1.0), 60),  # plain RRF; 2 and 4 are in one list only
    ([[5, 3], [3, 5]], (1.0, 1.0), 60),  # a tie: the smaller id (3) goes first
    ([[7, 8, 9], [9, 8, 7]], (2.0, 1.0), 1),  # the weight of the first list decides
    ([[4, 2, 6], [6, 4]], (1.0, 3.0), 0),  # rrf_k=0: ranks must start at 1
    ([[10, 20], []], (0.5, 1.0), 5),  # an empty branch
]
_RANDOM_CASES = 40
_SEED = 7
_FORBIDDEN = {"rrf", "fuse", "search_fused", "search_hybrid", "from_scores"}  # labkit does the exercise for you


def _random_cases() -> list[Case]:
    """Random rankings over small ids (overlaps and ties happen), weights that are powers of two (exact in floats)."""
    rng = random.Random(_SEED)
    cases: list[Case] = []
    for _ in range(_RANDOM_CASES):
        rankings = [rng.sample(range(1, 16), rng.randint(0, 8)) for _ in range(rng.choice([2, 2, 3]))]
        weights = tuple(rng.choice([0.25, 0.5, 1.0, 2.0, 4.0]) for _ in rankings)
        cases.append((rankings, weights, rng.choice([0, 1, 5, 60])))
    return cases


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
_MISTAKES: list[tuple[Callable[[Case], list[int]], str]] = [
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


def _code_names(code: CodeType) -> Iterator[str]:
    """Every global or attribute name a function's code (and its nested functions) uses."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _code_names(const)


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
    return [int(v) for v in value]


def _shown(case: Case) -> str:
    rankings, weights, rrf_k = case
    return f"weighted_rrf({rankings}, {tuple(weights)}, rrf_k={rrf_k})"


def _call(func: Callable[..., Any], case: Case) -> list[int] | str:
    """The student's answer on one case, or the Russian reason it is not a list of ids (a failure included)."""
    rankings, weights, rrf_k = case
    try:
        return _as_ids(func([list(r) for r in rankings], tuple(weights), rrf_k))
    except ZeroDivisionError:
        return (f"{_shown(case)} упала с делением на ноль: место считается с 1, "
                "поэтому rrf_k + место > 0 даже при rrf_k=0 (enumerate(ranking, start=1))")
    except Exception as exc:  # noqa: BLE001 (the student's code may fail in any way)
        return f"{_shown(case)} упала: {shorten(f'{type(exc).__name__}: {exc}', ERROR_CHARS)}"


def _function_problems(func: Any) -> list[str]:
    """Compare the student's weighted_rrf with labkit.rrf; at most one explained mismatch."""
    if not callable(func):
        return [f"weighted_rrf должна быть функцией, а это {type(func).__name__}"]
    code = getattr(func, "__code__", None)
    used = sorted(_FORBIDDEN & set(_code_names(code))) if isinstance(code, CodeType) else []
    if used:
        return [f"weighted_rrf вызывает {', '.join(used)} из labkit: в этом задании слияние пишется руками "
                "(словарь id -> сумма weight / (rrf_k + место), затем сортировка)"]
    fixed = [(case, _call(func, case)) for case in _FIXED_CASES]
    for number, case in enumerate([*_FIXED_CASES, *_random_cases()]):
        got = fixed[number][1] if number < len(fixed) else _call(func, case)
        if isinstance(got, str):
            return [got]
        want = ids(rrf(case[0], case[2], case[1]))
        if got == want or got == _order(_fused(*case)):  # labkit.rrf, or the exact order if floats round apart
            continue
        # the mistake that explains every fixed answer (a single case can fit several mistakes)
        hint = next((h for mistake, h in _MISTAKES
                     if got == mistake(case) and all(a == mistake(c) for c, a in fixed if not isinstance(a, str))),
                    None)
        if hint is None and sorted(got) != sorted(want):
            hint = "в ответе должен быть каждый документ из списков ровно один раз"
        where = "на фиксированном примере" if number < len(fixed) else "на случайном примере"
        return [f"{where} {_shown(case)} вернула {got}, а должно быть {want}"
                + (f": {hint}" if hint else " (сумма weights[i] / (rrf_k + место), место с 1, при равенстве меньший id)")]
    return []


def _mean_recall(queries: Sequence[LabelledQuery], rankings: Mapping[str, Sequence[Sequence[int]]],
                 rrf_k: int, w_vector: float, top_k: int) -> float:
    fused = [ids(rrf([list(rankings[q.query][0]), list(rankings[q.query][1])], rrf_k, (w_vector, 1.0)))
             for q in queries]
    return mean_metric("recall", fused, queries, top_k)


def _grid_problems(grid: pd.DataFrame, rankings: Mapping[str, Sequence[Sequence[int]]],
                   train: Sequence[LabelledQuery], test: Sequence[LabelledQuery], top_k: int) -> list[str]:
    """The first wrong cell of the grid, explained (all queries, test, transposed, or just wrong)."""
    for rrf_k in grid.index:
        for w in grid.columns:
            given = float(grid.loc[rrf_k, w])
            expected = _mean_recall(train, rankings, int(rrf_k), float(w), top_k)
            if math.isclose(given, expected, abs_tol=1e-6):
                continue
            if math.isclose(given, _mean_recall([*train, *test], rankings, int(rrf_k), float(w), top_k), abs_tol=1e-6):
                return ["таблица посчитана на всех запросах: веса подбирают только на обучающих (train), "
                        "тестовые (test) нужны для честной оценки"]
            if math.isclose(given, _mean_recall(test, rankings, int(rrf_k), float(w), top_k), abs_tol=1e-6):
                return ["таблица посчитана на тестовых запросах, а подбирать веса нужно на train"]
            if float(rrf_k) > 0 and math.isclose(
                    given, _mean_recall(train, rankings, int(w), float(rrf_k), top_k), abs_tol=1e-6):
                return ["строки и столбцы перепутаны: строки grid — значения rrf_k, столбцы — вес векторной ветки"]
            return [f"при rrf_k={rrf_k}, весе {w}: у вас Recall@{top_k} = {given:.3f}, ожидалось {expected:.3f} "
                    f"(среднее по train; веса (w, 1.0) в порядке (вектор, лексика); "
                    "среднее удобно считать через lk.mean_metric)"]
    return []


@checker("взвешенный RRF и подбор rrf_k (07)")
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
) -> list[str]:
    """Check the function (vs labkit.rrf), the grid (index: rrf_k, columns: vector weight), the pick and the test score."""
    unfilled = [p for p in (todo("grid", grid), todo("best", best), todo("test_recall", test_recall)) if p]
    function = [p for p in [todo("weighted_rrf", weighted_rrf)] if p] or _function_problems(weighted_rrf)
    if function:
        return function + unfilled
    if unfilled:
        return unfilled
    if not isinstance(grid, pd.DataFrame):
        return [("grid должен быть pandas.DataFrame (строки: rrf_k, столбцы: вес векторной ветки), "
                 f"а это {type(grid).__name__}")]
    if len(grid.index) < 3 or len(grid.columns) < 3:
        return ["переберите хотя бы три значения rrf_k и три веса векторной ветки"]
    missing = sorted({q.query for q in [*train, *test]} - set(rankings))
    if missing:
        return [f"в rankings нет ранжирований для запросов: {', '.join(missing[:3])}; выполните ячейку с rankings"]
    problems = _grid_problems(grid, rankings, train, test, top_k)
    if problems:
        return problems
    try:
        if isinstance(best, Mapping):
            best_k, best_w = best.get("rrf_k", best.get("k")), best["w_vector"]
        else:
            best_k, best_w = best
    except (TypeError, ValueError, KeyError):
        return ["best должен быть словарём {'rrf_k': ..., 'w_vector': ...} или парой (rrf_k, w_vector)"]
    top = float(grid.to_numpy().max())
    if best_k not in grid.index or best_w not in grid.columns:
        return [f"best = ({best_k}, {best_w}) нет в таблице grid"]
    if not math.isclose(float(grid.loc[best_k, best_w]), top, abs_tol=1e-9):
        return [f"best = ({best_k}, {best_w}) даёт {float(grid.loc[best_k, best_w]):.3f} на train, "
                f"а максимум таблицы {top:.3f}: выберите ячейку с максимумом (grid.stack().idxmax())"]
    expected_test = _mean_recall(test, rankings, int(best_k), float(best_w), top_k)
    if not math.isclose(float(test_recall), expected_test, abs_tol=1e-6):
        if math.isclose(float(test_recall), top, abs_tol=1e-6):
            return ["test_recall совпадает с результатом на train: посчитайте его на тестовых запросах (test)"]
        return [f"test_recall = {float(test_recall):.3f}, а для best на test выходит {expected_test:.3f}"]
    return []
