"""The graded exercises by key ("07", "08", "09", "18", "21"), in course order, and the challenge ("31")."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from labkit.course.checks.cases import Exercise
from labkit.course.checks.challenge import CHALLENGE
from labkit.course.checks.chunker import EXERCISE as CHUNKER
from labkit.course.checks.entity import EXERCISE as ENTITY
from labkit.course.checks.model_table import EXERCISE as MODELS
from labkit.course.checks.rrf import EXERCISE as RRF
from labkit.course.checks.sql_retry import EXERCISE as SQL_RETRY

__all__ = ["EXERCISES", "CHALLENGE", "collector"]

EXERCISES: dict[str, Exercise[Any]] = {exercise.key: exercise for exercise in (RRF, MODELS, ENTITY, CHUNKER, SQL_RETRY)}


def collector(key: str) -> Callable[[Mapping[str, Any], int | None], dict[str, Any]]:
    """How the grader's cell collects the answers of exercise `key`, or of the challenge."""
    if key == CHALLENGE.key:
        return CHALLENGE.collect
    return EXERCISES[key].collect
