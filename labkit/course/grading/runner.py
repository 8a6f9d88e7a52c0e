"""The child process that executes one student notebook for the grader: limits first, then papermill.

    python -m labkit.course.grading.runner INPUT.ipynb OUTPUT.ipynb --parameters JSON --cell-timeout SECONDS

The grader starts it in a process group of its own and kills it (and the kernel it started)
at the notebook's time limit. Before papermill starts the kernel, this process lowers the
limits the kernel inherits: no file larger than FILE_LIMIT bytes, no core dumps. Execution
goes on after a failing cell, so one error costs the points of what depends on it, not the
rest; a cell running longer than --cell-timeout is interrupted (KeyboardInterrupt) and the
next one runs. Outputs past OUTPUT_LIMIT characters are dropped, except the answers the
grader's own cell displays and error messages. Exit code 0: the notebook ran to its end (with or without
errors in cells); 3: it could not (the kernel died, papermill failed).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
from collections.abc import Sequence
from typing import Any

from labkit.course.grading.limits import CUT_NOTE, FILE_LIMIT, OUTPUT_LIMIT

__all__ = ["main", "ENGINE"]

ENGINE = "labkit-grader"


def _limit_resources() -> None:
    for limit, value in ((resource.RLIMIT_FSIZE, FILE_LIMIT), (resource.RLIMIT_CORE, 0)):
        soft, hard = resource.getrlimit(limit)
        capped = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(limit, (capped, capped))


def _register_engine() -> None:
    """A papermill engine whose client keeps at most OUTPUT_LIMIT characters of output per notebook."""
    from nbformat.v4 import new_output
    from papermill.engines import papermill_engines

    from labkit.course.checks.answers import ANSWERS_MIME
    from labkit.course.nbengine import SlicedClient, SlicedEngine

    class CappedClient(SlicedClient):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.kept = 0
            self.cut = False

        def output(self, outs: list[Any], msg: dict[str, Any], display_id: str | None, cell_index: int) -> Any:
            content = msg.get("content", {})
            if msg.get("msg_type") == "error" or ANSWERS_MIME in content.get("data", {}):
                return super().output(outs, msg, display_id, cell_index)  # errors and the answers are always kept
            size = len(json.dumps(content, default=str, ensure_ascii=False))
            room = OUTPUT_LIMIT - self.kept
            if size <= room:
                self.kept += size
                return super().output(outs, msg, display_id, cell_index)
            self.kept = OUTPUT_LIMIT
            if self.cut:
                return None
            self.cut = True
            if msg.get("msg_type") == "stream" and room > 0:  # the beginning of the flood stays readable
                super().output(outs, {**msg, "content": {**content, "text": str(content.get("text", ""))[:room]}},
                               display_id, cell_index)
            outs.append(new_output("stream", name="stderr", text=CUT_NOTE))
            return None

    class CappedEngine(SlicedEngine):
        client = CappedClient

    papermill_engines.register(ENGINE, CappedEngine)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.course.grading.runner")
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--parameters", default="{}", help="papermill parameters as JSON")
    parser.add_argument("--cell-timeout", type=float, required=True)
    parser.add_argument("--kernel", default="python3")
    args = parser.parse_args(argv)
    _limit_resources()
    import papermill
    from papermill.exceptions import PapermillExecutionError

    _register_engine()
    try:
        papermill.execute_notebook(
            args.input, args.output, parameters=json.loads(args.parameters), engine_name=ENGINE,
            kernel_name=args.kernel, progress_bar=False, execution_timeout=int(args.cell_timeout),
            interrupt_on_timeout=True, allow_errors=True,
        )
    except PapermillExecutionError:
        return 0  # a cell raised: the executed notebook holds the error, later cells ran too
    except Exception as exc:  # noqa: BLE001 (the kernel died, papermill failed: the grader reports it)
        print(f"runner: {type(exc).__name__}: {' '.join(str(exc).split())[:500]}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
