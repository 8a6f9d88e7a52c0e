"""The course's claims about its search modes are printed from the run's numbers, not written in prose.

The capstone's «Что мы узнали» and 05's «Нужен ли гибрид» are code that prints what the run found;
00_intro promises to measure whether the hybrid helps, not that it does. (Every number in prose is
already refused by tests/test_notebooks.py; these are the claims without numbers.)
"""

from __future__ import annotations

from pathlib import Path

import nbformat

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _cells(name: str) -> list[nbformat.NotebookNode]:
    return list(nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells)


def _section(name: str, heading: str) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
    """The markdown cell that opens `heading` and the cell after it."""
    cells = _cells(name)
    at = next(i for i, cell in enumerate(cells) if cell.cell_type == "markdown" and heading in cell.source)
    return cells[at], cells[at + 1]


def test_the_capstone_prints_what_was_learned_from_its_numbers():
    prose, code = _section("30_capstone", "## Что мы узнали")
    assert not [line for line in prose.source.splitlines() if line.lstrip().startswith(("* ", "- "))], prose.source
    assert code.cell_type == "code" and "lk.paired_test" in code.source and "lk.say(" in code.source


def test_the_evaluation_lesson_asks_whether_the_hybrid_is_needed_and_the_run_answers():
    prose, code = _section("05_evaluation", "## Нужен ли гибрид")
    assert code.cell_type == "code"
    cells = _cells("05_evaluation")
    answer = cells[cells.index(code) + 1]
    assert "Когда гибрид не нужен" in answer.source and "p_big" in answer.source and "lk.say(" in answer.source


def test_the_introduction_promises_a_measurement_not_a_result():
    text = "\n".join(cell.source for cell in _cells("00_intro") if cell.cell_type == "markdown")
    for claim in ("который не путает", "надёжнее каждого по отдельности", "сливает их, а не выбирает одну"):
        assert claim not in text, claim
    assert "когда слияние помогает" in text
