"""The one-command stack against real services: embedded Postgres + pgvector and the model server.

The first tests use the shared session stack and never stop it. The destructive ones (down/up,
killed processes, taken ports) run last, on a second stack in a temporary LABKIT_HOME.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import psutil
import psycopg
import pytest
from psycopg import sql

import labkit as lk
from labkit.services import stack

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parent.parent


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "labkit", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600)


def _state(home: Path) -> dict:
    return json.loads((home / "stack.json").read_text())


# --- shared stack: read-only checks -------------------------------------------------------------

def test_postgres_has_pgvector_0_8(settings):
    with psycopg.connect(settings.database_url) as conn:
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        server = conn.execute("SHOW server_version_num").fetchone()[0]
    assert tuple(int(x) for x in version.split(".")[:2]) >= (0, 8), version
    assert int(server) >= 160000


def test_russian_full_text_search(settings):
    with psycopg.connect(settings.database_url) as conn:
        query = "SELECT tsvector_to_array(to_tsvector('russian', %s))"
        lexemes = conn.execute(query, ("Цена золота",)).fetchone()[0]
    assert set(lexemes) == {"цен", "золот"}


def test_services_listen_on_loopback(settings):
    assert "@127.0.0.1:" in settings.database_url
    assert settings.ollama_host.startswith("http://127.0.0.1:")


def test_status_prints_sourceable_lines(settings):
    result = _cli("status")
    assert result.returncode == 0, result.stdout + result.stderr
    pairs = dict(line.split("=", 1) for line in result.stdout.splitlines() if line and not line.startswith("#"))
    assert pairs == {"DATABASE_URL": settings.database_url, "OLLAMA_HOST": settings.ollama_host}
    sourced = subprocess.run(["bash", "-c", 'eval "$1"; echo "$DATABASE_URL|$OLLAMA_HOST"', "_", result.stdout],
                             capture_output=True, text=True, check=True)
    assert sourced.stdout.strip() == f"{settings.database_url}|{settings.ollama_host}"


def test_up_twice_reuses_running_services(settings):
    if settings.stack != "embedded" or os.environ.get("DATABASE_URL"):
        pytest.skip("reuse of embedded processes: only meaningful for the embedded stack")
    before = _state(settings.home)
    first, second = lk.up(), lk.up()
    after = _state(settings.home)
    assert first == second == lk.ensure_stack()
    assert first.database_url == settings.database_url
    assert after["postgres"]["pid"] == before["postgres"]["pid"]
    assert after["modelserver"]["pid"] == before["modelserver"]["pid"]


def test_cli_help_and_unknown_command():
    assert _cli("--help").returncode == 0
    unknown = _cli("no-such-command")
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr


def test_external_database_that_does_not_answer(monkeypatch):
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("DATABASE_URL", f"postgresql://nobody@127.0.0.1:{port}/nothing")
    with pytest.raises(lk.StackError, match="DATABASE_URL=.* does not answer"):
        lk.ensure_stack()


# --- a second stack in a temporary home: destructive checks -------------------------------------

@pytest.fixture(scope="module")
def isolated_home(settings):
    """LABKIT_HOME pointing at a fresh folder (models linked from the shared home); stopped and removed at the end.

    It sits beside the shared home, not in pytest's private tmp folder: as root the embedded
    Postgres runs as another OS user, which must be able to pass through every folder above it.
    """
    home = Path(tempfile.mkdtemp(prefix="labkit-test-", dir=settings.home.parent))
    if (settings.home / "models").is_dir():
        (home / "models").symlink_to(settings.home / "models", target_is_directory=True)
    saved = {key: os.environ.get(key) for key in ("LABKIT_HOME", "DATABASE_URL", "OLLAMA_HOST", "LAB_STACK")}
    for key in saved:
        os.environ.pop(key, None)
    os.environ["LABKIT_HOME"] = str(home)
    try:
        yield home
    finally:
        stack.down()
        shutil.rmtree(home, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _listener() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def _write_note(url: str, table: str, note: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} (note text)").format(sql.Identifier(table)))
        conn.execute(sql.SQL("INSERT INTO {} VALUES (%s)").format(sql.Identifier(table)), (note,))


def _notes(url: str, table: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [row[0] for row in conn.execute(sql.SQL("SELECT note FROM {}").format(sql.Identifier(table)))]


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def _kill(pid: int) -> None:
    """SIGKILL, as a crash or the OOM killer would, and wait until the process is gone."""
    proc = psutil.Process(pid)
    proc.kill()
    psutil.wait_procs([proc], timeout=10)


def test_taken_default_ports_are_avoided(isolated_home, monkeypatch, capfd):
    pg_blocker, model_blocker = _listener(), _listener()
    with pg_blocker, model_blocker:
        taken_pg, taken_model = pg_blocker.getsockname()[1], model_blocker.getsockname()[1]
        monkeypatch.setattr(stack, "EMBEDDED_PG_PORT", taken_pg)
        monkeypatch.setattr(stack, "EMBEDDED_MODEL_PORT", taken_model)
        settings = lk.ensure_stack()
    messages = capfd.readouterr().err
    assert settings.home == isolated_home
    assert _port(settings.database_url) != taken_pg
    assert _port(settings.ollama_host) != taken_model
    assert f"port {taken_pg} for the embedded Postgres is taken" in messages
    assert f"port {taken_model} for the model server is taken" in messages
    assert lk.status(echo=False).ok


def test_data_survives_down_and_up(isolated_home):
    settings = lk.ensure_stack()
    _write_note(settings.database_url, "survivor", "переживёт перезапуск")
    lk.down()
    after_down = lk.status(echo=False)
    assert not after_down.db.up and not after_down.model.up
    assert _cli("status").returncode == 1
    with pytest.raises(lk.StackError, match=r"\./run\.sh up"):
        lk.ensure_stack(start=False)
    again = lk.up()
    assert again.database_url == settings.database_url  # same port as before
    assert "переживёт перезапуск" in _notes(again.database_url, "survivor")


def test_concurrent_starts_start_once(isolated_home):
    lk.down()
    code = "import labkit as lk; s = lk.ensure_stack(); print(s.database_url, s.ollama_host)"
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outputs = [proc.communicate(timeout=600) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    assert outputs[0][0] == outputs[1][0]  # both got the same addresses
    starts = sum(err.count("starting the model server") for _out, err in outputs)
    assert starts == 1, outputs


def test_killed_model_server_is_reported_down_and_restarted(isolated_home):
    lk.ensure_stack()
    before = _state(isolated_home)
    _kill(before["modelserver"]["pid"])
    current = lk.status(echo=False)
    assert current.db.up and not current.model.up
    assert f"pid {before['modelserver']['pid']} gone" in current.model.detail
    lk.up()
    after = _state(isolated_home)
    assert after["modelserver"]["pid"] != before["modelserver"]["pid"]
    assert after["postgres"]["pid"] == before["postgres"]["pid"]  # only what was down restarts
    assert lk.status(echo=False).ok


def test_frozen_model_server_gets_a_grace_period_then_a_restart(isolated_home, monkeypatch):
    lk.ensure_stack()
    pid = _state(isolated_home)["modelserver"]["pid"]
    os.kill(pid, signal.SIGSTOP)  # alive but silent, as a server stuck in a long request looks
    try:
        frozen = lk.status(echo=False).model
        assert not frozen.up and frozen.pid == pid and "does not answer" in frozen.detail
        threading.Timer(2.0, os.kill, (pid, signal.SIGCONT)).start()  # it recovers within the grace period
        lk.up()
        assert _state(isolated_home)["modelserver"]["pid"] == pid  # reused, not killed
        os.kill(pid, signal.SIGSTOP)  # this time it stays silent
        monkeypatch.setattr(stack, "BUSY_GRACE", 1.0)
        lk.up()
        assert _state(isolated_home)["modelserver"]["pid"] != pid
        assert not psutil.pid_exists(pid) and lk.status(echo=False).ok
    finally:
        if psutil.pid_exists(pid):
            os.kill(pid, signal.SIGCONT)


def test_killed_postgres_leaves_stale_state_that_up_cleans(isolated_home):
    settings = lk.ensure_stack()
    _write_note(settings.database_url, "crash_survivor", "записано до сбоя")
    pid = _state(isolated_home)["postgres"]["pid"]
    _kill(pid)
    assert (isolated_home / "pgdata" / "postmaster.pid").exists()  # the stale lock file of a killed server
    current = lk.status(echo=False)
    assert not current.db.up and current.model.up
    lk.up()
    assert lk.status(echo=False).ok
    assert _state(isolated_home)["postgres"]["pid"] != pid
    assert "записано до сбоя" in _notes(settings.database_url, "crash_survivor")
