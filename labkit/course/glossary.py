"""The glossary of search modes: Russian name, id in code, what it does, the lesson that teaches it (05 and 30_capstone).

Built from ``labkit.retrieval.modes.MODE_INFO`` and the lessons' own headers (``labkit.course.coursemap``),
so a renamed lesson or a new mode changes the glossary without editing it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from labkit.course.coursemap import REPOSITORY, course_map
from labkit.retrieval.modes import MODE_INFO, SEARCH_MODES

__all__ = ["mode_glossary"]


def mode_glossary(modes: Iterable[str] | None = None, lesson: bool = True, root: Path = REPOSITORY) -> str:
    """The modes (default: all, in table order) as a Markdown table with links relative to ``notebooks/``.

    Columns: the Russian name, the id in code, what the mode does and, with `lesson`, the lesson that
    teaches it (a lesson showing its own modes leaves that out). Taught in 05_evaluation, where the modes
    are first compared; 30_capstone shows all of them.
    """
    titles = {item.path.stem: f"{item.number} — {item.title}" for item in course_map(root)} if lesson else {}
    rows = ["| режим | id в коде | что делает |" + (" урок |" if lesson else ""), "|---|---|---|" + ("---|" if lesson else "")]
    for mode in SEARCH_MODES if modes is None else modes:
        info = MODE_INFO[mode]
        taught = f" [{titles.get(info.lesson, info.lesson)}]({info.lesson}.ipynb) |" if lesson else ""
        rows.append(f"| {info.name} | `{mode}` | {info.does} |{taught}")
    return "\n".join(rows)
