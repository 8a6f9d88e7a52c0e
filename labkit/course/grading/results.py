"""The grades of a class: per exercise (cases, points, notes), per student, per run; as JSON-ready data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from labkit.course.checks.cases import CaseResult

__all__ = ["STATUS_TEXT", "ExerciseGrade", "StudentGrade", "ClassGrades"]

# What happened to a notebook, in the reports' words.
STATUS_TEXT = {
    "graded": "проверен",
    "missing": "не сдан",
    "unreadable": "файл не читается",
    "timeout": "не уложился во время",
    "memory": "превысил память",
    "crashed": "выполнение оборвалось",
    "no_answers": "ответы не собраны",
}


@dataclass
class ExerciseGrade:
    """One student's notebook of one exercise: how it ran and every case's verdict (hidden ones included)."""

    key: str
    title: str
    notebook: str
    status: str  # a key of STATUS_TEXT
    cases: list[CaseResult]
    notes: list[str] = field(default_factory=list)  # Russian remarks: failed cells, limits, ...
    seconds: float = 0.0
    executed: str | None = None  # the executed copy, relative to the output folder

    @property
    def points(self) -> int:
        return sum(case.earned for case in self.cases)

    @property
    def max_points(self) -> int:
        return sum(case.points for case in self.cases)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "title": self.title, "notebook": self.notebook, "status": self.status,
                "status_text": STATUS_TEXT[self.status], "points": self.points, "max_points": self.max_points,
                "seconds": round(self.seconds, 1), "notes": self.notes, "executed": self.executed,
                "cases": [case.to_dict() for case in self.cases]}


@dataclass
class StudentGrade:
    """Everything one student got."""

    name: str  # the student's folder name
    slug: str  # a file-name-safe form of it, unique in the run
    exercises: list[ExerciseGrade]
    seconds: float = 0.0  # wall time of grading this student (databases, kernels, checks)

    @property
    def points(self) -> int:
        return sum(exercise.points for exercise in self.exercises)

    @property
    def max_points(self) -> int:
        return sum(exercise.max_points for exercise in self.exercises)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "slug": self.slug, "points": self.points, "max_points": self.max_points,
                "seconds": round(self.seconds, 1), "exercises": [exercise.to_dict() for exercise in self.exercises]}


@dataclass
class ClassGrades:
    """One grading run: its settings and every student's grades."""

    run_id: str
    seed: int  # of the hidden cases; the same seed reproduces them
    started: str  # ISO time
    source: str  # the folder of student folders
    parameters: dict[str, dict[str, Any]]  # per exercise key: the notebook parameters injected
    limits: dict[str, float]
    students: list[StudentGrade] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "seed": self.seed, "started": self.started, "source": self.source,
                "seconds": round(self.seconds, 1), "parameters": self.parameters, "limits": self.limits,
                "students": [student.to_dict() for student in self.students]}
