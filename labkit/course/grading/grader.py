"""Grade a class: every student's exercise notebooks, each executed in isolation, then scored case by case.

For each student a login role; for each of their notebooks a fresh database copied from the
run's template, a prepared copy of the notebook (the grader's answers cell appended) executed
by ``labkit.course.grading.execute`` under the limits, the database dropped again. The answers the
grader's cell displayed are scored in this process by every case of the exercise, hidden
ones included, against references computed on the grader's own database
(``Exercise.context``). A notebook that is missing, unreadable, too slow, too big, crashes or
gives no answers gets its cases failed with the reason, and the next notebook runs as usual.

The challenge (31_challenge, with ``--hidden``) runs the same way; what its grader cell collects
is the data of the student's ``PIPELINE``, rebuilt here from the course's pieces
(``labkit.course.checks.challenge``) and scored on the hidden queries by ``ChallengeSetup.score``
on the grader's own database. The hidden queries never reach a student's database or kernel.
"""

from __future__ import annotations

import ast
import json
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labkit.core.context import Lab
from labkit.core.corpora import load_queries
from labkit.core.corpora.news import HELDOUT_PATH
from labkit.core.errors import LabError
from labkit.core.settings import Settings
from labkit.core.text import ERROR_CHARS, shorten
from labkit.course.checks.answers import read_answers
from labkit.course.checks.cases import Exercise, failed_case, run_cases
from labkit.course.checks.challenge import CHALLENGE, pipeline_of
from labkit.course.checks.registry import EXERCISES
from labkit.course.grading.databases import Role, RunDatabases
from labkit.course.grading.execute import Execution, Limits, execute, notes, prepare, read_executed
from labkit.course.grading.limits import DEFAULT_TIMEOUT, MEMORY_LIMIT
from labkit.course.grading.results import ChallengeEntry, ExerciseGrade, StudentGrade
from labkit.evaluation.leaderboard import Scores
from labkit.retrieval.branches.vector import embeddable
from labkit.retrieval.pipeline import Pipeline
from labkit.retrieval.spec import pipeline_spec
from labkit.store.embedcache import cached_query_embedding

if TYPE_CHECKING:
    import nbformat

__all__ = ["REFERENCE", "Student", "ExerciseSetup", "ChallengeSetup", "Outcome", "find_students", "parameters_cell_values",
           "starter_parameters",
           "exercise_setups", "kernel_environment", "warm_template", "Grader", "grade_class"]

REFERENCE = Path(__file__).resolve().parents[3] / "notebooks"  # the starters: their parameters and time limits


@dataclass(frozen=True)
class Student:
    """One folder of handed-in notebooks."""

    name: str
    folder: Path
    slug: str  # safe as a file name, unique in the run


@dataclass(frozen=True)
class ExerciseSetup:
    """An exercise as this run grades it: the parameters injected into every copy, the notebook's time limit."""

    exercise: Exercise[Any]
    parameters: dict[str, Any]
    timeout: float


@dataclass(frozen=True)
class ChallengeSetup:
    """The challenge as this run scores it: its notebook's parameters and time limit, and how a pipeline is scored.

    `score` searches the hidden queries with a pipeline on the grader's own database and returns its
    per-query scores (``labkit.course.grading.challenge.challenge_setup`` makes it).
    """

    parameters: dict[str, Any]
    timeout: float
    score: Callable[[Pipeline], Scores]


@dataclass(frozen=True)
class Outcome:
    """How one handed-in notebook ran: the answers its grader cell displayed, or the status and reason there are none."""

    status: str  # a key of STATUS_TEXT; "graded" when answers were read
    reason: str | None = None
    remarks: Sequence[str] = ()
    executed: str | None = None
    answers: dict[str, Any] | None = None


def find_students(root: Path, skip: Iterable[Path] = ()) -> list[Student]:
    """The student folders directly under `root` (hidden ones and `skip` left out), sorted by name."""
    skipped = {path.resolve() for path in skip}
    folders = sorted(path for path in root.iterdir()
                     if path.is_dir() and not path.name.startswith(".") and path.resolve() not in skipped)
    students, used = [], set()
    for folder in folders:
        slug = base = re.sub(r"[^\w.-]+", "_", folder.name).strip("._") or "student"
        number = 1
        while slug.casefold() in used:
            number += 1
            slug = f"{base}_{number}"
        used.add(slug.casefold())
        students.append(Student(folder.name, folder, slug))
    return students


def _assigned(target: ast.expr, value: ast.expr) -> dict[str, Any]:
    """Name -> literal value of one assignment (``A = 1``, or ``A, B = 1, 2``); {} for any other target."""
    if isinstance(target, ast.Name):
        return {target.id: ast.literal_eval(value)}
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        return {name: v for t, e in zip(target.elts, value.elts) for name, v in _assigned(t, e).items()}
    return {}


def parameters_cell_values(nb: nbformat.NotebookNode) -> dict[str, Any]:
    """The literal values the notebook's `parameters` cell assigns: the names papermill may set."""
    parameters: dict[str, Any] = {}
    for cell in nb.cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            for node in ast.parse(cell.source).body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    parameters.update(_assigned(node.targets[0], node.value))
    return parameters


def _parameters(path: Path) -> tuple[dict[str, Any], float]:
    """The literal values of a notebook's `parameters` cell, with its CI values over them, then its grading values
    (``grading_parameters``: sizes no case needs in full, shrunk for a class), and its time limit."""
    import nbformat  # here, not at the top: its schema validator takes a second to import, which every `labkit` command would pay

    nb = nbformat.read(path, as_version=4)
    parameters = parameters_cell_values(nb)
    meta = dict(nb.metadata.get("labkit", {}))
    parameters.update(meta.get("ci_parameters", {}))  # the small knobs CI uses keep a class's run short too
    parameters.update(meta.get("grading_parameters", {}))  # e.g. 09's stretch questions, which no case scores
    return parameters, float(meta.get("timeout", DEFAULT_TIMEOUT))


def starter_parameters(notebook: str, reference: Path = REFERENCE) -> tuple[dict[str, Any], float]:
    """The parameters (CI, then grading values over them) and time limit of the starter notebook `notebook` under `reference`."""
    path = reference / notebook
    if not path.is_file():
        raise LabError(f"the starter {path} is missing: grading takes each exercise's parameters from it")
    return _parameters(path)


def exercise_setups(reference: Path = REFERENCE, keys: Sequence[str] | None = None) -> list[ExerciseSetup]:
    """Each exercise (all, or `keys`) with the parameters and time limit of its starter notebook under `reference`."""
    setups = []
    for key in keys or list(EXERCISES):
        exercise = EXERCISES[key]
        parameters, timeout = starter_parameters(exercise.notebook, reference)
        setups.append(ExerciseSetup(exercise, parameters, timeout))
    return setups


def kernel_environment(base: Mapping[str, str], settings: Settings) -> dict[str, str]:
    """The environment of a student's kernel: ours without database credentials, the models of `settings`."""
    env = {key: value for key, value in base.items() if not key.startswith("PG") and key != "DATABASE_URL"}
    env.update(OLLAMA_HOST=settings.ollama_host or "", EMBED_MODEL=settings.embed_model,
               CHAT_MODEL=settings.chat_model, ALT_CHAT_MODEL=settings.alt_chat_model,
               NO_TOOLS_MODEL=settings.no_tools_model)
    return env


def warm_template(lab: Lab) -> int:
    """Embed every labelled query once in the template, so no student's copy asks the model for them; returns how many."""
    queries = {embeddable(q.query) for q in [*load_queries(), *load_queries(HELDOUT_PATH)]}
    for query in sorted(queries):
        cached_query_embedding(lab, query)
    return len(queries)


def _crash_reason(execution: Execution) -> str:
    said = [line for line in execution.log.splitlines() if line.startswith("runner: ")]
    if said and "DeadKernel" in said[-1]:
        return "ядро ноутбука завершилось посреди выполнения (os._exit, сбой или нехватка памяти)"
    if said:
        return f"выполнение оборвалось: {said[-1].removeprefix('runner: ')}"
    return "процесс, выполнявший ноутбук, был остановлен извне"


class Grader:
    """Grades one student at a time; safe to call from several threads (one student per thread).

    `jobs` notebooks execute at once (a semaphore over every thread): a student's exercises run side by side
    up to that bound, so two students of unequal work, or one, still keep `jobs` kernels busy.
    """

    def __init__(self, *, setups: Sequence[ExerciseSetup], contexts: Mapping[str, Any], databases: RunDatabases,
                 seed: int, out: Path, env: Mapping[str, str], cell_timeout: float, timeout: float | None = None,
                 memory_bytes: int = MEMORY_LIMIT, challenge: ChallengeSetup | None = None, jobs: int = 1) -> None:
        if jobs < 1:
            raise ValueError(f"jobs must be at least 1, got {jobs}")
        self.jobs = jobs
        self._slots = threading.BoundedSemaphore(jobs)  # notebooks executing now, over every student's thread
        self.setups, self.contexts, self.databases = list(setups), dict(contexts), databases
        self.challenge = challenge
        self._scored: dict[str, Scores] = {}  # the challenge's scores by pipeline spec: a pipeline handed in twice runs once
        self.seed, self.out, self.env = seed, out, dict(env)
        self.cell_timeout, self.timeout, self.memory_bytes = cell_timeout, timeout, memory_bytes
        self._scoring = threading.Lock()  # references and hidden queries are searched on one shared connection

    def limits(self, setup: ExerciseSetup) -> Limits:
        timeout = self.timeout if self.timeout is not None else setup.timeout
        return Limits(timeout, min(self.cell_timeout, timeout), self.memory_bytes)

    def grade(self, number: int, student: Student) -> StudentGrade:
        """Every exercise of `student` (the `number`-th of the run)."""
        started = time.monotonic()
        label = f"s{number:03d}"
        role = self.databases.create_role(label)
        try:
            if self.jobs > 1 and len(self.setups) > 1:  # side by side; the semaphore bounds the kernels
                with ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix=f"grade-{label}") as pool:
                    exercises = list(pool.map(lambda setup: self._exercise(label, student, role, setup), self.setups))
            else:
                exercises = [self._exercise(label, student, role, setup) for setup in self.setups]
            challenge = self._challenge(label, student, role, self.challenge) if self.challenge else None
        finally:
            self.databases.drop_role(role)
        return StudentGrade(student.name, student.slug, exercises, time.monotonic() - started, challenge)

    def _failed(self, setup: ExerciseSetup, status: str, reason: str, started: float,
                remarks: Sequence[str] = (), executed: str | None = None) -> ExerciseGrade:
        exercise = setup.exercise
        return ExerciseGrade(exercise.key, exercise.title, exercise.notebook, status,
                             [failed_case(case, reason) for case in exercise.cases], [reason, *remarks],
                             time.monotonic() - started, executed)

    def _run(self, label: str, student: Student, role: Role, key: str, notebook_name: str,
             parameters: Mapping[str, Any], limits: Limits) -> Outcome:
        """Execute one handed-in notebook on its own database and read back the answers its grader cell displayed."""
        notebook = student.folder / notebook_name
        if not notebook.is_file():
            return Outcome("missing", f"ноутбук не сдан: в папке нет файла {notebook_name}")
        output = self.out / "executed" / student.slug / notebook_name
        output.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="labkit-grade-") as work:
            copy, workdir = Path(work) / "input" / notebook_name, Path(work) / "run"
            reason = prepare(notebook, key, self.seed, copy)
            if reason:
                return Outcome("unreadable", reason)
            workdir.mkdir()
            database = f"{label}_{key}"
            url = self.databases.create_database(database, role)
            try:
                env = {**self.env, "DATABASE_URL": url, "IPYTHONDIR": str(Path(work) / "ipython")}
                execution = execute(copy, output, parameters=parameters, env=env, limits=limits, workdir=workdir)
            finally:
                self.databases.drop_database(database)
        executed = read_executed(output)
        remarks = notes(executed, limits.cell_timeout)
        relative = str(output.relative_to(self.out)) if executed is not None else None
        if execution.status == "timeout":
            return Outcome("timeout", f"ноутбук не уложился в {limits.timeout:g} с", remarks, relative)
        if execution.status == "memory":
            return Outcome("memory", f"ноутбук занял больше {limits.memory_bytes / 2**30:g} ГБ памяти", remarks, relative)
        if execution.status != "ok":
            return Outcome("crashed", _crash_reason(execution), remarks, relative)
        answers = read_answers(executed, key, self.seed) if executed else "исполненный ноутбук не сохранился"
        if isinstance(answers, str):
            return Outcome("no_answers", f"ответы не собраны: {answers}", remarks, relative)
        return Outcome("graded", None, remarks, relative, answers)

    def _exercise(self, label: str, student: Student, role: Role, setup: ExerciseSetup) -> ExerciseGrade:
        with self._slots:  # `jobs` notebooks at once; a notebook's seconds start when it does
            exercise, started = setup.exercise, time.monotonic()
            outcome = self._run(label, student, role, exercise.key, exercise.notebook, setup.parameters, self.limits(setup))
        if outcome.answers is None:
            return self._failed(setup, outcome.status, outcome.reason or "", started, outcome.remarks, outcome.executed)
        with self._scoring:
            cases = run_cases(exercise.cases, outcome.answers, self.contexts[exercise.key], hidden=True)
        return ExerciseGrade(exercise.key, exercise.title, exercise.notebook, "graded", cases, list(outcome.remarks),
                             time.monotonic() - started, outcome.executed)

    def _challenge(self, label: str, student: Student, role: Role, setup: ChallengeSetup) -> ChallengeEntry:
        """Execute the challenge notebook, rebuild its PIPELINE from the collected data and score it on the hidden queries."""
        timeout = self.timeout if self.timeout is not None else setup.timeout
        limits = Limits(timeout, min(self.cell_timeout, timeout), self.memory_bytes)
        with self._slots:
            started = time.monotonic()
            outcome = self._run(label, student, role, CHALLENGE.key, CHALLENGE.notebook, setup.parameters, limits)

        def entry(status: str, problem: str | None, **found: Any) -> ChallengeEntry:
            return ChallengeEntry(status, problem, [*([problem] if problem else []), *outcome.remarks],
                                  seconds=time.monotonic() - started, executed=outcome.executed, **found)

        if outcome.answers is None:
            return entry(outcome.status, outcome.reason)
        pipeline = pipeline_of(outcome.answers)
        if isinstance(pipeline, str):
            answer = outcome.answers.get("pipeline")
            shown = answer.get("shown") if isinstance(answer, Mapping) else None
            return entry("rejected", pipeline, shown=shown if isinstance(shown, str) else None)
        spec = pipeline_spec(pipeline)
        key = json.dumps(spec, sort_keys=True)
        with self._scoring:
            try:
                scores = self._scored.get(key) or setup.score(pipeline)
            except Exception as exc:  # noqa: BLE001 (a pipeline of valid pieces can still fail on a query: its own entry)
                reason = f"конвейер упал на скрытых запросах: {shorten(f'{type(exc).__name__}: {exc}', ERROR_CHARS)}"
                return entry("search_failed", reason, shown=str(pipeline), spec=spec)
            self._scored[key] = scores
        return entry("graded", None, shown=str(pipeline), spec=spec, recall=list(scores.recall), mrr=list(scores.mrr))


def grade_class(grader: Grader, students: Sequence[Student], *, jobs: int | None = None,
                done: Callable[[StudentGrade], None] | None = None) -> list[StudentGrade]:
    """Grade `students` (`jobs` at a time, default the grader's), in their order; `done` is called as each student
    is finished. The grader's own `jobs` bounds the notebooks executing at once, whatever the students' number."""
    jobs = grader.jobs if jobs is None else jobs
    def one(number: int, student: Student) -> StudentGrade:
        grade = grader.grade(number, student)
        if done is not None:
            done(grade)
        return grade

    if jobs <= 1:
        return [one(number, student) for number, student in enumerate(students, start=1)]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(one, number, student): number for number, student in enumerate(students, start=1)}
        grades = {futures[future]: future.result() for future in as_completed(futures)}
    return [grades[number] for number in sorted(grades)]
