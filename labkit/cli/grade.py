"""``grade``: execute and score every student's exercise notebooks 07-09 (see README, «Grading a class»).

    ./run.sh grade DIR [--out FOLDER] [--timeout S] [--cell-timeout S] [--jobs N] [--exercises 07,09]
    ./run.sh grade DIR --hidden FILE [--certificate R] [--exercises 31]   # and the challenge (README, «The challenge»)

DIR holds one folder per student with their notebooks under the course's file names. Each
notebook runs in its own kernel and process group, on its own database copied from a
template made for this run (``labkit.course.grading``); the grader's cell collects the answers and
this process scores them against its own references, hidden cases included. Reports go to
--out (default: DIR/../grades): grades.csv, grades.json, index.html and students/*.html.
A student's notebook can cost only that student points; the run's databases and roles are
dropped at its end.

With ``--hidden FILE`` (the instructor's hidden queries, kept outside the repository) the run also
executes each student's 31_challenge.ipynb, rebuilds its PIPELINE from the course's pieces and
scores it on those queries on the grader's own database; index.html and leaderboard.csv get the
class leaderboard with intervals, and a student at or above the certificate threshold
(``--certificate``, mean Recall@3) a certificate line.
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
from labkit.course.checks.challenge import CERTIFICATE_RECALL, baseline_pipeline
from labkit.course.checks.common import of_points
from labkit.course.checks.registry import CHALLENGE, EXERCISES
from labkit.course.grading import (
    ClassGrades,
    Grader,
    Leaderboard,
    RunDatabases,
    StudentGrade,
    build_leaderboard,
    challenge_setup,
    course_overlap,
    exercise_setups,
    find_students,
    grade_class,
    kernel_environment,
    load_hidden,
    warm_challenge,
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
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="notebooks executed at once, of one student or several (default 1)")
    parser.add_argument("--exercises", metavar="KEYS",
                        help=f"comma-separated, of {', '.join([*EXERCISES, CHALLENGE.key])} (default: all exercises, "
                             f"and the challenge {CHALLENGE.key} with --hidden)")
    parser.add_argument("--hidden", metavar="FILE.jsonl",
                        help="the instructor's hidden queries (format of labkit/data/retrieval.jsonl): score every "
                             f"student's {CHALLENGE.notebook} on them and write the class leaderboard")
    parser.add_argument("--certificate", type=float, default=CERTIFICATE_RECALL, metavar="R",
                        help=f"mean Recall@3 on the hidden queries that earns the certificate (default {CERTIFICATE_RECALL:g})")
    parser.set_defaults(run=run)


def _say(lock: threading.Lock, text: str) -> None:
    with lock:
        print(text, flush=True)


def _line(student: StudentGrade) -> str:
    parts = [f"{student.points} {of_points(student.max_points)} ({', '.join(f'{e.key}: {e.points}' for e in student.exercises)})"
             ] if student.exercises else []
    entry = student.challenge
    if entry is not None:
        parts.append(f"испытание: Recall@3 {sum(entry.recall) / len(entry.recall):.3f}" if entry.scored
                     else f"испытание: {entry.problem}")
    return f"{student.name}: {'; '.join(parts)}; проверка заняла {student.seconds:.1f} с"


def _board_lines(board: Leaderboard) -> list[str]:
    """The leaderboard as the command prints it: places, then what the hidden queries can tell, then certificates."""
    lines = ["Таблица лидеров испытания:"]
    lines += [f"  {row.place}. {row.name}: Recall@{board.top_k} {row.recall:.3f} ({row.low:.3f}–{row.high:.3f}), "
              f"«{row.pipeline}»" + (", сертификат" if row.certificate else "") for row in board.rows]
    lines += board.noise
    lines += [f"Без места: {name} — {reason}" for name, reason in board.unranked]
    lines += list(board.certificates.values()) or [f"Сертификатов нет: никто не достиг порога {board.threshold:.2f}."]
    return lines


def _keys(args: argparse.Namespace) -> tuple[list[str], bool]:
    """The exercises to grade, and whether the challenge is graded; a wrong combination is an argument error."""
    known = [*EXERCISES, CHALLENGE.key]
    if args.exercises:
        keys = [k.strip() for k in args.exercises.split(",") if k.strip()]
    else:
        keys = list(EXERCISES) + ([CHALLENGE.key] if args.hidden else [])
    if not keys or any(k not in known for k in keys):
        args.parser.error(f"--exercises takes keys of {', '.join(known)}, got {args.exercises!r}")
    challenge = CHALLENGE.key in keys
    if challenge and not args.hidden:
        args.parser.error(f"the challenge {CHALLENGE.key} is scored on hidden queries: give --hidden FILE.jsonl")
    if args.hidden and not challenge:
        args.parser.error(f"--hidden scores the challenge {CHALLENGE.key}: add {CHALLENGE.key} to --exercises or leave it out")
    if not 0 < args.certificate <= 1:
        args.parser.error(f"--certificate is a mean Recall@3 in (0, 1], got {args.certificate:g}")
    return [k for k in keys if k != CHALLENGE.key], challenge


def run(args: argparse.Namespace) -> int:
    """Grade the class in args.dir and write the reports."""
    root = Path(args.dir)
    if not root.is_dir():
        args.parser.error(f"{root} is not a folder")
    keys, with_challenge = _keys(args)
    if args.jobs < 1 or (args.timeout is not None and args.timeout <= 0) or args.cell_timeout <= 0:
        args.parser.error("--jobs, --timeout and --cell-timeout must be positive")
    out = Path(args.out) if args.out else root.resolve().parent / "grades"
    students = find_students(root, skip=[out])
    if not students:
        args.parser.error(f"{root} has no student folders (one folder of notebooks per student)")
    hidden = load_hidden(args.hidden) if with_challenge else []  # a bad file stops the run before any service starts
    setups = exercise_setups(keys=keys) if keys else []
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
    overlap = course_overlap(hidden) if with_challenge else []
    if with_challenge:
        _say(lock, f"Испытание {CHALLENGE.key}: {count(len(hidden), 'скрытый запрос', 'скрытых запроса', 'скрытых запросов')} "
                   f"из {args.hidden}, порог сертификата Recall@3 ≥ {args.certificate:.2f}."
                   + (f" Внимание: {len(overlap)} из них есть среди размеченных запросов курса." if overlap else ""))
    try:
        template = databases.create_template()
        with open_lab(settings.with_services(template, settings.ollama_host)) as lab:
            warm_template(lab)
            if with_challenge:
                warm_challenge(lab)  # the hidden queries never go here: every student's database is a copy of it
        databases.seal_template()
        with open_lab(settings.with_services(databases.create_reference(), settings.ollama_host)) as reference:
            contexts = {s.exercise.key: s.exercise.context(reference, s.parameters, seed) for s in setups}
            challenge = challenge_setup(reference, hidden) if with_challenge else None
            baseline = challenge.score(baseline_pipeline()) if challenge else None
            if challenge:
                grades.parameters[CHALLENGE.key] = challenge.parameters
                grades.limits[f"timeout_{CHALLENGE.key}"] = args.timeout or challenge.timeout
            grader = Grader(setups=setups, contexts=contexts, databases=databases, seed=seed, out=out,
                            env=kernel_environment(os.environ, settings), cell_timeout=args.cell_timeout,
                            timeout=args.timeout, challenge=challenge, jobs=args.jobs)
            grades.students = grade_class(grader, students, done=lambda g: _say(lock, _line(g)))
            if baseline is not None:
                grades.leaderboard = build_leaderboard(grades.students, baseline, source=str(Path(args.hidden).resolve()),
                                                       threshold=args.certificate, overlap=len(overlap))
    finally:
        for problem in databases.drop_all():
            print(f"labkit grade: warning: could not drop {problem}", file=sys.stderr)
    grades.seconds = time.monotonic() - started
    paths = write_reports(grades, out)
    if grades.leaderboard is not None:
        for line in _board_lines(grades.leaderboard):
            _say(lock, line)
    per_student = [s.seconds for s in grades.students]
    _say(lock, f"Готово за {grades.seconds:.0f} с, в среднем {sum(per_student) / len(per_student):.1f} с на студента. "
               f"Отчёты: {', '.join(str(p) for p in paths)}, {out / 'students'}")
    return 0
