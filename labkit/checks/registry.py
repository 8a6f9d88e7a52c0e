"""The graded exercises by key ("07", "08", "09"), in course order."""

from __future__ import annotations

from typing import Any

from .cases import Exercise
from .entity import EXERCISE as ENTITY
from .models import EXERCISE as MODELS
from .rrf import EXERCISE as RRF

__all__ = ["EXERCISES"]

EXERCISES: dict[str, Exercise[Any]] = {exercise.key: exercise for exercise in (RRF, MODELS, ENTITY)}
