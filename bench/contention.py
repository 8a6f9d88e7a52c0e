"""What a busy neighbour costs the chat model on these cores: its reading and writing speed alone and beside one.

    ./run.sh up && .venv/bin/python bench/contention.py [--model qwen2.5-coder:1.5b] [--rounds 2]

The notebook tests run two notebooks at a time, and so does the grader with ``--jobs 2``: while one kernel
computes, the other's chat shares the two cores with it. This measures what that costs, through the
model server's Ollama API (so it measures a real Ollama the same way): each phase sends fresh prompts
(a new marker each time, so no prompt cache helps) and reads the server's own timings.

* **alone**: nothing else busy;
* **beside a busy process**: one Python process spinning on one core, as a kernel computing would;
* **beside a niced one**: the same process in its own session with its autogroup's nice at ``--nice`` (Linux
  groups a session's processes, and nice only weighs processes within one group), to see whether
  lowering the neighbour's priority gives the model its speed back.

Prints tokens per second per phase and its ratio to «alone»; nothing is asserted. Stop other work first.

Measured here (2 cores, qwen2.5-coder:1.5b, 3-4 rounds): beside a busy process the model writes at 0.46-0.52
and reads at 0.50-0.66 of its speed alone. With the neighbour's autogroup at nice 19 it reads at 0.89-0.99 and
writes at 0.63-0.71; at nice 10, 0.87 and 0.56; at nice 5, 0.78 and 0.51. Giving the notebook tests'
kernels nice 19 that way did not shorten their run, though: all 28 notebooks, two at a time from a
restarted model server, took 680 s against 592 s at nice 0, with the same 85 chats (a kernel's
neighbours are mostly Postgres and the other kernel's model calls, not a spinning process).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import labkit as lk
from labkit.core.corpora.kb import KB_DOCUMENTS
from labkit.models.chat import ask_model

SPIN = "while True:\n    sum(range(10_000))"  # one core, busy, as long as it lives
STORY = "Напиши короткий рассказ о море."  # an answer of a few dozen tokens at least


@contextmanager
def neighbour(kind: str, nice: int) -> Iterator[str]:
    """Nothing («alone»), a busy process («busy»), or a busy process of its own session at autogroup nice `nice`
    («niced»); yields what was started, in words."""
    if kind == "alone":
        yield "nothing else"
        return
    process = subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=kind == "niced")
    said = "a busy process"
    try:
        if kind == "niced":
            try:
                Path(f"/proc/{process.pid}/autogroup").write_text(str(nice))
                said = f"a busy process, its autogroup at nice {nice}"
            except OSError as exc:  # not Linux, or autogroups off
                said = f"a busy process (its autogroup could not be niced: {exc.strerror})"
        time.sleep(0.3)  # it is running before the first request
        yield said
    finally:
        process.kill()
        process.wait()


def measure(lab: lk.Lab, model: str, prompt: str) -> tuple[float, float]:
    """Generation tokens/s on a short story, and prompt tokens/s on `prompt`: both fresh, the server's timings."""
    story = ask_model(lab.models.chat, model, [{"role": "user", "content": f"[{uuid.uuid4().hex}] {STORY}"}],
                      think=False, num_predict=64)
    read = ask_model(lab.models.chat, model, [{"role": "user", "content": f"[{uuid.uuid4().hex}] {prompt}"}],
                     think=False, num_predict=1)
    return ((story.eval_tokens or 0) / max(story.timings.get("eval", 0.0), 1e-9),
            (read.prompt_tokens or 0) / max(read.timings.get("prompt", 0.0), 1e-9))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="chat model (default: the lab's)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds over the three phases (2 requests each)")
    parser.add_argument("--nice", type=int, default=19, help="the niced neighbour's autogroup nice (0-19)")
    args = parser.parse_args()
    prompt = KB_DOCUMENTS.documents()[0].text[:2000]  # about 500 tokens of the knowledge base
    speeds: dict[str, list[tuple[float, float]]] = {}
    said: dict[str, str] = {}
    with lk.setup(quiet=True, load=False) as lab:
        model = args.model or lab.chat_model
        ask_model(lab.models.chat, model, [{"role": "user", "content": "ok"}], think=False, num_predict=1)  # loaded
        for _ in range(args.rounds):  # phases interleaved, so a drift of the machine touches all of them
            for kind in ("alone", "busy", "niced"):
                with neighbour(kind, args.nice) as said[kind]:
                    speeds.setdefault(kind, []).append(measure(lab, model, prompt))
    alone = [statistics.median(v[i] for v in speeds["alone"]) for i in (0, 1)]
    print(f"{model}, median of {args.rounds} per phase")
    print(f"{'phase':8} {'writes tok/s':>12} {'x alone':>7} {'reads tok/s':>11} {'x alone':>7}  beside")
    for kind, values in speeds.items():
        write, read = (statistics.median(v[i] for v in values) for i in (0, 1))
        print(f"{kind:8} {write:12.1f} {write / alone[0]:7.2f} {read:11.1f} {read / alone[1]:7.2f}  {said[kind]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
