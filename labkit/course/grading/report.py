"""The reports of a grading run, in Russian: grades.csv, grades.json, index.html for the class, a page per student.

``index.html`` is the instructor's: the table of points, how many students passed each case
(hidden ones included) and every student's verdicts. ``students/<slug>.html`` is the one to
hand to a student: visible cases with their problems, hidden cases only as points. The pages
are static and self-contained (inline CSS, no scripts); everything a student wrote is escaped.
When the run scored the challenge (``--hidden``), index.html gains the class leaderboard (places,
intervals, which gaps are real, the certificate lines), ``leaderboard.csv`` holds it as a table,
and each student's page their place and their certificate line, or how far they were from it;
the hidden queries themselves appear nowhere.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from html import escape
from pathlib import Path

from labkit.core.text import count, plural
from labkit.course.checks.common import of_points
from labkit.course.grading.results import STATUS_TEXT, ClassGrades, ExerciseGrade, Leaderboard, StudentGrade

__all__ = ["write_reports"]

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; width: 100%; }
th, td { border: 1px solid #ccc; padding: .3rem .6rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; white-space: nowrap; }
.full { background: #e3f4e1; } .part { background: #fff4d6; } .zero { background: #fbe3e1; }
.ok { color: #1b7a1b; } .bad { color: #b3261e; } .muted { color: #666; }
tr.reference td { font-style: italic; background: #f3f3f3; }
p.certificate { border: 2px solid #1b7a1b; padding: .6rem .8rem; background: #e3f4e1; }
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


def _student_challenge(board: Leaderboard, student: StudentGrade) -> str:
    """The student's challenge: their pipeline, place and interval, and the certificate line or how far from it."""
    entry = student.challenge
    if entry is None:
        return ""
    metric = f"Recall@{board.top_k}"
    on = count(board.queries, "скрытом запросе", "скрытых запросах", "скрытых запросах")
    head = f"<h2>Испытание (31): свой конвейер поиска на {on}</h2>"
    notes = "".join(f"<li>{escape(n)}</li>" for n in entry.notes)
    if not entry.scored:
        return (head + f"<p>Конвейер не оценён ({escape(STATUS_TEXT[entry.status])}).</p>"
                + (f"<ul>{notes}</ul>" if notes else ""))
    row = next(r for r in board.rows if r.slug == student.slug)
    text = (f"<p>Конвейер: <code>{escape(row.pipeline)}</code>. {metric} = {row.recall:.3f} "
            f"(95 % интервал {row.low:.3f}–{row.high:.3f}), MRR = {row.mrr:.3f}; место {row.place} из {len(board.rows)} "
            f"{plural(len(board.rows), 'строки', 'строк', 'строк')} таблицы класса (вместе с простым гибридом курса).</p>")
    if student.name in board.certificates:
        text += f'<p class="certificate">{escape(board.certificates[student.name])}</p>'
    else:
        text += (f"<p>Сертификат не выдан: {metric} = {row.recall:.3f} ниже порога {board.threshold:.2f}.</p>")
    return head + text + (f"<p>Замечания:</p><ul>{notes}</ul>" if notes else "")


def _student_page(grades: ClassGrades, student: StudentGrade) -> str:
    total = (f"<p><strong>Итого: {student.points} {of_points(student.max_points)}.</strong> " if student.exercises
             else "<p>")
    body = (f"<h1>Проверка заданий: {escape(student.name)}</h1>"
            + total + f'<span class="muted">Проверено {escape(grades.started[:16].replace("T", " "))}.</span></p>'
            + "".join(_exercise_section(e, show_hidden=False, level=2) for e in student.exercises)
            + (_student_challenge(grades.leaderboard, student) if grades.leaderboard else ""))
    return _page(f"Проверка заданий: {student.name}", body)


def _pass_rates(grades: ClassGrades) -> str:
    if not grades.students or not grades.students[0].exercises:
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


def _challenge_details(student: StudentGrade) -> str:
    entry = student.challenge
    if entry is None:
        return ""
    notes = "".join(f"<li>{escape(n)}</li>" for n in entry.notes)
    pipeline = f" <code>{escape(entry.shown)}</code>" if entry.shown else ""
    return (f"<h3>Испытание (31): {escape(STATUS_TEXT[entry.status])}</h3>"
            f'<p class="muted">Конвейер:{pipeline or " нет"}; {entry.seconds:.0f} с.</p>'
            + (f"<p>Замечания:</p><ul>{notes}</ul>" if notes else ""))


def _class_page(grades: ClassGrades) -> str:
    students = grades.students
    keys = [e.key for e in students[0].exercises] if students else []
    head = "".join(f"<th>{escape(key)}</th>" for key in keys) + ("<th>Итого</th>" if keys else "")
    rows = "".join(
        f'<tr><td><a href="students/{escape(s.slug)}.html">{escape(s.name)}</a></td>'
        + "".join(_cell(e) for e in s.exercises)
        + (f'<td class="num {_grade_class(s.points, s.max_points)}"><strong>{s.points}</strong> '
           f"{of_points(s.max_points)}</td>" if keys else "")
        + f'<td class="num">{s.seconds:.0f}</td></tr>'
        for s in students)
    details = "".join(
        f"<details><summary>{escape(s.name)}" + (f": {s.points} {of_points(s.max_points)}" if keys else "") + "</summary>"
        + "".join(_exercise_section(e, show_hidden=True, level=3) for e in s.exercises) + _challenge_details(s)
        + "</details>"
        for s in students)
    body = (f"<h1>Оценки класса</h1><p>Папка {escape(grades.source)}, студентов: {len(students)}, "
            f"проверка {escape(grades.started[:16].replace('T', ' '))} заняла {grades.seconds:.0f} с. "
            f'<span class="muted">Запуск {escape(grades.run_id)}, зерно скрытых примеров {grades.seed}.</span></p>'
            f"<table><tr><th>Студент</th>{head}<th>Секунд</th></tr>{rows}</table>"
            + (_leaderboard(grades.leaderboard) if grades.leaderboard else "")
            + _pass_rates(grades)
            + "<h2>Подробно, со скрытыми проверками</h2>" + details)
    return _page("Оценки класса", body)


def _leaderboard(board: Leaderboard) -> str:
    """The class leaderboard of the challenge, with what the number of hidden queries can tell."""
    metric = f"Recall@{board.top_k}"
    rows = []
    for row in board.rows:
        name = (f'<a href="students/{escape(row.slug)}.html">{escape(row.name)}</a>' if row.slug else escape(row.name))
        p_next = "—" if row.p_next is None else f"{row.p_next:.3f}"
        certificate = "да" if row.certificate else ("" if row.slug is None else "нет")
        rows.append(f'<tr{" class=reference" if row.slug is None else ""}><td class="num">{row.place}</td>'
                    f"<td>{name}</td><td><code>{escape(row.pipeline)}</code></td>"
                    f'<td class="num">{row.recall:.3f}</td><td class="num">{row.low:.3f}–{row.high:.3f}</td>'
                    f'<td class="num">{row.mrr:.3f}</td><td class="num">{p_next}</td><td>{certificate}</td></tr>')
    unranked = "".join(f"<li>{escape(name)}: {escape(reason)}</li>" for name, reason in board.unranked)
    certificates = "".join(f'<p class="certificate">{escape(line)}</p>' for line in board.certificates.values())
    return (f"<h2>Испытание (31): таблица лидеров</h2>"
            f'<p class="muted">Скрытые запросы: {escape(board.source)}. Порог сертификата: {metric} не ниже '
            f"{board.threshold:.2f}.</p>"
            f"<table><tr><th>Место</th><th>Участник</th><th>Конвейер</th><th>{metric}</th><th>95 % интервал</th>"
            f"<th>MRR</th><th>p против следующей строки</th><th>Сертификат</th></tr>{''.join(rows)}</table>"
            + "".join(f"<p>{escape(sentence)}</p>" for sentence in board.noise)
            + (f"<p>Без места в таблице:</p><ul>{unranked}</ul>" if unranked else "")
            + (f"<h3>Сертификаты</h3>{certificates}" if certificates else "<p>Сертификатов в этом запуске нет.</p>"))


def _csv(grades: ClassGrades, path: Path) -> None:
    keys = [e.key for e in grades.students[0].exercises] if grades.students else []
    board = grades.leaderboard
    places = {row.slug: row for row in board.rows if row.slug} if board else {}
    challenge = [f"испытание: Recall@{board.top_k}", "испытание: место", "сертификат"] if board else []
    with path.open("w", encoding="utf-8", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["студент", *keys, "итого", "максимум", "секунд", *challenge])
        for s in grades.students:
            row = places.get(s.slug)
            extra = ([f"{row.recall:.4f}", row.place, "да" if row.certificate else "нет"] if row else ["", "", "нет"])
            writer.writerow([s.name, *(e.points for e in s.exercises), s.points, s.max_points, f"{s.seconds:.1f}",
                             *(extra if board else [])])


def _leaderboard_csv(board: Leaderboard, path: Path) -> None:
    with path.open("w", encoding="utf-8", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["место", "участник", "конвейер", f"Recall@{board.top_k}", "от", "до", "MRR",
                         "p против следующей строки", "сертификат"])
        for row in board.rows:
            writer.writerow([row.place, row.name, row.pipeline, f"{row.recall:.4f}", f"{row.low:.4f}", f"{row.high:.4f}",
                             f"{row.mrr:.4f}", "" if row.p_next is None else f"{row.p_next:.4f}",
                             "" if row.slug is None else ("да" if row.certificate else "нет")])


def write_reports(grades: ClassGrades, out: Path) -> Sequence[Path]:
    """Write grades.csv, grades.json, index.html, students/<slug>.html (and leaderboard.csv) into `out`.

    Returns the paths of grades.csv, grades.json and index.html, then leaderboard.csv when there is one.
    """
    out.mkdir(parents=True, exist_ok=True)
    (out / "students").mkdir(exist_ok=True)
    csv_path, json_path, html_path = out / "grades.csv", out / "grades.json", out / "index.html"
    _csv(grades, csv_path)
    json_path.write_text(json.dumps(grades.to_dict(), ensure_ascii=False, indent=1), encoding="utf-8")
    html_path.write_text(_class_page(grades), encoding="utf-8")
    for student in grades.students:
        (out / "students" / f"{student.slug}.html").write_text(_student_page(grades, student), encoding="utf-8")
    if grades.leaderboard is None:
        return csv_path, json_path, html_path
    board_path = out / "leaderboard.csv"
    _leaderboard_csv(grades.leaderboard, board_path)
    return csv_path, json_path, html_path, board_path
