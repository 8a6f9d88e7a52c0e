"""Start, stop and check the lab's two services: Postgres and the model server (taught in 01_corpus).

Each service is either *external* (``DATABASE_URL`` / ``OLLAMA_HOST`` set, or ``LAB_STACK=compose``)
and only checked, or *embedded* and started here in the background: Postgres by
`labkit.services.pgembedded`, the model server by `labkit.services.modelembedded`. What was started is
recorded in ``lab_home()/stack.json``; ``stack.lock`` keeps two processes from starting it at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from labkit.core.errors import LabError
from labkit.core.settings import EMBEDDED_MODEL_PORT, EMBEDDED_PG_PORT, Settings, get_settings, redact_url
from labkit.services import modelembedded, pgembedded
from labkit.services.home import ensure_home

__all__ = ["StackError", "ServiceStatus", "StackStatus", "ensure_stack", "up", "down", "status"]

START_TIMEOUT = float(os.environ.get("LABKIT_START_TIMEOUT", "300"))
BUSY_GRACE = 30.0  # seconds a live but silent service gets before `up` restarts it
# How long `up`/`down` wait for another one to finish: a first start (Postgres, then the model files
# joined and the model server loading them) takes minutes on a slow laptop.
STACK_LOCK_SECONDS = 2 * START_TIMEOUT + 300


def _up_hint(settings: Settings) -> str:
    return "./run.sh --compose up" if settings.stack == "compose" else "./run.sh up"


class StackError(LabError):
    """A lab service is down or cannot be started; the message says what to do."""


@dataclass(frozen=True)
class ServiceStatus:
    """What one service looks like right now."""

    name: str  # "postgres" or "model server"
    url: str | None
    embedded: bool  # started by labkit (True) or external (False)
    pid: int | None
    up: bool
    detail: str


@dataclass(frozen=True)
class StackStatus:
    """Both services; ``str()`` gives shell-sourceable ``KEY=value`` lines (shell-quoted) and ``# comments``."""

    settings: Settings
    db: ServiceStatus
    model: ServiceStatus

    @property
    def ok(self) -> bool:
        return self.db.up and self.model.up

    def __str__(self) -> str:
        lines = [f"# labkit stack: {self.settings.stack}, home {self.settings.home}"]
        for svc in (self.db, self.model):
            kind = "embedded" if svc.embedded else "external"
            pid = f", pid {svc.pid}" if svc.pid else ""
            detail = " ".join(svc.detail.split())  # one comment line, whatever the server said
            lines.append(f"# {svc.name}: {'up' if svc.up else 'DOWN'} ({kind}{pid}) {detail}".rstrip())
        if not self.ok:
            logs = self.settings.home / "logs"
            lines.append(f"# run `{_up_hint(self.settings)}` to start what is down; logs in {logs}")
        lines.append(f"DATABASE_URL={shlex.quote(self.db.url or '')}")
        lines.append(f"OLLAMA_HOST={shlex.quote(self.model.url or '')}")
        return "\n".join(lines)


def _say(message: str) -> None:
    print(f"[labkit] {message}", file=sys.stderr, flush=True)


# --- state file and lock -------------------------------------------------------------------

def _read_state(home: Path) -> dict:
    try:
        return json.loads((home / "stack.json").read_text())
    except (OSError, ValueError):
        return {}


def _write_state(home: Path, state: dict) -> None:
    """Write stack.json atomically (temp file + rename)."""
    tmp = home / f".stack.json.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
    os.replace(tmp, home / "stack.json")


@contextlib.contextmanager
def _locked(home: Path, wait_seconds: float | None = None) -> Iterator[None]:
    """Hold an exclusive cross-process lock on ``home/stack.lock`` (the home is created or checked first).

    Waits at most `wait_seconds` (default STACK_LOCK_SECONDS), then StackError names the holder's pid.
    """
    home = ensure_home(home)
    wait = STACK_LOCK_SECONDS if wait_seconds is None else wait_seconds
    with open(home / "stack.lock", "a+") as handle:
        try:
            import fcntl
        except ImportError:  # Windows has no flock: starts are not serialised there
            yield
            return
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    handle.seek(0)
                    holder = handle.read().strip() or "unknown"
                    raise StackError(f"another `up` or `down` (pid {holder}) has held {home / 'stack.lock'} for over "
                                     f"{wait:.0f} s; wait for it to finish, or stop that process") from None
                time.sleep(0.2)
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(str(os.getpid()))
            handle.flush()
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# --- probes ----------------------------------------------------------------------------------

def _db_status(settings: Settings, state: dict) -> ServiceStatus:
    if settings.database_url:
        problem = pgembedded.probe(settings.database_url)
        return ServiceStatus("postgres", settings.database_url, False, None, problem is None, _db_detail(problem, ""))
    instance = pgembedded.running(settings.home)
    if instance is None:
        port = state.get("postgres", {}).get("port")
        url = pgembedded.database_url(settings.home, port, settings.db_name) if port else None
        return ServiceStatus("postgres", url, True, None, False, "not running")
    url = pgembedded.database_url(settings.home, instance.port, settings.db_name)
    problem = pgembedded.probe(url)
    return ServiceStatus("postgres", url, True, instance.pid, problem is None, _db_detail(problem, "running but "))


def _db_detail(problem: str | None, prefix: str) -> str:
    """Status detail of Postgres: empty when it answers; saturation is told apart from silence."""
    if problem is None:
        return ""
    if pgembedded.is_saturation(problem):
        return f"{prefix}refuses new connections: {problem}"
    return f"{prefix}does not answer"


def _model_status(settings: Settings, state: dict) -> ServiceStatus:
    if settings.ollama_host:
        ok = modelembedded.answers(settings.ollama_host)
        return ServiceStatus("model server", settings.ollama_host, False, None, ok, "" if ok else "does not answer")
    entry = state.get("modelserver")
    proc = modelembedded.process(entry)
    if proc is None:
        gone = f"pid {entry['pid']} gone" if entry and entry.get("pid") else "not running"
        return ServiceStatus("model server", (entry or {}).get("url"), True, None, False, gone)
    assert entry is not None  # a live process was found from it
    ok = modelembedded.answers(entry["url"])
    return ServiceStatus("model server", entry["url"], True, proc.pid, ok, "" if ok else "running but does not answer")


def _probe(settings: Settings) -> StackStatus:
    state = _read_state(settings.home)
    return StackStatus(settings, _db_status(settings, state), _model_status(settings, state))


# --- starting --------------------------------------------------------------------------------

def _wait_until(check: Callable[[], bool], seconds: float) -> bool:
    """Call `check` about once a second until it is true or `seconds` have passed."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(1.0)
    return True


def _pick_port(preferred: list[int | None], what: str) -> int:
    """First free port of `preferred`, else any free one (and say so)."""
    for port in dict.fromkeys(p for p in preferred if p):
        if pgembedded.port_is_free(port):
            return port
    port = pgembedded.free_port()
    _say(f"port {preferred[-1]} for the {what} is taken by another program; using {port} instead")
    return port


def _usable_url(svc: ServiceStatus, variable: str, settings: Settings) -> str | None:
    """The URL of a service that answers; None for an embedded one to (re)start; error for a dead external one."""
    if svc.up:
        return svc.url
    if svc.name == "postgres" and pgembedded.is_saturation(svc.detail):
        # Every connection slot is taken: the server is busy, not broken. A restart would kill every
        # session of every kernel, so it is reported and never restarted.
        raise StackError(f"Postgres at {redact_url(svc.url)} {svc.detail}. Close the notebooks you no longer use "
                         "(Kernel > Shut Down Kernel) or their connections, then try again; it was not restarted.")
    if svc.embedded:
        # Alive but silent is usually busy (a long generation, all connections taken): give it time
        # before `up` restarts it, so one slow notebook never gets its server killed by another.
        checks = {"postgres": pgembedded.answers, "model server": modelembedded.answers}
        url = svc.url
        if svc.pid and url and _wait_until(lambda: checks[svc.name](url), BUSY_GRACE):
            return url
        return None
    how = f"`{_up_hint(settings)}`" if settings.stack == "compose" else f"that server, or unset {variable}"
    raise StackError(f"{svc.name} at {variable}={redact_url(svc.url)} does not answer. Start {how}.")


def _up_db(settings: Settings, state: dict) -> str:
    svc = _db_status(settings, state)
    url = _usable_url(svc, "DATABASE_URL", settings)
    if url:
        instance = pgembedded.running(settings.home)
        if svc.embedded and instance and state.get("postgres", {}).get("pid") != svc.pid:  # started outside `up`
            state["postgres"] = {"pid": svc.pid, "port": instance.port, "url": redact_url(url), "started_at": _now()}
        return url
    _say("starting embedded Postgres ...")
    port = _pick_port([state.get("postgres", {}).get("port"), EMBEDDED_PG_PORT], "embedded Postgres")
    try:
        instance, notes = pgembedded.start(settings.home, port, settings.db_name)
    except RuntimeError as err:
        raise StackError(f"Embedded Postgres failed to start: {err}\nTry `./run.sh down` then `./run.sh up`.") from err
    for note in notes:
        _say(note)
    url = pgembedded.database_url(settings.home, instance.port, settings.db_name)
    state["postgres"] = {"pid": instance.pid, "port": instance.port, "url": redact_url(url), "started_at": _now()}
    _say(f"Postgres is up: {redact_url(url)} (password in {settings.home / pgembedded.PASSWORD_FILE})")
    return url


def _record(home: Path, state: dict, entry: dict) -> None:
    """Write a just-spawned model server into stack.json before waiting for it (see modelembedded.start)."""
    state["modelserver"] = entry
    _write_state(home, state)


def _up_model(settings: Settings, state: dict) -> str:
    url = _usable_url(_model_status(settings, state), "OLLAMA_HOST", settings)
    if url:
        return url
    modelembedded.stop(state.get("modelserver"))  # alive but not answering, or a dead leftover
    problem = modelembedded.engines_problem()
    if problem:
        raise StackError(problem)
    from labkit.services.modelserver.weights import prepare_models

    prepare_models(progress=True)
    port = _pick_port([(state.get("modelserver") or {}).get("port"), EMBEDDED_MODEL_PORT], "model server")
    _say(f"starting the model server on 127.0.0.1:{port} (first start loads the models) ...")
    started = time.monotonic()
    try:
        state["modelserver"] = modelembedded.start(settings.home, port, START_TIMEOUT,
                                                   on_spawn=lambda entry: _record(settings.home, state, entry))
    except RuntimeError as err:
        state["modelserver"] = {"pid": None, "port": port, "url": f"http://127.0.0.1:{port}"}
        raise StackError(f"{err}\nFix the cause, then run `./run.sh up`.") from err
    url = state["modelserver"]["url"]
    _say(f"model server is up: {url} ({time.monotonic() - started:.1f} s)")
    return url


def up(with_model: bool = True) -> Settings:
    """Start whatever embedded service is down, reuse running ones; return concrete settings. Taught in 01_corpus."""
    settings = get_settings()
    with _locked(settings.home):
        state = _read_state(settings.home)
        try:
            db_url = _up_db(settings, state)
            host = _up_model(settings, state) if with_model else settings.ollama_host
        finally:
            _write_state(settings.home, state)
    return replace(settings, database_url=db_url, ollama_host=host)


def ensure_stack(start: bool = True) -> Settings:
    """Settings with concrete service addresses, starting the stack when needed. Taught in 01_corpus."""
    settings = get_settings()
    current = _probe(settings)
    if current.ok and current.db.url and current.model.url:
        return settings.with_services(current.db.url, current.model.url)
    if not start:
        down_parts = "; ".join(f"{s.name} is down ({s.detail})" for s in (current.db, current.model) if not s.up)
        raise StackError(f"{down_parts}. Run `{_up_hint(settings)}`; logs are in {settings.home / 'logs'}.")
    return up()


# --- stopping and status ---------------------------------------------------------------------

def down() -> None:
    """Stop the embedded services (external ones are left alone); data stays. Taught in 01_corpus."""
    settings = get_settings()
    with _locked(settings.home):
        state = _read_state(settings.home)
        if modelembedded.stop(state.get("modelserver")):
            _say("model server stopped")
        if pgembedded.stop(settings.home):
            _say("Postgres stopped")
        for entry in (state.get("postgres"), state.get("modelserver")):
            if entry:
                entry["pid"] = None
        _write_state(settings.home, state)


def status(echo: bool = True) -> StackStatus:
    """Check both services now; print ``KEY=value`` lines and ``# notes`` when `echo`. Taught in 01_corpus."""
    current = _probe(get_settings())
    if echo:
        print(current)
    return current
