"""Execute notebooks with papermill, each in its own process group, two at a time (shared by the notebook test files)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import nbformat
import psutil
import psycopg
import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(REPO.glob("notebooks/*.ipynb")) + sorted(REPO.glob("solutions/*.ipynb"))
EXECUTED = REPO / "build" / "executed"  # the executed copies of the session (conftest.executed_notebooks)
DEFAULT_TIMEOUT = 600
KERNEL = "python3"
WORKERS = 2  # notebooks executed at once by `Runs`
LONGEST = "06_agent.ipynb"  # started first, so the others fill the second worker meanwhile


def notebook_id(path: Path) -> str:
    """'notebooks/05_evaluation.ipynb' style id of a notebook."""
    return f"{path.parent.name}/{path.name}"


def labkit_meta(nb: nbformat.NotebookNode) -> dict:
    """The notebook's ``metadata.labkit`` (timeout, ci_parameters, foreign_parameters)."""
    return dict(nb.metadata.get("labkit", {}))


def errors(executed: nbformat.NotebookNode) -> list[str]:
    """Every error output, as 'cell N: Name: value'."""
    found = []
    for number, cell in enumerate(executed.cells, start=1):
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                found.append(f"executed cell {number}: {output.get('ename')}: {output.get('evalue')}\n{cell.source[:300]}")
    return found


def _running_cell(output: Path) -> str:
    """Which cell papermill was running when a notebook ran out of time, from its partial output."""
    try:
        partial = nbformat.read(output, as_version=4)
    except (OSError, ValueError) as err:
        return f"no partial output ({err})"
    for number, cell in enumerate(partial.cells, start=1):
        if cell.get("metadata", {}).get("papermill", {}).get("status") == "running":
            return f"cell {number} was running:\n{cell.source[:400]}"
    return "no cell was marked running (the kernel may not have started)"


def _interrupt(process: subprocess.Popen) -> str:
    """Interrupt the kernels of a papermill run that ran out of time, so the cell records where it waited; then kill."""
    for child in psutil.Process(process.pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            child.send_signal(signal.SIGINT)  # a KeyboardInterrupt in the running cell: papermill saves its traceback
    try:
        log, _ = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        log = ""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    rest, _ = process.communicate()
    return (log or "") + (rest or "")


def _traceback(output: Path) -> str:
    """The last error traceback in a (partial) executed notebook, without colour codes."""
    try:
        nb = nbformat.read(output, as_version=4)
    except (OSError, ValueError):
        return "(no output notebook)"
    found = [o for cell in nb.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    if not found:
        return "(none recorded)"
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(found[-1].get("traceback", [])))[-3000:]


def _database_sessions() -> str:
    """pg_stat_activity of the lab database, with what each session waits on (for a timeout's report)."""
    url = os.environ.get("DATABASE_URL", "")
    if not url:
        return "(no DATABASE_URL)"
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            rows = conn.execute(
                "SELECT pid, application_name, state, wait_event_type, wait_event, "
                "round(extract(epoch FROM now() - xact_start)), left(query, 120) "
                "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
    except Exception as err:  # noqa: BLE001 - a report, never a second failure
        return f"(could not read pg_stat_activity: {err})"
    return "\n".join(" | ".join(str(v) for v in row) for row in rows) or "(none)"


def parameters(meta: Mapping[str, Any], overlay: str | None = None) -> dict[str, Any]:
    """The papermill parameters of a CI run: ``ci_parameters``, with the metadata key `overlay` (if any) on top."""
    return {**meta.get("ci_parameters", {}), **(meta.get(overlay, {}) if overlay else {})}


def execute(path: Path, output: Path, env: Mapping[str, str] | None = None,
            overlay: str | None = None) -> nbformat.NotebookNode:
    """Run `path` with papermill into `output` (kernel environment `env`, default: ours); fail the test on any error.

    `overlay` names a metadata key whose parameters go over ``ci_parameters`` (``foreign_parameters``
    for the foreign stack, where some sizes cost far more).
    """
    nb = nbformat.read(path, as_version=4)
    meta = labkit_meta(nb)
    timeout = int(meta.get("timeout", DEFAULT_TIMEOUT))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.unlink(missing_ok=True)
    command = [
        sys.executable, "-m", "labkit.course.nbengine", str(path), str(output),  # papermill, with sliced waits
        "--kernel", KERNEL, "--cwd", str(path.parent),
        "--parameters_yaml", json.dumps(parameters(meta, overlay)),
        "--execution-timeout", str(timeout), "--no-progress-bar",
    ]  # fmt: skip
    # Own process group, so a timeout kills papermill AND its kernel.
    process = subprocess.Popen(command, cwd=path.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True, env=dict(env) if env is not None else None)
    try:
        log, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        where = _running_cell(output)  # papermill saves the notebook after every cell: read it before the kill
        sessions = _database_sessions()
        log = _interrupt(process)
        pytest.fail(f"{notebook_id(path)} did not finish within {timeout} s (metadata labkit.timeout); "
                    f"{where}\nwhere it waited (the traceback of an interrupt):\n{_traceback(output)}\n"
                    f"database sessions then:\n{sessions}\nlog tail:\n{log[-1500:]}")
    assert output.exists(), f"papermill wrote no output for {notebook_id(path)}:\n{log[-3000:]}"
    executed = nbformat.read(output, as_version=4)
    found = errors(executed)
    assert not found, f"{notebook_id(path)} raised:\n" + "\n\n".join(found)
    assert process.returncode == 0, f"papermill failed on {notebook_id(path)} (exit {process.returncode}):\n{log[-3000:]}"
    return executed


class Runs:
    """Notebooks executed WORKERS at a time into `build` (kernel environment `env`), each at most once.

    ``submit`` starts runs in the background (the longest first, so the others fill the second
    worker meanwhile); ``result`` waits for one notebook's run, starting it if nobody asked yet,
    and returns the executed notebook or raises that run's failure; ``complete`` runs every
    notebook in `notebooks` and returns `build` once all have ended, failed or not. The lab is
    made for kernels running at once (test_chaos.py); the model server queues their requests.
    """

    def __init__(self, build: Path, notebooks: list[Path], env: Mapping[str, str] | None = None,
                 overlay: str | None = None) -> None:
        self.build = build
        self.notebooks = list(notebooks)
        self.env = env
        self.overlay = overlay
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="notebook")
        self._runs: dict[Path, Future] = {}
        self._lock = threading.Lock()

    def output(self, path: Path) -> Path:
        """Where the executed copy of `path` goes: ``build/<folder>/<name>.ipynb``."""
        return self.build / path.parent.name / path.name

    def submit(self, paths: Iterable[Path]) -> None:
        """Start the runs of `paths` that are not started yet."""
        with self._lock:
            for path in sorted(set(paths), key=lambda p: (p.name != LONGEST, p)):
                if path not in self._runs:
                    self._runs[path] = self._pool.submit(execute, path, self.output(path), self.env, self.overlay)

    def result(self, path: Path) -> nbformat.NotebookNode:
        """The executed notebook `path` (run now if no one started it); a failed run raises its failure here."""
        self.submit([path])
        return self._runs[path].result()

    def complete(self) -> Path:
        """`build`, once every notebook has run (a failed one is reported by its own test, not here)."""
        self.submit(self.notebooks)
        wait(list(self._runs.values()))
        return self.build

    def close(self) -> None:
        """Wait for the runs under way; drop the ones not started."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def selected_paths(request: pytest.FixtureRequest, fixture: str) -> set[Path]:
    """The notebooks (parameter ``path``) of the selected tests that request `fixture`: started at the first request."""
    paths = set()
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "path" in callspec.params and fixture in getattr(item, "fixturenames", ()):
            paths.add(callspec.params["path"])
    return paths


@contextlib.contextmanager
def executions(request: pytest.FixtureRequest, fixture: str, build: Path,
               env: Mapping[str, str] | None = None, notebooks: list[Path] | None = None,
               overlay: str | None = None) -> Iterator[Runs]:
    """For a fixture named `fixture`: ``Runs`` into `build`, the selected tests' notebooks started at once.

    Each test then waits for its own notebook (``runs.result(path)``); when the fixture ends,
    runs still under way are waited for.
    """
    runs = Runs(build, NOTEBOOKS if notebooks is None else notebooks, env, overlay)
    try:
        runs.submit(selected_paths(request, fixture))
        yield runs
    finally:
        runs.close()
