"""Graded cases of an exercise: one definition for the notebook's checker and for the class grader.

An exercise is a list of ``Case``: a Russian name, its points, whether it is hidden, and a
check that reads the student's *answers* (plain data collected from the notebook by the
exercise's ``collect``) against a reference *context* and returns the problems found. The
checker at the end of an exercise notebook runs the visible cases on answers collected in
the student's kernel; ``./run.sh grade`` runs every case, hidden ones included, on answers
its own cell collected and with references it computed itself (``labkit.course.grading``).
A case earns its points only when it has no problem.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from labkit.core.text import ERROR_CHARS, count, shorten

if TYPE_CHECKING:
    from labkit.core.context import Lab

__all__ = ["Answers", "Case", "CaseResult", "Exercise", "run_cases", "points_text", "failed_case"]

Answers = Mapping[str, Any]  # what `collect` gathered from a notebook: JSON-ready data only
C = TypeVar("C")


@dataclass(frozen=True)
class Case(Generic[C]):
    """One graded part of an exercise: `check(answers, context)` returns its problems (empty: passed)."""

    name: str  # Russian, what the case checks; a hidden case's name is shown to the instructor only
    points: int
    check: Callable[[Answers, C], list[str]]
    hidden: bool = False


@dataclass(frozen=True)
class CaseResult:
    """The verdict of one case for one student."""

    name: str
    points: int
    hidden: bool
    problems: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.problems

    @property
    def earned(self) -> int:
        return self.points if self.passed else 0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "points": self.points, "earned": self.earned, "hidden": self.hidden,
                "problems": list(self.problems)}


@dataclass(frozen=True)
class Exercise(Generic[C]):
    """An exercise notebook as both checkers see it.

    ``collect(namespace, seed)`` runs in the student's kernel: it reads the notebook's variables,
    calls the student's functions on the visible inputs (and, with a `seed`, on hidden ones made
    from it) and returns JSON-ready answers. ``context(lab, parameters, seed)`` builds the
    grader's references on its own database, from the notebook parameters it injected.
    """

    key: str  # "07"
    notebook: str  # file name under notebooks/ and solutions/
    title: str  # Russian, as the checker prints it
    cases: tuple[Case[C], ...]
    collect: Callable[[Mapping[str, Any], int | None], dict[str, Any]]
    context: Callable[[Lab, Mapping[str, Any], int], C]

    @property
    def max_points(self) -> int:
        return sum(case.points for case in self.cases)

    @property
    def hidden_points(self) -> int:
        return sum(case.points for case in self.cases if case.hidden)


def run_cases(cases: Sequence[Case[C]], answers: Answers, context: C, *, hidden: bool) -> list[CaseResult]:
    """The verdict of every case (hidden ones only when `hidden`); a check that raises fails its own case."""
    results = []
    for case in cases:
        if case.hidden and not hidden:
            continue
        try:
            problems = [p for p in case.check(answers, context) if p]
        except Exception as exc:  # noqa: BLE001 (answers are the student's data: any shape can reach a check)
            reason = shorten(f"{type(exc).__name__}: {exc}", ERROR_CHARS)
            problems = [f"проверка не смогла выполниться ({reason}); проверьте, что ячейки с TODO выполнены без ошибок"]
        results.append(CaseResult(case.name, case.points, case.hidden, tuple(problems)))
    return results


def failed_case(case: Case[Any], reason: str) -> CaseResult:
    """`case` failed for a reason outside it (the notebook was not handed in, did not finish, ...)."""
    return CaseResult(case.name, case.points, case.hidden, (reason,))


def points_text(points: int) -> str:
    """«1 балл», «3 балла», «10 баллов»."""
    return count(points, "балл", "балла", "баллов")
