"""A papermill engine ("labkit") whose client never waits for a message that has already arrived.

nbclient waits for a kernel's replies with one long ``poll`` of a ``zmq.asyncio`` socket (the
whole cell timeout). Here that wait sometimes misses its wake-up: the reply is in the socket,
the kernel is idle, and nothing happens until the poll's timeout ends, when the reply is found
and the cell completes. Four notebooks full of widgets run at once stalled so in most runs here,
and CI's chaos test saw 04_rrf stall for its whole ten minutes (locally: in its widget cell). A
blocking client with the same kernel never stalled; pyzmq 26.4-27.3, jupyter_client 8.6-8.10,
nbclient 0.10-0.11 and ipykernel 6.31 and 7.4 all did. The engine waits in slices of
SLICE_SECONDS instead, so a missed wake-up costs at most one slice.

    python -m labkit.nbengine INPUT.ipynb OUTPUT.ipynb [papermill's options]

is papermill's command line with this engine (no entry point: papermill loads those while
this module imports papermill, a circle); the notebook tests run notebooks so, and the grader
builds its engine on SlicedEngine.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from queue import Empty
from typing import Any

from nbclient.util import run_sync
from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine
from papermill.log import logger

__all__ = ["ENGINE", "SLICE_SECONDS", "SlicedClient", "SlicedEngine", "main", "sliced"]

ENGINE = "labkit"
SLICE_SECONDS = 1.0

GetMsg = Callable[..., Awaitable[dict[str, Any]]]


def sliced(get_msg: GetMsg, slice_seconds: float = SLICE_SECONDS) -> GetMsg:
    """`get_msg(timeout)` as a series of waits of at most `slice_seconds`, until a message or the timeout."""

    async def get(timeout: float | None = None) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = slice_seconds if deadline is None else min(slice_seconds, max(0.0, deadline - time.monotonic()))
            try:
                return await get_msg(timeout=left)
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    return get


class SlicedClient(PapermillNotebookClient):
    """papermill's client, with the shell and IOPub waits sliced (see the module docstring)."""

    async def async_start_new_kernel_client(self) -> Any:
        kc = await super().async_start_new_kernel_client()
        for channel in (kc.shell_channel, kc.iopub_channel):
            channel.get_msg = sliced(channel.get_msg)
        return kc

    # nbclient binds its blocking twin to the base class's coroutine: bind it to ours.
    start_new_kernel_client = run_sync(async_start_new_kernel_client)


class SlicedEngine(NBClientEngine):
    """papermill's nbclient engine with `client` as its notebook client."""

    client: type[PapermillNotebookClient] = SlicedClient

    @classmethod
    def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, log_output: bool = False,
                                 stdout_file: Any = None, stderr_file: Any = None, start_timeout: int = 60,
                                 execution_timeout: int | None = None, **kwargs: Any) -> Any:
        """As papermill's own engine (same arguments, same defaults), with this engine's client."""
        kwargs.pop("input_path", None)
        timeout = execution_timeout or kwargs.get("timeout")
        for renamed in ("timeout", "startup_timeout"):
            kwargs.pop(renamed, None)
        kwargs.update(timeout=timeout, startup_timeout=start_timeout, kernel_name=kernel_name, log=logger,
                      log_output=log_output, stdout_file=stdout_file, stderr_file=stderr_file)
        return cls.client(nb_man, **kwargs).execute()


def main() -> None:
    """papermill's command line, with this engine registered and chosen."""
    from papermill.cli import papermill
    from papermill.engines import papermill_engines

    papermill_engines.register(ENGINE, SlicedEngine)
    papermill(args=[*sys.argv[1:], "--engine", ENGINE], prog_name="python -m labkit.nbengine")


if __name__ == "__main__":
    main()
