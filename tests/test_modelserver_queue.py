"""The model server's fair chat queue, end to end: a private real server, real generations, labkit's own client.

One student fires many chat requests, another asks once: the one request is answered second,
not last. The queue's depth is visible at GET /api/labkit/queue and in the log, a full queue is
Ollama's 503 "server busy" (OLLAMA_MAX_QUEUE), and a request whose client went away leaves the
queue without being generated. The figures (who waited how long) are printed, never asserted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import httpx
import ollama
import pytest

from labkit.services.modelserver.app import VERSION
from labkit.services.pgembedded import free_port
from labkit.services.setup import model_client

pytestmark = pytest.mark.services

SMALL = "qwen2.5-coder:0.5b"  # the faster chat model: the queue, not the model, is under test
EMBED = "multilingual-e5-small:q4"
SHORT = {"temperature": 0, "seed": 1, "num_predict": 8}
LONG = {"temperature": 0, "seed": 1, "num_predict": 256}  # holds the turn while the others queue
MAX_QUEUE = 6
WAIT = 120.0  # seconds any step may take before the test gives up (a hang guard, not a timing)


def _until(condition, what: str, seconds: float = WAIT) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A private model server with OLLAMA_MAX_QUEUE=6, its log in a file; the small model loaded."""
    log = tmp_path_factory.mktemp("queue") / "modelserver.log"
    port = free_port()
    host = f"http://127.0.0.1:{port}"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "labkit.services.modelserver", "--port", str(port)], stdout=out,
                                stderr=subprocess.STDOUT, env=dict(os.environ, OLLAMA_MAX_QUEUE=str(MAX_QUEUE)))

    def answers() -> bool:
        assert proc.poll() is None, f"the model server exited:\n{log.read_text()[-2000:]}"
        try:
            return httpx.get(f"{host}/api/version", timeout=5).json().get("version") == VERSION
        except httpx.HTTPError:
            return False

    try:
        _until(answers, "the private model server")
        warm = model_client(host, client="warm-up")
        warm.chat(model=SMALL, messages=[{"role": "user", "content": "hi"}], options=SHORT)
        warm.embed(model=EMBED, input="query: прогрев")
        yield host, log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _queue(host: str) -> dict:
    return httpx.get(f"{host}/api/labkit/queue", timeout=10).json()


def test_one_request_of_one_student_is_not_starved_by_many_of_another(server):
    host, log = server
    finished: list[tuple[str, float]] = []
    started = time.monotonic()

    def ask(client: str, name: str, options: dict, prompt: str = "Скажи одно слово.") -> None:
        reply = model_client(host, client=client).chat(model=SMALL, messages=[{"role": "user", "content": prompt}],
                                                        options=options)
        assert reply.done
        finished.append((name, time.monotonic() - started))

    threads = [threading.Thread(target=ask, args=("alice", "A1", LONG, "Перечисли числа от 1 до 300 через запятую."))]
    threads[0].start()
    _until(lambda: [r["client"] for r in _queue(host)["running"]] == ["alice"], "alice's first request to run")
    for i in range(2, 7):
        threads.append(threading.Thread(target=ask, args=("alice", f"A{i}", SHORT)))
        threads[-1].start()
        _until(lambda i=i: _queue(host)["waiting"].get("alice") == i - 1, f"A{i} to queue")

    # a client that gives up while waiting (a timeout, an interrupted kernel) leaves without a generation
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{host}/api/chat", timeout=httpx.Timeout(1.5, connect=5), headers={"X-Labkit-Client": "ghost"},
                   json={"model": SMALL, "messages": [{"role": "user", "content": "?"}], "stream": False})
    _until(lambda: "ghost" not in _queue(host)["waiting"], "the abandoned request to leave the queue", 15)

    threads.append(threading.Thread(target=ask, args=("bob", "B1", SHORT)))
    threads[-1].start()
    _until(lambda: _queue(host)["depth"] == MAX_QUEUE, "bob's request to queue")
    queue = _queue(host)
    assert queue["waiting"] == {"bob": 1, "alice": 5}  # in turn order: bob's comes next
    assert list(queue["waiting"]) == ["bob", "alice"] and queue["max_queue"] == MAX_QUEUE
    assert queue["running"][0]["client"] == "alice" and queue["running"][0]["model"] == SMALL

    with pytest.raises(ollama.ResponseError) as full:  # Ollama's answer to a full queue
        model_client(host, client="carol").chat(model=SMALL, messages=[{"role": "user", "content": "?"}], options=SHORT)
    assert full.value.status_code == 503 and "server busy" in full.value.error

    for thread in threads:
        thread.join(WAIT)
    order = [name for name, _ in finished]
    assert sorted(order) == ["A1", "A2", "A3", "A4", "A5", "A6", "B1"]
    assert order.index("B1") == 1, order  # first come, first served would have answered bob last
    after = _queue(host)
    assert after["depth"] == 0 and not after["running"]
    assert after["served"] == 1 + 7  # the warm-up and the seven answered: the ghost never got a turn
    text = log.read_text()
    assert "chat queue: bob waits; 6 waiting (bob 1, alice 5); running: alice" in text
    assert "chat queue full, carol refused (503); 6 waiting" in text
    assert "for ghost" not in text  # no generation was logged for it
    waited = dict(finished)
    print(f"\n[queue] bob's one request answered after {waited['B1']:.1f} s, second of 7; "
          f"alice's last of six after {max(t for n, t in finished if n.startswith('A')):.1f} s")


def test_the_queue_endpoint_is_plain_json_and_refuses_other_methods(server):
    host, _ = server
    idle = _queue(host)
    assert {"depth", "waiting", "running", "parallel", "max_queue", "served", "oldest_wait_seconds"} <= set(idle)
    assert idle["parallel"] == 1 and idle["depth"] == 0
    refused = httpx.post(f"{host}/api/labkit/queue", json={}, timeout=10)
    assert refused.status_code == 405 and refused.headers["Allow"] == "GET"


def test_embeddings_do_not_wait_in_the_chat_queue(server):
    host, _ = server
    long_chat = threading.Thread(target=lambda: model_client(host, client="alice").chat(
        model=SMALL, messages=[{"role": "user", "content": "Перечисли числа от 1 до 300 через запятую."}],
        options=LONG))
    long_chat.start()
    try:
        _until(lambda: bool(_queue(host)["running"]), "the chat to run")
        vectors = model_client(host, client="bob").embed(model=EMBED, input="query: золото")
        assert len(vectors.embeddings[0]) == 384
        assert _queue(host)["running"], "the embedding was answered while the chat still held its turn"
    finally:
        long_chat.join(WAIT)

