"""The challenge (31_challenge): pipelines as data, the contract the grader reads, hidden queries, the leaderboard.

Pure parts first: a pipeline described as data and rebuilt (every course mode, every refusal),
the notebook's checker, the queries a ranking needs (13_significance's method), the ranking
itself, reading the instructor's hidden file, the leaderboard and its reports, the command's
argument errors. Then one real grading run through the command line: a plain hybrid, a better
pipeline and a pipeline with a function of its own, scored on hidden queries on the real
Postgres with the real embeddings.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import psycopg
import pytest

import labkit as lk
from labkit.cli import main
from labkit.course.checks.challenge import CERTIFICATE_RECALL, NOTEBOOK, collect, pipeline_of
from labkit.course.grading import (
    ChallengeEntry,
    ClassGrades,
    ExerciseGrade,
    StudentGrade,
    build_leaderboard,
    course_overlap,
    load_hidden,
    write_reports,
)
from labkit.retrieval.spec import MAX_NESTING

REPO = Path(__file__).resolve().parents[1]
CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)


# --- a pipeline as data --------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(lk.SEARCH_MODES))
def test_every_course_mode_survives_the_round_trip_through_json(name):
    mode = lk.SEARCH_MODES[name]
    spec = lk.pipeline_spec(mode)
    rebuilt = lk.pipeline_from_spec(json.loads(json.dumps(spec)))
    assert str(rebuilt) == str(mode) and rebuilt.needs == mode.needs
    assert lk.pipeline_spec(rebuilt) == spec


def test_a_student_pipeline_of_every_piece_survives_the_round_trip():
    first = lk.Pipeline.of({"vector": 1.0, "bm25": 0.5}, rrf_k=10)
    pipeline = lk.Pipeline.of({"fielded": 2.0, lk.prf_branch(first, lk.PrfConfig(docs=2, beta=0.5)): 1.0,
                               lk.SEARCH_MODES["hybrid_expanded"]: 0.5}, rrf_k=30,
                              rewrite=[lk.Spelling()], rerank=[lk.Coverage(5)])
    spec = lk.pipeline_spec(pipeline)
    assert spec["rewrite"] == ["spelling"] and spec["rerank"] == [{"coverage": 5}] and spec["rrf_k"] == 30
    assert spec["branches"][1]["prf"]["docs"] == 2 and "pipeline" in spec["branches"][2]
    assert str(lk.pipeline_from_spec(json.loads(json.dumps(spec)))) == str(pipeline)


def _own_search(lab, query, top_k=10):
    return lk.search_vector(lab, query, top_k)


class _Rewriter:
    def __call__(self, lab, query):
        return query.lower()


@pytest.mark.parametrize(("pipeline", "needle"), [
    (lk.Pipeline.of(_own_search), "_own_search"),
    (lk.Pipeline.of({"vector": 1.0, lk.Branch("mine", lk.search_lexical): 1.0}), "«mine»"),
    (lk.Pipeline.of("vector", rewrite=[_Rewriter()]), "lk.Spelling()"),
    (lk.Pipeline.of("fielded", rerank=[lk.Coverage(4, lambda lab: None)]), "lk.Coverage(глубина)"),
    (lk.search_hybrid, "функция search_hybrid"),
    ("hybrid", "значение типа str"),
])
def test_a_pipeline_not_made_of_the_course_pieces_is_refused_in_russian(pipeline, needle):
    with pytest.raises(lk.SpecError) as refused:
        lk.pipeline_spec(pipeline)
    assert needle in str(refused.value) and CYRILLIC.search(str(refused.value))


def _nested(depth):
    spec = {"branches": [{"branch": "vector"}]}
    for _ in range(depth - 1):
        spec = {"branches": [{"pipeline": spec}]}
    return spec


@pytest.mark.parametrize(("spec", "needle"), [
    ("hybrid", "ожидался словарь"),
    ({"branches": []}, "от 1 до"),
    ({"branches": [{"branch": "nope"}]}, "нет среди lk.BRANCHES"),
    ({"branches": [{"branch": "vector", "weight": float("nan")}]}, "числом"),
    ({"branches": [{"branch": "vector", "weight": -1}]}, "лежать в"),
    ({"branches": [{"branch": "vector"}, {"branch": "lexical"}], "rrf_k": 2.5}, "целым"),
    ({"branches": [{"branch": "vector"}], "rewrite": ["os.system"]}, "переписывания"),
    ({"branches": [{"branch": "vector"}], "rerank": [{"coverage": 0}]}, "lk.Coverage"),
    ({"branches": [{"branch": "vector"}], "code": "import os"}, "неизвестные ключи code"),
    ({"branches": [{"branch": "vector"}, {"branch": "vector"}]}, "дважды"),
    ({"branches": [{"branch": "vector", "prf": {}}]}, "ровно одним"),
    (_nested(MAX_NESTING + 1), "вложены глубже"),
])
def test_data_that_describes_no_course_pipeline_is_refused_in_russian(spec, needle):
    with pytest.raises(lk.SpecError) as refused:
        lk.pipeline_from_spec(spec)
    assert needle in str(refused.value)
    assert str(lk.pipeline_from_spec(_nested(MAX_NESTING))).count("(") == MAX_NESTING - 1


def test_the_graders_answer_is_data_and_is_rebuilt_with_the_checkers_messages(capsys):
    assert pipeline_of({"pipeline": collect({})}).startswith("переменная PIPELINE не задана")
    rejected = pipeline_of({"pipeline": collect({"PIPELINE": lk.Pipeline.of(_own_search)})})
    assert rejected.startswith("PIPELINE не принят") and "_own_search" in rejected
    answer = collect({"PIPELINE": lk.SEARCH_MODES["fielded_covered"]})
    assert json.loads(json.dumps(answer)) == answer and answer["shown"] == "spelling → fielded → coverage@4"
    assert str(pipeline_of({"pipeline": answer})) == answer["shown"]
    forged = {"state": "pipeline", "spec": {"branches": [{"branch": "vector"}], "rerank": [{"coverage": 10**6}]}}
    assert "не принят" in pipeline_of({"pipeline": forged})  # data from a notebook is checked again here

    assert lk.check_challenge(lk.SEARCH_MODES["hybrid"]).passed
    assert "Конвейер принят: vector + lexical → RRF(k=60)" in capsys.readouterr().out
    assert not lk.check_challenge(None)
    assert "Конвейер не принят. Переменная PIPELINE не задана" in capsys.readouterr().out


# --- how many queries a ranking needs ----------------------------------------------------------------

def test_the_fewest_differing_queries_the_paired_test_needs_by_hand():
    assert lk.min_discordant(0.05) == 6  # 2/2**5 = 0.0625 >= 0.05 > 2/2**6
    assert lk.min_discordant(0.01) == 8  # 2/2**7 = 0.0156 >= 0.01 > 2/2**8
    differing = np.ones(lk.min_discordant(0.05))
    assert lk.paired_test(differing, np.zeros_like(differing)) < 0.05
    assert lk.paired_test(differing[1:], np.zeros_like(differing[1:])) >= 0.05


def test_queries_needed_grows_as_the_two_modes_differ_on_fewer_queries():
    often = np.array([1.0] * 10 + [0.0] * 30)  # the better mode wins one query in four
    rarely = np.array([1.0] * 4 + [0.0] * 36)  # one in ten
    zeros = np.zeros(40)
    near, far = lk.queries_needed(often, zeros, simulations=200), lk.queries_needed(rarely, zeros, simulations=200)
    assert near.queries is not None and far.queries is not None and near.queries < far.queries
    assert (near.discordant, near.observed, near.min_discordant, far.share) == (10, 40, 6, 0.1)
    assert near.power >= 0.8 and lk.detection_power(often, zeros, near.queries, simulations=200) >= 0.8
    assert lk.detection_power(often, zeros, near.queries // 2, simulations=200) < 0.8
    assert lk.queries_needed(zeros, zeros).queries is None  # nothing to tell apart
    assert lk.queries_needed(np.array([1.0, 0.0]), np.array([0.0, 1.0])).queries is None  # differ, but no gap
    with pytest.raises(ValueError, match="equally long"):
        lk.queries_needed([1.0], [1.0, 0.0])


# --- the ranking --------------------------------------------------------------------------------------

def test_the_leaderboard_orders_by_recall_then_mrr_and_ties_share_a_place():
    scores = {"a": lk.Scores((1.0, 1.0, 0.0, 1.0), (1.0, 0.5, 0.0, 1.0)),
              "b": lk.Scores((1.0, 1.0, 0.0, 1.0), (1.0, 1.0, 0.0, 1.0)),  # a's recall, better MRR
              "c": lk.Scores((1.0, 1.0, 0.0, 1.0), (1.0, 1.0, 0.0, 1.0)),  # b's twin
              "d": lk.Scores((0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0))}
    board = lk.leaderboard(scores)
    assert [(s.name, s.place) for s in board] == [("b", 1), ("c", 1), ("a", 3), ("d", 4)]
    assert board[0].low <= board[0].recall == 0.75 <= board[0].high
    assert board[2].p_next == lk.paired_test(scores["a"].recall, scores["d"].recall) and board[-1].p_next is None
    with pytest.raises(ValueError, match="same non-empty set"):
        lk.leaderboard({"a": lk.Scores((1.0,), (1.0,)), "b": lk.Scores((1.0, 0.0), (1.0, 0.0))})


# --- the instructor's hidden file ---------------------------------------------------------------------

def _write(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def test_the_hidden_file_has_the_retrieval_format_and_corpus_ids(tmp_path):
    good = _write(tmp_path / "good.jsonl", [{"query": "новый запрос", "relevant": [1], "kind": "paraphrase"},
                                            {"query": "ещё один", "relevant": [2, 3]}])
    assert [q.query for q in load_hidden(good)] == ["новый запрос", "ещё один"]
    for name, records, needle in [
        ("unknown.jsonl", [{"query": "x", "relevant": [9999]}], "not in the corpus: [9999]"),
        ("twice.jsonl", [{"query": "x", "relevant": [1]}, {"query": "x", "relevant": [2]}], "repeats query 1"),
        ("empty_relevant.jsonl", [{"query": "x", "relevant": []}], "'relevant' must be"),
    ]:
        with pytest.raises(lk.DataError, match=re.escape(needle)) as refused:
            load_hidden(_write(tmp_path / name, records))
        assert name in str(refused.value)
    report = lk.load_queries(lk.RETRIEVAL_PATH, split="report")
    assert course_overlap(report) == [q.query for q in report] and course_overlap(load_hidden(good)) == []


# --- the leaderboard and its reports --------------------------------------------------------------------

def _student(name, recall, mrr=None, status="graded", problem=None, pipeline="vector"):
    entry = ChallengeEntry(status, problem, [problem] if problem else [], pipeline if status == "graded" else None,
                           recall=list(recall) if status == "graded" else [],
                           mrr=list(mrr or recall) if status == "graded" else [])
    return StudentGrade(name, name, [], 1.0, entry)


HIDDEN_TEXT = "совсем секретный запрос"


def _board():
    base = lk.Scores((1.0,) * 6 + (0.0,) * 4, (1.0,) * 6 + (0.0,) * 4)
    students = [_student("ученик_сильный", (1.0,) * 10, pipeline="spelling → fielded"),
                _student("ученик_гибрид", base.recall, pipeline="vector + lexical → RRF(k=60)"),
                _student("ученик_свой", (), status="rejected", problem="PIPELINE не принят: ветка «mine» — не деталь")]
    return students, build_leaderboard(students, base, source="/secret/hidden.jsonl", threshold=0.9, overlap=2)


def test_the_leaderboard_ranks_students_beside_the_reference_row_and_certifies_above_the_threshold():
    students, board = _board()
    names = [row.name for row in board.rows]
    assert names[0] == "ученик_сильный" and set(names[1:]) == {"ученик_гибрид", "простой гибрид курса (точка отсчёта)"}
    assert board.rows[1].place == board.rows[2].place == 2  # the starter is the plain hybrid: a tie
    assert [row.certificate for row in board.rows] == [True, False, False]
    assert list(board.certificates) == ["ученик_сильный"]
    line = board.certificates["ученик_сильный"]
    assert "Сертификат испытания курса" in line and "Recall@3 = 1.000" in line and "при пороге 0.90" in line
    assert "10 скрытых запросах" in line
    assert board.unranked == [("ученик_свой", "PIPELINE не принят: ветка «mine» — не деталь")]
    noise = " ".join(board.noise)
    assert "Скрытых запросов: 10" in noise and "2 скрытых запроса совпадают" in noise
    assert board.needed["discordant"] == 4 and board.needed["queries"] is not None
    assert f"{board.needed['queries']} скрытых запрос" in noise


def test_reports_gain_the_leaderboard_and_each_student_their_own_line(tmp_path):
    students, board = _board()
    exercise = ExerciseGrade("07", "взвешенный RRF (07)", "07_task_weighted_rrf.ipynb", "missing", [], [])
    for student in students:
        student.exercises.append(exercise)
    grades = ClassGrades("run", 1, "2026-01-01T10:00:00", "/class", {}, {}, students, 20.0, board)
    paths = write_reports(grades, tmp_path)
    assert [p.name for p in paths] == ["grades.csv", "grades.json", "index.html", "leaderboard.csv"]
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert "таблица лидеров" in index and board.certificates["ученик_сильный"] in index
    assert "простой гибрид курса (точка отсчёта)" in index and "Без места в таблице" in index
    strong = (tmp_path / "students" / "ученик_сильный.html").read_text(encoding="utf-8")
    plain = (tmp_path / "students" / "ученик_гибрид.html").read_text(encoding="utf-8")
    own = (tmp_path / "students" / "ученик_свой.html").read_text(encoding="utf-8")
    assert board.certificates["ученик_сильный"] in strong and "Сертификат не выдан" in plain
    assert "Сертификат испытания" not in plain and "конвейер не принят" in own and "ветка «mine»" in own
    assert all(HIDDEN_TEXT not in page and "/secret/" not in page for page in (strong, plain, own))
    rows = list(csv.reader((tmp_path / "leaderboard.csv").open(encoding="utf-8")))
    assert rows[0][:4] == ["место", "участник", "конвейер", "Recall@3"] and len(rows) == 1 + len(board.rows)
    table = {row["студент"]: row for row in csv.DictReader((tmp_path / "grades.csv").open(encoding="utf-8"))}
    assert table["ученик_сильный"]["сертификат"] == "да" and table["ученик_свой"]["испытание: место"] == ""
    saved = json.loads((tmp_path / "grades.json").read_text(encoding="utf-8"))
    assert saved["leaderboard"]["certificates"] == board.certificates
    assert saved["students"][2]["challenge"]["status_text"] == "конвейер не принят"


# --- the command's arguments ------------------------------------------------------------------------------

@pytest.mark.parametrize(("options", "needle"), [
    (["--exercises", "31"], "give --hidden FILE.jsonl"),
    (["--exercises", "07", "--hidden", "h.jsonl"], "add 31 to --exercises"),
    (["--hidden", "h.jsonl", "--certificate", "1.5"], "--certificate is a mean Recall@3"),
])
def test_bad_challenge_arguments_are_one_line(options, needle, tmp_path, capsys, monkeypatch):
    (tmp_path / "student").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["grade", str(tmp_path), *options])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and needle in err and err.count("\n") == 1


def test_a_malformed_hidden_file_stops_the_run_before_any_service(tmp_path, capsys):
    (tmp_path / "class" / "student").mkdir(parents=True)
    hidden = _write(tmp_path / "hidden.jsonl", [{"query": "x", "relevant": [1]}, {"query": "y"}])
    assert main(["grade", str(tmp_path / "class"), "--hidden", str(hidden)]) == 2
    err = capsys.readouterr().err
    assert f"{hidden}:2" in err and err.count("\n") == 1


# --- a real grading run ----------------------------------------------------------------------------------

BETTER = 'PIPELINE = lk.Pipeline.of({"expanded": 1.0, "fielded": 1.0}, rrf_k=60, rewrite=[lk.Spelling()])'
OWN = '''def my_search(lab, query, top_k=10):
    return lk.search_vector(lab, query, top_k)

PIPELINE = lk.Pipeline.of(my_search)'''
# A hidden query no course file holds (doc 1: the price of gold); its text must reach no student's database.
UNSEEN = {"query": "котировки драгоценного металла бьют рекорды", "relevant": [1]}
SPY = '''print("КЭШ:", sorted(text for (text,) in lab.conn.execute("SELECT text FROM embedding_cache WHERE kind = 'query'")))'''


def _with(code: str, target: Path, spy: bool = False) -> None:
    """The starter with its TODO cell replaced by `code` (and a cell printing the database's cached queries)."""
    nb = nbformat.read(REPO / "notebooks" / NOTEBOOK, as_version=4)
    index = next(i for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and "PIPELINE = " in cell.source)
    nb.cells[index].source = code
    if spy:
        nb.cells.insert(len(nb.cells) - 1, nbformat.v4.new_code_cell(SPY))
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)


@pytest.fixture(scope="module")
def challenge_run(settings, tmp_path_factory):
    """A plain hybrid (the starter as it is), a better pipeline and a function of one's own, graded on hidden queries."""
    root = tmp_path_factory.mktemp("challenge") / "handed_in"
    (root / "a_plain").mkdir(parents=True)
    (root / "a_plain" / NOTEBOOK).write_bytes((REPO / "notebooks" / NOTEBOOK).read_bytes())
    _with(BETTER, root / "b_better" / NOTEBOOK, spy=True)
    _with(OWN, root / "c_own" / NOTEBOOK)
    report = [json.loads(line) for line in lk.RETRIEVAL_PATH.read_text(encoding="utf-8").splitlines() if line.strip()]
    hidden = _write(root.parent / "hidden.jsonl",
                    [{"query": r["query"], "relevant": r["relevant"], "kind": r["kind"]} for r in report
                     if r["split"] == "report"] + [UNSEEN])
    out = root.parent / "grades"
    done = subprocess.run([sys.executable, "-m", "labkit", "grade", str(root), "--out", str(out), "--exercises", "31",
                           "--hidden", str(hidden), "--jobs", "2"],
                          cwd=REPO, capture_output=True, text=True, timeout=1800, check=False)
    print(done.stdout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "grades.json").read_text(encoding="utf-8")), out, hidden, done.stdout


@pytest.mark.services
@pytest.mark.system
def test_the_better_pipeline_ranks_above_the_plain_hybrid_on_the_hidden_queries(challenge_run, lab_ro):
    grades, out, hidden, printed = challenge_run
    board = grades["leaderboard"]
    rows = {row["name"]: row for row in board["rows"]}
    assert rows["b_better"]["place"] < rows["a_plain"]["place"], board["rows"]
    reference = next(row for row in board["rows"] if row["slug"] is None)
    assert rows["a_plain"]["recall"] == reference["recall"] and rows["a_plain"]["place"] == reference["place"]
    # the grader scored what the pipelines give here, on the same hidden queries
    queries = load_hidden(hidden)
    better = lk.pipeline_from_spec(next(s for s in grades["students"] if s["name"] == "b_better")["challenge"]["spec"])
    assert rows["b_better"]["recall"] == pytest.approx(np.mean(lk.score_pipeline(lab_ro, better, queries).recall), abs=1e-4)
    assert rows["a_plain"]["recall"] == pytest.approx(
        np.mean(lk.score_pipeline(lab_ro, lk.SEARCH_MODES["hybrid"], queries).recall), abs=1e-4)
    assert board["queries"] == len(queries) and "Таблица лидеров испытания:" in printed


@pytest.mark.services
@pytest.mark.system
def test_certificates_go_to_those_at_the_threshold_and_the_leaderboard_is_written(challenge_run):
    grades, out, _, _ = challenge_run
    board = grades["leaderboard"]
    assert board["threshold"] == CERTIFICATE_RECALL
    for row in board["rows"]:
        assert row["certificate"] == (row["slug"] is not None and row["recall"] >= board["threshold"])
    assert set(board["certificates"]) == {row["name"] for row in board["rows"] if row["certificate"]}
    assert "b_better" in board["certificates"] and "a_plain" not in board["certificates"]
    index = (out / "index.html").read_text(encoding="utf-8")
    assert all(line in index for line in board["certificates"].values())
    rows = list(csv.DictReader((out / "leaderboard.csv").open(encoding="utf-8")))
    assert [row["участник"] for row in rows] == [row["name"] for row in board["rows"]]
    assert any("скрытых запрос" in sentence for sentence in board["noise"])


@pytest.mark.services
@pytest.mark.system
def test_a_pipeline_with_a_function_of_its_own_is_refused_with_the_reason(challenge_run):
    grades, out, _, _ = challenge_run
    own = next(s for s in grades["students"] if s["name"] == "c_own")["challenge"]
    assert own["status"] == "rejected" and "my_search" in own["problem"] and not own["recall"]
    assert ("c_own", own["problem"]) in [(u["name"], u["reason"]) for u in grades["leaderboard"]["unranked"]]
    assert "my_search" in (out / "students" / "c_own.html").read_text(encoding="utf-8")


@pytest.mark.services
@pytest.mark.system
def test_hidden_queries_reach_no_student_database_or_page(settings, challenge_run):
    grades, out, _, _ = challenge_run
    executed = nbformat.read(out / "executed" / "b_better" / NOTEBOOK, as_version=4)
    printed = "".join(o.get("text", "") for cell in executed.cells if cell.cell_type == "code" for o in cell.outputs)
    assert "КЭШ:" in printed and "рекордная стоимость жёлтого металла" in printed  # the spy saw the course's queries
    assert UNSEEN["query"] not in printed
    pages = [p.read_text(encoding="utf-8") for p in (out / "students").glob("*.html")]
    assert pages and not any(UNSEEN["query"] in page for page in pages)
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        left = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s",
                            (f"grade\\_{grades['run_id']}\\_%",)).fetchall()
    assert left == []


# --- what the README says about the challenge, checked against a run -------------------------------

def _readme_challenge() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("## The challenge")
    return " ".join(text[start: text.index("\n## ", start + 1)].split())


@pytest.mark.services
def test_the_readme_states_the_hidden_queries_a_ranking_needs_as_the_method_computes_them(lab_ro):
    said = _readme_challenge()
    report = lk.load_queries(lk.RETRIEVAL_PATH, split="report")
    evaluated = lk.evaluate(lab_ro, report, ["hybrid", "fielded_corrected"], top_k=3)
    base, best = (lk.scores_of(evaluated, mode) for mode in ("hybrid", "fielded_corrected"))
    needed = lk.queries_needed(best.recall, base.recall)
    assert f"never called real before the pipelines differ on {lk.min_discordant(0.05)} queries" in said
    assert f"differ on {needed.discordant} of {needed.observed} queries" in said
    stated = int(re.search(r"about (\d+) hidden queries", said)[1])
    assert needed.queries is not None and abs(needed.queries - stated) <= 0.15 * stated, (needed, stated)
    means = {mode: np.mean(lk.scores_of(evaluated, mode).recall) for mode in evaluated.modes}
    assert f"mean Recall@3 ≥ {CERTIFICATE_RECALL:g} unless" in said
    assert means["hybrid"] < CERTIFICATE_RECALL <= means["fielded_corrected"], means
