"""The course map is read from the lessons' own headers (00_intro shows it), so titles and times agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import labkit as lk
from labkit.course.coursemap import _HOURS, MINUTES, course_hours, course_map, notebook_time, time_minutes

REPO = Path(__file__).resolve().parents[1]


def test_every_lesson_header_has_a_numbered_title_and_a_time():
    lessons = course_map(REPO)
    assert [lesson.path.name for lesson in lessons] == sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
    assert [lesson.number for lesson in lessons] == [p.name[:2] for p in sorted((REPO / "notebooks").glob("*.ipynb"))]
    assert all(lesson.time.startswith("около") for lesson in lessons), [lesson.time for lesson in lessons]
    assert all(time_minutes(lesson.time) in MINUTES.values() for lesson in lessons)
    assert {lesson.path.name for lesson in lessons if lesson.solution} == {p.name for p in (REPO / "solutions").glob("*.ipynb")}


def test_the_markdown_map_links_every_lesson_with_its_header_title_and_time():
    table = lk.course_map_markdown(REPO)
    for lesson in course_map(REPO):
        assert f"[{lesson.number} — {lesson.title}]({lesson.path.name})" in table
        assert f"| {lesson.time} |" in table
    assert table.count("[решение](../solutions/") == len(list((REPO / "solutions").glob("*.ipynb")))


def test_00_intro_shows_the_generated_map_and_writes_none_by_hand():
    cells = json.loads((REPO / "notebooks" / "00_intro.ipynb").read_text(encoding="utf-8"))["cells"]
    sources = ["".join(cell["source"]) for cell in cells]
    assert not [s for s in sources if "| Урок |" in s], "a hand-written course map drifts from the lessons' headers"
    assert any("lk.course_map_markdown()" in s for s, c in zip(sources, cells) if c["cell_type"] == "code")


def test_a_header_without_its_time_line_is_named(tmp_path):
    (tmp_path / "notebooks").mkdir()
    cell = {"cell_type": "markdown", "metadata": {}, "source": ["# 01. Урок\n", "\n", "Текст."]}
    (tmp_path / "notebooks" / "01_x.ipynb").write_text(json.dumps({"cells": [cell]}), encoding="utf-8")
    with pytest.raises(ValueError, match="01_x.ipynb"):
        course_map(tmp_path)
    assert notebook_time([{**cell, "source": ["# 01. Урок\n", "**Время**: около часа.\n"]}]) == "около часа"


def test_the_whole_course_time_is_the_sum_of_the_headers_and_00_says_it_on_its_first_screen():
    total = sum(time_minutes(lesson.time) for lesson in course_map(REPO))
    assert course_hours(REPO) == f"около {_HOURS[round(total / 60)]} часов"
    assert f"| **Весь курс** | {course_hours(REPO)} |" in lk.course_map_markdown(REPO)
    first = "".join(json.loads((REPO / "notebooks" / "00_intro.ipynb").read_text(encoding="utf-8"))["cells"][0]["source"])
    assert f"весь курс — {course_hours(REPO)}" in first, f"00_intro's first cell must say «весь курс — {course_hours(REPO)}»"
    assert time_minutes("около получаса; заметная часть уходит на ответы моделей") == 30
    with pytest.raises(ValueError, match="starts with none of"):
        time_minutes("полдня")
