"""The reports of a grading run, in Russian: grades.csv, grades.json, index.html for the class, a page per student.

``index.html`` is the instructor's: the table of points, how many students passed each case
(hidden ones included) and every student's verdicts. ``students/<slug>.html`` is the one to
hand to a student: visible cases with their problems, hidden cases only as points. The pages
are static and self-contained (inline CSS, no scripts); everything a student wrote is escaped.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from html import escape
from pathlib import Path

from labkit.course.checks.common import of_points
from labkit.course.grading.results import STATUS_TEXT, ClassGrades, ExerciseGrade, StudentGrade

__all__ = ["write_reports"]

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; width: 100%; }
th, td { border: 1px solid #ccc; padding: .3rem .6rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; white-space: nowrap; }
.full { background: #e3f4e1; } .part { background: #fff4d6; } .zero { background: #fbe3e1; }
.ok { color: #1b7a1b; } .bad { color: #b3261e; } .muted { color: #666; }
ul.problems { margin: .2rem 0 .4rem 1.2rem; padding: 0; }
details { margin: .5rem 0; } summary { cursor: pointer; font-weight: 600; }
"""


def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="ru">\n<head>\n<meta charset="utf-8">\n<title>{escape(title)}</title>\n'
            f"<style>{_CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


def _grade_class(points: int, max_points: int) -> str:
    return "full" if points == max_points and max_points else ("zero" if points == 0 else "part")


def _cell(exercise: ExerciseGrade) -> str:
    status = "" if exercise.status == "graded" else f' <span class="muted">({STATUS_TEXT[exercise.status]})</span>'
    return (f'<td class="num {_grade_class(exercise.points, exercise.max_points)}">'
            f"{exercise.points} {of_points(exercise.max_points)}{status}</td>")


def _cases(exercise: ExerciseGrade, *, show_hidden: bool) -> str:
    rows = []
    for case in exercise.cases:
        if case.hidden and not show_hidden:
            continue
        mark = '<span class="ok">✓</span>' if case.passed else '<span class="bad">✗</span>'
        hidden = ' <span class="muted">(скрытая)</span>' if case.hidden else ""
        problems = "".join(f"<li>{escape(p)}</li>" for p in case.problems)
        rows.append(f"<tr><td>{mark}</td><td>{escape(case.name)}{hidden}"
                    f'{f"<ul class=problems>{problems}</ul>" if problems else ""}</td>'
                    f'<td class="num">{case.earned} {of_points(case.points)}</td></tr>')
    hidden_cases = [case for case in exercise.cases if case.hidden]
    if hidden_cases and not show_hidden:
        earned, total = sum(c.earned for c in hidden_cases), sum(c.points for c in hidden_cases)
        rows.append(f'<tr><td></td><td>Скрытые проверки <span class="muted">(их содержание не показывается)</span></td>'
                    f'<td class="num">{earned} {of_points(total)}</td></tr>')
    return "<table><tr><th></th><th>Проверка</th><th>Баллы</th></tr>" + "".join(rows) + "</table>"


def _exercise_section(exercise: ExerciseGrade, *, show_hidden: bool, level: int) -> str:
    notes = "".join(f"<li>{escape(n)}</li>" for n in exercise.notes)
    status = STATUS_TEXT[exercise.status]
    title = exercise.title[:1].upper() + exercise.title[1:]
    return (f"<h{level}>{escape(title)}: {exercise.points} {of_points(exercise.max_points)}</h{level}>"
            f'<p class="muted">Ноутбук {escape(exercise.notebook)}: {escape(status)}, {exercise.seconds:.0f} с.</p>'
            + (f"<p>Замечания:</p><ul>{notes}</ul>" if notes else "")
            + _cases(exercise, show_hidden=show_hidden))


def _student_page(grades: ClassGrades, student: StudentGrade) -> str:
    body = (f"<h1>Проверка заданий: {escape(student.name)}</h1>"
            f"<p><strong>Итого: {student.points} {of_points(student.max_points)}.</strong> "
            f'<span class="muted">Проверено {escape(grades.started[:16].replace("T", " "))}.</span></p>'
            + "".join(_exercise_section(e, show_hidden=False, level=2) for e in student.exercises))
    return _page(f"Проверка заданий: {student.name}", body)


def _pass_rates(grades: ClassGrades) -> str:
    if not grades.students:
        return ""
    rows = []
    for index, first in enumerate(grades.students[0].exercises):
        for number, case in enumerate(first.cases):
            passed = sum(1 for s in grades.students if s.exercises[index].cases[number].passed)
            hidden = "да" if case.hidden else ""
            rows.append(f"<tr><td>{escape(first.key)}</td><td>{escape(case.name)}</td><td>{hidden}</td>"
                        f'<td class="num">{case.points}</td><td class="num">{passed} из {len(grades.students)}</td></tr>')
    return ("<h2>Проверки</h2><table><tr><th>Задание</th><th>Проверка</th><th>Скрытая</th><th>Баллов</th>"
            "<th>Прошли</th></tr>" + "".join(rows) + "</table>")


def _class_page(grades: ClassGrades) -> str:
    students = grades.students
    keys = [e.key for e in students[0].exercises] if students else []
    head = "".join(f"<th>{escape(key)}</th>" for key in keys)
    rows = "".join(
        f'<tr><td><a href="students/{escape(s.slug)}.html">{escape(s.name)}</a></td>'
        + "".join(_cell(e) for e in s.exercises)
        + f'<td class="num {_grade_class(s.points, s.max_points)}"><strong>{s.points}</strong> {of_points(s.max_points)}'
          f'</td><td class="num">{s.seconds:.0f}</td></tr>'
        for s in students)
    details = "".join(
        f"<details><summary>{escape(s.name)}: {s.points} {of_points(s.max_points)}</summary>"
        + "".join(_exercise_section(e, show_hidden=True, level=3) for e in s.exercises) + "</details>"
        for s in students)
    body = (f"<h1>Оценки класса</h1><p>Папка {escape(grades.source)}, студентов: {len(students)}, "
            f"проверка {escape(grades.started[:16].replace('T', ' '))} заняла {grades.seconds:.0f} с. "
            f'<span class="muted">Запуск {escape(grades.run_id)}, зерно скрытых примеров {grades.seed}.</span></p>'
            f"<table><tr><th>Студент</th>{head}<th>Итого</th><th>Секунд</th></tr>{rows}</table>"
            + _pass_rates(grades)
            + "<h2>Подробно, со скрытыми проверками</h2>" + details)
    return _page("Оценки класса", body)


def _csv(grades: ClassGrades, path: Path) -> None:
    keys = [e.key for e in grades.students[0].exercises] if grades.students else []
    with path.open("w", encoding="utf-8", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["студент", *keys, "итого", "максимум", "секунд"])
        for s in grades.students:
            writer.writerow([s.name, *(e.points for e in s.exercises), s.points, s.max_points, f"{s.seconds:.1f}"])


def write_reports(grades: ClassGrades, out: Path) -> Sequence[Path]:
    """Write grades.csv, grades.json, index.html and students/<slug>.html into `out`; returns the first three."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "students").mkdir(exist_ok=True)
    csv_path, json_path, html_path = out / "grades.csv", out / "grades.json", out / "index.html"
    _csv(grades, csv_path)
    json_path.write_text(json.dumps(grades.to_dict(), ensure_ascii=False, indent=1), encoding="utf-8")
    html_path.write_text(_class_page(grades), encoding="utf-8")
    for student in grades.students:
        (out / "students" / f"{student.slug}.html").write_text(_student_page(grades, student), encoding="utf-8")
    return csv_path, json_path, html_path
