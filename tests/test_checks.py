"""Exercise checkers: solutions pass, unmodified starters get advice (not a traceback).

Two levels: checkers called directly with small stub inputs, and the exercise notebooks
executed with papermill, reading the printed verdict of the last (checker) cell. The notebooks
are the session's executed copies (the `executed_notebooks` fixture, shared with the notebook,
site and browser tests): executed once, whichever test asks first.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from nbrun import Runs

import labkit as lk
from labkit.agent.entity_tool import search_by_entity

REPO = Path(__file__).resolve().parents[1]
EXERCISES = ["07_task_weighted_rrf.ipynb", "08_task_models.ipynb", "09_task_entity_tool.ipynb"]


# --- direct calls with stub inputs -----------------------------------------------------------

def _toy_rrf_inputs():
    train = [lk.LabelledQuery("a", frozenset({1})), lk.LabelledQuery("b", frozenset({2, 3}))]
    test = [lk.LabelledQuery("c", frozenset({3}))]
    rankings = {"a": ([5, 1, 6], [1, 7, 8]), "b": ([2, 9, 3], [9, 8, 2]), "c": ([9, 4, 1], [4, 2, 3])}
    return rankings, train, test


def _grid(queries, rankings, ks=(1, 10, 60), weights=(0.5, 1.0, 2.0)):
    def mean(k, w):
        scores = [lk.recall_at_k(lk.ids(lk.rrf(list(rankings[q.query]), k, (w, 1.0))), q.relevant, 3) for q in queries]
        return sum(scores) / len(scores)

    return pd.DataFrame([[mean(k, w) for w in weights] for k in ks], index=list(ks), columns=list(weights))


def _hand_rrf(rankings, weights, rrf_k):
    scores = {}
    for weight, ranking in zip(weights, rankings):
        for rank, doc_id in enumerate(ranking, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / (rrf_k + rank)
    return sorted(scores, key=lambda doc_id: (-scores[doc_id], doc_id))


def test_weighted_rrf_checker_accepts_a_correct_answer(capsys):
    rankings, train, test = _toy_rrf_inputs()
    grid = _grid(train, rankings)
    k, w = grid.stack().idxmax()
    test_recall = _grid(test, rankings).loc[k, w]
    best = {"k": k, "w_vector": w}
    result = lk.check_weighted_rrf(_hand_rrf, grid, best, test_recall, rankings=rankings, train=train, test=test)
    assert result.passed, result.problems
    assert "Проверка пройдена" in capsys.readouterr().out


def test_weighted_rrf_checker_explains_mistakes(capsys):
    rankings, train, test = _toy_rrf_inputs()
    unfilled = lk.check_weighted_rrf(None, None, None, None, rankings=rankings, train=train, test=test)
    assert not unfilled.passed and "weighted_rrf не заполнена" in unfilled.problems[0]
    assert any("grid не заполнена" in p for p in unfilled.problems)
    leaky = _grid([*train, *test], rankings)
    tuned_on_all = lk.check_weighted_rrf(_hand_rrf, leaky, (1, 1.0), 0.5, rankings=rankings, train=train, test=test)
    assert not tuned_on_all.passed and "на всех запросах" in tuned_on_all.problems[0]
    grid = _grid(train, rankings)
    transposed = lk.check_weighted_rrf(_hand_rrf, _grid(train, rankings, ks=(1, 2, 4), weights=(1, 2, 4)).T,
                                       (1, 1), 0.5, rankings=rankings, train=train, test=test)
    assert not transposed.passed and "перепутаны" in transposed.problems[0]
    k, w = grid.stack().idxmax()
    reported_on_train = lk.check_weighted_rrf(_hand_rrf, grid, (k, w), grid.loc[k, w], rankings=rankings,
                                              train=train, test=test)
    assert not reported_on_train.passed
    assert "Проверка не пройдена" in capsys.readouterr().out


def _mistaken_rrf(first=1, tie="id", use_weights=True, use_k=True, both_only=False, pairs=False):
    """weighted_rrf with one typical mistake switched on."""
    def weighted_rrf(rankings, weights, rrf_k):
        scores = {}
        for weight, ranking in zip(weights, rankings):
            for rank, doc_id in enumerate(ranking, start=first):
                scores[doc_id] = scores.get(doc_id, 0.0) + (weight if use_weights else 1.0) / ((rrf_k if use_k else 0) + rank)
        if both_only:
            scores = {d: s for d, s in scores.items() if all(d in r for r in rankings)}
        key = {"id": lambda d: (-scores[d], d), "desc": lambda d: (-scores[d], -d), "seen": lambda d: -scores[d]}[tie]
        order = sorted(scores, key=key)
        return [(d, scores[d]) for d in order] if pairs else order

    return weighted_rrf


def _uses_labkit(rankings, weights, rrf_k):
    return lk.ids(lk.rrf(rankings, rrf_k, weights))


@pytest.mark.parametrize(("func", "hint"), [
    (_mistaken_rrf(first=0), "место считается с 1"),
    (_mistaken_rrf(tie="desc"), "меньшим id"),
    (_mistaken_rrf(tie="seen"), "встретился раньше"),
    (_mistaken_rrf(use_weights=False), "веса не учтены"),
    (_mistaken_rrf(use_k=False), "нет rrf_k"),
    (_mistaken_rrf(both_only=True), "все документы"),
    (_mistaken_rrf(pairs=True), "не пары"),
    (_uses_labkit, "руками"),
    (lambda rankings, weights, rrf_k: None, "TODO"),
])
def test_weighted_rrf_checker_names_the_mistake(func, hint):
    rankings, train, test = _toy_rrf_inputs()
    grid = _grid(train, rankings)
    k, w = grid.stack().idxmax()
    result = lk.check_weighted_rrf(func, grid, (k, w), _grid(test, rankings).loc[k, w],
                                   rankings=rankings, train=train, test=test)
    assert not result.passed and hint in result.problems[0], result.problems


def _model_table(models, questions, fail=None):
    rows = []
    for model in models:
        for q in questions:
            error = "ResponseError: does not support tools" if model == fail else ""
            tool = "ошибка" if error else q.tool or "—"
            rows.append({"model": model, "question": q.question, "tool": tool, "arguments": dict(q.arguments),
                         "correct": not error and not q.query_contains, "error": error})
    return pd.DataFrame(rows)


def test_model_table_checker():
    questions = [q for q in lk.load_agent_questions() if not q.query_contains][:3]
    models = ["m1", "m2"]
    table = _model_table(models, questions, fail="m2")
    accuracy = table.groupby("model")["correct"].mean()
    assert lk.check_model_table(table, accuracy, models=models, questions=questions).passed
    missing = lk.check_model_table(table[table["model"] == "m1"], accuracy, models=models, questions=questions)
    assert not missing.passed and "нет строк модели m2" in missing.problems[0]
    lying = table.assign(correct=True)
    assert not lk.check_model_table(lying, lying.groupby("model")["correct"].mean(), models=models,
                                    questions=questions).passed
    assert not lk.check_model_table(table, {"m1": 0.0, "m2": 0.0}, models=models, questions=questions).passed
    assert "table не заполнена" in lk.check_model_table(None, None, models=models, questions=questions).problems[0]


def unsafe_search_by_entity(lab, company: lk.Company | None = None, tone: lk.Tone | None = None) -> list[dict]:
    """Find news by company and tone, built by string formatting (what the checker must reject).

    Args:
        company: company
        tone: tone
    """
    where = " AND ".join(f"{col} = '{val}'" for col, val in (("company", company), ("tone", tone)) if val) or "true"
    rows = lab.conn.execute(f"SELECT id, body, company, tone FROM news WHERE {where} ORDER BY id LIMIT 5").fetchall()
    return [{"id": i, "text": b, "company": c, "tone": t} for i, b, c, t in rows]


@pytest.mark.services
def test_entity_checker(lab_ro):
    good_result = {"tool_calls": [{"name": "search_by_entity", "arguments": {"company": "ЦБ", "tone": "negative"}}]}
    assert lk.check_entity_tool(search_by_entity, good_result, lab=lab_ro).passed
    unsafe = lk.check_entity_tool(unsafe_search_by_entity, good_result, lab=lab_ro)
    assert not unsafe.passed and any("OR '1'='1" in p for p in unsafe.problems), unsafe.problems
    wrong_call = {"tool_calls": [{"name": "search_articles", "arguments": {"query": "ЦБ"}}]}
    chose_wrong = lk.check_entity_tool(search_by_entity, wrong_call, lab=lab_ro)
    assert not chose_wrong.passed and "search_articles" in chose_wrong.problems[-1]
    nothing = lk.check_entity_tool(None, None, lab=lab_ro)
    assert not nothing.passed and "не заполнена" in nothing.problems[0]


# --- the notebooks themselves ----------------------------------------------------------------

def _verdict(runs: Runs, path: Path) -> str:
    """The printed output of an exercise notebook's last code cell, from the session's executed copy."""
    executed = runs.result(path)
    last = [cell for cell in executed.cells if cell.cell_type == "code"][-1]
    assert "check_" in last.source, "the last code cell is the checker"
    assert not [o for o in last.outputs if o.output_type == "error"], "the checker cell must not raise"
    return "".join(o.get("text", "") for o in last.outputs if o.output_type == "stream")


# parametrized by `path`: the session's runs start these notebooks at once, two at a time (nbrun.selected_paths)
@pytest.mark.parametrize("path", [REPO / "solutions" / name for name in EXERCISES], ids=lambda path: path.name)
@pytest.mark.services
@pytest.mark.system
def test_solution_passes_its_checker(executed_notebooks, path):
    assert "Проверка пройдена" in _verdict(executed_notebooks, path)


@pytest.mark.parametrize("path", [REPO / "notebooks" / name for name in EXERCISES], ids=lambda path: path.name)
@pytest.mark.services
@pytest.mark.system
def test_unmodified_starter_is_rejected_with_advice(executed_notebooks, path):
    verdict = _verdict(executed_notebooks, path)
    assert "Проверка не пройдена" in verdict and "TODO" in verdict


def test_ready_names_what_to_fill_in_first(capsys):
    assert lk.ready(grid=1, best="x")
    assert capsys.readouterr().out == ""
    assert not lk.ready(grid=None, best=1)
    out = capsys.readouterr().out
    assert "grid" in out and "TODO" in out and "best" not in out


# --- 09: where students get stuck (module-level functions, so the checker can read their SQL) ---

def placeholder_docstring(lab, company: lk.Company | None = None, tone: lk.Tone | None = None) -> list[dict]:
    """TODO: one line for the model.

    Args:
        company: TODO
        tone: TODO
    """
    return search_by_entity(lab, company, tone)


def without_cast(lab, company: lk.Company | None = None, tone: lk.Tone | None = None) -> list[dict]:
    """Find news about a company and/or with a given tone (positive, negative, neutral).

    Args:
        company: company the news are about
        tone: tone of the news
    """
    rows = lab.conn.execute(
        "SELECT id, body, company, tone FROM news WHERE (%(company)s IS NULL OR company = %(company)s) "
        "AND (%(tone)s IS NULL OR tone = %(tone)s) ORDER BY id LIMIT 5",
        {"company": company, "tone": tone},
    ).fetchall()
    return [{"id": i, "text": b, "company": c, "tone": t} for i, b, c, t in rows]


def equals_null(lab, company: lk.Company | None = None, tone: lk.Tone | None = None) -> list[dict]:
    """Find news about a company and/or with a given tone (positive, negative, neutral).

    Args:
        company: company the news are about
        tone: tone of the news
    """
    rows = lab.conn.execute(
        "SELECT id, body, company, tone FROM news WHERE company = %(company)s AND tone = %(tone)s ORDER BY id LIMIT 5",
        {"company": company, "tone": tone},
    ).fetchall()
    return [{"id": i, "text": b, "company": c, "tone": t} for i, b, c, t in rows]


def unordered_unlimited(lab, company: lk.Company | None = None, tone: lk.Tone | None = None) -> list[dict]:
    """Find news about a company and/or with a given tone (positive, negative, neutral).

    Args:
        company: company the news are about
        tone: tone of the news
    """
    rows = lab.conn.execute(
        "SELECT id, body, company, tone FROM news WHERE (%(company)s::text IS NULL OR company = %(company)s) "
        "AND (%(tone)s::text IS NULL OR tone = %(tone)s)",
        {"company": company, "tone": tone},
    ).fetchall()
    return [{"id": i, "text": b, "company": c, "tone": t} for i, b, c, t in rows]


def returns_tuples(lab, company: lk.Company | None = None, tone: lk.Tone | None = None) -> list[tuple]:
    """Find news about a company and/or with a given tone (positive, negative, neutral).

    Args:
        company: company the news are about
        tone: tone of the news
    """
    return lab.conn.execute(
        "SELECT id, body, company, tone FROM news WHERE (%(company)s::text IS NULL OR company = %(company)s) "
        "AND (%(tone)s::text IS NULL OR tone = %(tone)s) ORDER BY id LIMIT 5",
        {"company": company, "tone": tone},
    ).fetchall()


@pytest.mark.services
@pytest.mark.parametrize(("func", "hints"), [
    (placeholder_docstring, ["первая строка докстринга", "описание company", "описание tone"]),
    (without_cast, ["::text"]),
    (equals_null, ["без фильтра"]),
    (unordered_unlimited, ["ORDER BY id", "LIMIT"]),
    (returns_tuples, ["список словарей"]),
    (unsafe_search_by_entity, ["f-строка"]),
])
def test_entity_checker_gives_hints_where_students_stick(lab_ro, monkeypatch, func, hints):
    monkeypatch.setattr(func, "__name__", "search_by_entity")  # the one thing they all get right on purpose
    good_call = {"tool_calls": [{"name": "search_by_entity", "arguments": {"company": "ЦБ", "tone": "negative"}}]}
    result = lk.check_entity_tool(func, good_call, lab=lab_ro)
    assert not result.passed
    for hint in hints:
        assert any(hint in p for p in result.problems), (hint, result.problems)
