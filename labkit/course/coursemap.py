"""The course map, read from the notebooks' own headers: title, time, solution (shown in 00_intro).

Each notebook opens with a Markdown cell whose first line is ``# NN. Title`` and which has a line
``**Время**: …``. The map in 00_intro and the site's titles are read from there, so a lesson's title
or time is written once, in the lesson itself.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Lesson", "REPOSITORY", "notebook_title", "notebook_time", "time_minutes", "course_map", "course_hours",
           "course_map_markdown"]

REPOSITORY = Path(__file__).resolve().parents[2]  # the checkout labkit is installed from (editable)
_TIME = re.compile(r"^\*\*Время\*\*: (.+?)\.?$", re.MULTILINE)
# The words a header's time starts with («около получаса; …») and the minutes they mean.
MINUTES = {"около десяти минут": 10, "около четверти часа": 15, "около двадцати минут": 20, "около получаса": 30,
           "около сорока минут": 40, "около часа": 60, "около полутора часов": 90, "около двух часов": 120}


@dataclass(frozen=True)
class Lesson:
    """One notebook of the course as the map shows it."""

    number: str  # "05"
    title: str  # "Оценка: Recall@3, MRR и nDCG"
    time: str  # "около получаса"
    path: Path
    solution: Path | None  # the completed exercise, for exercises


def _cells(path: Path) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text(encoding="utf-8"))["cells"])


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def notebook_title(cells: list[dict[str, Any]]) -> str | None:
    """The text of the first ``# `` heading of a notebook's Markdown cells, without Markdown marks."""
    for cell in cells:
        if cell.get("cell_type") == "markdown":
            for line in _source(cell).splitlines():
                if line.startswith("# "):
                    return line[2:].replace("`", "").replace("*", "").strip()
    return None


def notebook_time(cells: list[dict[str, Any]]) -> str | None:
    """The ``**Время**: …`` line of the notebook's first cell, without its final full stop."""
    first = next((cell for cell in cells if cell.get("cell_type") == "markdown"), None)
    found = _TIME.search(_source(first)) if first else None
    return found.group(1).strip() if found else None


def course_map(root: Path = REPOSITORY) -> list[Lesson]:
    """Every notebook of ``root/notebooks`` in course order, read from its header. Taught in 00_intro.

    A notebook without a ``# NN. Title`` line or a ``**Время**:`` line is a ValueError naming it.
    """
    lessons = []
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        cells = _cells(path)
        title, time = notebook_title(cells), notebook_time(cells)
        numbered = re.fullmatch(r"(\d+)\. (.+)", title or "")
        if not numbered or not time:
            raise ValueError(f"{path}: the first cell needs a line '# NN. Title' and a line '**Время**: …'")
        solution = root / "solutions" / path.name
        lessons.append(Lesson(numbered[1], numbered[2], time, path, solution if solution.exists() else None))
    return lessons


def time_minutes(time: str) -> int:
    """The minutes a header's time means: its words up to the first «,» or «;» (``MINUTES``), else ValueError."""
    head = re.split(r"[,;]", time, maxsplit=1)[0].strip()
    if head not in MINUTES:
        raise ValueError(f"the time {time!r} starts with none of: {', '.join(MINUTES)}")
    return MINUTES[head]


# «около N часов» in words (the genitive after «около»): prose on a first screen carries no digits
_HOURS = ("", "одного", "двух", "трёх", "четырёх", "пяти", "шести", "семи", "восьми", "девяти", "десяти", "одиннадцати",
          "двенадцати", "тринадцати", "четырнадцати", "пятнадцати", "шестнадцати", "семнадцати", "восемнадцати",
          "девятнадцати", "двадцати")


def course_hours(root: Path = REPOSITORY) -> str:
    """The whole course's time, the sum of its lessons' header times, in Russian words («около тринадцати часов»).

    Taught in 00_intro.
    """
    hours = max(1, round(sum(time_minutes(lesson.time) for lesson in course_map(root)) / 60))
    if hours >= len(_HOURS):
        raise ValueError(f"a course of {hours} hours: extend _HOURS")
    return f"около {_HOURS[hours]} {'часа' if hours == 1 else 'часов'}"


def course_map_markdown(root: Path = REPOSITORY) -> str:
    """The course map as a Markdown table with links relative to ``notebooks/``. Taught in 00_intro."""
    rows = ["| Урок | Время |", "|---|---|"]
    for lesson in course_map(root):
        link = f"[{lesson.number} — {lesson.title}]({lesson.path.name})"
        if lesson.solution:
            link += f"; [решение](../solutions/{lesson.solution.name})"
        rows.append(f"| {link} | {lesson.time} |")
    rows.append(f"| **Весь курс** | {course_hours(root)} |")
    return "\n".join(rows)
