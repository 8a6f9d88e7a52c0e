"""``./run.sh grade``: a class graded notebook by notebook in isolation, scored by the exercises' cases.

Pure parts first (cases and hidden points, reading answers back, preparing a copy, the
call limit, the reports), then two real grading runs through the command line, each
executed once per module: the unmodified starters against the solutions, and students
whose notebooks are broken, endless, destructive or cheating, next to one who is not.
Every run uses the real Postgres and model server; the figures (seconds per student) are
printed (`pytest -s`) and kept in each run's grades.json.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from test_checks import _hand_rrf  # one hand-written RRF for both checker test files

import labkit as lk
from labkit.cli import main
from labkit.course.checks import EXERCISES
from labkit.course.checks.answers import ANSWERS_MIME, GRADER_TAG, grader_cell_source, read_answers
from labkit.course.checks.cases import CaseResult, run_cases
from labkit.course.checks.common import CallTimeout, call_limited
from labkit.course.checks.rrf import RrfContext, random_cases
from labkit.course.grading import (
    ClassGrades,
    ExerciseGrade,
    StudentGrade,
    exercise_setups,
    find_students,
    write_reports,
)
from labkit.course.grading.execute import Limits, execute, prepare

REPO = Path(__file__).resolve().parents[1]
NAMES = {key: exercise.notebook for key, exercise in EXERCISES.items()}


# --- pure parts ------------------------------------------------------------------------------------

def _toy_rrf():
    train = [lk.LabelledQuery("a", frozenset({1})), lk.LabelledQuery("b", frozenset({2, 3}))]
    test = [lk.LabelledQuery("c", frozenset({3}))]
    rankings = {"a": ([5, 1, 6], [1, 7, 8]), "b": ([2, 9, 3], [9, 8, 2]), "c": ([9, 4, 1], [4, 2, 3])}
    return RrfContext(rankings, train, test, 3)


def _reference_rrf(rankings, weights, rrf_k):
    return lk.ids(lk.rrf(rankings, rrf_k, weights))


def test_notebook_checker_shows_hidden_cases_only_as_points(capsys):
    context = _toy_rrf()
    result = lk.check_weighted_rrf(lambda rankings, weights, rrf_k: [], None, None, None, rankings=context.rankings,
                                   train=context.train, test=context.test)
    out = capsys.readouterr().out
    hidden = [case for case in EXERCISES["07"].cases if case.hidden]
    assert hidden and not any(case.hidden for case in result.cases)
    assert f"Скрытые проверки: {lk.count(sum(c.points for c in hidden), 'балл', 'балла', 'баллов')}" in out
    assert not any(case.name in out for case in hidden)
    assert result.max_points + result.hidden_points == EXERCISES["07"].max_points
    assert "✗ weighted_rrf" in out and "0 из 3 баллов" in out


def test_a_function_that_memorises_the_visible_cases_fails_the_hidden_ones():
    exercise = EXERCISES["07"]
    memorised = {}
    for rankings, weights, rrf_k in [([[1, 2, 3], [3, 1, 4]], (1.0, 1.0), 60), ([[5, 3], [3, 5]], (1.0, 1.0), 60),
                                     ([[7, 8, 9], [9, 8, 7]], (2.0, 1.0), 1), ([[4, 2, 6], [6, 4]], (1.0, 3.0), 0),
                                     ([[10, 20], []], (0.5, 1.0), 5)]:
        memorised[repr((rankings, weights, rrf_k))] = _reference_rrf(rankings, weights, rrf_k)

    def weighted_rrf(rankings, weights, rrf_k):
        return memorised.get(repr((rankings, tuple(weights), rrf_k)), sorted({d for r in rankings for d in r}))

    context = _toy_rrf()
    seeded = RrfContext(context.rankings, context.train, context.test, 3, seed=12345)
    answers = exercise.collect({"weighted_rrf": weighted_rrf}, 12345)
    verdicts = {case.name: case for case in run_cases(exercise.cases, answers, seeded, hidden=True)}
    assert verdicts["weighted_rrf совпадает с lk.rrf на готовых примерах"].passed
    hidden = verdicts["weighted_rrf совпадает с lk.rrf на случайных примерах"]
    assert not hidden.passed and "на случайном примере" in hidden.problems[0]
    right = run_cases(exercise.cases, exercise.collect({"weighted_rrf": _hand_rrf}, 12345), seeded, hidden=True)
    assert all(case.passed for case in right if "weighted_rrf" in case.name)
    assert random_cases(12345) == random_cases(12345) != random_cases(54321)


def _executed(cells):
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _display(payload):
    return {"output_type": "display_data", "data": {ANSWERS_MIME: payload}, "metadata": {}}


def test_answers_are_read_only_from_the_graders_cell_with_its_seed():
    real = {"exercise": "07", "seed": 7, "answers": {"grid": {"state": "unfilled"}}}
    student = {"cell_type": "code", "metadata": {}, "outputs": [_display(real)], "source": "display(...)"}
    assert read_answers(_executed([student]), "07", 7) == "ячейка проверки не выполнялась"
    grader = {"cell_type": "code", "metadata": {"tags": [GRADER_TAG]}, "source": grader_cell_source("07", 7),
              "outputs": [_display({**real, "seed": 8})]}
    assert read_answers(_executed([student, grader]), "07", 7) == "ячейка проверки не вывела ответов"
    grader["outputs"] = [_display(real)]
    assert read_answers(_executed([student, grader]), "07", 7) == real["answers"]
    grader["outputs"] = [{"output_type": "error", "ename": "ImportError", "evalue": "no labkit", "traceback": []}]
    assert "ImportError" in read_answers(_executed([grader]), "07", 7)


def test_prepare_drops_a_planted_grader_cell_and_appends_its_own(tmp_path):
    nb = nbformat.v4.new_notebook()
    planted = nbformat.v4.new_code_cell("print('Проверка пройдена')")
    planted.metadata["tags"] = [GRADER_TAG]
    planted.outputs = [nbformat.v4.new_output("display_data", data={ANSWERS_MIME: {"exercise": "07"}})]
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), planted]
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="old\n")]
    source = tmp_path / "07.ipynb"
    nbformat.write(nb, source)
    assert prepare(source, "07", 99, tmp_path / "copy" / "07.ipynb") is None
    copy = nbformat.read(tmp_path / "copy" / "07.ipynb", as_version=4)
    graders = [cell for cell in copy.cells if GRADER_TAG in cell.metadata.get("tags", [])]
    assert [cell.source for cell in graders] == [grader_cell_source("07", 99)]
    assert copy.cells[0].outputs == [] and copy.cells[-1] is graders[0]
    (tmp_path / "broken.ipynb").write_text("{not json", encoding="utf-8")
    assert "не читается" in prepare(tmp_path / "broken.ipynb", "07", 1, tmp_path / "x.ipynb")


def test_call_limited_stops_a_function_that_swallows_exceptions():
    def endless():
        while True:
            try:
                sum(range(1000))
            except Exception:  # noqa: BLE001 (what a student writes; the limit must still get through)
                pass

    with pytest.raises(CallTimeout):
        call_limited(endless, seconds=0.3)
    assert call_limited(lambda a, b: a + b, 2, 3) == 5


def test_reports_escape_names_and_keep_hidden_cases_off_student_pages(tmp_path):
    cases = [CaseResult("открытая проверка", 3, False, ("у вас <b>ошибка</b>",)),
             CaseResult("секретная проверка", 2, True, ("секретная подсказка",))]
    exercise = ExerciseGrade("07", "взвешенный RRF (07)", "07_task_weighted_rrf.ipynb", "graded", cases,
                             ["ячейка с кодом №3 упала"])
    student = StudentGrade("<script>alert(1)</script>", "x", [exercise], 12.5)
    grades = ClassGrades("run", 1, "2026-01-01T10:00:00", "/class", {}, {}, [student], 20.0)
    csv_path, json_path, html_path = write_reports(grades, tmp_path)
    page = (tmp_path / "students" / "x.html").read_text(encoding="utf-8")
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;ошибка" in page
    assert "секретная" not in page and "Скрытые проверки" in page and "0 из 2 баллов" in page
    assert "секретная проверка" in html_path.read_text(encoding="utf-8")
    rows = list(csv.reader(csv_path.open(encoding="utf-8")))
    assert rows == [["студент", "07", "итого", "максимум", "секунд"], [student.name, "0", "0", "5", "12.5"]]
    assert json.loads(json_path.read_text(encoding="utf-8"))["students"][0]["exercises"][0]["cases"][1]["hidden"]


def test_students_are_the_folders_with_unique_file_names(tmp_path):
    for name in ("Иванов И.", "Иванов_И", ".git", "grades"):
        (tmp_path / name).mkdir()
    (tmp_path / "notes.txt").write_text("", encoding="utf-8")
    students = find_students(tmp_path, skip=[tmp_path / "grades"])
    assert [s.name for s in students] == ["Иванов И.", "Иванов_И"]
    assert len({s.slug.casefold() for s in students}) == 2 and all("/" not in s.slug for s in students)


def test_each_exercise_is_graded_with_its_starters_parameters():
    setups = {setup.exercise.key: setup for setup in exercise_setups()}
    assert set(setups) == {"07", "08", "09", "18", "21"}
    assert setups["21"].parameters["N_QUESTIONS"] == 1 and setups["21"].timeout == 900  # grading_parameters over CI's 2
    assert setups["09"].parameters["STRETCH_QUESTIONS"] == 1  # the stretch task no case scores, over CI's 3
    assert setups["07"].parameters["TOP_K"] == 3 and setups["07"].timeout == 600
    assert setups["08"].parameters["EXTRA_MODEL"] is None  # the stack's own model without tools
    assert setups["08"].parameters["N_QUESTIONS"] == 3 and setups["08"].timeout == 1200  # ci_parameters, metadata
    assert all(setup.exercise.max_points == 10 for setup in setups.values())


@pytest.mark.parametrize(("argv", "needle"), [
    (["grade", "/no/such/folder"], "is not a folder"),
    (["grade", ".", "--exercises", "07,99"], "--exercises takes keys"),
    (["grade", ".", "--jobs", "0"], "must be positive"),
])
def test_bad_grade_arguments_are_one_line(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and needle in err and err.count("\n") == 1


# --- real grading runs -------------------------------------------------------------------------------

def _grade(root: Path, out: Path, *options: str) -> dict:
    """Run `python -m labkit grade` (what ./run.sh grade runs); print its lines (the figures); return grades.json."""
    done = subprocess.run([sys.executable, "-m", "labkit", "grade", str(root), "--out", str(out), *options],
                          cwd=REPO, capture_output=True, text=True, timeout=1800, check=False)
    print(done.stdout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "grades.json").read_text(encoding="utf-8"))


def _students(grades: dict) -> dict[str, dict]:
    return {student["name"]: student for student in grades["students"]}


def _exercise(grades: dict, name: str, key: str) -> dict:
    return next(e for e in _students(grades)[name]["exercises"] if e["key"] == key)


@pytest.fixture(scope="module")
def starters_and_solutions(settings, tmp_path_factory):
    """The unmodified starters and the solutions as two students, two notebooks at a time."""
    root = tmp_path_factory.mktemp("class") / "handed_in"
    for student, folder in (("starter", "notebooks"), ("solution", "solutions")):
        (root / student).mkdir(parents=True)
        for name in NAMES.values():
            shutil.copy(REPO / folder / name, root / student / name)
    out = root.parent / "grades"
    return _grade(root, out, "--jobs", "2"), out


def _edited(source: Path, target: Path, edits) -> None:
    """Copy a notebook, applying (marker, new cell source, "before" | "after" | "replace") edits."""
    nb = nbformat.read(source, as_version=4)
    for marker, code, where in edits:
        index = next(i for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and marker in cell.source)
        if where == "replace":
            nb.cells[index].source = code
        else:
            nb.cells.insert(index + (where == "after"), nbformat.v4.new_code_cell(code))
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)


ENDLESS = """import time
while True:  # a bare except swallows the cell's interrupt too
    try:
        time.sleep(0.5)
    except:  # noqa: E722
        pass"""
DESTRUCTIVE = """lab.conn.execute("DELETE FROM embedding_cache")
lab.conn.execute("DROP TABLE news CASCADE")"""
OUTSIDE = """import os
import psycopg
shared = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/{shared}"
for statement in ["DELETE FROM news WHERE id < 0", "CREATE TABLE grade_probe (x int)"]:
    try:
        with psycopg.connect(shared, autocommit=True) as other:
            other.execute(statement)
        print("ВЫПОЛНЕНО:", statement)
    except psycopg.Error as exc:
        print("отказано:", type(exc).__name__)
for (name,) in lab.conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'grade_%'").fetchall():
    try:
        lab.conn.execute(f'DROP DATABASE "{{name}}"')
        print("ВЫПОЛНЕНО: DROP DATABASE", name)
    except psycopg.Error as exc:
        print("отказано:", type(exc).__name__)"""
FLOOD = 'for _ in range(5000):\n    print("шум " * 250)'
CHEAT = """import labkit.course.checks.rrf as rrf_check
from IPython.display import display
rrf_check.report = lambda *args, **kwargs: print("Проверка пройдена: взвешенный RRF и подбор rrf_k (07).")
display({MIME: {"exercise": "07", "seed": 0, "answers": {}}}, raw=True)""".replace("MIME", repr(ANSWERS_MIME))


@pytest.fixture(scope="module")
def troublemakers(settings, lab_ro, tmp_path_factory):
    """Broken, endless, destructive and cheating students, and one ordinary student graded after them.

    `lab_ro` loads the shared database's news first: the destructive student's target must exist to be spared.
    """
    root = tmp_path_factory.mktemp("class") / "handed_in"
    rrf, entity = NAMES["07"], NAMES["09"]
    shared = conninfo_to_dict(settings.database_url)["dbname"]
    _edited(REPO / "solutions" / rrf, root / "a_broken" / rrf, [("grid = pd.DataFrame(", "grid = pd.DataFrame(", "replace")])
    (root / "a_broken" / NAMES["08"]).write_text("это не ноутбук", encoding="utf-8")
    _edited(REPO / "solutions" / rrf, root / "b_endless" / rrf, [("def weighted_rrf", ENDLESS, "after")])
    _edited(REPO / "solutions" / rrf, root / "c_destructive" / rrf,
            [("rankings = {", DESTRUCTIVE, "before"), ("rankings = {", OUTSIDE.format(shared=shared), "before"),
             ("check = lk.check_weighted_rrf", FLOOD, "before"),
             ("check = lk.check_weighted_rrf", "import sys\nsys.exit(1)", "before")])
    _edited(REPO / "solutions" / entity, root / "c_destructive" / entity,
            [("QUESTION = ", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", "after")])
    (root / "d_control").mkdir()
    shutil.copy(REPO / "solutions" / rrf, root / "d_control" / rrf)
    _edited(REPO / "notebooks" / rrf, root / "e_cheater" / rrf, [("check = lk.check_weighted_rrf", CHEAT, "before")])
    out = root.parent / "grades"
    return _grade(root, out, "--timeout", "40", "--cell-timeout", "20", "--jobs", "2"), out  # the endless one beside the others


@pytest.mark.services
@pytest.mark.system
def test_solutions_get_every_point(starters_and_solutions):
    grades, _ = starters_and_solutions
    solution = _students(grades)["solution"]
    assert solution["points"] == solution["max_points"] == sum(e.max_points for e in EXERCISES.values())
    for exercise in solution["exercises"]:
        assert exercise["status"] == "graded" and not exercise["notes"], exercise
        assert all(case["earned"] == case["points"] for case in exercise["cases"]), exercise["cases"]
    # --jobs 2 runs a student's notebooks side by side: the student took less than their notebooks' sum
    assert solution["seconds"] < sum(exercise["seconds"] for exercise in solution["exercises"]), solution


@pytest.mark.services
@pytest.mark.system
def test_starters_get_less_with_russian_feedback(starters_and_solutions):
    grades, _ = starters_and_solutions
    starter = _students(grades)["starter"]
    assert starter["points"] < sum(e.max_points for e in EXERCISES.values())
    for exercise in starter["exercises"]:
        assert exercise["status"] == "graded" and exercise["points"] < exercise["max_points"], exercise
        failed = [case for case in exercise["cases"] if case["earned"] < case["points"]]
        assert failed and all(case["problems"] for case in failed)
        assert any("TODO" in problem for case in failed for problem in case["problems"]), failed


def _printed(executed: Path) -> list[str]:
    """Every cell's printed output (not its source)."""
    return ["".join(o.get("text", "")) for cell in nbformat.read(executed, as_version=4).cells
            if cell.cell_type == "code" for o in cell.outputs if o.output_type == "stream"]


def _checker_lines(executed: Path) -> list[str]:
    """What the notebook's own checker (its last code cell before the grader's) printed."""
    cells = [cell for cell in nbformat.read(executed, as_version=4).cells
             if cell.cell_type == "code" and GRADER_TAG not in cell.metadata.get("tags", [])]
    assert "check_" in cells[-1].source
    return "".join(o.get("text", "") for o in cells[-1].outputs if o.output_type == "stream").splitlines()


@pytest.mark.services
@pytest.mark.system
@pytest.mark.parametrize("student", ["solution", "starter"])
def test_notebook_checker_shows_the_graders_visible_cases_and_points(starters_and_solutions, student):
    grades, out = starters_and_solutions
    for exercise in _students(grades)[student]["exercises"]:
        lines = _checker_lines(out / exercise["executed"])
        shown = [line.strip() for line in lines if line.startswith("  ✓ ") or line.startswith("  ✗ ")]
        visible = [case for case in exercise["cases"] if not case["hidden"]]
        assert [line.split(" ", 1)[1].rsplit(":", 1)[0] for line in shown] == [case["name"] for case in visible]
        assert [int(line.rsplit(": ", 1)[1].split()[0]) for line in shown] == [case["earned"] for case in visible]
        hidden = sum(case["points"] for case in exercise["cases"] if case["hidden"])
        assert any(line.startswith(f"Скрытые проверки: {hidden} балл") for line in lines), lines


@pytest.mark.services
@pytest.mark.system
def test_reports_agree_and_student_pages_hide_hidden_cases(starters_and_solutions):
    grades, out = starters_and_solutions
    rows = {row["студент"]: row for row in csv.DictReader((out / "grades.csv").open(encoding="utf-8"))}
    for student in grades["students"]:
        row = rows[student["name"]]
        assert int(row["итого"]) == student["points"] and float(row["секунд"]) > 0
        assert [int(row[key]) for key in NAMES] == [e["points"] for e in student["exercises"]]
        page = (out / "students" / f"{student['slug']}.html").read_text(encoding="utf-8")
        hidden = [c["name"] for e in student["exercises"] for c in e["cases"] if c["hidden"]]
        with_hidden = sum(any(c["hidden"] for c in e["cases"]) for e in student["exercises"])
        assert page.count("Скрытые проверки") == with_hidden >= 3 and not any(name in page for name in hidden)
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "solution" in index and "starter" in index and "(скрытая)" in index


def _leftovers(settings, run_id: str) -> list[str]:
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        like = f"grade\\_{run_id}\\_%"
        return [row[0] for row in conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %(p)s UNION ALL "
            "SELECT rolname FROM pg_roles WHERE rolname LIKE %(p)s OR rolname LIKE 'shop\\_reader\\_' || %(p)s",
            {"p": like}).fetchall()]


@pytest.mark.services
@pytest.mark.system
def test_runs_leave_no_database_or_role(settings, starters_and_solutions, troublemakers):
    for grades, _ in (starters_and_solutions, troublemakers):
        assert _leftovers(settings, grades["run_id"]) == []


@pytest.mark.services
@pytest.mark.system
def test_a_broken_notebook_costs_only_what_depends_on_the_error(troublemakers):
    grades, _ = troublemakers
    rrf = _exercise(grades, "a_broken", "07")
    assert rrf["status"] == "graded" and 0 < rrf["points"] < rrf["max_points"]
    assert any("SyntaxError" in note for note in rrf["notes"]), rrf["notes"]
    unreadable = _exercise(grades, "a_broken", "08")
    assert unreadable["status"] == "unreadable" and unreadable["points"] == 0
    assert _exercise(grades, "a_broken", "09")["status"] == "missing"


@pytest.mark.services
@pytest.mark.system
def test_an_endless_notebook_is_stopped_at_its_limit(troublemakers):
    grades, _ = troublemakers
    endless = _exercise(grades, "b_endless", "07")
    assert endless["status"] == "timeout" and endless["points"] == 0
    assert any("не уложился в 40 с" in note for note in endless["notes"])
    assert any("выполнялась ячейка" in note and "import time" in note for note in endless["notes"]), endless["notes"]


@pytest.mark.services
@pytest.mark.system
def test_a_destructive_notebook_harms_only_its_own_copy(settings, troublemakers):
    grades, out = troublemakers
    rrf = _exercise(grades, "c_destructive", "07")
    assert rrf["status"] == "graded" and 0 < rrf["points"] < rrf["max_points"]  # its function still counts
    notes = " ".join(rrf["notes"])
    assert "SystemExit" in notes and "вывод обрезан" in notes
    printed = "".join(_printed(out / rrf["executed"]))
    assert "ВЫПОЛНЕНО" not in printed and printed.count("отказано: InsufficientPrivilege") >= 4  # 2 tables, 2 databases
    killer = _exercise(grades, "c_destructive", "09")
    assert killer["status"] == "crashed" and killer["points"] == 0
    control = _exercise(grades, "d_control", "07")
    assert control["status"] == "graded" and control["points"] == control["max_points"]
    with psycopg.connect(settings.database_url, autocommit=True) as conn:  # the shared database is untouched
        assert conn.execute("SELECT count(*) FROM news").fetchone()[0] == len(lk.load_corpus())
        assert conn.execute("SELECT to_regclass('grade_probe')").fetchone()[0] is None


@pytest.mark.services
@pytest.mark.system
def test_a_printed_verdict_and_planted_answers_earn_nothing(troublemakers):
    grades, out = troublemakers
    cheater = _exercise(grades, "e_cheater", "07")
    assert any(line.startswith("Проверка пройдена") for line in _checker_lines(out / cheater["executed"]))
    assert cheater["status"] == "graded" and cheater["points"] == 0


@pytest.mark.services  # not a lab service, but it starts a kernel
@pytest.mark.system
def test_watchdog_kills_a_notebook_over_its_memory_limit(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('import os, time\nopen("kernel.pid", "w").write(str(os.getpid()))'),
                nbformat.v4.new_code_cell("blob = b'x' * (1536 * 2**20)\ntime.sleep(120)")]
    source = tmp_path / "hog.ipynb"
    nbformat.write(nb, source)
    workdir = tmp_path / "run"
    workdir.mkdir()
    execution = execute(source, tmp_path / "out.ipynb", parameters={}, env=dict(os.environ),
                        limits=Limits(timeout=300, cell_timeout=200, memory_bytes=1024 * 2**20), workdir=workdir)
    assert execution.status == "memory"
    pid = int((workdir / "kernel.pid").read_text())
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
