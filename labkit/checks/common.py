"""What every exercise checker shares: the verdict, the never-raising wrapper, hints for unfilled results.

Each checker prints «Проверка пройдена» or the list of problems and returns a
``CheckResult``; it never raises, so a starter notebook ends with advice, not a traceback.
``ready`` is for the cells after a TODO: they run only when the results exist, and
otherwise say in Russian what to fill in first.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..text import ERROR_CHARS, shorten

__all__ = ["CheckResult", "checker", "todo", "ready"]


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


def checker(exercise: str) -> Callable[[Callable[..., list[str]]], Callable[..., CheckResult]]:
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


def _unfilled(value: Any) -> bool:
    """A TODO's result the student has not produced yet."""
    return value is None or value is NotImplemented


def todo(name: str, value: Any) -> str | None:
    """A problem message when a result variable is still unfilled."""
    if _unfilled(value):
        return f"переменная {name} не заполнена: допишите ячейку с TODO и выполните её"
    return None


def ready(**results: Any) -> bool:
    """True when every named result is filled in; otherwise print what to finish first and return False.

    Use it in the cells after a TODO: ``if lk.ready(grid=grid): ...``.
    """
    missing = [name for name, value in results.items() if _unfilled(value)]
    for name in missing:
        print(f"Эта ячейка ждёт {name}: сначала допишите ячейку с TODO, где {name} задаётся, и выполните её.")
    return not missing
