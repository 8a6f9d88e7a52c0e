"""How many students one 2-core machine serves: agent answers under load through the fair chat queue.

    .venv/bin/python bench/class_load.py [--limit 30] [--questions 2] [--max-students 8] [--host URL]

N simulated students ask the course's final agent (the one of ``./run.sh ask``) at the same time,
each one question after another with no pause, each with a client name of its own, so the model
server's fair queue (labkit/services/modelserver/fairqueue.py) takes turns across them. N grows from 1 until
the 95th percentile of the answer time passes the limit (30 s); the last N within it is the figure.
Zero think time is the worst case (everybody presses Enter together); a printed estimate says what
a pause between questions buys. Figures are printed, nothing is asserted.

A private model server is started on a free port (the shared one keeps serving the class), unless
--host names one. The last column is the machine's 1-minute load average: above the number of cores,
other work shared the CPU with the model server and the figure is lower than on a quiet machine. Postgres is the lab's (``./run.sh up``); the agent's searches and checkpoints use it.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import httpx

import labkit as lk
from labkit.agent.entity_tool import FINAL_SYSTEM, FINAL_TOOLS
from labkit.core.context import Lab
from labkit.services.modelserver.app import VERSION
from labkit.services.pgembedded import free_port
from labkit.services.setup import model_client


@contextmanager
def private_model_server() -> Iterator[str]:
    """A model server of our own (same models, same lab home) on a free port; stopped at the end."""
    port = free_port()
    host = f"http://127.0.0.1:{port}"
    log = Path(tempfile.mkstemp(prefix="class_load-", suffix=".log")[1])
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "labkit.services.modelserver", "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the model server did not start; see {log}")
            try:
                if httpx.get(f"{host}/api/version", timeout=5).json().get("version") == VERSION:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        yield host
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.unlink(missing_ok=True)


def ask_in_turn(settings: lk.Settings, name: str, questions: list[str], think: float,
                times: list[float], errors: list[str], go: threading.Barrier) -> None:
    """One student: their own connection and client name; the questions one after another."""
    lab = Lab(settings, lk.connect(settings), model_client(settings.ollama_host, client=name))
    agent = lk.Agent(lab, tools=FINAL_TOOLS, system=FINAL_SYSTEM)
    try:
        go.wait()
        for question in questions:
            started = time.monotonic()
            result = agent.ask(question)
            times.append(time.monotonic() - started)
            if result.model_error:
                errors.append(f"{name}: {result.model_error}")
            time.sleep(think)
    finally:
        agent.close()
        lab.close()


def percentile(values: list[float], share: float) -> float:
    """The `share` quantile (nearest rank) of `values`."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def run_class(settings: lk.Settings, students: int, pool: Iterator[str], per_student: int,
              think: float) -> tuple[list[float], list[str], float]:
    """N students asking at once: every answer time, the errors, the wall time."""
    times: list[float] = []
    errors: list[str] = []
    go = threading.Barrier(students)
    threads = [threading.Thread(target=ask_in_turn, args=(settings, f"student{i + 1}",
                                                          [next(pool) for _ in range(per_student)],
                                                          think, times, errors, go))
               for i in range(students)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return times, errors, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=float, default=30.0, help="seconds the 95th percentile may reach")
    parser.add_argument("--questions", type=int, default=2, help="questions per student at each N")
    parser.add_argument("--max-students", type=int, default=8)
    parser.add_argument("--think", type=float, default=0.0, help="seconds a student pauses between questions")
    parser.add_argument("--host", help="measure this model server instead of starting a private one")
    args = parser.parse_args()

    os.environ.pop("JUPYTERHUB_USER", None)
    settings = lk.ensure_stack(start=False)
    with lk.open_lab(settings, load=True):  # the corpus is there before anyone asks
        pass
    questions = [q.question for q in lk.load_agent_questions(tools=FINAL_TOOLS, split="report")]
    pool = itertools.cycle(questions)
    with private_model_server() if args.host is None else _given(args.host) as host:
        settings = replace(settings, ollama_host=host)
        run_class(settings, 1, pool, 1, 0.0)  # warm-up: load the chat model, fill the caches
        print(f"cores: {os.cpu_count()}, model {settings.chat_model}, {args.questions} questions per student, "
              f"think time {args.think:g} s, limit p95 <= {args.limit:g} s")
        print(f"{'students':>8} {'answers':>7} {'p50 s':>7} {'p95 s':>7} {'max s':>7} {'answers/min':>11} "
              f"{'p95 / p95(1)':>12} {'load avg':>8}")
        fits, single, service = 0, None, None
        for students in range(1, args.max_students + 1):
            times, errors, wall = run_class(settings, students, pool, args.questions, args.think)
            p95 = percentile(times, 0.95)
            single = single or p95
            service = service or statistics.mean(times)
            print(f"{students:>8} {len(times):>7} {statistics.median(times):>7.1f} {p95:>7.1f} {max(times):>7.1f} "
                  f"{60 * len(times) / wall:>11.1f} {p95 / single:>12.2f} {os.getloadavg()[0]:>8.1f}"
                  + (f"  errors: {errors[:2]}" if errors else ""),
                  flush=True)
            if p95 > args.limit:
                break
            fits = students
    print(f"students per {os.cpu_count()}-core machine with p95 <= {args.limit:g} s, all asking at once: {fits}")
    if service:
        for pause in (60, 300):  # utilisation below 1: students * service < pause + service
            print(f"estimate with one question per student every {pause // 60} min: about "
                  f"{int((pause + service) / service)} students before the model server is busy all the time "
                  f"(one answer alone takes {service:.1f} s)")


@contextmanager
def _given(host: str) -> Iterator[str]:
    yield lk.normalize_host(host)


if __name__ == "__main__":
    main()
