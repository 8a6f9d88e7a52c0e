"""The graded exercises by key ("07", "08", "09", "18"), in course order."""

from __future__ import annotations

from typing import Any

from labkit.course.checks.cases import Exercise
from labkit.course.checks.chunker import EXERCISE as CHUNKER
from labkit.course.checks.entity import EXERCISE as ENTITY
from labkit.course.checks.model_table import EXERCISE as MODELS
from labkit.course.checks.rrf import EXERCISE as RRF

__all__ = ["EXERCISES"]

EXERCISES: dict[str, Exercise[Any]] = {exercise.key: exercise for exercise in (RRF, MODELS, ENTITY, CHUNKER)}
