"""Execute one notebook with papermill in its own process group (shared by the notebook test files)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import nbformat
import pytest

DEFAULT_TIMEOUT = 600
KERNEL = "python3"


def notebook_id(path: Path) -> str:
    """'notebooks/05_evaluation.ipynb' style id of a notebook."""
    return f"{path.parent.name}/{path.name}"


def labkit_meta(nb: nbformat.NotebookNode) -> dict:
    """The notebook's ``metadata.labkit`` (timeout, ci_parameters)."""
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


def execute(path: Path, output: Path, env: Mapping[str, str] | None = None) -> nbformat.NotebookNode:
    """Run `path` with papermill into `output` (kernel environment `env`, default: ours); fail the test on any error."""
    nb = nbformat.read(path, as_version=4)
    meta = labkit_meta(nb)
    timeout = int(meta.get("timeout", DEFAULT_TIMEOUT))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.unlink(missing_ok=True)
    command = [
        sys.executable, "-m", "papermill", str(path), str(output),
        "--kernel", KERNEL, "--cwd", str(path.parent),
        "--parameters_yaml", json.dumps(meta.get("ci_parameters", {})),
        "--execution-timeout", str(timeout), "--no-progress-bar",
    ]  # fmt: skip
    # Own process group, so a timeout kills papermill AND its kernel.
    process = subprocess.Popen(command, cwd=path.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True, env=dict(env) if env is not None else None)
    try:
        log, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"{notebook_id(path)} did not finish within {timeout} s (metadata labkit.timeout)")
    assert output.exists(), f"papermill wrote no output for {notebook_id(path)}:\n{log[-3000:]}"
    executed = nbformat.read(output, as_version=4)
    found = errors(executed)
    assert not found, f"{notebook_id(path)} raised:\n" + "\n\n".join(found)
    assert process.returncode == 0, f"papermill failed on {notebook_id(path)} (exit {process.returncode}):\n{log[-3000:]}"
    return executed
