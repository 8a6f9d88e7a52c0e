"""How the class grader gets a student's answers out of an executed notebook (``./run.sh grade``).

The grader appends one cell of its own to the copy of the notebook it executes (the
student's file is not changed). That cell calls ``emit``: in the student's kernel, after
all their cells ran, it collects the exercise's answers (``Exercise.collect``: the student's
functions called on visible and seeded hidden inputs, their variables read as data) and
displays them as JSON under ``ANSWERS_MIME``. The grader reads that output back with
``read_answers`` and scores it in its own process against references it computed itself,
so what a notebook prints (a verdict, a score) is never trusted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from labkit.core.text import ERROR_CHARS, shorten
from labkit.course.checks.registry import collector

__all__ = ["ANSWERS_MIME", "GRADER_TAG", "MAX_ANSWERS_CHARS", "emit", "grader_cell_source", "read_answers"]

ANSWERS_MIME = "application/vnd.labkit.answers+json"
GRADER_TAG = "labkit-grader"  # the tag of the cell the grader appends; a student's cell with it is removed
MAX_ANSWERS_CHARS = 2_000_000  # collected answers are far smaller; more means something is wrong


def grader_cell_source(key: str, seed: int) -> str:
    """The code of the cell the grader appends to exercise `key`'s notebook."""
    return ("# Эту ячейку добавила проверка преподавателя: она собирает ответы для оценки.\n"
            "import labkit.course.checks.answers as _labkit_answers\n"
            f"_labkit_answers.emit({key!r}, globals(), {seed})")


def emit(key: str, namespace: Mapping[str, Any], seed: int) -> None:
    """Collect the answers of exercise `key` (or the challenge) from a notebook's variables and display them as data."""
    from IPython.display import display  # only ever called inside a kernel

    try:
        payload: dict[str, Any] = {"exercise": key, "seed": seed, "answers": collector(key)(namespace, seed)}
        text = json.dumps(payload, ensure_ascii=False, allow_nan=False, default=str)
        if len(text) > MAX_ANSWERS_CHARS:
            raise ValueError(f"ответы занимают {len(text)} символов")
    except Exception as exc:  # noqa: BLE001 (whatever the student's variables hold, the grader gets a reason)
        payload = {"exercise": key, "seed": seed, "error": shorten(f"{type(exc).__name__}: {exc}", ERROR_CHARS)}
    display({ANSWERS_MIME: payload, "text/plain": "Ответы собраны для проверки."}, raw=True)


def read_answers(notebook: Mapping[str, Any], key: str, seed: int) -> dict[str, Any] | str:
    """The answers the grader's cell displayed in an executed notebook, or the Russian reason there are none."""
    cells = [cell for cell in notebook.get("cells", []) if GRADER_TAG in cell.get("metadata", {}).get("tags", [])]
    if not cells:
        return "ячейка проверки не выполнялась"
    found = [output.get("data", {}).get(ANSWERS_MIME) for output in cells[-1].get("outputs", [])
             if output.get("output_type") == "display_data"]
    found = [p for p in found if isinstance(p, Mapping) and p.get("exercise") == key and p.get("seed") == seed]
    errors = [output for output in cells[-1].get("outputs", []) if output.get("output_type") == "error"]
    if len(found) != 1:
        if errors:
            return f"ячейка проверки упала: {shorten(str(errors[0].get('ename')) + ': ' + str(errors[0].get('evalue')), ERROR_CHARS)}"
        return "ячейка проверки не вывела ответов"
    payload = found[0]
    if "error" in payload or not isinstance(payload.get("answers"), Mapping):
        return f"ответы не удалось собрать: {payload.get('error', 'нет данных')}"
    return dict(payload["answers"])
