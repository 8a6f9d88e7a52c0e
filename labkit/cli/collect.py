"""``collect``: gather a class's exercise notebooks from the students' homes for grading (README, «Grading a class»).

    ./run.sh collect DIR [--group students] [--exercises 07,08,09,31]

On the machine of the hub (as root): for every account in the students' group, the exercise
notebooks in ``~/notebooks/`` (and the challenge, 31_challenge.ipynb) are copied into
``DIR/<student>/``, the layout ``./run.sh grade DIR`` reads. Links and anything but regular files
are left out.
"""

from __future__ import annotations

import argparse
import grp
import pwd
from pathlib import Path
from typing import Any

from labkit.core.text import count
from labkit.course.checks.registry import CHALLENGE, EXERCISES
from labkit.services.coursecopy import collect_exercises

__all__ = ["register", "run", "students_of", "NOTEBOOKS"]

NOTEBOOKS = {**{key: exercise.notebook for key, exercise in EXERCISES.items()}, CHALLENGE.key: CHALLENGE.notebook}


def register(sub: Any) -> None:
    """Add the ``collect`` command to the sub-parsers `sub`."""
    parser = sub.add_parser("collect", help="copy the students' exercise and challenge notebooks into DIR/<student>/ for grade",
                            description="Copy each student's exercise notebooks into DIR/<student>/.")
    parser.add_argument("dir", metavar="DIR", help="where the students' folders go (created if missing)")
    parser.add_argument("--group", default="students", help="the Unix group of the students (default students)")
    parser.add_argument("--exercises", help=f"comma-separated exercises (default: all, {','.join(NOTEBOOKS)})")
    parser.set_defaults(run=run)


def students_of(group: str) -> dict[str, Path]:
    """The accounts of `group` (members, and accounts whose primary group it is) with their home folders."""
    entry = grp.getgrnam(group)
    names = set(entry.gr_mem) | {user.pw_name for user in pwd.getpwall() if user.pw_gid == entry.gr_gid}
    return {name: Path(pwd.getpwnam(name).pw_dir) for name in sorted(names)}


def run(args: argparse.Namespace) -> int:
    """Collect the notebooks and say, in Russian, what was found."""
    keys = [k.strip() for k in (args.exercises or ",".join(NOTEBOOKS)).split(",") if k.strip()]
    unknown = [k for k in keys if k not in NOTEBOOKS]
    if unknown or not keys:
        args.parser.error(f"unknown exercise(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(NOTEBOOKS)}")
    try:
        homes = students_of(args.group)
    except KeyError:
        args.parser.error(f"no Unix group {args.group!r} on this machine")
    out = Path(args.dir)
    collected = collect_exercises(homes, [NOTEBOOKS[k] for k in keys], out)
    for student, names in collected.items():
        print(f"{student}: {', '.join(names) if names else 'нет тетрадей упражнений'}")
    handed_in = sum(1 for names in collected.values() if names)
    print(f"Собрано в {out}: {count(handed_in, 'студент', 'студента', 'студентов')} из {len(collected)}. "
          f"Дальше: ./run.sh grade {out}")
    return 0
