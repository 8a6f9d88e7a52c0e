"""Nothing waits forever: locks give up naming their holder, model requests time out, commands fail loudly.

Real Postgres and the real model server where a test is marked ``services``. The one stand-in
is ``frozen_server``: a socket that listens and never answers, i.e. what a stopped (SIGSTOP)
model server looks like from outside; the shared server cannot be frozen on demand.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys

import httpx
import pytest
from psycopg.conninfo import make_conninfo

import labkit as lk
from labkit.cli import main as cli_main
from labkit.cli.bench import MAX_QUERIES, memory_needed, memory_problem
from labkit.models.availability import ModelServerUnavailable, check_models
from labkit.services.modelembedded import create_time
from labkit.services.setup import MODEL_TIMEOUT, PROBE_TIMEOUT, model_client
from labkit.store.connection import application_name
from labkit.store.locks import LATENT_LOCK, LockBusy, advisory_lock, advisory_xact_lock, lock_holders

KEY = 0x7A11_0C0D_E5_0001  # a key of these tests only, with bits in both 32-bit halves


@pytest.fixture()
def frozen_server():
    """A STAND-IN for a stopped model server: the kernel accepts connections, nobody ever reads or answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- advisory locks ------------------------------------------------------------------------------------

@pytest.mark.services
@pytest.mark.parametrize("key", [KEY, -KEY, 7])
def test_a_held_lock_is_refused_after_the_wait_with_its_holder_named(settings, key):
    with lk.connect(settings) as holder, lk.connect(settings) as waiter:
        holder_pid = holder.info.backend_pid
        with advisory_lock(holder, key):
            holders = lock_holders(waiter, key)
            with pytest.raises(LockBusy) as caught:
                with advisory_lock(waiter, key, wait_seconds=0.2):
                    pass
        assert lock_holders(waiter, key) == [], "released at the end of the block"
        with advisory_lock(waiter, key, wait_seconds=0.2):  # free now: taken at once
            assert len(lock_holders(holder, key)) == 1
    assert len(holders) == 1 and holders[0].startswith(f"pid {holder_pid} ")
    message = str(caught.value)
    assert holders[0] in message and "\n" not in message
    assert f"labkit {os.getpid()} " in message, "the holder's application_name says which process it is"


@pytest.mark.services
def test_a_transaction_lock_is_bounded_too_and_ends_with_its_transaction(settings):
    with lk.connect(settings) as holder, lk.connect(settings) as waiter:
        with holder.transaction():
            advisory_xact_lock(holder, KEY)
            with pytest.raises(LockBusy, match=f"held by pid {holder.info.backend_pid} "), waiter.transaction():
                advisory_xact_lock(waiter, KEY, wait_seconds=0.2)
        with waiter.transaction():  # the holder's transaction ended: free
            advisory_xact_lock(waiter, KEY, wait_seconds=0.2)
    with pytest.raises(LockBusy, match="encoding the latent terms"), lk.connect(settings) as holder:
        with advisory_lock(holder, LATENT_LOCK), lk.connect(settings) as waiter, waiter.transaction():
            advisory_xact_lock(waiter, LATENT_LOCK, wait_seconds=0.2)


@pytest.mark.services
def test_the_labs_connections_carry_an_application_name(settings, lab_ro):
    assert lab_ro.conn.execute("SHOW application_name").fetchone()[0] == application_name()
    assert application_name().startswith(f"labkit {os.getpid()} pytest")
    agent = lk.Agent(lab_ro)
    try:
        assert agent.checkpointer.conn.execute("SHOW application_name").fetchone()["application_name"] == \
            application_name()
    finally:
        agent.close()
    named = dataclasses.replace(settings, database_url=make_conninfo(settings.database_url, application_name="mine"))
    with lk.connect(named) as conn:
        assert conn.execute("SHOW application_name").fetchone()[0] == "mine", "an explicit name is kept"


def test_application_name_of_the_command_line(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/x/labkit/__main__.py", "ask", "Q"])  # what `python -m labkit ask` sees
    assert application_name() == f"labkit {os.getpid()} labkit ask"


# --- model server requests -------------------------------------------------------------------------------

def test_a_refused_model_server_is_one_clear_error():
    settings = dataclasses.replace(lk.get_settings(), ollama_host=f"http://127.0.0.1:{_closed_port()}")
    with pytest.raises(ModelServerUnavailable, match=r"did not answer \(ConnectionError.*`./run.sh up`"):
        check_models(model_client(settings.ollama_host, PROBE_TIMEOUT), settings)


def test_a_frozen_model_server_is_given_up_on_after_the_timeout(frozen_server):
    settings = dataclasses.replace(lk.get_settings(), ollama_host=frozen_server)
    with pytest.raises(ModelServerUnavailable, match=rf"{frozen_server} did not answer \(ReadTimeout"):
        check_models(model_client(frozen_server, httpx.Timeout(0.5)), settings)


@pytest.mark.services
def test_the_labs_model_clients_have_timeouts(settings, lab_ro):
    timeout = lab_ro.models._client.timeout  # the httpx client inside ollama.Client
    assert timeout == MODEL_TIMEOUT and timeout.read is not None and timeout.connect is not None
    assert timeout.connect <= 10 < timeout.read, "a dead server is found fast, a slow answer is awaited"
    assert PROBE_TIMEOUT.read is not None and PROBE_TIMEOUT.read < timeout.read


@pytest.mark.services
def test_a_model_server_that_stops_answering_mid_question_ends_the_turn_honestly(lab_ro, frozen_server):
    frozen = model_client(frozen_server, httpx.Timeout(0.5))
    agent = lk.Agent(lab_ro, chat=frozen.chat)
    try:
        result = agent.ask("Сколько новостей про спорт в базе?")
    finally:
        agent.close()
    assert result.requires_human and "ReadTimeout" in result.model_error and result.tool_calls == []


# --- the command line -------------------------------------------------------------------------------------

@pytest.mark.services
@pytest.mark.parametrize(("model", "needle"), [("nope", "`ollama pull nope`"),
                                               ("multilingual-e5-small:q4", "cannot do tools")])
def test_ask_with_a_model_it_cannot_use_exits_1_with_one_line(capsys, model, needle):
    assert cli_main(["ask", "--model", model, "Сколько новостей про спорт?"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("labkit ask: error:") and err.count("\n") == 1
    assert needle in err and "Traceback" not in err


def test_bench_queries_are_bounded(capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["bench", "--queries", str(MAX_QUERIES + 1)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and f"--queries in [1, {MAX_QUERIES}]" in err and err.count("\n") == 1


def test_bench_size_is_bounded_by_the_memory_it_needs():
    assert memory_needed(1_000_000) == 4 * 1_000_000 * 384 * 4
    assert memory_problem(1_000_000, available=memory_needed(1_000_000)) is None
    problem = memory_problem(5_000_000, available=16 * 10**9)
    assert problem is not None and "30.7 GB" in problem and "16.0 GB" in problem
    assert f"use --size {16 * 10**9 // memory_needed(1)} or less" in problem


# --- processes ---------------------------------------------------------------------------------------------

def test_create_time_of_a_process_that_is_gone_is_zero_not_an_exception():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # exited and reaped: psutil.Process(pid) would raise NoSuchProcess
    assert create_time(child.pid) == 0.0
    assert create_time(os.getpid()) > 0


def test_psycopg_connections_of_the_lab_have_a_connect_timeout():
    from labkit.store.connection import CONNECT_TIMEOUT, connection_options

    options = connection_options("postgresql://u@127.0.0.1:1/lab")
    assert options["connect_timeout"] == CONNECT_TIMEOUT and options["application_name"] == application_name()
    assert "application_name" not in connection_options("postgresql://u@h/lab?application_name=x")


def test_the_stack_lock_is_given_up_on_after_the_wait_naming_its_holder(tmp_path):
    """Another `up` holds stack.lock (a child process here): this one gives up with its pid, then gets it once freed."""
    from labkit.services.stack import StackError, _locked

    home = tmp_path / "home"
    with _locked(home, wait_seconds=1):
        pass  # creates the home and the lock file
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        f"f = open({str(home / 'stack.lock')!r}, 'a+'); fcntl.flock(f, fcntl.LOCK_EX)\n"
        "f.seek(0); f.truncate(); f.write(str(os.getpid())); f.flush(); print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(StackError, match=rf"pid {holder.pid}\) has held .*stack.lock for over 1 s"):
            with _locked(home, wait_seconds=1):
                pytest.fail("the lock was taken while another process held it")
    finally:
        holder.kill()
        holder.wait()
    with _locked(home, wait_seconds=5):
        assert (home / "stack.lock").read_text() == str(os.getpid())
