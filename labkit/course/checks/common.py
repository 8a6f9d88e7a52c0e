"""What every exercise checker shares: the verdict, hints for unfilled results, safe calls into student code.

A checker collects the notebook's answers, runs the exercise's visible cases
(``labkit.course.checks.cases``), prints «Проверка пройдена» or the list of problems with the points
of each case, and returns a ``CheckResult``; it never raises, so a starter notebook ends with
advice, not a traceback. ``ready`` is for the cells after a TODO: they run only when the
results exist, and otherwise say in Russian what to fill in first.
"""

from __future__ import annotations

import math
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any, TypeVar

from labkit.core.text import ERROR_CHARS, plural, shorten
from labkit.course.checks.cases import Answers, Case, CaseResult, Exercise, failed_case, points_text, run_cases

__all__ = ["CheckResult", "todo", "ready", "report", "of_points", "CALL_SECONDS", "CallTimeout", "call_limited", "failure",
           "jsonable", "number", "unfilled", "collected"]

CALL_SECONDS = 10.0  # one call of a student's function on one case; far more than a right answer needs
T = TypeVar("T")


@dataclass
class CheckResult:
    """Verdict of one checker: ``passed``, the problems found (empty when passed) and each visible case's points."""

    exercise: str
    problems: list[str] = field(default_factory=list)
    cases: list[CaseResult] = field(default_factory=list)
    hidden_points: int = 0  # points of the cases only the instructor's grader runs

    @property
    def passed(self) -> bool:
        return not self.problems

    @property
    def points(self) -> int:
        return sum(case.earned for case in self.cases)

    @property
    def max_points(self) -> int:
        return sum(case.points for case in self.cases)

    def __bool__(self) -> bool:
        return self.passed

    def message(self) -> str:
        """The Russian verdict the checker prints: the problems, then the points of each visible case."""
        if self.passed:
            lines = [f"Проверка пройдена: {self.exercise}."]
        else:
            lines = [f"Проверка не пройдена: {self.exercise}. Что исправить:", *(f"  - {p}" for p in self.problems)]
        if self.cases:
            lines.append(f"Баллы по открытым проверкам: {self.points} {of_points(self.max_points)}.")
            lines += [f"  {'✓' if case.passed else '✗'} {case.name}: {case.earned} {of_points(case.points)}"
                      for case in self.cases]
        if self.hidden_points:
            lines.append(f"Скрытые проверки: {points_text(self.hidden_points)}. Их запускает только проверка "
                         "преподавателя; здесь их содержание не показывается.")
        return "\n".join(lines)


def of_points(points: int) -> str:
    """«из 1 балла», «из 3 баллов» (the genitive after «из»)."""
    return f"из {points} {plural(points, 'балла', 'баллов', 'баллов')}"


def report(exercise: Exercise[T], namespace: Mapping[str, Any], context: T,
           cases: Sequence[Case[T]] | None = None) -> CheckResult:
    """Collect the answers from `namespace`, run the visible `cases` (default: all of the exercise's), print the verdict.

    The notebook side of a checker; it never raises.
    """
    cases = exercise.cases if cases is None else cases
    try:
        answers: Answers = exercise.collect(namespace, None)
    except Exception as exc:  # noqa: BLE001 (a checker must never end in a traceback)
        reason = shorten(f"{type(exc).__name__}: {exc}", ERROR_CHARS)
        results = [failed_case(case, f"проверка не смогла прочитать ответы ({reason}); проверьте, что ячейки с TODO "
                                     "выполнены без ошибок") for case in cases if not case.hidden]
    else:
        results = run_cases(cases, answers, context, hidden=False)
    problems = list(dict.fromkeys(problem for case in results for problem in case.problems))
    result = CheckResult(exercise.title, problems, results, sum(case.points for case in cases if case.hidden))
    print(result.message())
    return result


def unfilled(value: Any) -> bool:
    """A TODO's result the student has not produced yet."""
    return value is None or value is NotImplemented


def todo(name: str, value: Any) -> str | None:
    """A problem message when a result variable is still unfilled."""
    if unfilled(value):
        return f"переменная {name} не заполнена: допишите ячейку с TODO и выполните её"
    return None


def collected(name: str, answer: Mapping[str, Any]) -> str | None:
    """The problem with a collected answer that is not there at all (unfilled, or not collected), else None."""
    state = answer.get("state")
    if state == "unfilled":
        return todo(name, None)
    if state == "error":
        return f"не удалось прочитать {name}: {answer.get('reason', '')}"
    return None


def ready(**results: Any) -> bool:
    """True when every named result is filled in; otherwise print what to finish first and return False.

    Use it in the cells after a TODO: ``if lk.ready(grid=grid): ...``.
    """
    missing = [name for name, value in results.items() if unfilled(value)]
    for name in missing:
        print(f"Эта ячейка ждёт {name}: сначала допишите ячейку с TODO, где {name} задаётся, и выполните её.")
    return not missing


class CallTimeout(BaseException):
    """A student's function ran past its limit (a BaseException, so their ``except Exception`` cannot swallow it)."""


def call_limited(func: Callable[..., T], *args: Any, seconds: float = CALL_SECONDS, **kwargs: Any) -> T:
    """``func(*args, **kwargs)``, stopped with ``CallTimeout`` after `seconds`.

    The limit needs SIGALRM and the main thread (where Jupyter runs cells); elsewhere the call is unlimited.
    """
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return func(*args, **kwargs)

    def stop(_signum: int, _frame: Any) -> None:
        raise CallTimeout(f"не уложилась в {seconds:g} с")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return func(*args, **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def failure(exc: BaseException) -> str:
    """An exception of student code, shortened for a message."""
    if isinstance(exc, CallTimeout):
        return f"не уложилась в {CALL_SECONDS:g} с (бесконечный цикл?)"
    return shorten(f"{type(exc).__name__}: {exc}", ERROR_CHARS)


def number(value: Any) -> float | None:
    """A finite real number as a float, else None (NaN, text, a Series, ...)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        item = getattr(value, "item", None)  # numpy scalars
        if item is None or getattr(value, "shape", None) not in ((), None):
            return None
        try:
            value = item()
        except (TypeError, ValueError):
            return None
        if isinstance(value, bool) or not isinstance(value, Real):
            return None
    result = float(value)
    return result if math.isfinite(result) else None


def jsonable(value: Any, depth: int = 0) -> Any:
    """Plain JSON data from a student's value: capped lengths, no NaN, other objects as «<type>»."""
    if value is None or isinstance(value, (bool, str)):
        return shorten(value, 500) if isinstance(value, str) else value
    if isinstance(value, Integral):
        return int(value)
    if number(value) is not None or isinstance(value, Real):
        return number(value)
    if depth < 8 and isinstance(value, Mapping):
        return {str(k): jsonable(v, depth + 1) for k, v in list(value.items())[:50]}
    if depth < 8 and isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, depth + 1) for v in list(value)[:200]]
    return f"<{type(value).__name__}>"
