"""Chaos and load on the real stack, bounded in count and time, loopback only.

Each test prints its figures (``pytest -s`` shows them; the closing note quotes them): what
was served, the errors seen, rows lost (must be 0) and the time to recover. Malformed HTTP
requests to the model server are in test_modelserver_hardening.py.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import psycopg
import pytest
from nbrun import execute

import labkit as lk

pytestmark = [pytest.mark.services, pytest.mark.system]

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "chaos"
FIRST_FIVE = sorted((ROOT / "notebooks").glob("0[1-5]_*.ipynb"))
STUDENT_ID = 900_001  # a row a student inserted by hand: no lab code may touch it
QUESTIONS = [
    "Сколько новостей про спорт?", "Что пишут про цену золота?", "Есть ли негативные новости о Сбербанке?",
    "Сколько в базе новостей о финансах?", "Что известно о добыче нефти?",
]


def _plain_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "OLLAMA_HOST", "LAB_STACK")}


def _rows(url: str) -> dict[int, str]:
    with psycopg.connect(url, connect_timeout=10) as conn:
        return dict(conn.execute("SELECT id, body FROM news").fetchall())


def _plant_student_row(url: str) -> None:
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(
            "INSERT INTO news (id, body, company, tone, topic) VALUES (%s, %s, NULL, 'neutral', 'other') "
            "ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body",
            (STUDENT_ID, "Моя собственная заметка: её не должен удалить ни один ноутбук"),
        )


def _wait_for_lock_holder(url: str, proc: subprocess.Popen, seconds: float) -> int:
    """The backend pid of the first session (other than ours) seen holding an advisory lock: a load in progress."""
    deadline = time.monotonic() + seconds
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        while time.monotonic() < deadline and proc.poll() is None:
            row = conn.execute("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
                               "AND pid <> pg_backend_pid() LIMIT 1").fetchone()
            if row:
                return int(row[0])
            time.sleep(0.01)
    pytest.fail(f"no load was seen holding its lock (loader exit code {proc.poll()})")


def _state() -> dict:
    return json.loads((lk.get_settings().home / "stack.json").read_text())


def _gist(message: str) -> str:
    """A failure's first line and its last lines (a traceback's cause is at its end)."""
    head, _, rest = message.partition("\n")
    return f"{head}\n...\n{rest[-1200:]}" if rest else head


@pytest.fixture()
def corpus_rows(settings):
    """The corpus rows plus a student's row, and a check at the end that none was lost or changed."""
    lk.setup(quiet=True).close()  # the corpus is loaded
    _plant_student_row(settings.database_url)
    before = _rows(settings.database_url)
    yield before
    after = _rows(settings.database_url)
    lost = {i for i in before if i not in after or after[i] != before[i]}
    print(f"rows before {len(before)}, after {len(after)}, lost or changed {len(lost)}")
    with psycopg.connect(settings.database_url, autocommit=True, connect_timeout=10) as conn:
        conn.execute("DELETE FROM news WHERE id = %s", (STUDENT_ID,))  # other tests count the corpus rows
    assert lost == set()


def test_four_kernels_run_notebooks_01_to_05_at_once(corpus_rows):
    """Four workers, each a fresh kernel per notebook, run 01-05 in rotated order at the same time."""
    assert len(FIRST_FIVE) == 5
    failures: list[str] = []
    durations: list[float] = []
    lock = threading.Lock()

    def worker(number: int) -> None:
        order = FIRST_FIVE[number:] + FIRST_FIVE[:number]
        for path in order:
            started = time.monotonic()
            try:
                execute(path, BUILD / f"kernel{number}" / path.name)
            except BaseException as err:  # noqa: BLE001 - pytest.fail raises a BaseException; count it
                with lock:
                    failures.append(f"kernel {number}, {path.name}: {_gist(str(err))}")
            with lock:
                durations.append(time.monotonic() - started)

    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(worker, range(4)))
    wall = time.monotonic() - started
    print(f"4 kernels x notebooks 01-05: {len(durations)} executions, {len(failures)} failed, wall {wall:.0f} s, "
          f"per notebook median {statistics.median(durations):.1f} s, max {max(durations):.1f} s")
    assert failures == []


def test_twenty_agent_questions_at_once(settings):
    """20 `ask --json` processes at once against one model server: every one answers, none hangs."""
    def one(question: str) -> tuple[float, int, str, str]:
        began = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "labkit", "ask", question, "--json"], cwd=ROOT,
                              capture_output=True, text=True, timeout=900)
        return time.monotonic() - began, proc.returncode, proc.stdout, proc.stderr

    started = time.monotonic()
    with ThreadPoolExecutor(20) as pool:
        runs = list(pool.map(one, [QUESTIONS[i % len(QUESTIONS)] for i in range(20)]))
    seconds, errors, answered = [], [], 0
    for took, code, out, err in runs:
        seconds.append(took)
        if code != 0:
            errors.append(err.strip().splitlines()[-1] if err.strip() else f"exit {code}")
            continue
        result = json.loads(out)
        if result.get("requires_human"):
            errors.append(f"handed over: {result.get('answer', '')[:120]}")
        else:
            answered += 1
    wall = time.monotonic() - started
    ordered = sorted(seconds)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    print(f"20 concurrent questions: {answered} answered, {len(errors)} errors, wall {wall:.0f} s, "
          f"latency median {statistics.median(seconds):.0f} s, p95 {p95:.0f} s, max {max(seconds):.0f} s")
    for error in errors:
        print("  error:", error)
    assert answered == 20, errors


@pytest.mark.disruptive  # last in the system tier (tests/conftest.py): the others keep the server's read prompts
def test_model_server_killed_mid_question_then_up(settings):
    """The model server dies while `ask` waits for it: `ask` ends with a clear error, `up` brings it back."""
    pid = _state()["modelserver"]["pid"]
    ask = subprocess.Popen([sys.executable, "-m", "labkit", "ask", "Что пишут про цену золота?", "--json"],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)  # the planner's chat request is in flight
    killed_at = time.monotonic()
    os.killpg(pid, signal.SIGKILL)
    out, err = ask.communicate(timeout=300)
    error_after = time.monotonic() - killed_at
    said = out if ask.returncode == 0 else err
    print(f"ask after the kill: exit {ask.returncode} in {error_after:.1f} s: {said.strip()[:300]}")
    if ask.returncode == 0:  # the answer may have been ready before the kill; otherwise it must say what failed
        result = json.loads(out)
        assert result["requires_human"] or result["answer"], result
    else:
        assert "Traceback" not in err and err.strip(), err
    began = time.monotonic()
    up = subprocess.run([sys.executable, "-m", "labkit", "up"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    recovered = time.monotonic() - began
    assert up.returncode == 0, up.stderr
    again = subprocess.run([sys.executable, "-m", "labkit", "ask", "Сколько новостей про спорт?", "--json"], cwd=ROOT,
                           capture_output=True, text=True, timeout=600)
    print(f"model server killed mid-question: `up` recovered in {recovered:.1f} s; the next question: "
          f"exit {again.returncode}")
    assert again.returncode == 0 and not json.loads(again.stdout)["requires_human"], again.stderr


@pytest.mark.disruptive  # last in the system tier (tests/conftest.py): the others keep the server's read prompts
def test_postgres_killed_mid_load_then_up(settings, corpus_rows):
    """Postgres is killed while a kernel loads the corpus (its vectors are being recomputed); `up` recovers, nothing is lost."""
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        tables = [row[0] for row in conn.execute("SELECT table_name FROM vector_tables").fetchall()]
        for table in tables:  # force the loader to embed again: a load that takes a few seconds
            conn.execute(f'DELETE FROM "{table}"')  # table names come from our own catalogue
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        conn.execute("DELETE FROM embedding_cache")  # and from the cache: the loader must ask the model server
    load = subprocess.Popen([sys.executable, "-c", "import labkit as lk; lk.setup(quiet=True)"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    holder = _wait_for_lock_holder(settings.database_url, load, seconds=120)  # the loader holds its load lock
    pid = _state()["postgres"]["pid"]
    psutil.Process(pid).kill()
    killed_at = time.monotonic()
    _out, err = load.communicate(timeout=300)
    print(f"killed Postgres while session {holder} held the load lock; the load: exit {load.returncode} in {time.monotonic() - killed_at:.1f} s: "
          f"{err.strip().splitlines()[-1] if err.strip() else ''}")
    if load.returncode != 0:  # killed mid-load: the lab's error says what happened and what to do
        assert "StackError: Postgres closed the connection while the corpus was loading" in err, err
    began = time.monotonic()
    up = subprocess.run([sys.executable, "-m", "labkit", "up"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    recovered = time.monotonic() - began
    assert up.returncode == 0, up.stderr
    reload = subprocess.run([sys.executable, "-c", "import labkit as lk; lk.setup(quiet=True)"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    print(f"Postgres killed mid-load: `up` recovered in {recovered:.1f} s; the next load: exit {reload.returncode}")
    assert reload.returncode == 0, reload.stderr
