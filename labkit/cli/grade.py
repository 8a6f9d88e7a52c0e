"""``grade``: execute and score every student's exercise notebooks 07-09 (see README, «Grading a class»).

    ./run.sh grade DIR [--out FOLDER] [--timeout S] [--cell-timeout S] [--jobs N] [--exercises 07,09]

DIR holds one folder per student with their notebooks under the course's file names. Each
notebook runs in its own kernel and process group, on its own database copied from a
template made for this run (``labkit.course.grading``); the grader's cell collects the answers and
this process scores them against its own references, hidden cases included. Reports go to
--out (default: DIR/../grades): grades.csv, grades.json, index.html and students/*.html.
A student's notebook can cost only that student points; the run's databases and roles are
dropped at its end.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from labkit.core.text import count
from labkit.course.checks.common import of_points
from labkit.course.checks.registry import EXERCISES
from labkit.course.grading import (
    ClassGrades,
    Grader,
    RunDatabases,
    StudentGrade,
    exercise_setups,
    find_students,
    grade_class,
    kernel_environment,
    warm_template,
    write_reports,
)
from labkit.course.grading.limits import CELL_TIMEOUT
from labkit.services.setup import open_lab
from labkit.services.stack import ensure_stack

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``grade`` command to the sub-parsers `sub`."""
    parser = sub.add_parser("grade", help="execute and score a class's exercise notebooks (07-09)",
                            description="Execute every student's exercise notebooks in isolation and score them.")
    parser.add_argument("dir", metavar="DIR", help="a folder with one folder of notebooks per student")
    parser.add_argument("--out", metavar="FOLDER", help="where the reports go (default: DIR/../grades)")
    parser.add_argument("--timeout", type=float, metavar="S",
                        help="seconds per notebook (default: the starter's metadata labkit.timeout, else 600)")
    parser.add_argument("--cell-timeout", type=float, default=CELL_TIMEOUT, metavar="S",
                        help=f"seconds per cell before it is interrupted (default {CELL_TIMEOUT:g})")
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="students graded at once (default 1)")
    parser.add_argument("--exercises", metavar="KEYS", help=f"comma-separated, of {', '.join(EXERCISES)} (default: all)")
    parser.set_defaults(run=run)


def _say(lock: threading.Lock, text: str) -> None:
    with lock:
        print(text, flush=True)


def _line(student: StudentGrade) -> str:
    parts = ", ".join(f"{e.key}: {e.points}" for e in student.exercises)
    return (f"{student.name}: {student.points} {of_points(student.max_points)} ({parts}), "
            f"проверка заняла {student.seconds:.1f} с")


def run(args: argparse.Namespace) -> int:
    """Grade the class in args.dir and write the reports."""
    root = Path(args.dir)
    if not root.is_dir():
        args.parser.error(f"{root} is not a folder")
    keys = [k.strip() for k in args.exercises.split(",") if k.strip()] if args.exercises else list(EXERCISES)
    if not keys or any(k not in EXERCISES for k in keys):
        args.parser.error(f"--exercises takes keys of {', '.join(EXERCISES)}, got {args.exercises!r}")
    if args.jobs < 1 or (args.timeout is not None and args.timeout <= 0) or args.cell_timeout <= 0:
        args.parser.error("--jobs, --timeout and --cell-timeout must be positive")
    out = Path(args.out) if args.out else root.resolve().parent / "grades"
    students = find_students(root, skip=[out])
    if not students:
        args.parser.error(f"{root} has no student folders (one folder of notebooks per student)")
    setups = exercise_setups(keys=keys)
    settings = ensure_stack()
    assert settings.database_url and settings.ollama_host  # ensure_stack returns concrete addresses
    run_id, seed, started = secrets.token_hex(4), secrets.randbelow(2**31), time.monotonic()
    limits = {f"timeout_{s.exercise.key}": args.timeout or s.timeout for s in setups}
    grades = ClassGrades(run_id, seed, datetime.now().astimezone().isoformat(timespec="seconds"), str(root.resolve()),
                         {s.exercise.key: s.parameters for s in setups}, {**limits, "cell_timeout": args.cell_timeout})
    lock = threading.Lock()
    databases = RunDatabases(settings.database_url, run_id)
    _say(lock, f"Проверяю {count(len(students), 'папку', 'папки', 'папок')} из {root} (запуск {run_id}): "
               "готовлю шаблонную базу с корпусом ...")
    try:
        template = databases.create_template()
        with open_lab(settings.with_services(template, settings.ollama_host)) as lab:
            warm_template(lab)
        databases.seal_template()
        with open_lab(settings.with_services(databases.create_reference(), settings.ollama_host)) as reference:
            contexts = {s.exercise.key: s.exercise.context(reference, s.parameters, seed) for s in setups}
            grader = Grader(setups=setups, contexts=contexts, databases=databases, seed=seed, out=out,
                            env=kernel_environment(os.environ, settings), cell_timeout=args.cell_timeout,
                            timeout=args.timeout)
            grades.students = grade_class(grader, students, jobs=args.jobs, done=lambda g: _say(lock, _line(g)))
    finally:
        for problem in databases.drop_all():
            print(f"labkit grade: warning: could not drop {problem}", file=sys.stderr)
    grades.seconds = time.monotonic() - started
    paths = write_reports(grades, out)
    per_student = [s.seconds for s in grades.students]
    _say(lock, f"Готово за {grades.seconds:.0f} с, в среднем {sum(per_student) / len(per_student):.1f} с на студента. "
               f"Отчёты: {', '.join(str(p) for p in paths)}, {out / 'students'}")
    return 0
