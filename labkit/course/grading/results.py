"""The grades of a class: per exercise (cases, points, notes), per student, per run; the challenge's leaderboard; as JSON-ready data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from labkit.course.checks.cases import CaseResult

__all__ = ["STATUS_TEXT", "ExerciseGrade", "ChallengeEntry", "StudentGrade", "LeaderRow", "Leaderboard", "ClassGrades"]

# What happened to a notebook, in the reports' words.
STATUS_TEXT = {
    "graded": "проверен",
    "missing": "не сдан",
    "unreadable": "файл не читается",
    "timeout": "не уложился во время",
    "memory": "превысил память",
    "crashed": "выполнение оборвалось",
    "no_answers": "ответы не собраны",
    "rejected": "конвейер не принят",  # the challenge's PIPELINE is missing or not made of the course's pieces
    "search_failed": "конвейер упал на скрытых запросах",
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
class ChallengeEntry:
    """One student's challenge notebook: how it ran, the pipeline it defined and its per-query scores on the hidden set."""

    status: str  # a key of STATUS_TEXT; "graded" when the pipeline was scored
    problem: str | None = None  # Russian: why it was not scored
    notes: list[str] = field(default_factory=list)
    shown: str | None = None  # the pipeline's stages, as str(pipeline) prints them
    spec: dict[str, Any] | None = None  # the data it was rebuilt from
    recall: list[float] = field(default_factory=list)  # per hidden query, in the file's order
    mrr: list[float] = field(default_factory=list)
    seconds: float = 0.0
    executed: str | None = None

    @property
    def scored(self) -> bool:
        return self.status == "graded" and bool(self.recall)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "status_text": STATUS_TEXT[self.status], "problem": self.problem,
                "notes": self.notes, "pipeline": self.shown, "spec": self.spec, "recall": self.recall, "mrr": self.mrr,
                "seconds": round(self.seconds, 1), "executed": self.executed}


@dataclass
class StudentGrade:
    """Everything one student got."""

    name: str  # the student's folder name
    slug: str  # a file-name-safe form of it, unique in the run
    exercises: list[ExerciseGrade]
    seconds: float = 0.0  # wall time of grading this student (databases, kernels, checks)
    challenge: ChallengeEntry | None = None  # when the run scored the challenge (--hidden)

    @property
    def points(self) -> int:
        return sum(exercise.points for exercise in self.exercises)

    @property
    def max_points(self) -> int:
        return sum(exercise.max_points for exercise in self.exercises)

    def to_dict(self) -> dict[str, Any]:
        found = {"name": self.name, "slug": self.slug, "points": self.points, "max_points": self.max_points,
                 "seconds": round(self.seconds, 1), "exercises": [exercise.to_dict() for exercise in self.exercises]}
        if self.challenge is not None:
            found["challenge"] = self.challenge.to_dict()
        return found


@dataclass(frozen=True)
class LeaderRow:
    """A place of the leaderboard: a student's pipeline, or the course's plain hybrid as the reference row."""

    name: str  # the student's folder name, or the reference row's Russian label
    slug: str | None  # the student's page; None for the reference row
    pipeline: str
    place: int
    recall: float  # mean Recall@k on the hidden queries
    low: float  # its bootstrap interval
    high: float
    mrr: float
    p_next: float | None  # paired test against the next row
    certificate: bool

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "slug": self.slug, "pipeline": self.pipeline, "place": self.place,
                "recall": round(self.recall, 4), "low": round(self.low, 4), "high": round(self.high, 4),
                "mrr": round(self.mrr, 4), "p_next": None if self.p_next is None else round(self.p_next, 4),
                "certificate": self.certificate}


@dataclass
class Leaderboard:
    """The challenge's class leaderboard on the hidden queries, with the certificate threshold and what the queries can tell."""

    source: str  # the hidden file
    queries: int
    top_k: int
    threshold: float  # certificate: mean Recall@k at least this
    rows: list[LeaderRow]
    unranked: list[tuple[str, str]]  # students without a scored pipeline, with the reason
    certificates: dict[str, str]  # student name -> the certificate line
    noise: list[str]  # Russian sentences: which gaps are real, how many queries a ranking needs
    needed: dict[str, Any] | None = None  # queries_needed of the first place against the reference row
    overlap: int = 0  # hidden queries that are also among the course's labelled queries

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "queries": self.queries, "top_k": self.top_k, "threshold": self.threshold,
                "rows": [row.to_dict() for row in self.rows],
                "unranked": [{"name": name, "reason": reason} for name, reason in self.unranked],
                "certificates": self.certificates, "noise": self.noise, "needed": self.needed, "overlap": self.overlap}


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
    leaderboard: Leaderboard | None = None  # when the run scored the challenge (--hidden)

    def to_dict(self) -> dict[str, Any]:
        found = {"run_id": self.run_id, "seed": self.seed, "started": self.started, "source": self.source,
                 "seconds": round(self.seconds, 1), "parameters": self.parameters, "limits": self.limits,
                 "students": [student.to_dict() for student in self.students]}
        if self.leaderboard is not None:
            found["leaderboard"] = self.leaderboard.to_dict()
        return found
