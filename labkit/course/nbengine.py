"""A papermill engine ("labkit") whose client never waits for a message that has already arrived.

nbclient waits for a kernel's replies with one long ``poll`` of a ``zmq.asyncio`` socket (the
whole cell timeout). Here that wait sometimes misses its wake-up: the reply is in the socket,
the kernel is idle, and nothing happens until the poll's timeout ends, when the reply is found
and the cell completes. Four notebooks full of widgets run at once stalled so in most runs here,
and CI's chaos test saw 04_rrf stall for its whole ten minutes (locally: in its widget cell). A
blocking client with the same kernel never stalled; pyzmq 26.4-27.3, jupyter_client 8.6-8.10,
nbclient 0.10-0.11 and ipykernel 6.31 and 7.4 all did. The engine waits in slices of
SLICE_SECONDS instead, so a missed wake-up costs at most one slice.

    python -m labkit.course.nbengine INPUT.ipynb OUTPUT.ipynb [papermill's options]

is papermill's command line with this engine (no entry point: papermill loads those while
this module imports papermill, a circle); the notebook tests run notebooks so, and the grader
builds its engine on SlicedEngine.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from queue import Empty
from typing import Any

from jupyter_core.paths import jupyter_runtime_dir
from nbclient.util import run_sync
from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine
from papermill.log import logger

__all__ = ["ENGINE", "SLICE_SECONDS", "SlicedClient", "SlicedEngine", "main", "sliced", "socket_prefix"]

ENGINE = "labkit"
SLICE_SECONDS = 1.0
SOCKET_PATH_LIMIT = 100  # sun_path holds 108 bytes on Linux, 104 on macOS

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


def socket_prefix() -> str:
    """A fresh path prefix for a kernel's Unix sockets: in Jupyter's private runtime directory, or the
    temporary directory where that path would pass the ~100-byte limit of a socket's address."""
    name = f"labkit-{uuid.uuid4().hex[:16]}"
    runtime = Path(jupyter_runtime_dir())
    if len(f"{runtime / name}-5") > SOCKET_PATH_LIMIT:  # the longest socket path: <prefix>-<1..5>
        runtime = Path(tempfile.gettempdir())
    runtime.mkdir(parents=True, exist_ok=True, mode=0o700)
    return str(runtime / name)


class SlicedClient(PapermillNotebookClient):
    """papermill's client, with the shell and IOPub waits sliced (see the module docstring).

    Its kernel listens on Unix sockets of its own (ZeroMQ's ``ipc`` transport), not on TCP ports:
    jupyter_client picks a TCP port by binding and closing it, and the kernel binds it again a
    second later; any other process may take the port meanwhile (another kernel starting, an
    outgoing connection to Postgres or the model server) and the kernel dies with "Address already
    in use" before the first cell (papermill issue 511). The notebook tests and the grader start
    kernels at once, so they can meet that race; a path made from a fresh uuid cannot be taken.
    Windows has no ``ipc`` transport in Jupyter: there the kernel keeps its TCP ports.
    """

    def create_kernel_manager(self) -> Any:
        km = super().create_kernel_manager()
        if os.name != "posix":
            return km
        km.transport = "ipc"
        km.cache_ports = False  # port numbers are socket-file suffixes here, not TCP ports to reserve
        km.ip = socket_prefix()  # the kernel binds <ip>-1 … <ip>-5; the manager removes them at shutdown
        return km

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
    papermill(args=[*sys.argv[1:], "--engine", ENGINE], prog_name="python -m labkit.course.nbengine")


if __name__ == "__main__":
    main()
