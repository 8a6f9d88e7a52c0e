"""The "labkit" papermill engine: a reply that arrived is never waited for until the cell's timeout.

With papermill's own engine, four notebooks full of widgets run at once here stall in most runs
(a missed wake-up of nbclient's long socket poll: labkit/course/nbengine.py); every notebook test and
the grader use this engine.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from queue import Empty

import nbformat
import pytest

from labkit.course.nbengine import sliced

WIDGET_CELL = """controls = {{"a": widgets.IntSlider(value=1), "b": widgets.FloatSlider(value=2.0)}}
out = widgets.interactive_output(lambda a, b: print("x" * 50, a, b), controls)
display(widgets.VBox([widgets.HBox(list(controls.values())), out]))
print({number})"""
RUNS_AT_ONCE = 4
STALL_SECONDS = 120  # a clean run takes a few seconds; a stalled one waits for the whole cell timeout


class FakeChannel:
    """A channel whose message is ready on the `ready_on`-th wait (the timeouts asked are kept)."""

    def __init__(self, ready_on: int | None) -> None:
        self.ready_on, self.asked = ready_on, []

    async def get_msg(self, timeout: float | None = None) -> dict:
        self.asked.append(timeout)
        if self.ready_on is not None and len(self.asked) >= self.ready_on:
            return {"msg_type": "execute_reply"}
        await asyncio.sleep(timeout or 0)
        raise Empty


def test_a_long_wait_is_cut_into_slices_that_end_with_the_message():
    channel = FakeChannel(ready_on=3)
    assert asyncio.run(sliced(channel.get_msg, 0.05)(timeout=600)) == {"msg_type": "execute_reply"}
    assert channel.asked == [0.05, 0.05, 0.05]


def test_no_message_by_the_timeout_is_still_empty():
    channel = FakeChannel(ready_on=None)
    with pytest.raises(Empty):
        asyncio.run(sliced(channel.get_msg, 0.05)(timeout=0.12))
    assert 3 <= len(channel.asked) <= 4 and all(t <= 0.05 for t in channel.asked)


def _notebook(path: Path, sources: list[str]) -> Path:
    """A python3 notebook of these code cells, written to `path`."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(nb, path)
    return path


def _start(source: Path, output: Path, *options: str) -> subprocess.Popen:
    """A run of the labkit engine on `source`, in its own process group, its log on stdout."""
    return subprocess.Popen([sys.executable, "-m", "labkit.course.nbengine", str(source), str(output),
                             "--kernel", "python3", "--no-progress-bar", *options],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


@pytest.mark.system  # executes notebooks (no lab service)
def test_four_widget_notebooks_at_once_all_finish(tmp_path: Path):
    cells = ["import ipywidgets as widgets\nfrom IPython.display import display"]
    source = _notebook(tmp_path / "widgets.ipynb", cells + [WIDGET_CELL.format(number=n) for n in range(40)])
    runs = [_start(source, tmp_path / f"out{n}.ipynb", "--execution-timeout", str(STALL_SECONDS * 2))
            for n in range(RUNS_AT_ONCE)]
    stalled = []
    for n, run in enumerate(runs):
        try:
            log, _ = run.communicate(timeout=STALL_SECONDS)
        except subprocess.TimeoutExpired:
            run.kill()
            run.communicate()
            stalled.append(n)
            continue
        assert run.returncode == 0, log[-2000:]
    assert not stalled, f"runs {stalled} of {RUNS_AT_ONCE} waited for a reply that had arrived"


PROBE_CELL = """import json, os
from ipykernel.kernelapp import IPKernelApp
app = IPKernelApp.instance()
print(json.dumps({"transport": app.transport, "ip": app.ip,
                  "sockets": sorted(p for p in os.listdir(os.path.dirname(app.ip)) if p.startswith(os.path.basename(app.ip)))}))"""


@pytest.mark.system  # executes notebooks (no lab service)
def test_kernels_listen_on_unix_sockets_of_their_own_that_are_removed_at_the_end(tmp_path: Path):
    """No TCP port to lose to another process between jupyter_client's pick and the kernel's bind."""
    source = _notebook(tmp_path / "probe.ipynb", [PROBE_CELL])
    outputs = [tmp_path / f"out{n}.ipynb" for n in range(2)]
    runs = [_start(source, out) for out in outputs]
    for run in runs:
        log, _ = run.communicate(timeout=120)
        assert run.returncode == 0, log[-2000:]
    seen = [json.loads(nbformat.read(out, as_version=4).cells[0].outputs[0].text) for out in outputs]
    for probe in seen:
        assert probe["transport"] == "ipc", probe
        assert len(probe["sockets"]) == 5, probe  # shell, iopub, stdin, control, heartbeat
        assert not list(Path(probe["ip"]).parent.glob(Path(probe["ip"]).name + "-*")), "socket files left behind"
    assert seen[0]["ip"] != seen[1]["ip"]
