"""labkit.course.site without any service or browser: a tiny course in a temporary folder, rendered and read back.

The real course in a real browser is tests/test_browser.py.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from labkit.course.site import build_site, course_pages, is_fresh, mathml

WIDGET = "application/vnd.jupyter.widget-view+json"


def _notebook(path: Path, title: str, *cells: nbformat.NotebookNode) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(new_notebook(cells=[new_markdown_cell(f"# {title}\n\nО чём урок."), *cells]), path)


def _executed(source: Path, copy: Path, *, exception: bool = False, outputs: list | None = None) -> None:
    nb = nbformat.read(source, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = outputs if outputs is not None else [new_output("stream", name="stdout", text="готово\n")]
    nb.metadata["papermill"] = {"exception": exception, "end_time": "2026-01-01T00:00:00"}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    copy.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, copy)


@pytest.fixture()
def course(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    _notebook(root / "notebooks" / "00_intro.ipynb", "00. Введение", new_markdown_cell(
        "Дальше: [урок 01](01_lesson.ipynb#Шаг), решения: [тут](../solutions/), формула $1/(k + r)$.\n\n"
        "```mermaid\nflowchart LR\n  A --> B\n```"))
    _notebook(root / "notebooks" / "01_lesson.ipynb", "01. Урок", new_markdown_cell("## Шаг"),
              new_code_cell("print('готово')"))
    _notebook(root / "notebooks" / "02_task.ipynb", "02. Задание", new_markdown_cell("[нет такого](99_nope.ipynb)"))
    # A solution's links were written for notebooks/: «01_lesson.ipynb» leads there.
    _notebook(root / "solutions" / "02_task.ipynb", "02. Задание", new_markdown_cell("[урок](01_lesson.ipynb)"))
    lesson = root / "notebooks" / "01_lesson.ipynb"
    _executed(lesson, root / "build" / "executed" / "notebooks" / lesson.name,
              outputs=[new_output("display_data", data={WIDGET: {"model_id": "x"}, "text/plain": "VBox(...)"}),
                       # a diagram drawn by code, as 06_agent draws its graph: only the executed page has it
                       new_output("execute_result", data={"text/markdown": "```mermaid\ngraph TD;\n  a --> b;\n```"},
                                  execution_count=1)])
    return root


def test_course_order_kinds_and_titles(course: Path):
    pages = course_pages(course, course / "build" / "executed")
    assert [(p.path, p.kind) for p in pages] == [
        ("notebooks/00_intro.html", "overview"), ("notebooks/01_lesson.html", "lesson"),
        ("notebooks/02_task.html", "exercise"), ("solutions/02_task.html", "solution")]
    assert pages[3].title == "Решение: 02. Задание"
    assert [p.executed is not None for p in pages] == [False, True, False, False]


def test_an_executed_copy_is_fresh_only_if_complete_clean_and_newer(course: Path, tmp_path: Path):
    source = course / "notebooks" / "01_lesson.ipynb"
    copy = tmp_path / "copy.ipynb"
    _executed(source, copy)
    assert is_fresh(source, copy)
    os.utime(source, (copy.stat().st_mtime + 10, copy.stat().st_mtime + 10))  # the source changed after the run
    assert not is_fresh(source, copy)
    _executed(source, copy, exception=True)
    assert not is_fresh(source, copy)
    _executed(source, copy, outputs=[new_output("error", ename="ValueError", evalue="x", traceback=[])])
    assert not is_fresh(source, copy)
    copy.write_text("{half", encoding="utf-8")
    assert not is_fresh(source, copy)
    assert not is_fresh(source, tmp_path / "missing.ipynb")


def test_the_site_links_pages_and_fetches_nothing(course: Path):
    report = build_site(course, course / "build" / "site", course / "build" / "executed")
    site = report.out
    assert report.broken_links == ["notebooks/02_task.html: 99_nope.ipynb"]
    assert [p.path for p in report.unexecuted] == ["notebooks/00_intro.html", "notebooks/02_task.html",
                                                   "solutions/02_task.html"]
    intro = (site / "notebooks" / "00_intro.html").read_text(encoding="utf-8")
    assert 'href="01_lesson.html#%D0%A8%D0%B0%D0%B3"' in intro and 'href="../index.html#solutions"' in intro
    assert "<math" in intro and "$1/(k + r)$" not in intro  # MathML, no MathJax
    assert '<script src="../assets/mermaid.min.js">' in intro and (site / "assets" / "mermaid.min.js").is_file()
    assert 'href="01_lesson.html" rel="next"' in intro and 'href="../index.html">Оглавление курса' in intro
    assert "без выполнения" in intro
    lesson = (site / "notebooks" / "01_lesson.html").read_text(encoding="utf-8")
    assert "интерактивный виджет" in lesson and "VBox(" not in lesson and "без выполнения" not in lesson
    assert '<script src="../assets/mermaid.min.js">' in lesson, "a diagram in an output is drawn too"
    assert "mermaid.min.js" not in (site / "notebooks" / "02_task.html").read_text(encoding="utf-8")
    assert 'href="../solutions/02_task.html"' in (site / "notebooks" / "02_task.html").read_text(encoding="utf-8")
    solution = (site / "solutions" / "02_task.html").read_text(encoding="utf-8")
    assert 'href="../notebooks/02_task.html"' in solution and 'rel="prev"' not in solution  # its task, not lesson 01
    assert 'rel="next"' not in (site / "notebooks" / "02_task.html").read_text(encoding="utf-8")  # the last lesson
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        loaded = re.findall(r'<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)="([^"]+)"', text)
        assert not [url for url in loaded if re.match(r"(?:https?:)?//", url)], f"{page.name} loads {loaded}"
        assert "require.min.js" not in text and "MathJax" not in text and "embed-amd" not in text
    index = (site / "index.html").read_text(encoding="utf-8")
    assert index.index("00_intro.html") < index.index("01_lesson.html") < index.index("solutions/02_task.html")


def test_a_rebuild_never_deletes_a_folder_it_did_not_make(course: Path, tmp_path: Path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.txt").write_text("x", encoding="utf-8")
    with pytest.raises(FileExistsError):
        build_site(course, precious, course / "build" / "executed")
    assert (precious / "thesis.txt").exists()
    build_site(course, tmp_path / "site", course / "build" / "executed")
    build_site(course, tmp_path / "site", course / "build" / "executed")  # its own site: replaced
    assert (tmp_path / "site" / "index.html").is_file()


def test_a_formula_that_does_not_parse_stays_readable():
    assert mathml(r"\frac{1}{").startswith('<code class="labkit-tex">')
    assert mathml("k_1").startswith("<math")
