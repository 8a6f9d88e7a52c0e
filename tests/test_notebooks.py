"""Every notebook executes (papermill, found by glob) and is committed clean (no outputs).

Per notebook, ``metadata.labkit`` may set ``timeout`` (seconds for the whole notebook,
default 600) and ``ci_parameters`` (papermill parameters, e.g. smaller sizes).
The session fixture ``executed_notebooks`` (tests/conftest.py) executes each notebook once, into
``build/executed/<folder>/<name>.ipynb``; ``test_notebook_executes`` reports each run, and the
exercise checks, the site and the browser tests read the same copies. No cell may fail, exercise
starters included: an unfinished TODO leaves its result None and the cells after it print a
Russian hint (``lk.ready``), so a student never meets a traceback or a papermill error banner.
Every notebook opens with a markdown title, then one short setup cell that builds the lab
context (``lab = lk.setup()``), and uses only names that labkit exports.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import start_new_kernel
from nbrun import KERNEL, NOTEBOOKS, Runs, notebook_id

import labkit
from labkit.course.grading.grader import parameters_cell_values

_id = notebook_id


def _tags(cell: nbformat.NotebookNode) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_notebook_is_committed_clean(path: Path):
    nb = nbformat.read(path, as_version=4)
    dirty = [
        number
        for number, cell in enumerate(nb.cells, start=1)
        if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count") is not None)
    ]
    assert not dirty, f"{_id(path)}: cells {dirty} have outputs or execution counts; clear them before committing"
    tagged = [number for number, cell in enumerate(nb.cells, start=1) if "parameters" in _tags(cell)]
    assert len(tagged) == 1, f"{_id(path)}: expected exactly one cell tagged 'parameters', found {tagged}"
    raising = [number for number, cell in enumerate(nb.cells, start=1) if "raises-exception" in _tags(cell)]
    assert not raising, f"{_id(path)}: cells {raising} are allowed to raise; a TODO should print a hint instead"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_run_parameters_name_variables_of_the_parameters_cell(path: Path):
    """A misspelt key in ``ci_parameters``, ``foreign_parameters`` or ``grading_parameters`` would silently run the full size."""
    nb = nbformat.read(path, as_version=4)
    assigned = set(parameters_cell_values(nb))
    meta = nb.metadata.get("labkit", {})
    for key in ("ci_parameters", "foreign_parameters", "grading_parameters"):
        unknown = set(meta.get(key, {})) - assigned
        assert not unknown, f"{_id(path)}: {key} sets {sorted(unknown)}, which the parameters cell does not assign"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_notebook_opens_with_title_then_one_short_setup_cell(path: Path):
    nb = nbformat.read(path, as_version=4)
    title, setup = nb.cells[0], nb.cells[1]
    assert title.cell_type == "markdown" and title.source.lstrip().startswith("# "), "cell 1 must be a markdown title"
    code = [line for line in setup.source.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert setup.cell_type == "code" and "lab = lk.setup(" in setup.source, "cell 2 must build the lab: lab = lk.setup()"
    assert len(code) <= 8, f"the setup cell should be short, it has {len(code)} lines of code"
    later = [n for n, cell in enumerate(nb.cells[2:], start=3)
             if cell.cell_type == "code" and ("lk.setup(" in cell.source or "ensure_stack" in cell.source)]
    assert not later, f"cells {later} set up services again: the setup cell is the only edge"


def _labkit_names_used(source: str) -> set[str]:
    """Names taken from labkit in a cell: `lk.NAME` and `from labkit[.module] import NAME`; modules as 'labkit.x'."""
    used: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "lk":
            used.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "labkit":
            used |= {node.module} if node.module != "labkit" else set()
            used |= {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            used |= {alias.name for alias in node.names if alias.name.startswith("labkit.")}
    return used


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_notebook_uses_only_exported_labkit_names(path: Path):
    nb = nbformat.read(path, as_version=4)
    code = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    used = set().union(*(_labkit_names_used("\n".join(line for line in src.splitlines() if not line.startswith(("%", "!"))))
                         for src in code))
    private = sorted(name for name in used if name not in labkit.__all__)
    assert not private, f"{_id(path)} uses names labkit does not export: {private}"


@pytest.mark.services  # not a lab service, but it starts a kernel process
def test_python3_kernel_runs_this_interpreter():
    """papermill's kernel `python3` must be this venv's Python, or notebooks miss the lab's packages."""
    printed: list[str] = []

    def keep_stdout(message: dict) -> None:
        if message["header"]["msg_type"] == "stream":
            printed.append(message["content"]["text"])

    manager, client = start_new_kernel(kernel_name=KERNEL)
    try:
        reply = client.execute_interactive("import sys; print(sys.prefix)", timeout=60, output_hook=keep_stdout)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    assert reply["content"]["status"] == "ok"
    kernel_prefix = "".join(printed).strip()  # sys.prefix tells venvs apart; executables are symlinks
    assert kernel_prefix == sys.prefix, (
        f"kernel {KERNEL!r} runs the Python of {kernel_prefix}, not {sys.prefix}: register it with "
        "`.venv/bin/python -m ipykernel install --sys-prefix --name python3`"
    )


@pytest.mark.services
@pytest.mark.system
@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_notebook_executes(path: Path, executed_notebooks: Runs):
    executed_notebooks.result(path)  # a run that failed or ran out of time raises its failure here


# --- prose follows the numbers ------------------------------------------------------------------
# Convention: a markdown cell states no number of its own. A number the run computes is printed
# by a code cell (lk.say(f"...")); numbers inside code (`TOP_K = 3`), formulas ($1/(60+r)$), links
# and their titles, list markers and the notebook's own number in its title are not prose.
_NOT_PROSE = [
    re.compile(r"```.*?```", re.DOTALL),  # fenced code
    re.compile(r"`[^`\n]*`"),  # inline code
    re.compile(r"\$\$.*?\$\$", re.DOTALL),  # display math
    re.compile(r"\$[^$\n]+\$"),  # inline math
    re.compile(r"!?\[[^\]]*\]\([^)]*\)"),  # links and images, with their text
    re.compile(r"<[^>]+>"),  # HTML tags (<details>, <summary>)
    re.compile(r"^\s*(?:[-*]|\d+\.)\s", re.MULTILINE),  # list markers
    re.compile(r"^#\s+\d+\.", re.MULTILINE),  # "# 05." in the title
]
_NUMBER = re.compile(r"(?<![\w@.,/])\d+(?:[.,]\d+)*(?!\w|[.,]\d)")  # 12, 0,75, 5.3; not BM25, e5, Recall@3, 1.5B


def prose_numbers(markdown: str) -> list[str]:
    """The numbers a markdown text states as prose (see the convention above)."""
    for pattern in _NOT_PROSE:
        markdown = pattern.sub(" ", markdown)
    return _NUMBER.findall(markdown)


def test_prose_number_rule_by_example():
    assert prose_numbers("Гибрид нашёл 5 из 12, Recall@3 = 0,75.") == ["5", "12", "0,75"]
    assert prose_numbers("# 05. Оценка\n1. шаг `TOP_K = 3` и $1/(60 + r)$, BM25, e5, qwen2.5 1.5B") == []
    assert prose_numbers("[Cormack et al. 2009](https://x/1.pdf) <details><summary>Ответ</summary>") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_prose_states_no_number_the_run_did_not_compute(path: Path):
    nb = nbformat.read(path, as_version=4)
    found = {n: prose_numbers(cell.source) for n, cell in enumerate(nb.cells, start=1) if cell.cell_type == "markdown"}
    found = {n: numbers for n, numbers in found.items() if numbers}
    assert not found, f"{_id(path)}: numbers in prose (print them with lk.say from the run instead): {found}"
