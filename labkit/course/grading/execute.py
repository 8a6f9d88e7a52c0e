"""Execute one student notebook in isolation: a copy with the grader's cell, its own processes, limits, a watchdog.

``prepare`` writes the copy to execute (the student's file is never changed). ``execute`` runs
``labkit.course.grading.runner`` (papermill) in a new process group with the given environment and
working folder, and watches it: past the notebook's time limit, or when the runner, the
kernel and their children hold more than ``memory_bytes`` together, everything it started is
killed (the kernel runs in a session of its own, so it is tracked by pid, not by group).
``notes`` turns an executed notebook into Russian remarks for the reports.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from labkit.core.text import ERROR_CHARS, shorten
from labkit.course.checks.answers import GRADER_TAG, grader_cell_source
from labkit.course.grading.limits import CUT_NOTE, MEMORY_LIMIT, OUTPUT_LIMIT

__all__ = ["Limits", "Execution", "prepare", "execute", "read_executed", "notes"]

POLL_SECONDS = 0.25
KILL_WAIT = 10.0  # seconds to wait for killed processes to be gone
MAX_READ = 64 * 2**20  # bytes of an executed notebook the grader reads back
MAX_NOTES = 8


@dataclass(frozen=True)
class Limits:
    """How long and how big one notebook may get."""

    timeout: float  # seconds for the whole notebook, kernel start included
    cell_timeout: float  # seconds for one cell before it is interrupted
    memory_bytes: int = MEMORY_LIMIT  # resident memory of the runner, the kernel and their children together


@dataclass(frozen=True)
class Execution:
    """How one execution ended: ``ok`` (ran to its end), ``timeout``, ``memory`` or ``crashed``."""

    status: str
    seconds: float
    log: str  # the end of the runner's own output (papermill, the kernel's stderr)


def prepare(notebook: Path, key: str, seed: int, copy: Path) -> str | None:
    """Write the copy to execute to `copy`; returns the Russian reason when `notebook` cannot be read."""
    import nbformat  # here, not at the top: its schema validator takes a second to import, which every `labkit` command would pay

    try:
        nb = nbformat.read(notebook, as_version=4)
    except Exception as exc:  # noqa: BLE001 (a handed-in file can be anything)
        return f"файл не читается как ноутбук Jupyter ({shorten(f'{type(exc).__name__}: {exc}', ERROR_CHARS)})"
    nb.cells = [cell for cell in nb.cells if GRADER_TAG not in cell.get("metadata", {}).get("tags", [])]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    grader = nbformat.v4.new_code_cell(grader_cell_source(key, seed))
    grader.metadata["tags"] = [GRADER_TAG]
    nb.cells.append(grader)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    copy.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, copy)
    return None


def _tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _memory(processes: Mapping[int, psutil.Process]) -> int:
    total = 0
    for process in processes.values():
        try:
            if process.is_running():
                total += process.memory_info().rss
        except psutil.Error:
            continue
    return total


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill(processes: Mapping[int, psutil.Process]) -> None:
    """SIGKILL every tracked process still running and its process group (never our own); wait until they are gone."""
    own = os.getpgid(0)
    targets = [process for process in processes.values() if _alive(process)]  # is_running: a reused pid is not ours
    for process in targets:
        try:
            group = os.getpgid(process.pid)
            if group != own:
                os.killpg(group, signal.SIGKILL)
            process.kill()
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    deadline = time.monotonic() + KILL_WAIT
    while any(_alive(process) for process in targets) and time.monotonic() < deadline:
        time.sleep(0.05)  # a killed process with a lot of memory takes a moment to go


def execute(copy: Path, output: Path, *, parameters: Mapping[str, Any], env: Mapping[str, str], limits: Limits,
            workdir: Path) -> Execution:
    """Run the prepared `copy` into `output` in a new process group; kill all of it at the limits."""
    output.unlink(missing_ok=True)
    log_path = output.with_suffix(".log")
    command = [sys.executable, "-m", "labkit.course.grading.runner", str(copy.resolve()), str(output.resolve()),
               "--parameters", json.dumps(dict(parameters)), "--cell-timeout", str(int(limits.cell_timeout))]
    started = time.monotonic()
    with log_path.open("wb") as log:
        runner = subprocess.Popen(command, cwd=workdir, env=dict(env), stdin=subprocess.DEVNULL, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    seen: dict[int, psutil.Process] = {}
    status = "ok"
    try:
        root = seen[runner.pid] = psutil.Process(runner.pid)
        while True:
            try:
                code = runner.wait(timeout=POLL_SECONDS)
                status = "ok" if code == 0 else "crashed"
                break
            except subprocess.TimeoutExpired:
                pass
            for process in _tree(root):
                seen.setdefault(process.pid, process)
            if time.monotonic() - started > limits.timeout:
                status = "timeout"
                break
            if _memory(seen) > limits.memory_bytes:
                status = "memory"
                break
    except psutil.NoSuchProcess:  # the runner was gone before it could be watched
        status = "ok" if runner.wait() == 0 else "crashed"
    finally:
        _kill(seen)  # the runner, the kernel (a session of its own) and whatever they started
        runner.wait()
    tail = log_path.read_bytes()[-4000:].decode("utf-8", "replace") if log_path.exists() else ""
    return Execution(status, time.monotonic() - started, tail)


def read_executed(output: Path) -> dict[str, Any] | None:
    """The executed notebook as plain JSON data, or None when there is none (or it is too big to read)."""
    try:
        if output.stat().st_size > MAX_READ:
            return None
        data = json.loads(output.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _text(value: Any) -> str:
    """A notebook's multi-line string, stored as one string or a list of lines."""
    return "".join(value) if isinstance(value, list) else str(value)


def _first_line(source: Any) -> str:
    lines = [line.strip() for line in _text(source).splitlines() if line.strip() and not line.strip().startswith("#")]
    return shorten(lines[0], 60) if lines else "пустая ячейка"


def notes(executed: Mapping[str, Any] | None, cell_timeout: float) -> list[str]:
    """Russian remarks on an executed notebook: cells that failed, were interrupted or were running at the end."""
    if not executed:
        return []
    found: list[str] = []
    number = 0
    for cell in executed.get("cells", []):
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.get("cell_type") != "code" or "injected-parameters" in tags or GRADER_TAG in tags:
            continue
        number += 1
        where = f"ячейка с кодом №{number} («{_first_line(cell.get('source', ''))}»)"
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                if output.get("ename") == "KeyboardInterrupt":
                    found.append(f"{where} не уложилась в {cell_timeout:g} с и была прервана")
                else:
                    reason = shorten(f"{output.get('ename')}: {output.get('evalue')}", ERROR_CHARS)
                    found.append(f"{where} упала: {reason}")
            elif output.get("output_type") == "stream" and CUT_NOTE in _text(output.get("text", "")):
                found.append(f"{where}: вывод обрезан, в ноутбуке больше {OUTPUT_LIMIT:,} символов вывода".replace(",", " "))
        if cell.get("metadata", {}).get("papermill", {}).get("status") == "running":
            found.append(f"когда ноутбук остановили, выполнялась {where}")
    if len(found) > MAX_NOTES:
        found = [*found[:MAX_NOTES], f"и ещё замечаний: {len(found) - MAX_NOTES}"]
    return found
