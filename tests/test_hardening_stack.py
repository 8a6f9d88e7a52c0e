"""The stack on a shared machine: a private lab home, a Postgres only the lab's user can enter,
no token on a command line, Ctrl-C during `up`, saturation that is reported and never restarted.

Every test runs the real embedded Postgres (and, for Ctrl-C, the real model server) in a fresh
home of its own, except the intrusion test, which attacks the lab's running stack.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import psycopg
import pytest

from labkit.core.settings import Settings, redact_url
from labkit.services import pgembedded
from labkit.services.home import HomeError, ensure_home, read_secret
from labkit.services.stack import ServiceStatus, StackStatus

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[1]
AS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not AS_ROOT, reason="needs root to act as a second OS user (CI runs as root)")


@pytest.fixture()
def fresh_home() -> Iterator[Path]:
    """An empty lab home path (not created yet) beside the shared one; its Postgres is stopped at the end."""
    parent = Path(tempfile.mkdtemp(prefix="labkit-hard-", dir="/var/lib" if AS_ROOT else None))
    parent.chmod(0o755)
    home = parent / "home"
    try:
        yield home
    finally:
        with contextlib.suppress(Exception):
            pgembedded.stop(home)
        _stop_model_servers_of(home)
        shutil.rmtree(parent, ignore_errors=True)


def _stop_model_servers_of(home: Path) -> None:
    for proc in _processes_of(home):
        with contextlib.suppress(psutil.Error):
            proc.kill()


def _processes_of(home: Path) -> list[psutil.Process]:
    """Live processes that belong to the lab home `home`: its postgres (cwd) and its model server (env)."""
    found = []
    for proc in psutil.process_iter(["name"]):
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.info["name"] == "postgres" and Path(proc.cwd()).is_relative_to(home):
                found.append(proc)
            elif proc.info["name"].startswith("python") and proc.environ().get("LABKIT_HOME") == str(home) \
                    and "labkit.services.modelserver" in " ".join(proc.cmdline()):
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def _as_user(name: str, action: Callable[[], str]) -> str:
    """Run `action` in a forked child that has become the OS user `name` (no groups of ours); its result."""
    entry = pwd.getpwnam(name)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to the other account, then try
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(entry.pw_gid)
            os.setuid(entry.pw_uid)
            result = action()
        except BaseException as err:  # noqa: BLE001 - everything goes back to the parent as text
            result = f"child error: {type(err).__name__}: {err}"
        os.write(write_end, result.encode())
        os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode()


def _second_user() -> str:
    """A local account that is not ours (created once; `nobody` would do, but may own things)."""
    name = "labkit-other"
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    return name


# --- 1. the lab home ---------------------------------------------------------------------------

def test_a_new_home_is_private(fresh_home):
    home = ensure_home(fresh_home)
    info = os.stat(home)
    assert info.st_uid == os.geteuid()
    assert stat.S_IMODE(info.st_mode) & 0o067 == 0  # nobody else may read or write; as root the server may pass
    if AS_ROOT:
        assert stat.S_IMODE(info.st_mode) == 0o710 and info.st_gid == pwd.getpwnam("pgserver").pw_gid


def test_an_open_home_of_ours_is_closed(fresh_home):
    fresh_home.mkdir(mode=0o777)
    fresh_home.chmod(0o777)
    ensure_home(fresh_home)
    assert stat.S_IMODE(os.stat(fresh_home).st_mode) & 0o007 == 0


def test_a_home_that_is_a_symlink_is_refused(fresh_home):
    target = fresh_home.parent / "elsewhere"  # ours, so only the link itself is wrong
    target.mkdir(mode=0o755)
    target.chmod(0o755)
    fresh_home.symlink_to(target, target_is_directory=True)
    with pytest.raises(HomeError, match="symlink"):
        ensure_home(fresh_home)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o755  # the target was not touched


@needs_root
def test_a_home_owned_by_someone_else_is_refused(fresh_home):
    fresh_home.mkdir(mode=0o755)
    other = pwd.getpwnam(_second_user())
    os.chown(fresh_home, other.pw_uid, other.pw_gid)
    with pytest.raises(HomeError, match="belongs to uid"):
        ensure_home(fresh_home)
    assert os.stat(fresh_home).st_uid == other.pw_uid


def test_a_home_given_as_a_relative_symlink_path_is_not_resolved(fresh_home, monkeypatch):
    target = fresh_home.parent / "real"
    target.mkdir()
    fresh_home.symlink_to(target, target_is_directory=True)
    monkeypatch.setenv("LABKIT_HOME", str(fresh_home))
    from labkit.core.settings import lab_home

    assert lab_home() == fresh_home  # resolve() would have hidden the link from the check


def test_a_planted_log_symlink_is_refused_and_its_target_untouched(fresh_home):
    victim = fresh_home.parent / "victim.txt"
    victim.write_text("do not chown me\n")
    victim.chmod(0o644)
    before = os.stat(victim)
    ensure_home(fresh_home)
    (fresh_home / "logs").mkdir(mode=0o700)
    (fresh_home / "logs" / "postgres.log").symlink_to(victim)
    with pytest.raises(HomeError, match="not a plain file"):
        pgembedded.start(fresh_home, pgembedded.free_port())
    after = os.stat(victim)
    assert (after.st_uid, after.st_gid, after.st_mode) == (before.st_uid, before.st_gid, before.st_mode)
    assert victim.read_text() == "do not chown me\n"


@needs_root
def test_starting_as_root_changes_no_folder_outside_the_home(fresh_home):
    """Stat every parent of the home and of the wheel's binaries before and after a first start.

    The wheel's folder is made 0750 for the test: the wheel's own init would open it (and every
    folder above it) to everyone; ours copies the binaries into the home instead.
    """
    install = Path(pgembedded._pgserver().utils.POSTGRES_VERSIONS[pgembedded.PG_VERSION]).parent
    watched = sorted({*fresh_home.parents, *install.parents, install, install / "bin"})
    saved_mode = stat.S_IMODE(os.stat(install).st_mode)
    os.chmod(install, 0o750)
    try:
        before = {p: (s.st_uid, s.st_gid, s.st_mode) for p in watched if (s := os.stat(p))}
        instance, _notes = pgembedded.start(fresh_home, pgembedded.free_port())
        after = {p: (s.st_uid, s.st_gid, s.st_mode) for p in watched if (s := os.stat(p))}
    finally:
        os.chmod(install, saved_mode)
    assert instance.pid > 0
    changed = {str(p): (oct(before[p][2]), oct(after[p][2])) for p in watched if before[p] != after[p]}
    assert changed == {}


@needs_root
def test_a_home_the_server_user_cannot_reach_is_refused_with_a_reason(fresh_home):
    fresh_home.parent.chmod(0o700)
    with pytest.raises(HomeError, match="cannot pass through"):
        pgembedded.start(fresh_home, pgembedded.free_port())
    assert stat.S_IMODE(os.stat(fresh_home.parent).st_mode) == 0o700  # told, not opened


# --- 2. Postgres takes only the lab's user -----------------------------------------------------

def test_the_database_needs_the_password_kept_0600_in_the_home(settings):
    home = settings.home
    password = read_secret(home / pgembedded.PASSWORD_FILE)
    assert password and f":{password}@" in settings.database_url
    assert stat.S_IMODE(os.stat(home / pgembedded.PASSWORD_FILE).st_mode) == 0o600
    hba = (home / "pgdata" / "pg_hba.conf").read_text()
    assert re.findall(r"^\s*(?:local|host)\s.*$", hba, re.M) and "trust" not in hba.replace("# ", "")
    without = re.sub(r"//([^:@/]+):[^@]*@", r"//\1@", settings.database_url)
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(without, connect_timeout=5)


@needs_root
def test_another_local_account_cannot_connect(settings):
    """A second OS user tries every way in: TCP without and with a guessed password, the socket, the password file."""
    url = settings.database_url
    port = int(re.search(r":(\d+)/", url).group(1))  # type: ignore[union-attr]
    guessed = re.sub(r"//([^:@/]+):[^@]*@", r"//\1:guess@", url)
    anonymous = re.sub(r"//([^:@/]+):[^@]*@", r"//\1@", url)
    socket_dir = settings.home / "run"
    secret = settings.home / pgembedded.PASSWORD_FILE

    def attempt() -> str:
        outcomes = []
        for what, target in (("tcp", anonymous), ("tcp-guess", guessed),
                             ("socket", f"postgresql://postgres@/lab?host={socket_dir}&port={port}")):
            try:
                psycopg.connect(target, connect_timeout=5).close()
                outcomes.append(f"{what}: CONNECTED")
            except psycopg.Error as err:
                outcomes.append(f"{what}: refused ({' '.join(str(err).split())[:120]})")
        try:
            secret.read_text()
            outcomes.append("secret: READ")
        except OSError as err:
            outcomes.append(f"secret: refused ({err.strerror})")
        return "\n".join(outcomes)

    said = _as_user(_second_user(), attempt)
    print(said)
    assert "CONNECTED" not in said and "READ" not in said and "child error" not in said, said
    assert said.count("refused") == 4


# --- 3. the JupyterLab token -------------------------------------------------------------------

def test_jupyterlab_token_is_on_no_command_line(settings):
    proc = subprocess.Popen(["./run.sh"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=dict(os.environ, BROWSER="true"))
    try:
        token = port = None
        deadline = time.monotonic() + 120
        assert proc.stderr is not None
        while time.monotonic() < deadline and token is None:
            line = proc.stderr.readline()
            found = re.search(r"127\.0\.0\.1:(\d+)/lab\S*\?token=([0-9a-f]+)", line)
            if found:
                port, token = int(found.group(1)), found.group(2)
        assert token, "run.sh printed no JupyterLab URL"
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=5) as r:
                    assert r.status == 200
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not answer")
        with pytest.raises(urllib.error.HTTPError) as refused:  # the token is really required
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=5)
        assert refused.value.code == 403
        lines = []
        for other in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                lines.append(" ".join(other.cmdline()))
        assert not [line for line in lines if token in line]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


# --- 5. Ctrl-C during `up` ---------------------------------------------------------------------

def test_ctrl_c_at_any_point_of_up_leaves_nothing_that_down_cannot_stop(fresh_home, settings):
    """`up` in a fresh home, interrupted like a terminal does (SIGINT to its process group) at several moments."""
    models = settings.home / "models"
    ensure_home(fresh_home)
    if models.is_dir():
        (fresh_home / "models").symlink_to(models, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "OLLAMA_HOST", "LAB_STACK")}
    env["LABKIT_HOME"] = str(fresh_home)
    moments = []
    for delay in (0.5, 2.0, 4.0, 7.0, 11.0):
        # A terminal's foreground job takes SIGINT by default, even when this test runs under `cmd &`
        # (a non-interactive shell starts background jobs with SIGINT ignored, and children inherit that).
        up = subprocess.Popen([sys.executable, "-m", "labkit", "up"], cwd=ROOT, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(up.pid, signal.SIGINT)
        _out, err = up.communicate(timeout=120)
        said = [line for line in err.splitlines() if line.startswith("[labkit]")]
        moments.append((delay, up.returncode, said[-1] if said else "(nothing yet)"))
        down = subprocess.run([sys.executable, "-m", "labkit", "down"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)
        assert down.returncode == 0, down.stderr
        left = _processes_of(fresh_home)
        assert left == [], (delay, [p.cmdline() for p in left])
    print("Ctrl-C moments (delay s, exit code, last thing `up` said):", *moments, sep="\n  ")
    assert any(code != 0 for _d, code, _s in moments)  # at least one interrupt landed before `up` finished


# --- 7. saturation -----------------------------------------------------------------------------

def test_too_many_clients_is_reported_and_never_restarted(fresh_home):
    instance, _notes = pgembedded.start(fresh_home, pgembedded.free_port())
    url = pgembedded.database_url(fresh_home, instance.port, "lab")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET max_connections = 8")
    pgembedded.stop(fresh_home)
    instance, _notes = pgembedded.start(fresh_home, instance.port)
    held: list[psycopg.Connection] = []
    try:
        with pytest.raises(psycopg.OperationalError, match="too many clients"):
            for _ in range(20):
                held.append(psycopg.connect(url, autocommit=True, connect_timeout=5))
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "OLLAMA_HOST", "LAB_STACK")}
        env["LABKIT_HOME"] = str(fresh_home)
        started = time.monotonic()
        up = subprocess.run([sys.executable, "-m", "labkit", "up", "--db-only"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
        seconds = time.monotonic() - started
        status = subprocess.run([sys.executable, "-m", "labkit", "status"], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=60)
        print(f"saturated: {len(held)} sessions held; `up` answered in {seconds:.1f} s with exit code {up.returncode}")
        assert up.returncode != 0 and "too many clients" in up.stderr and "not restarted" in up.stderr, up.stderr
        assert "refuses new connections" in status.stdout
        assert pgembedded.running(fresh_home) == instance  # same postmaster: nothing was restarted
        assert all(conn.execute("SELECT 1").fetchone() == (1,) for conn in held)  # no session was killed
    finally:
        for conn in held:
            conn.close()


# --- status and logs ---------------------------------------------------------------------------

def test_status_lines_are_shell_quoted_and_logs_redacted(settings, tmp_path):
    hostile = "postgresql://u:p@127.0.0.1:1/db;touch " + str(tmp_path / "pwned")
    fake = Settings(stack="embedded", database_url=hostile, ollama_host="http://127.0.0.1:1", embed_model="e",
                    chat_model="c", alt_chat_model="a", home=tmp_path)
    text = str(StackStatus(fake, ServiceStatus("postgres", hostile, False, None, True, ""),
                           ServiceStatus("model server", "http://127.0.0.1:1", False, None, True, "")))
    sourced = subprocess.run(["bash", "-c", 'eval "$1"; printf %s "$DATABASE_URL"', "_", text],
                             capture_output=True, text=True, check=True)
    assert sourced.stdout == hostile and not (tmp_path / "pwned").exists()
    password = read_secret(settings.home / pgembedded.PASSWORD_FILE)
    assert password
    assert password not in repr(settings) and redact_url(settings.database_url) in repr(settings)
    assert password not in (settings.home / "stack.json").read_text()
    up = subprocess.run([sys.executable, "-m", "labkit", "up"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert up.returncode == 0 and password not in up.stderr and password in up.stdout  # stdout is for sourcing

